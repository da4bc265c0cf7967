//! The conformance suites of the ports, run by every implementation in this crate.

use std::io::Read;
use std::ops::ControlFlow;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use resourcesync_store::conformance::{self, crash};
use resourcesync_store::{
    At, Batch, BatchGuard, Claimed, Expect, Features, Fenced, Finished, FsStore, Guarded,
    Hierarchy, Leases, MemState, MemStore, ObjectMeta, Placed, Records, RelPath, SqliteState,
    Store, Upload,
};

#[test]
fn mem_store_passes_the_store_suite() {
    // The version checks run only for a store that keeps versions: these two must.
    assert!(MemStore::new().features().versions.is_some(), "MemStore");
    let d = tempfile::tempdir().expect("tmp");
    let fs = FsStore::open(d.path()).expect("store");
    assert!(fs.features().versions.is_some(), "FsStore");
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
            .features()
            .crash_safe
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

#[test]
fn each_backend_declares_its_features() {
    let d = tempfile::tempdir().expect("tmp");
    let fs = FsStore::open(d.path()).expect("store");
    let f = fs.features();
    assert!(f.crash_safe, "{f:?}");
    assert_eq!(f.local, Some(d.path()), "{f:?}");
    assert!(f.interrupted.is_some() && f.hierarchy.is_some(), "{f:?}");
    assert_eq!(f.finish_blocks, cfg!(not(target_os = "linux")), "{f:?}");
    assert!(f.in_place, "{f:?}");
    let mem = MemStore::new();
    let f = mem.features();
    assert!(!f.crash_safe && !f.finish_blocks && f.in_place, "{f:?}");
    assert!(f.local.is_none() && f.interrupted.is_none() && f.hierarchy.is_none());
}

/// A store that declares features it does not have: a local directory its objects are not in,
/// nesting keys that never block.
#[derive(Debug)]
struct Boasts {
    inner: MemStore,
    dir: tempfile::TempDir,
}

impl Hierarchy for Boasts {
    fn at(&self, _: &RelPath) -> resourcesync_store::Result<At> {
        Ok(At::Taken)
    }
}

impl Store for Boasts {
    fn begin(&self, key: &RelPath, expect: Expect) -> resourcesync_store::Result<Upload> {
        self.inner.begin(key, expect)
    }
    fn place(&self, batch: Vec<Finished>) -> Vec<resourcesync_store::Result<Placed>> {
        self.inner.place(batch)
    }
    fn sync(&self) -> resourcesync_store::Result<()> {
        self.inner.sync()
    }
    fn get(&self, key: &RelPath) -> resourcesync_store::Result<Box<dyn Read + Send>> {
        self.inner.get(key)
    }
    fn head(&self, key: &RelPath) -> resourcesync_store::Result<Option<ObjectMeta>> {
        self.inner.head(key)
    }
    fn delete(&self, key: &RelPath) -> resourcesync_store::Result<bool> {
        self.inner.delete(key)
    }
    fn list(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(
            resourcesync_store::Result<(RelPath, ObjectMeta)>,
        ) -> resourcesync_store::Result<ControlFlow<()>>,
    ) -> resourcesync_store::Result<()> {
        self.inner.list(after, f)
    }
    fn set_modified(&self, key: &RelPath, t: SystemTime) -> resourcesync_store::Result<bool> {
        self.inner.set_modified(key, t)
    }
    fn features(&self) -> Features<'_> {
        self.inner.features().local(self.dir.path()).hierarchy(self)
    }
}

#[test]
fn the_store_suite_holds_a_store_to_the_features_it_declares() {
    let e = conformance::store::run(|| {
        Box::new(Boasts {
            inner: MemStore::new(),
            dir: tempfile::tempdir().expect("tmp"),
        })
    })
    .expect_err("a store declaring what it does not have passed");
    assert!(e.contains("local_directory: reading"), "{e}");
    assert!(e.contains("hierarchy_blocks: h/a/b is not blocked"), "{e}");
    assert_eq!(e.lines().count(), 2, "{e}");
}
