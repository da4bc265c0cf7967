//! What a Source writes itself, and so never publishes, serves or takes for a change of its
//! resources, wherever `--state` and `--out` put it (inside the published directory too):
//!
//! - the state database and the embedded hub's database ([`hub_state_path`], which holds every
//!   subscriber's callback and secret), each with its SQLite companions (`-wal`, `-shm`,
//!   `-journal`), by exact path;
//! - the documents folder (`OUT/resourcesync`: documents, notification payloads, dump packages
//!   and the temporary files they are written through) and the Source Description's folder
//!   (`OUT/.well-known`);
//! - the state folder `DIR/.resourcesync`, and the folder of an explicit state database when it
//!   does not hold the published directory (left out whole, as before).
//!
//! The inventory never lists these (so no Resource List, Change List or dump names them), the
//! server answers 404 for them, and the watcher does not take their writes for changes (an idle
//! Source whose databases are written to, by the hub for instance, records and notifies
//! nothing).
//!
//! Every path is kept in two forms: with its folder canonical and its last component as named
//! (the directory entry, even when it is a symbolic link), and fully canonical (where a link
//! leads, which is where SQLite puts the companions of a linked database). Paths are compared
//! as bytes.

use std::path::{Path, PathBuf};

use crate::inventory::{path_bytes, under};

/// The folder of documents under the output directory (and under the base URL).
pub const DOCS_DIR: &str = "resourcesync";

/// The name of the state folder inside the Source directory (when `--state` is not given).
pub const STATE_DIR: &str = ".resourcesync";

/// The companions SQLite writes beside a database `NAME`: `NAME` itself, its write-ahead log,
/// its shared-memory index and its rollback journal.
pub const SQLITE_FILES: [&str; 4] = ["", "-wal", "-shm", "-journal"];

/// The embedded hub's database for a Source whose state is at `state`: `hub.sqlite` beside it.
pub fn hub_state_path(state: &Path) -> PathBuf {
    state.with_file_name("hub.sqlite")
}

/// `p` with every component up to the last one resolved (the last one as named), or the path
/// normalized where even its folder does not exist.
pub(crate) fn entry_path(p: &Path) -> PathBuf {
    match (p.parent(), p.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            canonical(dir).join(name)
        }
        _ => canonical(p),
    }
}

/// The canonical path, or, for a path that does not exist, its folder's joined with its name.
fn canonical(p: &Path) -> PathBuf {
    match p.canonicalize() {
        Ok(c) => c,
        Err(_) if p.file_name().is_some() => entry_path(p),
        Err(_) => std::path::absolute(p)
            .unwrap_or_else(|_| p.to_owned())
            .components()
            .collect(),
    }
}

/// `p` as its directory entry and as where it leads (one entry when they are the same).
pub(crate) fn both_forms(p: &Path) -> Vec<PathBuf> {
    let entry = entry_path(p);
    let target = canonical(p);
    if target == entry {
        vec![entry]
    } else {
        vec![entry, target]
    }
}

/// The paths a Source writes (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct OwnPaths {
    /// Folders whose whole content is ours.
    dirs: Vec<PathBuf>,
    /// Single files that are ours.
    files: Vec<PathBuf>,
}

impl OwnPaths {
    /// The paths of a Source publishing `root` (its canonical directory), writing its documents
    /// under `out`, with its state database at `state`.
    pub(crate) fn new(root: &Path, out: &Path, state: &Path) -> Self {
        let mut own = OwnPaths::default();
        for d in [
            out.join(DOCS_DIR),
            out.join(".well-known"),
            root.join(STATE_DIR),
        ] {
            own.dirs.extend(both_forms(&d));
        }
        // A state folder of its own is left out whole; one that holds the published directory
        // (DIR itself or above it) is not, which would leave out everything: its databases are,
        // by name.
        if let Some(folder) = state.parent() {
            let folder = canonical(if folder.as_os_str().is_empty() {
                Path::new(".")
            } else {
                folder
            });
            if !root.starts_with(&folder) {
                own.dirs.push(folder);
            }
        }
        for db in [state.to_owned(), hub_state_path(state)] {
            for base in both_forms(&db) {
                for suffix in SQLITE_FILES {
                    let mut name = base.clone().into_os_string();
                    name.push(suffix);
                    own.files.push(PathBuf::from(name));
                }
            }
        }
        own.dirs.sort();
        own.dirs.dedup();
        own.files.sort();
        own.files.dedup();
        own
    }

    /// Whether a canonical path (or one with a canonical folder) is ours. The server asks this
    /// for every request: it compares bytes, not parsed components.
    pub fn contains(&self, p: &Path) -> bool {
        self.dirs.iter().any(|d| under(p, d)) || {
            let p = path_bytes(p);
            self.files.iter().any(|f| path_bytes(f) == p)
        }
    }

    /// Every path: folders and files (what the inventory leaves out).
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().chain(&self.files).map(PathBuf::as_path)
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn databases_and_their_companions_by_exact_path() {
        let top = tempfile::tempdir().expect("tempdir");
        let root = top.path().canonicalize().expect("canonical").join("served");
        std::fs::create_dir_all(&root).expect("mkdir");
        let own = OwnPaths::new(&root, &root.join("state-www"), &root.join("state.sqlite"));
        for f in [
            "state.sqlite",
            "state.sqlite-wal",
            "state.sqlite-shm",
            "state.sqlite-journal",
            "hub.sqlite",
            "hub.sqlite-wal",
            "hub.sqlite-shm",
            "hub.sqlite-journal",
            "state-www/resourcesync/capabilitylist.xml",
            "state-www/resourcesync/.tmp-x1y2z3",
            "state-www/.well-known/resourcesync",
            ".resourcesync/anything",
        ] {
            assert!(own.contains(&root.join(f)), "{f}");
        }
        // Files of the published directory with names alike are not ours.
        for f in [
            "state.sqlite.bak",
            "state.sqlite-wal2",
            "hub.sqlite.txt",
            "state",
            "state-www",
            "state-www/notes.txt",
            "sub/state.sqlite",
            "sub/hub.sqlite",
            "a.txt",
        ] {
            assert!(!own.contains(&root.join(f)), "{f}");
        }
        assert!(!own.contains(&root), "the directory itself");
    }

    #[test]
    fn a_state_folder_of_its_own_is_left_out_whole_and_relative_paths_are_resolved() {
        let top = tempfile::tempdir().expect("tempdir");
        let root = top.path().canonicalize().expect("canonical").join("served");
        std::fs::create_dir_all(root.join("data")).expect("mkdir");
        let own = OwnPaths::new(&root, &root.join("data/www"), &root.join("data/s.sqlite"));
        assert!(own.contains(&root.join("data/notes.txt")));
        assert!(!own.contains(&root.join("database.txt")));
        // A database named through a symbolic link: the link, and where it leads.
        let real = top.path().canonicalize().expect("canonical").join("real");
        std::fs::create_dir_all(&real).expect("mkdir");
        std::fs::write(real.join("db.sqlite"), "").expect("write");
        std::os::unix::fs::symlink(real.join("db.sqlite"), root.join("link.sqlite"))
            .expect("symlink");
        let own = OwnPaths::new(&root, &root, &root.join("link.sqlite"));
        for p in [
            root.join("link.sqlite"),
            root.join("link.sqlite-wal"),
            root.join("hub.sqlite-shm"),
            real.join("db.sqlite"),
            real.join("db.sqlite-wal"),
        ] {
            assert!(own.contains(&p), "{}", p.display());
        }
        // A path through a folder that does not exist yet, and one relative to the working
        // directory, end up absolute.
        assert!(entry_path(Path::new("no/such/dir/x")).is_absolute());
        assert!(entry_path(Path::new("x.sqlite")).is_absolute());
    }
}
