//! The OAI-PMH inventory against a second data provider built on another library: Perl's
//! HTTP::OAI (started by `scripts/oai-http-oai.sh`, its root URL in `RESOURCESYNC_TEST_OAI2`),
//! the same behaviours as `oai_inventory.rs` runs against the `oaipmh` library's provider.
//!
//! Where this provider differs: day granularity (`YYYY-MM-DD` datestamps, `from` in days), a
//! deleted record that still carries its `<metadata>` (HTTP::OAI writes it whatever the
//! header's `status`; OAI-PMH 2.0 §2.5.1: the record is a deletion all the same), no
//! `resumptionToken` at all on the last page of a list, tokens with `cursor` and
//! `completeListSize` attributes and `/` and `:` in their text, pretty-printed responses.

use std::io::Read;
use std::path::{Path, PathBuf};

use resourcesync_model::{Change, DocumentReader, Entry, ReadOptions};
use resourcesync_source::inventory::oai::{Granularity, OaiInventory, OaiOptions, record_path};
use resourcesync_source::inventory::{Changed, Inventory};
use resourcesync_source::{Source, SourceConfig};

use crate::oai_inventory::listed;

const VAR: &str = "RESOURCESYNC_TEST_OAI2";
const BASE: &str = "http://127.0.0.1:8080/data/";

fn provider() -> String {
    std::env::var(VAR).unwrap_or_else(|_| {
        panic!(
            "{VAR} is not set: these tests need the second OAI-PMH provider (Perl HTTP::OAI); \
             run them through scripts/test.sh, or export {VAR}=$(scripts/oai-http-oai.sh)"
        )
    })
}

fn admin(root: &str, name: &str, json: &str) {
    resourcesync_http::install_tls_provider();
    let r = reqwest::blocking::Client::new()
        .post(format!("{root}{name}/admin"))
        .body(json.to_owned())
        .send()
        .expect("provider admin");
    assert!(r.status().is_success(), "admin: {:?}", r.text());
}

/// This test's own repository on the provider: `count` records, every 10th deleted (every
/// other one of those with its metadata), 25 a page, day granularity. Its OAI-PMH URL.
fn repo(name: &str, count: usize) -> String {
    let root = provider();
    let name = format!("{name}-{}", std::process::id());
    admin(
        &root,
        &name,
        &format!(
            "{{\"reset\": {{\"batch_size\": 25, \"granularity\": \"YYYY-MM-DD\"}}, \
             \"generate\": {{\"count\": {count}, \"deleted_every\": 10, \"prefix\": \
             \"oai:{name}:\"}}}}"
        ),
    );
    format!("{root}{name}/oai")
}

fn change(oai_url: &str, json: &str) {
    let (root, name) = oai_url
        .strip_suffix("/oai")
        .and_then(|u| u.rsplit_once('/'))
        .expect("repo url");
    admin(&format!("{root}/"), name, &format!("{{{json}}}"));
}

fn id(name: &str, i: usize) -> String {
    format!("oai:{name}-{}:{i:06}", std::process::id())
}

fn path(name: &str, i: usize) -> PathBuf {
    record_path(&id(name, i)).expect("path")
}

fn bytes_of(inv: &dyn Inventory, rel: &Path) -> Vec<u8> {
    let mut b = Vec::new();
    inv.open(rel)
        .expect("open")
        .read_to_end(&mut b)
        .expect("read");
    b
}

/// The paths of the records `0..count` not deleted (every 10th is), in byte order.
fn live(name: &str, count: usize) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = (0..count)
        .filter(|i| i % 10 != 9)
        .map(|i| path(name, i))
        .collect();
    v.sort();
    v
}

#[test]
fn http_oai_live_records_are_listed_and_deleted_ones_are_absent() {
    let name = "conf2";
    let url = repo(name, 120);
    let work = tempfile::tempdir().expect("work");
    let inv = OaiInventory::open(&url, OaiOptions::default(), work.path()).expect("open");
    assert_eq!(inv.granularity(), Granularity::Day);
    let rep = inv.harvest().expect("harvest");
    assert_eq!(
        rep.requests, 5,
        "120 records, 25 a page, no token on the last"
    );
    let got = listed(&inv);
    // Exactly the live records, in byte order: the deleted ones, those that carry metadata
    // (19, 59, 99) as well as those that do not, are absent.
    let rels: Vec<PathBuf> = got.iter().map(|l| l.rel.clone()).collect();
    assert_eq!(rels, live(name, 120));
    for i in [19, 39, 59] {
        assert!(inv.stat(&path(name, i)).is_err(), "deleted record {i}");
    }
    // The bytes: the record's Dublin Core as a standalone document with its namespaces.
    let b = String::from_utf8(bytes_of(&inv, &path(name, 0))).expect("utf-8");
    assert!(
        b.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<oai_dc:dc"),
        "{b}"
    );
    assert!(b.contains("<dc:title>Record 0 of conf2-"), "{b}");
    // The whole conformance suite runs in `oai_conformance`, on records it makes.
    // A datestamp of a day is that day's midnight UTC: 2020-01-01 for the first record.
    let l = got
        .iter()
        .find(|l| l.rel == path(name, 0))
        .expect("record 0");
    assert_eq!(l.mtime_ns, 1_577_836_800_000_000_000);

    // The change feed, in days: the records changed today come again on each incremental
    // harvest (from = yesterday), and only those whose bytes changed are changes.
    let feed = inv.change_feed().expect("a change feed");
    let start = feed.cursor().expect("cursor");
    assert_eq!(
        feed.changes_since(&start).expect("changes").changes.count(),
        0
    );
    let (c, e, b, m) = (id(name, 3), id(name, 500), id(name, 1), id(name, 2));
    change(
        &url,
        &format!(
            "\"put\": [{{\"id\": \"{c}\", \"title\": \"replaced\"}}, {{\"id\": \"{e}\", \
             \"title\": \"created\"}}], \"delete\": [\"{b}\"], \"delete_with_metadata\": \
             [\"{m}\"]"
        ),
    );
    let got = feed.changes_since(&start).expect("changes");
    let next = got.cursor.clone();
    let changes: Vec<Changed> = got.changes.map(|c| c.expect("change")).collect();
    let mut want = vec![path(name, 1), path(name, 2), path(name, 3), path(name, 500)];
    want.sort();
    let rels: Vec<PathBuf> = changes.iter().map(|c| c.rel().to_owned()).collect();
    assert_eq!(rels, want, "the changes");
    for ch in &changes {
        match ch {
            Changed::Gone(p) => assert!(*p == path(name, 1) || *p == path(name, 2), "{p:?}"),
            Changed::Present(l) => {
                let s = String::from_utf8(bytes_of(&inv, &l.rel)).expect("utf-8");
                assert!(s.contains("replaced") || s.contains("created"), "{s}");
            }
        }
    }
    // The records of today harvested again, unchanged: no change after the feed's cursor.
    assert_eq!(feed.changes_since(&next).expect("after").changes.count(), 0);
    assert_eq!(
        feed.changes_since(&start).expect("again").changes.count(),
        4
    );
}

fn read_doc(path: &Path) -> Vec<Entry> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = DocumentReader::new(&bytes[..], ReadOptions::named(path.display().to_string()))
        .expect("header");
    let mut v = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        v.push(e);
    }
    v
}

fn rel_of(e: &Entry) -> PathBuf {
    PathBuf::from(
        e.loc
            .strip_prefix(BASE)
            .map(|p| p.replace("%25", "%"))
            .expect("under base"),
    )
}

#[test]
fn a_source_over_http_oai_publishes_the_live_records_then_a_create_an_update_and_deletions() {
    let name = "src2";
    let url = repo(name, 200);
    let work = tempfile::tempdir().expect("work");
    let spec = format!("oai-pmh:{url}?metadataPrefix=oai_dc");
    let inv = resourcesync_source::inventory::open::open(&spec, work.path()).expect("open");
    let mut cfg = SourceConfig::new(work.path(), BASE);
    cfg.out = Some(work.path().join("out"));
    let mut s = Source::open_with(cfg, inv.clone()).expect("source");
    let r = s.scan().expect("scan");
    assert_eq!(r.resources, 180, "one resource per record not deleted");
    s.publish().expect("publish");
    let out = work.path().join("out");
    // The Resource List: exactly the live records, in path order, dated by their day.
    let rl = read_doc(&out.join("resourcesync/resourcelists/000001/resourcelist.xml"));
    let rels: Vec<PathBuf> = rl.iter().map(rel_of).collect();
    assert_eq!(rels, live(name, 200));
    let e0 = rl.iter().find(|e| rel_of(e) == path(name, 0)).expect("0");
    let lastmod = e0.lastmod.as_ref().expect("lastmod").to_string();
    assert!(lastmod.starts_with("2020-01-01T00:00:00"), "{lastmod}");

    // The repository changes while the server runs: one record updated, one created, one
    // deleted plainly and one deleted with its metadata still sent.
    let (upd, new, del, del_md) = (id(name, 5), id(name, 900), id(name, 1), id(name, 50));
    change(
        &url,
        &format!(
            "\"put\": [{{\"id\": \"{upd}\", \"title\": \"updated\"}}, {{\"id\": \"{new}\", \
             \"title\": \"created\"}}], \"delete\": [\"{del}\"], \"delete_with_metadata\": \
             [\"{del_md}\"]"
        ),
    );
    let r = s.scan().expect("scan");
    assert_eq!((r.created, r.updated, r.deleted), (1, 1, 2));
    s.publish().expect("publish");
    let cl = read_doc(&out.join("resourcesync/changelists/00001.xml"));
    let mut seen: Vec<(PathBuf, Change)> = cl
        .iter()
        .map(|e| (rel_of(e), e.change().cloned().expect("change")))
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want = vec![
        (path(name, 5), Change::Updated),
        (path(name, 900), Change::Created),
        (path(name, 1), Change::Deleted),
        (path(name, 50), Change::Deleted),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen, want);
    // Neither deleted record is served, the one that came with metadata included.
    for p in [path(name, 1), path(name, 50)] {
        assert!(inv.serve(&p).expect("serve").is_none(), "{p:?}");
    }
    let b = bytes_of(&*inv, &path(name, 5));
    assert!(String::from_utf8(b).expect("utf-8").contains("updated"));
    // Nothing changed since: a scan finds nothing, though today's records come again.
    let r = s.scan().expect("scan");
    assert_eq!((r.created, r.updated, r.deleted), (0, 0, 0));
}

/// Reads one request's head from `r` (its target), or `None` at the end of the connection.
fn read_request(r: &mut impl std::io::BufRead) -> Option<String> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 || h == "\r\n" {
            break;
        }
    }
    line.split(' ').nth(1).map(str::to_owned)
}

#[test]
fn a_kept_alive_connection_the_server_closes_is_asked_again_on_a_new_one() {
    // HTTP::Daemon (the second provider's server) closes a connection after answering
    // without `Connection: close`, as servers do when their keep-alive time is up: the next
    // request on the pooled connection is read, then the connection closes unanswered. The
    // request was a GET (OAI-PMH 2.0 §3.1.1, safe to send again): it is sent again on a new
    // connection, and the harvest goes on.
    use std::io::{BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/oai", l.local_addr().expect("addr"));
    let conns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = conns.clone();
    std::thread::spawn(move || {
        for (n, conn) in l.incoming().enumerate() {
            let Ok(mut conn) = conn else { continue };
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut r = BufReader::new(conn.try_clone().expect("clone"));
            let Some(target) = read_request(&mut r) else {
                continue;
            };
            let body = if target.contains("verb=Identify") {
                crate::oai_inventory::envelope(
                    "<Identify><granularity>YYYY-MM-DD</granularity><deletedRecord>persistent\
                     </deletedRecord></Identify>",
                )
            } else {
                crate::oai_inventory::page(&["a"], None)
            };
            // The first connection is left open as if kept alive; the others say close.
            let close = if n == 0 { "" } else { "Connection: close\r\n" };
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\
                     {close}\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
            if n == 0 {
                // The next request on it is read, and the connection closed unanswered.
                let _ = read_request(&mut r);
            }
        }
    });
    let work = tempfile::tempdir().expect("work");
    let inv = OaiInventory::open(&url, OaiOptions::default(), work.path()).expect("open");
    let rep = inv.harvest().expect("asked again on a new connection");
    assert_eq!(rep.records, 1);
    assert_eq!(
        conns.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one connection kept alive, one more after it closed"
    );
    assert_eq!(
        listed(&inv)
            .iter()
            .map(|l| l.rel.clone())
            .collect::<Vec<_>>(),
        [PathBuf::from("records/a.xml")]
    );
}
