//! The job executor of a sync: one job per resource (fetch or delete), run concurrently with a
//! bounded number in flight. A fetch downloads (mirrors first, Z39.99-2014 §14.2) into a
//! temporary file capped at the published length, verifies it and hands it to the committer
//! ([`crate::commit`]); a failure is reported and kept as pending for the next run. The engine
//! that plans the jobs is the module `sync`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use resourcesync_model::{Category, Change};
use resourcesync_store::blocking::call;
use resourcesync_store::{At, PendingChange, RelPath, ResourceRecord, Store};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::commit::owner::{Claim, InFlight};
use crate::commit::{Write, is_placeholder};
use crate::error::{Error, Result};
use crate::fetch::ctx::{Ctx, STORE_DOWN_AFTER, blocking};
use crate::fetch::download::fetch;
use crate::fetch::handout::Handout;
use crate::job::{Job, JobKind, Made, Outcome, Started};
use crate::outcome::Tally;
use crate::plan::staging::StagedItem;
use crate::report::{Failed, Failure, FailureKind, Planned};

/// Runs jobs with a bounded number in flight.
///
/// Of two fetches of one run whose URIs map to one path, the one submitted first is tried and
/// the other refused while it is in flight ([`InFlight`]; after it, its row refuses it:
/// [`crate::commit::owner`]).
///
/// Jobs run at once, in no set order between resources; so with `--delete`, a copy whose path
/// is blocked by a file or directory this run may delete (a Source that turned a file `a` into a
/// directory holding `a/b`, or the other way round) is deferred: tried again once every other job
/// has ended, its deletes included ([`Exec::finish`]). Blocked then too, it fails as usual.
pub(crate) struct Exec {
    ctx: Arc<Ctx>,
    sem: Arc<Semaphore>,
    set: JoinSet<(Outcome, Option<Deferred>)>,
    tally: Tally,
    /// Whether a blocked copy is deferred (not on the second try, not without `--delete`).
    may_defer: bool,
    /// Deferred jobs, each with the claim on its path (kept: a later URI of that path is still
    /// refused).
    deferred: Vec<Deferred>,
    /// The paths of the fetches in flight.
    in_flight: InFlight,
    /// The fetches on their way to other workers, with a [`crate::share::Downloads`] port.
    handout: Option<Handout>,
    /// Whether this run counted a resource already (`crate::sync::catch_up`): its job's
    /// outcome then adds its bytes and failures only ([`Outcome::again`]).
    counted: Option<Counted>,
}

/// A deferred job and the claim on its path (see [`Exec`]).
type Deferred = (Job, Option<Claim>);
/// See [`Exec::counted_already`].
pub(crate) type Counted = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Most copies deferred in one run (see [`Exec`]): past it, a blocked copy fails at once and is
/// tried again by the next run, as any failed change.
pub(crate) const MAX_DEFERRED: usize = 100_000;

impl Exec {
    pub(crate) fn new(ctx: Arc<Ctx>, concurrency: usize) -> Self {
        let may_defer = ctx.delete && !ctx.dry_run;
        let handout = ctx
            .ports
            .downloads
            .clone()
            .filter(|_| !ctx.dry_run)
            .map(Handout::new);
        Exec {
            handout,
            ctx,
            sem: Arc::new(Semaphore::new(concurrency.max(1))),
            set: JoinSet::new(),
            tally: Tally::default(),
            may_defer,
            deferred: Vec::new(),
            in_flight: InFlight::default(),
            counted: None,
        }
    }

    /// Tells the executor which resources this run counted already (a catch-up after a
    /// baseline): each resource is counted once in a report.
    pub(crate) fn counted_already(&mut self, f: Counted) {
        self.counted = Some(f);
    }

    pub(crate) fn collect(
        &mut self,
        r: std::result::Result<(Outcome, Option<Deferred>), tokio::task::JoinError>,
    ) {
        match r {
            Ok((Outcome::Deferred, Some(deferred))) => self.deferred.push(deferred),
            Ok((o, _)) => self.tally.add(o),
            Err(e) => self.tally.add(Outcome::Failed(Failure::of(
                String::new(),
                None,
                Failed::other(format!("internal task failed: {e}")),
            ))),
        }
    }

    pub(crate) async fn submit(&mut self, job: Job) -> Result<()> {
        // A job failed in a way that stops the run (a full disk, a state write): no more.
        self.ctx.check_state()?;
        // Left out by the include/exclude patterns, whatever the job: left alone.
        let again = self.counted.as_ref().is_some_and(|f| f(&job.item.uri));
        if !self
            .ctx
            .filter
            .wants_mapped(&job.item.uri, &self.ctx.mapper)
        {
            self.done_inline(Outcome::Filtered.again_if(again));
            return Ok(());
        }
        // Handed to the workers, when the run shares its fetches (crate::share); what the
        // port gives back (this job, or a page it did not share) is done here.
        let Some(h) = self.handout.as_mut() else {
            return self.run_here(job, again).await;
        };
        for job in h.offer(&self.ctx, job).await? {
            let again = self.counted.as_ref().is_some_and(|f| f(&job.item.uri));
            self.run_here(job, again).await?;
        }
        Ok(())
    }

    /// Runs a job in this run (see [`Exec::submit`]).
    async fn run_here(&mut self, job: Job, again: bool) -> Result<()> {
        // Mapped once here, for the claim and for the job.
        let rel = self.ctx.mapper.map(&job.item.uri);
        let (job, claim) = match self.claim(job, rel.as_ref().ok()).await {
            Ok(c) => c,
            Err(o) => {
                self.done_inline(o);
                return Ok(());
            }
        };
        let permit = self
            .sem
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Task(e.to_string()))?;
        let ctx = self.ctx.clone();
        let defer = self.may_defer
            && self.deferred.len() < MAX_DEFERRED
            && matches!(job.kind, JobKind::Fetch { .. });
        // Boxed: the task keeps it while its copy waits for the batch (see [`run_at`]).
        let job = Box::new(job);
        self.set.spawn(async move {
            // Handed to the job, which lets it go once its body is downloaded and verified:
            // waiting for the batch commit does not hold a download slot.
            let mut permit = Some(permit);
            let r = run_job(&ctx, job, rel, &mut permit, defer).await;
            drop(permit);
            match r {
                Ok(o) => {
                    ctx.ports.obs.resource_done();
                    (o.again_if(again), None)
                }
                Err(job) => (Outcome::Deferred, Some((*job, claim))),
            }
        });
        while let Some(r) = self.set.try_join_next() {
            self.collect(r);
        }
        Ok(())
    }

    /// The claim of a fetch on its path (none for a delete or a URI without a path, which
    /// `run_job` reports), or, when an earlier fetch of another URI holds it, the job settled
    /// as refused ([`Error::PathTaken`]: reported, kept as pending).
    async fn claim(
        &self,
        job: Job,
        rel: Option<&RelPath>,
    ) -> std::result::Result<(Job, Option<Claim>), Outcome> {
        if !matches!(job.kind, JobKind::Fetch { .. }) {
            return Ok((job, None));
        }
        let Some(rel) = rel else {
            return Ok((job, None));
        };
        match self.in_flight.take(rel.as_str(), &job.item.uri) {
            Ok(c) => Ok((job, Some(c))),
            Err(owner) => {
                let e = Error::PathTaken {
                    uri: job.item.uri.clone(),
                    path: rel.to_string(),
                    owner,
                    owner_gone: false,
                };
                Err(settle(&self.ctx, Box::new(job), rel.clone(), Err(Failed::from(e))).await)
            }
        }
    }

    pub(crate) fn done_inline(&mut self, o: Outcome) {
        self.ctx.ports.obs.resource_done();
        self.tally.add(o);
    }

    pub(crate) async fn finish(mut self) -> Tally {
        // The fetches handed out, waited for; or, too few to share, done here.
        if let Some(mut h) = self.handout.take() {
            let waited = match h.finish(&self.ctx).await {
                Ok(back) => {
                    for job in back {
                        let uri = job.item.uri.clone();
                        if let Err(e) = self.submit(job).await {
                            self.tally
                                .add(Outcome::Failed(Failure::new(uri, None, e.to_string())));
                        }
                    }
                    // While the jobs given back run.
                    h.wait(&self.ctx).await
                }
                Err(e) => Err(e),
            };
            // The cursor must not move past fetches that may not be done.
            if let Err(e) = waited {
                self.ctx
                    .state_failed(format!("the fetches handed to the other workers: {e}"));
            }
            self.tally.shared += h.queued;
        }
        while let Some(r) = self.set.join_next().await {
            self.collect(r);
        }
        // Every other job has ended, deletes included: the deferred copies once more, for good.
        self.may_defer = false;
        for (job, claim) in std::mem::take(&mut self.deferred) {
            // Taken again by the job itself.
            drop(claim);
            let uri = job.item.uri.clone();
            if let Err(e) = self.submit(job).await {
                self.tally
                    .add(Outcome::Failed(Failure::new(uri, None, e.to_string())));
            }
        }
        while let Some(r) = self.set.join_next().await {
            self.collect(r);
        }
        self.tally
    }
}

/// Whether something at or above `rel` blocks a copy there
/// ([`resourcesync_store::Features::blocked`]: a directory at its path, or a file where one of
/// its directories goes; never in a store of flat keys).
pub(crate) fn path_blocked(store: &dyn Store, rel: &RelPath) -> bool {
    path_at(store, rel) == Some(At::Blocked)
}

/// What is at `rel` ([`resourcesync_store::Features::at`]); `None` in a store of flat keys,
/// or when the look failed (the copy's own look then says why).
fn path_at(store: &dyn Store, rel: &RelPath) -> Option<At> {
    let f = store.features();
    // The rule of resourcesync_store::blocking: in place when the store says so.
    let at = if f.in_place {
        f.at(rel)
    } else {
        call(|| f.at(rel))
    };
    at.ok().flatten()
}

/// Runs one job whose URI maps to `rel`; with `defer`, a copy whose path is blocked (see
/// [`Exec`]) is not tried but given back (`Err`), to be tried once every other job has ended.
async fn run_job(
    ctx: &Arc<Ctx>,
    job: Box<Job>,
    rel: Result<RelPath>,
    permit: &mut Option<OwnedSemaphorePermit>,
    defer: bool,
) -> std::result::Result<Outcome, Box<Job>> {
    let rel = match rel {
        Ok(r) => r,
        Err(e) => {
            return Ok(Outcome::Failed(Failure::new(
                job.item.uri.clone(),
                None,
                e.to_string(),
            )));
        }
    };
    // The same look tells a copy with nothing at its path (most of a baseline), which then
    // skips its own.
    let mut looked = None;
    if defer && matches!(job.kind, JobKind::Fetch { .. }) {
        looked = path_at(ctx.ports.store.as_ref(), &rel);
        if looked == Some(At::Blocked) {
            return Err(job);
        }
    }
    Ok(run_at(ctx, job, rel, permit, looked).await)
}

/// Runs one job whose copy goes to `rel` (see [`run_job`]); `looked`, what a look just made
/// found at `rel` ([`path_at`]).
///
/// In two steps: up to the commit queue, then the wait for the batch. The first step's future
/// is large (the HTTP exchange, the digests, the temporary file: kilobytes) and boxed, so that
/// it is freed as soon as the copy is queued: the thousands of copies waiting for their batch
/// then each hold their job and a receipt, not a finished download's state (the
/// aggregator's memory, with many Sources syncing at once, would grow with them). The job is boxed
/// for the same reason: each async frame it passes through keeps a slot of its size.
pub(crate) async fn run_at(
    ctx: &Arc<Ctx>,
    job: Box<Job>,
    rel: RelPath,
    permit: &mut Option<OwnedSemaphorePermit>,
    looked: Option<At>,
) -> Outcome {
    let res = match Box::pin(start(ctx, &job, &rel, permit, looked)).await {
        Ok(Started::Done(o)) => Ok(o),
        Ok(Started::Queued(receipt, made)) => receipt.done().await.map(|put| match made {
            Made::Created => Outcome::Created(put.length),
            Made::Updated => Outcome::Updated(put.length),
            Made::Repaired => Outcome::Repaired(put.length),
        }),
        Err(e) => Err(e),
    };
    // Boxed too: a failure's pending change waits for its batch in a frame of its own.
    Box::pin(settle(ctx, job, rel, res)).await
}

/// The first step of [`run_at`]: the job run up to the commit queue.
async fn start(
    ctx: &Arc<Ctx>,
    job: &Job,
    rel: &RelPath,
    permit: &mut Option<OwnedSemaphorePermit>,
    looked: Option<At>,
) -> std::result::Result<Started, Failed> {
    match job.kind {
        JobKind::Fetch(reason) => fetch(ctx, &job.item, rel, reason, permit, looked).await,
        JobKind::Delete => delete(ctx, &job.item, rel).await.map(Started::Done),
    }
}

/// What a job came to: a failure counted against the store, recorded as pending (tried again
/// by the next run), and stopping the run when it concerns every copy alike.
async fn settle(
    ctx: &Ctx,
    job: Box<Job>,
    rel: RelPath,
    res: std::result::Result<Outcome, Failed>,
) -> Outcome {
    let uri = job.item.uri.clone();
    match res {
        Ok(Outcome::Unchanged) if ctx.dumped_now(&uri) => Outcome::Counted,
        Ok(o) => {
            if matches!(
                o,
                Outcome::Created(_)
                    | Outcome::Updated(_)
                    | Outcome::Repaired(_)
                    | Outcome::Patched(_)
            ) {
                ctx.memo.store_failures.store(0, Ordering::Relaxed);
            }
            o
        }
        Err(mut error) => {
            if error.kind == FailureKind::Store && error.category == Category::Retry {
                let n = ctx.memo.store_failures.fetch_add(1, Ordering::Relaxed) + 1;
                if n == STORE_DOWN_AFTER {
                    ctx.state_failed(format!(
                        "the store is not answering: {n} copies in a row could not be stored \
                         (the last: {}); the run stops here and the next one resumes",
                        crate::report::about(&uri, &error.message)
                    ));
                }
            }
            // Without --delete, a copy the Source deleted stays and may block this path (a file
            // the Source turned into a directory, or back): say what clears it.
            if !ctx.delete
                && matches!(job.kind, JobKind::Fetch { .. })
                && path_blocked(ctx.ports.store.as_ref(), &rel)
            {
                error.message.push_str(
                    " (a copy kept after the Source deleted it may be in the way: `--delete` removes kept copies)",
                );
            }
            if !ctx.dry_run {
                let p = PendingChange {
                    source: ctx.key.clone(),
                    uri: uri.clone(),
                    change: job.item.change.clone().or(Some(Change::Updated)),
                    length: job.item.length,
                    hashes: job.item.hashes.clone(),
                    lastmod: job.item.lastmod,
                    duplicates: job.item.duplicates.clone(),
                    error: error.message.clone(),
                };
                let put = if crate::crashpoint::fails("pending") {
                    Err(Failed::from(resourcesync_store::Error::Io {
                        path: ctx.state_path.clone(),
                        cause: std::io::Error::from_raw_os_error(28),
                    }))
                } else {
                    ctx.ports.committer.write(vec![Write::Pending(p)]).await
                };
                if let Err(e) = put {
                    ctx.state_failed(format!(
                        "recording the failed change of {uri}: {}",
                        e.message
                    ));
                }
            }
            // A full, read-only or forbidden disk fails every copy after this one alike: the
            // run stops (exit status 2) instead of trying them all; its cursor stays.
            if error.category == Category::Stop {
                ctx.state_failed(crate::report::about(&uri, &error.message));
            }
            Outcome::Failed(Failure::of(uri, Some(rel.to_string()), error))
        }
    }
}

pub(crate) async fn delete(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
) -> std::result::Result<Outcome, Failed> {
    let prior = ctx.ports.state.resource(&item.uri)?;
    let (source, uri) = (ctx.key.clone(), item.uri.clone());
    // The Source's time of the delete: the change's `datetime`, else its `<lastmod>`.
    let when = item.ctime.or(item.lastmod);
    // Only copies the Destination made (with a row) are ever removed.
    let Some(p) = prior else {
        if !ctx.dry_run {
            let _ = ctx
                .ports
                .committer
                .write(vec![Write::Settled { source, uri }])
                .await;
        }
        return Ok(Outcome::NoCopy);
    };
    let path = RelPath::parse(&p.path).unwrap_or_else(|_| rel.clone());
    // A copy a first baseline's dump package put in place during this run, which the Source
    // deleted after the dump's snapshot (Z39.99-2014 §11.1: a Resource Dump describes the
    // snapshot of its `at`, which may be older than the Resource List): it never was a copy
    // of what the Source has, so it goes, with or without --delete, and the run leaves what a
    // baseline from the list would have. A copy that was there before the run (a later run's
    // Change Dump updated it) is kept without --delete, as any other.
    let delete = ctx.delete || (ctx.memo.first_dump && ctx.dumped_now(&item.uri));
    // The placeholder of a copy a killed run never put in place (crate::commit): nothing to
    // delete or keep, the row goes; one it put in place and that is kept (without --delete)
    // becomes a kept copy like any other (its length known: no longer a placeholder).
    let mut writes = Vec::new();
    if !ctx.dry_run && is_placeholder(&p) {
        match ctx.ports.store.head(&path)? {
            None => {
                ctx.ports
                    .committer
                    .write(vec![Write::Removed { source, uri, when }])
                    .await?;
                return Ok(Outcome::NoCopy);
            }
            Some(m) if !delete => writes.push(Write::Row(ResourceRecord {
                length: Some(m.length),
                ..p.clone()
            })),
            Some(_) => {}
        }
    }
    if ctx.dry_run {
        return Ok(Outcome::Planned(Planned {
            action: if delete { "delete" } else { "keep" },
            uri: item.uri.clone(),
            path: path.to_string(),
        }));
    }
    if delete {
        let store = ctx.ports.store.clone();
        blocking(move || Ok(store.delete(&path)?)).await?;
        // The row only once the copy is gone.
        ctx.ports
            .committer
            .write(vec![Write::Removed { source, uri, when }])
            .await?;
        Ok(Outcome::Deleted)
    } else {
        writes.push(Write::Kept { source, uri, when });
        ctx.ports.committer.write(writes).await?;
        Ok(Outcome::Kept(item.uri.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future an async fn of these arguments returns, without calling it.
    fn future_size<'a, F, Fut>(_: F) -> usize
    where
        F: FnOnce(
            &'a Arc<Ctx>,
            Box<Job>,
            Result<RelPath>,
            &'a mut Option<OwnedSemaphorePermit>,
            bool,
        ) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// What a copy waiting for its batch keeps (up to 8,192 of them per sync; see [`run_at`]):
    /// the download's state, kilobytes, when it was not boxed (2.6 KB in a debug build).
    #[test]
    fn a_job_waiting_for_its_commit_is_small() {
        let n = future_size(run_job);
        assert!(n <= 512, "run_job's future is {n} bytes");
    }
}
