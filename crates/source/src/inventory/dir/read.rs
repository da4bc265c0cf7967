//! A directory as the walk reads it (`dir/walk.rs`): its entries with what `readdir` tells of
//! them, and a file's size and time found relative to it.
//!
//! On Linux the directory is opened once and read with `getdents64` into one buffer reused for
//! the whole walk (no allocation per entry), and each file is asked for only its size and
//! modification time with `statx` relative to the directory's descriptor (one lookup of one
//! name, not of the path from `/`). Not `AT_STATX_DONT_SYNC`: on a network file system it would
//! give the attributes cached, however old, and a change could go unseen; on a local one it
//! saves nothing. Elsewhere, `std::fs::read_dir` and the metadata of the path.

use std::ffi::OsStr;
use std::path::Path;
#[cfg(not(target_os = "linux"))]
use std::path::PathBuf;

/// What an entry is, as far as `readdir` tells (asked of the file system when it does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Dir,
    File,
    Link,
    /// Anything else (a FIFO, a socket, a device): never listed.
    Other,
}

/// What a stat found: size and modification time, or why not.
pub(super) type StatOut = std::result::Result<(u64, i128), String>;

/// An open directory.
#[derive(Debug)]
pub(super) struct OpenDir {
    #[cfg(target_os = "linux")]
    fd: rustix::fd::OwnedFd,
    #[cfg(not(target_os = "linux"))]
    path: PathBuf,
}

impl OpenDir {
    /// Opens the directory at `path` (followed as `opendir` does).
    #[cfg(target_os = "linux")]
    pub(super) fn open(path: &Path) -> std::io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(OpenDir { fd })
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(path: &Path) -> std::io::Result<Self> {
        Ok(OpenDir {
            path: path.to_owned(),
        })
    }

    /// Calls `f` with each entry's name and kind (`.` and `..` left out), in the directory's
    /// order. `buf` is a buffer reused across directories. An error ends the reading.
    #[cfg(target_os = "linux")]
    pub(super) fn read(
        &self,
        buf: &mut Vec<u8>,
        mut f: impl FnMut(&OsStr, Kind),
    ) -> std::io::Result<()> {
        use rustix::fs::{FileType, RawDir};
        use std::os::unix::ffi::OsStrExt;
        if buf.capacity() < READ_BUF {
            buf.reserve(READ_BUF);
        }
        let mut dir = RawDir::new(&self.fd, buf.spare_capacity_mut());
        while let Some(entry) = dir.next() {
            // An error ends the reading (`EINVAL`, an entry larger than the buffer, cannot
            // happen: names are at most 255 bytes).
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Directory => Kind::Dir,
                FileType::RegularFile => Kind::File,
                FileType::Symlink => Kind::Link,
                // The file system does not say: ask it, as std's `DirEntry::file_type` does.
                FileType::Unknown => match rustix::fs::statat(
                    &self.fd,
                    entry.file_name(),
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                ) {
                    Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                        FileType::Directory => Kind::Dir,
                        FileType::RegularFile => Kind::File,
                        FileType::Symlink => Kind::Link,
                        _ => Kind::Other,
                    },
                    // Gone meanwhile, or not to be looked at: as std does, left out.
                    Err(_) => continue,
                },
                _ => Kind::Other,
            };
            f(OsStr::from_bytes(name), kind);
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn read(
        &self,
        _buf: &mut Vec<u8>,
        mut f: impl FnMut(&OsStr, Kind),
    ) -> std::io::Result<()> {
        for entry in std::fs::read_dir(&self.path)? {
            let entry = entry?;
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            let kind = if ft.is_dir() {
                Kind::Dir
            } else if ft.is_file() {
                Kind::File
            } else if ft.is_symlink() {
                Kind::Link
            } else {
                Kind::Other
            };
            f(&entry.file_name(), kind);
        }
        Ok(())
    }

    /// Size and modification time of a file of this directory, `path` under the root, its
    /// name from byte `name_at` on; not following a link (the walk stats only what `readdir`
    /// called a regular file).
    #[cfg(target_os = "linux")]
    pub(super) fn stat(&self, path: &Path, name_at: usize) -> StatOut {
        use rustix::fs::{AtFlags, StatxFlags};
        let name = path
            .as_os_str()
            .as_encoded_bytes()
            .get(name_at..)
            .unwrap_or_default();
        let st = rustix::fs::statx(
            &self.fd,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
            StatxFlags::SIZE | StatxFlags::MTIME,
        )
        .map_err(|e| std::io::Error::from(e).to_string())?;
        let ns = i128::from(st.stx_mtime.tv_sec) * 1_000_000_000 + i128::from(st.stx_mtime.tv_nsec);
        Ok((st.stx_size, ns.max(0)))
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn stat(&self, path: &Path, _name_at: usize) -> StatOut {
        let name = path.file_name().unwrap_or(path.as_os_str());
        std::fs::symlink_metadata(self.path.join(name))
            .map(|md| (md.len(), super::mtime_ns(&md)))
            .map_err(|e| e.to_string())
    }
}

/// Bytes of the buffer `getdents64` fills (a few hundred entries per call).
#[cfg(target_os = "linux")]
const READ_BUF: usize = 32 * 1024;
