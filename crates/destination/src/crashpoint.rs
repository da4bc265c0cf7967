//! A test hook for the crash harness (issue 7 item 2): stops the process at a named point.
//!
//! Compiled always, inert unless the environment variable `RESOURCESYNC_TEST_CRASH_AT` is set
//! (read once). Its value is `POINT:N` or `POINT:N:pause`: at the `N`th time (counting from 1)
//! the process reaches `POINT`, it calls [`std::process::abort`] (no destructor, no flush, like
//! a `kill -9`), or with `pause` writes `RESOURCESYNC_TEST_CRASH_AT POINT:N reached` to standard
//! error and stops that thread for good, so that a harness can send SIGKILL while the other
//! downloads are still in flight. Points:
//!
//! | point | where |
//! | --- | --- |
//! | `list-entry` | an entry of a list document was just read (list streaming) |
//! | `download` | the first bytes of a resource were written to its temporary file |
//! | `before-rename` | a resource's temporary file is complete, not yet verified and queued for its batch |
//! | `after-rename` | a resource of a batch is at its final path, the batch's state rows not yet written |
//! | `state` | a batch's state rows are written (with the removal of their pending rows, one transaction), once per row, the downloads not yet answered |
//! | `cursor` | every change is applied, the cursor not yet moved |
//! | `package-entry` | a dump package's entry is inflated to its temporary file, not yet renamed |
//! | `package-renamed` | a dump package's entry is at its final path, its batch's state rows not yet written |

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable read.
pub const CRASH_AT_VAR: &str = "RESOURCESYNC_TEST_CRASH_AT";

#[derive(Debug)]
struct Plan {
    point: String,
    n: u64,
    pause: bool,
    hits: AtomicU64,
}

static PLAN: OnceLock<Option<Plan>> = OnceLock::new();

fn plan() -> Option<Plan> {
    let v = std::env::var(CRASH_AT_VAR).ok()?;
    let mut parts = v.split(':');
    let point = parts.next()?.to_owned();
    let n = parts.next()?.parse().ok()?;
    let pause = parts.next() == Some("pause");
    Some(Plan {
        point,
        n,
        pause,
        hits: AtomicU64::new(0),
    })
}

/// Marks a named point (see the module docs); does nothing unless the variable names it.
pub(crate) fn point(name: &str) {
    let Some(p) = PLAN.get_or_init(plan) else {
        return;
    };
    if p.point != name || p.hits.fetch_add(1, Ordering::SeqCst) + 1 != p.n {
        return;
    }
    if p.pause {
        eprintln!("{CRASH_AT_VAR} {name}:{} reached", p.n);
        loop {
            std::thread::park();
        }
    }
    std::process::abort();
}
