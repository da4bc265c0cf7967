//! The conformance suites of the ports, run by every implementation in this crate.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use resourcesync_store::conformance::{self, crash};
use resourcesync_store::{
    Batch, BatchGuard, Claimed, Fenced, FsStore, Guarded, Leases, MemState, MemStore, Records,
    SqliteState, Store,
};

#[test]
fn mem_store_passes_the_store_suite() {
    conformance::store::run(|| Box::new(MemStore::new())).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fs_store_passes_the_store_suite() {
    let mut dirs = Vec::new();
    conformance::store::run(|| {
        let d = tempfile::tempdir().expect("tmp");
        let s = FsStore::open(d.path()).expect("store");
        dirs.push(d);
        Box::new(s)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fs_store_without_unnamed_files_passes_the_store_suite() {
    let mut dirs = Vec::new();
    conformance::store::run(|| {
        let d = tempfile::tempdir().expect("tmp");
        let s = FsStore::open(d.path())
            .expect("store")
            .with_unnamed_temps(false);
        dirs.push(d);
        Box::new(s)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mem_state_passes_the_state_suite() {
    conformance::state::run(|| Box::new(MemState::new())).unwrap_or_else(|e| panic!("{e}"));
}

/// The wrappers are records like any other: the records checks pass through [`Fenced`] (a
/// lease held) and [`Claimed`] (no claim held) over a [`MemState`].
#[test]
fn fenced_and_claimed_pass_the_records_checks() {
    conformance::state::run_records(|| {
        let inner = Arc::new(MemState::new());
        let lease = inner
            .lease_source("cap", "w", Duration::from_secs(3600))
            .expect("lease")
            .expect("free");
        Box::new(Fenced::new(inner, lease))
    })
    .unwrap_or_else(|e| panic!("fenced: {e}"));
    conformance::state::run_records(|| Box::new(Claimed::new(Arc::new(MemState::new()))))
        .unwrap_or_else(|e| panic!("claimed: {e}"));
}

/// A failure is named by its port and check: records that drop every write fail the records
/// checks, each line naming the port.
#[test]
fn a_failure_is_named_by_port_and_check() {
    #[derive(Debug)]
    struct DropAll;
    impl BatchGuard for DropAll {
        fn apply(&self, _: &dyn Records, _: &Batch<'_>) -> resourcesync_store::Result<()> {
            Ok(())
        }
    }
    let e = conformance::state::run_records(|| {
        Box::new(Guarded::with(Arc::new(MemState::new()), DropAll))
    })
    .expect_err("writes dropped");
    assert!(e.contains("records: records_page_in_uri_order: "), "{e}");
    assert!(e.lines().all(|l| l.starts_with("records: ")), "{e}");
}

#[test]
fn sqlite_state_passes_the_state_suite() {
    let mut dirs = Vec::new();
    conformance::state::run(|| {
        let d = tempfile::tempdir().expect("tmp");
        let s = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
        dirs.push(d);
        Box::new(s)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sqlite_state_in_memory_passes_the_state_suite() {
    conformance::state::run(|| Box::new(SqliteState::in_memory().expect("state")))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The suite against a real PostgreSQL server (`RESOURCESYNC_TEST_POSTGRES`, from
/// `scripts/postgres.sh`; failing without it), a new schema per check.
#[cfg(feature = "postgres")]
#[test]
fn pg_state_passes_the_state_suite() {
    let mut schemas = crate::pg_state::Schemas::new();
    conformance::state::run(|| Box::new(schemas.state())).unwrap_or_else(|e| panic!("{e}"));
}

/// The variable that makes [`crash_child`] the child of [`fs_store_survives_a_kill_at_each_step_of_a_put`].
const CHILD_DIR: &str = "RESOURCESYNC_STORE_CRASH_CHILD_DIR";
/// Whether the child's store uses unnamed temporary files.
const CHILD_UNNAMED: &str = "RESOURCESYNC_STORE_CRASH_CHILD_UNNAMED";

fn store_at(dir: &std::path::Path, unnamed: bool) -> FsStore {
    FsStore::open(dir)
        .expect("store")
        .with_unnamed_temps(unnamed)
}

/// The child of the crash test: puts a new body and is killed at a step. Does nothing in an
/// ordinary test run.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let unnamed = std::env::var(CHILD_UNNAMED).is_ok_and(|v| v == "1");
    let s = store_at(dir.as_ref(), unnamed);
    // The put may be for a new key (an unnamed file in place) or over the old body.
    let up = if unnamed {
        crash::child_new(&s, &crash::key())
    } else {
        crash::child(&s, &crash::key())
    };
    up.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fs_store_survives_a_kill_at_each_step_of_a_put() {
    assert!(
        FsStore::open(tempfile::tempdir().expect("tmp").path())
            .expect("store")
            .crash_safe()
    );
    let exe = std::env::current_exe().expect("exe");
    for unnamed in [false, true] {
        let mut seen = Vec::new();
        for step in crash::STEPS.iter().chain(&["done"]) {
            let d = tempfile::tempdir().expect("tmp");
            if !unnamed {
                crash::prepare(&store_at(d.path(), unnamed)).unwrap_or_else(|e| panic!("{e}"));
            }
            let mut cmd = Command::new(&exe);
            // The child is this test binary, run for this one test (named by its module path).
            cmd.args([
                "--exact",
                "conformance::crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, d.path())
            .env(CHILD_UNNAMED, if unnamed { "1" } else { "0" });
            crash::kill_at(&mut cmd, step).unwrap_or_else(|e| panic!("{step}: {e}"));
            let s = store_at(d.path(), unnamed);
            s.clean_tmp().expect("clean");
            let which = if unnamed {
                crash::check_new(&s)
            } else {
                crash::check(&s)
            }
            .unwrap_or_else(|e| panic!("killed at {step} (unnamed {unnamed}): {e}"));
            seen.push((*step, which));
            // Nothing left in the temporary folder once cleaned.
            let left = std::fs::read_dir(d.path().join(".resourcesync/tmp"))
                .expect("tmp")
                .count();
            assert_eq!(left, 0, "{step}");
        }
        // The new body is there from the rename (or link) on, the old one before.
        let want_new = |s: &str| matches!(s, "placed" | "synced" | "done");
        for (step, which) in &seen {
            let want = if want_new(step) {
                "new"
            } else if unnamed {
                "none"
            } else {
                "old"
            };
            assert_eq!(
                *which, want,
                "killed at {step} (unnamed {unnamed}): {seen:?}"
            );
        }
    }
}
