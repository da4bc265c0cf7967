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
//! below the soft `RLIMIT_NOFILE`, which is raised to the hard limit the first time (as the Go
//! runtime does at start). When no slot is free, when the file system has no `O_TMPFILE`
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

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};
use crate::fs::DirHandles;
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

/// The descriptors unnamed files may hold: the soft `RLIMIT_NOFILE` (raised to the hard limit
/// first) less [`RESERVE_FDS`], at most [`MAX_SLOTS`].
fn fd_budget() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    let mut soft = lim.current.unwrap_or(MAX_SLOTS + RESERVE_FDS);
    let want = lim.maximum.unwrap_or(MAX_SLOTS + RESERVE_FDS);
    if want > soft
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want),
                maximum: lim.maximum,
            },
        )
        .is_ok()
    {
        soft = want;
    }
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
    _slot: Slot,
}

impl AnonFile {
    /// The final path, for messages.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
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
/// missing.
fn open_seg(parent: &OwnedFd, seg: &str, path: &Path) -> Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut created = false;
    loop {
        match rustix::fs::openat(parent, seg, flags, Mode::empty()) {
            Ok(fd) => return Ok(fd),
            Err(Errno::NOENT) if !created => {
                match rustix::fs::mkdirat(parent, seg, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => created = true,
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
    /// The directory `rel` goes in, opened (and created) from `root` one segment at a time;
    /// `None` when no slot is free.
    fn dir(
        &self,
        root: &Path,
        rel: &RelPath,
        dirs: &mut DirHandles,
        max: usize,
    ) -> Result<Option<Arc<Dir>>> {
        let s = rel.as_str();
        let parent = s.rfind('/').map_or("", |i| &s[..i]);
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
                    let fd = open_seg(&cur.fd, seg, &path)?;
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
        let Some(dir) = self.dir(root, rel, dirs, p.slots)? else {
            return Ok(None);
        };
        let Some(slot) = self.slot(p.slots) else {
            return Ok(None);
        };
        let fd = match rustix::fs::openat(
            &dir.fd,
            c".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
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
            _slot: slot,
        }))
    }

    /// Gives an unnamed file its final name; whether a file was there (and was replaced, through
    /// a temporary name in `tmp`). A directory there is a conflict, never replaced.
    pub(crate) fn place(&self, f: AnonFile, tmp: &Path) -> Result<bool> {
        let target = f.path();
        match self.link(&f.file, &f.dir.fd, &f.name) {
            Ok(()) => return Ok(false),
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
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
