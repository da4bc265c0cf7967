//! A test hook for crash tests: stops the process at a named point of a scan.
//!
//! Compiled always, inert unless the environment variable `RESOURCESYNC_TEST_CRASH_AT` is set
//! (read once; the same variable and syntax as the Destination's hook). Its value is
//! `POINT:N`: the `N`th time (counting from 1) the process reaches `POINT`, it calls
//! [`std::process::abort`] (no destructor, no flush, like a `kill -9`). Anything else leaves
//! the hook inert. Points:
//!
//! | point | where |
//! | --- | --- |
//! | `scan-batch` | a batch of hashed files has its rows written in the scan's transaction, not committed |

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable read.
pub const CRASH_AT_VAR: &str = "RESOURCESYNC_TEST_CRASH_AT";

#[derive(Debug)]
struct Plan {
    point: String,
    n: u64,
    hits: AtomicU64,
}

static PLAN: OnceLock<Option<Plan>> = OnceLock::new();

/// `POINT:N`; `None` for anything else.
fn parse(v: &str) -> Option<Plan> {
    let (point, n) = v.split_once(':')?;
    Some(Plan {
        point: point.to_owned(),
        n: n.parse().ok()?,
        hits: AtomicU64::new(0),
    })
}

/// Marks a named point (see the module docs); does nothing unless the variable names it.
pub(crate) fn point(name: &str) {
    let plan = PLAN.get_or_init(|| parse(&std::env::var(CRASH_AT_VAR).ok()?));
    if let Some(p) = plan {
        if p.point == name && p.hits.fetch_add(1, Ordering::SeqCst) + 1 == p.n {
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_parsed_and_anything_else_leaves_the_hook_inert() {
        let p = parse("scan-batch:3").expect("plan");
        assert_eq!((p.point.as_str(), p.n), ("scan-batch", 3));
        for bad in ["", "scan-batch", "scan-batch:x", "scan-batch:1:pause"] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
