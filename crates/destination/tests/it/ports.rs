//! The Destination on injected ports (issue 23 item 2): the engine syncs and audits through the
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

/// Issue 23 item 2: the engine runs on the ports it is given. A Destination over an in-memory
/// store and state (and a scratch directory) syncs baseline, incremental with deletes, and a
/// baseline from a Resource Dump, writing no copy and no state to any directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_syncs_into_the_store_and_state_it_is_given() {
    use resourcesync_destination::{Destination, Ports, http::Http};
    use resourcesync_store::{MemState, MemStore, StateStore};

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

    // The audit reads the same ports: in sync, then an object removed from the store is
    // missing and one added is extra.
    let a = d
        .audit(&audit_opts(&server.base, &unused_dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(a.in_sync, "{a:?}");
    assert_eq!(a.resources, 3);
    use resourcesync_store::{RelPath, Store};
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
        .audit(&audit_opts(&server.base, &unused_dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(!a.in_sync);
    assert_eq!((a.missing_count, a.extra_count), (1, 1), "{a:?}");
    assert!(
        !unused_dest.exists(),
        "nothing written to the options' directory"
    );
    // The next sync puts the missing copy back (repair from the store's view).
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("repair");
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(
        store_files(store.as_ref())
            .into_iter()
            .filter(|(k, _)| k != "stray.txt")
            .collect::<std::collections::BTreeMap<_, _>>(),
        source_files(src.path())
    );

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
