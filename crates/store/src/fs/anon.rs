//! Unnamed temporary files (Linux `O_TMPFILE`) created in the directory their copy goes to.
//!
//! A body received for a path where no file is yet (a baseline) need not go through a named
//! temporary file in `DEST/.resourcesync/tmp` and a rename out of it: `open(DIR, O_TMPFILE)`
//! gives an inode with no name in the final directory, which is written, verified and synced
//! like any temporary file, and `linkat(2)` then gives it its final name. No temporary name is
//! created or looked up, no rename crosses directories (the lock of both directories, and
//! searching one huge temporary directory per file), and a crash before the link leaves
//! nothing behind: the kernel frees an inode without a name when its last descriptor closes
//! or, after a crash, when the file system is mounted again.
//!
//! The descriptor must stay open until the link, so that a batch of thousands holds thousands
//! of descriptors: each one (and each directory handle) takes a slot of a per-store budget
//! below the soft `RLIMIT_NOFILE` as it is at first use. The store only reads the limit: a
//! library does not change process-wide state. A program that wants a larger budget raises its
//! soft limit before (the `resourcesync` binary raises it to the hard limit at start, as the Go
//! runtime does). When no slot is free, when the file system has no `O_TMPFILE`
//! (`EOPNOTSUPP`, `EISDIR`, `EINVAL`), or when an unnamed file cannot be linked (neither
//! `AT_EMPTY_PATH`, which needs `CAP_DAC_READ_SEARCH`, nor `/proc/self/fd/N` with
//! `AT_SYMLINK_FOLLOW` works: a probe at first use tells), the store falls back to a named
//! temporary file and a rename.
//!
//! When a file is at the final path after all (a copy not recorded, or a concurrent writer),
//! `linkat` fails with `EEXIST`: the body is then linked under a temporary name in
//! `DEST/.resourcesync/tmp` and renamed over it, as a named temporary file would have been. A
//! directory there is never replaced.
//!
//! The directories are opened one segment at a time from the destination directory with
//! `O_NOFOLLOW` (missing ones created): a symbolic link inside the destination is never
//! followed, and the file is linked into the directory that was checked, whatever happens to its
//! path meanwhile.
//!
//! A directory created here for a copy stays registered ([`Created`]) until a copy is linked
//! into it (or below it), with the count of unnamed files in flight under it. When a copy fails
//! (its file dropped without being linked: a short or wrong body, an HTTP error, a size limit),
//! the directories created for it that hold no other file in flight are removed again, deepest
//! first, with `unlinkat(AT_REMOVEDIR)` from a parent opened segment by segment with
//! `O_NOFOLLOW` (a link is never followed, nothing outside the destination is touched); the
//! first that is not empty (or gone) ends the walk, silently. A directory that existed before,
//! the destination itself and its `.resourcesync` folder are never registered, so never
//! removed. The count and the removal are under one lock, and a removal makes every
//! [`DirHandles`] forget its handles before its next use, so that a concurrent download into the
//! same new directory either keeps it or re-creates it, never finds it gone.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::DirHandles;
use crate::error::{Error, Result};
use crate::path::RelPath;

/// Descriptors left to the rest of the process (sockets, the state database, named temporary
/// files, packages) when the budget of unnamed files is set from `RLIMIT_NOFILE`.
const RESERVE_FDS: u64 = 512;
/// Most descriptors held by unnamed temporary files and their directories, however high the
/// limit.
const MAX_SLOTS: u64 = 1 << 16;
/// Most directory handles a [`DirHandles`] keeps (it starts again past this).
const MAX_DIR_HANDLES: usize = 256;

/// How an unnamed file is given a name (found by the probe, then kept).
const LINK_EMPTY_PATH: u8 = 1;
const LINK_PROC: u8 = 2;

/// The state of unnamed temporary files of one store: whether they work here, how they are
/// linked, and the descriptors they hold.
#[derive(Debug)]
pub(crate) struct Anon {
    /// Set by the probe at first use: `None` when unnamed files cannot be used at all.
    probe: OnceLock<Option<Probed>>,
    /// How to link: [`LINK_EMPTY_PATH`] or [`LINK_PROC`] (the first may be given up for the
    /// second).
    link: AtomicU8,
    /// Descriptors held now.
    held: Arc<AtomicUsize>,
    /// The directories created for copies not yet linked into them.
    created: Arc<Mutex<Created>>,
}

/// The directories an [`Anon`] created (relative paths, no leading `/`) in which no copy has
/// been linked yet, each with the number of unnamed files in flight in it or below it; and how
/// many of them were removed so far (a [`DirHandles`] filled before the last removal is
/// forgotten).
#[derive(Debug, Default)]
pub(crate) struct Created {
    users: HashMap<Arc<str>, usize>,
    removals: u64,
    /// Unnamed files in flight (created, not yet linked or dropped) per directory they are in
    /// (relative, `""` for the destination): a delete that empties such a directory leaves it
    /// (see [`Anon::prune`]); without a name in it, it looks empty to `rmdir`.
    inflight: HashMap<Arc<str>, usize>,
}

/// An unnamed file's count in [`Created::inflight`], given back when it is dropped (linked or
/// not).
#[derive(Debug)]
struct InFlight {
    created: Arc<Mutex<Created>>,
    key: Arc<str>,
}

impl InFlight {
    /// Counts one more file in flight in `key` (under the registry's lock).
    fn take(reg: &mut Created, created: &Arc<Mutex<Created>>, key: &str) -> InFlight {
        // The key shared with the map while the directory has files in flight (no allocation
        // per file).
        let key = match reg.inflight.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        };
        *reg.inflight.entry(key.clone()).or_insert(0) += 1;
        InFlight {
            created: created.clone(),
            key,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut reg = lock(&self.created);
        if let Some(n) = reg.inflight.get_mut(&*self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                reg.inflight.remove(&*self.key);
            }
        }
    }
}

fn lock(m: &Mutex<Created>) -> MutexGuard<'_, Created> {
    // A panic while it was held left the map as it was between two statements: usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What an unnamed file in flight holds of [`Created`]: one count on each registered directory
/// on its path (`keys`, outermost first). Linked, the directories are forgotten (they hold a
/// copy now); dropped otherwise, those it leaves unused and empty are removed.
#[derive(Debug)]
struct Claim {
    created: Arc<Mutex<Created>>,
    /// The destination directory (its handle).
    root: Arc<Dir>,
    keys: Vec<Arc<str>>,
    linked: bool,
}

impl Claim {
    /// Takes a count on every registered directory on `parent`'s path (`parent` included);
    /// `None` when there is none (the common case: nothing to undo).
    fn take(
        reg: &mut Created,
        created: &Arc<Mutex<Created>>,
        root: &Arc<Dir>,
        parent: &str,
    ) -> Option<Claim> {
        if reg.users.is_empty() || parent.is_empty() {
            return None;
        }
        let mut keys = Vec::new();
        let mut end = 0;
        for seg in parent.split('/') {
            end = if end == 0 {
                seg.len()
            } else {
                end + 1 + seg.len()
            };
            if let Some((k, n)) = reg.users.get_key_value(&parent[..end]) {
                let k = k.clone();
                let n = *n;
                reg.users.insert(k.clone(), n + 1);
                keys.push(k);
            }
        }
        (!keys.is_empty()).then(|| Claim {
            created: created.clone(),
            root: root.clone(),
            keys,
            linked: false,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut reg = lock(&self.created);
        if self.linked {
            // A copy is in them now: they are directories like any other.
            for k in &self.keys {
                reg.users.remove(&**k);
            }
            return;
        }
        for k in &self.keys {
            if let Some(n) = reg.users.get_mut(&**k) {
                *n = n.saturating_sub(1);
            }
        }
        // Deepest first; under the lock, so that no file is created in one meanwhile.
        for k in self.keys.iter().rev() {
            if reg.users.get(&**k) != Some(&0) {
                break;
            }
            reg.users.remove(&**k);
            match remove_dir(&self.root.fd, k) {
                Ok(()) => reg.removals += 1,
                // Not empty (something else is in it), gone, or replaced: left alone.
                Err(_) => break,
            }
        }
    }
}

/// Removes the empty directory `rel` under `root`, opening its parents one segment at a time
/// without following a symbolic link (`unlinkat(AT_REMOVEDIR)` does not follow one either).
fn remove_dir(root: &OwnedFd, rel: &str) -> rustix::io::Result<()> {
    let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut cur: Option<OwnedFd> = None;
    for seg in parent.split('/').filter(|s| !s.is_empty()) {
        let next = match &cur {
            Some(d) => rustix::fs::openat(d, seg, flags, Mode::empty())?,
            None => rustix::fs::openat(root, seg, flags, Mode::empty())?,
        };
        cur = Some(next);
    }
    match &cur {
        Some(d) => rustix::fs::unlinkat(d, name, AtFlags::REMOVEDIR),
        None => rustix::fs::unlinkat(root, name, AtFlags::REMOVEDIR),
    }
}

#[derive(Debug, Clone, Copy)]
struct Probed {
    /// Most descriptors held at once.
    slots: usize,
}

impl Anon {
    pub(crate) fn new() -> Self {
        Anon {
            probe: OnceLock::new(),
            link: AtomicU8::new(LINK_EMPTY_PATH),
            held: Arc::new(AtomicUsize::new(0)),
            created: Arc::new(Mutex::new(Created::default())),
        }
    }

    /// Whether unnamed files work in this store (probed once, in `tmp`).
    fn probed(&self, tmp: &Path) -> Option<Probed> {
        *self.probe.get_or_init(|| {
            let mode = probe(tmp)?;
            self.link.store(mode, Ordering::Relaxed);
            Some(Probed { slots: fd_budget() })
        })
    }

    /// A slot for one descriptor, if the budget has one.
    fn slot(&self, max: usize) -> Option<Slot> {
        let n = self.held.fetch_add(1, Ordering::AcqRel);
        if n >= max {
            self.held.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(self.held.clone()))
    }

    /// Descriptors held now (for tests).
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Links `file` as `name` in `dir`, by the way that works here.
    fn link(&self, file: &File, dir: impl AsFd, name: &str) -> io::Result<()> {
        if self.link.load(Ordering::Relaxed) == LINK_EMPTY_PATH {
            match rustix::fs::linkat(file, c"", &dir, name, AtFlags::EMPTY_PATH) {
                Ok(()) => return Ok(()),
                // Without CAP_DAC_READ_SEARCH (or where the flag is refused): through /proc.
                Err(Errno::NOENT | Errno::PERM | Errno::INVAL) => {
                    self.link.store(LINK_PROC, Ordering::Relaxed);
                }
                Err(e) => return Err(e.into()),
            }
        }
        link_proc(file, dir, name)
    }
}

/// `linkat("/proc/self/fd/N", AT_SYMLINK_FOLLOW)`: names an unnamed file without privileges.
fn link_proc(file: &File, dir: impl AsFd, name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(CWD, proc.as_str(), dir, name, AtFlags::SYMLINK_FOLLOW)?;
    Ok(())
}

/// Whether an unnamed file can be created in `tmp` and linked there, and how: `None` if not.
fn probe(tmp: &Path) -> Option<u8> {
    let dir = rustix::fs::open(
        tmp,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let file = File::from(
        rustix::fs::openat(
            &dir,
            c".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .ok()?,
    );
    let name = temp_name("probe");
    let mode = if rustix::fs::linkat(&file, c"", &dir, name.as_str(), AtFlags::EMPTY_PATH).is_ok() {
        LINK_EMPTY_PATH
    } else if link_proc(&file, &dir, &name).is_ok() {
        LINK_PROC
    } else {
        return None;
    };
    let _ = rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty());
    Some(mode)
}

/// The descriptors unnamed files may hold: the soft `RLIMIT_NOFILE` (read, never changed here)
/// less [`RESERVE_FDS`], at most [`MAX_SLOTS`].
fn fd_budget() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(MAX_SLOTS + RESERVE_FDS);
    usize::try_from(soft.saturating_sub(RESERVE_FDS).min(MAX_SLOTS)).unwrap_or(0)
}

/// A temporary name in `DEST/.resourcesync/tmp` (starting with `dl-`, which
/// [`crate::FsStore::clean_tmp`] removes).
pub(crate) fn temp_name(what: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("dl-{what}-{}-{n}-{t:08x}", std::process::id())
}

/// One descriptor counted against the budget; released when dropped.
#[derive(Debug)]
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A directory under the destination, opened without following symbolic links.
#[derive(Debug)]
pub(crate) struct Dir {
    fd: OwnedFd,
    /// Its path, for messages.
    path: PathBuf,
    _slot: Slot,
}

/// An unnamed temporary file in the directory its copy goes to, and that copy's name there.
#[derive(Debug)]
pub(crate) struct AnonFile {
    pub(crate) file: File,
    dir: Arc<Dir>,
    name: String,
    /// The new directories it is in, removed if it is dropped without being linked.
    claim: Option<Claim>,
    /// Its count in the directory it goes to, which a delete leaves meanwhile.
    _inflight: InFlight,
    _slot: Slot,
}

impl AnonFile {
    /// The final path, for messages.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }

    /// It has its name: the new directories it is in stay.
    fn linked(&mut self) {
        if let Some(c) = &mut self.claim {
            c.linked = true;
        }
    }
}

impl Write for AnonFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Opens `seg` of `parent` as a directory without following a symbolic link, creating it when
/// missing; whether it was created here.
fn open_seg(parent: &OwnedFd, seg: &str, path: &Path) -> Result<(OwnedFd, bool)> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let (mut tried, mut created) = (false, false);
    loop {
        match rustix::fs::openat(parent, seg, flags, Mode::empty()) {
            Ok(fd) => return Ok((fd, created)),
            Err(Errno::NOENT) if !tried => {
                tried = true;
                let mode = Mode::from_raw_mode(resourcesync_fsmode::PUBLIC_DIR);
                match rustix::fs::mkdirat(parent, seg, mode) {
                    Ok(()) => created = true,
                    // Made by someone else meanwhile: not ours to remove.
                    Err(Errno::EXIST) => {}
                    Err(e) => return Err(Error::io(path, e.into())),
                }
            }
            // Something that is not a directory: tell what.
            Err(Errno::NOTDIR | Errno::LOOP) => {
                let st = rustix::fs::statat(parent, seg, AtFlags::SYMLINK_NOFOLLOW)
                    .map_err(|e| Error::io(path, e.into()))?;
                let reason = if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                    "symbolic link inside the destination: not followed"
                } else {
                    "a file is where a directory is needed"
                };
                return Err(Error::Conflict {
                    path: path.to_path_buf(),
                    reason,
                });
            }
            Err(e) => return Err(Error::io(path, e.into())),
        }
    }
}

impl Anon {
    /// The directory `parent` (relative, `""` for the root), opened (and created) from `root`
    /// one segment at a time; `None` when no slot is free. Directories created are registered
    /// in `reg`.
    fn dir(
        &self,
        root: &Path,
        parent: &str,
        dirs: &mut DirHandles,
        max: usize,
        reg: &mut Created,
    ) -> Result<Option<Arc<Dir>>> {
        if let Some(d) = dirs.dirs.get(parent) {
            return Ok(Some(d.clone()));
        }
        if dirs.dirs.len() >= MAX_DIR_HANDLES {
            dirs.dirs.clear();
        }
        let mut cur = match dirs.dirs.get("") {
            Some(d) => d.clone(),
            None => {
                let Some(slot) = self.slot(max) else {
                    return Ok(None);
                };
                let fd = rustix::fs::open(
                    root,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| Error::io(root, e.into()))?;
                let d = Arc::new(Dir {
                    fd,
                    path: root.to_path_buf(),
                    _slot: slot,
                });
                dirs.dirs.insert(String::new(), d.clone());
                d
            }
        };
        // Each segment below the root: those open already, then those opened (or created).
        let mut end = 0;
        for seg in parent.split('/').filter(|s| !s.is_empty()) {
            end = if end == 0 {
                seg.len()
            } else {
                end + 1 + seg.len()
            };
            let key = &parent[..end];
            cur = match dirs.dirs.get(key) {
                Some(d) => d.clone(),
                None => {
                    let Some(slot) = self.slot(max) else {
                        return Ok(None);
                    };
                    let path = cur.path.join(seg);
                    let (fd, created) = open_seg(&cur.fd, seg, &path)?;
                    if created {
                        reg.users.insert(Arc::from(key), 0);
                    }
                    let d = Arc::new(Dir {
                        fd,
                        path,
                        _slot: slot,
                    });
                    dirs.dirs.insert(key.to_owned(), d.clone());
                    d
                }
            };
        }
        Ok(Some(cur))
    }

    /// An unnamed temporary file in the directory of `rel` (created as needed), or `None` when
    /// unnamed files cannot be used here or now (the caller then uses a named one).
    pub(crate) fn create(
        &self,
        root: &Path,
        tmp: &Path,
        rel: &RelPath,
        dirs: &mut DirHandles,
    ) -> Result<Option<AnonFile>> {
        let Some(p) = self.probed(tmp) else {
            return Ok(None);
        };
        let s = rel.as_str();
        let parent = s.rfind('/').map_or("", |i| &s[..i]);
        // On every way out but a file created, `claim` is dropped: the directories created for
        // this copy (and no other in flight) are removed again.
        // Counted in flight in its directory in the same critical section that found (or made)
        // the directory: a delete emptying it meanwhile leaves it (see `prune`).
        let (dir, claim, inflight) = {
            let mut reg = lock(&self.created);
            if dirs.removals != reg.removals {
                // A directory was removed since these handles were opened: open them again.
                dirs.dirs.clear();
                dirs.removals = reg.removals;
            }
            let dir = self.dir(root, parent, dirs, p.slots, &mut reg);
            let claim = dirs
                .dirs
                .get("")
                .and_then(|r| Claim::take(&mut reg, &self.created, r, parent));
            let inflight =
                matches!(dir, Ok(Some(_))).then(|| InFlight::take(&mut reg, &self.created, parent));
            (dir, claim, inflight)
        };
        let (Some(dir), Some(inflight)) = (dir?, inflight) else {
            return Ok(None);
        };
        let Some(slot) = self.slot(p.slots) else {
            return Ok(None);
        };
        // The mode of a new copy (`0666 & ~umask`: the kernel applies the umask to an unnamed
        // file as to a named one; see resourcesync_fsmode), before it has a name.
        let fd = match rustix::fs::openat(
            &dir.fd,
            c".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(resourcesync_fsmode::PUBLIC_FILE),
        ) {
            Ok(fd) => fd,
            // Not on this file system (another one mounted inside the destination).
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => return Ok(None),
            Err(e) => return Err(Error::io(&dir.path, e.into())),
        };
        let name = rel.segments().last().unwrap_or_default().to_owned();
        Ok(Some(AnonFile {
            file: File::from(fd),
            dir,
            name,
            claim,
            _inflight: inflight,
            _slot: slot,
        }))
    }

    /// After a delete of a copy in `parent` (relative, `""` for the destination `root`):
    /// removes the directories it leaves empty, deepest first, up to (not including) the
    /// destination, and stops at the first that is not empty or into which an unnamed file is
    /// on its way (it has no name there yet, so `rmdir` would take the directory from under
    /// it). Under the registry's lock, so that no unnamed file is created in one meanwhile; a
    /// removal makes every [`DirHandles`] open its directories again. Parents are opened one
    /// segment at a time without following a link.
    pub(crate) fn prune(&self, root: &Path, parent: &str) {
        if parent.is_empty() {
            return;
        }
        let Ok(root_fd) = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return;
        };
        let mut reg = lock(&self.created);
        let mut key = parent;
        loop {
            if reg.inflight.get(key).is_some_and(|&n| n > 0) {
                break;
            }
            // Not empty, gone or replaced: left alone, and so are the directories above it.
            if remove_dir(&root_fd, key).is_err() {
                break;
            }
            reg.removals += 1;
            reg.users.remove(key);
            match key.rfind('/') {
                Some(i) => key = &key[..i],
                None => break,
            }
        }
    }

    /// Gives an unnamed file its final name; whether a file was there (and was replaced, through
    /// a temporary name in `tmp`). A directory there is a conflict, never replaced.
    pub(crate) fn place(&self, mut f: AnonFile, tmp: &Path) -> Result<bool> {
        let target = f.path();
        match self.link(&f.file, &f.dir.fd, &f.name) {
            Ok(()) => {
                f.linked();
                return Ok(false);
            }
            Err(e) if e.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => {}
            Err(e) => return Err(Error::io(&target, e)),
        }
        let st = rustix::fs::statat(&f.dir.fd, f.name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| Error::io(&target, e.into()))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            return Err(Error::Conflict {
                path: target,
                reason: "a directory is where the file goes",
            });
        }
        // Named in the temporary folder (removed by clean_tmp after a crash), then renamed over
        // the file in place.
        let name = temp_name("x");
        let dir = rustix::fs::open(
            tmp,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(tmp, e.into()))?;
        self.link(&f.file, &dir, &name)
            .map_err(|e| Error::io(tmp.join(&name), e))?;
        if let Err(e) = rustix::fs::renameat(&dir, name.as_str(), &f.dir.fd, f.name.as_str()) {
            let _ = rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty());
            return Err(Error::io(&target, e.into()));
        }
        f.linked();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_sized_from_the_soft_limit_which_is_left_alone() {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let lim = getrlimit(Resource::Nofile);
        let Some(hard) = lim.maximum else {
            return; // no hard limit: nothing a library could raise the soft one to
        };
        // Below the hard limit (lowered by one at most: other tests of this process run on).
        let soft = lim.current.unwrap_or(hard).min(hard - 1);
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(soft),
                maximum: Some(hard),
            },
        )
        .expect("lower the soft limit");
        let d = tempfile::tempdir().expect("tmp");
        let s = crate::FsStore::open(d.path()).expect("open");
        let mut dirs = DirHandles::default();
        let rel = RelPath::parse("x/a").expect("rel");
        // The first unnamed file probes and sets the budget.
        drop(
            s.create_temp_at(crate::Expect::default(), &rel, &mut dirs)
                .expect("temp"),
        );
        assert_eq!(getrlimit(Resource::Nofile).current, Some(soft));
        let budget = usize::try_from(soft.saturating_sub(RESERVE_FDS).min(MAX_SLOTS)).expect("n");
        assert_eq!(fd_budget(), budget);
    }

    #[test]
    fn an_unnamed_file_is_linked_through_proc_without_privileges() {
        // The way taken without CAP_DAC_READ_SEARCH (root takes AT_EMPTY_PATH): exercised
        // here whatever the test runs as.
        let d = tempfile::tempdir().expect("tmp");
        let dir = rustix::fs::open(
            d.path(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .expect("dir");
        let Ok(fd) = rustix::fs::openat(
            &dir,
            c".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) else {
            return; // no O_TMPFILE on this file system: the store falls back
        };
        let mut f = File::from(fd);
        f.write_all(b"abc").expect("write");
        assert_eq!(std::fs::read_dir(d.path()).expect("ls").count(), 0);
        link_proc(&f, &dir, "named").expect("link");
        assert_eq!(std::fs::read(d.path().join("named")).expect("read"), b"abc");
        let e = link_proc(&f, &dir, "named").expect_err("exists");
        assert_eq!(e.raw_os_error(), Some(Errno::EXIST.raw_os_error()));
    }
}
