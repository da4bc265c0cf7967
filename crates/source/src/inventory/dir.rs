//! [`DirInventory`]: a directory tree as an inventory. Listing is the sorted walk of
//! `dir/walk.rs`; opening never leaves the tree (`openat2` beneath the root, or a check of the
//! file actually opened).

use std::io::Read;
use std::path::{Path, PathBuf};
#[cfg(not(unix))]
use std::time::UNIX_EPOCH;

use ignore::overrides::OverrideBuilder;

use crate::error::{Error, Result};
#[cfg(test)]
use crate::inventory::READ_BUF;
use crate::inventory::{Inventory, Listing, Served, feed_known, hidden, path_bytes, under};

mod read;
mod walk;

/// A directory tree as an inventory.
#[derive(Debug, Clone)]
pub struct DirInventory {
    root: PathBuf,
    canonical_root: PathBuf,
    include_hidden: bool,
    skip_dirs: Vec<PathBuf>,
    threads: usize,
    /// The exclude globs, compiled once (`admits` runs for every request the server answers).
    compiled: ignore::overrides::Override,
    /// Whether files may be opened with `openat2` beneath the root (Linux; see
    /// [`DirInventory::with_openat2`]).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    openat2: bool,
    /// The root directory, opened (shared by clones; let go by every listing, so that a tree
    /// replaced meanwhile is seen by the next scan).
    #[cfg(target_os = "linux")]
    root_fd: std::sync::Arc<std::sync::RwLock<Option<std::sync::Arc<std::os::fd::OwnedFd>>>>,
}

/// The path of an open file as the kernel resolved it (one `readlink` of `/proc/self/fd/N`,
/// where resolving the path again would take one per component, and could race with a change
/// of the tree between the check and the open).
#[cfg(target_os = "linux")]
pub(crate) fn opened_path(f: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn opened_path(_: &std::fs::File) -> Option<PathBuf> {
    None
}

/// Modification time in nanoseconds since the epoch (0 before it).
#[cfg(unix)]
pub(super) fn mtime_ns(md: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    // What `modified()` and `duration_since(UNIX_EPOCH)` give, without the conversions.
    (i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec())).max(0)
}

#[cfg(not(unix))]
pub(super) fn mtime_ns(md: &std::fs::Metadata) -> i128 {
    md.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

impl DirInventory {
    /// An inventory of `root`. `excludes` are globs (gitignore syntax) of paths to leave out;
    /// hidden files and directories (dotfiles) are left out unless `include_hidden`;
    /// `skip_dirs` (folders and files: the state directory, the documents' directory, the
    /// databases, see [`crate::inventory::own`]) are always left out, both as named (a symbolic link
    /// there too) and where they lead.
    pub fn new(
        root: &Path,
        excludes: Vec<String>,
        include_hidden: bool,
        skip_dirs: Vec<PathBuf>,
    ) -> Result<Self> {
        let canonical_root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let mut skip_dirs: Vec<PathBuf> = skip_dirs
            .iter()
            .flat_map(|d| crate::inventory::own::both_forms(d))
            .collect();
        skip_dirs.sort();
        skip_dirs.dedup();
        let compiled = compile_excludes(&canonical_root, &excludes)?;
        Ok(DirInventory {
            compiled,
            root: root.to_owned(),
            canonical_root,
            include_hidden,
            skip_dirs,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
                .min(8),
            openat2: true,
            #[cfg(target_os = "linux")]
            root_fd: Default::default(),
        })
    }

    /// Whether to open files with `openat2(2)` relative to the root, resolving beneath it
    /// (Linux 5.6 and later; on by default). Off, or where the kernel or a sandbox refuses the
    /// call, every file is opened by its full path and the file actually opened is checked to
    /// be inside the tree afterwards (through `/proc/self/fd`): the same guarantees, at a
    /// higher cost per file. Tests turn it off to exercise that fallback.
    pub fn with_openat2(mut self, on: bool) -> Self {
        self.openat2 = on;
        self
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `rel` would be listed (not excluded, not hidden, not in a skipped directory).
    /// The server asks this for every request: it compares bytes, not parsed components.
    pub fn admits(&self, rel: &Path) -> bool {
        if !self.include_hidden && hidden(rel) {
            return false;
        }
        let full = self.canonical_root.join(rel);
        if self.skip_dirs.iter().any(|d| under(&full, d)) {
            return false;
        }
        !self.compiled.matched(&full, false).is_ignore()
    }

    /// Opens a file of the tree. Never reads through a link that leaves the tree (the tree may
    /// have changed since it was listed): the file is opened beneath the root (`openat2` with
    /// `RESOLVE_BENEATH`: no `..`, absolute link or magic link can lead out, and the kernel
    /// refuses a lookup that a concurrent rename could have led out), or else the file actually
    /// opened is checked to lie inside the canonical root.
    pub fn open_file(&self, rel: &Path) -> std::io::Result<std::fs::File> {
        #[cfg(target_os = "linux")]
        if let Some(f) = self.open_beneath(rel, false)? {
            return Ok(f);
        }
        self.open_checked(rel)
    }

    /// The fallback of [`DirInventory::open_file`]: open by the full path, then check where
    /// the kernel actually went.
    fn open_checked(&self, rel: &Path) -> std::io::Result<std::fs::File> {
        let full = self.canonical_root.join(rel);
        let f = std::fs::File::open(&full)?;
        let real = opened_path(&f).map_or_else(|| full.canonicalize(), Ok)?;
        if !real.starts_with(&self.canonical_root) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "path leaves the Source directory",
            ));
        }
        Ok(f)
    }

    /// Opens `rel` (normalized: no empty, `.` or `..` segment) read-only and non-blocking when
    /// it is exactly `root/rel` with no link anywhere on the way (`openat2` with
    /// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): then the file opened is the one at that path,
    /// with no need to ask the kernel where it went. `Ok(None)` when that cannot be said this
    /// way (a link on the way, no `openat2` here): the caller opens the path and checks.
    /// The server answers every request for a resource through this.
    pub(crate) fn open_direct(&self, rel: &Path) -> std::io::Result<Option<std::fs::File>> {
        #[cfg(target_os = "linux")]
        {
            self.open_beneath(rel, true)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = rel;
            Ok(None)
        }
    }

    /// The root directory, opened with no link on its path (it was canonical when the
    /// inventory was made; a link there now means the tree was moved or replaced by a link,
    /// and the checked path decides). `None` where `openat2` is unavailable or turned off.
    #[cfg(target_os = "linux")]
    fn root_fd(&self) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
        use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
        if !self.openat2 || !openat2_available() {
            return None;
        }
        if let Some(fd) = self.root_fd.read().ok().and_then(|g| g.clone()) {
            return Some(fd);
        }
        let fd = match rustix::fs::openat2(
            CWD,
            &self.canonical_root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS,
        ) {
            Ok(fd) => std::sync::Arc::new(fd),
            Err(e) => {
                // ENOSYS: an old kernel; EPERM: a sandbox (seccomp) refusing the call.
                if e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM {
                    openat2_unavailable();
                }
                return None;
            }
        };
        if let Ok(mut g) = self.root_fd.write() {
            *g = Some(fd.clone());
        }
        Some(fd)
    }

    /// Opens `rel` beneath the root with `openat2`, following links that stay beneath it (or
    /// none with `direct`, non-blocking then, as the server wants). `Ok(None)`: this way cannot
    /// tell, the checked path must (no `openat2`; an absolute link, which `RESOLVE_BENEATH`
    /// refuses even when it points inside the tree; a rename racing the lookup; a link with
    /// `direct`).
    #[cfg(target_os = "linux")]
    fn open_beneath(&self, rel: &Path, direct: bool) -> std::io::Result<Option<std::fs::File>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let Some(root) = self.root_fd() else {
            return Ok(None);
        };
        let mut oflags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY;
        let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if direct {
            oflags |= OFlags::NONBLOCK;
            resolve |= ResolveFlags::NO_SYMLINKS;
        }
        match rustix::fs::openat2(&*root, rel, oflags, Mode::empty(), resolve) {
            Ok(fd) => Ok(Some(std::fs::File::from(fd))),
            Err(Errno::NOSYS) => {
                openat2_unavailable();
                Ok(None)
            }
            // EXDEV: leaving the root or an absolute link; ELOOP: a link (with `direct`), a
            // magic link or too many links; EAGAIN: a rename raced the lookup; EPERM, EINVAL,
            // E2BIG: a sandbox or kernel that does not take the call as made.
            Err(
                Errno::XDEV
                | Errno::LOOP
                | Errno::AGAIN
                | Errno::PERM
                | Errno::INVAL
                | Errno::TOOBIG,
            ) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

fn compile_excludes(root: &Path, excludes: &[String]) -> Result<ignore::overrides::Override> {
    let mut ob = OverrideBuilder::new(root);
    for g in excludes {
        ob.add(&format!("!{g}"))
            .map_err(|e| Error::Config(format!("bad --exclude glob {g:?}: {e}")))?;
    }
    ob.build()
        .map_err(|e| Error::Config(format!("bad --exclude globs: {e}")))
}

impl Inventory for DirInventory {
    /// Walks the tree in path order, a directory at a time (see `dir/walk.rs`): entries come
    /// from `readdir` with their type, and each file is stat'ed relative to its directory (one
    /// lookup of one name, not of the full path from `/`; the files of a large directory on
    /// [`DirInventory`]'s threads).
    fn list(&self) -> Result<Listing<'_>> {
        Ok(Box::new(self.walk(true)))
    }

    /// The same walk without a `stat` per regular file (`len` and `mtime_ns` are 0 for them):
    /// `readdir` gives each entry's type (or, on a file system that does not, std asks
    /// `lstat`); a link is still followed and checked as [`Inventory::list`] does.
    fn list_names(&self) -> Result<Listing<'_>> {
        Ok(Box::new(self.walk(false)))
    }

    /// Only a regular file is a resource: a directory or a special file at `rel` is an error.
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        let f = self.open_file(rel)?;
        if !f.metadata()?.is_file() {
            return Err(not_a_file(rel));
        }
        Ok(Box::new(f))
    }

    /// Only a regular file is a resource: a directory or a special file at `rel` is an error.
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let md = std::fs::metadata(self.canonical_root.join(rel))?;
        if !md.is_file() {
            return Err(not_a_file(rel));
        }
        Ok((md.len(), mtime_ns(&md)))
    }

    /// One open (beneath the root, or checked to be inside the tree) and the open file's own
    /// metadata before and after the read, instead of two lookups of the path: a file replaced
    /// meanwhile is still the one read, consistently, and the next scan sees the new one. The
    /// read stops at the size the file had: asking one byte more than is left, a read that
    /// returns just what is left has found the end, with no further read to see it (a file that
    /// grew meanwhile gives more, or a different size after).
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let mut f = self.open_file(rel)?;
        let before = len_mtime(&f)?;
        let n = feed_known(&mut f, buf, before.0, sink)?;
        let after = len_mtime(&f)?;
        Ok((before == after && n == before.0).then_some(after))
    }

    /// A regular file of the tree that the listing would give, never outside it nor one of
    /// the Source's own files: opened beneath the root with no link on the way (`openat2`),
    /// or else opened by path without blocking on special files and then asked where it
    /// went; through a symbolic link, the target must lie inside the tree and be admitted
    /// too. The file actually opened is what is checked, so no change of the tree between a
    /// check and the open can lead out of it.
    fn serve(&self, rel: &Path) -> std::io::Result<Option<Served>> {
        if !self.admits(rel) {
            return Ok(None);
        }
        let full = self.canonical_root.join(rel);
        let (file, path) = match self.open_direct(rel) {
            Ok(Some(file)) => (file, full.clone()),
            Ok(None) => {
                let Ok(file) = open_nonblocking(&full) else {
                    return Ok(None);
                };
                let Ok(path) = opened_path(&file).map_or_else(|| full.canonicalize(), Ok) else {
                    return Ok(None);
                };
                (file, path)
            }
            Err(_) => return Ok(None),
        };
        if path != full {
            let Ok(target_rel) = path.strip_prefix(&self.canonical_root) else {
                return Ok(None);
            };
            if target_rel.as_os_str().is_empty() || !self.admits(target_rel) {
                return Ok(None);
            }
        }
        Ok(Some(Served::File { file, path }))
    }

    fn watch_root(&self) -> Option<&Path> {
        Some(&self.root)
    }

    fn local(&self) -> bool {
        true
    }
}

/// The error for a path of the tree that is there but is no regular file (so no resource).
fn not_a_file(rel: &Path) -> std::io::Error {
    std::io::Error::other(format!(
        "{}: not a regular file (a directory or a special file is no resource)",
        rel.display()
    ))
}

/// Opens a file for reading without blocking on special files (a FIFO would wait for a
/// writer); only regular files are served, which `O_NONBLOCK` does not affect.
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.custom_flags(libc::O_NONBLOCK);
    }
    o.open(path)
}

/// Size and modification time of an open file: `fstat` on Linux (std asks `statx` with an
/// empty path, which takes more work in the kernel for fields not needed here).
#[cfg(target_os = "linux")]
fn len_mtime(f: &std::fs::File) -> std::io::Result<(u64, i128)> {
    let st = rustix::fs::fstat(f)?;
    let ns = i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
    Ok((u64::try_from(st.st_size).unwrap_or(0), ns.max(0)))
}

#[cfg(not(target_os = "linux"))]
fn len_mtime(f: &std::fs::File) -> std::io::Result<(u64, i128)> {
    let md = f.metadata()?;
    Ok((md.len(), mtime_ns(&md)))
}

/// Whether `openat2` may work here: false once the kernel or a sandbox said it does not
/// (`ENOSYS`, or `EPERM` where a seccomp filter refuses it), for the rest of the process.
#[cfg(target_os = "linux")]
static OPENAT2: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

#[cfg(target_os = "linux")]
fn openat2_available() -> bool {
    OPENAT2.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(target_os = "linux")]
fn openat2_unavailable() {
    if OPENAT2.swap(false, std::sync::atomic::Ordering::Relaxed) {
        tracing::debug!("openat2 unavailable: files are opened by path and checked");
    }
}

impl DirInventory {
    /// Whether `rel` (a path under the root) is one of the skipped paths, comparing bytes
    /// without joining it to the root.
    fn skipped_path(&self, rel: &Path) -> bool {
        let root = path_bytes(&self.canonical_root);
        let rel = path_bytes(rel);
        let sep = std::path::MAIN_SEPARATOR as u8;
        // `root/rel`, or `/rel` when the root is `/`.
        let prefix = if root.ends_with(&[sep]) {
            root.len()
        } else {
            root.len() + 1
        };
        self.skip_dirs.iter().any(|d| {
            let d = path_bytes(d);
            d.len() == prefix + rel.len()
                && d.starts_with(&root)
                && d[prefix - 1] == sep
                && d.ends_with(&rel)
        })
    }

    /// Whether an exclude glob leaves `rel` out.
    fn excluded(&self, rel: &Path, is_dir: bool) -> bool {
        !self.compiled.is_empty()
            && self
                .compiled
                .matched(self.canonical_root.join(rel), is_dir)
                .is_ignore()
    }
}

#[cfg(all(test, unix))]
mod tests;
