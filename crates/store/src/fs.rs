//! The Destination's copies in a directory: [`FsStore`]. It implements the [`crate::Store`]
//! port (in `fs/object.rs`) on the file-system operations below, which stay public for the
//! engine's fast paths and their tests.
//!
//! A copy is written in three steps (Z39.99-2014 §5.2 Baseline and Incremental
//! Synchronization; §7 `length` and `hash` are what the copy is verified against):
//!
//! 1. [`FsStore::create_temp`]: a temporary file inside `DEST/.resourcesync/tmp`, on the same file
//!    system as the copies, that counts and hashes what is written, and refuses to grow past the
//!    published length (or the maximum size when none is published);
//! 2. [`FsStore::commit`]: flush, check the length and every published digest of a known
//!    algorithm ([`FsStore::verify`]), sync the data ([`FsStore::sync`]), create missing parent
//!    directories (never through a symbolic link) and rename into place ([`FsStore::place`]), sync
//!    the rename ([`FsStore::sync`]);
//! 3. the caller records the copy in the state only after that.
//!
//! The steps of 2 are public so that a caller can run them for a batch of files, with one sync
//! before and one after all the renames. On Linux a sync is one `syncfs(2)` of the file system
//! (every dirty page and inode of it, ours among them, however many); elsewhere `verify`
//! `fsync`s each file and `sync` each directory renamed into.
//!
//! A copy expected to be new can instead be written to an unnamed temporary file in its own
//! directory ([`FsStore::create_temp_at`]: Linux `O_TMPFILE`, given its name by one `linkat(2)`
//! in [`FsStore::place_in`]; see the `anon` module), with the same order of steps and no
//! temporary name to clean up.
//!
//! Every copy gets the mode a new file gets (`0666 & ~umask`) and every directory made for
//! copies `0777 & ~umask`, whichever way it was written (new, replaced, repaired, extracted from
//! a dump): the temporary file is created with that mode before it has its final name
//! ([`resourcesync_fsmode`]).
//!
//! A temporary file dropped without being committed is removed. After a crash, leftovers in the
//! temporary folder are removed by [`FsStore::clean_tmp`]; no file at its final path is ever
//! partial.

use std::fmt::Debug;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};
pub use crate::object::{Committed, Expect, Placed};
use crate::path::RelPath;

#[cfg(target_os = "linux")]
mod anon;
#[cfg(target_os = "linux")]
mod group;
mod object;
mod versions;

/// The Destination's own folder under DEST: state database and temporary files.
pub use resourcesync_model::path::STATE_DIR;

/// The relative path of `name` found in the directory at `prefix` ("" for the destination
/// itself) during a walk of a destination; `None` for the state directory at the top, which
/// walks leave out.
pub fn child_rel(prefix: &str, name: &str) -> Option<String> {
    if prefix.is_empty() {
        (name != STATE_DIR).then(|| name.to_owned())
    } else {
        Some(format!("{prefix}/{name}"))
    }
}

/// Where a body is written: a named temporary file in `DEST/.resourcesync/tmp`, or (Linux) an
/// unnamed one in the directory its copy goes to ([`FsStore::create_temp_at`]).
#[derive(Debug)]
enum Sink {
    Named(tempfile::NamedTempFile),
    #[cfg(target_os = "linux")]
    Anon(anon::AnonFile),
}

impl Sink {
    /// The file's path, for messages (an unnamed file's final path).
    fn path(&self) -> PathBuf {
        match self {
            Sink::Named(f) => f.path().to_path_buf(),
            #[cfg(target_os = "linux")]
            Sink::Anon(f) => f.path(),
        }
    }

    fn file(&self) -> &File {
        match self {
            Sink::Named(f) => f.as_file(),
            #[cfg(target_os = "linux")]
            Sink::Anon(f) => &f.file,
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Named(f) => f.write(buf),
            #[cfg(target_os = "linux")]
            Sink::Anon(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Named(f) => f.flush(),
            #[cfg(target_os = "linux")]
            Sink::Anon(f) => f.flush(),
        }
    }
}

/// A body received and verified but not yet in place: the first half of [`FsStore::commit`], for
/// commits in batches (see [`FsStore::place`] and [`FsStore::sync`]). Dropped without being placed,
/// its temporary file is removed.
#[derive(Debug)]
pub(crate) struct Verified {
    held: Held,
    committed: Committed,
}

/// The file of a [`Verified`] body.
#[derive(Debug)]
enum Held {
    /// A named temporary file (closed: a batch of thousands holds no descriptor).
    Named(tempfile::TempPath),
    /// An unnamed one, open until it is linked into place (closing it frees it).
    #[cfg(target_os = "linux")]
    Anon(anon::AnonFile),
}

impl Verified {}

/// The directories of a batch already checked by [`FsStore::place_in`] (each a real directory
/// under the destination, not a symbolic link), so that a batch of many files in few
/// directories checks each directory once. Keep one for a batch only: a directory checked long
/// ago may have been replaced since.
#[derive(Debug, Default)]
pub(crate) struct DirCache {
    dirs: std::collections::HashSet<String>,
}

impl DirCache {
    #[cfg(test)]
    /// Forgets every directory checked.
    pub(crate) fn clear(&mut self) {
        self.dirs.clear();
    }
}

/// The directories opened for unnamed temporary files (see [`Store::begin_new`](crate::Store::begin_new)), so
/// that many files in few directories open each directory once. Keep one for a package or a
/// batch, not longer: a directory opened long ago may have been moved since.
#[derive(Debug, Default)]
pub(crate) struct DirHandles {
    #[cfg(target_os = "linux")]
    pub(crate) dirs: std::collections::HashMap<String, std::sync::Arc<anon::Dir>>,
    /// The store's count of directories removed when these were opened (see the `anon`
    /// module): they are opened again after another removal.
    #[cfg(target_os = "linux")]
    pub(crate) removals: u64,
}

impl DirHandles {
    /// Forgets (closes) every directory handle.
    pub(crate) fn clear(&mut self) {
        #[cfg(target_os = "linux")]
        self.dirs.clear();
    }
}

/// Copies in a directory on the local file system.
#[derive(Debug, Clone)]
pub struct FsStore {
    root: PathBuf,
    tmp: PathBuf,
    /// Unnamed temporary files ([`FsStore::create_temp_at`]), unless turned off.
    #[cfg(target_os = "linux")]
    anon: Option<std::sync::Arc<anon::Anon>>,
    /// What the [`crate::Store`] port keeps between calls (see `fs/object.rs`).
    port: std::sync::Arc<object::PortState>,
}

impl FsStore {
    /// Whether [`FsStore::verify`] waits for the disk (it `fsync`s each file where the file system
    /// cannot be synced as a whole; see [`FsStore::sync`]): callers on an async runtime then run it
    /// on a blocking thread.
    pub(crate) fn verify_blocks(&self) -> bool {
        !SYNC_WHOLE_FS
    }

    /// Opens (creating) a destination directory and its temporary folder. The destination is
    /// made as any directory of copies (`0777 & ~umask`), its `.resourcesync` folder and the
    /// temporary folder in it owner-only (`0700`: the state is there); see
    /// [`resourcesync_fsmode`].
    pub fn open(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        let tmp = root.join(STATE_DIR).join("tmp");
        fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
        resourcesync_fsmode::private_dir_all(&tmp).map_err(|e| Error::io(&tmp, e))?;
        Ok(FsStore::with_paths(root, tmp))
    }

    fn with_paths(root: PathBuf, tmp: PathBuf) -> Self {
        FsStore {
            root,
            tmp,
            #[cfg(target_os = "linux")]
            anon: Some(std::sync::Arc::new(anon::Anon::new())),
            port: std::sync::Arc::default(),
        }
    }

    /// Whether [`FsStore::create_temp_at`] may create unnamed temporary files (Linux
    /// `O_TMPFILE`; on by default where supported): off, it always creates a named one, as
    /// [`FsStore::create_temp`] does. For tests of the fallback, and for file systems where
    /// unnamed files misbehave.
    pub fn with_unnamed_temps(mut self, on: bool) -> Self {
        #[cfg(target_os = "linux")]
        {
            self.anon = on.then(|| std::sync::Arc::new(anon::Anon::new()));
        }
        #[cfg(not(target_os = "linux"))]
        let _ = on;
        self
    }

    /// Descriptors held now by unnamed temporary files and their directories (0 where there
    /// are none). Not part of the stable API: for tests.
    #[doc(hidden)]
    pub fn unnamed_descriptors(&self) -> usize {
        #[cfg(target_os = "linux")]
        if let Some(a) = &self.anon {
            return a.held();
        }
        0
    }

    /// A store over a directory that may not exist, creating nothing: for reading (audits,
    /// dry runs). Writing through it fails when the temporary folder does not exist.
    pub fn existing(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let tmp = root.join(STATE_DIR).join("tmp");
        FsStore::with_paths(root, tmp)
    }

    /// The destination directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes temporary files left by an interrupted run; how many.
    pub fn clean_tmp(&self) -> Result<u64> {
        let mut n = 0;
        let rd = fs::read_dir(&self.tmp).map_err(|e| Error::io(&self.tmp, e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(&self.tmp, e))?;
            let name = e.file_name();
            if name.to_string_lossy().starts_with("dl-") {
                let _ = fs::remove_file(e.path());
                n += 1;
            }
        }
        Ok(n)
    }

    /// Checks that every existing ancestor of `rel` under the root is a real directory (not a
    /// symbolic link), creating the missing ones when `create` is set.
    fn parents(&self, rel: &RelPath, create: bool) -> Result<bool> {
        let segs: Vec<&str> = rel.segments().collect();
        let mut p = self.root.clone();
        for s in &segs[..segs.len().saturating_sub(1)] {
            p.push(s);
            if !check_dir(&p, create)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// [`FsStore::parents`] with creation, skipping the ancestors `dirs` holds and adding those
    /// checked.
    fn parents_cached(&self, rel: &RelPath, dirs: &mut DirCache) -> Result<()> {
        let s = rel.as_str();
        let mut p = self.root.clone();
        let mut start = 0;
        while let Some(i) = s[start..].find('/') {
            let end = start + i;
            p.push(&s[start..end]);
            let prefix = &s[..end];
            if !dirs.dirs.contains(prefix) {
                check_dir(&p, true)?;
                dirs.dirs.insert(prefix.to_owned());
            }
            start = end + 1;
        }
        Ok(())
    }
}

#[cfg(target_os = "linux")]
impl FsStore {
    /// Links an unnamed body into place; whether it replaced a file.
    fn place_anon(&self, f: anon::AnonFile) -> Result<bool> {
        match &self.anon {
            Some(a) => a.place(f, &self.tmp),
            // Not reached: unnamed files are created only by a store that has them.
            None => Err(Error::io(
                f.path(),
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "unnamed temporary files are off",
                ),
            )),
        }
    }
}

/// Whether the directory `p` exists and is a real directory (not a symbolic link); created
/// when missing and `create` is set.
fn check_dir(p: &Path, create: bool) -> Result<bool> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(m) if m.file_type().is_symlink() => Err(Error::Conflict {
            path: p.to_path_buf(),
            reason: "symbolic link inside the destination: not followed",
        }),
        Ok(_) => Err(Error::Conflict {
            path: p.to_path_buf(),
            reason: "a file is where a directory is needed",
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if !create {
                return Ok(false);
            }
            match fs::create_dir(p) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let m = fs::symlink_metadata(p).map_err(|e| Error::io(p, e))?;
                    if !m.is_dir() {
                        return Err(Error::Conflict {
                            path: p.to_path_buf(),
                            reason: "a file is where a directory is needed",
                        });
                    }
                    Ok(true)
                }
                Err(e) => Err(Error::io(p, e)),
            }
        }
        Err(e) => Err(Error::io(p, e)),
    }
}

/// Renames `from` to `to`, replacing a file there; whether one was replaced. On Linux one
/// `renameat2(RENAME_NOREPLACE)` tells it for a new file (the common case) without a `stat`;
/// elsewhere, or where the file system does not support the flag, a `stat` first.
fn rename_into(from: &Path, to: &Path) -> Result<bool> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(false),
            Err(rustix::io::Errno::EXIST) => {
                return replace(from, to).map(|()| true);
            }
            // Not supported here (EINVAL), or another error the plain path reports better.
            Err(_) => {}
        }
    }
    let replaced = match fs::symlink_metadata(to) {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(Error::io(to, e)),
    };
    replace(from, to).map(|()| replaced)
}

/// `rename(2)` over whatever file is at `to`; a directory there is a conflict, never replaced.
fn replace(from: &Path, to: &Path) -> Result<()> {
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::IsADirectory || to_is_dir(to) => {
            Err(Error::Conflict {
                path: to.to_path_buf(),
                reason: "a directory is where the file goes",
            })
        }
        Err(e) => Err(Error::io(to, e)),
    }
}

fn to_is_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Whether [`FsStore::verify`] leaves the syncing of data to [`FsStore::sync`] (one `syncfs` of the
/// whole file system on Linux) rather than `fsync`ing each file.
const SYNC_WHOLE_FS: bool = cfg!(target_os = "linux");

fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

#[cfg(target_os = "linux")]
fn syncfs(root: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    // Shared with the other stores of the process on the same file system (fs/group.rs).
    let dev = fs::metadata(root).map_err(|e| Error::io(root, e))?.dev();
    group::shared_sync(dev, root, |root| {
        let d = File::open(root).map_err(|e| Error::io(root, e))?;
        rustix::fs::syncfs(&d).map_err(|e| Error::io(root, e.into()))
    })
}

#[cfg(not(target_os = "linux"))]
fn syncfs(_root: &Path) -> Result<()> {
    Ok(())
}

/// Opens a regular file for reading without following a symbolic link in its place (nor
/// blocking on a FIFO).
fn open_nofollow(p: &Path) -> io::Result<File> {
    let mut o = fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        o.custom_flags(i32::try_from(flags.bits()).unwrap_or(0));
    }
    let f = o.open(p)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// The buffer in front of a body's file: the size of the body when it is small (most are),
/// 64 KiB at most.
fn buffered(sink: Sink, expect: &Expect) -> BufWriter<Sink> {
    let cap = expect.length.map_or(64 * 1024, |n| n.clamp(512, 64 * 1024));
    BufWriter::with_capacity(usize::try_from(cap).unwrap_or(64 * 1024), sink)
}

/// Flushes a complete body, gives it its modification time, and syncs it where the whole file
/// system is not synced at once: what is left to verify and place.
fn seal(out: BufWriter<Sink>, modified: Option<SystemTime>) -> Result<Held> {
    let sink = out.into_inner().map_err(|e| {
        let (err, w) = e.into_parts();
        Error::io(w.get_ref().path(), err)
    })?;
    // After the last write (which sets the time), before the data is synced.
    if let Some(t) = modified {
        sink.file()
            .set_modified(t)
            .map_err(|e| Error::io(sink.path(), e))?;
    }
    if !SYNC_WHOLE_FS {
        sink.file()
            .sync_all()
            .map_err(|e| Error::io(sink.path(), e))?;
    }
    Ok(match sink {
        // The descriptor is closed: a batch of thousands holds no named file open.
        Sink::Named(f) => Held::Named(f.into_temp_path()),
        #[cfg(target_os = "linux")]
        Sink::Anon(f) => Held::Anon(f),
    })
}

/// The file-system operations (the engine's fast paths, see the module documentation); the
/// [`crate::Store`] port is built on them.
impl FsStore {
    /// A named temporary file in `DEST/.resourcesync/tmp`, with the mode a new copy gets
    /// (`0666 & ~umask`, kept by the rename that puts it in place; see [`resourcesync_fsmode`]).
    fn named_sink(&self) -> Result<Sink> {
        let tmp = resourcesync_fsmode::public_temp("dl-")
            .tempfile_in(&self.tmp)
            .map_err(|e| Error::io(&self.tmp, e))?;
        Ok(Sink::Named(tmp))
    }

    /// [`FsStore::place`] for one copy of a batch: the directories `dirs` holds are not checked
    /// again (those checked here are added), and the result says whether a file was replaced.
    pub(crate) fn place_in(
        &self,
        v: Verified,
        rel: &RelPath,
        dirs: &mut DirCache,
    ) -> Result<Placed> {
        let Verified { held, committed } = v;
        let path = match held {
            Held::Named(p) => p,
            // Its directory was opened (and checked) when it was created.
            #[cfg(target_os = "linux")]
            Held::Anon(f) => {
                let replaced = self.place_anon(f)?;
                return Ok(Placed {
                    committed,
                    replaced,
                });
            }
        };
        self.parents_cached(rel, dirs)?;
        let target = rel.under(&self.root);
        // A directory at the target makes the rename fail (EISDIR): it is never replaced.
        let replaced = match rename_into(&path, &target) {
            // The directory went since it was checked (a delete emptied it meanwhile): made
            // again, once.
            Err(Error::Io { cause, .. })
                if cause.kind() == io::ErrorKind::NotFound && path.exists() =>
            {
                self.parents(rel, true)?;
                rename_into(&path, &target)?
            }
            r => r?,
        };
        // In place: the temporary name is gone, nothing to remove on drop.
        let _ = path.keep();
        Ok(Placed {
            committed,
            replaced,
        })
    }

    /// Makes what was written and renamed through this store so far durable. `placed` are the
    /// paths placed since the last call (their directories need syncing where the whole file
    /// system cannot be synced at once). See [`FsStore`] for how.
    pub(crate) fn sync(&self, placed: &[RelPath]) -> Result<()> {
        if SYNC_WHOLE_FS {
            // One syncfs(2) writes back every dirty page and inode of the file system: the
            // bodies verified since the last call and the directories they were renamed into,
            // in one call however many there are.
            return syncfs(&self.root);
        }
        // Elsewhere each file was synced by `verify`; the directories of the renames remain.
        let mut dirs: Vec<PathBuf> = placed
            .iter()
            .filter_map(|r| r.under(&self.root).parent().map(Path::to_path_buf))
            .collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            sync_dir(&d)?;
        }
        Ok(())
    }

    /// Removes the copy at `rel` (and the directories it leaves empty); whether there was one.
    pub(crate) fn remove(&self, rel: &RelPath) -> Result<bool> {
        if !self.parents(rel, false)? {
            return Ok(false);
        }
        let target = rel.under(&self.root);
        match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => {
                return Err(Error::Conflict {
                    path: target,
                    reason: "a directory, not a copy: left alone",
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io(&target, e)),
        }
        fs::remove_file(&target).map_err(|e| Error::io(&target, e))?;
        // Remove the directories the copy leaves empty, up to (not including) the root; with
        // unnamed temporary files, not one into which a new copy is on its way (see the `anon`
        // module).
        #[cfg(target_os = "linux")]
        if let Some(a) = &self.anon {
            let s = rel.as_str();
            a.prune(&self.root, s.rfind('/').map_or("", |i| &s[..i]));
            if let Some(d) = target.parent() {
                let _ = sync_dir(d);
            }
            return Ok(true);
        }
        let mut dir = target.parent().map(Path::to_path_buf);
        while let Some(d) = dir {
            if d == self.root || !d.starts_with(&self.root) || fs::remove_dir(&d).is_err() {
                break;
            }
            dir = d.parent().map(Path::to_path_buf);
        }
        if let Some(d) = target.parent() {
            let _ = sync_dir(d);
        }
        Ok(true)
    }

    /// Opens the copy at `rel` for reading.
    pub(crate) fn open_copy(&self, rel: &RelPath) -> Result<Box<dyn Read + Send>> {
        let target = rel.under(&self.root);
        if !self.parents(rel, false)? {
            return Err(Error::io(
                &target,
                io::Error::new(io::ErrorKind::NotFound, "no such file"),
            ));
        }
        let m = fs::symlink_metadata(&target).map_err(|e| Error::io(&target, e))?;
        if !m.is_file() {
            return Err(Error::Conflict {
                path: target,
                reason: "not a regular file",
            });
        }
        // Not through a link put there since, not blocking on a FIFO: a regular file or
        // nothing.
        let f = open_nofollow(&target).map_err(|e| {
            // ELOOP: a symbolic link now.
            if e.kind() == io::ErrorKind::Other || e.raw_os_error() == Some(40) {
                Error::Conflict {
                    path: target.clone(),
                    reason: "not a regular file",
                }
            } else {
                Error::io(&target, e)
            }
        })?;
        Ok(Box::new(f))
    }

    /// Gives the copy at `rel` the modification time `t` (see [`Expect::modified`]).
    pub(crate) fn set_modified(&self, rel: &RelPath, t: SystemTime) -> Result<()> {
        if !self.parents(rel, false)? {
            return Err(Error::io(
                rel.under(&self.root),
                io::Error::from(io::ErrorKind::NotFound),
            ));
        }
        let target = rel.under(&self.root);
        // Opened without following a symbolic link put in its place.
        let f = open_nofollow(&target).map_err(|e| Error::io(&target, e))?;
        f.set_modified(t).map_err(|e| Error::io(&target, e))
    }
}

#[cfg(test)]
mod test_api;
#[cfg(test)]
mod tests;
