//! Fetches handed to other workers ([`crate::share`]), the executor's side: which jobs of a
//! run go to the port, in pages, once they are enough to be worth it. The workers' side is
//! [`crate::fetch::shared`].

use std::sync::Arc;

use crate::error::Result;
use crate::fetch::ctx::Ctx;
use crate::job::{Job, JobKind};
use crate::share::{Downloads, SharedFetch};

/// Fetches queued to the port in one call once a run shares.
pub(crate) const PAGE: usize = 1000;

/// The jobs of a run on their way to the port: held back until they are more than the port's
/// threshold (a small run fetches them itself, as without the port), then queued a page at a
/// time, so that a run of a million fetches holds a page of them, not all.
#[derive(Debug)]
pub(crate) struct Handout {
    port: Arc<dyn Downloads>,
    held: Vec<Job>,
    sharing: bool,
    /// How many were queued.
    pub(crate) queued: u64,
}

impl Handout {
    pub(crate) fn new(port: Arc<dyn Downloads>) -> Self {
        Handout {
            port,
            held: Vec::new(),
            sharing: false,
            queued: 0,
        }
    }

    /// Takes a fetch job (`None`) or gives it back for the run to do itself: a delete, a job
    /// whose URI has no path.
    pub(crate) async fn offer(&mut self, ctx: &Ctx, job: Job) -> Result<Option<Job>> {
        if !matches!(job.kind, JobKind::Fetch { .. }) || ctx.mapper.map(&job.item.uri).is_err() {
            return Ok(Some(job));
        }
        self.held.push(job);
        if !self.sharing && self.held.len() > self.port.threshold() {
            self.sharing = true;
        }
        if self.sharing && self.held.len() >= PAGE {
            self.flush(ctx).await?;
        }
        Ok(None)
    }

    async fn flush(&mut self, ctx: &Ctx) -> Result<()> {
        let jobs = std::mem::take(&mut self.held);
        let page: Vec<SharedFetch> = jobs.iter().filter_map(|j| handed(ctx, j)).collect();
        let n = page.len() as u64;
        self.port.queue(page).await?;
        self.queued += n;
        for _ in 0..n {
            ctx.ports.obs.resource_done();
        }
        Ok(())
    }

    /// At the end of the run's jobs: queues what is held and waits until no fetch of the
    /// Source is left (`Ok(vec![])`), or, not sharing, gives the jobs held back to the run.
    pub(crate) async fn finish(&mut self, ctx: &Ctx) -> Result<Vec<Job>> {
        if !self.sharing {
            return Ok(std::mem::take(&mut self.held));
        }
        if !self.held.is_empty() {
            self.flush(ctx).await?;
        }
        self.port.wait(&ctx.key).await?;
        Ok(Vec::new())
    }
}

/// The fetch of `job` as handed out (its path as this run maps it).
fn handed(ctx: &Ctx, job: &Job) -> Option<SharedFetch> {
    let JobKind::Fetch(reason) = job.kind else {
        return None;
    };
    let (change, new, repair) = reason.flags();
    let item = &job.item;
    let path = ctx.mapper.map(&item.uri).ok()?;
    Some(SharedFetch {
        source: ctx.key.clone(),
        uri: item.uri.clone(),
        path,
        length: item.length,
        hashes: item.hashes.clone(),
        lastmod: item.lastmod,
        change: item.change.clone(),
        duplicates: item.duplicates.clone(),
        listed_change: change,
        new,
        repair,
        max_bytes: ctx.max_resource_bytes,
        versions: ctx.versions,
    })
}
