//! The [`Store`] port on a directory: each step of a put maps onto the file-system operations
//! of [`FsStore`], with their guarantees and fast paths.
//!
//! - [`Store::begin`]: a named temporary file in `DEST/.resourcesync/tmp`;
//!   [`Store::begin_new`]: on Linux an unnamed one (`O_TMPFILE`) in the key's own directory,
//!   the directory handles kept by the store and forgotten every [`PortState::USES`] files;
//! - [`Upload::finish`](crate::Upload::finish): flush, modification time, `fsync` where the
//!   file system is not synced as a whole;
//! - [`Store::place`]: one rename (or `linkat(2)`) per body, each directory of the batch
//!   checked once ([`DirCache`]);
//! - [`Store::sync`]: one `syncfs(2)` on Linux; elsewhere the directories renamed into since the
//!   last call are `fsync`ed (the files were at `finish`);
//! - [`Store::list`]: a depth-first walk in key order, each directory read whole and sorted (so
//!   memory follows the largest directory, not the whole tree), no symbolic link followed;
//!   [`Store::list_keys`]: the same walk without a `stat` of each file.

use std::any::Any;
use std::fs;
use std::io::{BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use super::{DirCache, DirHandles, FsStore, Held, SYNC_WHOLE_FS, Sink, Verified, child_rel};
use crate::error::{Error, Result};
use crate::features::{At, Features, Hierarchy, Interrupted};
use crate::object::{Expect, ObjectMeta, Placed, Store, Upload, UploadSink, foreign_upload};
use crate::path::RelPath;

/// What the port keeps between calls.
#[derive(Debug, Default)]
pub(crate) struct PortState {
    /// The directories opened for unnamed files, and how many files used them.
    handles: Mutex<(DirHandles, usize)>,
    /// The keys placed since the last sync, where directories are synced one by one.
    placed: Mutex<Vec<RelPath>>,
}

impl PortState {
    /// Files created with the same directory handles before they are opened again (a handle
    /// is kept for a batch's worth of files, not for the whole run).
    pub(crate) const USES: usize = 1024;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The file an upload writes to.
#[derive(Debug)]
struct FsSink(BufWriter<Sink>);

impl UploadSink for FsSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        self.0
            .write_all(buf)
            .map_err(|e| Error::io(self.0.get_ref().path(), e))
    }

    fn seal(self: Box<Self>, modified: Option<SystemTime>) -> Result<Box<dyn Any + Send>> {
        Ok(Box::new(super::seal(self.0, modified)?))
    }
}

fn meta_of(m: &fs::Metadata) -> ObjectMeta {
    ObjectMeta {
        length: m.len(),
        modified: m.modified().ok(),
        hashes: Default::default(),
        regular: m.is_file(),
        uri: None,
    }
}

/// What [`FsStore::walk`] calls with each file: its key and its path.
type WalkFn<'a> = dyn FnMut(Result<(RelPath, &std::path::Path)>) -> Result<ControlFlow<()>> + 'a;

/// An entry of a directory, in key order.
struct Entry {
    /// The name, followed by `/` for a directory: sorting on it sorts the keys.
    sort: String,
    dir: bool,
}

impl FsStore {
    /// The entries of `dir` (relative key `prefix`) sorted in key order; names that are not
    /// UTF-8 are passed to `f` as errors.
    fn sorted_entries(
        &self,
        dir: &PathBuf,
        prefix: &str,
        f: &mut dyn FnMut(Error) -> Result<ControlFlow<()>>,
    ) -> Result<Option<Vec<Entry>>> {
        let mut out = Vec::new();
        let rd = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(dir, e))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                let err = Error::UnsafePath {
                    path: e.path().display().to_string(),
                    reason: "file name is not UTF-8",
                };
                if f(err)?.is_break() {
                    return Ok(None);
                }
                continue;
            };
            if child_rel(prefix, name).is_none() {
                continue;
            }
            let ft = e.file_type().map_err(|err| Error::io(e.path(), err))?;
            let mut sort = name.to_owned();
            if ft.is_dir() {
                sort.push('/');
            }
            out.push(Entry {
                sort,
                dir: ft.is_dir(),
            });
        }
        out.sort_unstable_by(|a, b| a.sort.as_bytes().cmp(b.sort.as_bytes()));
        Ok(Some(out))
    }

    /// The walk of [`Store::list`]: every file's key after `after`, in key order, with its
    /// path (not yet looked at: a file may go while it is walked).
    fn walk(&self, after: Option<&RelPath>, f: &mut WalkFn<'_>) -> Result<()> {
        let after = after.map(RelPath::as_str);
        // A directory that is not there holds nothing (a store over a DEST not created yet).
        if matches!(fs::symlink_metadata(&self.root), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        {
            return Ok(());
        }
        // One level per directory being walked: its path, its key prefix and its entries left.
        let Some(top) = self.sorted_entries(&self.root, "", &mut |e| f(Err(e)))? else {
            return Ok(());
        };
        let mut stack = vec![(self.root.clone(), String::new(), top.into_iter())];
        while let Some((dir, prefix, entries)) = stack.last_mut() {
            let Some(e) = entries.next() else {
                stack.pop();
                continue;
            };
            let name = e.sort.trim_end_matches('/');
            let path = dir.join(name);
            let key = match child_rel(prefix, name) {
                Some(k) => k,
                None => continue,
            };
            if e.dir {
                let sub = format!("{key}/");
                if after.is_some_and(|a| all_before(&sub, a)) {
                    continue;
                }
                let Some(entries) = self.sorted_entries(&path, &key, &mut |e| f(Err(e)))? else {
                    return Ok(());
                };
                stack.push((path, key, entries.into_iter()));
                continue;
            }
            if after.is_some_and(|a| key.as_str() <= a) {
                continue;
            }
            let item = RelPath::parse(&key).map_err(Error::from);
            if f(item.map(|k| (k, path.as_path())))?.is_break() {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Whether every key under the directory `prefix/` sorts at or before `after`.
fn all_before(prefix: &str, after: &str) -> bool {
    after > prefix && !after.starts_with(prefix)
}

impl Store for FsStore {
    fn begin(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        let sink = super::buffered(self.named_sink()?, &expect);
        Ok(Upload::new(key.clone(), expect, Box::new(FsSink(sink))))
    }

    fn begin_new(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        #[cfg(target_os = "linux")]
        if let Some(a) = &self.anon {
            let made = {
                let mut h = lock(&self.port.handles);
                h.1 += 1;
                if h.1 > PortState::USES {
                    h.0.clear();
                    h.1 = 1;
                }
                a.create(&self.root, &self.tmp, key, &mut h.0)?
            };
            if let Some(f) = made {
                let sink = super::buffered(Sink::Anon(f), &expect);
                return Ok(Upload::new(key.clone(), expect, Box::new(FsSink(sink))));
            }
        }
        self.begin(key, expect)
    }

    fn place(&self, batch: Vec<crate::Finished>) -> Vec<Result<Placed>> {
        let mut dirs = DirCache::default();
        let mut placed = Vec::new();
        let out = batch
            .into_iter()
            .map(|f| {
                let (key, body, committed) = f.into_parts();
                let held = body.downcast::<Held>().map_err(|_| foreign_upload(&key))?;
                let v = Verified {
                    held: *held,
                    committed,
                };
                let p = self.place_in(v, &key, &mut dirs)?;
                if !SYNC_WHOLE_FS {
                    placed.push(key);
                }
                Ok(p)
            })
            .collect();
        if !placed.is_empty() {
            lock(&self.port.placed).append(&mut placed);
        }
        out
    }

    fn sync(&self) -> Result<()> {
        let placed = std::mem::take(&mut *lock(&self.port.placed));
        let r = FsStore::sync(self, &placed);
        if r.is_err() {
            // Synced again by the next call.
            lock(&self.port.placed).extend(placed);
        }
        r
    }

    fn get(&self, key: &RelPath) -> Result<Box<dyn Read + Send>> {
        self.open_copy(key)
    }

    fn head(&self, key: &RelPath) -> Result<Option<ObjectMeta>> {
        // One `lstat` of the full path: when nothing is there (most keys of a baseline) that is
        // the answer, and the directories on the way are checked only for what exists. (Nothing
        // found through a symbolic link on the way is no answer that matters: such a path is
        // refused when a body is placed.)
        let target = key.under(&self.root);
        let m = match fs::symlink_metadata(&target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            r => r,
        };
        if !self.parents(key, false)? {
            return Ok(None);
        }
        match m {
            Ok(m) if m.is_dir() => Ok(None),
            Ok(m) => Ok(Some(meta_of(&m))),
            Err(e) => Err(Error::io(&target, e)),
        }
    }

    fn delete(&self, key: &RelPath) -> Result<bool> {
        self.remove(key)
    }

    fn list(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<(RelPath, ObjectMeta)>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        self.walk(after, &mut |item| match item {
            Ok((k, path)) => {
                let m = fs::symlink_metadata(path).map_err(|e| Error::io(path, e));
                f(m.map(|m| (k, meta_of(&m))))
            }
            Err(e) => f(Err(e)),
        })
    }

    /// The walk of [`Store::list`] without a `stat` of each file: the names come from the
    /// directories' entries alone.
    fn list_keys(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<RelPath>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        self.walk(after, &mut |item| f(item.map(|(k, _)| k)))
    }

    fn set_modified(&self, key: &RelPath, t: SystemTime) -> Result<bool> {
        FsStore::set_modified(self, key, t).map(|()| true)
    }

    fn features(&self) -> Features<'_> {
        Features::new()
            .finish_blocks(self.verify_blocks())
            .crash_safe(true)
            .in_place(true)
            .local(&self.root)
            .interrupted(self)
            .hierarchy(self)
            .versions(self)
    }
}

impl Interrupted for FsStore {
    fn clean_interrupted(&self) -> Result<u64> {
        self.clean_tmp()
    }
}

impl Hierarchy for FsStore {
    fn at(&self, key: &RelPath) -> Result<At> {
        // One `lstat`: a directory at the key, or a non-directory on the way.
        let target = key.under(&self.root);
        match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => Ok(At::Blocked),
            Ok(_) => Ok(At::Taken),
            Err(e) => match e.kind() {
                std::io::ErrorKind::NotFound => Ok(At::Free),
                std::io::ErrorKind::NotADirectory => Ok(At::Blocked),
                _ => Err(Error::io(&target, e)),
            },
        }
    }
}
