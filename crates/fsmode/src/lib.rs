//! The mode of every file and directory resourcesync writes: the one place that decides it.
//!
//! Two kinds of files, two rules:
//!
//! - **Published** (what a web server running as another user reads: the Source's documents
//!   and dumps written by `publish`, the Destination's copies, the aggregator's republished
//!   documents): the mode a new file gets, `0666 & ~umask` (`0644` under the usual umask `022`,
//!   `0640` under `027`), and `0777 & ~umask` for the directories made for them. This holds for
//!   every way such a file is written: a new file, one that replaces an older version (an
//!   update, a repair, a patch), one extracted from a dump.
//! - **Private** (what holds secrets: the Destination's and the Source's state databases, the
//!   hub's database with every subscriber's HMAC secret, the log file): `0600`, in directories
//!   made `0700`, whatever the umask. An existing one that others may read (made by an older
//!   version, or by hand) is made owner-only when it is opened for writing; see
//!   [`open_private`] and [`private_db`].
//!
//! # How the umask is applied
//!
//! The umask is never read here: `umask(2)` reads it only by setting it, so reading it in a
//! threaded process races with every thread that creates a file meanwhile (which would get the
//! temporary mask), and `/proc/self/status`' `Umask:` is Linux-only (4.7 and later). Instead a
//! published file is *created* with the mode `0666` ([`public_temp`]): `open(2)` applies the
//! umask (and a default ACL of the directory, where there is one) exactly as for any new file.
//! The file created is the temporary one that is later renamed (or, for an unnamed `O_TMPFILE`
//! file, linked) to its final name; a rename keeps the mode, so a file is never visible at its
//! final path with another mode, and a replaced file gets the mode of a new one, not the
//! `0600` of a temporary file. The temporary files live in a directory others cannot enter
//! (`DEST/.resourcesync/tmp`, made `0700`) or beside their target under a name starting with
//! `.tmp-`, and hold only what is published anyway.
//!
//! A private file is created with the mode `0600`, which the umask can only narrow.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// The creation mode of a published file, before the umask.
pub const PUBLIC_FILE: u32 = 0o666;
/// The creation mode of a directory made for published files, before the umask (the standard
/// library's default for [`std::fs::create_dir`] and [`std::fs::create_dir_all`], which are
/// therefore used for them as they are).
pub const PUBLIC_DIR: u32 = 0o777;
/// The mode of a private file.
pub const PRIVATE_FILE: u32 = 0o600;
/// The mode of a directory made for private files.
pub const PRIVATE_DIR: u32 = 0o700;

/// The files SQLite keeps beside a database (its rollback journal, write-ahead log and
/// shared-memory index): they hold the database's pages, so they are private like it.
pub const DB_COMPANIONS: [&str; 3] = ["-journal", "-wal", "-shm"];

/// A builder of temporary files that are renamed into place as published files: created with
/// [`PUBLIC_FILE`] (so `0666 & ~umask`) and names starting with `prefix`.
pub fn public_temp(prefix: &str) -> tempfile::Builder<'_, 'static> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        b.permissions(std::fs::Permissions::from_mode(PUBLIC_FILE));
    }
    b
}

/// Creates `dir` and its missing parents with the mode [`PRIVATE_DIR`]; existing ones are left
/// as they are (a directory of the user's choosing is not ours to change).
pub fn private_dir_all(dir: &Path) -> io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        b.mode(PRIVATE_DIR);
    }
    b.create(dir)
}

/// Opens `path` with `opts` (which say whether to create, append, …) as a private file: a file
/// created is [`PRIVATE_FILE`]; an existing one that others may read or write is made
/// owner-only (through the open descriptor, so the file changed is the file opened).
pub fn open_private(opts: &mut OpenOptions, path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(PRIVATE_FILE);
    }
    let f = opts.open(path)?;
    tighten_open(&f)?;
    Ok(f)
}

/// Makes the open file `f` owner-only when others may read or write it (nothing on a
/// read-only file system, where it cannot be changed by anyone).
fn tighten_open(f: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = f.metadata()?.permissions().mode();
        if mode & 0o077 != 0 {
            match f.set_permissions(std::fs::Permissions::from_mode(mode & 0o700)) {
                Err(e) if e.kind() == io::ErrorKind::ReadOnlyFilesystem => return Ok(()),
                r => r,
            }
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "other users may read it (mode {:04o}) and it could not be made \
                             owner-only ({e}): chmod 600 it, or give it to the user resourcesync \
                             runs as",
                        mode & 0o7777
                    ),
                )
            })?;
        }
    }
    #[cfg(not(unix))]
    let _ = f;
    Ok(())
}

/// Makes the existing regular file at `path` owner-only when others may read or write it;
/// nothing when there is no file there (a symbolic link is not followed: left alone).
pub fn tighten(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {
            let f = OpenOptions::new().read(true).open(path)?;
            tighten_open(&f)
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Prepares the SQLite database at `path` to be opened: its missing parent directories are
/// made [`PRIVATE_DIR`], the file is created [`PRIVATE_FILE`] when missing (an empty file is an
/// empty database), and an existing database and its [`DB_COMPANIONS`] that others may read
/// are made owner-only. SQLite creates its journal and write-ahead log with the mode of the
/// database file, so they are private too.
pub fn private_db(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        private_dir_all(dir)?;
    }
    // Created here when missing; an existing one is only looked at (it may be on a read-only
    // file system, where SQLite opens it read-only).
    let mut create = OpenOptions::new();
    create.write(true).create_new(true);
    match open_private(&mut create, path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => tighten(path)?,
        Err(e) => return Err(e),
    }
    for suffix in DB_COMPANIONS {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        tighten(Path::new(&p))?;
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::sync::Mutex;

    /// The umask is the process's: the tests that set it take turns.
    static UMASK: Mutex<()> = Mutex::new(());

    fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
        let _g = UMASK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
        let r = f();
        rustix::process::umask(old);
        r
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p)
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn a_published_temporary_file_has_the_mode_of_a_new_file() {
        let d = tempfile::tempdir().expect("tmp");
        for (mask, want) in [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)] {
            let t = with_umask(mask, || public_temp(".tmp-").tempfile_in(d.path())).expect("temp");
            let target = d.path().join(format!("f{mask:o}"));
            t.persist(&target).expect("persist");
            assert_eq!(mode(&target), want, "umask {mask:04o}");
        }
    }

    #[test]
    fn a_private_database_and_its_directories_are_owner_only_and_an_old_one_is_tightened() {
        let d = tempfile::tempdir().expect("tmp");
        let db = d.path().join("a/b/state.sqlite");
        with_umask(0o022, || private_db(&db)).expect("db");
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&d.path().join("a")), 0o700);
        assert_eq!(mode(&d.path().join("a/b")), 0o700);
        // Made by an older version: world-readable, with a write-ahead log.
        let wal = d.path().join("a/b/state.sqlite-wal");
        std::fs::write(&wal, b"x").expect("wal");
        for p in [&db, &wal] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
        private_db(&db).expect("again");
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&wal), 0o600);
    }

    #[test]
    fn a_private_file_is_created_owner_only_and_an_existing_one_is_tightened() {
        let d = tempfile::tempdir().expect("tmp");
        let log = d.path().join("log");
        with_umask(0o022, || {
            open_private(OpenOptions::new().create(true).append(true), &log)
        })
        .expect("open");
        assert_eq!(mode(&log), 0o600);
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o664)).expect("chmod");
        open_private(OpenOptions::new().create(true).append(true), &log).expect("open");
        assert_eq!(mode(&log), 0o600);
    }
}
