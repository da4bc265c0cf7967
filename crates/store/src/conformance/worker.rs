//! The suites called from async code: each check runs inside a task on a Tokio runtime's
//! worker, its port calls through [`crate::blocking::call`] (the one way async code reaches a
//! port), and the subject is dropped on the worker (a value may be dropped anywhere). Run on a
//! multi-threaded runtime (`block_in_place`) and on a current-thread one (a scoped thread).

use tokio::runtime::{Builder, Runtime};

use super::{Check, Outcome};
use crate::blocking::call;

/// The two runtimes async code may run on: multi-threaded (the engine's, the binary's) and
/// current-thread (a plain `#[tokio::test]`).
fn runtimes() -> std::result::Result<Vec<(&'static str, Runtime)>, String> {
    let multi = Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    let current = Builder::new_current_thread().enable_all().build();
    match (multi, current) {
        (Ok(m), Ok(c)) => Ok(vec![("multi-thread", m), ("current-thread", c)]),
        (Err(e), _) | (_, Err(e)) => Err(format!("a Tokio runtime: {e}")),
    }
}

/// Runs named checks, each on a new subject from `make`, from a task on each runtime's
/// worker through [`call`]; every failure (or panic), named with its runtime, in one error.
pub(crate) fn run_checks_on_workers<T: ?Sized + Send + Sync + 'static>(
    checks: &[Check<T>],
    make: &mut dyn FnMut() -> Box<T>,
) -> Outcome {
    let mut failed = Vec::new();
    for (flavor, rt) in runtimes()? {
        for &(name, check) in checks {
            let subject = make();
            let task = rt.spawn(async move {
                let out = call(|| check(&*subject));
                drop(subject);
                out
            });
            match rt.block_on(task) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed.push(format!("{name} ({flavor} worker): {e}")),
                Err(e) => failed.push(format!("{name} ({flavor} worker): panicked: {e}")),
            }
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}
