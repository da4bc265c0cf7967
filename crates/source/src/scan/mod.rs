//! A scan: list the inventory, hash what changed, compare with the previous snapshot through the
//! diff engine, and record the new snapshot and its changes in one transaction.
//!
//! A file whose size and modification time are unchanged is not read again. A file that changes
//! while it is being hashed is read again (three tries), and never published with a digest of
//! content it no longer has; a file that cannot be read is reported and skipped, keeping its
//! previous state if it had one, so an unreadable file is not mistaken for a deleted one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use jiff::Timestamp;
use resourcesync_diff::{Item, needs_update};
use resourcesync_model::{Change, HashAlg, Hashes, W3cDateTime};

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Listed, Skipped};
pub use crate::state::rel_path;
use crate::state::{KnownRow, Recorder, Rendered, Resource, Rotation, State, now_us};
use crate::uri::path_bytes as key;

mod feed;
mod hash;
mod walk;
pub use feed::CURSOR_KEY;
use feed::Plan;
pub use hash::hash_stable;
use hash::{Chunk, Job};

/// How to scan.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Digests to compute (default md5).
    pub algs: Vec<HashAlg>,
    /// When to rotate Change Lists.
    pub rotation: Rotation,
    /// Hashing threads.
    pub threads: usize,
    /// Counters the scan updates as it goes, for a progress display (none by default).
    pub progress: Option<std::sync::Arc<ScanProgress>>,
    /// List every resource even when the inventory has a change feed and the state a cursor
    /// of it (default `false`: the feed's changes are applied). A feed sees what its backend
    /// records: a row removed from a table without a trace is found only by a full listing
    /// (see `scan/feed.rs`); the caller chooses when (a flag, every Nth run).
    pub full: bool,
    /// How often [`crate::Source::scan`] lists everything although the inventory has a change
    /// feed (default one hour): the first scan of a [`crate::Source`] always does, so `publish`
    /// (one scan) and a restarted `serve` always see rows removed without a trace; `serve`'s
    /// later rescans then use the feed until this much time has passed since the last listing.
    /// [`scan`] itself reads only [`ScanOptions::full`].
    pub full_every: std::time::Duration,
}

/// The default of [`ScanOptions::full_every`]: one hour.
pub const DEFAULT_FULL_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            algs: vec![HashAlg::Md5],
            rotation: Rotation::default(),
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            progress: None,
            full: false,
            full_every: DEFAULT_FULL_EVERY,
        }
    }
}

/// How far a scan is, updated as it goes and read from any thread (relaxed atomics: figures
/// for people, not synchronization).
#[derive(Debug, Default)]
pub struct ScanProgress {
    /// Whether the tree has been listed (until then `to_read` counts the files found so far:
    /// they are read while the listing goes on).
    pub listed: AtomicBool,
    /// Files to read and hash (new or changed since the previous snapshot), found so far.
    pub to_read: AtomicU64,
    /// Files read and hashed (or skipped) so far.
    pub read: AtomicU64,
    /// Bytes read and hashed so far.
    pub bytes_read: AtomicU64,
}

impl ScanProgress {
    fn start(&self) {
        self.listed.store(false, Ordering::Relaxed);
        self.to_read.store(0, Ordering::Relaxed);
        self.read.store(0, Ordering::Relaxed);
        self.bytes_read.store(0, Ordering::Relaxed);
    }
}

/// What a scan found.
#[derive(Debug, Clone, Default)]
pub struct ScanReport {
    /// Resources now.
    pub resources: u64,
    /// Created since the previous scan.
    pub created: u64,
    /// Updated (content differs).
    pub updated: u64,
    /// Deleted.
    pub deleted: u64,
    /// Files read and hashed.
    pub hashed: u64,
    /// Bytes read and hashed.
    pub bytes_hashed: u64,
    /// Bytes of every resource now (the sum of their lengths).
    pub bytes: u64,
    /// Files skipped, with reasons.
    pub skipped: Vec<Skipped>,
    /// Snapshot start.
    pub at: Option<W3cDateTime>,
    /// Snapshot end.
    pub completed: Option<W3cDateTime>,
    /// Whether this was the first snapshot: the baseline, recorded with no changes (see
    /// [`scan`]); `created` is then 0 and `resources` counts what the baseline holds.
    pub baseline: bool,
    /// Whether the changes came from the inventory's change feed (not a full listing).
    pub from_feed: bool,
}

impl ScanReport {
    /// Whether anything changed (changes were recorded).
    pub fn changed(&self) -> bool {
        self.created + self.updated + self.deleted > 0
    }

    /// Whether a new snapshot was recorded: something changed, or this was the baseline.
    pub fn new_snapshot(&self) -> bool {
        self.baseline || self.changed()
    }
}

/// The media type published for a path (from its extension).
pub fn mime_type(p: &Path) -> String {
    mime_guess::from_path(p)
        .first_raw()
        .unwrap_or("application/octet-stream")
        .to_owned()
}

fn item(r: &Resource) -> Item {
    Item {
        uri: r.uri.clone(),
        length: Some(r.length),
        lastmod: Some(r.lastmod),
        hashes: r.hashes.clone(),
    }
}

/// Listed entries sent at a time from the listing's thread to the merge (a chunk stays under
/// 64 KiB: the allocator consolidates its free lists whenever a larger block is freed, and
/// chunks are freed on the merge's thread, one per chunk).
const LISTING_CHUNK: usize = 512;

/// Chunks the listing may run ahead of the merge (bounded memory: at most this many chunks
/// are held, however large the inventory).
const LISTING_CHUNKS_AHEAD: usize = 32;

/// Sends a listing's entries in chunks, returning the problems it reported. An entry out of
/// order (not after the previous one: a bug of the backend) is an error: merged with the
/// previous snapshot, such a listing would make every file after it look deleted, so nothing
/// is recorded from it. Stops when the receiver is gone.
fn stream_listing(
    listing: crate::inventory::Listing<'_>,
    tx: &std::sync::mpsc::SyncSender<Vec<Listed>>,
) -> Result<Vec<Skipped>> {
    let mut skipped = Vec::new();
    let mut chunk = Vec::with_capacity(LISTING_CHUNK);
    let mut last: Vec<u8> = Vec::new();
    let mut first = true;
    for e in listing {
        let l = match e {
            Ok(l) => l,
            Err(s) if s.is_listing_broken() => {
                return Err(Error::Inventory(format!(
                    "the listing broke off: {} (nothing recorded)",
                    s.reason
                )));
            }
            Err(s) => {
                skipped.push(s);
                continue;
            }
        };
        let k = key(&l.rel);
        if !first && k.as_ref() <= last.as_slice() {
            return Err(Error::Inventory(format!(
                "{} listed after {}: not in path order (nothing recorded)",
                l.rel.display(),
                String::from_utf8_lossy(&last)
            )));
        }
        first = false;
        last.clear();
        last.extend_from_slice(&k);
        chunk.push(l);
        if chunk.len() == LISTING_CHUNK {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(LISTING_CHUNK));
            if tx.send(full).is_err() {
                return Ok(skipped);
            }
        }
    }
    if !chunk.is_empty() {
        let _ = tx.send(chunk);
    }
    Ok(skipped)
}

/// Rows of the previous snapshot read at a time (one query each, in path order).
const KNOWN_PAGE: usize = 4096;

/// The previous snapshot in path order, a page at a time from the scan's transaction (see
/// [`Recorder::known_page`]). An error ends it and is kept in `error` (the scan then stops).
struct KnownPages<'r, 'c> {
    rec: &'r Recorder<'c>,
    /// The rows of the page not yet given, the next one last (one buffer for every page:
    /// a page is large, and allocating and freeing one each time costs more than reading it).
    page: Vec<KnownRow>,
    last: Option<Vec<u8>>,
    done: bool,
    error: &'r std::cell::RefCell<Option<Error>>,
}

impl Iterator for KnownPages<'_, '_> {
    type Item = KnownRow;

    fn next(&mut self) -> Option<KnownRow> {
        if let Some(k) = self.page.pop() {
            return Some(k);
        }
        if self.done {
            return None;
        }
        self.page.reserve(KNOWN_PAGE);
        if let Err(e) = self
            .rec
            .known_page(self.last.as_deref(), KNOWN_PAGE, &mut self.page)
        {
            *self.error.borrow_mut() = Some(e);
            self.done = true;
            return None;
        }
        self.done = self.page.len() < KNOWN_PAGE;
        if let Some(k) = self.page.last() {
            let last = self.last.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(&k.path);
        }
        self.page.reverse();
        self.page.pop()
    }
}

/// Files a hashing thread takes at a time, and hands back in one message (one wake-up of the
/// recording thread per batch, not per file).
const BATCH: usize = 64;

/// Batches in flight per hashing thread (sent and not yet recorded): the most files the scan
/// holds is this times [`BATCH`] times the threads, however large the inventory.
const BATCHES_PER_THREAD: usize = 4;

/// The most bytes of Resource List entries rendered along with a scan and spooled for the
/// publish that follows (on disk beside the state; past it the publish reads the state).
const MAX_RENDERED_BYTES: u64 = 1 << 30;

/// What the recording thread keeps while a scan streams: counts, the entries rendered along,
/// the batches done early.
struct Recording<'r, 'c> {
    rec: &'r Recorder<'c>,
    baseline: bool,
    progress: Option<&'r ScanProgress>,
    report: ScanReport,
    /// Rows written, unchanged files kept, known files that could not be read (their
    /// previous rows stay), and the bytes of the last two.
    puts: u64,
    kept: u64,
    kept_bytes: u64,
    unread: u64,
    unread_bytes: u64,
    /// Deletions queued, and the bytes of the rows they remove.
    deleted: u64,
    deleted_bytes: u64,
    /// Whether every resource of the new snapshot so far passed through the hashing threads
    /// and had its entry rendered (then `lines` holds them, once there is one).
    rendering: bool,
    lines: Option<Rendered>,
    spool_dir: &'r Path,
    /// Batches done before their turn (at most the batches in flight), and whose turn it is.
    early: std::collections::BTreeMap<usize, Chunk>,
    turn: usize,
}

impl<'r, 'c> Recording<'r, 'c> {
    fn new(
        rec: &'r Recorder<'c>,
        baseline: bool,
        progress: Option<&'r ScanProgress>,
        from_feed: bool,
        spool_dir: &'r Path,
    ) -> Self {
        Recording {
            rec,
            baseline,
            progress,
            report: ScanReport {
                baseline,
                from_feed,
                ..ScanReport::default()
            },
            puts: 0,
            kept: 0,
            kept_bytes: 0,
            unread: 0,
            unread_bytes: 0,
            deleted: 0,
            deleted_bytes: 0,
            // Only a listing passes every resource through the hashing threads.
            rendering: !from_feed,
            lines: None,
            spool_dir,
            early: Default::default(),
            turn: 0,
        }
    }

    /// The resources of the new snapshot, and their bytes when a feed's scan must take them
    /// from the state. A listing passed every resource; a feed only those it changed: the
    /// others are counted in the state (rows deleted are still there until recorded).
    fn resources_now(&self, from_feed: bool) -> Result<(u64, Option<u64>)> {
        if !from_feed {
            return Ok((self.kept + self.puts + self.unread, None));
        }
        let (rows, bytes) = self.rec.totals()?;
        Ok((
            rows.saturating_sub(self.deleted),
            Some(bytes.saturating_sub(self.deleted_bytes)),
        ))
    }

    /// A known resource not listed: its deletion queued.
    fn gone(&mut self, k: &KnownRow) -> Result<()> {
        self.rec.queue_change(&k.path, &Change::Deleted)?;
        self.deleted += 1;
        self.deleted_bytes += k.length;
        Ok(())
    }

    /// A known resource listed unchanged: kept as it is.
    fn keep(&mut self, k: &KnownRow) {
        self.kept += 1;
        self.kept_bytes += k.length;
        self.stop_rendering();
    }
}

impl Recording<'_, '_> {
    /// No entries rendered along for this snapshot: the publish reads the state.
    fn stop_rendering(&mut self) {
        self.rendering = false;
        self.lines = None;
    }

    /// Takes a batch done by a hashing thread; records those whose turn has come, in order.
    fn accept(&mut self, chunk: Chunk) -> Result<()> {
        if chunk.panicked {
            return Err(Error::Task("a hashing thread panicked".into()));
        }
        self.early.insert(chunk.index, chunk);
        while let Some(chunk) = self.early.remove(&self.turn) {
            self.turn += 1;
            self.record(chunk)?;
            crate::crashpoint::point("scan-batch");
        }
        Ok(())
    }

    /// Records a batch: each file's row and the change it is, its entry when rendered.
    fn record(&mut self, chunk: Chunk) -> Result<()> {
        // The batch's entries, each ending where `ends` says (one per file rendered).
        let mut ends = chunk.ends.iter();
        let mut start = 0usize;
        for (job, out) in chunk.items {
            if let Some(pr) = self.progress {
                pr.read.fetch_add(1, Ordering::Relaxed);
                if let Ok(p) = &out {
                    pr.bytes_read
                        .fetch_add(p.resource.length, Ordering::Relaxed);
                }
            }
            let p = match out {
                Ok(p) => p,
                // Unreadable or unstable: skipped; a previous state, if any, is kept as it
                // was (and so is not in the rendered entries: render from the state).
                Err(reason) => {
                    if let Some(length) = job.known {
                        self.stop_rendering();
                        self.unread += 1;
                        self.unread_bytes += length;
                    }
                    self.report.skipped.push(Skipped {
                        path: job.rel,
                        reason,
                    });
                    continue;
                }
            };
            self.report.hashed += 1;
            self.report.bytes_hashed += p.resource.length;
            let change = match job.known {
                None if self.baseline => None,
                None => Some(Change::Created),
                // Read before the new row replaces it.
                Some(_) => match self.rec.resource_by_path(&p.resource.path)? {
                    None if self.baseline => None,
                    None => Some(Change::Created),
                    Some(o) => needs_update(&item(&o), &item(&p.resource)).map(|_| Change::Updated),
                },
            };
            self.rec.put(&p.resource)?;
            self.puts += 1;
            if let Some(c) = change {
                self.rec.queue_change(&p.resource.path, &c)?;
            }
            let line = p.rendered.then(|| ends.next()).flatten().and_then(|&end| {
                let line = chunk.text.get(start..end);
                start = end;
                line
            });
            if !self.rendering {
                continue;
            }
            let Some(line) = line else {
                self.stop_rendering();
                continue;
            };
            if self.lines.is_none() {
                self.lines = Some(Rendered::new_in(self.spool_dir)?);
            }
            let pushed = match &mut self.lines {
                Some(r) if r.bytes() + line.len() as u64 <= MAX_RENDERED_BYTES => r.push(line)?,
                _ => false,
            };
            if !pushed {
                self.stop_rendering();
            }
        }
        Ok(())
    }
}

/// Scans `inv`, records the snapshot and its changes in `state`, and reports.
///
/// The first snapshot (no snapshot recorded before) is the baseline and records no change: its
/// Resource List, whose `at` guarantees every resource state up to then (Z39.99-2017 §7), is
/// what a Destination starts from (§5.2, Baseline Synchronization), and a Change List describes
/// the changes after it (§5.1, Describing Changes: "since the most recent publication of a
/// Resource List"; §7 and §12.1, `from`). The first Change List period opens at that snapshot's
/// `at` and stays empty until something changes; listing every resource as `created` there
/// would repeat the Resource List, not describe a change.
///
/// Memory does not grow with the inventory: the listing streams from a thread of its own; the
/// previous snapshot is read a page at a time in path order; the two are merged through the
/// diff engine's merge ([`merge_by`]) as they come: a file known with the same size, time and
/// digests is unchanged (not read again), any other listed file goes to the hashing threads
/// in batches (a bounded number in flight), a known file not listed is gone. This thread
/// records the hashed files' rows in path order as their batches come back ([`needs_update`]
/// deciding updates), queueing the changes in the state, and at the end records the snapshot
/// and the changes (creations and updates in path order, then deletions in path order, all at
/// the scan's end), all in the one transaction (so a crash leaves the previous state or the
/// new one). When every resource of the new snapshot passes through the hashing threads, their
/// Resource List entries are serialized along and spooled to a file, kept in `state` for the
/// [`crate::publish::publish`] that follows, which then need not read the snapshot back.
pub fn scan(
    inv: &dyn Inventory,
    state: &mut State,
    base: &str,
    opts: &ScanOptions,
) -> Result<ScanReport> {
    state.clear_rendered();
    let progress = opts.progress.as_deref();
    if let Some(p) = progress {
        p.start();
    }
    let at_ts = now_us();
    let at = whole_second(at_ts);
    // With no resource recorded, every file listed is read and hashed (which gives its size
    // and time): the listing need not find them (no `stat` per file).
    // An inventory whose listed digests are trusted is listed whole: its records may be
    // recorded as listed.
    let has_resources = state.has_resources()?;
    let wanted = Wanted {
        trusted: inv.listed_digests_trusted(),
        mask: crate::state::alg_mask(&opts.algs),
        algs: &opts.algs,
    };
    let baseline = state.last_snapshot()?.is_none();
    let recorded = state.meta(CURSOR_KEY)?.filter(|c| !c.is_empty());
    let (plan, next_cursor) = feed::plan(
        inv,
        recorded.as_deref(),
        opts.full || baseline,
        !has_resources && !wanted.trusted,
    )?;
    let from_feed = matches!(plan, Plan::Feed(_));
    let spool_dir = state.dir().to_owned();
    let rec = state.begin()?;
    rec.clear_queued()?;
    let mut r = Recording::new(&rec, baseline, progress, from_feed, &spool_dir);
    let walked = walk::Walk {
        inv,
        base,
        opts,
        rec: &rec,
        has_resources,
        wanted: &wanted,
    };
    let mut skipped = walked.run(plan, &mut r)?;
    skipped.append(&mut r.report.skipped);

    let completed_ts = now_us();
    let completed = whole_second(completed_ts);
    let (count, feed_bytes) = r.resources_now(from_feed)?;
    let nothing_new = r.puts == 0 && r.deleted == 0 && !baseline;
    // An unchanged tree keeps its snapshot (and so its published Resource List): its `at` still
    // guarantees every resource state up to then, and nothing changed since.
    let snapshot = if nothing_new {
        None
    } else {
        Some(rec.snapshot(&at, &completed, count)?)
    };
    rec.ensure_period(completed_ts, opts.rotation)?;
    let mut report = std::mem::take(&mut r.report);
    record_changes(&rec, &mut report, completed_ts, opts.rotation)?;
    let (lines, rendering) = (r.lines.take(), r.rendering);
    let (kept_bytes, unread_bytes) = (r.kept_bytes, r.unread_bytes);
    drop(r);
    store_cursor(&rec, recorded.as_ref(), next_cursor.as_ref())?;
    rec.commit()?;
    if let (Some(id), Some(lines), true) = (snapshot, lines, rendering) {
        state.stash_rendered(id, lines);
    }
    report.resources = count;
    report.bytes = feed_bytes.unwrap_or(kept_bytes + report.bytes_hashed + unread_bytes);
    report.skipped = skipped;
    report.at = Some(at);
    report.completed = Some(completed);
    Ok(report)
}

/// A time as a W3C Datetime to the second.
fn whole_second(ts: Timestamp) -> W3cDateTime {
    W3cDateTime::from_timestamp(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// The digests a scan records, and whether those an inventory lists may be recorded as listed.
struct Wanted<'o> {
    /// The inventory's listed digests are its own (see [`Inventory::listed_digests_trusted`]).
    trusted: bool,
    /// The algorithms to record, as a mask of [`crate::state::alg_mask`].
    mask: u8,
    algs: &'o [HashAlg],
}

impl Wanted<'_> {
    /// The record as listed, for a job whose digests need not be computed.
    fn as_listed(&self, l: &Listed) -> Option<(u64, i128, Hashes)> {
        (self.trusted && crate::state::alg_mask(&l.hashes.known_algs()) & self.mask == self.mask)
            .then(|| {
                let kept = l.hashes.0.iter().filter(|d| self.algs.contains(&d.alg));
                (l.len, l.mtime_ns, Hashes(kept.cloned().collect()))
            })
    }

    /// The job that reads (or records as listed) the resource `l`, known before at `known`
    /// bytes.
    fn job(&self, l: Listed, known: Option<u64>) -> Job {
        Job {
            listed: self.as_listed(&l),
            rel: l.rel,
            known,
            via: l.via,
        }
    }
}

/// Records the changes queued in the scan: counted in `report`, a deleted resource's row
/// removed, each in its Change List.
fn record_changes(
    rec: &Recorder<'_>,
    report: &mut ScanReport,
    completed_ts: Timestamp,
    rotation: Rotation,
) -> Result<()> {
    rec.record_queued(|res, c| {
        match c {
            Change::Created => report.created += 1,
            Change::Deleted => {
                rec.remove(&res.path)?;
                report.deleted += 1;
            }
            _ => report.updated += 1,
        }
        rec.record_change(c, &res, completed_ts, rotation)
            .map(|_| ())
    })
}

/// The change feed's cursor after the scan, written only when it moved (a scan that finds
/// nothing new writes nothing).
fn store_cursor(
    rec: &Recorder<'_>,
    recorded: Option<&String>,
    next: Option<&String>,
) -> Result<()> {
    match next {
        Some(c) if recorded != Some(c) => rec.set_meta(CURSOR_KEY, c),
        None if recorded.is_some() => rec.remove_meta(CURSOR_KEY),
        _ => Ok(()),
    }
}

/// The error when the hashing threads ended with batches still out (one panicked and the
/// others stopped: not expected).
fn hashers_gone() -> Error {
    Error::Task("the hashing threads stopped".into())
}

#[cfg(test)]
mod tests;
