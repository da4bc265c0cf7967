//! [`Settled`]: how an in-process state ([`crate::MemState`], [`crate::SqliteState`]) wakes a
//! worker waiting for a queue to drain ([`crate::WorkQueue::wait_drained`]) when a claim is
//! completed through it, rather than having it poll.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::Result;

/// A count of completions and the waiters woken by each.
#[derive(Debug, Default)]
pub(crate) struct Settled {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl Settled {
    fn lock(&self) -> MutexGuard<'_, u64> {
        self.generation.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Some items were completed: every waiter looks again.
    pub(crate) fn bump(&self) {
        *self.lock() += 1;
        self.changed.notify_all();
    }

    /// Waits until `left` says nothing is left (`true`) or `timeout` passes (`false`), asking
    /// `left` again only after a completion. The generation is read before `left` is asked, so
    /// that a completion between the two is not missed.
    pub(crate) fn wait_drained(
        &self,
        left: impl Fn() -> Result<u64>,
        timeout: Duration,
    ) -> Result<bool> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let seen = *self.lock();
            if left()? == 0 {
                return Ok(true);
            }
            let mut g = self.lock();
            while *g == seen {
                let rest = match deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()),
                    None => Duration::from_secs(3600),
                };
                if rest.is_zero() {
                    return Ok(false);
                }
                g = self
                    .changed
                    .wait_timeout(g, rest)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
    }
}
