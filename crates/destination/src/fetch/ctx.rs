//! What the jobs of a run share ([`Ctx`]): the ports they read and write through
//! ([`RunPorts`]), what the run is asked to do, and what it remembers as it goes ([`Memo`]).
//! A leaf of `fetch/`: it uses none of its siblings.

use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use resourcesync_store::{Records, Store};

use crate::commit::Committer;
use crate::error::{Error, Result};
use crate::filter::UriFilter;
use crate::http::Http;
use crate::mapping::UriMapper;
use crate::plan::staging::Staging;
use crate::report::{Failed, Observer};

/// Everything a job needs (also used by [`crate::dump`], [`crate::fetch::patch`] and
/// [`crate::fetch::repair`]).
#[derive(Debug)]
pub(crate) struct Ctx {
    /// What the run reads and writes through.
    pub(crate) ports: RunPorts,
    /// The Source's key (its Capability List URL) in the state.
    pub(crate) key: String,
    /// Where each URI's copy goes.
    pub(crate) mapper: UriMapper,
    /// Whether copies the Source deleted are removed (`--delete`).
    pub(crate) delete: bool,
    /// Whether nothing is written (`--dry-run`).
    pub(crate) dry_run: bool,
    /// The largest body accepted.
    pub(crate) max_resource_bytes: u64,
    /// Whether every earlier version of each copy is kept (`--versions`: `docs/history.md`):
    /// bodies are hashed with sha-256, and the committer keeps each one put in place.
    pub(crate) versions: bool,
    /// Which resources are copied: a job for any other is dropped at submission, and a copy
    /// of one is neither updated nor deleted ([`crate::filter`]).
    pub(crate) filter: UriFilter,
    /// Where the state is (named by errors).
    pub(crate) state_path: PathBuf,
    /// What the run remembers as it goes.
    pub(crate) memo: Memo,
}

/// The ports of a run: the client, the store and the state, and what stands between the jobs
/// and them.
#[derive(Debug)]
pub(crate) struct RunPorts {
    pub(crate) http: Arc<Http>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) state: Arc<dyn Records>,
    /// Puts copies in place and writes every row and pending change of the run, in batches
    /// ([`crate::commit`]).
    pub(crate) committer: Committer,
    pub(crate) obs: Arc<dyn Observer>,
    /// Where the run's fetches go when there are enough of them ([`crate::share`]); none: the
    /// run does them all.
    pub(crate) downloads: Option<Arc<dyn crate::share::Downloads>>,
}

/// What a run remembers as it goes.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// URIs whose copy a dump package put in place during this run (Z39.99-2014 §11, §13), so
    /// that the lists read afterwards do not count them again.
    pub(crate) dumped: Option<Mutex<Staging>>,
    /// Whether this run is a first baseline from a Resource Dump (no cursor yet): every copy a
    /// dump package put in place is new to the Destination, so one of a resource the Source
    /// deleted since the dump's snapshot goes, with or without --delete
    /// (`crate::fetch::exec::delete`).
    pub(crate) first_dump: bool,
    /// The first write to the state that failed and was not the caller's to report (a failed
    /// change recorded as pending): the cursor must then not move, and the run fails.
    pub(crate) state_error: Mutex<Option<String>>,
    /// Copies that could not be stored for a transient reason, in a row: at
    /// [`STORE_DOWN_AFTER`] the store is taken as gone and the run stops.
    pub(crate) store_failures: AtomicU32,
    /// The Change List documents fetched before the run, and those its walks read, to
    /// remember ([`crate::discover::known`]).
    pub(crate) lists: Mutex<crate::discover::known::ListMemo>,
}

/// Transient store failures in a row after which the store (an object store that went away)
/// is taken as gone: the run stops with its cursor where it was, instead of failing every
/// copy after, and the next run resumes.
pub(crate) const STORE_DOWN_AFTER: u32 = 8;

impl Ctx {
    /// Keeps the first state write that failed (see [`Memo::state_error`]).
    pub(crate) fn state_failed(&self, what: String) {
        tracing::error!("{what}");
        let mut e = self
            .memo
            .state_error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        e.get_or_insert(what);
    }

    /// Fails when a state write failed during the run: a change that could neither be applied
    /// nor recorded as pending would be lost if the cursor moved past it.
    pub(crate) fn check_state(&self) -> Result<()> {
        let e = self
            .memo
            .state_error
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match e.as_ref() {
            Some(message) => Err(Error::StateWrite {
                message: message.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Whether a dump package put this URI's copy in place during this run.
    pub(crate) fn dumped_now(&self, uri: &str) -> bool {
        self.memo.dumped.as_ref().is_some_and(|d| {
            d.lock()
                .ok()
                .and_then(|s| s.get(uri).ok().flatten())
                .is_some()
        })
    }
}

/// Runs `f` on a blocking thread; its error, or its panic, as the failure of one item.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> std::result::Result<T, Failed> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Failed::from(e)),
        // A task that panicked concerns this one resource (reported, retried by the next
        // run), as before: it does not stop the run.
        Err(e) => Err(Failed::other(format!("internal task failed: {e}"))),
    }
}
