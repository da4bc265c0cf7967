//! The OAI-PMH inventory: against a real OAI-PMH data provider (the
//! `oaipmh` library's server, started by `scripts/oai-provider.sh`, its root URL in
//! `RESOURCESYNC_TEST_OAI`), and against hostile responses (a token loop, malformed XML,
//! `badResumptionToken`, `503` with `Retry-After`, unsafe identifiers, oversized pages)
//! served by a small loopback server in the test.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use resourcesync_model::{Change, DocumentReader, Entry, HashAlg, MultiHasher, ReadOptions};
use resourcesync_source::inventory::oai::{OaiInventory, OaiOptions, record_path};
use resourcesync_source::inventory::{Changed, Inventory, Listed, Served};
use resourcesync_source::{Source, SourceConfig};

const VAR: &str = "RESOURCESYNC_TEST_OAI";
const BASE: &str = "http://127.0.0.1:8080/data/";

// ---------------------------------------------------------------- the real provider

fn provider() -> String {
    std::env::var(VAR).unwrap_or_else(|_| {
        panic!(
            "{VAR} is not set: these tests need the OAI-PMH provider; run them through \
             scripts/test.sh, or export {VAR}=$(scripts/oai-provider.sh)"
        )
    })
}

/// A repository of this test's own on the provider, made anew with `cmd` (JSON).
fn repo(name: &str, cmd: &str) -> String {
    let root = provider();
    let name = format!("{name}-{}", std::process::id());
    admin(
        &root,
        &name,
        &format!("{{\"reset\": {{\"batch_size\": 25}}, {cmd}}}"),
    );
    format!("{root}{name}/oai")
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

fn bytes_of(inv: &dyn Inventory, rel: &Path) -> Vec<u8> {
    let mut b = Vec::new();
    inv.open(rel)
        .expect("open")
        .read_to_end(&mut b)
        .expect("read");
    b
}

fn md5(b: &[u8]) -> String {
    let mut h = MultiHasher::new(&[HashAlg::Md5]);
    h.update(b);
    h.finish().value_of(&HashAlg::Md5).expect("md5")
}

pub(crate) fn listed(inv: &dyn Inventory) -> Vec<Listed> {
    inv.list()
        .expect("list")
        .map(|e| e.expect("entry"))
        .collect()
}

#[test]
fn the_provider_s_records_are_listed_read_and_fed_as_changes() {
    // 120 records, every 10th deleted, 25 a page: five resumption tokens.
    let url = repo(
        "conf",
        &format!(
            "\"generate\": {{\"count\": 120, \"deleted_every\": 10, \"prefix\": \"{}\"}}",
            id("conf", 0).trim_end_matches("000000")
        ),
    );
    let work = tempfile::tempdir().expect("work");
    let inv = OaiInventory::open(&url, OaiOptions::default(), work.path()).expect("open");
    let got = listed(&inv);
    // One resource per record not deleted, at the path of its identifier, in byte order.
    let mut want: Vec<PathBuf> = (0..120)
        .filter(|i| i % 10 != 9)
        .map(|i| record_path(&id("conf", i)).expect("path"))
        .collect();
    want.sort();
    let rels: Vec<PathBuf> = got.iter().map(|l| l.rel.clone()).collect();
    assert_eq!(rels, want);
    // The bytes: the record's Dublin Core as a standalone document with its namespaces.
    let b = String::from_utf8(bytes_of(&inv, &got[0].rel)).expect("utf-8");
    assert!(
        b.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<oai_dc:dc"),
        "{b}"
    );
    assert!(b.contains("xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\""));
    assert!(b.contains("<dc:title>Record 0 of conf-"), "{b}");
    // The whole conformance suite runs in `oai_conformance`, on records it makes.
    // Datestamps are times: 2020-01-01T00:00:00Z for the first record.
    let first = record_path(&id("conf", 0)).expect("path");
    let l = got.iter().find(|l| l.rel == first).expect("record 0");
    assert_eq!(l.mtime_ns, 1_577_836_800_000_000_000);

    // The change feed: exactly the records changed since a cursor, each once, in path order,
    // with their state now; nothing after the feed's own cursor; an unknown cursor refused.
    let feed = inv.change_feed().expect("a change feed");
    let start = feed.cursor().expect("cursor");
    assert_eq!(
        feed.changes_since(&start).expect("changes").changes.count(),
        0
    );
    let (c, e, b) = (id("conf", 3), id("conf", 500), id("conf", 1));
    change(
        &url,
        &format!(
            "\"put\": [{{\"id\": \"{c}\", \"title\": \"replaced\"}}, {{\"id\": \"{e}\", \
             \"title\": \"created\"}}], \"delete\": [\"{b}\"]"
        ),
    );
    let got = feed.changes_since(&start).expect("changes");
    let next = got.cursor.clone();
    let changes: Vec<Changed> = got.changes.map(|c| c.expect("change")).collect();
    let mut want = vec![
        record_path(&b).expect("b"),
        record_path(&c).expect("c"),
        record_path(&e).expect("e"),
    ];
    want.sort();
    let rels: Vec<PathBuf> = changes.iter().map(|c| c.rel().to_owned()).collect();
    assert_eq!(rels, want, "the changes");
    for ch in &changes {
        match ch {
            Changed::Gone(p) => assert_eq!(*p, record_path(&b).expect("b")),
            Changed::Present(l) => {
                let bytes = bytes_of(&inv, &l.rel);
                assert_eq!(l.len, bytes.len() as u64);
                let s = String::from_utf8(bytes).expect("utf-8");
                assert!(s.contains("replaced") || s.contains("created"), "{s}");
            }
        }
    }
    // Asked again from the same cursor: the same changes (a scan that failed may ask again).
    assert_eq!(
        feed.changes_since(&start).expect("again").changes.count(),
        3
    );
    assert_eq!(feed.changes_since(&next).expect("after").changes.count(), 0);
    assert!(feed.changes_since("not a cursor").is_err());
    assert!(feed.changes_since("999@2026-01-01T00:00:00Z").is_err());
}

#[test]
fn a_format_the_provider_cannot_give_is_a_clear_error() {
    let url = repo("fmt", "\"generate\": {\"count\": 3, \"deleted_every\": 0}");
    let work = tempfile::tempdir().expect("work");
    let opts = OaiOptions {
        metadata_prefix: "marc21".into(),
        ..OaiOptions::default()
    };
    let inv = OaiInventory::open(&url, opts, work.path()).expect("open");
    let e = inv
        .list()
        .err()
        .expect("cannotDisseminateFormat")
        .to_string();
    assert!(
        e.contains("\"marc21\"") && e.contains("ListMetadataFormats"),
        "{e}"
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

#[test]
fn a_source_over_the_provider_publishes_records_and_their_changes() {
    let name = "src";
    let url = repo(
        name,
        &format!(
            "\"generate\": {{\"count\": 200, \"deleted_every\": 10, \"prefix\": \"{}\"}}",
            id(name, 0).trim_end_matches("000000")
        ),
    );
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
    let rl = read_doc(&out.join("resourcesync/resourcelists/000001/resourcelist.xml"));
    assert_eq!(rl.len(), 180);
    for e in rl.iter().step_by(37) {
        let rel = PathBuf::from(
            e.loc
                .strip_prefix(BASE)
                .map(|p| p.replace("%25", "%"))
                .expect("under base"),
        );
        // The digest is that of the bytes served; lastmod is the record's datestamp.
        let Some(Served::Body { len, mut body, .. }) = inv.serve(&rel).expect("serve") else {
            panic!("{rel:?}: not served as a body");
        };
        let mut b = Vec::new();
        body.read_to_end(&mut b).expect("read");
        assert_eq!(len, b.len() as u64);
        assert_eq!(e.length(), Some(len));
        assert_eq!(
            e.hashes().and_then(|h| h.value_of(&HashAlg::Md5)),
            Some(md5(&b)),
            "{rel:?}"
        );
        let lastmod = e.lastmod.as_ref().expect("lastmod").to_string();
        assert!(lastmod.starts_with("2020-01-"), "{lastmod}");
    }

    // The repository changes: three records updated, two deleted.
    let upd: Vec<String> = [0, 5, 100].iter().map(|&i| id(name, i)).collect();
    let del: Vec<String> = [1, 50].iter().map(|&i| id(name, i)).collect();
    let puts: Vec<String> = upd
        .iter()
        .map(|i| format!("{{\"id\": \"{i}\", \"title\": \"updated {i}\"}}"))
        .collect();
    let dels: Vec<String> = del.iter().map(|i| format!("\"{i}\"")).collect();
    change(
        &url,
        &format!(
            "\"put\": [{}], \"delete\": [{}]",
            puts.join(","),
            dels.join(",")
        ),
    );
    let r = s.scan().expect("scan");
    assert_eq!((r.created, r.updated, r.deleted), (0, 3, 2));
    s.publish().expect("publish");
    let cl = read_doc(&out.join("resourcesync/changelists/00001.xml"));
    let mut seen: Vec<(PathBuf, Change)> = cl
        .iter()
        .map(|e| {
            let rel = e.loc.strip_prefix(BASE).expect("base").replace("%25", "%");
            (PathBuf::from(rel), e.change().cloned().expect("change"))
        })
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want: Vec<(PathBuf, Change)> = upd
        .iter()
        .map(|i| (record_path(i).expect("p"), Change::Updated))
        .chain(
            del.iter()
                .map(|i| (record_path(i).expect("p"), Change::Deleted)),
        )
        .collect();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen, want);
    // A deleted record is no longer served; an updated one serves its new bytes.
    assert!(
        inv.serve(&record_path(&del[0]).expect("p"))
            .expect("serve")
            .is_none()
    );
    let b = bytes_of(&*inv, &record_path(&upd[0]).expect("p"));
    assert!(String::from_utf8(b).expect("utf-8").contains("updated"));
}

// ---------------------------------------------------------------- hostile responses

/// A loopback server answering each request with `answer(n, target)` (`n` counts the
/// ListRecords requests from 0); `Identify` is answered for it.
pub(crate) struct Hostile {
    pub(crate) url: String,
    pub(crate) requests: Arc<AtomicUsize>,
}

pub(crate) type Answer = (u16, Vec<(&'static str, String)>, String);

pub(crate) fn hostile(answer: impl Fn(usize, &str) -> Answer + Send + Sync + 'static) -> Hostile {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/oai", l.local_addr().expect("addr"));
    let requests = Arc::new(AtomicUsize::new(0));
    let count = requests.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut line = String::new();
            let mut r = BufReader::new(conn.try_clone().expect("clone"));
            if r.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                    break;
                }
            }
            let target = line.split(' ').nth(1).unwrap_or("").to_owned();
            let (status, headers, body) = if target.contains("verb=Identify") {
                (200, vec![], identify())
            } else {
                let n = count.fetch_add(1, Ordering::SeqCst);
                answer(n, &target)
            };
            let mut resp = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\
                 Connection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                resp.push_str(&format!("{k}: {v}\r\n"));
            }
            resp.push_str("\r\n");
            resp.push_str(&body);
            let _ = conn.write_all(resp.as_bytes());
        }
    });
    Hostile { url, requests }
}

fn identify() -> String {
    envelope(
        "<Identify><repositoryName>hostile</repositoryName><granularity>YYYY-MM-DDThh:mm:ssZ\
         </granularity><deletedRecord>persistent</deletedRecord></Identify>",
    )
}

pub(crate) fn envelope(inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH \
         xmlns=\"http://www.openarchives.org/OAI/2.0/\">\n<responseDate>2026-01-01T00:00:00Z\
         </responseDate>\n{inner}\n</OAI-PMH>\n"
    )
}

pub(crate) fn rec(ident: &str) -> String {
    format!(
        "<record><header><identifier>{ident}</identifier><datestamp>2026-01-01T00:00:00Z\
         </datestamp></header><metadata><x xmlns=\"urn:x\">{ident}</x></metadata></record>"
    )
}

pub(crate) fn page(records: &[&str], token: Option<&str>) -> String {
    let recs: String = records.iter().map(|r| rec(r)).collect();
    let tok = token.map_or(String::new(), |t| {
        format!("<resumptionToken>{t}</resumptionToken>")
    });
    envelope(&format!("<ListRecords>{recs}{tok}</ListRecords>"))
}

pub(crate) fn ok(body: String) -> Answer {
    (200, vec![], body)
}

pub(crate) fn open_hostile(h: &Hostile, work: &Path, opts: OaiOptions) -> OaiInventory {
    OaiInventory::open(&h.url, opts, work).expect("open")
}

pub(crate) fn rels(inv: &OaiInventory) -> Vec<String> {
    listed(inv)
        .into_iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_provider_that_loops_its_tokens_is_an_error_after_bounded_work() {
    // Pages a, b, then back to the token of page b: a loop.
    let h = hostile(|n, _| match n {
        0 => ok(page(&["a"], Some("t1"))),
        1 => ok(page(&["b"], Some("t2"))),
        _ => ok(page(&["c"], Some("t1"))),
    });
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let e = inv.harvest().expect_err("a loop").to_string();
    assert!(e.contains("came twice") && e.contains("\"t1\""), "{e}");
    assert_eq!(
        h.requests.load(Ordering::SeqCst),
        3,
        "stopped at the repeat"
    );
    // Nothing of the failed harvest is there.
    assert!(inv.stat(Path::new("records/a.xml")).is_err());
}

#[test]
fn malformed_xml_names_the_request_and_line_and_leaves_the_index_as_it_was() {
    let broken = Arc::new(Mutex::new(false));
    let b2 = broken.clone();
    let h = hostile(move |n, _| {
        if !*b2.lock().expect("lock") {
            return ok(page(&["old"], None));
        }
        if n % 2 == 1 {
            ok(page(&["new"], Some("tok-2")))
        } else {
            ok("<?xml version=\"1.0\"?>\n<OAI-PMH>\n<ListRecords>\n<record></ListRecords>".into())
        }
    });
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    assert_eq!(rels(&inv), ["records/old.xml"]);
    *broken.lock().expect("lock") = true;
    let e = inv.list().err().expect("malformed").to_string();
    assert!(
        e.contains("resumptionToken=tok-2"),
        "names the request: {e}"
    );
    assert!(e.contains("line 4"), "names the line: {e}");
    assert!(e.contains("try again later"), "says what to do: {e}");
    // The record of the page read before the broken one was not taken: one transaction.
    assert!(inv.stat(Path::new("records/new.xml")).is_err());
    assert!(inv.stat(Path::new("records/old.xml")).is_ok());
}

#[test]
fn bad_resumption_token_restarts_the_list_once_then_is_an_error() {
    let bad = || {
        ok(envelope(
            "<error code=\"badResumptionToken\">expired</error>",
        ))
    };
    // Once: the list starts again and completes.
    let h = hostile(
        move |n, target| match (n, target.contains("resumptionToken")) {
            (1, true) => bad(),
            (_, false) => ok(page(&["a"], Some("t"))),
            (_, true) => ok(page(&["b"], Some(""))),
        },
    );
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let rep = inv.harvest().expect("restarted");
    assert_eq!((rep.restarts, rep.requests), (1, 4));
    assert_eq!(rels(&inv), ["records/a.xml", "records/b.xml"]);
    // Always: an error after one restart.
    let h = hostile(move |_, target| {
        if target.contains("resumptionToken") {
            bad()
        } else {
            ok(page(&["a"], Some("t")))
        }
    });
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let e = inv.harvest().expect_err("twice").to_string();
    assert!(e.contains("badResumptionToken again"), "{e}");
    assert_eq!(h.requests.load(Ordering::SeqCst), 4);
}

#[test]
fn no_records_match_is_an_empty_list() {
    let h = hostile(|_, _| ok(envelope("<error code=\"noRecordsMatch\">none</error>")));
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    assert!(rels(&inv).is_empty());
    let feed = inv.change_feed().expect("feed");
    let c = feed.cursor().expect("cursor");
    assert_eq!(feed.changes_since(&c).expect("changes").changes.count(), 0);
}

#[test]
fn service_unavailable_is_waited_for_as_told_within_bounds() {
    // Twice 503 with Retry-After: 1, then the page: waited about two seconds.
    let h = hostile(|n, _| match n {
        0 | 1 => (503, vec![("Retry-After", "1".into())], String::new()),
        _ => ok(page(&["a"], None)),
    });
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let t = Instant::now();
    assert_eq!(rels(&inv), ["records/a.xml"]);
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    // Told to wait an hour, forever: each wait cut to the maximum, and a bounded number.
    let h = hostile(|_, _| (503, vec![("Retry-After", "3600".into())], String::new()));
    let work = tempfile::tempdir().expect("work");
    let opts = OaiOptions {
        max_retries: 3,
        max_retry_wait: Duration::from_millis(50),
        ..OaiOptions::default()
    };
    let inv = open_hostile(&h, work.path(), opts);
    let t = Instant::now();
    let e = inv.harvest().expect_err("gives up").to_string();
    assert!(e.contains("503") && e.contains("4 times"), "{e}");
    assert_eq!(h.requests.load(Ordering::SeqCst), 4);
    assert!(t.elapsed() < Duration::from_secs(30));
}

#[test]
fn identifiers_without_a_safe_path_are_skipped_with_a_reason() {
    let long = "x".repeat(300);
    let long2 = long.clone();
    let h = hostile(move |_, _| ok(page(&["fine", "", &long2, "../../etc/passwd"], None)));
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let rep = inv.harvest().expect("harvest");
    assert_eq!(rep.skipped, 2);
    let reasons: Vec<&(String, String)> = rep.skipped_first.iter().collect();
    assert!(
        reasons
            .iter()
            .any(|(i, r)| i.is_empty() && r.contains("empty"))
    );
    assert!(reasons.iter().any(|(i, r)| *i == long && r.contains("255")));
    // A path-like identifier is one segment.
    assert_eq!(
        rels(&inv),
        ["records/%2E.%2F..%2Fetc%2Fpasswd.xml", "records/fine.xml"]
    );
}

#[test]
fn a_response_past_the_size_limit_is_an_error() {
    // A page that is whole and well-formed, but past the limit.
    let h = hostile(move |_, _| ok(page(&["a"], None) + &" ".repeat(5000)));
    let work = tempfile::tempdir().expect("work");
    let opts = OaiOptions {
        max_response_bytes: 2000,
        ..OaiOptions::default()
    };
    let inv = open_hostile(&h, work.path(), opts);
    let e = inv.harvest().expect_err("too large").to_string();
    assert!(e.contains("larger than the limit of 2000 bytes"), "{e}");
    assert!(
        inv.stat(Path::new("records/a.xml")).is_err(),
        "nothing taken"
    );
}

// ---------------------------------------------------------------- figures

/// Resources per second to publish N records from the provider, beside the directory
/// inventory on the same bytes (the figures in the CHANGELOG). Ignored: a
/// measurement, run by hand (`cargo test -p resourcesync-source --test it
/// oai_inventory::publish_rate -- --ignored --nocapture`, `OAI_BENCH_N` records, 3000 by default).
#[test]
#[ignore = "a measurement, run by hand"]
fn publish_rate_beside_the_directory_inventory() {
    let n: usize = std::env::var("OAI_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let root = provider();
    let name = format!("bench-{}", std::process::id());
    admin(
        &root,
        &name,
        &format!(
            "{{\"reset\": {{\"batch_size\": 100}}, \"generate\": {{\"count\": {n}, \
             \"deleted_every\": 0}}}}"
        ),
    );
    let url = format!("{root}{name}/oai");
    let work = tempfile::tempdir().expect("work");
    let t = Instant::now();
    let inv: Arc<dyn Inventory> =
        Arc::new(OaiInventory::open(&url, OaiOptions::default(), work.path()).expect("open"));
    let mut cfg = SourceConfig::new(work.path(), BASE);
    cfg.out = Some(work.path().join("out"));
    let mut s = Source::open_with(cfg, inv.clone()).expect("source");
    let r = s.scan().expect("scan");
    s.publish().expect("publish");
    let oai = t.elapsed();
    assert_eq!(r.resources, n as u64);
    // The same bytes as files.
    let dir = tempfile::tempdir().expect("dir");
    for l in listed(&*inv) {
        let p = dir.path().join(&l.rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, bytes_of(&*inv, &l.rel)).expect("write");
    }
    let out = tempfile::tempdir().expect("out");
    let t = Instant::now();
    let mut cfg = SourceConfig::new(dir.path(), BASE);
    cfg.out = Some(out.path().to_owned());
    cfg.state = Some(out.path().join("state.sqlite"));
    let mut d = Source::open(cfg).expect("dir source");
    let r = d.scan().expect("scan");
    d.publish().expect("publish");
    let dir_t = t.elapsed();
    assert_eq!(r.resources, n as u64);
    // A second publish with nothing changed: an incremental harvest (`from`).
    let t = Instant::now();
    s.scan().expect("scan");
    s.publish().expect("publish");
    let again = t.elapsed();
    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    eprintln!(
        "publish {n} records: oai-pmh {oai:.2?} ({:.0} resources/s; incremental again {again:.2?}), \
         directory {dir_t:.2?} ({:.0} resources/s)",
        rate(oai),
        rate(dir_t)
    );
}
