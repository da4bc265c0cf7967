//! Fetches handed to other workers ([`crate::share`]), the executor's side: which jobs of a
//! run go to the port, in pages, once they are enough to be worth it. The workers' side is
//! [`crate::fetch::shared`].

use std::sync::Arc;

use crate::error::Result;
use crate::fetch::ctx::Ctx;
use crate::job::{Job, JobKind};
use crate::share::{Downloads, SharedFetch};

pub(crate) use crate::share::PAGE;

/// The jobs of a run on their way to the port: held back until they are more than the port's
/// threshold (a small run fetches them itself, as without the port), then queued a page at a
/// time, so that a run of a million fetches holds a page of them, not all. Before each page
/// the port is asked whether to share it now ([`Downloads::share_now`]: another worker is
/// alive to take part, and has taken what was queued before), at the page's first fetch and
/// again when it is full; if not, the run
/// fetches that page itself, the next [`PAGE`] fetches going straight to the run before the
/// port is asked again: a worker alone fetches as without the port (nothing held back), and
/// one that another joins mid-run queues the pages after it arrives.
#[derive(Debug)]
pub(crate) struct Handout {
    port: Arc<dyn Downloads>,
    held: Vec<Job>,
    sharing: bool,
    /// Fetches still given back to the run before the port is asked again.
    local: usize,
    /// How many were queued.
    pub(crate) queued: u64,
}

impl Handout {
    pub(crate) fn new(port: Arc<dyn Downloads>) -> Self {
        Handout {
            port,
            held: Vec::new(),
            sharing: false,
            local: 0,
            queued: 0,
        }
    }

    /// Takes a fetch job, or gives jobs back for the run to do itself: a delete, a job
    /// whose URI has no path, or a page the port did not want to share now.
    pub(crate) async fn offer(&mut self, ctx: &Ctx, job: Job) -> Result<Vec<Job>> {
        if !matches!(job.kind, JobKind::Fetch { .. }) || ctx.mapper.map(&job.item.uri).is_err() {
            return Ok(vec![job]);
        }
        if self.local > 0 {
            self.local -= 1;
            return Ok(vec![job]);
        }
        // A page starting: asked at once, so that a run alone never holds a page back (its
        // downloads would idle while the page fills); asked again when the page is full.
        if self.sharing && self.held.is_empty() && !self.port.share_now(&ctx.key).await {
            self.local = PAGE - 1;
            return Ok(vec![job]);
        }
        self.held.push(job);
        // Asked when the run turns out large enough to share (its first page may be
        // smaller), then at each page.
        let first = !self.sharing && self.held.len() > self.port.threshold();
        if first {
            self.sharing = true;
        }
        if first || (self.sharing && self.held.len() >= PAGE) {
            return self.page(ctx).await;
        }
        Ok(Vec::new())
    }

    /// The jobs held: queued if the port says so, else given back, with the next [`PAGE`].
    async fn page(&mut self, ctx: &Ctx) -> Result<Vec<Job>> {
        if self.port.share_now(&ctx.key).await {
            self.flush(ctx).await?;
            return Ok(Vec::new());
        }
        self.local = PAGE;
        Ok(std::mem::take(&mut self.held))
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

    /// At the end of the run's jobs: queues what is held, or gives it back to the run (too
    /// few to share, or the port not sharing now); then [`Handout::wait`].
    pub(crate) async fn finish(&mut self, ctx: &Ctx) -> Result<Vec<Job>> {
        if !self.sharing || self.held.is_empty() {
            return Ok(std::mem::take(&mut self.held));
        }
        self.page(ctx).await
    }

    /// Waits until no fetch of the Source is left queued, when the run was large enough to
    /// share (items an earlier run queued included, whether or not this one queued any).
    pub(crate) async fn wait(&mut self, ctx: &Ctx) -> Result<()> {
        if self.sharing {
            self.port.wait(&ctx.key).await?;
        }
        Ok(())
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
        ctime: item.ctime,
        change: item.change.clone(),
        duplicates: item.duplicates.clone(),
        listed_change: change,
        new,
        repair,
        max_bytes: ctx.max_resource_bytes,
        versions: ctx.versions,
    })
}
