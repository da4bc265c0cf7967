//! The one sync/async boundary (`src/blocking.rs`): every Store and state implementation
//! passes its suite called from Tokio runtime workers through `blocking::call`, and a backend
//! that blocks refuses a direct call from a worker (what the adapter is for).

use resourcesync_store::conformance;
use resourcesync_store::{FsStore, MemState, MemStore, SqliteState};

#[test]
fn mem_store_passes_the_store_suite_from_runtime_workers() {
    conformance::store::run_on_workers(|| Box::new(MemStore::new()))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn fs_store_passes_the_store_suite_from_runtime_workers() {
    let mut dirs = Vec::new();
    conformance::store::run_on_workers(|| {
        let d = tempfile::tempdir().expect("tmp");
        let s = FsStore::open(d.path()).expect("store");
        dirs.push(d);
        Box::new(s)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mem_state_passes_the_state_suite_from_runtime_workers() {
    conformance::state::run_on_workers(|| Box::new(MemState::new()))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sqlite_state_passes_the_state_suite_from_runtime_workers() {
    let mut dirs = Vec::new();
    conformance::state::run_on_workers(|| {
        let d = tempfile::tempdir().expect("tmp");
        let s = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
        dirs.push(d);
        Box::new(s)
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

/// `RESOURCESYNC_TEST_POSTGRES` (`scripts/postgres.sh`), a new schema per check.
#[cfg(feature = "postgres")]
#[test]
fn pg_state_passes_the_state_suite_from_runtime_workers() {
    let mut schemas = crate::pg_state::Schemas::new();
    conformance::state::run_on_workers(|| Box::new(schemas.state()))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The panic a task gets from `f` called on a multi-threaded runtime's worker, directly
/// (without `blocking::call`), then the same call through `call`, which must not panic.
#[cfg(any(feature = "postgres", feature = "s3"))]
fn direct_call_panics<T: Send + Sync + 'static>(subject: T, f: fn(&T)) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let subject = std::sync::Arc::new(subject);
    let s = subject.clone();
    let direct = rt.block_on(rt.spawn(async move { f(&s) }));
    let s = subject.clone();
    rt.block_on(rt.spawn(async move {
        resourcesync_store::blocking::call(|| f(&s));
        drop(s);
    }))
    .expect("the same call through blocking::call");
    let Err(e) = direct else {
        panic!("a direct call from a worker did not panic");
    };
    let p = e.into_panic();
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// PostgreSQL's synchronous client runs a runtime of its own: called directly from a worker
/// it panics, which is why async code calls a port through `blocking::call`.
#[cfg(feature = "postgres")]
#[test]
fn pg_state_called_directly_from_a_worker_panics() {
    use resourcesync_store::Records;
    let mut schemas = crate::pg_state::Schemas::new();
    let m = direct_call_panics(schemas.state(), |s| {
        let _ = s.resource("http://example.org/a");
    });
    assert!(
        m.contains("Cannot start a runtime from within a runtime"),
        "{m}"
    );
}

/// The S3 client (the HTTP layer's blocking face) refuses a direct call from a worker the same
/// way, before anything is sent (no server needed: nothing listens at the address).
#[cfg(feature = "s3")]
#[test]
fn s3_store_called_directly_from_a_worker_panics() {
    use resourcesync_store::{RelPath, S3Config, S3Store, Store};
    let cfg = S3Config::parse("s3://id:secret@127.0.0.1:9/bucket").expect("config");
    let store = S3Store::with_config(cfg).expect("store");
    let m = direct_call_panics(store, |s| {
        let _ = s.head(&RelPath::parse("a").expect("key"));
    });
    assert!(
        m.contains("Cannot start a runtime from within a runtime"),
        "{m}"
    );
}

/// Runs `f` in a task on a multi-threaded runtime's worker, then on a current-thread one.
#[cfg(any(feature = "postgres", feature = "s3"))]
fn on_both_workers<T: Send + 'static>(f: impl Fn() -> T + Send + Sync + 'static) -> Vec<T> {
    let f = std::sync::Arc::new(f);
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    [multi, current]
        .iter()
        .map(|rt| {
            let f = f.clone();
            rt.block_on(rt.spawn(async move { f() }))
                .expect("a call through the adapter panicked on a worker")
        })
        .collect()
}

/// The adapter the Destination's runs hold their ports through (`OffWorker`): the
/// call that panics above, made directly from a worker on the adapted state, answers.
#[cfg(feature = "postgres")]
#[test]
fn pg_state_through_the_adapter_is_called_directly_from_a_worker() {
    use resourcesync_store::OffWorker;
    let mut schemas = crate::pg_state::Schemas::new();
    let state = OffWorker::records(std::sync::Arc::new(schemas.state()));
    for got in on_both_workers(move || state.resource("http://example.org/a").map(|r| r.is_none()))
    {
        assert!(got.expect("the lookup"), "a row nobody wrote");
    }
}

/// The same for the S3 client: through the adapter a direct call from a worker is sent (and
/// fails as a request to an address where nothing listens, not as a panic).
#[cfg(feature = "s3")]
#[test]
fn s3_store_through_the_adapter_is_called_directly_from_a_worker() {
    use resourcesync_store::OffWorker;
    use resourcesync_store::{RelPath, S3Config, S3Store};
    let cfg = S3Config::parse("s3://id:secret@127.0.0.1:9/bucket").expect("config");
    let store = OffWorker::store(std::sync::Arc::new(
        S3Store::with_config(cfg).expect("store"),
    ));
    for got in on_both_workers(move || store.head(&RelPath::parse("a").expect("key")).map(|_| ())) {
        let e = got.expect_err("nothing listens at the address");
        assert!(!e.to_string().contains("runtime"), "{e}");
    }
}

/// The adapter leaves a port that declares its calls in place as it is (a directory, SQLite,
/// memory: moving such a call off the worker costs more than the call), and wraps the others.
#[test]
fn the_adapter_leaves_ports_called_in_place_as_they_are() {
    use resourcesync_store::{OffWorker, Records, Store};
    use std::sync::Arc;
    let d = tempfile::tempdir().expect("tmp");
    let fs: Arc<dyn Store> = Arc::new(FsStore::open(d.path()).expect("store"));
    assert!(Arc::ptr_eq(&OffWorker::store(fs.clone()), &fs));
    let mem: Arc<dyn Store> = Arc::new(MemStore::new());
    assert!(Arc::ptr_eq(&OffWorker::store(mem.clone()), &mem));
    let sqlite: Arc<dyn Records> =
        Arc::new(SqliteState::open(&d.path().join("state.sqlite")).expect("state"));
    assert!(Arc::ptr_eq(&OffWorker::records(sqlite.clone()), &sqlite));
    let state: Arc<dyn Records> = Arc::new(MemState::new());
    assert!(Arc::ptr_eq(&OffWorker::records(state.clone()), &state));
    #[cfg(feature = "s3")]
    {
        use resourcesync_store::{S3Config, S3Store};
        let cfg = S3Config::parse("s3://id:secret@127.0.0.1:9/bucket").expect("config");
        let s3: Arc<dyn Store> = Arc::new(S3Store::with_config(cfg).expect("store"));
        assert!(!s3.features().in_place);
        let wrapped = OffWorker::store(s3.clone());
        assert!(!Arc::ptr_eq(&wrapped, &s3));
        // Its capabilities are the store's own, called by the rule of the store's `in_place`.
        assert!(!wrapped.features().in_place);
    }
}
