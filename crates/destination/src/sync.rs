//! The sync engine (Z39.99-2014 §5.2): baseline from the Resource List, incremental from the
//! Change Lists after the cursor, and a baseline diff when the change history does not reach back
//! to the cursor.
//!
//! - **Baseline** (first run, §10.1, §10.2): the Resource List, every part of its index streamed
//!   one by one, is staged on disk, then merged with the state in URI order by the diff engine
//!   ([`resourcesync_diff::diff_sorted`]): creates and updates are fetched, deletes removed (with
//!   `--delete`) or remembered, the rest left alone. The same run then catches up from the
//!   Change Lists after the list's `at` ([`crate::catch_up`]); the cursor becomes the last
//!   change seen (else the list's `at`).
//! - **Incremental** (§12.1, §12.2): the Change List (or its index, found through `index` links)
//!   is read from the cursor on; closed lists ending at or before the cursor are skipped, entries
//!   at or before it ignored; several changes of one URI collapse to the last, and the changes
//!   are applied in the order of their last occurrence. The cursor becomes the time of the last
//!   change seen. When the history starts after the cursor (its `from` is later), or there is no
//!   Change List, the run is a baseline diff instead.
//! - Each resource is downloaded (mirrors from `duplicate` links first, §14.2) into a temporary
//!   file capped at its published length and verified (where no file is at its path yet, an
//!   unnamed one in its final directory, linked rather than renamed into place:
//!   [`FsStore::create_temp_at`]); it is then synced, renamed into place
//!   and recorded in the state with a batch of others (module `commit`), the row only after
//!   the file. A resource that fails is reported and kept as pending for the next run, which
//!   retries it. A change whose copy the state already shows as current (same digest, or same
//!   `<lastmod>`) is not fetched again, so a killed run resumes where it stopped.
//! - A first baseline applies the Resource Dump first, and `--prefer-dumps` applies Change Dump
//!   packages before the Change Lists ([`crate::dump`], §11, §13); an update with a JSON Patch
//!   link is patched rather than fetched when the copy allows it ([`crate::patch`], §14.4).
//!   A Source with dumps and no list is synced from them alone (module `dump_sync`,
//!   Z39.99-2017 §5.2).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use reqwest::header::{ETAG, LAST_MODIFIED};
use resourcesync_diff::{Action, Difference, Item, needs_update};
use resourcesync_model::{Capability, Change, Entry, Header, W3cDateTime};
use resourcesync_store::{
    DirHandles, Expect, FileMeta, FsStore, PendingChange, RelPath, ResourceRecord, SourceCursor,
    SqliteState, StateStore, Store, TempFile,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::commit::{Committer, Origin, Pending};
use crate::discover::{SourceInfo, discover};
use crate::docs::{DocFetcher, ListSink, WalkInfo, walk};
use crate::dump::DumpStats;
use crate::error::{Error, Result};
use crate::http::{Conditional, Http, body_error, header};
use crate::mapping::{UriMapper, base_url};
use crate::options::SyncOptions;
use crate::repair::{CheckCopies, next_damaged};
use crate::report::{Failure, Mode, Observer, Planned, SyncReport, push_capped};
use crate::staging::{StagedItem, Staging};

/// Everything a download task needs (also used by [`crate::dump`] and [`crate::patch`]).
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) http: Arc<Http>,
    pub(crate) store: Arc<FsStore>,
    pub(crate) state: Arc<dyn StateStore>,
    pub(crate) mapper: UriMapper,
    pub(crate) key: String,
    pub(crate) delete: bool,
    pub(crate) dry_run: bool,
    pub(crate) max_resource_bytes: u64,
    pub(crate) obs: Arc<dyn Observer>,
    /// URIs whose copy a dump package put in place during this run (Z39.99-2014 §11, §13), so
    /// that the lists read afterwards do not count them again.
    pub(crate) dumped: Option<Mutex<Staging>>,
    /// Puts downloaded copies in place and records them in batches ([`crate::commit`]).
    pub(crate) committer: Committer,
    /// The directories opened for downloads to paths where no file is yet (unnamed temporary
    /// files, [`FsStore::create_temp_at`]).
    pub(crate) dirs: Mutex<NewDirs>,
    /// The first write to the state that failed and was not the caller's to report (a failed
    /// change recorded as pending): the cursor must then not move, and the run fails.
    pub(crate) state_error: Mutex<Option<String>>,
    /// Where the state is (named by errors).
    pub(crate) state_path: PathBuf,
}

/// The directory handles of downloads to new paths, forgotten every [`NewDirs::USES`] files
/// (a handle is kept for a batch's worth of files, not for the whole run).
#[derive(Debug, Default)]
pub(crate) struct NewDirs {
    handles: DirHandles,
    uses: usize,
}

impl NewDirs {
    /// Files created with the same handles before they are opened again.
    const USES: usize = 1024;

    /// A temporary file for the body of the copy at `rel`, where no file is yet.
    fn create(&mut self, store: &FsStore, expect: Expect, rel: &RelPath) -> Result<TempFile> {
        self.uses += 1;
        if self.uses > Self::USES {
            self.handles.clear();
            self.uses = 1;
        }
        Ok(store.create_temp_at(expect, rel, &mut self.handles)?)
    }
}

impl Ctx {
    /// Keeps the first state write that failed (see [`Ctx::state_error`]).
    fn state_failed(&self, what: String) {
        tracing::error!("{what}");
        let mut e = self.state_error.lock().unwrap_or_else(|p| p.into_inner());
        e.get_or_insert(what);
    }

    /// Fails when a state write failed during the run: a change that could neither be applied
    /// nor recorded as pending would be lost if the cursor moved past it.
    pub(crate) fn check_state(&self) -> Result<()> {
        let e = self.state_error.lock().unwrap_or_else(|p| p.into_inner());
        match e.as_ref() {
            Some(message) => Err(Error::StateWrite {
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Whether a dump package put this URI's copy in place during this run.
    pub(crate) fn dumped_now(&self, uri: &str) -> bool {
        self.dumped.as_ref().is_some_and(|d| {
            d.lock()
                .ok()
                .and_then(|s| s.get(uri).ok().flatten())
                .is_some()
        })
    }
}

/// What to do with one resource.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) item: StagedItem,
    pub(crate) kind: JobKind,
}

impl Job {
    /// The removal of the copy of `uri` (the Source deleted it).
    pub(crate) fn delete(uri: String) -> Job {
        Job {
            item: StagedItem {
                uri,
                change: Some(Change::Deleted),
                ..StagedItem::default()
            },
            kind: JobKind::Delete,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    /// Fetch it. `change` is set for Change List entries: the copy is then skipped only when the
    /// state proves it current. `new`: the diff found no row of it in the state (a create of a
    /// baseline), which is then not looked up again.
    /// `repair`: the copy on disk is damaged ([`crate::repair`]): fetched whatever the state
    /// says, unconditionally.
    Fetch {
        change: bool,
        new: bool,
        repair: bool,
    },
    /// The Source deleted it.
    Delete,
}

#[derive(Debug)]
enum Outcome {
    Created(u64),
    Updated(u64),
    /// A damaged copy fetched again ([`crate::repair`]).
    Repaired(u64),
    Unchanged,
    Deleted,
    Kept(String),
    Failed(Failure),
    Planned(Planned),
    /// Already counted (a copy a dump package put in place this run).
    Counted,
    /// Updated by applying a patch (Z39.99-2014 §14.4).
    Patched(u64),
    /// Not tried yet: a file is where its directory goes, or a directory where it goes, which a
    /// delete of this run may take away (see [`Exec`]).
    Deferred,
}

#[derive(Debug, Default)]
pub(crate) struct Tally {
    created: u64,
    updated: u64,
    deleted: u64,
    kept: u64,
    unchanged: u64,
    repaired: u64,
    pub(crate) failed: u64,
    bytes: u64,
    pub(crate) failures: Vec<Failure>,
    kept_uris: Vec<String>,
    planned: Vec<Planned>,
    packages: u64,
    from_packages: u64,
    patched: u64,
}

impl Tally {
    /// Adds what dump packages did (Z39.99-2014 §11, §13).
    fn add_dumps(&mut self, d: &DumpStats) {
        // Failures only where no list fetches what the packages left out (crate::dump).
        self.failed += d.run_failed;
        for f in &d.failures {
            push_capped(&mut self.failures, f.clone());
        }
        self.created += d.created;
        self.updated += d.updated;
        self.deleted += d.deleted;
        self.unchanged += d.unchanged;
        self.bytes += d.bytes;
        self.packages += d.packages;
        self.from_packages += d.created + d.updated;
    }

    pub(crate) fn merge(&mut self, o: Tally) {
        self.created += o.created;
        self.updated += o.updated;
        self.deleted += o.deleted;
        self.kept += o.kept;
        self.unchanged += o.unchanged;
        self.repaired += o.repaired;
        self.failed += o.failed;
        self.bytes += o.bytes;
        self.packages += o.packages;
        self.from_packages += o.from_packages;
        self.patched += o.patched;
        for f in o.failures {
            push_capped(&mut self.failures, f);
        }
        for k in o.kept_uris {
            push_capped(&mut self.kept_uris, k);
        }
        for p in o.planned {
            push_capped(&mut self.planned, p);
        }
    }

    fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Created(n) => {
                self.created += 1;
                self.bytes += n;
            }
            Outcome::Updated(n) => {
                self.updated += 1;
                self.bytes += n;
            }
            Outcome::Repaired(n) => {
                self.repaired += 1;
                self.bytes += n;
            }
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Deleted => self.deleted += 1,
            Outcome::Kept(uri) => {
                self.kept += 1;
                push_capped(&mut self.kept_uris, uri);
            }
            Outcome::Failed(f) => {
                self.failed += 1;
                push_capped(&mut self.failures, f);
            }
            Outcome::Planned(p) => {
                match p.action {
                    "create" => self.created += 1,
                    "update" => self.updated += 1,
                    "delete" => self.deleted += 1,
                    _ => self.kept += 1,
                }
                push_capped(&mut self.planned, p);
            }
            Outcome::Counted | Outcome::Deferred => {}
            Outcome::Patched(n) => {
                self.updated += 1;
                self.patched += 1;
                self.bytes += n;
            }
        }
    }
}

/// Runs jobs with a bounded number in flight.
///
/// Jobs run at once, in no set order between resources; so with `--delete`, a copy whose path
/// is blocked by a file or directory this run may delete (a Source that turned a file `a` into a
/// directory holding `a/b`, or the other way round) is deferred: tried again once every other job
/// has ended, its deletes included ([`Exec::finish`]). Blocked then too, it fails as usual.
pub(crate) struct Exec {
    ctx: Arc<Ctx>,
    sem: Arc<Semaphore>,
    set: JoinSet<(Outcome, Option<Job>)>,
    tally: Tally,
    /// Whether a blocked copy is deferred (not on the second try, not without `--delete`).
    may_defer: bool,
    deferred: Vec<Job>,
}

/// Most copies deferred in one run (see [`Exec`]): past it, a blocked copy fails at once and is
/// tried again by the next run, as any failed change.
const MAX_DEFERRED: usize = 100_000;

impl Exec {
    pub(crate) fn new(ctx: Arc<Ctx>, concurrency: usize) -> Self {
        let may_defer = ctx.delete && !ctx.dry_run;
        Exec {
            ctx,
            sem: Arc::new(Semaphore::new(concurrency.max(1))),
            set: JoinSet::new(),
            tally: Tally::default(),
            may_defer,
            deferred: Vec::new(),
        }
    }

    fn collect(&mut self, r: std::result::Result<(Outcome, Option<Job>), tokio::task::JoinError>) {
        match r {
            Ok((Outcome::Deferred, Some(job))) => self.deferred.push(job),
            Ok((o, _)) => self.tally.add(o),
            Err(e) => self.tally.add(Outcome::Failed(Failure {
                uri: String::new(),
                path: None,
                error: format!("internal task failed: {e}"),
            })),
        }
    }

    pub(crate) async fn submit(&mut self, job: Job) -> Result<()> {
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
        self.set.spawn(async move {
            let again = defer.then(|| job.clone());
            // Handed to the job, which lets it go once its body is downloaded and verified:
            // waiting for the batch commit does not hold a download slot.
            let mut permit = Some(permit);
            let o = run_job(&ctx, job, &mut permit, defer).await;
            drop(permit);
            if matches!(o, Outcome::Deferred) {
                return (o, again);
            }
            ctx.obs.resource_done();
            (o, None)
        });
        while let Some(r) = self.set.try_join_next() {
            self.collect(r);
        }
        Ok(())
    }

    fn done_inline(&mut self, o: Outcome) {
        self.ctx.obs.resource_done();
        self.tally.add(o);
    }

    pub(crate) async fn finish(mut self) -> Tally {
        while let Some(r) = self.set.join_next().await {
            self.collect(r);
        }
        // Every other job has ended, deletes included: the deferred copies once more, for good.
        self.may_defer = false;
        for job in std::mem::take(&mut self.deferred) {
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

/// Whether something at or above `rel` blocks a copy there: a directory at its path, or a file
/// (or anything but a directory) where one of its directories goes. One `lstat`.
fn path_blocked(store: &FsStore, rel: &RelPath) -> bool {
    match std::fs::symlink_metadata(rel.under(store.root())) {
        Ok(m) => m.is_dir(),
        Err(e) => e.kind() == std::io::ErrorKind::NotADirectory,
    }
}

fn record_item(r: &ResourceRecord) -> Item {
    Item {
        uri: r.uri.clone(),
        length: r.length,
        lastmod: r.lastmod,
        hashes: r.hashes.clone(),
    }
}

/// Whether a change entry carries what proves a copy current when the diff engine finds no
/// difference: a digest of an algorithm the copy has, or a `<lastmod>` both have. A length alone
/// proves nothing (an update may keep the length).
fn has_evidence(item: &StagedItem, copy: &ResourceRecord) -> bool {
    item.hashes.agrees_with(&copy.hashes).is_some()
        || (item.lastmod.is_some() && copy.lastmod.is_some())
}

enum Fetched {
    /// Downloaded and verified, to be put in place by the committer.
    Verified(Box<Pending>),
    NotModified,
}

/// Runs one job; with `defer`, a copy whose path is blocked (see [`Exec`]) is
/// [`Outcome::Deferred`] instead of tried.
async fn run_job(
    ctx: &Arc<Ctx>,
    job: Job,
    permit: &mut Option<OwnedSemaphorePermit>,
    defer: bool,
) -> Outcome {
    let uri = job.item.uri.clone();
    let rel = match ctx.mapper.map(&uri) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Failed(Failure::new(uri, None, e.to_string()));
        }
    };
    let res = match job.kind {
        JobKind::Fetch { .. } if defer && path_blocked(&ctx.store, &rel) => {
            return Outcome::Deferred;
        }
        JobKind::Fetch {
            change,
            new,
            repair,
        } => fetch(ctx, &job.item, &rel, change, new, repair, permit).await,
        JobKind::Delete => delete(ctx, &job.item, &rel).await,
    };
    match res {
        Ok(Outcome::Unchanged) if ctx.dumped_now(&uri) => Outcome::Counted,
        Ok(o) => o,
        Err(mut error) => {
            // Without --delete, a copy the Source deleted stays and may block this path (a file
            // the Source turned into a directory, or back): say what clears it.
            if !ctx.delete
                && matches!(job.kind, JobKind::Fetch { .. })
                && path_blocked(&ctx.store, &rel)
            {
                error.push_str(
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
                    error: error.clone(),
                };
                let put = if crate::crashpoint::fails("pending") {
                    Err(resourcesync_store::Error::Io {
                        path: ctx.state_path.clone(),
                        cause: std::io::Error::from_raw_os_error(28),
                    })
                } else {
                    ctx.state.put_pending(&p)
                };
                if let Err(e) = put {
                    ctx.state_failed(format!("recording the failed change of {uri}: {e}"));
                }
            }
            Outcome::Failed(Failure::new(uri, Some(rel.to_string()), error))
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> std::result::Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("internal task failed: {e}")),
    }
}

/// What is at `rel`, as [`Store::stat`] says, with one `lstat` of the full path when nothing is
/// there (most copies of a baseline): the checks of every directory on the way are made only for
/// what exists. (Nothing found through a symbolic link on the way is no answer that matters:
/// such a path is refused when the copy is put in place.)
fn stat_quick(store: &FsStore, rel: &RelPath) -> resourcesync_store::Result<Option<FileMeta>> {
    match std::fs::symlink_metadata(rel.under(store.root())) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => store.stat(rel),
    }
}

async fn fetch(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
    change: bool,
    new: bool,
    repair: bool,
    permit: &mut Option<OwnedSemaphorePermit>,
) -> std::result::Result<Outcome, String> {
    let target = item.item();
    // A create the diff found no row for: no lookup (at most a row kept after a delete, which
    // tells nothing about the copy).
    let prior = if new {
        None
    } else {
        ctx.state.resource(&item.uri).map_err(|e| e.to_string())?
    };
    let existing = stat_quick(&ctx.store, rel).map_err(|e| e.to_string())?;
    // A change the state already shows applied (a resumed run, or a change seen twice).
    if change {
        if let (Some(p), Some(m)) = (&prior, existing) {
            if !p.gone
                && m.is_file
                && p.length.is_none_or(|l| l == m.length)
                && has_evidence(item, p)
                && needs_update(&record_item(p), &target).is_none()
            {
                return Ok(Outcome::Unchanged);
            }
        }
    }
    // A file already in place with the published digest (a run killed between the rename and
    // the state row, or a destination filled by other means): adopted, not fetched again.
    // (Not worth reading for an update whose stored digest already differs.)
    let worth_hashing = prior
        .as_ref()
        .is_none_or(|p| p.gone || item.hashes.agrees_with(&p.hashes).is_none());
    if let Some(m) = existing.filter(|_| worth_hashing) {
        let algs = item.hashes.known_algs();
        if m.is_file && !algs.is_empty() && item.length.is_none_or(|l| l == m.length) {
            let store = ctx.store.clone();
            let r = rel.clone();
            let (len, hashes) = blocking(move || Ok(store.hash(&r, &algs)?)).await?;
            let expect = Expect {
                length: item.length,
                hashes: item.hashes.clone(),
                max_bytes: ctx.max_resource_bytes,
                modified: None,
            };
            if expect.verify(len, &hashes).is_ok() {
                if !ctx.dry_run {
                    let rec = ResourceRecord {
                        uri: item.uri.clone(),
                        source: ctx.key.clone(),
                        path: rel.to_string(),
                        length: Some(len),
                        hashes,
                        lastmod: item.lastmod,
                        etag: prior.as_ref().and_then(|p| p.etag.clone()),
                        last_modified: prior.as_ref().and_then(|p| p.last_modified.clone()),
                        gone: false,
                    };
                    ctx.state.put_resource(&rec).map_err(|e| e.to_string())?;
                    ctx.state
                        .remove_pending(&ctx.key, &item.uri)
                        .map_err(|e| e.to_string())?;
                }
                return Ok(Outcome::Unchanged);
            }
        }
    }
    let is_update = existing.is_some() || prior.as_ref().is_some_and(|p| !p.gone);
    if ctx.dry_run {
        return Ok(Outcome::Planned(Planned {
            action: if is_update { "update" } else { "create" },
            uri: item.uri.clone(),
            path: rel.to_string(),
        }));
    }
    // Z39.99-2014 §14.4: an update with a patch link is applied to the copy the state records;
    // on any failure (type, copy, patch, result) the resource is fetched whole.
    if change && item.change == Some(Change::Updated) && item.patch.is_some() {
        let copy = prior
            .as_ref()
            .filter(|p| !p.gone && existing.is_some_and(|m| m.is_file));
        if let Some(p) = copy {
            match crate::patch::try_patch(ctx, item, rel, p).await {
                Ok(n) => return Ok(Outcome::Patched(n)),
                Err(e) => tracing::info!("{}: {e}: fetching it whole", item.uri),
            }
        }
    }
    // A conditional GET only when the list does not already prove the copy stale (a length or
    // digest differs): a server's second-granularity Last-Modified could otherwise answer 304.
    // (Not for a copy being repaired: the server would answer that it is current.)
    let cond = prior
        .as_ref()
        .filter(|p| !repair && !p.gone && existing.is_some())
        .filter(|p| {
            !matches!(
                needs_update(&record_item(p), &target),
                Some(Difference::Length | Difference::Digest)
            )
        })
        .map(|p| Conditional {
            etag: p.etag.clone(),
            last_modified: p.last_modified.clone(),
        })
        .filter(|c| !c.is_empty());
    // Z39.99-2014 §14.2: mirrors in `pri` order (1 first), then the resource itself.
    let mut mirrors: Vec<&(u32, String)> = item
        .duplicates
        .iter()
        .filter(|(_, h)| h.starts_with("http://") || h.starts_with("https://"))
        .collect();
    mirrors.sort_by_key(|(p, _)| *p);
    let candidates: Vec<&str> = mirrors
        .iter()
        .map(|(_, h)| h.as_str())
        .chain(std::iter::once(item.uri.as_str()))
        .collect();
    let mut errors: Vec<String> = Vec::new();
    let new_path = existing.is_none();
    for cand in candidates {
        let c = if cand == item.uri {
            cond.as_ref()
        } else {
            None
        };
        let r = ctx
            .http
            .with_retries(|| download(ctx, cand, item, rel, c, prior.as_ref(), new_path))
            .await;
        match r {
            Ok(Fetched::Verified(p)) => {
                let receipt = ctx.committer.enqueue(*p).await?;
                // Queued: the next download may start while this copy waits for its batch (the
                // queue is bounded, so downloads cannot outrun the commits).
                drop(permit.take());
                let n = receipt.done().await?.length;
                return Ok(if repair {
                    Outcome::Repaired(n)
                } else if is_update {
                    Outcome::Updated(n)
                } else {
                    Outcome::Created(n)
                });
            }
            Ok(Fetched::NotModified) => return Ok(Outcome::Unchanged),
            Err(e) => {
                let msg = e.to_string();
                errors.push(if msg.contains(cand) {
                    msg
                } else {
                    format!("{cand}: {msg}")
                });
            }
        }
    }
    Err(errors.join("; "))
}

async fn download(
    ctx: &Arc<Ctx>,
    url: &str,
    item: &StagedItem,
    rel: &RelPath,
    cond: Option<&Conditional>,
    prior: Option<&ResourceRecord>,
    new_path: bool,
) -> Result<Fetched> {
    let mut resp = ctx.http.get_once(url, cond).await?;
    if resp.status().as_u16() == 304 {
        // RFC 9110 §15.4.5: the stored copy is current, if what the Source publishes agrees.
        if let Some(p) = prior {
            if needs_update(&record_item(p), &item.item()).is_none() {
                let mut rec = p.clone();
                rec.lastmod = item.lastmod.or(p.lastmod);
                ctx.state.put_resource(&rec)?;
                ctx.state.remove_pending(&ctx.key, &item.uri)?;
                return Ok(Fetched::NotModified);
            }
        }
        resp = ctx.http.get_once(url, None).await?;
        if resp.status().as_u16() == 304 {
            return Err(Error::Transport {
                url: url.to_owned(),
                message: "304 Not Modified to an unconditional request".into(),
                transient: false,
            });
        }
    }
    let etag = header(&resp, ETAG);
    let last_modified = header(&resp, LAST_MODIFIED);
    let expect = Expect {
        length: item.length,
        hashes: item.hashes.clone(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::mtime::copy_time(item.lastmod.as_ref(), last_modified.as_deref()),
    };
    let (limit, what) = expect.limit();
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(resourcesync_store::Error::TooLong { limit, what }.into());
    }
    // Where no file was seen (most copies of a baseline): an unnamed file in its final
    // directory, linked into place by the committer instead of renamed (see
    // `FsStore::create_temp_at`; a file found there after all is replaced as usual).
    let mut tmp = if new_path {
        // (A panic while it was held left nothing half-done in it: the handles are usable.)
        let mut dirs = ctx
            .dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        dirs.create(&ctx.store, expect, rel)?
    } else {
        ctx.store.create_temp(expect)?
    };
    while let Some(chunk) = resp.chunk().await.map_err(|e| body_error(url, &e))? {
        tmp.write(&chunk)?;
        crate::crashpoint::point("download");
        ctx.obs.bytes(chunk.len() as u64);
    }
    drop(resp);
    let store = ctx.store.clone();
    crate::crashpoint::point("before-rename");
    // Checked here (length, every published digest); synced, renamed and recorded by the
    // committer, the row only after the file is in place (crate::commit).
    let body = if store.verify_blocks() {
        tokio::task::spawn_blocking(move || store.verify(tmp)).await??
    } else {
        // A write of what is buffered and the digests' last block: no waiting for the disk.
        store.verify(tmp)?
    };
    Ok(Fetched::Verified(Box::new(Pending {
        body,
        rel: rel.clone(),
        row: ResourceRecord {
            uri: item.uri.clone(),
            source: ctx.key.clone(),
            path: rel.to_string(),
            length: None,
            hashes: Default::default(),
            lastmod: item.lastmod,
            etag,
            last_modified,
            gone: false,
        },
        origin: Origin::Download,
    })))
}

async fn delete(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
) -> std::result::Result<Outcome, String> {
    let prior = ctx.state.resource(&item.uri).map_err(|e| e.to_string())?;
    // Only copies the Destination made (with a row) are ever removed.
    let Some(p) = prior else {
        if !ctx.dry_run {
            let _ = ctx.state.remove_pending(&ctx.key, &item.uri);
        }
        return Ok(Outcome::Unchanged);
    };
    let path = RelPath::parse(&p.path).unwrap_or_else(|_| rel.clone());
    if ctx.dry_run {
        return Ok(Outcome::Planned(Planned {
            action: if ctx.delete { "delete" } else { "keep" },
            uri: item.uri.clone(),
            path: path.to_string(),
        }));
    }
    if ctx.delete {
        let store = ctx.store.clone();
        let state = ctx.state.clone();
        let (uri, key) = (item.uri.clone(), ctx.key.clone());
        blocking(move || {
            store.remove(&path)?;
            state.remove_resource(&uri)?;
            state.remove_pending(&key, &uri)?;
            Ok(())
        })
        .await?;
        Ok(Outcome::Deleted)
    } else {
        ctx.state
            .set_gone(&item.uri, true)
            .map_err(|e| e.to_string())?;
        let _ = ctx.state.remove_pending(&ctx.key, &item.uri);
        Ok(Outcome::Kept(item.uri.clone()))
    }
}

/// Stages every entry of a Resource List.
struct ResourceListSink {
    staging: Staging,
}

impl ListSink for ResourceListSink {
    fn entry(&mut self, e: Entry) -> Result<()> {
        self.staging.upsert(&StagedItem::from_entry(&e))
    }
}

/// A Resource List read whole into a staging database, and what its walk found.
#[derive(Debug)]
pub(crate) struct StagedList {
    staging: Staging,
    info: WalkInfo,
}

/// Reads a Resource List (every part of its index) into a new staging database.
async fn stage_list(fetcher: DocFetcher, rl: String) -> Result<StagedList> {
    let staging = Staging::create(&fetcher.dir)?;
    let (mut sink, info) = walk(
        &fetcher,
        &rl,
        Capability::ResourceList,
        ResourceListSink { staging },
    )
    .await?;
    sink.staging.flush()?;
    Ok(StagedList {
        staging: sink.staging,
        info,
    })
}

/// Stages the changes after the cursor, collapsing several changes of a URI to the last.
struct ChangeListSink {
    staging: Staging,
    cursor: W3cDateTime,
    last: Option<W3cDateTime>,
    other: u64,
    /// The document streamed, and the time of its entry read last (§12.1 order).
    doc: String,
    previous: Order,
}

/// The order of a Change List's entries so far (Z39.99-2014 §12.1: forward chronological).
/// Z39.99-2017 §7: `datetime` is the time of the change event and `<lastmod>` the time of the
/// resource's last modification; the two need not agree. So entries with `datetime` are
/// ordered among themselves by it, and entries with only `<lastmod>` by it, among themselves,
/// and only in a document where no entry seen so far has a `datetime` (a 1.0 document); an
/// entry with only `<lastmod>` is never compared with a neighbour's `datetime`.
#[derive(Debug, Default, Clone, Copy)]
struct Order {
    datetime: Option<W3cDateTime>,
    lastmod: Option<W3cDateTime>,
}

impl Order {
    /// The earlier entry's time that `e` goes back before, if it does.
    fn check(&mut self, e: &Entry) -> Option<W3cDateTime> {
        if let Some(t) = e.md.as_ref().and_then(|m| m.datetime) {
            let back = self.datetime.filter(|p| after(p, &t));
            self.datetime = Some(t);
            return back;
        }
        let t = e.lastmod?;
        if self.datetime.is_some() {
            return None;
        }
        let back = self.lastmod.filter(|p| after(p, &t));
        self.lastmod = Some(t);
        back
    }
}

pub(crate) fn after(t: &W3cDateTime, cursor: &W3cDateTime) -> bool {
    t.cmp_instant(cursor) == std::cmp::Ordering::Greater
}

impl ListSink for ChangeListSink {
    fn top(&mut self, url: &str, h: &Header) -> Result<()> {
        url.clone_into(&mut self.doc);
        // Z39.99-2014 §12.1: `from` says the document has every change since then; the history
        // reaches the cursor when it starts at or before it.
        match h.md.as_ref().and_then(|m| m.from) {
            Some(from) if !after(&from, &self.cursor) => Ok(()),
            from => Err(Error::HistoryGap {
                url: self.doc.clone(),
                from: from.map(|f| f.to_string()),
                cursor: self.cursor.to_string(),
            }),
        }
    }

    fn want_child(&mut self, e: &Entry) -> bool {
        // A closed Change List that ends at or before the cursor has nothing new (§12.2).
        e.md.as_ref()
            .and_then(|m| m.until)
            .is_none_or(|u| after(&u, &self.cursor))
    }

    fn document(&mut self, url: &str, h: &Header) -> Result<bool> {
        url.clone_into(&mut self.doc);
        self.previous = Order::default();
        Ok(h.md
            .as_ref()
            .and_then(|m| m.until)
            .is_none_or(|u| after(&u, &self.cursor)))
    }

    fn entry(&mut self, e: Entry) -> Result<()> {
        // The time that places the entry in the history: its `datetime`; in a document without
        // any (so far), its `<lastmod>`. An entry with only `<lastmod>` in a document that uses
        // `datetime` has none (Z39.99-2017 §7): it is applied whatever the cursor (the state
        // makes a change seen before cheap) and does not move the cursor.
        let dt = e.md.as_ref().and_then(|m| m.datetime);
        let t = if dt.is_some() || self.previous.datetime.is_some() {
            dt
        } else {
            e.lastmod
        };
        if let (Some(p), Some(at)) = (self.previous.check(&e), e.change_time().copied()) {
            return Err(Error::ChangesOutOfOrder {
                url: self.doc.clone(),
                line: e.position.line,
                loc: e.loc,
                at: at.to_string(),
                previous: p.to_string(),
            });
        }
        if t.is_some_and(|t| !after(&t, &self.cursor)) {
            return Ok(());
        }
        match e.change() {
            Some(Change::Created | Change::Updated | Change::Deleted) => {}
            _ => {
                self.other += 1;
                return Ok(());
            }
        }
        if let Some(t) = t {
            if self.last.is_none_or(|l| after(&t, &l)) {
                self.last = Some(t);
            }
        }
        self.staging.upsert(&StagedItem::from_entry(&e))
    }
}

/// Diff items in URI order, read a page at a time: `fetch(after)` returns the items of the next
/// page and the last URI of that page (`None` at the end). A read error ends the iteration and
/// is kept in `err`, for the caller to check before acting on what was read.
struct Paged<'a, F> {
    fetch: F,
    after: Option<String>,
    buf: VecDeque<Item>,
    done: bool,
    err: &'a Mutex<Option<Error>>,
}

impl<'a, F> Paged<'a, F>
where
    F: FnMut(Option<&str>) -> Result<(Vec<Item>, Option<String>)>,
{
    fn new(err: &'a Mutex<Option<Error>>, fetch: F) -> Self {
        Paged {
            fetch,
            after: None,
            buf: VecDeque::new(),
            done: false,
            err,
        }
    }
}

impl<F> Iterator for Paged<'_, F>
where
    F: FnMut(Option<&str>) -> Result<(Vec<Item>, Option<String>)>,
{
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(i) = self.buf.pop_front() {
                return Some(i);
            }
            if self.done {
                return None;
            }
            match (self.fetch)(self.after.as_deref()) {
                Ok((items, last)) => {
                    self.done = last.is_none();
                    self.after = last;
                    self.buf.extend(items);
                }
                Err(e) => {
                    if let Ok(mut g) = self.err.lock() {
                        *g = Some(e);
                    }
                    self.done = true;
                }
            }
        }
    }
}

/// A task aborted when its handle is dropped (a run ending early leaves nothing behind).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether a URI is among those a dump package put in place during this run, asked in
/// ascending URI order: read along in the same order, a page at a time, instead of one lookup
/// per URI.
struct DumpedSet<'a> {
    uris: Option<std::iter::Peekable<Paged<'a, PageFetch<'a>>>>,
}

type PageResult = Result<(Vec<Item>, Option<String>)>;
type PageFetch<'a> = Box<dyn FnMut(Option<&str>) -> PageResult + Send + 'a>;

impl<'a> DumpedSet<'a> {
    fn new(staging: Option<&'a Mutex<Staging>>, err: &'a Mutex<Option<Error>>) -> Self {
        let uris = staging.map(|s| {
            let fetch: PageFetch<'a> = Box::new(move |after| {
                let page = s
                    .lock()
                    .map_err(|_| Error::Task("staging lock poisoned".into()))?
                    .page_by_uri(after, 1000)?;
                let last = page.last().map(|r| r.uri.clone());
                Ok((page.iter().map(StagedItem::item).collect(), last))
            });
            Paged::new(err, fetch).peekable()
        });
        DumpedSet { uris }
    }

    /// Whether `uri` is in the set; every URI asked must be greater than the one before.
    fn contains(&mut self, uri: &str) -> bool {
        let Some(it) = self.uris.as_mut() else {
            return false;
        };
        while it.next_if(|i| i.uri.as_str() < uri).is_some() {}
        it.peek().is_some_and(|i| i.uri == uri)
    }
}

fn take_err(cell: &Mutex<Option<Error>>) -> Result<()> {
    match cell.lock().ok().and_then(|mut g| g.take()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn staged(staging: &Mutex<Staging>, uri: &str) -> Result<Option<StagedItem>> {
    staging
        .lock()
        .map_err(|_| Error::Task("staging lock poisoned".into()))?
        .get(uri)
}

/// Baseline (or baseline diff): returns the Resource List's `at`.
async fn baseline(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    rl: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<W3cDateTime>> {
    baseline_with(ctx, fetcher, exec, rl, warnings, None, None).await
}

/// Baseline (or baseline diff) from the Resource List `rl`, or from `read`, the result of
/// reading it already; refused with [`Error::ListOlderThanDump`] before anything is done when
/// the list's `at` is before `not_before`. Returns the Resource List's `at`.
async fn baseline_with(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    rl: &str,
    warnings: &mut Vec<String>,
    not_before: Option<W3cDateTime>,
    read: Option<Result<StagedList>>,
) -> Result<Option<W3cDateTime>> {
    ctx.obs.phase("reading the Resource List");
    let StagedList { staging, info } = match read {
        Some(s) => s?,
        None => stage_list(fetcher.clone(), rl.to_owned()).await?,
    };
    let at = info.top.md.as_ref().and_then(|m| m.at);
    // Z39.99-2014 §10.1, §11.1: both `at`s say when their snapshot started.
    if let (Some(dump_at), Some(at)) = (not_before, at) {
        if after(&dump_at, &at) {
            return Err(Error::ListOlderThanDump {
                at: at.to_string(),
                dump_at: dump_at.to_string(),
            });
        }
    }
    warnings.extend(info.warnings);
    let staging = Mutex::new(staging);
    let total = staging
        .lock()
        .map_err(|_| Error::Task("staging lock poisoned".into()))?
        .count()?;
    ctx.obs.add_total(total);
    ctx.obs.phase("syncing");
    let err = Mutex::new(None);
    // The copy: state rows, skipping copies kept after a delete.
    let copy = Paged::new(&err, |after| {
        let page = ctx.state.resources_page(&ctx.key, after, 1000)?;
        let last = page.last().map(|r| r.uri.clone());
        Ok((
            page.iter().filter(|r| !r.gone).map(record_item).collect(),
            last,
        ))
    });
    // The original: the staged Resource List. The staged entries read are kept (in `read`)
    // until the diff has passed them, for the jobs: no second lookup per entry.
    let read: Mutex<VecDeque<StagedItem>> = Mutex::new(VecDeque::new());
    let original = Paged::new(&err, |after| {
        let page = staging
            .lock()
            .map_err(|_| Error::Task("staging lock poisoned".into()))?
            .page_by_uri(after, 1000)?;
        let last = page.last().map(|r| r.uri.clone());
        let items = page.iter().map(StagedItem::item).collect();
        read.lock()
            .map_err(|_| Error::Task("staging lock poisoned".into()))?
            .extend(page);
        Ok((items, last))
    });
    // The staged entry of a URI of the diff (asked in ascending order).
    let entry = |uri: &str| -> Result<Option<StagedItem>> {
        let mut q = read
            .lock()
            .map_err(|_| Error::Task("staging lock poisoned".into()))?;
        while q.front().is_some_and(|i| i.uri.as_str() < uri) {
            q.pop_front();
        }
        if q.front().is_some_and(|i| i.uri == uri) {
            return Ok(q.pop_front());
        }
        drop(q);
        staged(&staging, uri)
    };
    // The URIs dump packages put in place during this run, in the same order as the diff's.
    let mut dumped = DumpedSet::new(ctx.dumped.as_ref(), &err);
    for action in resourcesync_diff::diff_sorted(copy, original) {
        // A list or state read that failed ends its iterator early: stop before acting on a
        // plan built from half an inventory.
        take_err(&err)?;
        let new = matches!(action, Action::Create(_));
        match action {
            Action::Create(o) | Action::Update { original: o, .. } => {
                let item = entry(&o.uri)?.unwrap_or_else(|| StagedItem {
                    uri: o.uri.clone(),
                    length: o.length,
                    hashes: o.hashes.clone(),
                    lastmod: o.lastmod,
                    ..StagedItem::default()
                });
                exec.submit(Job {
                    item,
                    kind: JobKind::Fetch {
                        change: false,
                        new,
                        repair: false,
                    },
                })
                .await?;
            }
            Action::Delete(c) => {
                ctx.obs.add_total(1);
                exec.submit(Job::delete(c.uri)).await?;
            }
            Action::Same(o) => {
                // A copy a dump package put in place during this run is counted already.
                if dumped.contains(&o.uri) {
                    exec.done_inline(Outcome::Counted);
                    continue;
                }
                // The state says current; check the file is still there (a copy removed or
                // truncated by hand is fetched again; crate::repair checks the rest later).
                let intact = match ctx.mapper.map(&o.uri) {
                    Ok(rel) => ctx
                        .store
                        .stat(&rel)?
                        .is_some_and(|m| m.is_file && o.length.is_none_or(|l| l == m.length)),
                    Err(_) => true,
                };
                if intact {
                    exec.done_inline(Outcome::Unchanged);
                } else {
                    let item = entry(&o.uri)?.unwrap_or_default();
                    exec.submit(Job {
                        item,
                        kind: JobKind::Fetch {
                            change: false,
                            new: false,
                            repair: true,
                        },
                    })
                    .await?;
                }
            }
        }
    }
    take_err(&err)?;
    Ok(at)
}

/// Incremental: returns the time of the last change seen.
async fn incremental(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    cl: &str,
    cursor: W3cDateTime,
    warnings: &mut Vec<String>,
) -> Result<Option<W3cDateTime>> {
    incremental_with(ctx, fetcher, exec, cl, cursor, warnings, true, &mut |_| {}).await
}

/// [`incremental`], with the pending changes of earlier runs only with `pending`; `seen` is
/// told the URI of each change submitted (see [`crate::catch_up`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn incremental_with(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    cl: &str,
    cursor: W3cDateTime,
    warnings: &mut Vec<String>,
    pending: bool,
    seen: &mut (dyn FnMut(&str) + Send),
) -> Result<Option<W3cDateTime>> {
    ctx.obs.phase("reading the Change Lists");
    let mut staging = Staging::create(&fetcher.dir)?;
    // Changes that failed last time go first: a later change of the same URI replaces them.
    let mut after: Option<String> = None;
    loop {
        let page = match pending {
            true => ctx.state.pending_page(&ctx.key, after.as_deref(), 1000)?,
            false => Vec::new(),
        };
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        for p in page {
            staging.upsert(&StagedItem {
                uri: p.uri,
                change: p.change,
                length: p.length,
                hashes: p.hashes,
                lastmod: p.lastmod,
                ctime: None,
                duplicates: p.duplicates,
                path: None,
                patch: None,
            })?;
        }
    }
    let sink = ChangeListSink {
        staging,
        cursor,
        last: None,
        other: 0,
        doc: String::new(),
        previous: Order::default(),
    };
    let (mut sink, info) = walk(fetcher, cl, Capability::ChangeList, sink).await?;
    sink.staging.flush()?;
    warnings.extend(info.warnings);
    if sink.other > 0 {
        warnings.push(format!(
            "{} change(s) of an unknown kind ignored (Z39.99-2014 §12.1 defines created, updated, deleted)",
            sink.other
        ));
    }
    let staging = sink.staging;
    ctx.obs.add_total(staging.count()?);
    ctx.obs.phase("syncing");
    let mut pos = 0i64;
    loop {
        let page = staging.page_by_seq(pos, 1000)?;
        let Some((last, _)) = page.last() else { break };
        pos = *last;
        for (_, item) in page {
            let kind = if item.change == Some(Change::Deleted) {
                JobKind::Delete
            } else {
                JobKind::Fetch {
                    change: true,
                    new: false,
                    repair: false,
                }
            };
            seen(&item.uri);
            exec.submit(Job { item, kind }).await?;
        }
    }
    Ok(sink.last)
}

/// After a Resource Dump of `dump_at` was applied (Z39.99-2014 §11; see [`crate::dump`]): the
/// Resource List is diffed unless it is older than the dump, in which case the Change Lists are
/// read from the dump's `at`. Returns the new cursor.
async fn after_dump(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    info: &SourceInfo,
    dump_at: W3cDateTime,
    w: &mut Vec<String>,
    staged: Option<Result<StagedList>>,
) -> Result<Option<W3cDateTime>> {
    // A Source with a Resource Dump and no Resource List: the dump is the baseline.
    let Some(rl) = &info.resource_list else {
        return Ok(Some(dump_at));
    };
    match baseline_with(ctx, fetcher, exec, rl, w, Some(dump_at), staged).await {
        Ok(at) => return Ok(at.or(Some(dump_at))),
        Err(Error::ListOlderThanDump { at, .. }) => w.push(format!(
            "the Resource List ({at}) is older than the Resource Dump ({dump_at}): not diffed; changes since the dump from the Change Lists"
        )),
        Err(e) => return Err(e),
    }
    let Some(cl) = &info.change_list else {
        return Ok(Some(dump_at));
    };
    match incremental(ctx, fetcher, exec, cl, dump_at, w).await {
        Ok(last) => Ok(Some(last.filter(|l| after(l, &dump_at)).unwrap_or(dump_at))),
        // Diffing against the older list would undo what the dump brought: a later run diffs
        // against a newer one.
        Err(e @ Error::HistoryGap { .. }) => {
            w.push(format!("{e}: the Resource Dump is the baseline"));
            Ok(Some(dump_at))
        }
        Err(e) => Err(e),
    }
}

/// Synchronizes a destination directory with a Source (see the module docs).
pub async fn sync(opts: &SyncOptions, obs: Arc<dyn Observer>) -> Result<SyncReport> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, sync_inner(opts, obs))
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => sync_inner(opts, obs).await,
    }
}

async fn sync_inner(opts: &SyncOptions, obs: Arc<dyn Observer>) -> Result<SyncReport> {
    let started = Instant::now();
    let http = Arc::new(Http::new(opts.http.clone())?);
    // Discovery first, its documents in a temporary directory outside DEST: nothing is created
    // under DEST (no state, no scratch folder) before the Source is found, so a URL that does
    // not answer leaves an existing empty DEST empty and creates no DEST at all.
    let discovery_dir =
        tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?;
    obs.phase("discovery");
    let info: SourceInfo = discover(
        &DocFetcher {
            http: http.clone(),
            dir: discovery_dir.path().to_path_buf(),
            max_bytes: opts.max_document_bytes,
        },
        &opts.url,
        opts.set.as_deref(),
    )
    .await?;
    drop(discovery_dir);
    // Nothing to sync from is said before anything is created under DEST.
    info.check_usable(opts.use_dumps, false)?;
    // Scratch space: inside DEST (same file system, cleaned on the next run), or for a dry run
    // a temporary directory elsewhere, so that a dry run writes nothing under DEST.
    let _scratch_holder;
    let (store, scratch) = if opts.dry_run {
        _scratch_holder =
            Some(tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?);
        let dir = _scratch_holder
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default();
        (FsStore::existing(&opts.dest), dir)
    } else {
        _scratch_holder = None;
        let s = FsStore::open(&opts.dest)?;
        s.clean_tmp()?;
        let dir = opts.dest.join(resourcesync_store::STATE_DIR).join("tmp");
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("staging-") || name.starts_with("doc-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        (s, dir)
    };
    let state_path = opts.state_path();
    let state: Arc<dyn StateStore> = if opts.dry_run {
        match SqliteState::open_read_only(&state_path)? {
            Some(s) => Arc::new(s),
            None => Arc::new(SqliteState::in_memory()?),
        }
    } else {
        Arc::new(SqliteState::open(&state_path)?)
    };
    let fetcher = DocFetcher {
        http: http.clone(),
        dir: scratch,
        max_bytes: opts.max_document_bytes,
    };
    let mut warnings = info.warnings.clone();
    for w in &warnings {
        obs.warning(w);
    }
    let list_url = info
        .resource_list
        .clone()
        .unwrap_or_else(|| opts.url.clone());
    let base = base_url(
        opts.base_url.as_deref(),
        info.description.as_deref(),
        info.capability_list.as_deref(),
        &list_url,
    );
    let mapper = UriMapper::new(&base)?;
    let key = info.key();
    let prior_cursor = state.cursor(&key)?;
    let cursor = prior_cursor.as_ref().and_then(|c| c.cursor);
    info.check_usable(opts.use_dumps, cursor.is_none())?;
    // Z39.99-2017 §5.2: a Source with dumps and no list (crate::dump_sync).
    let dumps_only = info.resource_list.is_none() && info.change_list.is_none();
    // Z39.99-2014 §11: a first baseline from the Resource Dump (unless --no-dump); §13: changes
    // from the Change Dump first with --prefer-dumps.
    let resource_dump = info
        .resource_dump
        .clone()
        .filter(|_| cursor.is_none() && opts.use_dumps && !opts.dry_run);
    let change_dump = info.change_dump.clone().filter(|_| {
        cursor.is_some() && info.change_list.is_some() && opts.prefer_dumps && !opts.dry_run
    });
    let dumped = if resource_dump.is_some() || change_dump.is_some() || dumps_only {
        Some(Mutex::new(Staging::create(&fetcher.dir)?))
    } else {
        None
    };
    let store = Arc::new(store);
    let ctx = Arc::new(Ctx {
        http,
        store: store.clone(),
        state: state.clone(),
        mapper,
        key: key.clone(),
        delete: opts.delete,
        dry_run: opts.dry_run,
        max_resource_bytes: opts.max_resource_bytes,
        obs: obs.clone(),
        dumped,
        committer: Committer::start(store.clone(), state.clone())?,
        dirs: Mutex::default(),
        state_error: Mutex::default(),
        state_path: state_path.clone(),
    });
    // Copies kept after earlier deletes (runs without --delete) go now that --delete is given.
    let mut earlier = Tally::default();
    if opts.delete && !opts.dry_run {
        let mut pre = Exec::new(ctx.clone(), opts.concurrency);
        let mut after: Option<String> = None;
        loop {
            let page = state.resources_page(&key, after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.uri.clone());
            for r in page.into_iter().filter(|r| r.gone) {
                pre.submit(Job::delete(r.uri)).await?;
            }
        }
        earlier = pre.finish().await;
    }
    let mut exec = Exec::new(ctx.clone(), opts.concurrency);
    let mut w = Vec::new();
    // A Resource List needed and not offered: `then` says why it was needed and what to do.
    let need_rl = |then: String| {
        info.resource_list
            .clone()
            .ok_or_else(|| Error::BadDocument {
                url: info
                    .capability_list
                    .clone()
                    .unwrap_or_else(|| opts.url.clone()),
                message: format!(
                    "the Source offers no Resource List (it lists: {}) {then}",
                    if info.offered.is_empty() {
                        "nothing".to_owned()
                    } else {
                        info.offered.join(", ")
                    },
                ),
            })
    };
    let mut from_dumps = Tally::default();
    // Z39.99-2014 §13: Change Dump packages first; the Change Lists then find their changes
    // applied (see crate::dump).
    if let (Some(c), Some(cd)) = (cursor, &change_dump) {
        let d = crate::dump::change_dumps(&ctx, &fetcher, cd, c, true, &opts.dump_limits, &mut w)
            .await?;
        from_dumps.add_dumps(&d);
    }
    let (mode, new_cursor) = match (cursor, &info.change_list) {
        _ if dumps_only => {
            let run = crate::dump_sync::sync_from_dumps(
                &ctx,
                &fetcher,
                &mut exec,
                &info,
                cursor,
                prior_cursor.is_some(),
                &opts.dump_limits,
                &mut w,
            )
            .await?;
            from_dumps.add_dumps(&run.stats);
            (run.mode, run.cursor.or(cursor))
        }
        (Some(c), Some(cl)) => match incremental(&ctx, &fetcher, &mut exec, cl, c, &mut w).await {
            Ok(last) => (
                Mode::Incremental,
                Some(last.filter(|l| after(l, &c)).unwrap_or(c)),
            ),
            Err(e @ (Error::HistoryGap { .. } | Error::ChangesOutOfOrder { .. })) => {
                // Said once, with the other warnings of the run.
                w.push(format!("{e}: baseline diff against the Resource List"));
                let rl = need_rl(format!(
                    "to diff the copy against, and its Change Lists do not reach back to the \
                     cursor: to start over, sync into a new directory (or remove {})",
                    opts.state_path().display()
                ))?;
                let at = baseline(&ctx, &fetcher, &mut exec, &rl, &mut w).await?;
                (
                    Mode::BaselineDiff,
                    Some(at.filter(|a| after(a, &c)).unwrap_or(c)),
                )
            }
            Err(e) => return Err(e),
        },
        _ => {
            let mode = if prior_cursor.is_some() {
                Mode::BaselineDiff
            } else {
                Mode::Baseline
            };
            // Z39.99-2014 §11: the dump first; then the Resource List, unless it is older than
            // the dump (see crate::dump).
            let mut dump_at = None;
            let mut staged = None;
            if let Some(rd) = &resource_dump {
                // The Resource List is read while the packages are applied: the two meet
                // only in the diff, once the dump is in place.
                let reading = info
                    .resource_list
                    .clone()
                    .map(|rl| AbortOnDrop(tokio::spawn(stage_list(fetcher.clone(), rl))));
                let lists = info.resource_list.is_some();
                let d = crate::dump::resource_dump(
                    &ctx,
                    &fetcher,
                    rd,
                    lists,
                    &opts.dump_limits,
                    &mut w,
                )
                .await?;
                from_dumps.add_dumps(&d);
                dump_at = d.at;
                if let Some(mut r) = reading {
                    staged = Some((&mut r.0).await.map_err(Error::from).and_then(|s| s));
                }
            }
            let at = match dump_at {
                Some(d) => after_dump(&ctx, &fetcher, &mut exec, &info, d, &mut w, staged).await?,
                // Without a Resource List, a Resource Dump whose packages were all refused
                // leaves nothing more to do: its failures say why, the next run tries again.
                None if resource_dump.is_some() && info.resource_list.is_none() => None,
                None => {
                    let rl = need_rl(if opts.dry_run {
                        "for a dry run to plan from (a dry run fetches no dump package): run \
                         without --dry-run"
                            .into()
                    } else {
                        "to start a copy from: tell the Source's maintainer".into()
                    })?;
                    baseline_with(&ctx, &fetcher, &mut exec, &rl, &mut w, None, staged).await?
                }
            };
            (mode, at.or(cursor))
        }
    };
    for m in &w {
        obs.warning(m);
    }
    warnings.extend(w);
    let mut tally = exec.finish().await;
    // Z39.99-2014 §5.2, §12.1: after a baseline, the changes since the list's `at` in the same
    // run; a resource that changed while the baseline ran is fetched again (crate::catch_up).
    let mut w = Vec::new();
    let baseline_at = new_cursor.filter(|_| {
        matches!(mode, Mode::Baseline | Mode::BaselineDiff)
            && !opts.dry_run
            && !dumps_only
            && opts.catch_up
    });
    let new_cursor = match (baseline_at, &info.change_list) {
        (Some(at), Some(cl)) => Some(
            crate::catch_up::catch_up(&ctx, &fetcher, opts.concurrency, cl, at, &mut tally, &mut w)
                .await?,
        ),
        _ => new_cursor,
    };
    // The copies on disk against the state (crate::repair): a damaged one is fetched again.
    // Not after a first baseline: every copy the state records was written by this run.
    if !opts.dry_run && cursor.is_some() && opts.check_copies != CheckCopies::Off {
        obs.phase("checking the copies");
        let mut rex = Exec::new(ctx.clone(), opts.concurrency);
        let mut after = None;
        while let Some(damaged) = next_damaged(&ctx, opts.check_copies, &mut after).await? {
            for (item, why) in damaged {
                tracing::info!("{}: {why}: fetched again", item.uri);
                let kind = JobKind::Fetch {
                    change: false,
                    new: false,
                    repair: true,
                };
                rex.submit(Job { item, kind }).await?;
            }
        }
        tally.merge(rex.finish().await);
    }
    if baseline_at.is_some() {
        crate::catch_up::explain_stale(
            &mut tally,
            baseline_at.as_ref(),
            info.change_list.is_some(),
        );
    }
    w.retain(|m| !warnings.contains(m));
    for m in &w {
        obs.warning(m);
    }
    warnings.extend(w);
    // Every copy downloaded is in place and recorded before the cursor moves.
    ctx.committer.close();
    // A change neither applied nor recorded as pending keeps the cursor where it is.
    ctx.check_state()?;
    tally.merge(earlier);
    tally.merge(from_dumps);
    if !opts.dry_run {
        crate::crashpoint::point("cursor");
        // The cursor moves once every change up to it has been applied or recorded as pending.
        state.set_cursor(&SourceCursor {
            source: key,
            cursor: new_cursor,
            synced_at: Some(W3cDateTime::now(false)),
        })?;
    }
    Ok(SyncReport {
        source: info,
        base_url: base,
        mode,
        dry_run: opts.dry_run,
        created: tally.created,
        updated: tally.updated,
        deleted: tally.deleted,
        kept: tally.kept,
        unchanged: tally.unchanged,
        repaired: tally.repaired,
        failed: tally.failed,
        bytes: tally.bytes,
        packages: tally.packages,
        from_packages: tally.from_packages,
        patched: tally.patched,
        seconds: started.elapsed().as_secs_f64(),
        cursor: new_cursor.map(|c| c.to_string()),
        failures: tally.failures,
        kept_uris: tally.kept_uris,
        planned: tally.planned,
        warnings,
    })
}

/// Applies pushed changes (Change Notification 1.0.1 §3) through the same path as an
/// incremental sync: each change is fetched (or removed), verified against its published length
/// and digest, renamed into place and only then recorded; a change that fails is kept as
/// pending for the next sync. The HTTP client and the store are kept for the whole push
/// session; the state is opened per payload ([`Applier::session`]), because it is locked by
/// one user at a time and a catch-up [`sync()`] needs it in between.
#[derive(Debug)]
pub(crate) struct Applier {
    http: Arc<Http>,
    store: Arc<FsStore>,
    state_path: PathBuf,
    mapper: UriMapper,
    delete: bool,
    max_resource_bytes: u64,
    obs: Arc<dyn Observer>,
    concurrency: usize,
    info: SourceInfo,
    base: String,
}

/// The state opened for one payload.
#[derive(Debug)]
pub(crate) struct Session(Arc<Ctx>);

impl Applier {
    /// An applier for the Source a sync found (`info`, mapped under `base`).
    pub(crate) fn open(
        opts: &SyncOptions,
        obs: Arc<dyn Observer>,
        info: SourceInfo,
        base: String,
    ) -> Result<Self> {
        Ok(Applier {
            http: Arc::new(Http::new(opts.http.clone())?),
            store: Arc::new(FsStore::open(&opts.dest)?),
            state_path: opts.state_path(),
            mapper: UriMapper::new(&base)?,
            delete: opts.delete,
            max_resource_bytes: opts.max_resource_bytes,
            obs,
            concurrency: opts.concurrency,
            info,
            base,
        })
    }

    /// Opens the state (until the session is dropped).
    pub(crate) fn session(&self) -> Result<Session> {
        let state: Arc<dyn StateStore> = Arc::new(SqliteState::open(&self.state_path)?);
        Ok(Session(Arc::new(Ctx {
            http: self.http.clone(),
            store: self.store.clone(),
            committer: Committer::start(self.store.clone(), state.clone())?,
            dirs: Mutex::default(),
            state_error: Mutex::default(),
            state_path: self.state_path.clone(),
            state,
            mapper: self.mapper.clone(),
            key: self.info.key(),
            delete: self.delete,
            dry_run: false,
            max_resource_bytes: self.max_resource_bytes,
            obs: self.obs.clone(),
            dumped: None,
        })))
    }

    /// The cursor of the Source: the time up to which every change is applied.
    pub(crate) fn cursor(&self, s: &Session) -> Result<Option<W3cDateTime>> {
        Ok(s.0.state.cursor(&s.0.key)?.and_then(|c| c.cursor))
    }

    /// Moves the cursor forward to `to` (never back).
    pub(crate) fn advance(&self, s: &Session, to: W3cDateTime) -> Result<Option<W3cDateTime>> {
        let cur = self.cursor(s)?;
        let new = match cur {
            Some(c) if !after(&to, &c) => c,
            _ => to,
        };
        s.0.state.set_cursor(&SourceCursor {
            source: s.0.key.clone(),
            cursor: Some(new),
            synced_at: Some(W3cDateTime::now(false)),
        })?;
        Ok(Some(new))
    }

    /// Applies the changes among `entries` (several changes of one URI collapse to the last,
    /// applied in the order of their last occurrence, as in [`incremental`]).
    pub(crate) async fn apply(&self, s: &Session, entries: Vec<Entry>) -> Result<SyncReport> {
        let started = Instant::now();
        let mut last: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut items: Vec<Option<StagedItem>> = Vec::with_capacity(entries.len());
        let mut other = 0u64;
        for e in &entries {
            match e.change() {
                Some(Change::Created | Change::Updated | Change::Deleted) => {}
                _ => {
                    other += 1;
                    continue;
                }
            }
            if let Some(i) = last.insert(e.loc.clone(), items.len()) {
                items[i] = None;
            }
            items.push(Some(StagedItem::from_entry(e)));
        }
        let mut exec = Exec::new(s.0.clone(), self.concurrency);
        for item in items.into_iter().flatten() {
            let kind = if item.change == Some(Change::Deleted) {
                JobKind::Delete
            } else {
                JobKind::Fetch {
                    change: true,
                    new: false,
                    repair: false,
                }
            };
            exec.submit(Job { item, kind }).await?;
        }
        let tally = exec.finish().await;
        // A change neither applied nor recorded as pending: the caller must not move the cursor.
        s.0.check_state()?;
        let mut warnings = Vec::new();
        if other > 0 {
            warnings.push(format!(
                "{other} change(s) of an unknown kind ignored (Change Notification 1.0.1 §3: created, updated, deleted)"
            ));
        }
        Ok(SyncReport {
            source: self.info.clone(),
            base_url: self.base.clone(),
            mode: Mode::Notification,
            dry_run: false,
            created: tally.created,
            updated: tally.updated,
            deleted: tally.deleted,
            kept: tally.kept,
            unchanged: tally.unchanged,
            repaired: tally.repaired,
            failed: tally.failed,
            bytes: tally.bytes,
            packages: 0,
            from_packages: 0,
            patched: tally.patched,
            seconds: started.elapsed().as_secs_f64(),
            cursor: None,
            failures: tally.failures,
            kept_uris: tally.kept_uris,
            planned: Vec::new(),
            warnings,
        })
    }
}
