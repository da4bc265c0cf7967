//! Fetches handed to other workers ([`crate::share`]), the executor's side: which jobs of a
//! run go to the port, in pages, once they are enough to be worth it. The workers' side is
//! [`crate::fetch::shared`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::job::{Job, JobKind};
use crate::share::{Downloads, SharedFetch};

pub(crate) use crate::share::PAGE;

/// The jobs of a run on their way to the port: held back until they are more than the port's
/// threshold (a small run fetches them itself, as without the port), then queued a page at a
/// time, so that a run of a million fetches holds a page of them, not all.
///
/// Each page is the port's to take or leave ([`Downloads::share_now`]: another worker is alive
/// to take part, and has room for more); a page it leaves is fetched here, the next [`PAGE`]
/// fetches going straight to the run before the next question. The run never stops for a
/// question while it has fetches to do: the next page's question is asked [`AHEAD`] fetches
/// before the page it decides, and after a page queued, at once, beside that page's insert
/// (the port counts the fetches whose insert is on its way: a question that waited for the
/// insert held the run's downloads for its round trips); a page whose answer is still on its
/// way is held (its first jobs wait, not the downloads in flight) until the answer comes, or
/// the page is full. The insert of a page queued runs beside the run, and its failure stops
/// the run at the next question or at [`Handout::finish`].
#[derive(Debug)]
pub(crate) struct Handout {
    port: Arc<dyn Downloads>,
    held: Vec<Job>,
    sharing: bool,
    /// Fetches still given back to the run before the next page.
    local: usize,
    /// The question of the next page.
    asked: Option<Question>,
    /// The inserts of the pages queued, on their way (or done, their outcome not read yet).
    inserts: Vec<JoinHandle<Result<()>>>,
    /// Fetches whose insert is on its way (told to the port with each question).
    on_the_way: Arc<AtomicU64>,
    /// The port took the page being held.
    taken: bool,
    /// How many were queued.
    pub(crate) queued: u64,
}

/// The port's answer about the next page: on its way, or come (with when).
#[derive(Debug)]
enum Question {
    OnItsWay(JoinHandle<(bool, Instant)>),
    Answered(bool, Instant),
}

impl Question {
    fn ready(&self) -> bool {
        match self {
            Question::OnItsWay(h) => h.is_finished(),
            Question::Answered(..) => true,
        }
    }

    async fn get(self) -> Result<(bool, Instant)> {
        match self {
            Question::OnItsWay(h) => h.await.map_err(|e| Error::Task(e.to_string())),
            Question::Answered(yes, at) => Ok((yes, at)),
        }
    }

    fn abort(self) {
        if let Question::OnItsWay(h) = self {
            h.abort();
        }
    }
}

/// How long an answer is good for once it came: one older is asked again when its page
/// starts (the page held meanwhile). The run may reach the page long after the question (a
/// burst of jobs given back with the page before), and the others may have taken what the
/// queue held since.
pub(crate) const FRESH: Duration = Duration::from_millis(200);

/// How many fetches before a page starts its question is asked (see [`Handout`]): enough for
/// the answer's round trip to the port's state while the run fetches them.
pub(crate) const AHEAD: usize = 256;

impl Handout {
    pub(crate) fn new(port: Arc<dyn Downloads>) -> Self {
        Handout {
            port,
            held: Vec::new(),
            sharing: false,
            local: 0,
            asked: None,
            inserts: Vec::new(),
            on_the_way: Arc::new(AtomicU64::new(0)),
            taken: false,
            queued: 0,
        }
    }

    /// Takes a fetch job, or gives jobs back for the run to do itself: a delete, a job
    /// whose URI has no path, or a page the port did not take.
    pub(crate) async fn offer(&mut self, ctx: &Ctx, job: Job) -> Result<Vec<Job>> {
        if !matches!(job.kind, JobKind::Fetch { .. }) || ctx.mapper.map(&job.item.uri).is_err() {
            return Ok(vec![job]);
        }
        if self.local > 0 {
            self.local -= 1;
            if self.local == AHEAD {
                self.ask(ctx);
            }
            return Ok(vec![job]);
        }
        self.held.push(job);
        if !self.sharing {
            // Asked once the run turns out large enough to share.
            if self.held.len() <= self.port.threshold() {
                return Ok(Vec::new());
            }
            self.sharing = true;
        }
        let full = self.held.len() >= PAGE;
        if !self.taken {
            self.ask_fresh(ctx).await;
            if !full && !self.asked.as_ref().is_some_and(Question::ready) {
                return Ok(Vec::new());
            }
            if !self.answer().await? {
                return Ok(self.give_back(ctx));
            }
            self.taken = true;
        }
        if full {
            self.flush(ctx, true);
        }
        Ok(Vec::new())
    }

    /// Asks the port about the next page, unless a question is on its way already or was
    /// answered less than [`FRESH`] ago.
    async fn ask_fresh(&mut self, ctx: &Ctx) {
        if self.asked.as_ref().is_some_and(Question::ready)
            && let Some(q) = self.asked.take()
            // A task that failed is asked again, as a stale answer is.
            && let Ok((yes, at)) = q.get().await
            && at.elapsed() < FRESH
        {
            self.asked = Some(Question::Answered(yes, at));
        }
        self.ask(ctx);
    }

    /// Asks the port about the next page, unless a question is on its way already.
    fn ask(&mut self, ctx: &Ctx) {
        if self.asked.is_none() {
            let (port, key) = (self.port.clone(), ctx.key.clone());
            let on_the_way = self.on_the_way.clone();
            let h = tokio::spawn(async move {
                // Read before the port asks: an insert done after this read is counted twice
                // at worst (one page fewer shared), never missed.
                let n = on_the_way.load(Ordering::Acquire);
                (port.share_now(&key, n).await, Instant::now())
            });
            self.asked = Some(Question::OnItsWay(h));
        }
    }

    /// The answer to the question on its way; first, the failure of an insert done, if any.
    async fn answer(&mut self) -> Result<bool> {
        let mut i = 0;
        while i < self.inserts.len() {
            if self.inserts[i].is_finished() {
                self.inserts
                    .swap_remove(i)
                    .await
                    .map_err(|e| Error::Task(e.to_string()))??;
            } else {
                i += 1;
            }
        }
        let Some(q) = self.asked.take() else {
            return Ok(false);
        };
        Ok(q.get().await?.0)
    }

    /// The page held, given back to the run with the fetches after it up to a page.
    fn give_back(&mut self, ctx: &Ctx) -> Vec<Job> {
        tracing::debug!(source = %ctx.key, "a page of fetches not shared: fetched here");
        self.local = PAGE.saturating_sub(self.held.len());
        if self.local <= AHEAD {
            self.ask(ctx);
        }
        std::mem::take(&mut self.held)
    }

    /// Queues the page held, beside the run; with `then_ask`, the next page's question is
    /// asked at once, beside the insert.
    fn flush(&mut self, ctx: &Ctx, then_ask: bool) {
        let jobs = std::mem::take(&mut self.held);
        let page: Vec<SharedFetch> = jobs.iter().filter_map(|j| handed(ctx, j)).collect();
        let n = page.len() as u64;
        self.queued += n;
        tracing::debug!(source = %ctx.key, fetches = n, "a page of fetches shared");
        self.taken = false;
        let (port, obs) = (self.port.clone(), ctx.ports.obs.clone());
        let on_the_way = self.on_the_way.clone();
        on_the_way.fetch_add(n, Ordering::AcqRel);
        self.inserts.push(tokio::spawn(async move {
            let r = port.queue(page).await;
            on_the_way.fetch_sub(n, Ordering::AcqRel);
            r?;
            for _ in 0..n {
                obs.resource_done();
            }
            Ok(())
        }));
        if then_ask {
            // The question asked before this page was its own (answered): this one is the
            // next page's.
            if let Some(q) = self.asked.take() {
                q.abort();
            }
            self.ask(ctx);
        }
    }

    /// At the end of the run's jobs: queues what is held, or gives it back to the run (too
    /// few to share, or the port not taking it now), once every page queued before is in
    /// the queue (or the first failure to queue one stops the run); then [`Handout::wait`].
    pub(crate) async fn finish(&mut self, ctx: &Ctx) -> Result<Vec<Job>> {
        if self.sharing && !self.held.is_empty() {
            if !self.taken {
                self.ask(ctx);
                self.taken = self.answer().await?;
            }
            if self.taken {
                self.flush(ctx, false);
            }
        }
        // Every page's insert is waited for (the first failure stops the run); a question
        // is not.
        if let Some(q) = self.asked.take() {
            q.abort();
        }
        for h in std::mem::take(&mut self.inserts) {
            h.await.map_err(|e| Error::Task(e.to_string()))??;
        }
        Ok(std::mem::take(&mut self.held))
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
