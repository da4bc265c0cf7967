//! The copies in the store: listed once (up to a bound) or looked up one by one by key,
//! measured (length, digests) through the store (a directory's: never through a symbolic
//! link), on several threads.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

use resourcesync_model::{HashAlg, Hashes};
use resourcesync_store::{Records, RelPath, ResourceRecord, Store};

use crate::error::Result;

use super::list::Published;

/// A copy found by the listing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Walked {
    pub(super) length: u64,
    pub(super) is_file: bool,
    /// A row or an entry maps to it.
    pub(super) claimed: bool,
}

/// Everything in the store (a directory's own folder left out): key → what is there
/// (symbolic links and other non-directories are objects that are not regular). Names that are
/// not valid keys are kept as errors.
#[derive(Debug, Default)]
pub(super) struct Tree {
    pub(super) files: HashMap<String, Walked>,
    pub(super) errors: Vec<String>,
}

/// Lists the store ([`Store::list`]); `None` when it holds more than `max_files` objects (or
/// the listing was cancelled).
pub(super) fn walk_tree(
    store: &dyn Store,
    max_files: usize,
    cancel: &AtomicBool,
) -> Result<Option<Tree>> {
    let mut tree = Tree::default();
    let mut over = false;
    store.list(None, &mut |item| {
        // Names refused count too: the listing's memory is bounded by `max_files` entries.
        if tree.files.len() + tree.errors.len() >= max_files
            || (tree.files.len() % 4096 == 0 && cancel.load(Ordering::Relaxed))
        {
            over = true;
            return Ok(ControlFlow::Break(()));
        }
        match item {
            Ok((key, m)) => {
                tree.files.insert(
                    key.to_string(),
                    Walked {
                        length: m.length,
                        is_file: m.regular,
                        claimed: false,
                    },
                );
            }
            // A name that is not a valid key, or a copy that went while it was listed.
            Err(resourcesync_store::Error::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tree.errors.push(e.to_string()),
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok((!over && !cancel.load(Ordering::Relaxed)).then_some(tree))
}

/// How copies are found: in the listing, or in the store one by one (a store too large to
/// list into memory).
pub(super) enum Copies<'a> {
    Walked(Tree, &'a dyn Store),
    OnDisk(&'a dyn Store),
}

/// A copy measured: its length and its digests of the algorithms asked for.
pub(super) type Measured = Option<(u64, Hashes)>;

impl Copies<'_> {
    /// The copy at `path`: its length, and its digests when `algs` is not empty.
    pub(super) fn measure(&self, path: &str, algs: &[HashAlg]) -> Result<Measured> {
        let (store, listed) = match self {
            Copies::Walked(tree, store) => match tree.files.get(path) {
                Some(w) if w.is_file => (*store, Some((w.length, Hashes::default()))),
                _ => return Ok(None),
            },
            Copies::OnDisk(store) => (*store, None),
        };
        if let (Some(m), true) = (&listed, algs.is_empty()) {
            return Ok(Some(m.clone()));
        }
        let rel = RelPath::parse(path).map_err(resourcesync_store::Error::from)?;
        if listed.is_none() {
            let m = match store.head(&rel) {
                Ok(Some(m)) => m,
                // A symbolic link or a file where a directory of the path should be: not
                // followed, so no copy (as in the listing).
                Ok(None) | Err(resourcesync_store::Error::Conflict { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            if !m.regular {
                return Ok(None);
            }
            if algs.is_empty() {
                return Ok(Some((m.length, Hashes::default())));
            }
        }
        match store.hash(&rel, algs) {
            Ok(m) => Ok(Some(m)),
            // Gone, or no longer a regular file, since it was listed.
            Err(resourcesync_store::Error::Conflict { .. }) => Ok(None),
            Err(resourcesync_store::Error::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn claim(&mut self, path: &str) {
        if let Copies::Walked(tree, _) = self {
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
pub(super) struct Step {
    pub(super) uri: String,
    pub(super) row: Option<ResourceRecord>,
    pub(super) published: Option<Published>,
    /// The path measured and the algorithms hashed.
    pub(super) at: Option<String>,
    pub(super) algs: Vec<HashAlg>,
    pub(super) measured: Option<Result<Measured>>,
}

/// Measures the copies of a chunk of steps, on up to `threads` threads when they are read from
/// disk.
pub(super) fn measure_all(copies: &Copies<'_>, steps: &mut [Step], threads: usize) {
    let work = steps
        .iter()
        .filter(|s| s.at.is_some() && copies.reads(&s.algs))
        .count();
    let run = |part: &mut [Step]| {
        for s in part {
            if let Some(at) = &s.at {
                s.measured = Some(copies.measure(at, &s.algs));
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

/// What the walk of [`untracked`] found: a key no row of the state names, or a name in the
/// store that is not a valid key (the store's error, as a message).
pub(crate) type Untracked = std::result::Result<RelPath, String>;

/// Walks the store in key order (after `after`), never following a symbolic link, and gives
/// `f` each object no row of the state names (of any Source), in bounded memory: a copy of no
/// resource the Destination knows. The audit reports them as extra; `sync --delete` removes
/// them (`crate::sync::extras`).
///
/// The names alone are listed ([`Store::list_keys`]: no `stat` of each file) and looked up
/// [`LOOKUP`] at a time ([`Records::has_paths`]: one transaction, or one round trip, per batch
/// rather than per file).
pub(crate) fn untracked(
    store: &dyn Store,
    state: &dyn Records,
    after: Option<&RelPath>,
    f: &mut dyn FnMut(Untracked) -> Result<ControlFlow<()>>,
) -> Result<()> {
    let mut failed: Option<crate::error::Error> = None;
    let mut stopped = false;
    // Listed and not yet looked up, in key order: the names and the listing's errors.
    let mut pending: Vec<Untracked> = Vec::with_capacity(LOOKUP);
    // Gives `f` what `pending` holds that no row names; whether `f` asked to stop.
    let mut flush = |pending: &mut Vec<Untracked>,
                     failed: &mut Option<crate::error::Error>|
     -> resourcesync_store::Result<bool> {
        let batch = std::mem::take(pending);
        let keys: Vec<&RelPath> = batch.iter().filter_map(|u| u.as_ref().ok()).collect();
        let mut known = state.has_paths(&keys)?.into_iter();
        for u in batch {
            // A key the state gave no answer for is taken as known: never removed unasked.
            if u.is_ok() && known.next().unwrap_or(true) {
                continue;
            }
            match f(u) {
                Ok(ControlFlow::Continue(())) => {}
                Ok(ControlFlow::Break(())) => return Ok(true),
                Err(e) => {
                    *failed = Some(e);
                    return Ok(true);
                }
            }
        }
        Ok(false)
    };
    store.list_keys(after, &mut |r| {
        match r {
            Ok(rel) => pending.push(Ok(rel)),
            // A copy that went while it was listed.
            Err(resourcesync_store::Error::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => pending.push(Err(e.to_string())),
        }
        if pending.len() >= LOOKUP {
            stopped = flush(&mut pending, &mut failed)?;
            if stopped {
                return Ok(ControlFlow::Break(()));
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if !stopped && !pending.is_empty() {
        flush(&mut pending, &mut failed)?;
    }
    failed.map_or(Ok(()), Err)
}

/// Keys of [`untracked`]'s walk looked up in the state at once.
const LOOKUP: usize = 512;

/// The key of a state database given inside DEST (`--state`), outside the Destination's own
/// folder: it and its journals (`-wal`, `-shm`, `-journal`) are the Destination's, never extra.
pub(crate) fn state_key(dest: &std::path::Path, state: &std::path::Path) -> Option<String> {
    let rel = state.strip_prefix(dest).ok()?.to_str()?;
    RelPath::parse(rel).ok().map(|r| r.to_string())
}

/// Whether `key` is the state database of [`state_key`] or one of its journals.
pub(crate) fn is_state(own: Option<&str>, key: &str) -> bool {
    own.is_some_and(|o| {
        key.strip_prefix(o)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    })
}
