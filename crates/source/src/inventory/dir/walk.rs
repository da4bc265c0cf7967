//! The listing of a [`DirInventory`]: a walk of the tree in the order of the paths' bytes,
//! one directory at a time, as a stream.
//!
//! Each directory is read whole (`readdir`), its entries sorted by name with a `/` after a
//! directory's (so that, as whole paths compare, `a-b` and `a.txt` come before `a/x`), and
//! given one by one; a subdirectory is read when its turn comes. What is held at any time is
//! the entries not yet given of the directories on the way down from the root: memory bounded
//! by the tree's shape, not by the number of files.
//!
//! The order needs only the names, so a directory is sorted before its files are stat'ed: the
//! files of a large directory go, in that order, in batches to a pool of stat threads started
//! once for the whole walk ([`StatPool`]), and come back batch by batch in the same order. The
//! pool's threads are busy while the walk gives the entries already stat'ed and goes down into
//! subdirectories; nothing is spawned per directory.
//!
//! When the walk enters a directory whose files went to the pool, it reads at once the
//! directory it will enter next (one ahead, no more) and queues that one's files too: the stat
//! threads then go from one directory's files to the next without waiting for the walk to give
//! the last of them and read the next directory (before, the whole pool waited at every
//! directory: a re-publish of 100,000 files in directories of 1,000 took about 10% longer,
//! README "On loopback"). What is held is then at most one directory more than those on the way
//! down.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};

use super::read::{Kind, OpenDir};
use super::{DirInventory, mtime_ns};
use crate::inventory::{Listed, Skipped, path_bytes};

/// Files of one directory from which their `stat`s go to the pool (two batches: below that,
/// the walk's own thread stats them as it reads the directory).
pub(super) const POOL_FROM: usize = 2 * STAT_BATCH;

/// Files a stat thread takes at a time (one message each way per batch).
const STAT_BATCH: usize = 128;

/// One entry of a directory, as the walk gives it.
enum Item {
    File(Listed),
    Dir(PathBuf),
    Problem(Skipped),
    /// A regular file to stat (only while its directory is read).
    Stat(PathBuf),
    /// A regular file whose stat is in the pool: it is the next of its directory's batches'
    /// items ([`Level::batches`]).
    Pooled,
    /// A symbolic link, followed and checked when its turn comes.
    Link(PathBuf),
}

/// A directory on the way down: its entries not yet given (the next one last) and its pooled
/// files as the stat threads hand them back, in the order of its entries.
struct Level {
    items: Vec<Item>,
    batches: VecDeque<Receiver<Vec<Item>>>,
    current: std::vec::IntoIter<Item>,
    /// `items[no_dir_from..]` holds no directory (searched from the end: see
    /// [`Level::next_dir`]; each item is looked at once however often it is asked).
    no_dir_from: usize,
}

/// A batch of files of one directory to stat, and where they go once stat'ed.
struct StatJob {
    dir: Arc<OpenDir>,
    /// Where the names start in the paths (past their directory's path and `/`).
    name_at: usize,
    paths: Vec<PathBuf>,
    reply: SyncSender<Vec<Item>>,
}

/// The stat threads of one walk: started with its first large directory, ended with it.
struct StatPool {
    jobs: Option<Sender<StatJob>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl StatPool {
    fn start(threads: usize) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<StatJob>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..threads)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    loop {
                        let next = rx
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .recv();
                        let Ok(job) = next else { break };
                        let (dir, at) = (&job.dir, job.name_at);
                        let out = job.paths.into_iter().map(|p| stat_in(dir, at, p)).collect();
                        // The walk may be gone (dropped early): nothing to tell.
                        let _ = job.reply.send(out);
                    }
                })
            })
            .collect();
        StatPool {
            jobs: Some(tx),
            threads,
        }
    }

    /// Queues a batch; its files come back through the receiver, in the batch's order.
    fn send(&self, dir: Arc<OpenDir>, name_at: usize, paths: Vec<PathBuf>) -> Receiver<Vec<Item>> {
        let (reply, rx) = std::sync::mpsc::sync_channel(1);
        if let Some(jobs) = &self.jobs {
            // Fails only when no thread is left: the receiver then reports the batch lost.
            let _ = jobs.send(StatJob {
                dir,
                name_at,
                paths,
                reply,
            });
        }
        rx
    }
}

impl Drop for StatPool {
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A regular file of `dir` (its name in `path` from byte `name_at` on), stat'ed: listed with
/// its size and time, or the problem.
fn stat_in(dir: &OpenDir, name_at: usize, path: PathBuf) -> Item {
    match dir.stat(&path, name_at) {
        Ok((len, mtime)) => Item::File(Listed::new(path, len, mtime)),
        Err(reason) => Item::Problem(Skipped { path, reason }),
    }
}

/// The walk: an iterator of the tree's files in path order.
pub(crate) struct Walk<'a> {
    inv: &'a DirInventory,
    /// Whether regular files are stat'ed (see [`crate::inventory::Inventory::list_names`]).
    stat_files: bool,
    /// Per directory on the way down, its entries not yet given.
    stack: Vec<Level>,
    /// The stat threads, once a directory large enough came.
    pool: Option<StatPool>,
    /// The buffer directories are read into (reused).
    buf: Vec<u8>,
    /// The directory the walk enters next, read ahead and its files queued on the pool.
    ahead: Option<(PathBuf, Level)>,
    /// Entries held now, and the most held at once (what the walk's memory is made of).
    held: usize,
    peak: usize,
}

impl DirInventory {
    /// Starts a walk of the tree (see the module's documentation).
    pub(super) fn walk(&self, stat_files: bool) -> Walk<'_> {
        // A tree moved or replaced since the last listing is opened anew for this one.
        #[cfg(target_os = "linux")]
        if let Ok(mut g) = self.root_fd.write() {
            *g = None;
        }
        Walk {
            inv: self,
            stat_files,
            stack: vec![Level::new(vec![Item::Dir(PathBuf::new())])],
            pool: None,
            buf: Vec::new(),
            ahead: None,
            held: 1,
            peak: 1,
        }
    }

    /// The entries of one directory (`rel` under the root), sorted, the first to give last,
    /// with the directory opened and how many regular files are to stat in it. Leaves out
    /// dotfiles unless asked, skipped paths, excluded ones, what is neither a file, a
    /// directory nor a link; never descends through a link. Regular files are to stat only
    /// when `stat_files` (else listed with size and time 0).
    fn read_sorted(
        &self,
        rel: &Path,
        stat_files: bool,
        buf: &mut Vec<u8>,
    ) -> (Vec<Item>, Option<OpenDir>, usize) {
        let problem = |e: std::io::Error| {
            Item::Problem(Skipped {
                path: rel.to_owned(),
                reason: e.to_string(),
            })
        };
        let dir = match OpenDir::open(&self.canonical_root.join(rel)) {
            Ok(d) => d,
            Err(e) => return (vec![problem(e)], None, 0),
        };
        let mut items: Vec<Item> = Vec::new();
        // Each entry's sort key's first 16 bytes, and the entry's index (sorted, then the
        // entries taken in that order: sorting the entries themselves would move each one
        // several times, and compare through their paths).
        let mut keys: Vec<(u128, usize)> = Vec::new();
        let mut to_stat = 0usize;
        let read = dir.read(buf, |name, kind| {
            if kind == Kind::Other
                || (!self.include_hidden && name.as_encoded_bytes().first() == Some(&b'.'))
            {
                return;
            }
            // One allocation, of the size needed (`join` copies `rel`, then grows it).
            let mut path = PathBuf::with_capacity(rel.as_os_str().len() + 1 + name.len());
            path.push(rel);
            path.push(name);
            if self.skipped_path(&path) || self.excluded(&path, kind == Kind::Dir) {
                return;
            }
            keys.push((
                name_prefix(name.as_encoded_bytes(), kind == Kind::Dir),
                items.len(),
            ));
            items.push(match kind {
                Kind::Dir => Item::Dir(path),
                Kind::File if !stat_files => Item::File(Listed::new(path, 0, 0)),
                Kind::File => {
                    to_stat += 1;
                    Item::Stat(path)
                }
                Kind::Link | Kind::Other => Item::Link(path),
            });
        });
        // The last to give first: popped from the end.
        keys.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| order(&items[b.1], &items[a.1])));
        let mut sorted = Vec::with_capacity(items.len() + 1);
        sorted.extend(
            keys.iter()
                .map(|&(_, i)| std::mem::replace(&mut items[i], Item::Pooled)),
        );
        // A problem reading the directory has no name: given first.
        if let Err(e) = read {
            sorted.push(problem(e));
        }
        (sorted, Some(dir), to_stat)
    }

    /// Follows a link only when its target stays inside the tree, is a file, and would be
    /// listed itself (as the server checks: a link to a dotfile, an excluded file or one of
    /// the Source's own files is not listed). `None`: left out.
    fn resolve_link(&self, path: PathBuf) -> Option<Item> {
        let root = &self.canonical_root;
        let md = match root.join(&path).canonicalize() {
            Ok(target) if target.starts_with(root) => match std::fs::metadata(&target) {
                Ok(md) if md.is_file() => {
                    let rel = target.strip_prefix(root).unwrap_or(&target);
                    if !self.admits(rel) {
                        return None;
                    }
                    Ok(md)
                }
                Ok(_) => return None,
                Err(e) => Err(e.to_string()),
            },
            Ok(_) => Err("symbolic link leaves the tree; not followed".into()),
            Err(e) => Err(format!("dangling symbolic link: {e}")),
        };
        Some(match md {
            Ok(md) => Item::File(Listed::new(path, md.len(), mtime_ns(&md))),
            Err(reason) => Item::Problem(Skipped { path, reason }),
        })
    }
}

/// The order of a directory's entries: by name, a directory's with a `/` after it; a problem
/// reading the directory (no name) first. The entries share their directory's path, so their
/// paths compare as their names.
fn order(a: &Item, b: &Item) -> Ordering {
    match (sort_key(a), sort_key(b)) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some((a, a_dir)), Some((b, b_dir))) => cmp_names(&a, a_dir, &b, b_dir),
    }
}

/// An entry's path and whether it is a directory (`None` for a problem reading the directory).
fn sort_key(item: &Item) -> Option<(std::borrow::Cow<'_, [u8]>, bool)> {
    match item {
        Item::Dir(p) => Some((path_bytes(p), true)),
        Item::File(l) => Some((path_bytes(&l.rel), false)),
        Item::Stat(p) | Item::Link(p) => Some((path_bytes(p), false)),
        // Not sorted (made after).
        Item::Problem(_) | Item::Pooled => None,
    }
}

/// The first 16 bytes of an entry's name as the walk orders it (a `/` after a directory's
/// name, then zeros: names hold no NUL), as a number that compares as those bytes do. Two
/// entries whose prefixes differ are in the order of their prefixes; equal ones are compared
/// whole ([`order`]).
fn name_prefix(name: &[u8], dir: bool) -> u128 {
    let mut b = [0u8; 16];
    let n = name.len().min(16);
    b[..n].copy_from_slice(&name[..n]);
    if dir && n < 16 {
        b[n] = b'/';
    }
    u128::from_be_bytes(b)
}

/// Compares `a` and `b` as if a `/` followed each directory's name, without building the
/// keys (names hold no `/`: past their common prefix they differ, or one ends).
fn cmp_names(a: &[u8], a_dir: bool, b: &[u8], b_dir: bool) -> Ordering {
    let n = a.len().min(b.len());
    match a[..n].cmp(&b[..n]) {
        Ordering::Equal => {}
        other => return other,
    }
    let next = |s: &[u8], dir: bool| s.get(n).copied().or(dir.then_some(b'/'));
    next(a, a_dir).cmp(&next(b, b_dir))
}

impl Level {
    fn new(items: Vec<Item>) -> Self {
        Level {
            no_dir_from: items.len(),
            items,
            batches: VecDeque::new(),
            current: Vec::new().into_iter(),
        }
    }

    /// The directory of this level the walk enters next (the nearest to the end of `items`).
    fn next_dir(&mut self) -> Option<&Path> {
        // Items are only ever taken from the end: what was searched stays searched.
        let mut i = self.no_dir_from.min(self.items.len());
        while i > 0 {
            if matches!(self.items[i - 1], Item::Dir(_)) {
                break;
            }
            i -= 1;
        }
        self.no_dir_from = i;
        match self.items.get(i.checked_sub(1)?) {
            Some(Item::Dir(p)) => Some(p),
            _ => None,
        }
    }

    /// This directory's next pooled file, stat'ed.
    fn next_pooled(&mut self) -> Item {
        loop {
            if let Some(item) = self.current.next() {
                return item;
            }
            match self.batches.pop_front().and_then(|rx| rx.recv().ok()) {
                Some(batch) => self.current = batch.into_iter(),
                // The stat threads are gone (not expected): the listing cannot go on in
                // order, and ends (the scan then records nothing).
                None => return Item::Problem(Skipped::listing_broke("the stat threads stopped")),
            }
        }
    }
}

impl Walk<'_> {
    /// Reads a directory and stats its files: on this thread, or, when they are many, on the
    /// pool, in batches in the order they will be given.
    fn descend(&mut self, rel: &Path) -> Level {
        let (mut items, dir, to_stat) = self.inv.read_sorted(rel, self.stat_files, &mut self.buf);
        let Some(dir) = dir.filter(|_| to_stat > 0) else {
            return Level::new(items);
        };
        // Each path is `rel/name` (`name` at the root).
        let name_at = match rel.as_os_str().len() {
            0 => 0,
            n => n + 1,
        };
        if to_stat < POOL_FROM || self.inv.threads < 2 {
            for item in &mut items {
                if let Item::Stat(path) = item {
                    *item = stat_in(&dir, name_at, std::mem::take(path));
                }
            }
            return Level::new(items);
        }
        let pool = self
            .pool
            .get_or_insert_with(|| StatPool::start(self.inv.threads));
        let dir = Arc::new(dir);
        let mut level = Level::new(Vec::new());
        let mut batch = Vec::with_capacity(STAT_BATCH);
        // In the order given: from the end.
        for item in items.iter_mut().rev() {
            if let Item::Stat(path) = item {
                batch.push(std::mem::take(path));
                *item = Item::Pooled;
                if batch.len() == STAT_BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(STAT_BATCH));
                    level
                        .batches
                        .push_back(pool.send(dir.clone(), name_at, full));
                }
            }
        }
        if !batch.is_empty() {
            level.batches.push_back(pool.send(dir, name_at, batch));
        }
        level.no_dir_from = items.len();
        level.items = items;
        level
    }

    /// Enters the directory `rel`: the one read ahead, or read now. When its files went to the
    /// pool, reads ahead the directory after it (see the module's documentation).
    fn enter(&mut self, rel: PathBuf) {
        let level = match self.ahead.take() {
            Some((ahead, level)) if ahead == rel => level,
            other => {
                // Read ahead for another directory (not expected: the walk enters the
                // directories in the order `next_dir` finds them): let go.
                if let Some((_, level)) = other {
                    self.held -= level.items.len();
                }
                let level = self.descend(&rel);
                self.held += level.items.len();
                level
            }
        };
        let pooled = !level.batches.is_empty();
        self.stack.push(level);
        self.peak = self.peak.max(self.held);
        if !pooled {
            return;
        }
        let next = self
            .stack
            .iter_mut()
            .rev()
            .find_map(|l| l.next_dir().map(Path::to_path_buf));
        if let Some(next) = next {
            let level = self.descend(&next);
            self.held += level.items.len();
            self.peak = self.peak.max(self.held);
            self.ahead = Some((next, level));
        }
    }
}

impl Walk<'_> {
    /// The most entries the walk held at once so far.
    #[cfg(test)]
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }
}

impl Iterator for Walk<'_> {
    type Item = std::result::Result<Listed, Skipped>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let top = self.stack.last_mut()?;
            let Some(item) = top.items.pop() else {
                self.stack.pop();
                continue;
            };
            self.held -= 1;
            let item = match item {
                Item::Dir(rel) => {
                    self.enter(rel);
                    continue;
                }
                Item::Pooled => top.next_pooled(),
                Item::Link(path) => match self.inv.resolve_link(path) {
                    Some(item) => item,
                    None => continue,
                },
                other => other,
            };
            match item {
                Item::File(l) => return Some(Ok(l)),
                Item::Problem(s) => return Some(Err(s)),
                // Not made by the steps above.
                _ => continue,
            }
        }
    }
}
