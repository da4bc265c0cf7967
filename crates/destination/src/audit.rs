//! Audit (Z39.99-2014 §5.2): coverage and accuracy of the copies against the Source's current
//! state, compiled from its Resource List plus the changes its Change Lists record after the
//! list's `at` (§10.1, §12.1); for a Source without a Resource List, from its Resource Dump's
//! manifests plus the changes of its Change Dump's manifests after the dump's `at`
//! (Z39.99-2017 §5.2; module `dump_list`).
//!
//! The copies are what is on disk: each is measured and hashed (with the algorithms the Source
//! publishes for it), and compared with the Source's description by the diff engine's rule
//! ([`resourcesync_diff::needs_update`]). Files under DEST that no resource maps to are extra.
//! Nothing is fetched but documents, and nothing is written.
//!
//! How, in one pass over each input:
//!
//! - DEST is walked once (`readdir` and one `statx` per file, relative to the directory, never
//!   following a symbolic link) on a thread of its own while the Source's documents are fetched
//!   and read; the walk is a map from path to size, at most [`WALK_MAX_FILES`] files (past that
//!   each copy is looked up on disk by its path instead, in bounded memory).
//! - The Source's list is kept in memory, by URI, up to about [`LIST_MEMORY_BYTES`]; a larger
//!   list (an index of a million entries) goes to a scratch SQLite database, read back a page
//!   at a time.
//! - The state's rows of the Source and the list are merged in URI order (both sorted, no lookup
//!   per entry); each row's path and each entry's path claims its file in the walk. Copies that
//!   must be hashed are read on every core, [`CHUNK`] steps of the merge at a time.
//! - What the walk holds that nothing claimed, and no row of another Source names, is extra.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use resourcesync_diff::{Difference, Item, needs_update};
use resourcesync_model::{Capability, Change, Entry, HashAlg, Hashes, MultiHasher, W3cDateTime};
use resourcesync_store::{FsStore, RelPath, ResourceRecord, SqliteState, StateStore, child_rel};

use crate::discover::discover;
use crate::docs::{DocFetcher, ListSink, walk};
use crate::dump::DumpLimits;
use crate::dump_list::manifests;
use crate::error::{Error, Result};
use crate::http::Http;
use crate::mapping::{UriMapper, base_url};
use crate::options::{AuditOptions, default_state_path};
use crate::report::{AuditDifference, AuditReport, Observer, push_capped};
use crate::staging::{StagedItem, Staging};

/// About the most bytes of the Source's list held in memory (estimated); a larger list goes to
/// a scratch database on disk.
pub const LIST_MEMORY_BYTES: usize = 24 << 20;
/// Most files under DEST held in memory by the walk (about 100 bytes each); past it each copy
/// is looked up on disk by its path.
pub const WALK_MAX_FILES: usize = 250_000;
/// Steps of the merge whose copies are measured together (on every core when they are hashed).
pub const CHUNK: usize = 1024;
/// Rows and entries read from a database at a time.
const PAGE: usize = 1000;

/// The memory bounds of an audit (tests use small ones to take the on-disk paths).
#[derive(Debug, Clone, Copy)]
struct Limits {
    list_bytes: usize,
    walk_files: usize,
}

const LIMITS: Limits = Limits {
    list_bytes: LIST_MEMORY_BYTES,
    walk_files: WALK_MAX_FILES,
};

/// What the Source publishes of one resource, as far as the audit needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Published {
    length: Option<u64>,
    hashes: Hashes,
    lastmod: Option<W3cDateTime>,
    /// The path under DEST it maps to; `None` when it has no safe one.
    path: Option<String>,
}

impl Published {
    fn item(&self, uri: &str) -> Item {
        Item {
            uri: uri.to_owned(),
            length: self.length,
            lastmod: self.lastmod,
            hashes: self.hashes.clone(),
        }
    }

    /// About the bytes it takes in memory with its URI (allocations included).
    fn weight(&self, uri: &str) -> usize {
        let digests: usize = self.hashes.0.iter().map(|d| 96 + d.value.len()).sum();
        224 + uri.len() + self.path.as_ref().map_or(0, String::len) + digests
    }
}

/// The Source's list: in memory while small, else in a scratch database.
enum List {
    Mem {
        items: BTreeMap<String, Published>,
        bytes: usize,
        /// The paths, built when first asked for (only without a walk).
        paths: Option<HashSet<String>>,
    },
    Disk(Spill),
}

impl List {
    fn new() -> Self {
        List::Mem {
            items: BTreeMap::new(),
            bytes: 0,
            paths: None,
        }
    }

    /// Adds or replaces the entry of a URI; moves the list to disk past `max_bytes`.
    fn put(&mut self, uri: String, p: Published, scratch: &Path, max_bytes: usize) -> Result<()> {
        match self {
            List::Mem { items, bytes, .. } => {
                use std::collections::btree_map::Entry as Slot;
                *bytes += p.weight(&uri);
                match items.entry(uri) {
                    Slot::Vacant(v) => {
                        v.insert(p);
                    }
                    Slot::Occupied(mut o) => {
                        *bytes = bytes.saturating_sub(o.get().weight(o.key()));
                        o.insert(p);
                    }
                }
                if *bytes > max_bytes {
                    let mut spill = Spill::create(scratch)?;
                    for (u, p) in std::mem::take(items) {
                        spill.put(&u, &p)?;
                    }
                    *self = List::Disk(spill);
                }
                Ok(())
            }
            List::Disk(s) => s.put(&uri, &p),
        }
    }

    fn remove(&mut self, uri: &str) -> Result<()> {
        match self {
            List::Mem { items, bytes, .. } => {
                if let Some(old) = items.remove(uri) {
                    *bytes = bytes.saturating_sub(old.weight(uri));
                }
                Ok(())
            }
            List::Disk(s) => s.remove(uri),
        }
    }

    fn finish(&mut self) -> Result<()> {
        match self {
            List::Mem { .. } => Ok(()),
            List::Disk(s) => s.flush(),
        }
    }

    fn count(&self) -> Result<u64> {
        match self {
            List::Mem { items, .. } => Ok(items.len() as u64),
            List::Disk(s) => s.count(),
        }
    }

    /// Up to `limit` entries after a URI, in URI (byte) order.
    fn page(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, Published)>> {
        match self {
            List::Mem { items, .. } => {
                use std::ops::Bound::{Excluded, Unbounded};
                let lower = after.map_or(Unbounded, Excluded);
                Ok(items
                    .range::<str, _>((lower, Unbounded))
                    .take(limit)
                    .map(|(u, p)| (u.clone(), p.clone()))
                    .collect())
            }
            List::Disk(s) => s.page(after, limit),
        }
    }

    /// Whether some entry maps to this path.
    fn has_path(&mut self, path: &str) -> Result<bool> {
        match self {
            List::Mem { items, paths, .. } => Ok(paths
                .get_or_insert_with(|| items.values().filter_map(|p| p.path.clone()).collect())
                .contains(path)),
            List::Disk(s) => s.has_path(path),
        }
    }
}

/// A list too large for memory: the staging database the sync uses (removed when dropped),
/// one item per URI with what the audit compares.
struct Spill(Staging);

impl Spill {
    fn create(dir: &Path) -> Result<Self> {
        Ok(Spill(Staging::create(dir)?))
    }

    fn put(&mut self, uri: &str, p: &Published) -> Result<()> {
        self.0.upsert(&StagedItem {
            uri: uri.to_owned(),
            length: p.length,
            hashes: p.hashes.clone(),
            lastmod: p.lastmod,
            path: p.path.clone(),
            ..StagedItem::default()
        })
    }

    fn remove(&mut self, uri: &str) -> Result<()> {
        self.0.remove(uri)
    }

    fn flush(&mut self) -> Result<()> {
        self.0.flush()
    }

    fn count(&self) -> Result<u64> {
        self.0.count()
    }

    fn page(&self, after: Option<&str>, limit: usize) -> Result<Vec<(String, Published)>> {
        Ok(self
            .0
            .page_by_uri(after, limit)?
            .into_iter()
            .map(|it| {
                (
                    it.uri,
                    Published {
                        length: it.length,
                        hashes: it.hashes,
                        lastmod: it.lastmod,
                        path: it.path,
                    },
                )
            })
            .collect())
    }

    fn has_path(&self, path: &str) -> Result<bool> {
        self.0.has_path(path)
    }
}

/// Receives the Source's list entries (and later changes).
struct Sink {
    list: List,
    scratch: PathBuf,
    max_bytes: usize,
    mapper: UriMapper,
    /// For changes: entries at or before it are already in the Resource List.
    since: Option<W3cDateTime>,
}

impl Sink {
    fn put(&mut self, e: Entry) -> Result<()> {
        let path = self.mapper.map(&e.loc).ok().map(|p| p.as_str().to_owned());
        let Entry {
            loc, lastmod, md, ..
        } = e;
        let (length, hashes) = md.map_or((None, Hashes::default()), |m| {
            (m.length, m.hash.unwrap_or_default())
        });
        let p = Published {
            length,
            hashes,
            lastmod,
            path,
        };
        self.list.put(loc, p, &self.scratch, self.max_bytes)
    }
}

impl ListSink for Sink {
    fn entry(&mut self, e: Entry) -> Result<()> {
        let Some(since) = self.since else {
            return self.put(e);
        };
        if e.change_time()
            .is_some_and(|t| t.cmp_instant(&since) != std::cmp::Ordering::Greater)
        {
            return Ok(());
        }
        match e.change() {
            Some(Change::Deleted) => self.list.remove(&e.loc),
            Some(Change::Created | Change::Updated) => self.put(e),
            _ => Ok(()),
        }
    }
}

fn why(d: Difference) -> &'static str {
    match d {
        Difference::Length => "length",
        Difference::Digest => "digest",
        Difference::Lastmod => "lastmod",
    }
}

#[derive(Default)]
struct Found {
    in_sync: u64,
    missing: Vec<AuditDifference>,
    extra: Vec<AuditDifference>,
    different: Vec<AuditDifference>,
    missing_count: u64,
    extra_count: u64,
    different_count: u64,
}

impl Found {
    fn missing(&mut self, d: AuditDifference) {
        self.missing_count += 1;
        push_capped(&mut self.missing, d);
    }
    fn extra(&mut self, d: AuditDifference) {
        self.extra_count += 1;
        push_capped(&mut self.extra, d);
    }
    fn different(&mut self, d: AuditDifference) {
        self.different_count += 1;
        push_capped(&mut self.different, d);
    }
}

/// A file found by the walk.
#[derive(Debug, Clone, Copy)]
struct Walked {
    length: u64,
    is_file: bool,
    /// A row or an entry maps to it.
    claimed: bool,
}

/// Everything under DEST but the Destination's own folder: path → what is there (symbolic links
/// and other non-directories are files that are not regular; directories are walked into,
/// never through a link). Names that are not valid paths are kept as errors.
#[derive(Debug, Default)]
struct Tree {
    root: PathBuf,
    files: HashMap<String, Walked>,
    errors: Vec<String>,
}

/// Walks DEST; `None` when it holds more than `max_files` files (or the walk was cancelled).
fn walk_tree(root: &Path, max_files: usize, cancel: &AtomicBool) -> Result<Option<Tree>> {
    let mut tree = Tree {
        root: root.to_path_buf(),
        ..Tree::default()
    };
    if !root.is_dir() {
        return Ok(Some(tree));
    }
    let mut stack: Vec<(PathBuf, String)> = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let rd = std::fs::read_dir(&dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(dir.display().to_string(), e))?;
            // Names refused count too: the walk's memory is bounded by `max_files` entries.
            if tree.files.len() + tree.errors.len() >= max_files
                || (tree.files.len() % 4096 == 0 && cancel.load(Ordering::Relaxed))
            {
                return Ok(None);
            }
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                tree.errors.push(
                    resourcesync_store::Error::UnsafePath {
                        path: e.path().display().to_string(),
                        reason: "file name is not UTF-8",
                    }
                    .to_string(),
                );
                continue;
            };
            let Some(rel) = child_rel(&prefix, name) else {
                continue;
            };
            let ft = e.file_type().map_err(|err| Error::io(rel.clone(), err))?;
            if ft.is_dir() {
                stack.push((e.path(), rel));
                continue;
            }
            if let Err(err) = RelPath::parse(&rel) {
                tree.errors.push(err.to_string());
                continue;
            }
            // statx(2) relative to the directory, not following a link.
            let m = match e.metadata() {
                Ok(m) => m,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(Error::io(rel, err)),
            };
            if m.is_dir() {
                // Replaced by a directory since it was listed: walk it.
                stack.push((e.path(), rel));
                continue;
            }
            tree.files.insert(
                rel,
                Walked {
                    length: m.len(),
                    is_file: m.is_file(),
                    claimed: false,
                },
            );
        }
    }
    Ok(Some(tree))
}

/// How copies are found: in the walk, or on disk one by one (a DEST too large to walk into
/// memory).
enum Copies<'a> {
    Walked(Tree),
    OnDisk(&'a FsStore),
}

/// A copy measured: its length and its digests of the algorithms asked for.
type Measured = Option<(u64, Hashes)>;

/// Opens a file for reading, not through a symbolic link at its last segment (the walk saw a
/// regular file; it could have been replaced since) and not blocking on a FIFO; `None` when it
/// is gone or is a link now.
#[cfg(unix)]
fn open_nofollow(path: &Path) -> io::Result<Option<File>> {
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(e) if e == rustix::io::Errno::NOENT || e == rustix::io::Errno::LOOP => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(unix))]
fn open_nofollow(path: &Path) -> io::Result<Option<File>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    match File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads and hashes a regular file (see [`open_nofollow`]): its length and digests; `None` when
/// it is no longer a regular file.
fn hash_file(path: &Path, algs: &[HashAlg], buf: &mut Vec<u8>) -> io::Result<Measured> {
    let Some(mut f) = open_nofollow(path)? else {
        return Ok(None);
    };
    if !f.metadata()?.is_file() {
        return Ok(None);
    }
    if buf.is_empty() {
        buf.resize(64 * 1024, 0);
    }
    let mut h = MultiHasher::new(algs);
    let mut n = 0u64;
    loop {
        match f.read(buf) {
            Ok(0) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                n += k as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some((n, h.finish())))
}

impl Copies<'_> {
    /// The copy at `path`: its length, and its digests when `algs` is not empty.
    fn measure(&self, path: &str, algs: &[HashAlg], buf: &mut Vec<u8>) -> Result<Measured> {
        match self {
            Copies::Walked(tree) => {
                let Some(w) = tree.files.get(path) else {
                    return Ok(None);
                };
                if !w.is_file {
                    return Ok(None);
                }
                if algs.is_empty() {
                    return Ok(Some((w.length, Hashes::default())));
                }
                let full = RelPath::parse(path)?.under(&tree.root);
                hash_file(&full, algs, buf).map_err(|e| Error::io(path.to_owned(), e))
            }
            Copies::OnDisk(store) => {
                let rel = RelPath::parse(path)?;
                let m = match store.stat(&rel) {
                    Ok(Some(m)) => m,
                    // A symbolic link or a file where a directory of the path should be: not
                    // followed, so no copy (as in the walk).
                    Ok(None) | Err(resourcesync_store::Error::Conflict { .. }) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                if !m.is_file {
                    return Ok(None);
                }
                if algs.is_empty() {
                    return Ok(Some((m.length, Hashes::default())));
                }
                Ok(Some(store.hash(&rel, algs)?))
            }
        }
    }

    fn claim(&mut self, path: &str) {
        if let Copies::Walked(tree) = self {
            if let Some(w) = tree.files.get_mut(path) {
                w.claimed = true;
            }
        }
    }

    /// Whether the copies are read from disk in `measure` (hashing, or a lookup per copy).
    fn reads(&self, algs: &[HashAlg]) -> bool {
        matches!(self, Copies::OnDisk(_)) || !algs.is_empty()
    }
}

/// One step of the merge: a URI with its state row (of this Source), its published entry, or
/// both, and the copy to measure.
struct Step {
    uri: String,
    row: Option<ResourceRecord>,
    published: Option<Published>,
    /// The path measured and the algorithms hashed.
    at: Option<String>,
    algs: Vec<HashAlg>,
    measured: Option<Result<Measured>>,
}

/// Measures the copies of a chunk of steps, on up to `threads` threads when they are read from
/// disk.
fn measure_all(copies: &Copies<'_>, steps: &mut [Step], threads: usize) {
    let work = steps
        .iter()
        .filter(|s| s.at.is_some() && copies.reads(&s.algs))
        .count();
    let run = |part: &mut [Step]| {
        let mut buf = Vec::new();
        for s in part {
            if let Some(at) = &s.at {
                s.measured = Some(copies.measure(at, &s.algs, &mut buf));
            }
        }
    };
    if threads < 2 || work < 64 {
        run(steps);
        return;
    }
    let per = steps.len().div_ceil(threads);
    std::thread::scope(|sc| {
        let mut parts = steps.chunks_mut(per);
        let first = parts.next();
        for p in parts {
            sc.spawn(move || run(p));
        }
        if let Some(p) = first {
            run(p);
        }
    });
}

/// Pages of a sorted source, one item at a time.
struct Paged<T, F: FnMut(Option<&str>) -> Result<Vec<T>>> {
    fetch: F,
    buf: std::collections::VecDeque<T>,
    after: Option<String>,
    done: bool,
    key: fn(&T) -> &str,
}

impl<T, F: FnMut(Option<&str>) -> Result<Vec<T>>> Paged<T, F> {
    fn new(fetch: F, key: fn(&T) -> &str) -> Self {
        Paged {
            fetch,
            buf: Default::default(),
            after: None,
            done: false,
            key,
        }
    }

    fn peek(&mut self) -> Result<Option<&T>> {
        if self.buf.is_empty() && !self.done {
            let page = (self.fetch)(self.after.as_deref())?;
            self.done = page.is_empty();
            self.after = page.last().map(|t| (self.key)(t).to_owned());
            self.buf.extend(page);
        }
        Ok(self.buf.front())
    }

    fn next(&mut self) -> Result<Option<T>> {
        self.peek()?;
        Ok(self.buf.pop_front())
    }
}

/// Pages of rows read ahead of the merge.
const ROW_PAGES_AHEAD: usize = 8;

/// Reads the state's rows of a Source, a page at a time in URI order, on a thread of its own,
/// up to [`ROW_PAGES_AHEAD`] pages ahead of the reader (while the Source's list is still being
/// read, then during the merge). The last page is empty; an error ends the pages.
fn rows_ahead(
    state: Arc<dyn StateStore>,
    key: String,
) -> std::sync::mpsc::Receiver<Result<Vec<ResourceRecord>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(ROW_PAGES_AHEAD);
    // A plain thread: it may block on a full channel, which a pool's thread should not.
    let spawned = std::thread::Builder::new()
        .name("audit-rows".into())
        .spawn(move || {
            let mut after: Option<String> = None;
            loop {
                let page = state.resources_page(&key, after.as_deref(), PAGE);
                let last = match &page {
                    Ok(p) => p.last().map(|r| r.uri.clone()),
                    Err(_) => None,
                };
                // Stops when the reader is gone (the audit ended) or after the last page.
                if tx.send(page.map_err(Error::from)).is_err() || last.is_none() {
                    return;
                }
                after = last;
            }
        });
    if let Err(e) = spawned {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let _ = tx.send(Err(Error::io("starting a thread", e)));
        return rx;
    }
    rx
}

/// What is compared with what, and how.
struct Compare<'a> {
    state: &'a dyn StateStore,
    obs: &'a dyn Observer,
    fast: bool,
    threads: usize,
}

impl Compare<'_> {
    /// Plans the measurement of a step.
    fn plan(&self, s: &mut Step) {
        match (&s.row, &s.published) {
            // A row the Source no longer lists: is its copy there?
            (Some(r), None) => s.at = Some(r.path.clone()),
            // Fast: the size only, the recorded digests stand for the content.
            (Some(r), Some(p)) => {
                s.at = Some(r.path.clone());
                if !self.fast {
                    s.algs = p.hashes.known_algs();
                }
            }
            // No row: a file may be in place all the same (copied by other means, or a run
            // killed between the rename and the row): measure it.
            (None, Some(p)) => {
                s.at = p.path.clone();
                s.algs = p.hashes.known_algs();
            }
            (None, None) => {}
        }
    }

    /// Decides a measured step.
    fn decide(&self, copies: &Copies<'_>, s: Step, found: &mut Found) -> Result<()> {
        let measured = match s.measured {
            Some(m) => m?,
            None => None,
        };
        let Some(p) = s.published else {
            if measured.is_some() {
                self.obs.resource_done();
                found.extra(AuditDifference {
                    uri: s.uri,
                    path: s.row.map(|r| r.path),
                    why: "not at the Source".into(),
                });
            }
            return Ok(());
        };
        self.obs.resource_done();
        let original = p.item(&s.uri);
        let mut buf = Vec::new();
        let copy = match (s.row, measured) {
            (Some(r), Some((length, hashes))) => {
                let hashes = if !self.fast {
                    hashes
                } else if r.length == Some(length) {
                    r.hashes
                } else {
                    // Fast, but the size is not the one recorded: the recorded digests do not
                    // describe this file, which is read (when a digest could tell).
                    let algs = p.hashes.known_algs();
                    if algs.is_empty() {
                        hashes
                    } else {
                        match copies.measure(&r.path, &algs, &mut buf)? {
                            Some((_, h)) => h,
                            None => Hashes::default(),
                        }
                    }
                };
                Some(Item {
                    uri: s.uri.clone(),
                    length: Some(length),
                    lastmod: r.lastmod,
                    hashes,
                })
            }
            // No row, or the row's file is not there: the file at the entry's path, if any.
            (row, m) => {
                let Some(path) = &p.path else {
                    found.missing(AuditDifference {
                        uri: s.uri,
                        path: None,
                        why: "no safe path under the destination".into(),
                    });
                    return Ok(());
                };
                let m = match row {
                    Some(r) if &r.path != path => {
                        copies.measure(path, &p.hashes.known_algs(), &mut buf)?
                    }
                    _ => m,
                };
                m.map(|(length, hashes)| Item {
                    uri: s.uri.clone(),
                    length: Some(length),
                    lastmod: None,
                    hashes,
                })
            }
        };
        let Some(copy) = copy else {
            found.missing(AuditDifference {
                uri: s.uri,
                path: p.path,
                why: "no copy".into(),
            });
            return Ok(());
        };
        match needs_update(&copy, &original) {
            None => found.in_sync += 1,
            Some(w) => found.different(AuditDifference {
                uri: s.uri,
                path: p.path,
                why: why(w).into(),
            }),
        }
        Ok(())
    }

    /// Merges the state's rows of the Source with the list, in URI order, and measures the
    /// copies; then reports the files nothing maps to.
    /// `rows` gives the pages of the state's rows of the Source, in URI order, after a URI (an
    /// empty page at the end).
    fn run(
        &self,
        list: &mut List,
        mut copies: Copies<'_>,
        mut rows: impl FnMut(Option<&str>) -> Result<Vec<ResourceRecord>>,
    ) -> Result<Found> {
        let mut found = Found::default();
        {
            let list_ref = &*list;
            let mut rows = Paged::new(
                |after| {
                    let mut page = rows(after)?;
                    // A row whose path is not a safe one is no copy of ours (and never read).
                    page.retain(|r| RelPath::parse(&r.path).is_ok());
                    Ok(page)
                },
                |r: &ResourceRecord| r.uri.as_str(),
            );
            let mut pubs = Paged::new(
                |after| list_ref.page(after, PAGE),
                |e: &(String, Published)| e.0.as_str(),
            );
            let mut chunk: Vec<Step> = Vec::with_capacity(CHUNK);
            loop {
                let order = match (rows.peek()?, pubs.peek()?) {
                    (None, None) => None,
                    (Some(_), None) => Some(std::cmp::Ordering::Less),
                    (None, Some(_)) => Some(std::cmp::Ordering::Greater),
                    (Some(r), Some(p)) => Some(r.uri.as_bytes().cmp(p.0.as_bytes())),
                };
                if let Some(order) = order {
                    let row = if order.is_le() { rows.next()? } else { None };
                    let published = if order.is_ge() { pubs.next()? } else { None };
                    let (uri, published) = match (row.as_ref(), published) {
                        (_, Some((u, p))) => (u, Some(p)),
                        (Some(r), None) => (r.uri.clone(), None),
                        (None, None) => continue,
                    };
                    if let Some(r) = &row {
                        copies.claim(&r.path);
                    }
                    if let Some(path) = published.as_ref().and_then(|p| p.path.as_deref()) {
                        copies.claim(path);
                    }
                    let mut s = Step {
                        uri,
                        row,
                        published,
                        at: None,
                        algs: Vec::new(),
                        measured: None,
                    };
                    self.plan(&mut s);
                    chunk.push(s);
                }
                if chunk.len() >= CHUNK || (order.is_none() && !chunk.is_empty()) {
                    measure_all(&copies, &mut chunk, self.threads);
                    for s in chunk.drain(..) {
                        self.decide(&copies, s, &mut found)?;
                    }
                }
                if order.is_none() {
                    break;
                }
            }
        }
        // Files no resource maps to.
        match copies {
            Copies::Walked(tree) => {
                let mut left: Vec<String> = tree
                    .files
                    .into_iter()
                    .filter(|(_, w)| !w.claimed)
                    .map(|(p, _)| p)
                    .collect();
                left.sort_unstable();
                for path in left {
                    // A copy of another Source synced into the same DEST.
                    if !self.state.has_path(&path)? {
                        found.extra(AuditDifference {
                            uri: String::new(),
                            path: Some(path),
                            why: "no resource maps to this file".into(),
                        });
                    }
                }
                for e in tree.errors {
                    found.extra(AuditDifference {
                        uri: String::new(),
                        path: None,
                        why: e,
                    });
                }
            }
            Copies::OnDisk(store) => {
                if store.root().is_dir() {
                    let mut list_err: Option<Error> = None;
                    store.list(&mut |r| {
                        match r {
                            Ok((rel, _)) => {
                                let listed = match list.has_path(rel.as_str()) {
                                    Ok(b) => b,
                                    Err(e) => {
                                        list_err.get_or_insert(e);
                                        true
                                    }
                                };
                                if !listed && !self.state.has_path(rel.as_str())? {
                                    found.extra(AuditDifference {
                                        uri: String::new(),
                                        path: Some(rel.to_string()),
                                        why: "no resource maps to this file".into(),
                                    });
                                }
                            }
                            Err(e) => found.extra(AuditDifference {
                                uri: String::new(),
                                path: None,
                                why: e.to_string(),
                            }),
                        }
                        Ok(())
                    })?;
                    if let Some(e) = list_err {
                        return Err(e);
                    }
                }
            }
        }
        Ok(found)
    }
}

/// Stops a walk of DEST when the audit ends first (an error, the time limit).
/// What an audit compares the copies with.
enum Against {
    /// The Resource List.
    List(String),
    /// The manifests of the Resource Dump's packages (a Source without a Resource List).
    Dump(String),
}

struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Audits a destination directory against a Source (see the module docs).
pub async fn audit(opts: &AuditOptions, obs: Arc<dyn Observer>) -> Result<AuditReport> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, audit_inner(opts, obs, LIMITS))
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => audit_inner(opts, obs, LIMITS).await,
    }
}

async fn audit_inner(
    opts: &AuditOptions,
    obs: Arc<dyn Observer>,
    limits: Limits,
) -> Result<AuditReport> {
    let started = Instant::now();
    if !opts.dest.is_dir() {
        return Err(Error::Config(format!(
            "{} is not a directory: nothing to audit (sync into it first, or give the directory \
             the copy is in)",
            opts.dest.display()
        )));
    }
    // The walk of DEST needs nothing from the Source: it runs while the documents are fetched
    // and read.
    let cancel = Arc::new(AtomicBool::new(false));
    let _cancel = CancelOnDrop(cancel.clone());
    let walk_root = opts.dest.clone();
    let walking =
        tokio::task::spawn_blocking(move || walk_tree(&walk_root, limits.walk_files, &cancel));
    let http = Arc::new(Http::new(opts.http.clone())?);
    let scratch =
        tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?;
    let fetcher = DocFetcher {
        http,
        dir: scratch.path().to_path_buf(),
        max_bytes: opts.max_document_bytes,
    };
    obs.phase("discovery");
    let info = discover(&fetcher, &opts.url, opts.set.as_deref()).await?;
    let mut warnings = info.warnings.clone();
    // The list audited against: the Resource List, else the Resource Dump's manifests
    // (Z39.99-2017 §5.2; crate::dump_list).
    let against = match (&info.resource_list, &info.resource_dump) {
        (Some(rl), _) => Against::List(rl.clone()),
        (None, Some(rd)) => Against::Dump(rd.clone()),
        (None, None) => {
            let offers = if info.offered.is_empty() {
                "nothing".to_owned()
            } else {
                info.offered.join(", ")
            };
            return Err(Error::BadDocument {
                url: info
                    .capability_list
                    .clone()
                    .unwrap_or_else(|| opts.url.clone()),
                message: format!(
                    "the Source offers no Resource List and no Resource Dump to audit against \
                     (it lists: {offers}; Z39.99-2014 §5.2): tell the Source's maintainer"
                ),
            });
        }
    };
    let base = base_url(
        opts.base_url.as_deref(),
        info.description.as_deref(),
        info.capability_list.as_deref(),
        match &against {
            Against::List(u) | Against::Dump(u) => u,
        },
    );
    let mapper = UriMapper::new(&base)?;
    // The state's rows of this Source are read while the list is.
    let state_path = opts
        .state
        .clone()
        .unwrap_or_else(|| default_state_path(&opts.dest));
    let mut no_state = None;
    let state: Arc<dyn StateStore> = match SqliteState::open_read_only(&state_path)? {
        Some(s) => Arc::new(s),
        None => {
            no_state = Some(format!(
                "no state database at {}: every copy is measured as found",
                state_path.display()
            ));
            Arc::new(SqliteState::in_memory()?)
        }
    };
    let rows = rows_ahead(state.clone(), info.key());
    let sink = Sink {
        list: List::new(),
        scratch: scratch.path().to_path_buf(),
        max_bytes: limits.list_bytes,
        mapper,
        since: None,
    };
    let (mut sink, at) = match &against {
        Against::List(rl) => {
            obs.phase("reading the Resource List");
            let (sink, rl_info) = walk(&fetcher, rl, Capability::ResourceList, sink).await?;
            warnings.extend(rl_info.warnings);
            (sink, rl_info.top.md.as_ref().and_then(|m| m.at))
        }
        Against::Dump(rd) => {
            obs.phase("reading the Resource Dump's manifests");
            let dl = DumpLimits::default();
            let (mut sink, at) =
                manifests(&fetcher, &obs, rd, None, &dl, sink, &mut warnings).await?;
            // Z39.99-2014 §13.2: the changes after the dump's `at`, from the Change Dump.
            if let (Some(cd), Some(at)) = (&info.change_dump, at) {
                obs.phase("reading the Change Dump's manifests");
                sink.since = Some(at);
                sink = manifests(&fetcher, &obs, cd, Some(at), &dl, sink, &mut warnings)
                    .await?
                    .0;
            }
            (sink, at)
        }
    };
    // Later changes (Z39.99-2014 §5.2: "compiled on the basis of a Resource List and Change
    // Lists").
    if let (Some(cl), Some(at)) = (&info.change_list, at) {
        obs.phase("reading the Change Lists");
        sink.since = Some(at);
        let (s, i) = walk(&fetcher, cl, Capability::ChangeList, sink).await?;
        sink = s;
        warnings.extend(i.warnings);
    }
    let mut list = sink.list;
    list.finish()?;
    warnings.extend(no_state);
    let resources = list.count()?;
    obs.add_total(resources);
    obs.phase("comparing");
    let tree = walking.await??;
    let store = FsStore::existing(&opts.dest);
    let obs2 = obs.clone();
    let fast = opts.fast;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let found = tokio::task::spawn_blocking(move || {
        let copies = match tree {
            Some(t) => Copies::Walked(t),
            None => Copies::OnDisk(&store),
        };
        let compare = Compare {
            state: state.as_ref(),
            obs: obs2.as_ref(),
            fast,
            threads,
        };
        compare.run(&mut list, copies, |_| {
            rows.recv()
                .unwrap_or_else(|_| Err(Error::Task("the reader of the state stopped".into())))
        })
    })
    .await??;

    for w in &warnings {
        obs.warning(w);
    }
    let in_sync = found.missing_count == 0 && found.extra_count == 0 && found.different_count == 0;
    Ok(AuditReport {
        source: info,
        base_url: base,
        resources,
        in_sync_count: found.in_sync,
        missing: found.missing,
        extra: found.extra,
        different: found.different,
        missing_count: found.missing_count,
        extra_count: found.extra_count,
        different_count: found.different_count,
        in_sync,
        seconds: started.elapsed().as_secs_f64(),
        warnings,
    })
}

#[cfg(test)]
mod tests;
