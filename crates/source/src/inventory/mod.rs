//! Inventories: what resources a Source has right now.
//!
//! [`Inventory`] is the seam for other kinds of Sources (a database table, an object-store
//! bucket, OAI-PMH): it lists files with their size and modification time and opens them for
//! reading. [`DirInventory`] walks a directory tree in parallel.

pub mod own;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
#[cfg(not(unix))]
use std::time::UNIX_EPOCH;

use ignore::overrides::OverrideBuilder;

use crate::error::{Error, Result};
pub(crate) use crate::uri::path_bytes;

/// One file as listed by an inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Path relative to the inventory's root.
    pub rel: PathBuf,
    /// Size in bytes (0 when not asked: see [`Inventory::list_names`]).
    pub len: u64,
    /// Modification time, nanoseconds since the epoch (0 when not asked).
    pub mtime_ns: i128,
}

/// A file that could not be listed or read, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path (relative when known).
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// What a Source publishes.
pub trait Inventory: Send + Sync {
    /// Lists every resource. Problems with single entries are reported, not fatal.
    fn list(&self) -> Result<(Vec<Listed>, Vec<Skipped>)>;

    /// Lists every resource like [`Inventory::list`], for a caller that reads every one of
    /// them anyway ([`Inventory::read_stable`] gives each one's size and modification time as
    /// read): `len` and `mtime_ns` may then be left at 0 where finding them would cost a
    /// lookup of their own. The default is [`Inventory::list`].
    fn list_names(&self) -> Result<(Vec<Listed>, Vec<Skipped>)> {
        self.list()
    }
    /// Opens a resource for reading.
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>>;
    /// Size and modification time of a resource now (to detect a change during hashing).
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)>;

    /// Reads a resource whole, feeding its bytes to `sink` (through `buf`, reused across
    /// calls), and returns its size and modification time when they were the same before and
    /// after the read and the bytes fed match that size; `None` when it changed meanwhile (the
    /// caller may try again).
    ///
    /// The default asks [`Inventory::stat`], then [`Inventory::open`], then `stat` again; an
    /// inventory that can ask the opened resource itself should (one lookup instead of three).
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let before = self.stat(rel)?;
        let mut f = self.open(rel)?;
        let n = feed_known(&mut f, buf, before.0, sink)?;
        let after = self.stat(rel)?;
        Ok((before == after && n == before.0).then_some(after))
    }
}

/// The largest read buffer used for hashing (per hashing thread).
const READ_BUF: usize = 256 * 1024;

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

/// Whether `p` is `d` or lies inside it. Both must be normalized (absolute or both relative, no
/// `.` or `..`, no repeated or trailing separator: canonical paths and paths joined from
/// them are): then comparing bytes gives what `Path::starts_with` gives, without parsing both
/// into components.
pub(crate) fn under(p: &Path, d: &Path) -> bool {
    #[cfg(unix)]
    {
        let (p, d) = (path_bytes(p), path_bytes(d));
        p.starts_with(&d) && (p.len() == d.len() || p[d.len()] == b'/' || d.ends_with(b"/"))
    }
    #[cfg(not(unix))]
    {
        p.starts_with(d)
    }
}

/// Whether a relative path has a segment starting with `.` (a dotfile or dot-directory).
pub(crate) fn hidden(rel: &Path) -> bool {
    #[cfg(unix)]
    {
        let b = path_bytes(rel);
        b.first() == Some(&b'.') || b.windows(2).any(|w| w == b"/.")
    }
    #[cfg(not(unix))]
    {
        rel.components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    }
}

/// Modification time in nanoseconds since the epoch (0 before it).
#[cfg(unix)]
fn mtime_ns(md: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    // What `modified()` and `duration_since(UNIX_EPOCH)` give, without the conversions.
    (i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec())).max(0)
}

#[cfg(not(unix))]
fn mtime_ns(md: &std::fs::Metadata) -> i128 {
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
    /// Walks the tree on [`DirInventory`]'s threads, a directory at a time: entries come from
    /// `readdir` with their type, and each file is stat'ed relative to its directory (one
    /// lookup of one name, not of the full path from `/`).
    fn list(&self) -> Result<(Vec<Listed>, Vec<Skipped>)> {
        self.walk(true)
    }

    /// The same walk without a `stat` per regular file (`len` and `mtime_ns` are 0 for them):
    /// `readdir` gives each entry's type (or, on a file system that does not, std asks
    /// `lstat`); a link is still followed and checked as [`Inventory::list`] does.
    fn list_names(&self) -> Result<(Vec<Listed>, Vec<Skipped>)> {
        self.walk(false)
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(self.open_file(rel)?))
    }

    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let md = std::fs::metadata(self.canonical_root.join(rel))?;
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
}

impl DirInventory {
    /// Walks the tree on [`DirInventory`]'s threads, a directory at a time: entries come from
    /// `readdir` with their type, and each file is stat'ed relative to its directory (one
    /// lookup of one name, not of the full path from `/`) when `stat_files`.
    fn walk(&self, stat_files: bool) -> Result<(Vec<Listed>, Vec<Skipped>)> {
        // A tree moved or replaced since the last listing is opened anew for this scan.
        #[cfg(target_os = "linux")]
        if let Ok(mut g) = self.root_fd.write() {
            *g = None;
        }
        let walk = Walk {
            inv: self,
            stat_files,
            queue: Mutex::new(Queue {
                dirs: vec![PathBuf::new()],
                busy: 0,
            }),
            ready: Condvar::new(),
        };
        let threads = self.threads.max(1);
        let parts: Vec<Found> = std::thread::scope(|s| {
            let others: Vec<_> = (1..threads).map(|_| s.spawn(|| walk.work())).collect();
            let mut parts = vec![walk.work()];
            parts.extend(others.into_iter().filter_map(|h| h.join().ok()));
            parts
        });
        let n = parts.iter().map(|p| p.listed.len()).sum();
        let mut listed = Vec::with_capacity(n);
        let mut skipped = Vec::new();
        for p in parts {
            listed.extend(p.listed);
            skipped.extend(p.skipped);
        }
        Ok((listed, skipped))
    }
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

/// Reads `r` into `sink` through `buf` until `len` bytes came (or the end, or more than
/// `len`: the file changed). Every read asks one byte more than is left: for a file of `len`
/// bytes the read that brings the last of them is short, which is the end of a regular file
/// (for other readers, a resource that grew past `len` without its size changing is not seen:
/// `read_stable` compares sizes before and after). Returns the bytes read.
fn feed_known(
    r: &mut dyn Read,
    buf: &mut Vec<u8>,
    len: u64,
    sink: &mut dyn FnMut(&[u8]),
) -> std::io::Result<u64> {
    let mut total = 0u64;
    loop {
        let left = len.saturating_sub(total).saturating_add(1);
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(READ_BUF);
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let n = match r.read(&mut buf[..want]) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sink(&buf[..n]);
        total += n as u64;
        if total >= len && n < want {
            return Ok(total);
        }
    }
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

/// What one walking thread found.
#[derive(Default)]
struct Found {
    listed: Vec<Listed>,
    skipped: Vec<Skipped>,
}

/// Directories left to read, and how many threads are reading one (the walk is over when
/// none is left and none is being read: a directory being read may add more).
struct Queue {
    dirs: Vec<PathBuf>,
    busy: usize,
}

/// A parallel walk of a [`DirInventory`]: each thread takes a directory, lists its files and
/// queues its subdirectories.
struct Walk<'a> {
    inv: &'a DirInventory,
    /// Whether regular files are stat'ed (see [`Inventory::list_names`]).
    stat_files: bool,
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Walk<'_> {
    fn work(&self) -> Found {
        let mut found = Found::default();
        let mut subdirs = Vec::new();
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let Some(dir) = q.dirs.pop() else {
                if q.busy == 0 {
                    self.ready.notify_all();
                    return found;
                }
                q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            q.busy += 1;
            drop(q);
            self.inv
                .read_dir(&dir, self.stat_files, &mut found, &mut subdirs);
            q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            q.busy -= 1;
            if !subdirs.is_empty() {
                q.dirs.append(&mut subdirs);
                self.ready.notify_all();
            }
        }
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

    /// Lists the files of one directory (`rel` under the root) into `found`, its
    /// subdirectories into `subdirs`. Leaves out dotfiles unless asked, skipped paths, excluded
    /// ones; never descends through a link; lists a link only when it leads to a file inside
    /// the tree. Regular files are stat'ed only when `stat_files` (else listed with size and
    /// time 0).
    fn read_dir(
        &self,
        rel: &Path,
        stat_files: bool,
        found: &mut Found,
        subdirs: &mut Vec<PathBuf>,
    ) {
        let root = &self.canonical_root;
        let entries = match std::fs::read_dir(root.join(rel)) {
            Ok(d) => d,
            Err(e) => {
                found.skipped.push(Skipped {
                    path: rel.to_owned(),
                    reason: e.to_string(),
                });
                return;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    found.skipped.push(Skipped {
                        path: rel.to_owned(),
                        reason: e.to_string(),
                    });
                    break;
                }
            };
            let name = entry.file_name();
            if !self.include_hidden && name.as_encoded_bytes().first() == Some(&b'.') {
                continue;
            }
            let path = rel.join(&name);
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            if self.skipped_path(&path) || self.excluded(&path, ft.is_dir()) {
                continue;
            }
            let md = if ft.is_dir() {
                subdirs.push(path);
                continue;
            } else if ft.is_file() && !stat_files {
                found.listed.push(Listed {
                    rel: path,
                    len: 0,
                    mtime_ns: 0,
                });
                continue;
            } else if ft.is_file() {
                // Relative to the directory being read (`fstatat` / `statx` on its fd).
                entry.metadata().map_err(|e| e.to_string())
            } else if ft.is_symlink() {
                // Follow a link only when its target stays inside the tree, is a file, and
                // would be listed itself (as the server checks: a link to a dotfile, an
                // excluded file or one of the Source's own files is not listed).
                match root.join(&path).canonicalize() {
                    Ok(target) if target.starts_with(root) => match std::fs::metadata(&target) {
                        Ok(md) if md.is_file() => {
                            let rel = target.strip_prefix(root).unwrap_or(&target);
                            if !self.admits(rel) {
                                continue;
                            }
                            Ok(md)
                        }
                        Ok(_) => continue,
                        Err(e) => Err(e.to_string()),
                    },
                    Ok(_) => Err("symbolic link leaves the tree; not followed".into()),
                    Err(e) => Err(format!("dangling symbolic link: {e}")),
                }
            } else {
                continue;
            };
            match md {
                Ok(md) => found.listed.push(Listed {
                    rel: path,
                    len: md.len(),
                    mtime_ns: mtime_ns(&md),
                }),
                Err(reason) => found.skipped.push(Skipped { path, reason }),
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests;
