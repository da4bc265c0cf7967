//! `PgInventory` against a real PostgreSQL server, started by `scripts/postgres.sh` (which
//! `scripts/test.sh` runs, exporting `RESOURCESYNC_TEST_POSTGRES`): the inventory conformance
//! suite; rows that are not resources; a scan and publish whose Resource List has the rows'
//! URIs and the digests of their columns; changes through `updated_at` and the `deleted` flag
//! reaching the Change List through the feed; the feed's safety window; redirects for `url`
//! rows; a table mapped by a view. Each test works in a schema of its own (random name).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use postgres::{Client, NoTls};
use resourcesync_model::{Change, DocumentReader, Entry, HashAlg, ReadOptions};
use resourcesync_source::inventory::conformance::{self, Harness};
use resourcesync_source::inventory::{ChangeFeed, Inventory, PgInventory, Served};
use resourcesync_source::layout::Layout;
use resourcesync_source::publish::sink::MemSink;
use resourcesync_source::publish::{PublishOptions, publish_to};
use resourcesync_source::scan::{ScanOptions, scan};
use resourcesync_source::state::State;
use resourcesync_source::{Source, SourceConfig};

/// The variable holding the URL of the test server.
const URL_VAR: &str = "RESOURCESYNC_TEST_POSTGRES";
const BASE: &str = "http://127.0.0.1:1/";

/// The URL of the test server. A run without one fails, loudly: a test of PostgreSQL that
/// passes without a server proves nothing.
fn url() -> String {
    match std::env::var(URL_VAR) {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "{URL_VAR} is not set: the PostgreSQL tests need a server. Run \
             `export {URL_VAR}=$(scripts/postgres.sh)` first (it starts one on 127.0.0.1), or \
             run every test with scripts/test.sh"
        ),
    }
}

/// A schema of this test's own, dropped with it, and a client to write its tables.
struct Db {
    url: String,
    schema: String,
    client: Client,
}

impl Db {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let schema = format!(
            "inv_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let url = url();
        let mut client = Client::connect(&url, NoTls).unwrap_or_else(|e| panic!("{url}: {e}"));
        client
            .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
            .expect("schema");
        Db {
            url,
            schema,
            client,
        }
    }

    /// Creates `table` in the conventional shape (every optional column).
    fn table(&mut self, table: &str) {
        self.client
            .batch_execute(&format!(
                "CREATE TABLE \"{}\".\"{table}\" (
                   path text PRIMARY KEY, body bytea, url text, length bigint,
                   updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                   md5 text, sha256 text, deleted boolean NOT NULL DEFAULT false)",
                self.schema
            ))
            .expect("create table");
    }

    /// The inventory over `table` of this schema (no safety window unless given).
    fn inventory(&self, table: &str, window: Option<Duration>) -> PgInventory {
        let u = format!("{}?table={}.{table}", self.url, self.schema);
        let inv = PgInventory::connect(&u).unwrap_or_else(|e| panic!("{e}"));
        match window {
            Some(w) => inv.with_feed_window(w),
            None => inv.with_feed_window(Duration::ZERO),
        }
    }

    /// Creates or replaces a row with a body (its md5 computed by the server), now.
    fn put(&mut self, table: &str, path: &str, body: &[u8]) {
        self.client
            .execute(
                &format!(
                    "INSERT INTO \"{}\".\"{table}\" (path, body, md5) VALUES ($1, $2::bytea, md5($2::bytea))
                     ON CONFLICT (path) DO UPDATE SET body = excluded.body, md5 = excluded.md5,
                       url = NULL, deleted = false, updated_at = clock_timestamp()",
                    self.schema
                ),
                &[&path, &body],
            )
            .expect("put");
    }

    fn exec(&mut self, sql: &str) {
        let sql = sql.replace("S.", &format!("\"{}\".", self.schema));
        self.client
            .batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.client.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.schema
        ));
    }
}

/// The conformance harness: each inventory a new table; a removal sets the `deleted` flag
/// (what the change feed sees).
struct Pg {
    db: Db,
    table: String,
    n: u32,
}

impl Harness for Pg {
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
        self.n += 1;
        self.table = format!("r{}", self.n);
        let t = self.table.clone();
        self.db.table(&t);
        for (p, b) in files {
            self.db.put(&t, p, b);
        }
        if let Some(b) = broken {
            // Neither body nor url: there, and unreadable.
            self.db.exec(&format!(
                "INSERT INTO S.{t} (path) VALUES ('{}')",
                b.replace('\'', "''")
            ));
        }
        Box::new(self.db.inventory(&t, None))
    }

    fn put(&mut self, rel: &str, bytes: &[u8]) {
        let t = self.table.clone();
        self.db.put(&t, rel, bytes);
    }

    fn remove(&mut self, rel: &str) {
        let t = self.table.clone();
        self.db.exec(&format!(
            "UPDATE S.{t} SET deleted = true, updated_at = clock_timestamp() WHERE path = '{}'",
            rel.replace('\'', "''")
        ));
    }
}

#[test]
fn the_postgres_inventory_passes_the_conformance_suite() {
    conformance::run(&mut Pg {
        db: Db::new(),
        table: String::new(),
        n: 0,
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

fn collect(inv: &dyn Inventory) -> (Vec<String>, Vec<(PathBuf, String)>) {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for e in inv.list().expect("list") {
        match e {
            Ok(l) => ok.push(l.rel.to_string_lossy().into_owned()),
            Err(s) => bad.push((s.path, s.reason)),
        }
    }
    (ok, bad)
}

/// Rows that are not resources are reported, each naming the row and the rule, and the
/// listing goes on; none can be opened or served.
#[test]
fn rows_that_are_not_resources_are_skipped_with_a_reason() {
    let mut db = Db::new();
    db.table("t");
    for p in [
        "a.txt", "/abs", "a/../b", "a//b", "./c", "d/", "e\u{1}f", "z.txt",
    ] {
        db.put("t", p, b"x");
    }
    db.exec(
        "INSERT INTO S.t (path) VALUES ('nothing');
         INSERT INTO S.t (path, url) VALUES ('nolength', 'https://example.org/n');
         INSERT INTO S.t (path, url, length) VALUES ('js', 'javascript:alert(1)', 1);
         INSERT INTO S.t (path, body, md5) VALUES ('badmd5', 'x', 'not hex');",
    );
    let inv = db.inventory("t", None);
    let (ok, bad) = collect(&inv);
    assert_eq!(ok, ["a.txt", "z.txt"]);
    let reason = |p: &str| {
        bad.iter()
            .find(|(q, _)| q == Path::new(p))
            .map(|(_, r)| r.as_str())
            .unwrap_or_else(|| panic!("{p} not reported: {bad:?}"))
    };
    for (p, rule) in [
        ("/abs", "absolute"),
        ("a/../b", ".. segment"),
        ("a//b", "empty segment"),
        ("./c", ". segment"),
        ("d/", "empty segment"),
        ("e\u{1}f", "control byte"),
        ("nothing", "neither body nor url"),
        ("nolength", "length"),
        ("js", "http(s)"),
        ("badmd5", "md5"),
    ] {
        let r = reason(p);
        assert!(
            r.contains(rule) && r.contains(&format!("{p:?}")),
            "{p}: {r}"
        );
    }
    assert_eq!(bad.len(), 10, "{bad:?}");
    for p in ["/abs", "a/../b", "nothing", "js"] {
        assert!(inv.open(Path::new(p)).is_err(), "{p} opened");
        assert!(
            !matches!(inv.serve(Path::new(p)), Ok(Some(_))),
            "{p} served"
        );
    }
}

fn parse(bytes: &[u8]) -> Vec<Entry> {
    let mut r = DocumentReader::new(bytes, ReadOptions::named("doc")).expect("document");
    let mut v = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        v.push(e);
    }
    v
}

/// (loc, md5, change) of each entry of the document at `key`.
fn entries(sink: &MemSink, key: &str) -> Vec<(String, Option<String>, Option<Change>)> {
    let bytes = sink
        .get(key)
        .unwrap_or_else(|| panic!("no {key}: {:?}", sink.keys()));
    parse(&bytes)
        .into_iter()
        .map(|e| {
            let md = e.md.clone().unwrap_or_default();
            (
                e.loc,
                md.hash.and_then(|h| h.value_of(&HashAlg::Md5)),
                md.change,
            )
        })
        .collect()
}

/// The key of the one Resource List published.
fn resource_list(sink: &MemSink) -> String {
    let keys: Vec<String> = sink
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("resourcesync/resourcelists/") && k.ends_with("resourcelist.xml"))
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].clone()
}

/// A scan and publish over a table: the Resource List has the rows' URIs (base + path) and
/// the md5 of the column, published as it is (here one that is not the body's: not
/// recomputed), the body's when the column is NULL; a url row with its digest is published.
/// Then changes through `updated_at` and the `deleted` flag reach the Change List through the
/// feed (no listing).
#[test]
fn a_scan_of_a_table_publishes_its_rows_and_its_changes_through_the_feed() {
    let mut db = Db::new();
    db.table("t");
    db.put("t", "a.txt", b"alpha");
    db.put("t", "b/c d.txt", b"beta");
    db.put("t", "gone.txt", b"soon gone");
    db.exec(
        "UPDATE S.t SET md5 = '00112233445566778899aabbccddeeff' WHERE path = 'b/c d.txt';
         INSERT INTO S.t (path, body) VALUES ('no-md5.txt', 'computed');
         INSERT INTO S.t (path, url, length, md5)
           VALUES ('far.bin', 'https://example.org/far.bin', 7, 'ffeeddccbbaa99887766554433221100');",
    );
    let inv = db.inventory("t", None);
    let sd = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert!(r.baseline && r.skipped.is_empty(), "{r:?}");
    assert_eq!(r.resources, 5);
    let layout = Layout::new(sd.path().join("out"), BASE);
    let sink = MemSink::new();
    publish_to(&sink, &layout, &state, &PublishOptions::default()).expect("publish");
    let md5 = |s: &str| Some(s.to_owned());
    assert_eq!(
        entries(&sink, &resource_list(&sink)),
        [
            (
                format!("{BASE}a.txt"),
                md5("2c1743a391305fbf367df8e4f069f9f9"),
                None
            ),
            (
                format!("{BASE}b/c%20d.txt"),
                md5("00112233445566778899aabbccddeeff"),
                None
            ),
            (
                format!("{BASE}far.bin"),
                md5("ffeeddccbbaa99887766554433221100"),
                None
            ),
            (
                format!("{BASE}gone.txt"),
                md5("67550482e69ee112f54336cfbea52c94"),
                None
            ),
            (
                format!("{BASE}no-md5.txt"),
                md5("5a317d3dd3f7a2f675975a6d0c11c629"),
                None
            ),
        ]
    );

    db.put("t", "a.txt", b"alpha, changed");
    db.put("t", "new.txt", b"new");
    db.exec(
        "UPDATE S.t SET deleted = true, updated_at = clock_timestamp() WHERE path = 'gone.txt'",
    );
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert!(r.from_feed, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.resources),
        (1, 1, 1, 5),
        "{r:?}"
    );
    publish_to(&sink, &layout, &state, &PublishOptions::default()).expect("publish");
    let changes: Vec<(String, Option<Change>)> = sink
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("resourcesync/changelists/"))
        .flat_map(|k| entries(&sink, &k))
        .map(|(loc, _, c)| (loc, c))
        .collect();
    assert_eq!(
        changes,
        [
            (format!("{BASE}a.txt"), Some(Change::Updated)),
            (format!("{BASE}new.txt"), Some(Change::Created)),
            (format!("{BASE}gone.txt"), Some(Change::Deleted)),
        ]
    );
}

/// The feed's safety window: a transaction that started first but commits after a later one
/// brings an `updated_at` older than the cursor already recorded. Without a window its change
/// is lost; with one, the next feed gives it.
#[test]
fn the_feed_window_catches_a_transaction_that_commits_late() {
    for (window, caught) in [(Duration::ZERO, false), (Duration::from_secs(5), true)] {
        let mut db = Db::new();
        db.table("t");
        db.put("t", "early.txt", b"1");
        db.put("t", "late.txt", b"1");
        let inv = db.inventory("t", Some(window));
        let sd = tempfile::tempdir().expect("tempdir");
        let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
        scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("baseline");
        // A writer whose transaction starts now (its now() is its start), commits later.
        let mut slow = Client::connect(&db.url, NoTls).expect("connect");
        let mut tx = slow.transaction().expect("begin");
        tx.execute(
            &format!(
                "UPDATE \"{}\".t SET body = '2', md5 = md5('2'::bytea), updated_at = now() \
                 WHERE path = 'early.txt'",
                db.schema
            ),
            &[],
        )
        .expect("update");
        db.put("t", "late.txt", b"2");
        let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
        assert!(r.from_feed && r.updated == 1, "{r:?}");
        tx.commit().expect("commit");
        let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
        assert!(r.from_feed, "{r:?}");
        assert_eq!(r.updated == 1, caught, "window {window:?}: {r:?}");
        // Whatever the window, a full scan finds it.
        let full = ScanOptions {
            full: true,
            ..ScanOptions::default()
        };
        let r = scan(&inv, &mut state, BASE, &full).expect("scan");
        assert_eq!(r.updated == 1, !caught, "{r:?}");
    }
}

/// A row removed from the table (no flag) is not seen by the feed unless it was the newest
/// (then the cursor is ahead of the table: refused, everything listed); a full listing sees
/// every removal.
#[test]
fn removed_rows_are_found_by_a_full_listing() {
    let mut db = Db::new();
    db.table("t");
    for p in ["a", "b", "c"] {
        db.put("t", p, p.as_bytes());
    }
    let inv = db.inventory("t", None);
    let sd = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("baseline");
    db.exec("DELETE FROM S.t WHERE path = 'a'");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert!(r.from_feed && r.deleted == 0, "{r:?}");
    db.exec("DELETE FROM S.t WHERE path = 'c'");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert!(!r.from_feed, "the cursor is ahead of the table: {r:?}");
    assert_eq!((r.deleted, r.resources), (2, 1), "{r:?}");
}

/// `serve`: a url row redirects to its URL; a row with a body gives its bytes, read in parts
/// when large; a deleted, missing or unsafe one is not served.
#[test]
fn url_rows_are_served_as_redirects() {
    let mut db = Db::new();
    db.table("t");
    let big: Vec<u8> = (0..2_500_000u32).map(|i| (i % 253) as u8).collect();
    db.put("t", "big.bin", &big);
    db.exec(
        "INSERT INTO S.t (path, url, length) VALUES ('far.txt', 'https://example.org/far?a=1', 3);
         INSERT INTO S.t (path, body, url) VALUES ('both.txt', 'here', 'https://example.org/x');
         INSERT INTO S.t (path, body, deleted) VALUES ('dead.txt', 'x', true);",
    );
    let inv = db.inventory("t", None);
    match inv.serve(Path::new("far.txt")).expect("serve") {
        Some(Served::Redirect(u)) => assert_eq!(u, "https://example.org/far?a=1"),
        other => panic!("far.txt: {other:?}"),
    }
    match inv.serve(Path::new("big.bin")).expect("serve") {
        Some(Served::Body { len, mut body, .. }) => {
            let mut got = Vec::new();
            body.read_to_end(&mut got).expect("read");
            assert_eq!(len, big.len() as u64);
            assert!(got == big, "big.bin: other bytes");
        }
        other => panic!("big.bin: {other:?}"),
    }
    match inv.serve(Path::new("both.txt")).expect("serve") {
        Some(Served::Body { len: 4, .. }) => {}
        other => panic!("both.txt: {other:?}"),
    }
    for p in ["dead.txt", "missing.txt", "../t", "/far.txt"] {
        assert!(inv.serve(Path::new(p)).expect("serve").is_none(), "{p}");
    }
    assert!(inv.open(Path::new("far.txt")).is_err(), "a url row opened");
    let mut fed = Vec::new();
    let stable = inv
        .read_stable(Path::new("big.bin"), &mut Vec::new(), &mut |d| {
            fed.extend_from_slice(d)
        })
        .expect("read");
    assert_eq!(stable.map(|s| s.0), Some(big.len() as u64));
    assert!(fed == big);
}

/// A schema of one's own mapped by a view onto the conventional columns (no md5, length
/// nor deleted columns); the table's optional columns are found at connect; a table without
/// the required ones is refused at connect.
#[test]
fn a_view_maps_another_schema() {
    let mut db = Db::new();
    db.exec(
        "CREATE TABLE S.records (id serial, name text, content bytea, modified timestamptz);
         INSERT INTO S.records (name, content, modified) VALUES
           ('x/1.xml', '<a/>', '2020-01-02 03:04:05.123456+00'), ('x/0.xml', '<b/>', now());
         CREATE VIEW S.resources AS
           SELECT name AS path, content AS body, modified AS updated_at FROM S.records;
         CREATE TABLE S.wrong (path text, body bytea);",
    );
    let inv = db.inventory("resources", None);
    let listed: Vec<_> = inv.list().expect("list").map(|e| e.expect("ok")).collect();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].rel, Path::new("x/0.xml"));
    assert!(listed[0].hashes.is_empty());
    assert_eq!(
        listed[1].mtime_ns, 1_577_934_245_123_456_000,
        "updated_at to the microsecond"
    );
    let u = format!("{}?table={}.wrong", db.url, db.schema);
    let e = PgInventory::connect(&u).expect_err("no updated_at");
    assert!(e.to_string().contains("updated_at"), "{e}");
    let u = format!("{}?table={}.missing", db.url, db.schema);
    assert!(PgInventory::connect(&u).is_err());
    // The feed: a cursor of another inventory is refused.
    assert!(inv.changes_since("17").is_err());
}

#[test]
fn rows_no_destination_could_fetch_are_left_out_with_a_warning() {
    // Five rows whose URLs `serve` answers with its own documents, 404 or 400.
    let reserved = [
        "resourcesync/capabilitylist.xml",
        ".well-known/resourcesync",
        "healthz",
        ".resourcesync/state.sqlite",
        "a\\..\\..\\b",
    ];
    let mut db = Db::new();
    db.table("t");
    db.put("t", "a.txt", b"alpha");
    for p in reserved {
        db.put("t", p, b"mine");
    }
    let inv = db.inventory("t", None);
    let sd = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert_eq!(r.resources, 1, "{r:?}");
    let named = |r: &resourcesync_source::scan::ScanReport, p: &str| {
        r.skipped
            .iter()
            .find(|s| s.path == Path::new(p))
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| panic!("{p} not reported: {:?}", r.skipped))
    };
    for p in reserved {
        let why = named(&r, p);
        assert!(
            why.contains("not published") && why.len() > 40,
            "{p}: {why}"
        );
    }
    assert_eq!(r.skipped.len(), reserved.len(), "{:?}", r.skipped);
    let layout = Layout::new(sd.path().join("out"), BASE);
    let sink = MemSink::new();
    publish_to(&sink, &layout, &state, &PublishOptions::default()).expect("publish");
    let listed: Vec<String> = entries(&sink, &resource_list(&sink))
        .into_iter()
        .map(|(loc, _, _)| loc)
        .collect();
    assert_eq!(listed, [format!("{BASE}a.txt")]);
    // Through the change feed too.
    db.put("t", "robots.txt", b"User-agent: *");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert!(named(&r, "robots.txt").contains("robots.txt"), "{r:?}");
    assert_eq!(r.resources, 1, "{r:?}");
}

/// Every document file under `out` whose name starts with `prefix`, newest directory last.
fn docs_named(out: &Path, prefix: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, prefix: &str, v: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else { return };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, prefix, v);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".xml"))
            {
                v.push(p);
            }
        }
    }
    let mut v = Vec::new();
    walk(&out.join("resourcesync"), prefix, &mut v);
    v.sort();
    v
}

/// The locs of the newest Resource List under `out`, and the locs the Change Lists say are
/// deleted.
fn published(out: &Path) -> (Vec<String>, Vec<String>) {
    let rl = docs_named(out, "resourcelist")
        .into_iter()
        .rfind(|p| p.file_name().is_some_and(|n| n == "resourcelist.xml"))
        .expect("a Resource List");
    let listed = parse(&std::fs::read(&rl).expect("read"))
        .into_iter()
        .map(|e| e.loc)
        .collect();
    let mut deleted = Vec::new();
    for cl in docs_named(out, "changelist") {
        for e in parse(&std::fs::read(&cl).expect("read")) {
            if e.md.as_ref().and_then(|m| m.change.as_ref()) == Some(&Change::Deleted) {
                deleted.push(e.loc);
            }
        }
    }
    (listed, deleted)
}

/// A row deleted from the table without a trace (no flag, not the newest row: the feed's
/// cursor stays valid) leaves the Resource List and is published as deleted: by the next
/// `publish` (a Source's first scan lists everything), by a restarted `serve` (the same), and
/// by a running one once `full_every` has passed since its last listing (Z39.99-2017 §12.1).
#[test]
fn a_row_deleted_from_the_table_is_published_as_deleted() {
    let mut db = Db::new();
    db.table("t");
    for p in ["a", "b", "c", "d"] {
        db.put("t", p, p.as_bytes());
    }
    let work = tempfile::tempdir().expect("work");
    let out = work.path().join("out");
    let inv: Arc<dyn Inventory> = Arc::new(db.inventory("t", None));
    let open = |full_every: Duration| {
        let mut cfg = SourceConfig::new(work.path(), BASE);
        cfg.out = Some(out.clone());
        cfg.scan.full_every = full_every;
        Source::open_with(cfg, inv.clone()).expect("source")
    };
    let loc = |p: &str| format!("{BASE}{p}");
    // `publish`: one Source, one scan.
    let mut s = open(resourcesync_source::scan::DEFAULT_FULL_EVERY);
    s.scan().expect("baseline");
    s.publish().expect("publish");
    drop(s);
    db.exec("DELETE FROM S.t WHERE path = 'a'");
    let mut s = open(resourcesync_source::scan::DEFAULT_FULL_EVERY);
    let r = s.scan().expect("scan");
    assert!(!r.from_feed && r.deleted == 1, "{r:?}");
    s.publish().expect("publish");
    let (listed, deleted) = published(&out);
    assert_eq!(listed, [loc("b"), loc("c"), loc("d")]);
    assert_eq!(deleted, [loc("a")]);

    // `serve`'s rescans: the feed until `full_every` has passed, then a listing.
    db.exec("DELETE FROM S.t WHERE path = 'b'");
    let r = s.scan().expect("rescan");
    assert!(r.from_feed && r.deleted == 0, "within full_every: {r:?}");
    let mut s = open(Duration::ZERO);
    s.scan().expect("restart");
    s.publish().expect("publish");
    let (listed, deleted) = published(&out);
    assert_eq!(listed, [loc("c"), loc("d")]);
    assert_eq!(deleted, [loc("a"), loc("b")]);
    db.exec("DELETE FROM S.t WHERE path = 'c'");
    let r = s.scan().expect("rescan");
    assert!(!r.from_feed && r.deleted == 1, "full_every passed: {r:?}");
    s.publish().expect("publish");
    let (listed, deleted) = published(&out);
    assert_eq!(listed, [loc("d")]);
    assert_eq!(deleted, [loc("a"), loc("b"), loc("c")]);
}
