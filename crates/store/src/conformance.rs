//! The contracts of the ports, as checks every implementation must pass: written once here,
//! run by each implementation's tests (rclone's backend test suite is the model).
//!
//! For implementers of a new backend (an S3 bucket, a PostgreSQL state):
//!
//! ```no_run
//! # use resourcesync_store::{conformance, MemStore, MemState};
//! // In a test of the new backend: each check gets a new, empty store.
//! conformance::store::run(|| Box::new(MemStore::new())).expect("the Store contract");
//! conformance::state::run(|| Box::new(MemState::new())).expect("the state contracts");
//! ```
//!
//! - [`store`]: the [`crate::Store`] contract: put, get, head, delete, list in key order, a body
//!   that fails verification never visible, an unfinished upload invisible, an overwrite atomic,
//!   keys that escape refused, batches, concurrent puts; and what the store declares in its
//!   [`crate::Features`] (a local directory holds the objects as files, nesting keys block
//!   what they should, cleaning after an interrupted run removes abandoned uploads and nothing
//!   placed).
//! - [`crash`]: for a store that claims crash safety ([`crate::Features::crash_safe`]): a process
//!   killed (`SIGKILL`) at each step of a put leaves the old body or the new one, never a part.
//!   The test re-executes itself as the child ([`crash::kill_at`], [`crash::child`]).
//! - [`state`]: the contracts of [`crate::Records`], [`crate::Leases`] and [`crate::WorkQueue`]
//!   (a failure named by port and check): records, pages in URI order, pending
//!   changes, cursors, batches all or nothing, leases on Sources and work items (two workers
//!   never hold the same lease at once, an expired lease is taken over, workers racing for work
//!   do each item once).
//!
//! - `run_on_workers` ([`store::run_on_workers`], [`state::run_on_workers`]): the same suite
//!   from tasks on Tokio runtime workers, every port call through [`crate::blocking::call`] (the
//!   one sync/async boundary: `src/blocking.rs`), the subject dropped on the worker.
//!
//! Each check returns `Err` with what went wrong rather than panicking; `run` runs them all and
//! names every failure.

pub mod crash;
pub mod state;
pub mod store;
mod worker;

/// The outcome of one check: what went wrong, if anything.
pub type Outcome = std::result::Result<(), String>;

/// A named check of a subject (a store or a state).
pub type Check<T> = (&'static str, fn(&T) -> Outcome);

/// Runs named checks, each on a new subject from `make`; every failure, named, in one error.
pub(crate) fn run_checks<T: ?Sized>(
    checks: &[Check<T>],
    make: &mut dyn FnMut() -> Box<T>,
) -> Outcome {
    let failed: Vec<String> = checks
        .iter()
        .filter_map(|(name, check)| {
            let subject = make();
            check(&subject).err().map(|e| format!("{name}: {e}"))
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// `Err(message)` unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}
pub(crate) use ensure;

/// Turns a store error into a failure of the check, saying what was being done.
pub(crate) fn ok<T>(what: &str, r: crate::Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}
