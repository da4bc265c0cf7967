//! A scan: list the inventory, hash what changed, compare with the previous snapshot through the
//! diff engine, and record the new snapshot and its changes in one transaction.
//!
//! A file whose size and modification time are unchanged is not read again. A file that changes
//! while it is being hashed is read again (three tries), and never published with a digest of
//! content it no longer has; a file that cannot be read is reported and skipped, keeping its
//! previous state if it had one, so an unreadable file is not mistaken for a deleted one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use jiff::Timestamp;
use resourcesync_diff::{Item, Merged, merge_by, needs_update};
use resourcesync_model::writer::entry_xml;
use resourcesync_model::{Change, Entry, HashAlg, Hashes, MultiHasher, Root, W3cDateTime};

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Listed, Skipped};
pub use crate::state::rel_path;
use crate::state::{Known, Rendered, Resource, Rotation, State, now_us};
use crate::uri::path_bytes as key;
use crate::uri::path_to_uri;

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
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            algs: vec![HashAlg::Md5],
            rotation: Rotation::default(),
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            progress: None,
        }
    }
}

/// How far a scan is, updated as it goes and read from any thread (relaxed atomics: figures
/// for people, not synchronization).
#[derive(Debug, Default)]
pub struct ScanProgress {
    /// Whether the tree has been listed (until then `to_read` is not known).
    pub listed: AtomicBool,
    /// Files to read and hash (new or changed since the previous snapshot).
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

/// Second-precision `<lastmod>` from a modification time (what Python clients parse).
pub fn lastmod_of(mtime_ns: i128) -> W3cDateTime {
    let secs = (mtime_ns / 1_000_000_000) as i64;
    W3cDateTime::from_timestamp(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Hashes a file, re-reading it when it changed meanwhile (three tries). `buf` is a read buffer
/// reused across calls. `Err` carries the reason to skip it.
pub fn hash_stable(
    inv: &dyn Inventory,
    rel: &Path,
    algs: &[HashAlg],
    buf: &mut Vec<u8>,
) -> std::result::Result<(u64, i128, Hashes), String> {
    for _ in 0..3 {
        let mut h = MultiHasher::new(algs);
        let stable = inv
            .read_stable(rel, buf, &mut |d| h.update(d))
            .map_err(|e| e.to_string())?;
        if let Some((len, mtime)) = stable {
            if h.length() == len {
                return Ok((len, mtime, h.finish()));
            }
        }
    }
    Err("changed while being read, three times; skipped until it settles".into())
}

fn item(r: &Resource) -> Item {
    Item {
        uri: r.uri.clone(),
        length: Some(r.length),
        lastmod: Some(r.lastmod),
        hashes: r.hashes.clone(),
    }
}

/// One file as a hashing thread prepared it: its row and, when the Resource List is rendered
/// along (see [`scan`]), whether its entry was serialized (appended to its chunk's text).
struct Prepared {
    resource: Resource,
    rendered: bool,
}

/// What became of one file given to the hashing threads: prepared, or why it was skipped.
type Outcome = std::result::Result<Prepared, String>;

/// A chunk of files as a hashing thread hands it over: its number, each file's outcome, and
/// the serialized entries of those rendered, end to end (one buffer per chunk, not one per
/// file), with where each ends.
struct Chunk {
    index: usize,
    outcomes: Vec<Outcome>,
    text: String,
    ends: Vec<usize>,
}

/// The most bytes of Resource List entries rendered along with a scan and kept for the publish
/// that follows; past it the publish reads the state instead (memory stays bounded for huge
/// trees).
const MAX_RENDERED_BYTES: usize = 256 << 20;

/// Bytes reserved per entry rendered along (most are shorter; a longer one grows the buffer).
const LINE_ESTIMATE: usize = 256;

/// Files a hashing thread takes at a time, and hands over in one message (one wake-up of the
/// recording thread per chunk, not per file).
const CHUNK: usize = 64;

/// Hashes one listed file and prepares its row; when `render`, appends its entry to `text`
/// (nothing when it cannot be written: left to the publish, which reports it).
fn prepare(
    inv: &dyn Inventory,
    base: &str,
    rel: &Path,
    algs: &[HashAlg],
    render: Option<&mut String>,
    buf: &mut Vec<u8>,
) -> Outcome {
    let uri = path_to_uri(base, rel).ok_or_else(|| "no URI for this path".to_owned())?;
    let (length, mtime_ns, hashes) = hash_stable(inv, rel, algs, buf)?;
    let mut resource = Resource {
        path: key(rel).into_owned(),
        uri,
        length,
        mtime_ns,
        lastmod: lastmod_of(mtime_ns),
        mime_type: Some(mime_type(rel)),
        hashes,
    };
    let mut rendered = false;
    if let Some(text) = render {
        // The entry `resource_entry` builds, with the row's strings moved in and back out
        // (not cloned per file).
        let mut e = Entry::new(std::mem::take(&mut resource.uri));
        e.lastmod = Some(resource.lastmod);
        let md = e.md_mut();
        if !resource.hashes.is_empty() {
            md.hash = Some(std::mem::take(&mut resource.hashes));
        }
        md.length = Some(resource.length);
        md.mime_type = resource.mime_type.take();
        let start = text.len();
        // The Resource List's root and (no) extra namespaces, as `publish` writes it.
        rendered = entry_xml(text, "resourcelist", Root::UrlSet, &[], &e).is_ok();
        if !rendered {
            text.truncate(start);
        }
        resource.uri = std::mem::take(&mut e.loc);
        if let Some(md) = e.md.as_mut() {
            if let Some(h) = md.hash.take() {
                resource.hashes = h;
            }
            resource.mime_type = md.mime_type.take();
        }
    }
    Ok(Prepared { resource, rendered })
}

/// The previous snapshot as the merge needs it (see [`State::for_each_known`]), read into
/// memory while the tree is listed: the paths end to end in one buffer, a fixed-size row
/// per resource.
#[derive(Default)]
struct KnownRows {
    paths: Vec<u8>,
    /// (end of the path in `paths`, length, modification time, digests present).
    rows: Vec<(usize, u64, i128, u8)>,
}

impl KnownRows {
    fn read(state: &State) -> Result<Self> {
        let mut k = KnownRows::default();
        state.for_each_known(|r| {
            k.paths.extend_from_slice(r.path);
            k.rows.push((k.paths.len(), r.length, r.mtime_ns, r.algs));
            Ok(())
        })?;
        Ok(k)
    }

    /// The rows in path order.
    fn iter(&self) -> impl Iterator<Item = Known<'_>> {
        let mut start = 0;
        self.rows.iter().map(move |&(end, length, mtime_ns, algs)| {
            let path = &self.paths[start..end];
            start = end;
            Known {
                path,
                length,
                mtime_ns,
                algs,
            }
        })
    }
}

/// Listed entries sent at a time from the listing's thread to the merge.
const LISTING_CHUNK: usize = 1024;

/// Chunks the listing may run ahead of the merge (bounded memory: at most this many chunks
/// are held, however large the inventory).
const LISTING_CHUNKS_AHEAD: usize = 16;

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

/// What the merge of the listing with the previous snapshot gives: the files to hash (with
/// whether they were known), the count and bytes of those unchanged, the paths gone.
type MergeOutcome = (Vec<(PathBuf, bool)>, u64, u64, Vec<Vec<u8>>);

/// Merges the listing with the previous snapshot in path order through the diff engine's
/// merge ([`merge_by`]): a file known with the same size, time and digests (`want`) is
/// unchanged (not read again); any other listed file is to hash; a known file not listed is
/// gone. Only the size, time and digests present are compared here; full rows are read for
/// changed and deleted files only, and [`needs_update`] decides after hashing.
fn merge(known: &KnownRows, listed: impl Iterator<Item = Listed>, want: u8) -> MergeOutcome {
    let mut jobs: Vec<(PathBuf, bool)> = Vec::new();
    let (mut kept, mut kept_bytes) = (0u64, 0u64);
    let mut deleted_paths: Vec<Vec<u8>> = Vec::new();
    for step in merge_by(known.iter(), listed, |k, l| {
        k.path.cmp(key(&l.rel).as_ref())
    }) {
        match step {
            Merged::Left(k) => deleted_paths.push(k.path.to_vec()),
            Merged::Right(l) => jobs.push((l.rel, false)),
            Merged::Both(k, l) => {
                if k.length == l.len && k.mtime_ns == l.mtime_ns && k.algs & want == want {
                    kept += 1;
                    kept_bytes += k.length;
                } else {
                    jobs.push((l.rel, true));
                }
            }
        }
    }
    (jobs, kept, kept_bytes, deleted_paths)
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
/// The phases overlap: hashing threads take the files in path order and prepare each one's
/// row (and, when every resource of the new snapshot passes through them, its Resource List
/// entry); this thread records the rows in path order as they come, in the one transaction
/// that also records the snapshot and its changes (so a crash leaves the previous state or the
/// new one). Entries rendered along are kept in `state` for the [`crate::publish::publish`]
/// that follows, which then need not read the snapshot back.
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
    let at =
        W3cDateTime::from_timestamp(Timestamp::from_second(at_ts.as_second()).unwrap_or(at_ts));
    // With no resource recorded, every file listed is read and hashed (which gives its size
    // and time): the listing need not find them (no `stat` per file).
    let has_resources = state.has_resources()?;
    let listing = if has_resources {
        inv.list()?
    } else {
        inv.list_names()?
    };
    let want = crate::state::alg_mask(&opts.algs);
    let (jobs, kept, kept_bytes, deleted_paths, mut skipped) = {
        let state = &*state;
        std::thread::scope(|s| -> Result<_> {
            // The listing streams on a thread of its own, a bounded number of chunks ahead,
            // while this one reads the previous snapshot, then merges the two.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Listed>>(LISTING_CHUNKS_AHEAD);
            let lister = s.spawn(move || stream_listing(listing, &tx));
            let known = if has_resources {
                KnownRows::read(state)
            } else {
                Ok(KnownRows::default())
            };
            let merged = match known {
                Ok(known) => Ok(merge(&known, rx.into_iter().flatten(), want)),
                Err(e) => {
                    // A lister still sending stops.
                    drop(rx);
                    Err(e)
                }
            };
            let skipped = lister
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            let (jobs, kept, kept_bytes, deleted_paths) = merged?;
            Ok((jobs, kept, kept_bytes, deleted_paths, skipped))
        })?
    };
    if let Some(p) = progress {
        p.to_read.store(jobs.len() as u64, Ordering::Relaxed);
        p.listed.store(true, Ordering::Relaxed);
    }
    // The previous state of files that changed or went away.
    let mut old: Vec<Option<Resource>> = Vec::with_capacity(jobs.len());
    for (rel, known) in &jobs {
        old.push(if *known {
            state.resource_by_path(&key(rel))?
        } else {
            None
        });
    }
    let mut deleted = Vec::with_capacity(deleted_paths.len());
    for p in &deleted_paths {
        if let Some(r) = state.resource_by_path(p)? {
            deleted.push(r);
        }
    }
    let baseline = state.last_snapshot()?.is_none();
    // The Resource List can be rendered along when every resource of the new snapshot passes
    // through the hashing threads (nothing kept unchanged from the previous snapshot).
    let render = kept == 0;

    let mut report = ScanReport {
        baseline,
        ..ScanReport::default()
    };
    let rec = state.begin()?;
    let mut puts = 0u64;
    // Known files that could not be read: their previous rows stay in the snapshot.
    let mut unread = 0u64;
    let mut unread_bytes = 0u64;
    let mut changes: Vec<(Change, Resource)> = Vec::new();
    // Sized up front (address space only: pages are touched as the text grows), so that the
    // text is not copied as it grows.
    let mut lines: Option<Rendered> = render.then(|| Rendered {
        text: String::with_capacity(
            jobs.len()
                .saturating_mul(LINE_ESTIMATE)
                .min(MAX_RENDERED_BYTES),
        ),
        ends: Vec::with_capacity(jobs.len()),
    });
    let next_chunk = AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<Chunk>();
    std::thread::scope(|s| -> Result<()> {
        let rx = rx;
        for _ in 0..opts.threads.max(1) {
            let tx = tx.clone();
            let (jobs, next_chunk) = (&jobs, &next_chunk);
            s.spawn(move || {
                let mut buf = Vec::new();
                loop {
                    let c = next_chunk.fetch_add(1, Ordering::Relaxed);
                    let start = c.saturating_mul(CHUNK);
                    let Some(chunk) = jobs.get(start..jobs.len().min(start + CHUNK)) else {
                        break;
                    };
                    if chunk.is_empty() {
                        break;
                    }
                    let mut text =
                        String::with_capacity(if render { CHUNK * LINE_ESTIMATE } else { 0 });
                    let mut ends = Vec::with_capacity(if render { CHUNK } else { 0 });
                    let outcomes = chunk
                        .iter()
                        .map(|(rel, _)| {
                            let out = prepare(
                                inv,
                                base,
                                rel,
                                &opts.algs,
                                render.then_some(&mut text),
                                &mut buf,
                            );
                            if matches!(out, Ok(Prepared { rendered: true, .. })) {
                                ends.push(text.len());
                            }
                            out
                        })
                        .collect();
                    let chunk = Chunk {
                        index: c,
                        outcomes,
                        text,
                        ends,
                    };
                    // The receiver is gone when recording failed: stop.
                    if tx.send(chunk).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Chunks arrive nearly in order (the threads take them in order): the few early ones
        // wait here until their turn.
        let mut early: std::collections::BTreeMap<usize, Chunk> = Default::default();
        let mut turn = 0usize;
        for chunk in rx {
            early.insert(chunk.index, chunk);
            while let Some(chunk) = early.remove(&turn) {
                let first = turn * CHUNK;
                turn += 1;
                // This chunk's entries, each ending where `ends` says (one per file rendered).
                let mut ends = chunk.ends.iter();
                let mut start = 0usize;
                for (i, out) in (first..).zip(chunk.outcomes) {
                    if let Some(pr) = progress {
                        pr.read.fetch_add(1, Ordering::Relaxed);
                        if let Ok(p) = &out {
                            pr.bytes_read
                                .fetch_add(p.resource.length, Ordering::Relaxed);
                        }
                    }
                    match out {
                        Ok(p) => {
                            report.hashed += 1;
                            report.bytes_hashed += p.resource.length;
                            rec.put(&p.resource)?;
                            puts += 1;
                            let line = p.rendered.then(|| ends.next()).flatten().and_then(|&end| {
                                let line = chunk.text.get(start..end);
                                start = end;
                                line
                            });
                            match (&mut lines, line) {
                                (Some(r), Some(line))
                                    if r.text.len() + line.len() <= MAX_RENDERED_BYTES =>
                                {
                                    r.text.push_str(line);
                                    r.ends.push(r.text.len());
                                }
                                _ => lines = None,
                            }
                            let change = match &old[i] {
                                None if baseline => None,
                                None => Some(Change::Created),
                                Some(o) => needs_update(&item(o), &item(&p.resource))
                                    .map(|_| Change::Updated),
                            };
                            if let Some(c) = change {
                                changes.push((c, p.resource));
                            }
                        }
                        // Unreadable or unstable: skipped; a previous state, if any, is kept as it
                        // was (and so is not in the rendered entries: render from the state).
                        Err(reason) => {
                            if jobs[i].1 {
                                lines = None;
                                unread += 1;
                                unread_bytes += old[i].as_ref().map_or(0, |o| o.length);
                            }
                            skipped.push(Skipped {
                                path: jobs[i].0.clone(),
                                reason,
                            });
                        }
                    }
                }
            }
        }
        Ok(())
    })?;

    let completed_ts = now_us();
    let completed = W3cDateTime::from_timestamp(
        Timestamp::from_second(completed_ts.as_second()).unwrap_or(completed_ts),
    );
    let count = kept + puts + unread;
    let nothing_new = puts == 0 && deleted.is_empty() && !baseline;
    // An unchanged tree keeps its snapshot (and so its published Resource List): its `at` still
    // guarantees every resource state up to then, and nothing changed since.
    let snapshot = if nothing_new {
        None
    } else {
        Some(rec.snapshot(&at, &completed, count)?)
    };
    rec.ensure_period(completed_ts, opts.rotation)?;
    for (c, r) in &changes {
        rec.record_change(c.clone(), r, completed_ts, opts.rotation)?;
        match c {
            Change::Created => report.created += 1,
            _ => report.updated += 1,
        }
    }
    for d in &deleted {
        rec.remove(&d.path)?;
        rec.record_change(Change::Deleted, d, completed_ts, opts.rotation)?;
        report.deleted += 1;
    }
    rec.commit()?;
    if let (Some(id), Some(lines)) = (snapshot, lines) {
        state.stash_rendered(id, lines);
    }
    report.resources = count;
    report.bytes = kept_bytes + report.bytes_hashed + unread_bytes;
    report.skipped = skipped;
    report.at = Some(at);
    report.completed = Some(completed);
    Ok(report)
}

#[cfg(test)]
mod tests;
