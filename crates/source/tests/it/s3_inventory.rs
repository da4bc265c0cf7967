//! `S3Inventory` and `BucketSink` against a real S3-compatible server, the Garage that
//! `scripts/s3.sh` starts (`scripts/test.sh` exports `RESOURCESYNC_TEST_S3`): the inventory
//! conformance suite; keys that are no safe path skipped with a reason; a scan and publish
//! whose Resource List has the objects' URIs and their ETags as md5 (a multipart object read
//! and hashed instead); objects put and deleted reaching the next Change List; redirects;
//! documents published into the bucket, read back and valid; `BucketSink` through the document
//! sink conformance suite. And against a hostile server on
//! 127.0.0.1: a listing that loops ends the listing with an error, after bounded work. Each
//! test works under a random prefix of the test bucket.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use resourcesync_model::path::RelPath;
use resourcesync_model::validate::validate;
use resourcesync_model::{Change, DocumentReader, Entry, HashAlg, MultiHasher, ReadOptions};
use resourcesync_source::inventory::conformance::{self, Harness};
use resourcesync_source::inventory::{Inventory, S3Inventory, Served};
use resourcesync_source::layout::Layout;
use resourcesync_source::publish::sink::conformance as sink_conformance;
use resourcesync_source::publish::sink::{BucketSink, DocSink, MemSink};
use resourcesync_source::publish::{PublishOptions, publish_to};
use resourcesync_source::scan::{ScanOptions, scan};
use resourcesync_source::state::State;
use resourcesync_store::s3::Bucket;

const URL_VAR: &str = "RESOURCESYNC_TEST_S3";
const BASE: &str = "http://127.0.0.1:1/";

/// The URL of the test server's bucket. A run without one fails, loudly.
fn server_url() -> String {
    match std::env::var(URL_VAR) {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "{URL_VAR} is not set: the S3 tests need a server. Run `export \
             {URL_VAR}=$(scripts/s3.sh)` first (it starts Garage on 127.0.0.1), or run every \
             test with scripts/test.sh"
        ),
    }
}

/// The URL of the test bucket under `prefix`, with `extra` parameters.
fn url_at(prefix: &str, extra: &str) -> String {
    let u = server_url();
    let (head, query) = u.split_once('?').unwrap_or((&u, ""));
    let mut q: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    q.extend(extra.split('&').filter(|p| !p.is_empty()));
    format!("{}/{prefix}?{}", head.trim_end_matches('/'), q.join("&"))
}

/// A fresh prefix of this test's own.
fn prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "s3inv-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn bucket(prefix: &str) -> Bucket {
    Bucket::open(&url_at(prefix, "")).unwrap_or_else(|e| panic!("{e}"))
}

fn inventory(prefix: &str, extra: &str) -> S3Inventory {
    S3Inventory::from_spec(&url_at(prefix, extra)).unwrap_or_else(|e| panic!("{e}"))
}

fn md5_hex(b: &[u8]) -> String {
    let mut h = MultiHasher::new(&[HashAlg::Md5]);
    h.update(b);
    h.finish().value_of(&HashAlg::Md5).expect("md5")
}

/// The conformance harness: each inventory a new prefix; the broken resource is a folder
/// marker (`broken.txt/`: S3's own kind of object that is no resource).
struct S3 {
    bucket: Option<Bucket>,
}

impl Harness for S3 {
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
        let p = prefix();
        let b = bucket(&p);
        std::thread::scope(|s| {
            for chunk in files.chunks(files.len().div_ceil(8).max(1)) {
                let b = &b;
                s.spawn(move || {
                    for (n, bytes) in chunk {
                        b.put(n, bytes, "application/octet-stream")
                            .unwrap_or_else(|e| panic!("{n}: {e}"));
                    }
                });
            }
        });
        if let Some(n) = broken {
            b.put(&format!("{n}/"), b"", "application/x-directory")
                .expect("folder marker");
        }
        self.bucket = Some(b);
        Box::new(inventory(&p, ""))
    }

    fn put(&mut self, rel: &str, bytes: &[u8]) {
        let b = self.bucket.as_ref().expect("built");
        b.put(rel, bytes, "application/octet-stream").expect("put");
    }

    fn remove(&mut self, rel: &str) {
        self.bucket
            .as_ref()
            .expect("built")
            .delete(rel)
            .expect("delete");
    }
}

#[test]
fn the_s3_inventory_passes_the_conformance_suite() {
    conformance::run(&mut S3 { bucket: None }).unwrap_or_else(|e| panic!("{e}"));
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

/// Keys that map to no safe path are reported, each with its rule, and the listing goes on;
/// none is opened nor served. The documents' places are left out without a word.
#[test]
fn keys_that_are_no_safe_path_are_skipped_with_a_reason() {
    let p = prefix();
    let b = bucket(&p);
    for k in [
        "a.txt",
        "a//b",
        "dir/",
        "c\u{1}d",
        ".resourcesync/state.sqlite",
        "resourcesync/capabilitylist.xml",
        ".well-known/resourcesync",
        "z.txt",
    ] {
        b.put(k, b"x", "text/plain")
            .unwrap_or_else(|e| panic!("{k:?}: {e}"));
    }
    let inv = inventory(&p, "");
    let (ok, bad) = collect(&inv);
    assert_eq!(ok, ["a.txt", "z.txt"]);
    let reason = |k: &str| {
        bad.iter()
            .find(|(q, _)| q.to_string_lossy() == k)
            .map(|(_, r)| r.as_str())
            .unwrap_or_else(|| panic!("{k:?} not reported: {bad:?}"))
    };
    for (k, rule) in [
        ("a//b", "empty path segment"),
        ("dir/", "folder marker"),
        ("c\u{1}d", "control byte"),
        (".resourcesync/state.sqlite", ".resourcesync"),
    ] {
        let r = reason(k);
        assert!(r.contains(rule), "{k:?}: {r}");
    }
    assert_eq!(bad.len(), 4, "{bad:?}");
    for k in [
        "a//b",
        "c\u{1}d",
        ".resourcesync/state.sqlite",
        "resourcesync/capabilitylist.xml",
    ] {
        assert!(inv.open(Path::new(k)).is_err(), "{k:?} opened");
        assert!(
            inv.serve(Path::new(k)).expect("serve").is_none(),
            "{k:?} served"
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

/// (loc, md5, change) of each entry of a document.
fn entries_of(bytes: &[u8]) -> Vec<(String, Option<String>, Option<Change>)> {
    parse(bytes)
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

fn doc(sink: &MemSink, key: &str) -> Vec<u8> {
    sink.get(key)
        .unwrap_or_else(|| panic!("no {key}: {:?}", sink.keys()))
        .to_vec()
}

/// The key of the one Resource List published.
fn resource_list(keys: Vec<String>) -> String {
    let keys: Vec<String> = keys
        .into_iter()
        .filter(|k| k.starts_with("resourcesync/resourcelists/") && k.ends_with("resourcelist.xml"))
        .collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].clone()
}

/// An inventory that records which resources were read.
#[derive(Debug)]
struct Counting {
    inner: S3Inventory,
    read: std::sync::Mutex<Vec<String>>,
}

impl Counting {
    fn new(inner: S3Inventory) -> Self {
        Counting {
            inner,
            read: Default::default(),
        }
    }

    fn read_paths(&self) -> Vec<String> {
        let mut v = self.read.lock().expect("lock").clone();
        v.sort();
        v
    }

    fn note(&self, rel: &Path) {
        let r = rel.to_string_lossy().into_owned();
        self.read.lock().expect("lock").push(r);
    }
}

impl Inventory for Counting {
    fn list(&self) -> resourcesync_source::Result<resourcesync_source::inventory::Listing<'_>> {
        self.inner.list()
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        self.note(rel);
        self.inner.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.inner.stat(rel)
    }
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        self.note(rel);
        self.inner.read_stable(rel, buf, sink)
    }
    fn listed_digests_trusted(&self) -> bool {
        self.inner.listed_digests_trusted()
    }
}

/// A scan and publish over a prefix: the Resource List has the objects' URIs and their ETags
/// as md5, without reading them (only the multipart object, whose ETag is no MD5, is read,
/// and published with the MD5 of its bytes; with `etag=ignore` every object is read). Then objects put, replaced and
/// deleted reach the next Change List.
#[test]
fn a_scan_of_a_bucket_publishes_its_objects_and_their_changes() {
    let p = prefix();
    let b = bucket(&p);
    b.put("a.txt", b"alpha", "text/plain").expect("put");
    b.put("b/c d.txt", b"beta", "text/plain").expect("put");
    b.put("gone.txt", b"soon gone", "text/plain").expect("put");
    // 9 MiB: sent as a multipart upload of 8 MiB parts, its ETag `HEX-2`.
    let big: Vec<u8> = (0..9u32 << 20).map(|i| (i % 253) as u8).collect();
    let mut w = b
        .writer("big.bin", "application/octet-stream")
        .expect("writer");
    w.write_all(&big).expect("write");
    b.commit(w).expect("multipart");
    let etag = b
        .head("big.bin")
        .expect("head")
        .expect("there")
        .etag
        .expect("etag");
    assert!(etag.ends_with("-2"), "not a multipart ETag: {etag}");

    // With `etag=ignore`, every object is read.
    let ignoring = Counting::new(inventory(&p, "etag=ignore"));
    let sd = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    scan(&ignoring, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert_eq!(
        ignoring.read_paths(),
        ["a.txt", "b/c d.txt", "big.bin", "gone.txt"]
    );

    let inv = Counting::new(inventory(&p, ""));
    let sd = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert!(r.baseline && r.skipped.is_empty(), "{r:?}");
    assert_eq!(r.resources, 4, "{r:?}");
    assert_eq!(
        inv.read_paths(),
        ["big.bin"],
        "only the multipart object is read"
    );
    let layout = Layout::new(sd.path().join("out"), BASE);
    let sink = MemSink::new();
    publish_to(&sink, &layout, &state, &PublishOptions::default()).expect("publish");
    let m = |b: &[u8]| Some(md5_hex(b));
    assert_eq!(
        entries_of(&doc(&sink, &resource_list(sink.keys()))),
        [
            (format!("{BASE}a.txt"), m(b"alpha"), None),
            (format!("{BASE}b/c%20d.txt"), m(b"beta"), None),
            (format!("{BASE}big.bin"), m(&big), None),
            (format!("{BASE}gone.txt"), m(b"soon gone"), None),
        ]
    );

    b.put("a.txt", b"alpha, changed", "text/plain")
        .expect("put");
    b.put("new.txt", b"new", "text/plain").expect("put");
    b.delete("gone.txt").expect("delete");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.resources),
        (1, 1, 1, 4),
        "{r:?}"
    );
    assert_eq!(inv.read_paths(), ["big.bin"], "objects read again");
    publish_to(&sink, &layout, &state, &PublishOptions::default()).expect("publish");
    let changes: Vec<(String, Option<String>, Option<Change>)> = sink
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("resourcesync/changelists/"))
        .flat_map(|k| entries_of(&doc(&sink, &k)))
        .collect();
    assert_eq!(
        changes,
        [
            (
                format!("{BASE}a.txt"),
                m(b"alpha, changed"),
                Some(Change::Updated)
            ),
            (format!("{BASE}new.txt"), m(b"new"), Some(Change::Created)),
            (format!("{BASE}gone.txt"), None, Some(Change::Deleted)),
        ]
    );
}

/// `serve` streams an object's bytes; with `serve=redirect` it redirects to the object's URL
/// at the endpoint, with `redirect_base` to the CDN's; never for an object not there.
#[test]
fn objects_are_served_or_redirected_to() {
    let p = prefix();
    let b = bucket(&p);
    b.put("x/y z.txt", b"the bytes", "text/plain").expect("put");
    let rel = Path::new("x/y z.txt");
    match inventory(&p, "").serve(rel).expect("serve") {
        Some(Served::Body { len, mut body, .. }) => {
            let mut got = Vec::new();
            body.read_to_end(&mut got).expect("read");
            assert_eq!((len, got.as_slice()), (9, &b"the bytes"[..]));
        }
        other => panic!("{other:?}"),
    }
    let endpoint = b.object_url("x/y z.txt").expect("url");
    assert!(
        endpoint.ends_with(&format!("/resourcesync-test/{p}/x/y%20z.txt")),
        "{endpoint}"
    );
    let inv = inventory(&p, "serve=redirect");
    match inv.serve(rel).expect("serve") {
        Some(Served::Redirect(u)) => assert_eq!(u, endpoint),
        other => panic!("{other:?}"),
    }
    assert!(inv.serve(Path::new("missing")).expect("serve").is_none());
    let inv = inventory(&p, "redirect_base=https://cdn.example.org/");
    match inv.serve(rel).expect("serve") {
        Some(Served::Redirect(u)) => {
            assert_eq!(u, format!("https://cdn.example.org/{p}/x/y%20z.txt"));
        }
        other => panic!("{other:?}"),
    }
}

/// Documents published into a bucket: each at its key under the prefix, `application/xml`,
/// read back and valid; a second publish of the same state sends nothing new (the objects'
/// ETags are unchanged).
#[test]
fn documents_are_published_into_a_bucket() {
    let src = prefix();
    let b = bucket(&src);
    for (k, v) in [("a.txt", &b"alpha"[..]), ("b.txt", b"beta")] {
        b.put(k, v, "text/plain").expect("put");
    }
    let inv = inventory(&src, "");
    let sd = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    let out = prefix();
    let sink = BucketSink::open(&url_at(&out, "")).expect("sink");
    let layout = Layout::new(PathBuf::from(sink.location()), BASE);
    let report = publish_to(&sink, &layout, &state, &PublishOptions::default()).expect("publish");
    assert!(!report.written.is_empty());
    let keys: Vec<String> = sink
        .list("")
        .expect("list")
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    for k in [
        "resourcesync/capabilitylist.xml",
        ".well-known/resourcesync",
    ] {
        assert!(keys.iter().any(|x| x == k), "{k} not in {keys:?}");
    }
    let ob = bucket(&out);
    let read = |k: &str| {
        let (info, mut r) = ob.get(k).expect("get").unwrap_or_else(|| panic!("no {k}"));
        let mut v = Vec::new();
        r.read_to_end(&mut v).expect("read");
        (info, v)
    };
    for k in keys.iter().filter(|k| !k.ends_with(".html")) {
        let (info, bytes) = read(k);
        assert_eq!(info.content_type.as_deref(), Some("application/xml"), "{k}");
        let r = DocumentReader::new(&bytes[..], ReadOptions::named(k.as_str()))
            .and_then(validate)
            .unwrap_or_else(|e| panic!("{k}: {e}"));
        assert!(r.is_valid(), "{k}: {:?}", r.findings);
    }
    let (_, rl) = read(&resource_list(keys.clone()));
    let locs: Vec<String> = entries_of(&rl).into_iter().map(|e| e.0).collect();
    assert_eq!(locs, [format!("{BASE}a.txt"), format!("{BASE}b.txt")]);
    let before = ob.head("resourcesync/capabilitylist.xml").expect("head");
    sink.put(
        &RelPath::parse("resourcesync/capabilitylist.xml").expect("key"),
        &read("resourcesync/capabilitylist.xml").1,
    )
    .expect("put the same");
    assert_eq!(
        ob.head("resourcesync/capabilitylist.xml").expect("head"),
        before
    );
}

/// The document sink conformance harness: each sink a new prefix of the bucket; a key read
/// back as the object under that prefix.
struct Buckets(Option<Bucket>);

impl sink_conformance::Harness for Buckets {
    fn sink(&mut self) -> Box<dyn DocSink> {
        let p = prefix();
        self.0 = Some(bucket(&p));
        Box::new(BucketSink::open(&url_at(&p, "")).expect("sink"))
    }

    fn read(&self, key: &str) -> Option<Vec<u8>> {
        let (_, mut r) = self.0.as_ref()?.get(key).expect("get")?;
        let mut v = Vec::new();
        r.read_to_end(&mut v).expect("read");
        Some(v)
    }
}

#[test]
fn the_bucket_sink_passes_the_document_sink_conformance_suite() {
    sink_conformance::run(&mut Buckets(None)).unwrap_or_else(|e| panic!("{e}"));
}

/// Serves every request with `page(n)` (n counts requests from 0) on 127.0.0.1; the address.
fn hostile(page: impl Fn(usize) -> String + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
    resourcesync_testkit::pages(move |n| page(n).into_bytes())
}

/// A server that gives the same page and token forever, or fresh tokens with no keys: the
/// listing ends with an error (the scan records nothing), after a bounded number of requests.
#[test]
fn a_listing_that_never_ends_is_an_error_after_bounded_work() {
    let page = |keys: &str, token: &str| {
        format!(
            "<ListBucketResult>{keys}<IsTruncated>true</IsTruncated>\
             <NextContinuationToken>{token}</NextContinuationToken></ListBucketResult>"
        )
    };
    let contents = "<Contents><Key>p/a</Key><Size>1</Size>\
                    <LastModified>2024-01-01T00:00:00Z</LastModified></Contents>";
    type Page = Box<dyn Fn(usize) -> String + Send + Sync>;
    let cases: Vec<(&str, Page)> = vec![
        ("the same page", Box::new(move |_| page(contents, "t"))),
        (
            "a repeated token",
            Box::new(move |n| page(if n == 0 { contents } else { "" }, "t")),
        ),
        ("empty pages", Box::new(move |n| page("", &format!("t{n}")))),
    ];
    for (what, f) in cases {
        let (addr, count) = hostile(f);
        let inv = S3Inventory::from_spec(&format!("s3://k:s@{addr}/bucket/p")).expect("spec");
        let items: Vec<_> = inv.list().expect("list").collect();
        let last = items.last().and_then(|i| i.as_ref().err()).cloned();
        let last = last.unwrap_or_else(|| panic!("{what}: no error: {items:?}"));
        assert!(last.is_listing_broken(), "{what}: {last:?}");
        assert!(
            last.reason.contains("ListObjectsV2"),
            "{what}: {}",
            last.reason
        );
        assert!(
            count.load(Ordering::SeqCst) <= 102,
            "{what}: {count:?} requests"
        );
        let sd = tempfile::tempdir().expect("tempdir");
        let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
        assert!(
            scan(&inv, &mut state, BASE, &ScanOptions::default()).is_err(),
            "{what}"
        );
    }
}
