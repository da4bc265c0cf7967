//! What a Destination reads and writes, injected by its caller: the [`Store`] its copies go to,
//! the [`Records`] that remembers them (cursors, rows, pending changes), and a local scratch
//! directory for the documents of a run (never the copies). The engine (`sync`, `audit`, `push`)
//! only ever uses these: no engine code opens SQLite or the destination directory by itself.
//!
//! [`Ports::directory`] and [`Ports::directory_read_only`] are today's layout: the copies in a
//! directory (`FsStore`), the state in SQLite inside it (`.resourcesync/state.sqlite`, or
//! `--state`). An embedding program (an aggregator) builds its own: any store and state that
//! pass the conformance suites of `resourcesync_store::conformance`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use resourcesync_store::{FsStore, Records, SqliteState, Store};

use crate::error::{Error, Result};
use crate::share::Downloads;

/// The store, the state and the scratch space of a Destination.
#[derive(Debug, Clone)]
pub struct Ports {
    /// Where the copies go.
    pub store: Arc<dyn Store>,
    /// What the Destination remembers between runs.
    pub state: Arc<dyn Records>,
    /// A local directory for the documents and staging files of a run (names starting with
    /// `doc-` and `staging-`; each run removes its own, and [`Ports::directory`] those an
    /// interrupted run left). Several Destinations may share one only if they never run at
    /// the same time as a [`Ports::directory`] of it.
    pub scratch: PathBuf,
    /// How messages name the state (its file, or a description).
    pub state_name: PathBuf,
    /// Where a run's fetches go when it has enough of them to share with other workers
    /// ([`crate::share`]); none (the default): the run does them all.
    pub downloads: Option<Arc<dyn Downloads>>,
    /// Keeps a temporary scratch directory alive as long as the ports.
    _held: Option<Arc<tempfile::TempDir>>,
}

impl Ports {
    /// Ports from a store, a state and a scratch directory (which must exist).
    pub fn new(
        store: Arc<dyn Store>,
        state: Arc<dyn Records>,
        scratch: impl Into<PathBuf>,
        state_name: impl Into<PathBuf>,
    ) -> Self {
        Ports {
            store,
            state,
            scratch: scratch.into(),
            state_name: state_name.into(),
            downloads: None,
            _held: None,
        }
    }

    /// The same ports, whose runs hand their fetches to `downloads` when they have more than
    /// its threshold (see [`crate::share`]).
    pub fn with_downloads(mut self, downloads: Arc<dyn Downloads>) -> Self {
        self.downloads = Some(downloads);
        self
    }

    /// Ports whose scratch directory is a new temporary one, removed with the last clone.
    pub fn with_temp_scratch(
        store: Arc<dyn Store>,
        state: Arc<dyn Records>,
        state_name: impl Into<PathBuf>,
    ) -> Result<Self> {
        let held = temp_dir()?;
        Ok(Ports {
            store,
            state,
            scratch: held.path().to_path_buf(),
            state_name: state_name.into(),
            downloads: None,
            _held: Some(Arc::new(held)),
        })
    }

    /// The copies in `dest` (created as needed, with its `.resourcesync/tmp` folder, which is
    /// also the scratch space: same file system), the state in SQLite at `state` (created as
    /// needed). Files left there by an interrupted run are removed.
    pub fn directory(dest: &Path, state: &Path) -> Result<Self> {
        Ports::directory_waiting(dest, state, std::time::Duration::ZERO)
    }

    /// [`Ports::directory`], waiting up to `wait` for the state while another holder in this
    /// process has it for a moment ([`SqliteState::open_waiting`]: the aggregator counts and
    /// republishes from a Source's state beside its syncs). Blocks.
    pub fn directory_waiting(dest: &Path, state: &Path, wait: std::time::Duration) -> Result<Self> {
        let store = FsStore::open(dest)?;
        store.clean_tmp()?;
        let scratch = dest.join(resourcesync_store::STATE_DIR).join("tmp");
        for e in std::fs::read_dir(&scratch).into_iter().flatten().flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("staging-") || name.starts_with("doc-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let sqlite = SqliteState::open_waiting(state, wait)?;
        Ok(Ports::new(
            Arc::new(store),
            Arc::new(sqlite),
            scratch,
            state,
        ))
    }

    /// The copies in `dest` and the state at `state`, for reading only (an audit, a dry run):
    /// nothing is created or written under `dest`, which need not exist; the scratch space is a
    /// temporary directory elsewhere. Without a state database, an empty one in memory (and
    /// `false`).
    pub fn directory_read_only(dest: &Path, state: &Path) -> Result<(Self, bool)> {
        let store: Arc<dyn Store> = Arc::new(FsStore::existing(dest));
        let (sqlite, found) = match SqliteState::open_read_only(state)? {
            Some(s) => (s, true),
            None => (SqliteState::in_memory()?, false),
        };
        Ok((
            Ports::with_temp_scratch(store, Arc::new(sqlite), state)?,
            found,
        ))
    }
}

/// Opens the state for a while: for users that hold it only while they work (the push
/// applier, per payload), since a SQLite state is locked by one user at a time and a catch-up
/// sync opens it in between.
#[derive(Clone)]
pub struct OpenState(Arc<dyn Fn() -> Result<Arc<dyn Records>> + Send + Sync>);

impl OpenState {
    /// Opens the state each time with `f`.
    pub fn new(f: impl Fn() -> Result<Arc<dyn Records>> + Send + Sync + 'static) -> Self {
        OpenState(Arc::new(f))
    }

    /// The same state every time (one that several users may hold at once).
    pub fn shared(state: Arc<dyn Records>) -> Self {
        OpenState::new(move || Ok(state.clone()))
    }

    /// Opens it.
    pub fn open(&self) -> Result<Arc<dyn Records>> {
        (self.0)()
    }
}

impl std::fmt::Debug for OpenState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpenState")
    }
}

/// How long a push round waits for its SQLite state while another holder in this process (the
/// aggregator's republish or count of the same Source) has it.
const STATE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens the SQLite state at `path` each time (see [`OpenState`]), waiting up to
/// [`STATE_WAIT`] while it is held for a moment ([`SqliteState::open_waiting`]).
pub fn state_opener(path: PathBuf) -> OpenState {
    OpenState::new(move || {
        Ok(Arc::new(SqliteState::open_waiting(&path, STATE_WAIT)?) as Arc<dyn Records>)
    })
}

/// The store of the copies in `dest` (created as needed).
pub fn directory_store(dest: &Path) -> Result<Arc<dyn Store>> {
    Ok(Arc::new(FsStore::open(dest)?))
}

fn temp_dir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sync's ports wait for a state another holder in this process has for a moment (the
    /// aggregator's count beside a Source's first sync), instead of failing as "in use".
    #[test]
    fn directory_ports_wait_for_a_state_held_for_a_moment() {
        let d = tempfile::tempdir().expect("tempdir");
        let db = d
            .path()
            .join(resourcesync_store::STATE_DIR)
            .join("state.sqlite");
        let held = SqliteState::open(&db).expect("held");
        assert!(
            matches!(
                Ports::directory(d.path(), &db),
                Err(crate::Error::Store(
                    resourcesync_store::Error::Locked { .. }
                ))
            ),
            "without waiting the state is in use"
        );
        let (dest, path) = (d.path().to_owned(), db.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tx.send(()).expect("started");
            Ports::directory_waiting(&dest, &path, std::time::Duration::from_secs(60))
        });
        rx.recv().expect("started");
        drop(held);
        assert!(waiter.join().expect("thread").is_ok());
    }
}
