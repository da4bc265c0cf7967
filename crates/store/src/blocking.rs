//! The one sync/async boundary of the ports: [`call`].
//!
//! The rule, for every port ([`crate::Store`], the state's [`crate::Records`],
//! [`crate::Leases`] and [`crate::WorkQueue`], the Source's inventories):
//!
//! - A port is synchronous and may block (a file system call, a PostgreSQL round trip, an S3
//!   request). Its implementations never offload a method: they block where they are called.
//! - Sync code on a thread that may block (a plain thread, a `spawn_blocking` task, a commit
//!   thread) calls a port directly.
//! - Async code (a task on a Tokio runtime's worker) calls a port only through [`call`]:
//!   `blocking::call(|| state.resource(uri))`, or holds it through the one adapter,
//!   [`crate::OffWorker`], whose every method goes through [`call`]: the Destination's runs
//!   hold their `Store` and `Records` so, and call them like any method.
//! - Except a port that declares its calls in place (`Features::in_place`,
//!   `Records::in_place`: a directory, SQLite, memory answer in about the time of a file
//!   read, never waiting for a network): async code may call it directly, and `OffWorker`
//!   leaves it as it is. Moving such a call off the worker (`block_in_place` hands the
//!   worker's queue to another thread) costs more than the call: a baseline of 10,000 small
//!   files took 1.6 times as long with every call moved.
//!
//! [`call`] runs its closure through `tokio::task::block_in_place` on a worker of a
//! multi-threaded runtime (every runtime of the engine and the binary): the closure may borrow
//! (no `'static` copy of the arguments, unlike `spawn_blocking`), returns its value in place,
//! and the worker's other tasks move to another thread meanwhile. A current-thread runtime has
//! no other thread to hand them to and refuses `block_in_place`: there the closure runs on a
//! scoped thread of its own. Outside a runtime it runs directly.
//!
//! A port called directly from a worker blocks the worker, and the clients that own a runtime
//! of their own refuse it outright: PostgreSQL's (`postgres`) and the HTTP layer's blocking face
//! (`resourcesync_http::blocking`) panic with "Cannot start a runtime from within a runtime".
//! (`tests/it/workers.rs` asserts both.) `conformance::store::run_on_workers` and
//! `conformance::state::run_on_workers` run the suites from runtime workers through [`call`]:
//! every implementation passes them.
//!
//! A value may be dropped anywhere (Rust has no async drop): a backend whose client owns a
//! runtime closes it in its `Drop` through [`call`], the only place a backend uses it.

/// Runs `f` where it may block: directly on a plain thread or a blocking-pool thread; through
/// `block_in_place` on a worker of a multi-threaded Tokio runtime; on a thread of its own from
/// a current-thread runtime, which has no other thread to hand its tasks to.
pub fn call<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Err(_) => f(),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| match s.spawn(f).join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }),
    }
}
