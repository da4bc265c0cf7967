//! The sync engine (Z39.99-2014 §5.2): baseline from the Resource List, incremental from the
//! Change Lists after the cursor, and a baseline diff when the change history does not reach back
//! to the cursor.
//!
//! - **Baseline** (first run, §10.1, §10.2): the Resource List, every part of its index streamed
//!   one by one, is staged on disk, then merged with the state in URI order by the diff engine
//!   ([`resourcesync_diff::diff_sorted`]): creates and updates are fetched, deletes removed (with
//!   `--delete`) or remembered, the rest left alone. The same run then catches up from the
//!   Change Lists after the list's `at` ([`crate::sync::catch_up`]); the cursor becomes the last
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
//!   link is patched rather than fetched when the copy allows it ([`crate::fetch::patch`], §14.4).
//!   A Source with dumps and no list is synced from them alone (module `dump::only`,
//!   Z39.99-2017 §5.2).

mod ahead;
mod applier;
mod baseline;
pub mod catch_up;
mod extras;
mod incremental;
mod lists;
mod moved;

pub(crate) use applier::Applier;
pub(crate) use incremental::{Reading, incremental_with};

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use resourcesync_model::W3cDateTime;
use resourcesync_store::OffWorker;
use resourcesync_store::blocking::call;
use resourcesync_store::{Batch, Op, SourceCursor};

use crate::commit::{Budget, Committer, is_placeholder};
use crate::discover::discover;
use crate::discover::docs::DocFetcher;
use crate::discover::known::{Known, ListMemo, Quick, Validated, quick_start, start_key};
use crate::error::{Error, Result};
use crate::fetch::ctx::{Ctx, Memo, RunPorts};
use crate::fetch::exec::Exec;
use crate::fetch::repair::{Scan, check_page, next_damaged};
use crate::http::Http;
use crate::job::Job;
use crate::mapping::{UriMapper, base_url};
use crate::options::{CheckCopies, SyncOptions};
use crate::outcome::Tally;
use crate::plan::staging::Staging;
use crate::ports::Ports;
use crate::report::SourceInfo;
use crate::report::{Mode, Observer, SyncReport};

use lists::Lists;

/// Synchronizes a destination directory with a Source (see the module docs): the copies in
/// `opts.dest`, the state in SQLite ([`Ports::directory`]; read only for a dry run). A program
/// that keeps its copies or its state elsewhere builds a [`Destination`] from its own ports.
pub async fn sync(opts: &SyncOptions, obs: Arc<dyn Observer>) -> Result<SyncReport> {
    with_deadline(opts, async {
        let started = Instant::now();
        // `concurrency` is the ceiling of requests in flight per host (resourcesync_http::adaptive).
        let mut ho = opts.http.clone();
        ho.max_in_flight = ho.max_in_flight.min(opts.concurrency.max(1));
        let http = Arc::new(Http::new(ho)?);
        // A state from an earlier run may remember the Source (crate::discover::known).
        let earlier = opts.dest.is_dir() && opts.state_path().is_file();
        let mut ports = if earlier {
            Some(open_ports(opts)?)
        } else {
            None
        };
        let quick = match &ports {
            Some(p) => recall_source(p, &http, opts, obs.as_ref()).await?,
            None => None,
        };
        let info = match &quick {
            Some(q) => q.known.info.clone(),
            None => find_source(opts, &http, obs.as_ref()).await?,
        };
        // Nothing is created under DEST before the Source is found.
        let ports = match ports.take() {
            Some(p) => p,
            None => open_ports(opts)?,
        };
        run(&ports, http, info, quick, opts, obs, started).await
    })
    .await
}

async fn with_deadline<T>(
    opts: &SyncOptions,
    f: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, f)
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => f.await,
    }
}

/// The ports of `opts.dest`: read only for a dry run (nothing written under DEST).
fn open_ports(opts: &SyncOptions) -> Result<Ports> {
    // A DEST that exists is a directory (a new one is created).
    if opts.dest.exists() && !opts.dest.is_dir() {
        return Err(crate::error::not_a_directory(
            &opts.dest,
            "nothing can be synced into it (give a directory, new or existing, or move the \
             file away)",
        ));
    }
    let state = opts.state_path();
    if opts.dry_run {
        Ok(Ports::directory_read_only(&opts.dest, &state)?.0)
    } else {
        Ports::directory(&opts.dest, &state)
    }
}

/// A Destination of one Source: its URL, the [`Ports`] its copies and state go to, and the
/// HTTP client that fetches them. The engine behind [`sync()`], for programs that inject their
/// own store and state (any that pass `resourcesync_store::conformance`).
#[derive(Debug)]
pub struct Destination {
    url: String,
    ports: Ports,
    http: Arc<Http>,
}

impl Destination {
    /// A Destination of the Source at `url` (any URL discovery starts from, Z39.99-2014
    /// §6.3), keeping its copies and state in `ports`, fetching with `http`.
    pub fn new(url: impl Into<String>, ports: Ports, http: Http) -> Self {
        Destination {
            url: url.into(),
            ports,
            http: Arc::new(http),
        }
    }

    /// Its ports.
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// An audit of its copies against the Source (see [`crate::audit()`]), with the options of
    /// `opts` but its URL, its destination directory and its state path, which are the
    /// Destination's. Counts, fetches nothing, writes nothing.
    pub async fn audit(
        &self,
        opts: &crate::options::AuditOptions,
        obs: Arc<dyn Observer>,
    ) -> Result<crate::report::AuditReport> {
        let mut opts = opts.clone();
        opts.url.clone_from(&self.url);
        crate::audit::audit_ports(&self.ports, &opts, obs).await
    }

    /// One sync run (see the module docs), with the options of `opts` but its URL, its
    /// destination directory and its state path, which are the Destination's.
    pub async fn sync(&self, opts: &SyncOptions, obs: Arc<dyn Observer>) -> Result<SyncReport> {
        let mut opts = opts.clone();
        opts.url.clone_from(&self.url);
        let opts = &opts;
        with_deadline(opts, async {
            let started = Instant::now();
            let quick = recall_source(&self.ports, &self.http, opts, obs.as_ref()).await?;
            let info = match &quick {
                Some(q) => q.known.info.clone(),
                None => find_source(opts, &self.http, obs.as_ref()).await?,
            };
            run(
                &self.ports,
                self.http.clone(),
                info,
                quick,
                opts,
                obs,
                started,
            )
            .await
        })
        .await
    }
}

/// The Source as the state remembers it, checked with one round trip of conditional GETs
/// ([`crate::discover::known`]); `None` when there is nothing remembered, no cursor to go on
/// from, or anything unexpected: the Source is then discovered again.
async fn recall_source(
    ports: &Ports,
    http: &Arc<Http>,
    opts: &SyncOptions,
    obs: &dyn Observer,
) -> Result<Option<Quick>> {
    let start = start_key(&opts.url, opts.set.as_deref());
    let Some(known) = Known::recall(&call(|| ports.state.documents(&start))?) else {
        return Ok(None);
    };
    let cursor = call(|| ports.state.cursor(&known.info.key()))?;
    if cursor.and_then(|c| c.cursor).is_none() {
        return Ok(None);
    }
    obs.phase("discovery");
    // The bearer token goes to the host discovery starts from, as in discovery.
    http.trust_host_of(&opts.url);
    let f = DocFetcher {
        http: http.clone(),
        dir: ports.scratch.clone(),
        max_bytes: opts.max_document_bytes,
    };
    match quick_start(&f, known).await {
        Ok(q) if q.known.info.check_usable(opts.use_dumps, false).is_ok() => Ok(Some(q)),
        Ok(_) => Ok(None),
        Err(why) => {
            tracing::info!("{why}: the Source is discovered again");
            Ok(None)
        }
    }
}

/// A run, once the Source is found: the ports are written to only from here on.
async fn run(
    ports: &Ports,
    http: Arc<Http>,
    info: SourceInfo,
    quick: Option<Quick>,
    opts: &SyncOptions,
    obs: Arc<dyn Observer>,
    started: Instant,
) -> Result<SyncReport> {
    let fetcher = DocFetcher {
        http: http.clone(),
        dir: ports.scratch.clone(),
        max_bytes: opts.max_document_bytes,
    };
    let mut warnings = info.warnings.clone();
    for w in &warnings {
        obs.warning(w);
    }
    let (base, mapper) = mapping(opts, &info)?;
    let key = info.key();
    // A Capability List that moved: the copies carried over to the new one (crate::sync::moved).
    if let Some(old) = call(|| moved::carry_over(ports.state.as_ref(), opts, &key))? {
        let m = format!(
            "the Capability List moved from {old} to {key}: the copies are carried over, and this \
             run is a baseline against the new one's Resource List"
        );
        obs.warning(&m);
        warnings.push(m);
    }
    let prior_cursor = call(|| ports.state.cursor(&key))?;
    let cursor = prior_cursor.as_ref().and_then(|c| c.cursor);
    info.check_usable(opts.use_dumps, cursor.is_none())?;
    let mut plan = RunPlan::new(opts, &info, cursor, prior_cursor.is_some());
    plan.check = check_due(opts, prior_cursor.as_ref(), SystemTime::now());
    let check_started = W3cDateTime::now(false);
    let (memo, capability_list) = run_memo(&ports.scratch, &info, quick, &plan)?;
    let ctx = Arc::new(Ctx {
        ports: run_ports(ports, http, obs, opts, &key)?,
        mapper,
        key,
        delete: opts.delete,
        dry_run: opts.dry_run,
        max_resource_bytes: opts.max_resource_bytes,
        versions: opts.versions,
        state_path: ports.state_name.clone(),
        filter: opts.filter.fresh(),
        memo,
    });
    let l = Lists {
        ctx: &ctx,
        fetcher: &fetcher,
        opts,
        info: &info,
        plan: &plan,
    };
    let (mode, new_cursor, tally, checked) = l.run(&mut warnings).await?;
    if !opts.dry_run {
        crate::crashpoint::point("cursor");
        let known = Known {
            info: info.clone(),
            capability_list,
            top: None,
            open: None,
        };
        // Every copy checked by this run, or written by it (a first baseline): the schedule
        // starts again from when the run started; else the last check stands.
        let checked_at = if checked || cursor.is_none() {
            Some(check_started)
        } else {
            prior_cursor.and_then(|c| c.checked_at)
        };
        record_cursor(&ctx, opts, known, new_cursor, checked_at)?;
    }
    let mut versions = crate::report::VersionsKept::of(ctx.ports.committer.versions_kept());
    // Retention: the run's versions are recorded; nothing else writes this Source's now.
    if let Some(v) = versions.as_mut()
        && opts.keep_versions.prunes()
    {
        let (p, source, keep) = (ports.clone(), ctx.key.clone(), opts.keep_versions);
        v.pruned = tokio::task::spawn_blocking(move || {
            crate::retention::prune(&p, &source, keep, &W3cDateTime::now(true))
        })
        .await
        .map_err(|e| crate::error::Error::Task(e.to_string()))??;
    }
    let end = Ended {
        mode,
        tally,
        cursor: new_cursor,
        warnings,
        versions,
    };
    Ok(report(info, base, opts.dry_run, started, end))
}

/// The ports of a run's jobs: the client, the store, the state and the committer that puts
/// copies in place within the Source's quota.
fn run_ports(
    ports: &Ports,
    http: Arc<Http>,
    obs: Arc<dyn Observer>,
    opts: &SyncOptions,
    key: &str,
) -> Result<RunPorts> {
    // The one adapter of the sync/async rule (resourcesync_store::blocking): the run's async
    // code calls these ports like any method.
    let store = OffWorker::store(ports.store.clone());
    let state = OffWorker::records(ports.state.clone());
    Ok(RunPorts {
        http,
        store: store.clone(),
        state: state.clone(),
        obs,
        committer: Committer::start(
            store,
            state.clone(),
            Budget::of(opts.quota.as_ref(), state.as_ref(), key)?,
            opts.versions && !opts.dry_run,
        )?,
        downloads: ports.downloads.clone(),
    })
}

/// The memo a run starts with: the documents `quick` found, and a staging database for what
/// dump packages put in place when the `plan` has dumps (in `scratch`); and the Capability
/// List as read.
fn run_memo(
    scratch: &std::path::Path,
    info: &SourceInfo,
    quick: Option<Quick>,
    plan: &RunPlan,
) -> Result<(Memo, Validated)> {
    let dumped = if plan.resource_dump.is_some() || plan.change_dump.is_some() || plan.dumps_only {
        Some(Mutex::new(Staging::create(scratch)?))
    } else {
        None
    };
    let (lists, capability_list) = match quick {
        Some(q) => (
            ListMemo {
                top: q.known.top,
                open: q.known.open,
                prefetched: Some(q.prefetched),
            },
            q.known.capability_list,
        ),
        None => (
            ListMemo::default(),
            Validated {
                url: info.capability_list.clone().unwrap_or_default(),
                validators: None,
            },
        ),
    };
    let memo = Memo {
        dumped,
        first_dump: plan.cursor.is_none() && (plan.resource_dump.is_some() || plan.dumps_only),
        lists: Mutex::new(lists),
        ..Memo::default()
    };
    Ok((memo, capability_list))
}

/// Moves the cursor to `new_cursor` and remembers what this run found (`known`, with the
/// Change Lists its walks read: crate::discover::known) for the next one to start from, in
/// one transaction, once every change up to the cursor has been applied or recorded as
/// pending.
fn record_cursor(
    ctx: &Ctx,
    opts: &SyncOptions,
    mut known: Known,
    new_cursor: Option<W3cDateTime>,
    checked_at: Option<W3cDateTime>,
) -> Result<()> {
    let docs = {
        let m = ctx.memo.lists.lock().unwrap_or_else(|p| p.into_inner());
        known.top.clone_from(&m.top);
        known.open.clone_from(&m.open);
        known.remember()
    };
    let start = start_key(&opts.url, opts.set.as_deref());
    let c = SourceCursor {
        source: ctx.key.clone(),
        cursor: new_cursor,
        synced_at: Some(W3cDateTime::now(false)),
        checked_at,
    };
    ctx.ports.state.apply(
        Batch::new()
            .push(Op::SetCursor(&c))
            .push(Op::SetDocuments(&start, &docs)),
    )?;
    Ok(())
}

/// The Source's base URL (`--base-url`, else the rule of [`crate::mapping`]) and the mapper of
/// its URIs to paths under DEST.
fn mapping(opts: &SyncOptions, info: &SourceInfo) -> Result<(String, UriMapper)> {
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
    Ok((base, mapper))
}

/// Discovery, its documents in a temporary directory outside DEST: nothing is created under
/// DEST (no state, no scratch folder) before the Source is found, so a URL that does not answer
/// leaves an existing empty DEST empty and creates no DEST at all. Nothing to sync from is said
/// before anything is created under DEST either.
async fn find_source(
    opts: &SyncOptions,
    http: &Arc<Http>,
    obs: &dyn Observer,
) -> Result<SourceInfo> {
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
    info.check_usable(opts.use_dumps, false)?;
    Ok(info)
}

/// Whether a run checks every copy against the state (crate::fetch::repair): never on a dry
/// run, with checks off, or on a first baseline (every copy is written by it); else when asked
/// (`check_now`), or when the last completed check the state records (`prior`) is at least
/// `check_every` old at `now`, or none is recorded.
fn check_due(opts: &SyncOptions, prior: Option<&SourceCursor>, now: SystemTime) -> bool {
    let Some(prior) = prior.filter(|c| c.cursor.is_some()) else {
        return false;
    };
    if opts.dry_run || opts.check_copies == CheckCopies::Off {
        return false;
    }
    if opts.check_now {
        return true;
    }
    let Some(every) = opts.check_every else {
        return false;
    };
    match prior.checked_at {
        None => true,
        // A check recorded in the future (a clock set back) is taken as due.
        Some(t) => now
            .duration_since(SystemTime::from(t.timestamp()))
            .map_or(true, |age| age >= every),
    }
}

/// What a run reads, decided from what the Source offers and the cursor.
struct RunPlan {
    /// Whether every copy is checked ([`check_due`]).
    check: bool,
    /// The cursor of the previous run, if any.
    cursor: Option<W3cDateTime>,
    /// Whether the state had a row for the Source (a cursor, possibly empty).
    prior: bool,
    /// Z39.99-2017 §5.2: a Source with dumps and no list (crate::dump::only).
    dumps_only: bool,
    /// Z39.99-2014 §11: a first baseline from the Resource Dump (unless --no-dump).
    resource_dump: Option<String>,
    /// Z39.99-2014 §13: changes from the Change Dump first with --prefer-dumps.
    change_dump: Option<String>,
}

impl RunPlan {
    fn new(
        opts: &SyncOptions,
        info: &SourceInfo,
        cursor: Option<W3cDateTime>,
        prior: bool,
    ) -> Self {
        RunPlan {
            check: false,
            cursor,
            prior,
            dumps_only: info.resource_list.is_none() && info.change_list.is_none(),
            // A package holds every resource: with include/exclude patterns the lists are read
            // instead, and only the resources kept are fetched (crate::filter).
            resource_dump: info.resource_dump.clone().filter(|_| {
                cursor.is_none()
                    && opts.use_dumps
                    && !opts.dry_run
                    && (opts.filter.is_all() || info.resource_list.is_none())
            }),
            change_dump: info.change_dump.clone().filter(|_| {
                cursor.is_some()
                    && info.change_list.is_some()
                    && opts.prefer_dumps
                    && !opts.dry_run
                    && opts.filter.is_all()
            }),
        }
    }
}

/// Copies kept after earlier deletes (runs without --delete) go now that --delete is given.
/// Not the placeholders of copies a killed run put in place (crate::commit): the Source
/// may still list them; the diff or the Change Lists decide.
async fn delete_gone(ctx: &Arc<Ctx>, opts: &SyncOptions) -> Result<Tally> {
    if !opts.delete || opts.dry_run {
        return Ok(Tally::default());
    }
    let mut pre = Exec::new(ctx.clone(), opts.concurrency);
    let mut after: Option<String> = None;
    loop {
        // The rows kept after a delete alone (an index of them): none read when there are none.
        let page = ctx
            .ports
            .state
            .gone_page(&ctx.key, after.as_deref(), 1000)?;
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        for r in page.into_iter().filter(|r| r.gone && !is_placeholder(r)) {
            pre.submit(Job::delete(r.uri)).await?;
        }
    }
    Ok(pre.finish().await)
}

/// A Resource List needed and not offered: `then` says why it was needed and what to do.
fn need_rl(opts: &SyncOptions, info: &SourceInfo, then: String) -> Result<String> {
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
}

/// The copies on disk against the state (crate::fetch::repair): a damaged one is fetched again.
/// The copies `scan` noted are checked again; all of them when it gave up. Its counts, and
/// whether the check completed: every copy checked and every damaged one fetched again.
async fn repair(ctx: &Arc<Ctx>, opts: &SyncOptions, scan: Scan) -> Result<(Tally, bool)> {
    ctx.ports.obs.phase("checking the copies");
    let mut rex = Exec::new(ctx.clone(), opts.concurrency);
    let how = opts.check_copies;
    if let Some(rows) = scan.suspects().await? {
        let c = ctx.clone();
        let damaged = tokio::task::spawn_blocking(move || check_page(&c, &rows, how)).await?;
        refetch(&mut rex, damaged).await?;
    } else {
        let mut after = None;
        while let Some(damaged) = next_damaged(ctx, how, &mut after).await? {
            refetch(&mut rex, damaged).await?;
        }
    }
    let t = rex.finish().await;
    let complete = t.failed == 0;
    Ok((t, complete))
}

/// Fetches damaged copies again (a repair: neither a change nor a new resource), the verdicts'
/// jobs (crate::march).
async fn refetch(
    rex: &mut Exec,
    damaged: Vec<(crate::plan::staging::StagedItem, crate::march::Kind)>,
) -> Result<()> {
    for (item, kind) in damaged {
        if let crate::march::Kind::Damaged(why) = &kind {
            tracing::info!("{}: {why}: fetched again", item.uri);
        }
        if let Some(job) = crate::march::job(&kind, item) {
            rex.submit(job).await?;
        }
    }
    Ok(())
}

/// How a run ended: its mode, its counts, the cursor it set, and what it warned of.
struct Ended {
    mode: Mode,
    tally: Tally,
    cursor: Option<W3cDateTime>,
    warnings: Vec<String>,
    versions: Option<crate::report::VersionsKept>,
}

/// The report of a run.
fn report(
    source: SourceInfo,
    base_url: String,
    dry_run: bool,
    started: Instant,
    end: Ended,
) -> SyncReport {
    let Ended {
        mode,
        tally,
        cursor,
        warnings,
        versions,
    } = end;
    SyncReport {
        source,
        base_url,
        mode,
        dry_run,
        created: tally.created,
        updated: tally.updated,
        deleted: tally.deleted,
        extra_deleted: tally.extra_deleted,
        kept: tally.kept,
        unchanged: tally.unchanged,
        filtered: tally.filtered,
        repaired: tally.repaired,
        failed: tally.failed,
        bytes: tally.bytes,
        packages: tally.packages,
        from_packages: tally.from_packages,
        patched: tally.patched,
        shared: tally.shared,
        seconds: started.elapsed().as_secs_f64(),
        cursor: cursor.map(|c| c.to_string()),
        failures: tally.failures,
        kept_uris: tally.kept_uris,
        planned: tally.planned,
        warnings,
        versions,
    }
}
