//! Retention of kept versions (issue 37 item 5; `docs/history.md`): keep the last N of each
//! resource, or those current within a duration; pruning at the end of a sync removes the
//! other rows, then the bodies no row names (a body another resource still has stays). On a
//! directory with SQLite, and on an S3 bucket with PostgreSQL (`RESOURCESYNC_TEST_S3`,
//! `RESOURCESYNC_TEST_POSTGRES`: failing without them).

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use crate::versions::{Setup, bucket_and_pg, empty_bucket, off, sha};
use resourcesync_destination::Quiet;
use resourcesync_destination::retention::Retention;
use resourcesync_store::{FsStore, Records, SqliteState, Store};

async fn prunes(store: Arc<dyn Store>, state: Arc<dyn Records>) {
    let s = Setup::new(store, state).await;
    let key = s.run().await.source.key();
    s.change(&[("a.txt", b"two, longer")]);
    s.run().await;
    // b.txt changes: its first body is c.txt's too.
    s.change(&[("a.txt", b"three"), ("b.txt", b"bee")]);
    s.run().await;
    assert_eq!(s.versions(&key, "a.txt").await.len(), 3);
    assert_eq!(s.versions(&key, "b.txt").await.len(), 2);

    // Kept for an hour: every version ended within it, none goes.
    let mut o = s.o.clone();
    o.keep_versions = Retention::For(Duration::from_secs(3600));
    let r = s.d.sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(r.versions.expect("versions").pruned.versions, 0, "{r:?}");
    assert_eq!(s.versions(&key, "a.txt").await.len(), 3);

    // The last one of each: only the current versions and their bodies stay; the body b.txt
    // had is c.txt's, and stays.
    o.keep_versions = Retention::Last(1);
    let r = s.d.sync(&o, Arc::new(Quiet)).await.expect("sync");
    let p = r.versions.expect("versions").pruned;
    assert_eq!((p.versions, p.bodies, p.bytes), (3, 2, 3 + 11), "{p:?}");
    let a = s.versions(&key, "a.txt").await;
    assert_eq!(a.iter().map(|v| v.seq).collect::<Vec<_>>(), [3], "{a:#?}");
    assert_eq!(a[0].digest, sha(b"three"));
    let b = s.versions(&key, "b.txt").await;
    assert_eq!(b.iter().map(|v| v.seq).collect::<Vec<_>>(), [2], "{b:#?}");
    assert_eq!(s.versions(&key, "c.txt").await.len(), 1);
    assert_eq!(s.kept(&sha(b"one")).await, None);
    assert_eq!(s.kept(&sha(b"two, longer")).await, None);
    assert_eq!(s.kept(&sha(b"three")).await.as_deref(), Some(&b"three"[..]));
    assert_eq!(s.kept(&sha(b"bee")).await.as_deref(), Some(&b"bee"[..]));
    assert_eq!(
        s.kept(&sha(b"the same body")).await.as_deref(),
        Some(&b"the same body"[..]),
        "c.txt's body, once b.txt's"
    );

    // A change after: numbers go on (4), and a duration of zero keeps only the last.
    s.change(&[("a.txt", b"four")]);
    o.keep_versions = Retention::For(Duration::ZERO);
    let r = s.d.sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(r.versions.expect("versions").pruned.versions, 1, "{r:?}");
    let a = s.versions(&key, "a.txt").await;
    assert_eq!(a.iter().map(|v| v.seq).collect::<Vec<_>>(), [4], "{a:#?}");
    assert_eq!(s.kept(&sha(b"three")).await, None);

    // A body no row names (a prune stopped between rows and bodies) goes with the next prune.
    let (st, stt) = (s.store.clone(), s.state.clone());
    let orphan = off(move || {
        let k = resourcesync_store::RelPath::parse("orphan.txt").expect("key");
        st.put(
            &k,
            resourcesync_store::Expect {
                length: Some(6),
                ..Default::default()
            },
            &mut &b"orphan"[..],
        )
        .expect("put");
        let d = sha(b"orphan");
        st.features()
            .versions
            .expect("versions")
            .keep(&k, &d)
            .expect("keep");
        st.delete(&k).expect("delete");
        assert!(!stt.digest_referenced(&d).expect("referenced"));
        d
    })
    .await;
    assert!(s.kept(&orphan).await.is_some());
    let r = s.d.sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(r.versions.expect("versions").pruned.bodies, 1, "{r:?}");
    assert_eq!(s.kept(&orphan).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_prunes_its_versions() {
    let dest = tmp();
    let store: Arc<dyn Store> = Arc::new(FsStore::open(dest.path()).expect("store"));
    let state: Arc<dyn Records> = Arc::new(
        SqliteState::open(&dest.path().join(".resourcesync/state.sqlite")).expect("state"),
    );
    prunes(store, state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_prunes_its_versions() {
    let (s3, state, _scratch) = bucket_and_pg("retention").await;
    let store: Arc<dyn Store> = s3.clone();
    prunes(store, state).await;
    empty_bucket(s3).await;
}
