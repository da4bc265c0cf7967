//! Unit tests of the SQLite state: pages that seek, the lock, read-only opens, migrations.

use std::time::Duration;

use resourcesync_model::{Change, Hashes, W3cDateTime};

use super::schema::{MIGRATIONS, SCHEMA, VERSION};
use super::*;
use crate::state::{Leases, RecordWrites};

#[test]
fn rows_round_trip_and_page_in_uri_order() {
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("s").join("state.sqlite");
    let s = SqliteState::open(&p).expect("open");
    for u in ["http://h/b", "http://h/a", "http://h/c"] {
        s.put_resource(&ResourceRecord {
            uri: u.into(),
            source: "cap".into(),
            path: u.trim_start_matches("http://h/").into(),
            length: Some(3),
            hashes: Hashes::parse("md5:900150983CD24FB0D6963F7D28E17F72").0,
            lastmod: Some(W3cDateTime::parse("2013-01-02T13:00:00Z").expect("dt")),
            etag: Some("\"x\"".into()),
            ..ResourceRecord::default()
        })
        .expect("put");
    }
    let page = s.resources_page("cap", None, 2).expect("page");
    assert_eq!(page.len(), 2);
    assert_eq!(page[0].uri, "http://h/a");
    assert_eq!(
        page[0].hashes.to_string(),
        "md5:900150983cd24fb0d6963f7d28e17f72"
    );
    let rest = s
        .resources_page("cap", Some("http://h/b"), 10)
        .expect("page");
    assert_eq!(rest.len(), 1);
    assert!(
        s.has_path(&RelPath::parse("c").expect("path"))
            .expect("path")
    );
    s.set_gone("http://h/c", true).expect("gone");
    assert!(s.resource("http://h/c").expect("get").expect("row").gone);
    s.set_cursor(&SourceCursor {
        source: "cap".into(),
        cursor: Some(W3cDateTime::parse("2013-01-03T00:00:00.5Z").expect("dt")),
        synced_at: None,
        checked_at: None,
    })
    .expect("cursor");
    assert_eq!(
        s.cursor("cap")
            .expect("c")
            .expect("row")
            .cursor
            .map(|c| c.to_string()),
        Some("2013-01-03T00:00:00.5Z".into())
    );
    s.put_pending(&PendingChange {
        source: "cap".into(),
        uri: "http://h/z".into(),
        change: Some(Change::Updated),
        duplicates: vec![(1, "http://m/z".into())],
        error: "HTTP 500".into(),
        ..PendingChange::default()
    })
    .expect("pending");
    let p = s.pending_page("cap", None, 10).expect("pending");
    assert_eq!(p[0].duplicates, [(1, "http://m/z".to_owned())]);
    s.remove_pending("cap", "http://h/z").expect("rm");
    assert!(s.pending_page("cap", None, 10).expect("p").is_empty());
}

#[test]
fn pages_seek_in_the_index_and_miss_no_row() {
    let d = tempfile::tempdir().expect("tmp");
    let s = SqliteState::open(&d.path().join("state.sqlite")).expect("open");
    // "" sorts first: the first page must still include it.
    let uris = ["", "http://h/a", "http://h/b", "http://h/c", "http://h/d"];
    for u in uris {
        s.put_resource(&ResourceRecord {
            uri: u.into(),
            source: "cap".into(),
            path: format!("p{}", u.len()),
            ..ResourceRecord::default()
        })
        .expect("put");
        s.put_pending(&PendingChange {
            source: "cap".into(),
            uri: u.into(),
            ..PendingChange::default()
        })
        .expect("pending");
    }
    let (mut seen, mut pending) = (Vec::new(), Vec::new());
    let mut after: Option<String> = None;
    loop {
        let page = s.resources_page("cap", after.as_deref(), 2).expect("page");
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        seen.extend(page.into_iter().map(|r| r.uri));
    }
    let mut after: Option<String> = None;
    loop {
        let page = s.pending_page("cap", after.as_deref(), 2).expect("page");
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        pending.extend(page.into_iter().map(|r| r.uri));
    }
    assert_eq!(seen, uris);
    assert_eq!(pending, uris);
    // A page after a URI seeks to it (a range on the index), not a scan from the start.
    let c = s.lock();
    for sql in [resources_page_sql(false), pending_page_sql(false)] {
        let plan: Vec<String> = c
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("plan")
            .query_map(params!["cap", "http://h/b", 2], |r| r.get::<_, String>(3))
            .expect("rows")
            .collect::<rusqlite::Result<_>>()
            .expect("plan rows");
        assert!(plan.iter().any(|p| p.contains("uri>?")), "{sql}: {plan:?}");
    }
}

#[test]
fn a_second_writer_is_refused() {
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("state.sqlite");
    let _a = SqliteState::open(&p).expect("open");
    let b = SqliteState::open(&p);
    assert!(matches!(b, Err(Error::Locked { .. })), "{b:?}");
}

#[test]
fn read_only_opens_read_what_a_sync_wrote_and_write_nothing() {
    let d = tempfile::tempdir().expect("tmp");
    // A name SQLite URIs must escape.
    let p = d.path().join("st?ate #1%.sqlite");
    assert!(SqliteState::open_read_only(&p).expect("none").is_none());
    {
        let w = SqliteState::open(&p).expect("open");
        w.put_resource(&ResourceRecord {
            uri: "http://h/a".into(),
            path: "a".into(),
            length: Some(1),
            ..ResourceRecord::default()
        })
        .expect("put");
    }
    let r = SqliteState::open_read_only(&p)
        .expect("read-only")
        .expect("exists");
    assert_eq!(
        r.resource("http://h/a").expect("read").map(|x| x.path),
        Some("a".to_owned())
    );
    // Every write fails.
    assert!(r.remove_resource("http://h/a").is_err());
    drop(r);
    let w = SqliteState::open(&p).expect("a sync opens it once the reader has gone");
    // A reader is refused while a sync holds it.
    let r = SqliteState::open_read_only(&p);
    assert!(matches!(r, Err(Error::Locked { .. })), "{r:?}");
    drop(w);
}

#[test]
fn a_version_1_database_is_migrated_and_keeps_its_rows() {
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("state.sqlite");
    {
        // A database as the previous version wrote it.
        let c = Connection::open(&p).expect("open");
        c.execute_batch(SCHEMA).expect("v1");
        c.execute(
            "INSERT INTO resources(uri, source, path) VALUES('http://h/a', 'cap', 'a')",
            [],
        )
        .expect("row");
    }
    let s = SqliteState::open(&p).expect("migrated");
    assert_eq!(
        s.resource("http://h/a").expect("read").map(|r| r.path),
        Some("a".to_owned())
    );
    let v: String = s
        .lock()
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
            r.get(0)
        })
        .expect("version");
    assert_eq!(v, VERSION.to_string());
    // What version 2 added works.
    assert!(
        s.lease_source("cap", "w1", Duration::from_secs(60))
            .expect("lease")
            .is_some()
    );
    drop(s);
    // Opened again: nothing to migrate, the lease is still there.
    let s = SqliteState::open(&p).expect("again");
    assert!(
        s.lease_source("cap", "w2", Duration::from_secs(60))
            .expect("lease")
            .is_none()
    );
}

#[test]
fn a_version_2_database_is_migrated_and_remembers_documents() {
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("state.sqlite");
    {
        // A database as version 2 wrote it.
        let mut c = Connection::open(&p).expect("open");
        c.execute_batch(SCHEMA).expect("v1");
        let tx = c.transaction().expect("tx");
        tx.execute_batch(MIGRATIONS[0]).expect("v2");
        tx.execute("UPDATE meta SET value = '2' WHERE key = 'schema'", [])
            .expect("v2");
        tx.execute(
            "INSERT INTO sources(source, cursor) VALUES('cap', '2020-01-01T00:00:00Z')",
            [],
        )
        .expect("row");
        tx.commit().expect("commit");
    }
    let s = SqliteState::open(&p).expect("migrated");
    assert!(s.cursor("cap").expect("cursor").is_some());
    assert!(s.documents("http://h/").expect("documents").is_empty());
    let doc = crate::KnownDocument {
        role: "changelist".into(),
        url: "http://h/cl.xml".into(),
        etag: Some("\"e\"".into()),
        last_modified: None,
    };
    s.set_documents("http://h/", std::slice::from_ref(&doc))
        .expect("set");
    drop(s);
    let s = SqliteState::open(&p).expect("again");
    assert_eq!(s.documents("http://h/").expect("documents"), [doc]);
}

#[test]
fn a_database_of_a_newer_version_is_refused_untouched() {
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("state.sqlite");
    {
        let c = Connection::open(&p).expect("open");
        c.execute_batch(SCHEMA).expect("v1");
        c.execute("UPDATE meta SET value = '99' WHERE key = 'schema'", [])
            .expect("v99");
    }
    let r = SqliteState::open(&p);
    assert!(
        matches!(r, Err(Error::NewerSchema { found: 99, .. })),
        "{r:?}"
    );
    let c = Connection::open(&p).expect("open");
    let tables: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('leases', 'work')",
            [],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(tables, 0);
}

/// A state held for a moment (a push round) is opened by a second holder that waits for it
/// (the aggregator's republish of that round), and refused at once by `open` (a second sync).
#[test]
fn a_state_held_for_a_moment_is_opened_by_one_that_waits() {
    use std::time::{Duration, Instant};
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("state.sqlite");
    let held = SqliteState::open(&p).expect("open");
    assert!(matches!(SqliteState::open(&p), Err(Error::Locked { .. })));
    assert!(matches!(
        SqliteState::open_waiting(&p, Duration::from_millis(100)),
        Err(Error::Locked { .. })
    ));
    let (tx, rx) = std::sync::mpsc::channel();
    let releaser = std::thread::spawn(move || {
        // Released once the waiter has started waiting.
        rx.recv().expect("started");
        std::thread::sleep(Duration::from_millis(300));
        drop(held);
    });
    tx.send(()).expect("send");
    let t = Instant::now();
    let s = SqliteState::open_waiting(&p, Duration::from_secs(10)).expect("opened once free");
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    assert!(s.cursor("cap").expect("read").is_none());
    releaser.join().expect("releaser");
}

#[test]
fn a_row_updated_in_place_or_moved_leaves_every_lookup_true() {
    let d = tempfile::tempdir().expect("tmp");
    let s = SqliteState::open(&d.path().join("state.sqlite")).expect("open");
    let path = |p: &str| RelPath::parse(p).expect("path");
    // A placeholder, then its row: the same Source and path, updated in place.
    let mut r = ResourceRecord {
        uri: "http://h/a".into(),
        source: "cap".into(),
        path: "a".into(),
        gone: true,
        ..ResourceRecord::default()
    };
    s.put_resource(&r).expect("placeholder");
    r.gone = false;
    r.length = Some(3);
    r.hashes = Hashes::parse("md5:900150983cd24fb0d6963f7d28e17f72").0;
    s.put_resource(&r).expect("row");
    let got = s.resource("http://h/a").expect("get").expect("row");
    assert!(!got.gone && got.length == Some(3), "{got:?}");
    assert_eq!(
        got.hashes.to_string(),
        "md5:900150983cd24fb0d6963f7d28e17f72"
    );
    assert_eq!(s.resources_page("cap", None, 10).expect("page").len(), 1);
    assert!(s.has_path(&path("a")).expect("path"));
    // The same URI under another Source and path: moved, every index with it.
    r.source = "cap2".into();
    r.path = "b".into();
    s.put_resource(&r).expect("moved");
    let got = s.resource("http://h/a").expect("get").expect("row");
    assert_eq!((got.source.as_str(), got.path.as_str()), ("cap2", "b"));
    assert!(s.resources_page("cap", None, 10).expect("page").is_empty());
    assert_eq!(s.resources_page("cap2", None, 10).expect("page").len(), 1);
    assert!(!s.has_path(&path("a")).expect("path"));
    assert!(s.has_path(&path("b")).expect("path"));
}
