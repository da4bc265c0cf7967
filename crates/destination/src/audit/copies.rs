//! The copies under DEST: walked once (up to a bound) or looked up on disk by path, measured
//! (length, digests) without following symbolic links, on several threads.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use resourcesync_model::{HashAlg, Hashes, MultiHasher};
use resourcesync_store::{FsStore, RelPath, ResourceRecord, child_rel};

use crate::error::{Error, Result};

use super::list::Published;

/// A file found by the walk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Walked {
    pub(super) length: u64,
    pub(super) is_file: bool,
    /// A row or an entry maps to it.
    pub(super) claimed: bool,
}

/// Everything under DEST but the Destination's own folder: path → what is there (symbolic links
/// and other non-directories are files that are not regular; directories are walked into,
/// never through a link). Names that are not valid paths are kept as errors.
#[derive(Debug, Default)]
pub(super) struct Tree {
    pub(super) root: PathBuf,
    pub(super) files: HashMap<String, Walked>,
    pub(super) errors: Vec<String>,
}

/// Walks DEST; `None` when it holds more than `max_files` files (or the walk was cancelled).
pub(super) fn walk_tree(
    root: &Path,
    max_files: usize,
    cancel: &AtomicBool,
) -> Result<Option<Tree>> {
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
pub(super) enum Copies<'a> {
    Walked(Tree),
    OnDisk(&'a FsStore),
}

/// A copy measured: its length and its digests of the algorithms asked for.
pub(super) type Measured = Option<(u64, Hashes)>;

/// Opens a file for reading, not through a symbolic link at its last segment (the walk saw a
/// regular file; it could have been replaced since) and not blocking on a FIFO; `None` when it
/// is gone or is a link now.
#[cfg(unix)]
pub(super) fn open_nofollow(path: &Path) -> io::Result<Option<File>> {
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
pub(super) fn open_nofollow(path: &Path) -> io::Result<Option<File>> {
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
pub(super) fn hash_file(path: &Path, algs: &[HashAlg], buf: &mut Vec<u8>) -> io::Result<Measured> {
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
    pub(super) fn measure(
        &self,
        path: &str,
        algs: &[HashAlg],
        buf: &mut Vec<u8>,
    ) -> Result<Measured> {
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
                let full = RelPath::parse(path)
                    .map_err(resourcesync_store::Error::from)?
                    .under(&tree.root);
                hash_file(&full, algs, buf).map_err(|e| Error::io(path.to_owned(), e))
            }
            Copies::OnDisk(store) => {
                let rel = RelPath::parse(path).map_err(resourcesync_store::Error::from)?;
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

    pub(super) fn claim(&mut self, path: &str) {
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
