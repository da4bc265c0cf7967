//! The async runtime a command runs on.

use std::future::Future;

use anyhow::Context;
use tokio::runtime::Runtime;

/// A runtime with a worker thread per core, I/O and timers on.
pub(crate) fn runtime() -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Runs `fut` to its end on one of `rt`'s worker threads, not on this one.
///
/// A future given to `block_on` runs on the calling thread, outside the workers: every task
/// that wakes it (each download ending, for a sync) then wakes another thread, a futex call and
/// a context switch each time. On a worker, the task it waits for usually ends on the same
/// thread and wakes it there. `perf stat` of a 100,000-file sync on loopback: context switches
/// 254,000 → 135,000 (docs/performance.md, "The loopback baseline").
///
/// A panic in `fut` is raised again here, as `block_on` would.
pub(crate) fn block_on<F>(rt: &Runtime, fut: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(async move {
        match tokio::spawn(fut).await {
            Ok(out) => out,
            Err(e) => match e.try_into_panic() {
                Ok(p) => std::panic::resume_unwind(p),
                // Only a runtime shut down while it runs cancels it, and none is here.
                Err(e) => panic!("the command's task ended without an outcome: {e}"),
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_future_runs_on_a_worker_and_its_panic_comes_back() {
        let rt = runtime().expect("runtime");
        let here = std::thread::current().id();
        let there = block_on(&rt, async { std::thread::current().id() });
        assert_ne!(there, here, "ran on block_on's thread");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(&rt, async { panic!("inside") })
        }));
        let payload = caught.expect_err("the panic was swallowed");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"inside"));
    }
}
