//! The Destination on injected ports: the engine syncs and audits through the
//! store and state it is given, here in memory, and writes no copy and no state anywhere else.

use std::sync::Arc;

use crate::common::*;
use crate::sync::audit_opts;
use resourcesync_destination::{Mode, Quiet};

/// Every object of a store, key → body (through the `Store` port only).
fn store_files(
    store: &dyn resourcesync_store::Store,
) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut out = std::collections::BTreeMap::new();
    store
        .list(None, &mut |item| {
            let (key, _) = item.expect("key");
            let mut body = Vec::new();
            store
                .get(&key)
                .expect("get")
                .read_to_end(&mut body)
                .expect("read");
            out.insert(key.to_string(), body);
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .expect("list");
    out
}

/// The engine runs on the ports it is given. A Destination over an in-memory
/// store and state (and a scratch directory) syncs baseline, incremental with deletes, and a
/// baseline from a Resource Dump, writing no copy and no state to any directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_syncs_into_the_store_and_state_it_is_given() {
    use resourcesync_destination::{Destination, Ports, http::Http};
    use resourcesync_store::{MemState, MemStore, Records};

    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("sub/b.txt", b"bravo bravo"),
            ("sub/deeper/c d.txt", b"charlie with a space"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish_with(src.path(), &server.base, |c| c.publish.dumps = true);
    let scratch = tmp();
    // The options name a directory that must stay untouched: the ports are the Destination's.
    let unused = tmp();
    let unused_dest = unused.path().join("never");
    let mut o = options(&server.base, &unused_dest);
    o.delete = true;
    o.use_dumps = false;

    let store = Arc::new(MemStore::new());
    let state = Arc::new(MemState::new());
    let ports = Ports::new(store.clone(), state.clone(), scratch.path(), "(memory)");
    let d = Destination::new(
        &server.base,
        ports,
        Http::new(o.http.clone()).expect("client"),
    );

    // Baseline from the Resource List, every resource fetched.
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("baseline");
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!((r.created, r.failed), (3, 0), "{r:?}");
    assert_eq!(store_files(store.as_ref()), source_files(src.path()));
    let row = state
        .resource(&format!("{}sub/b.txt", server.base))
        .expect("state")
        .expect("row");
    assert_eq!(row.length, Some(11));
    assert!(
        !row.hashes.is_empty(),
        "the digest computed while writing is kept"
    );
    assert!(
        state.cursor(&r.source.key()).expect("cursor").is_some(),
        "the cursor is in the state given"
    );
    assert!(
        !unused_dest.exists(),
        "nothing written to the options' directory"
    );

    // Incremental: one update, one create, one delete (with --delete, the object goes).
    write_tree(
        src.path(),
        &[("a.txt", b"alpha, changed"), ("new.txt", b"new")],
    );
    std::fs::remove_file(src.path().join("sub/b.txt")).expect("rm");
    publish_with(src.path(), &server.base, |c| c.publish.dumps = true);
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("incremental");
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (1, 1, 1, 0),
        "{r:?}"
    );
    assert_eq!(store_files(store.as_ref()), source_files(src.path()));
    assert!(
        state
            .resource(&format!("{}sub/b.txt", server.base))
            .expect("state")
            .is_none()
    );

    audit_then_repair(&d, &store, &o, &server.base, src.path(), &unused_dest).await;

    // A baseline from the Resource Dump into another in-memory store: no resource fetched on
    // its own.
    let store2 = Arc::new(MemStore::new());
    let ports2 = Ports::new(
        store2.clone(),
        Arc::new(MemState::new()),
        scratch.path(),
        "(memory)",
    );
    let d2 = Destination::new(
        &server.base,
        ports2,
        Http::new(o.http.clone()).expect("client"),
    );
    o.use_dumps = true;
    server.reset_hits();
    let r = d2.sync(&o, Arc::new(Quiet)).await.expect("dump baseline");
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!((r.failed, r.from_packages), (0, 3), "{r:?}");
    assert_eq!(server.resource_hits(), 0, "{r:?}");
    assert_eq!(store_files(store2.as_ref()), source_files(src.path()));
    assert!(
        !unused_dest.exists(),
        "nothing written to the options' directory"
    );
}

/// The audit reads the ports of `d`: in sync, then an object removed from `store` is missing
/// and one added is extra; the next sync puts the missing copy back.
async fn audit_then_repair(
    d: &resourcesync_destination::Destination,
    store: &Arc<resourcesync_store::MemStore>,
    o: &resourcesync_destination::SyncOptions,
    base: &str,
    src: &std::path::Path,
    unused_dest: &std::path::Path,
) {
    use resourcesync_store::{RelPath, Store};
    let a = d
        .audit(&audit_opts(base, unused_dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(a.in_sync, "{a:?}");
    assert_eq!(a.resources, 3);
    assert!(
        store
            .delete(&RelPath::parse("a.txt").expect("key"))
            .expect("delete")
    );
    store
        .put(
            &RelPath::parse("stray.txt").expect("key"),
            resourcesync_store::Expect {
                max_bytes: 100,
                ..Default::default()
            },
            &mut &b"stray"[..],
        )
        .expect("put");
    let a = d
        .audit(&audit_opts(base, unused_dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(!a.in_sync);
    assert_eq!((a.missing_count, a.extra_count), (1, 1), "{a:?}");
    assert!(
        !unused_dest.exists(),
        "nothing written to the options' directory"
    );
    // The next sync that checks the copies puts the missing copy back (repair from the
    // store's view).
    let mut o = o.clone();
    o.check_now = true;
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("repair");
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(
        store_files(store.as_ref())
            .into_iter()
            .filter(|(k, _)| k != "stray.txt")
            .collect::<std::collections::BTreeMap<_, _>>(),
        source_files(src)
    );
}

/// A store in memory that loses the state rows of a batch once armed: the first batch placed
/// after that stays in place and every later sync fails, so that the committer never records
/// it, as when a run is killed between the rename of a batch and its state rows (the crash
/// points `after-rename` and `package-renamed`).
#[derive(Debug, Default)]
struct LosesRows {
    inner: resourcesync_store::MemStore,
    armed: std::sync::atomic::AtomicBool,
    placed: std::sync::atomic::AtomicBool,
}

impl LosesRows {
    fn arm(&self, on: bool) {
        use std::sync::atomic::Ordering::SeqCst;
        self.armed.store(on, SeqCst);
        self.placed.store(false, SeqCst);
    }
}

impl resourcesync_store::Store for LosesRows {
    fn begin(
        &self,
        key: &resourcesync_store::RelPath,
        expect: resourcesync_store::Expect,
    ) -> resourcesync_store::Result<resourcesync_store::Upload> {
        self.inner.begin(key, expect)
    }
    fn place(
        &self,
        batch: Vec<resourcesync_store::Finished>,
    ) -> Vec<resourcesync_store::Result<resourcesync_store::Placed>> {
        use std::sync::atomic::Ordering::SeqCst;
        let out = self.inner.place(batch);
        if self.armed.load(SeqCst) && out.iter().any(Result::is_ok) {
            self.placed.store(true, SeqCst);
        }
        out
    }
    fn sync(&self) -> resourcesync_store::Result<()> {
        if self.placed.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(resourcesync_store::Error::Io {
                path: "(memory)".into(),
                // ENOSPC: the run stops at once, its cursor unmoved.
                cause: std::io::Error::from_raw_os_error(28),
            });
        }
        self.inner.sync()
    }
    fn get(
        &self,
        key: &resourcesync_store::RelPath,
    ) -> resourcesync_store::Result<Box<dyn std::io::Read + Send>> {
        self.inner.get(key)
    }
    fn head(
        &self,
        key: &resourcesync_store::RelPath,
    ) -> resourcesync_store::Result<Option<resourcesync_store::ObjectMeta>> {
        self.inner.head(key)
    }
    fn delete(&self, key: &resourcesync_store::RelPath) -> resourcesync_store::Result<bool> {
        self.inner.delete(key)
    }
    fn list(
        &self,
        after: Option<&resourcesync_store::RelPath>,
        f: &mut dyn FnMut(
            resourcesync_store::Result<(
                resourcesync_store::RelPath,
                resourcesync_store::ObjectMeta,
            )>,
        ) -> resourcesync_store::Result<std::ops::ControlFlow<()>>,
    ) -> resourcesync_store::Result<()> {
        self.inner.list(after, f)
    }
    fn set_modified(
        &self,
        key: &resourcesync_store::RelPath,
        t: std::time::SystemTime,
    ) -> resourcesync_store::Result<bool> {
        self.inner.set_modified(key, t)
    }
    fn features(&self) -> resourcesync_store::Features<'_> {
        self.inner.features()
    }
}

/// A Destination of `src` over a [`LosesRows`] store and a state in memory, with --delete.
struct Rig {
    server: Server,
    store: Arc<LosesRows>,
    state: Arc<resourcesync_store::MemState>,
    d: resourcesync_destination::Destination,
    o: resourcesync_destination::SyncOptions,
    _dirs: [tempfile::TempDir; 2],
}

impl Rig {
    async fn new(src: &std::path::Path) -> Rig {
        use resourcesync_destination::{Destination, Ports, http::Http};
        let server = Server::start(src).await;
        publish(src, &server.base, None);
        let (scratch, unused) = (tmp(), tmp());
        let mut o = options(&server.base, &unused.path().join("never"));
        o.delete = true;
        o.use_dumps = false;
        o.http.retries = 0;
        let store = Arc::new(LosesRows::default());
        let state = Arc::new(resourcesync_store::MemState::new());
        let ports = Ports::new(store.clone(), state.clone(), scratch.path(), "(memory)");
        let d = Destination::new(
            &server.base,
            ports,
            Http::new(o.http.clone()).expect("client"),
        );
        Rig {
            server,
            store,
            state,
            d,
            o,
            _dirs: [scratch, unused],
        }
    }

    async fn sync(&self) -> resourcesync_destination::Result<resourcesync_destination::SyncReport> {
        self.d.sync(&self.o, Arc::new(Quiet)).await
    }

    /// Objects in the store the state has no current row of.
    fn unrecorded(&self) -> Vec<String> {
        use resourcesync_store::Records;
        store_files(&self.store.inner)
            .into_keys()
            .filter(|k| {
                let uri = format!("{}{k}", self.server.base);
                self.state
                    .resource(&uri)
                    .expect("state")
                    .is_none_or(|r| r.gone)
            })
            .collect()
    }

    /// Runs again with the store's fault off: a run of `mode` with no failure, after which the
    /// store holds the Source's files (`src`) and nothing unrecorded.
    async fn converges(&self, src: &std::path::Path, mode: Mode) {
        self.store.arm(false);
        let r = self.sync().await.expect("the run after the fault");
        assert_eq!(r.mode, mode, "{r:?}");
        assert_eq!(r.failed, 0, "{r:?}");
        assert_eq!(store_files(&self.store.inner), source_files(src), "{r:?}");
        assert!(self.unrecorded().is_empty());
    }
}

/// Z39.99-2017 §5.2, §5.3: a copy put in place by a run that never recorded it (killed between
/// the rename and the state row) is still the Destination's: when the Source deletes its
/// resource before the next run, that run, a baseline against the Resource List (the first
/// run stopped without a cursor), deletes it; the copy converges to the Source's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_placed_and_never_recorded_by_a_baseline_is_deleted_with_its_resource() {
    let src = tmp();
    let first: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 2),
                format!("file {i}").into_bytes(),
            )
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = first.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    write_tree(src.path(), &refs);
    let rig = Rig::new(src.path()).await;
    // A baseline whose first batch is placed and never recorded; the run stops without a
    // cursor (a full disk), so the next one is a baseline again.
    rig.store.arm(true);
    let r = rig.sync().await;
    assert!(r.is_err(), "{r:?}");
    assert!(
        !rig.unrecorded().is_empty(),
        "the fault left no copy unrecorded"
    );
    // The Source deletes them all and creates another before the next run.
    for (p, _) in &first {
        std::fs::remove_file(src.path().join(p)).expect("rm");
    }
    write_tree(src.path(), &[("c.txt", b"charlie")]);
    publish(src.path(), &rig.server.base, None);
    rig.converges(src.path(), Mode::Baseline).await;
}

/// The same in an incremental run (Z39.99-2014 §12.1): a created resource placed and never
/// recorded (the run recorded it as pending and moved its cursor), then deleted at the Source:
/// the next run, which reads the delete from the Change List, deletes the copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_copy_placed_and_never_recorded_is_deleted_by_the_next_change_list() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let rig = Rig::new(src.path()).await;
    let r = rig.sync().await.expect("baseline");
    assert_eq!(r.failed, 0, "{r:?}");
    write_tree(src.path(), &[("new/d.txt", b"delta")]);
    publish(src.path(), &rig.server.base, None);
    rig.store.arm(true);
    let _ = rig.sync().await;
    assert_eq!(rig.unrecorded(), ["new/d.txt"]);
    std::fs::remove_file(src.path().join("new/d.txt")).expect("rm");
    publish(src.path(), &rig.server.base, None);
    rig.converges(src.path(), Mode::Incremental).await;
}
