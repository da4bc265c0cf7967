//! A test hook for the crash harness (`crates/cli/tests/it/crash.rs`): stops the process at a named point.
//!
//! Compiled always, inert unless the environment variable `RESOURCESYNC_TEST_CRASH_AT` is set
//! (read once). Its value is `POINT:N`, `POINT:N:pause` or `POINT:N:panic`: at the `N`th time
//! (counting from 1, over all threads) the process reaches `POINT`, it calls
//! [`std::process::abort`] (no destructor, no flush, like a `kill -9`); with `pause` it writes
//! `RESOURCESYNC_TEST_CRASH_AT POINT:N reached` to standard error and stops that thread for
//! good, so that a harness can send SIGKILL while the other downloads are still in flight; with
//! `panic` it panics on that thread (unwinding: destructors run), so that a test can check what
//! catches the panic. With `fail`, the `N`th and every later time `fails` is asked about
//! `POINT`, it answers `true` and the caller fails as if the disk were full (see the `pending`
//! point). Points:
//!
//! | point | where |
//! | --- | --- |
//! | `list-entry` | an entry of a list document was just read (list streaming) |
//! | `download` | the first bytes of a resource were written to its temporary file (with `fail`: the write fails, as on a full disk) |
//! | `before-rename` | a resource's temporary file is complete, not yet verified and queued for its batch |
//! | `after-rename` | a resource of a batch is at its final path, the batch's state rows not yet written |
//! | `state` | a batch's state rows are written (with the removal of their pending rows, one transaction), once per row, the downloads not yet answered |
//! | `cursor` | every change is applied, the cursor not yet moved |
//! | `package-entry` | a dump package's entry is inflated to its temporary file, not yet renamed (on the thread that extracts it; in a Resource Dump package of at most 64 entries, one thread takes them all, in manifest order; a Change Dump's entries, in order, on the thread that reads its manifest; with `panic`, that entry fails and the others are applied) |
//! | `package-renamed` | a dump package's entry is at its final path, its batch's state rows not yet written |
//! | `version-kept` | with `--versions`: a copy of a batch is at its final path and its body kept as a version, the batch not yet synced nor its state rows written |
//! | `versions-unrecorded` | with `--keep-versions`/`--keep-versions-for`: a page of pruned version rows is removed, their bodies not yet (`crate::retention`) |
//! | `pending` | a failed change is about to be recorded as pending (with `fail`: the write fails, as on a full disk) |

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable read.
pub const CRASH_AT_VAR: &str = "RESOURCESYNC_TEST_CRASH_AT";

/// What to do at the point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Abort,
    Pause,
    Panic,
    Fail,
}

#[derive(Debug)]
struct Plan {
    point: String,
    n: u64,
    action: Action,
    hits: AtomicU64,
}

static PLAN: OnceLock<Option<Plan>> = OnceLock::new();

fn plan() -> Option<Plan> {
    parse(&std::env::var(CRASH_AT_VAR).ok()?)
}

/// `POINT:N[:pause|:panic]`; `None` for anything else (the hook then stays inert).
fn parse(v: &str) -> Option<Plan> {
    let mut parts = v.split(':');
    let point = parts.next()?.to_owned();
    let n = parts.next()?.parse().ok()?;
    let action = match parts.next() {
        None => Action::Abort,
        Some("pause") => Action::Pause,
        Some("panic") => Action::Panic,
        Some("fail") => Action::Fail,
        Some(_) => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(Plan {
        point,
        n,
        action,
        hits: AtomicU64::new(0),
    })
}

/// Marks a named point (see the module docs); does nothing unless the variable names it.
pub(crate) fn point(name: &str) {
    let Some(p) = PLAN.get_or_init(plan) else {
        return;
    };
    if p.action == Action::Fail
        || p.point != name
        || p.hits.fetch_add(1, Ordering::SeqCst) + 1 != p.n
    {
        return;
    }
    match p.action {
        Action::Pause => {
            eprintln!("{CRASH_AT_VAR} {name}:{} reached", p.n);
            loop {
                std::thread::park();
            }
        }
        Action::Panic => panic!("{CRASH_AT_VAR} {name}:{}: panic asked for", p.n),
        Action::Abort => std::process::abort(),
        Action::Fail => {}
    }
}

/// Whether the write at a named point must fail (`POINT:N:fail`: the `N`th time and every later
/// one); always `false` unless the variable names the point with `fail`.
pub(crate) fn fails(name: &str) -> bool {
    let Some(p) = PLAN.get_or_init(plan) else {
        return false;
    };
    p.action == Action::Fail && p.point == name && p.hits.fetch_add(1, Ordering::SeqCst) + 1 >= p.n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_parsed_and_anything_else_leaves_the_hook_inert() {
        let p = parse("package-entry:3:panic").expect("panic");
        assert_eq!(
            (p.point.as_str(), p.n, p.action),
            ("package-entry", 3, Action::Panic)
        );
        assert_eq!(
            parse("download:1:pause").expect("pause").action,
            Action::Pause
        );
        assert_eq!(parse("state:2").expect("abort").action, Action::Abort);
        assert_eq!(parse("pending:1:fail").expect("fail").action, Action::Fail);
        for bad in [
            "",
            "state",
            "state:x",
            "state:1:explode",
            "state:1:panic:more",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
