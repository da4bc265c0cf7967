use super::*;
use resourcesync_store::{Expect, FsStore, RelPath, SqliteState};

fn pending(store: &FsStore, uri: &str, path: &str, body: &[u8]) -> Pending {
    let key = RelPath::parse(path).expect("rel");
    let mut up = Store::begin(
        store,
        &key,
        Expect {
            length: Some(body.len() as u64),
            max_bytes: 1 << 20,
            ..Expect::default()
        },
    )
    .expect("begin");
    up.write(body).expect("write");
    Pending {
        body: up.finish().expect("finish"),
        row: ResourceRecord {
            uri: uri.into(),
            source: "cap".into(),
            path: path.into(),
            ..ResourceRecord::default()
        },
        origin: Origin::Download,
        fresh: true,
    }
}

#[test]
fn a_batch_is_placed_then_recorded_and_a_bad_copy_fails_alone() {
    let d = tempfile::tempdir().expect("tmp");
    let store = FsStore::open(d.path()).expect("store");
    let state = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
    std::fs::create_dir(d.path().join("taken")).expect("dir");
    let batch = vec![
        pending(&store, "http://h/a", "x/a.txt", b"aaa"),
        // A directory is where this file goes: it fails, the others do not.
        pending(&store, "http://h/t", "taken", b"t"),
        pending(&store, "http://h/b", "x/y/b.txt", b"bb"),
    ];
    let done = commit_batch(&store, &state, batch);
    let put = |length| {
        Ok(Put {
            length,
            replaced: false,
        })
    };
    assert_eq!(done[0], put(3));
    assert!(
        done[1]
            .as_ref()
            .is_err_and(|e| e.message.contains("directory")),
        "{done:?}"
    );
    assert_eq!(done[2], put(2));
    assert_eq!(std::fs::read(d.path().join("x/y/b.txt")).expect("b"), b"bb");
    let row = state.resource("http://h/a").expect("get").expect("row");
    assert_eq!(row.length, Some(3));
    assert!(
        !row.hashes.is_empty(),
        "the digest computed while writing is kept"
    );
    assert!(state.resource("http://h/t").expect("get").is_none());
    assert_eq!(
        store.clean_tmp().expect("clean"),
        0,
        "no temporary file left"
    );
}

/// The gate of `crate::commit::owner`: a copy at a path another URI's row has, or one an earlier
/// copy of its batch (or of the batch before, not yet recorded) takes, fails alone, with
/// nothing written at the path, no row, and its body discarded.
#[test]
fn a_copy_at_a_path_another_uri_has_is_refused_in_its_batch() {
    let d = tempfile::tempdir().expect("tmp");
    let store = FsStore::open(d.path()).expect("store");
    let state = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
    let first = commit_batch(
        &store,
        &state,
        vec![pending(&store, "http://v/doc.txt", "v/doc.txt", b"victim")],
    );
    assert!(first[0].is_ok(), "{first:?}");
    let batch = vec![
        pending(&store, "http://src/v/doc.txt", "v/doc.txt", b"evil"),
        pending(&store, "http://h/one", "dup", b"1"),
        pending(&store, "http://h/two", "dup", b"2"),
        pending(&store, "http://h/a", "a", b"a"),
    ];
    let done = commit_batch(&store, &state, batch);
    let refused = |i: usize, by: &str| {
        assert!(
            done[i]
                .as_ref()
                .is_err_and(|e| e.message.contains(&format!("taken by {by}"))),
            "{i}: {done:?}"
        );
    };
    refused(0, "http://v/doc.txt");
    assert!(done[1].is_ok(), "{done:?}");
    refused(2, "http://h/one");
    assert!(done[3].is_ok(), "{done:?}");
    assert_eq!(
        std::fs::read(d.path().join("v/doc.txt")).expect("v"),
        b"victim"
    );
    assert_eq!(std::fs::read(d.path().join("dup")).expect("dup"), b"1");
    for uri in ["http://src/v/doc.txt", "http://h/two"] {
        assert!(state.resource(uri).expect("get").is_none(), "{uri}");
    }
    assert_eq!(store.clean_tmp().expect("clean"), 0, "no body left behind");
    // The batch before, placed and not yet recorded, holds its paths too.
    let unrecorded = [ResourceRecord {
        uri: "http://h/before".into(),
        path: "b".into(),
        ..ResourceRecord::default()
    }];
    let later = vec![
        pending(&store, "http://h/after", "b", b"x"),
        pending(&store, "http://h/before", "b", b"y"),
    ];
    let gate = crate::commit::owner::gate(&state, &later, &unrecorded);
    assert!(
        gate.refused[0]
            .as_ref()
            .is_some_and(|e| e.message.contains("taken by http://h/before")),
        "{gate:?}"
    );
    assert!(gate.refused[1].is_none(), "{gate:?}");
}

/// A Source that moved to another address (its URIs changed, its paths did not) and is
/// synced into the same destination takes its paths over from the rows it left there under
/// its old key: they are removed with the new rows, one row per path again.
#[test]
fn a_path_another_sources_row_has_is_taken_over() {
    let d = tempfile::tempdir().expect("tmp");
    let store = FsStore::open(d.path()).expect("store");
    let state = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
    let mut old = pending(&store, "http://127.0.0.1:1/a.txt", "a.txt", b"alpha");
    old.row.source = "http://127.0.0.1:1/capabilitylist.xml".into();
    let first = commit_batch(&store, &state, vec![old]);
    assert!(first[0].is_ok(), "{first:?}");
    let moved = pending(
        &store,
        "http://127.0.0.1:2/a.txt",
        "a.txt",
        b"alpha, edited",
    );
    let done = commit_batch(&store, &state, vec![moved]);
    assert!(done[0].is_ok(), "{done:?}");
    assert_eq!(
        std::fs::read(d.path().join("a.txt")).expect("a"),
        b"alpha, edited"
    );
    assert!(
        state
            .resource("http://127.0.0.1:1/a.txt")
            .expect("get")
            .is_none()
    );
    assert_eq!(
        state
            .path_owner(&RelPath::parse("a.txt").expect("path"))
            .expect("owner")
            .as_deref(),
        Some("http://127.0.0.1:2/a.txt")
    );
}

#[test]
fn a_producer_gets_every_outcome_by_chunk_and_its_end_releases_the_batch() {
    let d = tempfile::tempdir().expect("tmp");
    let store = std::sync::Arc::new(FsStore::open(d.path()).expect("store"));
    let state: std::sync::Arc<dyn Records> =
        std::sync::Arc::new(SqliteState::open(&d.path().join("s.sqlite")).expect("state"));
    let c = Committer::start(store.clone(), state.clone(), None, false).expect("start");
    let (tx, rx) = std::sync::mpsc::channel();
    let mut p = c.producer(tx).expect("producer");
    // Fewer copies than a batch waits for, all announcing more: nothing is committed
    // until the producer ends.
    for tag in 0..3u64 {
        let items = (0..5)
            .map(|i| {
                let n = tag * 10 + i;
                pending(&store, &format!("http://h/{n}"), &format!("d/{n}"), b"xy")
            })
            .collect();
        p.send(items, tag, true).expect("sent");
    }
    p.end().expect("end");
    drop(p);
    let mut got: Vec<(u64, Vec<Done>)> = (0..3).map(|_| rx.recv().expect("outcome")).collect();
    got.sort_by_key(|(t, _)| *t);
    for (i, (tag, done)) in got.into_iter().enumerate() {
        assert_eq!(tag, i as u64);
        assert_eq!(done.len(), 5);
        assert!(done.iter().all(|d| d.as_ref().is_ok_and(|p| p.length == 2)));
    }
    assert_eq!(
        state.resources_page("cap", None, 100).expect("rows").len(),
        15
    );
    // A producer dropped while announcing more does not hold the committer up.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut p = c.producer(tx).expect("producer");
    p.send(
        vec![pending(&store, "http://h/late", "late", b"z")],
        9,
        true,
    )
    .expect("sent");
    drop(p);
    assert_eq!(rx.recv().expect("outcome").0, 9);
    c.close();
    assert_eq!(store.clean_tmp().expect("clean"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committer_answers_every_copy_and_stops_when_closed() {
    let d = tempfile::tempdir().expect("tmp");
    let store = std::sync::Arc::new(FsStore::open(d.path()).expect("store"));
    let state: std::sync::Arc<dyn Records> =
        std::sync::Arc::new(SqliteState::open(&d.path().join("s.sqlite")).expect("state"));
    let c = Committer::start(store.clone(), state.clone(), None, false).expect("start");
    let mut receipts = Vec::new();
    for i in 0..50 {
        let p = pending(&store, &format!("http://h/{i}"), &format!("d/{i}"), b"x");
        receipts.push(c.enqueue(p).await.expect("queued"));
    }
    for r in receipts {
        assert_eq!(r.done().await.map(|p| p.length), Ok(1));
    }
    c.close();
    let p = pending(&store, "http://h/late", "late", b"x");
    assert!(c.enqueue(p).await.is_err(), "closed");
    assert_eq!(
        state.resources_page("cap", None, 100).expect("rows").len(),
        50
    );
}
