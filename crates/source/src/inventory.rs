//! Inventories: what resources a Source has right now.
//!
//! [`Inventory`] is the seam for other kinds of Sources (a database table, an object-store
//! bucket, OAI-PMH): it lists files with their size and modification time and opens them for
//! reading. [`DirInventory`] walks a directory tree in parallel.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;

use crate::error::{Error, Result};

/// One file as listed by an inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Path relative to the inventory's root.
    pub rel: PathBuf,
    /// Size in bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the epoch.
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
        let n = feed(&mut f, buf, before.0, sink)?;
        let after = self.stat(rel)?;
        Ok((before == after && n == before.0).then_some(after))
    }
}

/// Reads `r` to its end into `sink` through `buf`, expecting about `expect` bytes (a buffer of
/// that size, within bounds, so that a small file takes one read); returns the bytes read.
fn feed(
    r: &mut dyn Read,
    buf: &mut Vec<u8>,
    expect: u64,
    sink: &mut dyn FnMut(&[u8]),
) -> std::io::Result<u64> {
    // +1: the read that finds the end fits in the same call when the size is right.
    let want = usize::try_from(expect.saturating_add(1))
        .unwrap_or(usize::MAX)
        .clamp(4096, READ_BUF);
    if buf.len() < want {
        buf.resize(want, 0);
    }
    let mut total = 0u64;
    loop {
        let n = match r.read(&mut buf[..want]) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sink(&buf[..n]);
        total += n as u64;
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

/// The bytes of a path (its text, lossily, off Unix).
pub(crate) fn path_bytes(p: &Path) -> std::borrow::Cow<'_, [u8]> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        std::borrow::Cow::Borrowed(p.as_os_str().as_bytes())
    }
    #[cfg(not(unix))]
    {
        std::borrow::Cow::Owned(p.to_string_lossy().into_owned().into_bytes())
    }
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
    /// `skip_dirs` (the state directory, the documents' directory) are always left out.
    pub fn new(
        root: &Path,
        excludes: Vec<String>,
        include_hidden: bool,
        skip_dirs: Vec<PathBuf>,
    ) -> Result<Self> {
        let canonical_root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let skip_dirs = skip_dirs
            .into_iter()
            .map(|d| {
                d.canonicalize()
                    .unwrap_or_else(|_| d.components().collect())
            })
            .collect();
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
        })
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
    /// have changed since it was listed): the file actually opened must lie inside the
    /// canonical root.
    pub fn open_file(&self, rel: &Path) -> std::io::Result<std::fs::File> {
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

    fn overrides(&self) -> Result<ignore::overrides::Override> {
        Ok(self.compiled.clone())
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
    fn list(&self) -> Result<(Vec<Listed>, Vec<Skipped>)> {
        let overrides = self.overrides()?;
        let mut b = WalkBuilder::new(&self.canonical_root);
        b.standard_filters(false)
            .hidden(!self.include_hidden)
            .follow_links(false)
            .overrides(overrides)
            .threads(self.threads);
        // Walked paths are built from the canonical root, as the skipped ones are canonical:
        // comparing their bytes is enough (`Path` equality parses both into components, which
        // cost more than the rest of the walk's filtering for every entry).
        let skip = self.skip_dirs.clone();
        b.filter_entry(move |e| {
            let p = e.path().as_os_str();
            !skip.iter().any(|d| d.as_os_str() == p)
        });
        let listed = Mutex::new(Vec::new());
        let skipped = Mutex::new(Vec::new());
        let root = &self.canonical_root;
        b.build_parallel().run(|| {
            let listed = &listed;
            let skipped = &skipped;
            Box::new(move |res| {
                let entry = match res {
                    Ok(e) => e,
                    Err(err) => {
                        if let Ok(mut s) = skipped.lock() {
                            s.push(Skipped {
                                path: PathBuf::new(),
                                reason: err.to_string(),
                            });
                        }
                        return ignore::WalkState::Continue;
                    }
                };
                let path = entry.path();
                let Ok(rel) = path.strip_prefix(root) else {
                    return ignore::WalkState::Continue;
                };
                let Some(ft) = entry.file_type() else {
                    return ignore::WalkState::Continue;
                };
                let md = if ft.is_file() {
                    entry.metadata().map_err(|e| e.to_string())
                } else if ft.is_symlink() {
                    // Follow a link only when its target stays inside the tree and is a file.
                    match path.canonicalize() {
                        Ok(target) if target.starts_with(root) => {
                            match std::fs::metadata(&target) {
                                Ok(md) if md.is_file() => Ok(md),
                                Ok(_) => return ignore::WalkState::Continue,
                                Err(e) => Err(e.to_string()),
                            }
                        }
                        Ok(_) => Err("symbolic link leaves the tree; not followed".into()),
                        Err(e) => Err(format!("dangling symbolic link: {e}")),
                    }
                } else {
                    return ignore::WalkState::Continue;
                };
                match md {
                    Ok(md) => {
                        if let Ok(mut l) = listed.lock() {
                            l.push(Listed {
                                rel: rel.to_owned(),
                                len: md.len(),
                                mtime_ns: mtime_ns(&md),
                            });
                        }
                    }
                    Err(reason) => {
                        if let Ok(mut s) = skipped.lock() {
                            s.push(Skipped {
                                path: rel.to_owned(),
                                reason,
                            });
                        }
                    }
                }
                ignore::WalkState::Continue
            })
        });
        let listed = listed.into_inner().unwrap_or_default();
        let skipped = skipped.into_inner().unwrap_or_default();
        Ok((listed, skipped))
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(self.open_file(rel)?))
    }

    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let md = std::fs::metadata(self.canonical_root.join(rel))?;
        Ok((md.len(), mtime_ns(&md)))
    }

    /// One open (checked to be inside the tree) and the open file's own metadata before and
    /// after the read, instead of two lookups of the path: a file replaced meanwhile is still
    /// the one read, consistently, and the next scan sees the new one.
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let mut f = self.open_file(rel)?;
        let md = f.metadata()?;
        let before = (md.len(), mtime_ns(&md));
        let n = feed(&mut f, buf, before.0, sink)?;
        let md = f.metadata()?;
        let after = (md.len(), mtime_ns(&md));
        Ok((before == after && n == before.0).then_some(after))
    }
}
