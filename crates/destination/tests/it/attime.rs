//! `audit --at` and `restore --at` (issue 37 item 4; `docs/history.md`): the copies against the
//! state a Source had at a time of this Destination's clock, and that state written into a
//! new directory, from the kept versions alone. On a directory with SQLite, and on an S3
//! bucket with PostgreSQL (`RESOURCESYNC_TEST_S3`, `RESOURCESYNC_TEST_POSTGRES`: failing
//! without them).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::*;
use crate::versions::{Setup, bucket_and_pg, empty_bucket, off, sha};
use resourcesync_destination::Ports;
use resourcesync_destination::attime::{AtAuditReport, RestoreReport, audit_at, restore_at};
use resourcesync_model::W3cDateTime;
use resourcesync_store::{Expect, FsStore, Records, SqliteState, Store};

/// The files under `dir` (its `.resourcesync` left out), with their bodies.
fn files(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if e.file_name() == ".resourcesync" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .expect("under")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

struct At {
    ports: Ports,
    key: String,
}

impl At {
    async fn audit(&self, t: &W3cDateTime) -> AtAuditReport {
        let (ports, key, t) = (self.ports.clone(), self.key.clone(), *t);
        off(move || audit_at(&ports, &key, &t, None).expect("audit --at")).await
    }

    /// Restores at `t` into a new directory: the report and the files written.
    async fn restore(&self, t: &W3cDateTime) -> (RestoreReport, BTreeMap<String, Vec<u8>>) {
        let (ports, key, t) = (self.ports.clone(), self.key.clone(), *t);
        let out = tmp();
        let dir = out.path().to_owned();
        let r = off(move || {
            let store = FsStore::open(&dir).expect("OUT");
            restore_at(&ports, &key, &t, None, &store).expect("restore --at")
        })
        .await;
        let written = files(out.path());
        (r, written)
    }
}

/// (what, URI's file name, the version's number) of each difference.
fn diffs(r: &AtAuditReport) -> Vec<(&'static str, String, Option<u64>)> {
    let mut out = Vec::new();
    for (what, list) in [
        ("missing", &r.missing),
        ("extra", &r.extra),
        ("different", &r.different),
    ] {
        for d in list {
            out.push((what, d.path.clone(), d.version.as_ref().map(|v| v.seq)));
        }
    }
    out.sort();
    out
}

/// `a.txt` is `one`, then `two, longer`, then `three`, then deleted (and its copy removed);
/// `b.txt` and `c.txt` have one body throughout. Each of the moments (before the first run,
/// then when each version was first seen, then the delete) is audited and restored.
async fn each_moment(store: Arc<dyn Store>, state: Arc<dyn Records>) {
    let s = Setup::new(store.clone(), state.clone()).await;
    // Each moment is just after a run, by this Destination's clock.
    let now = || W3cDateTime::now(true);
    let key = s.run().await.source.key();
    let t1 = now();
    s.change(&[("a.txt", b"two, longer")]);
    s.run().await;
    let t2 = now();
    s.change(&[("a.txt", b"three")]);
    s.run().await;
    let t3 = now();
    std::fs::remove_file(s.src.path().join("a.txt")).expect("rm");
    publish(s.src.path(), &s.server.base, None);
    let mut o = s.o.clone();
    o.delete = true;
    let r =
        s.d.sync(&o, Arc::new(resourcesync_destination::Quiet))
            .await
            .expect("--delete");
    assert_eq!((r.deleted, r.failed), (1, 0), "{r:?}");
    let t4 = now();
    let a = s.versions(&key, "a.txt").await;
    assert_eq!(a.len(), 3, "{a:#?}");
    let t0 = W3cDateTime::parse("2000-01-01T00:00:00Z").expect("t0");
    let at = At {
        ports: Ports::with_temp_scratch(store.clone(), state.clone(), "(test)").expect("ports"),
        key: key.clone(),
    };

    // As DEST is now (a.txt removed): before anything, every copy is extra; at the first
    // moments a.txt is missing (as the version current then); at the delete, in sync.
    let r = at.audit(&t0).await;
    assert_eq!((r.resources, r.existed), (3, 0), "{r:#?}");
    assert_eq!(
        diffs(&r),
        [
            ("extra", "b.txt".into(), None),
            ("extra", "c.txt".into(), None)
        ],
        "a.txt is absent, as it was: {r:#?}"
    );
    for (t, seq) in [(&t1, 1), (&t2, 2), (&t3, 3)] {
        let r = at.audit(t).await;
        assert_eq!(
            diffs(&r),
            [("missing", "a.txt".into(), Some(seq))],
            "{r:#?}"
        );
        assert_eq!((r.in_sync_count, r.in_sync), (2, false));
        assert!(
            r.missing[0]
                .version
                .as_ref()
                .is_some_and(|v| v.datetime.is_some())
        );
    }
    let r = at.audit(&t4).await;
    assert!(r.in_sync && r.in_sync_count == 3, "{r:#?}");

    // A copy of a.txt holding `one`: as it was at t1, not at t2 or t3, extra at t4.
    let (st, k) = (store.clone(), "a.txt");
    off(move || {
        let key = resourcesync_store::RelPath::parse(k).expect("key");
        let e = Expect {
            length: Some(3),
            ..Expect::default()
        };
        st.put(&key, e, &mut &b"one"[..]).expect("put");
    })
    .await;
    assert!(at.audit(&t1).await.in_sync);
    assert_eq!(
        diffs(&at.audit(&t2).await),
        [("different", "a.txt".into(), Some(2))]
    );
    assert_eq!(
        diffs(&at.audit(&t3).await),
        [("different", "a.txt".into(), Some(3))]
    );
    assert_eq!(
        diffs(&at.audit(&t4).await),
        [("extra", "a.txt".into(), None)]
    );

    // Restored: the bodies of each moment, byte for byte, and nothing of a resource that did
    // not exist then.
    let same = b"the same body".to_vec();
    for (t, a_body) in [
        (&t1, Some(&b"one"[..])),
        (&t2, Some(b"two, longer")),
        (&t3, Some(b"three")),
        (&t4, None),
    ] {
        let (r, written) = at.restore(t).await;
        let mut want = BTreeMap::from([
            ("b.txt".to_owned(), same.clone()),
            ("c.txt".to_owned(), same.clone()),
        ]);
        if let Some(b) = a_body {
            want.insert("a.txt".into(), b.to_vec());
        }
        assert_eq!(written, want, "{r:#?}");
        assert_eq!(
            (r.restored, r.failed_count),
            (want.len() as u64, 0),
            "{r:#?}"
        );
    }
    let (r, written) = at.restore(&t0).await;
    assert!(
        written.is_empty() && r.restored == 0 && r.absent == 3,
        "{r:#?}"
    );

    // A body missing from the version store is a failure of that resource, never a file.
    let (st, d) = (store.clone(), sha(b"two, longer"));
    off(move || {
        let f = st.features();
        assert!(
            f.versions
                .expect("versions")
                .remove_version(&d)
                .expect("remove")
        );
    })
    .await;
    let (r, written) = at.restore(&t2).await;
    assert_eq!((r.restored, r.failed_count), (2, 1), "{r:#?}");
    assert_eq!(r.failed[0].version.seq, 2, "{r:#?}");
    assert!(!written.contains_key("a.txt"), "{written:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_audited_and_restored_at_each_moment() {
    let dest = tmp();
    let store: Arc<dyn Store> = Arc::new(FsStore::open(dest.path()).expect("store"));
    let state: Arc<dyn Records> = Arc::new(
        SqliteState::open(&dest.path().join(".resourcesync/state.sqlite")).expect("state"),
    );
    each_moment(store, state).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_audited_and_restored_at_each_moment() {
    let (s3, state, _scratch) = bucket_and_pg("attime").await;
    let store: Arc<dyn Store> = s3.clone();
    each_moment(store, state).await;
    empty_bucket(s3).await;
}
