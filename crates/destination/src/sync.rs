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

use resourcesync_diff::{Action, Item};
use resourcesync_model::{Capability, Change, Entry, Header, W3cDateTime};
use resourcesync_store::{FsStore, SourceCursor, SqliteState, StateStore};

use crate::commit::Committer;
use crate::discover::{SourceInfo, discover};
use crate::docs::{DocFetcher, ListSink, WalkInfo, walk};
use crate::error::{Error, Result};
use crate::exec::{Ctx, Exec, Job, JobKind, Outcome, Tally, record_item};
use crate::http::Http;
use crate::mapping::{UriMapper, base_url};
use crate::options::SyncOptions;
use crate::repair::{CheckCopies, next_damaged};
use crate::report::{Mode, Observer, SyncReport};
use crate::staging::{StagedItem, Staging};

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
