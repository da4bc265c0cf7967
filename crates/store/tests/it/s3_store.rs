//! `S3Store` against a real S3-compatible server (Garage), started by `scripts/s3.sh` (which
//! `scripts/test.sh` runs, exporting `RESOURCESYNC_TEST_S3`): the store suite, a kill at each
//! step of a put, and what a bucket adds (metadata, multipart uploads, prefixes, errors). Each
//! test works under its own random prefix of the bucket, removed at its end.

use std::ops::ControlFlow;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use resourcesync_model::{Category, HashAlg, Hashes};
use resourcesync_store::conformance::{self, crash, store::expect_of};
use resourcesync_store::{Error, RelPath, S3Config, S3Store, Store};

/// The variable holding the URL of the test server.
const URL_VAR: &str = "RESOURCESYNC_TEST_S3";

/// The URL of the test server. A run without one fails, loudly: a test of S3 that passes
/// without a server proves nothing.
fn url() -> String {
    match std::env::var(URL_VAR) {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "{URL_VAR} is not set: the S3 tests need a server. Run \
             `export {URL_VAR}=$(scripts/s3.sh)` first (it starts Garage on 127.0.0.1), or run \
             every test with scripts/test.sh"
        ),
    }
}

/// The prefixes made by this process, emptied when the value is dropped.
struct Prefixes {
    names: Vec<String>,
}

impl Prefixes {
    fn new() -> Self {
        Prefixes { names: Vec::new() }
    }

    /// A new prefix, unique to this process and call.
    fn fresh(&mut self) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = format!(
            "t-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.names.push(p.clone());
        p
    }

    /// A store under a new prefix.
    fn store(&mut self) -> S3Store {
        let p = self.fresh();
        store_at(&p)
    }
}

fn store_at(prefix: &str) -> S3Store {
    let cfg = S3Config::parse(&url())
        .and_then(|c| c.with_prefix(prefix))
        .unwrap_or_else(|e| panic!("{e}"));
    S3Store::with_config(cfg).unwrap_or_else(|e| panic!("{e}"))
}

/// Every key under a store's prefix.
fn keys(s: &dyn Store) -> Vec<String> {
    conformance::store::keys(s, None).unwrap_or_else(|e| panic!("{e}"))
}

impl Drop for Prefixes {
    fn drop(&mut self) {
        for p in &self.names {
            let s = store_at(p);
            let mut all = Vec::new();
            let _ = s.list(None, &mut |i| {
                if let Ok((k, _)) = i {
                    all.push(k);
                }
                Ok(ControlFlow::Continue(()))
            });
            for k in all {
                let _ = s.delete(&k);
            }
        }
    }
}

fn key(s: &str) -> RelPath {
    RelPath::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn s3_store_passes_the_store_suite() {
    let mut p = Prefixes::new();
    // Its version checks run only for a store that keeps versions: this one must.
    assert!(
        p.store().features().versions.is_some(),
        "S3Store keeps versions"
    );
    conformance::store::run(|| Box::new(p.store())).unwrap_or_else(|e| panic!("{e}"));
}

/// The suite from Tokio runtime workers, through `blocking::call` (`tests/it/workers.rs`).
#[test]
fn s3_store_passes_the_store_suite_from_runtime_workers() {
    let mut p = Prefixes::new();
    conformance::store::run_on_workers(|| Box::new(p.store())).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_body_whose_digest_does_not_match_never_becomes_visible() {
    let mut p = Prefixes::new();
    let s = p
        .store()
        .with_multipart(1 << 20, 5 << 20)
        .with_stale_after(Duration::ZERO);
    let k = key("refused/big.bin");
    // Large enough for a multipart upload: refused before one is begun.
    let body = vec![7u8; (6 << 20) + 1];
    let mut e = expect_of(&body);
    e.hashes = Hashes::parse(&format!("sha-256:{}", "0".repeat(64))).0;
    let mut up = s.begin(&k, e).expect("begin");
    for c in body.chunks(1 << 20) {
        up.write(c).expect("write");
    }
    let err = up.finish().expect_err("a wrong digest was accepted");
    assert!(err.is_verification(), "{err}");
    assert!(s.head(&k).expect("head").is_none(), "visible");
    assert!(keys(&s).is_empty(), "listed: {:?}", keys(&s));
    // Nothing reached the server: no multipart upload was begun.
    assert_eq!(s.features().clean_interrupted().expect("clean"), 0);
}

#[test]
fn a_multipart_upload_round_trips() {
    let mut p = Prefixes::new();
    let s = p
        .store()
        .with_multipart(1 << 20, 5 << 20)
        .with_stale_after(Duration::ZERO);
    let k = key("multi/part.bin");
    // Three parts: 5 MiB, 5 MiB, and the rest.
    let body: Vec<u8> = (0..(10 << 20) + 12_345u32)
        .map(|i| (i % 253) as u8)
        .collect();
    let placed = s.put(&k, expect_of(&body), &mut &body[..]).expect("put");
    assert_eq!(placed.committed.length, body.len() as u64);
    let got = conformance::store::get(&s, &k).expect("get");
    assert!(got == body, "another body ({} bytes)", got.len());
    let m = s.head(&k).expect("head").expect("there");
    assert_eq!(m.length, body.len() as u64);
    let (n, h) = s.hash(&k, &[HashAlg::Sha256]).expect("hash");
    assert_eq!(n, body.len() as u64);
    assert_eq!(
        h.value_of(&HashAlg::Sha256),
        expect_of(&body).hashes.value_of(&HashAlg::Sha256)
    );
    // Completed: no upload left in progress.
    assert_eq!(s.features().clean_interrupted().expect("clean"), 0);
}

#[test]
fn metadata_round_trips() {
    let mut p = Prefixes::new();
    let s = p.store();
    let k = key("meta/ü data.txt");
    let t = SystemTime::UNIX_EPOCH + Duration::new(1_234_567_890, 123_456_789);
    let mut e = expect_of(b"body");
    e.modified = Some(t);
    e.uri = Some("http://example.org/ü data?q=a%20b&x=1".into());
    s.put(&k, e.clone(), &mut &b"body"[..]).expect("put");
    let m = s.head(&k).expect("head").expect("there");
    assert_eq!(m.uri, e.uri, "the URI");
    assert_eq!(m.modified, Some(t), "the time");
    assert_eq!(m.length, 4);
    for alg in [HashAlg::Md5, HashAlg::Sha256] {
        assert_eq!(
            m.hashes.value_of(&alg),
            e.hashes.value_of(&alg),
            "the {alg} digest"
        );
    }
    // A new time keeps the rest.
    let t2 = t + Duration::from_secs(3600);
    assert!(s.set_modified(&k, t2).expect("set_modified"));
    let m2 = s.head(&k).expect("head").expect("there");
    assert_eq!(m2.modified, Some(t2));
    assert_eq!((m2.uri, m2.hashes), (m.uri, m.hashes));
    assert_eq!(conformance::store::get(&s, &k).expect("get"), b"body");
}

#[test]
fn a_put_for_a_new_key_tells_an_object_found_there_after_all() {
    let mut p = Prefixes::new();
    let s = p.store();
    let k = key("new/key");
    let put_new = |body: &[u8]| {
        let mut up = s.begin_new(&k, expect_of(body)).expect("begin_new");
        up.write(body).expect("write");
        let f = up.finish().expect("finish");
        s.publish(vec![f])
            .expect("publish")
            .pop()
            .expect("one outcome")
            .expect("placed")
    };
    assert!(!put_new(b"first").replaced, "nothing was there");
    // The conditional PUT finds the object: replaced as usual, and said so.
    assert!(put_new(b"second").replaced, "an object was there");
    assert_eq!(conformance::store::get(&s, &k).expect("get"), b"second");
}

#[test]
fn a_batch_tells_replaced_objects_from_new_ones() {
    let mut p = Prefixes::new();
    let s = p.store();
    // Objects at two keys of the batch, and others inside and around its key range.
    for k in ["b/2", "b/4", "b/3x", "a", "b/9"] {
        conformance::store::put(&s, &key(k), b"old").expect("put");
    }
    let names = ["b/1", "b/2", "b/3", "b/4", "b/5"];
    let batch = names
        .iter()
        .map(|n| {
            let mut up = s
                .begin_new(&key(n), expect_of(n.as_bytes()))
                .expect("begin");
            up.write(n.as_bytes()).expect("write");
            up.finish().expect("finish")
        })
        .collect();
    let out = s.publish(batch).expect("publish");
    let replaced: Vec<bool> = out
        .into_iter()
        .map(|o| o.expect("placed").replaced)
        .collect();
    assert_eq!(replaced, [false, true, false, true, false]);
    for n in names {
        assert_eq!(
            conformance::store::get(&s, &key(n)).expect("get"),
            n.as_bytes()
        );
    }
}

/// Begins a multipart upload at `okey` (an object key: the prefix included) and leaves it, as a
/// process killed while sending a large body does.
fn leave_a_multipart_upload(cfg: &S3Config, okey: &str) {
    let bucket = rusty_s3::Bucket::new(
        cfg.endpoint.clone(),
        rusty_s3::UrlStyle::Path,
        cfg.bucket.clone(),
        cfg.region.clone(),
    )
    .expect("bucket");
    let url = rusty_s3::signing::sign(
        &jiff::Timestamp::now(),
        rusty_s3::Method::Post,
        bucket.object_url(okey).expect("url"),
        &cfg.key_id,
        &cfg.secret,
        None,
        &cfg.region,
        600,
        [("uploads", "")].into_iter(),
        std::iter::empty(),
    );
    let r = reqwest::blocking::Client::new()
        .post(url)
        .send()
        .expect("CreateMultipartUpload");
    assert!(r.status().is_success(), "{:?}", r.text());
}

#[test]
fn clean_interrupted_aborts_this_stores_stale_multipart_uploads() {
    let mut p = Prefixes::new();
    let (mine, other) = (p.fresh(), p.fresh());
    let cfg = S3Config::parse(&url()).expect("url");
    // (A store first: it installs the TLS provider the HTTP client needs.)
    let young = store_at(&mine);
    leave_a_multipart_upload(&cfg, &format!("{mine}/big/left.bin"));
    leave_a_multipart_upload(&cfg, &format!("{other}/left.bin"));
    // Begun just now: maybe another process's, in flight: kept.
    assert_eq!(young.features().clean_interrupted().expect("clean"), 0);
    let s = store_at(&mine).with_stale_after(Duration::ZERO);
    assert_eq!(
        s.features().clean_interrupted().expect("clean"),
        1,
        "this prefix's upload"
    );
    assert_eq!(
        s.features().clean_interrupted().expect("clean"),
        0,
        "aborted already"
    );
    let o = store_at(&other).with_stale_after(Duration::ZERO);
    assert_eq!(
        o.features().clean_interrupted().expect("clean"),
        1,
        "the other's, left alone"
    );
}

#[test]
fn stores_under_different_prefixes_do_not_see_each_other() {
    let mut p = Prefixes::new();
    let base = p.fresh();
    // One prefix is the other's start as a string: "a" and "ab".
    let (a, ab) = (
        store_at(&format!("{base}/a")),
        store_at(&format!("{base}/ab")),
    );
    p.names.push(format!("{base}/a"));
    p.names.push(format!("{base}/ab"));
    conformance::store::put(&a, &key("k"), b"in a").expect("put a");
    conformance::store::put(&ab, &key("k"), b"in ab").expect("put ab");
    conformance::store::put(&ab, &key("only-ab"), b"x").expect("put ab");
    assert_eq!(keys(&a), ["k"]);
    assert_eq!(keys(&ab), ["k", "only-ab"]);
    assert_eq!(
        conformance::store::get(&a, &key("k")).expect("get"),
        b"in a"
    );
    assert!(a.head(&key("only-ab")).expect("head").is_none());
    assert!(!a.delete(&key("only-ab")).expect("delete"));
    assert!(ab.head(&key("only-ab")).expect("head").is_some());
}

#[test]
fn refused_credentials_say_what_to_do() {
    let mut p = Prefixes::new();
    let mut cfg = S3Config::parse(&url()).expect("url");
    cfg.secret = "not-the-secret".into();
    let prefix = p.fresh();
    let s = S3Store::with_config(cfg.with_prefix(&prefix).expect("prefix")).expect("store");
    let e = s.head(&key("x")).expect_err("a wrong secret was accepted");
    let msg = e.to_string();
    assert!(
        matches!(
            e,
            Error::S3 {
                status: Some(403),
                ..
            }
        ),
        "{msg}"
    );
    assert_eq!(e.category(), Category::Stop, "{msg}");
    assert!(
        msg.contains("resourcesync-test") && msg.contains("secret"),
        "{msg}"
    );
    // No server: may pass, says where to look.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let s = S3Store::open(&format!("s3://k:s@127.0.0.1:{port}/some-bucket")).expect("store");
    let e = s.head(&key("x")).expect_err("no server, yet an answer");
    assert_eq!(e.category(), Category::Retry, "{e}");
    assert!(e.to_string().contains("server running"), "{e}");
}

/// The variable that makes [`s3_crash_child`] the child of
/// [`s3_store_survives_a_kill_at_each_step_of_a_put`]: the prefix to put under.
const CHILD_PREFIX: &str = "RESOURCESYNC_STORE_S3_CRASH_CHILD_PREFIX";

/// The child of the crash test: puts a new body and is killed at a step. Does nothing in an
/// ordinary test run.
#[test]
fn s3_crash_child() {
    let Ok(prefix) = std::env::var(CHILD_PREFIX) else {
        return;
    };
    crash::child(&store_at(&prefix), &crash::key()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn s3_store_survives_a_kill_at_each_step_of_a_put() {
    let mut p = Prefixes::new();
    let store = p.store();
    let f = store.features();
    assert!(f.crash_safe && f.interrupted.is_some(), "{f:?}");
    assert!(
        f.local.is_none() && f.hierarchy.is_none(),
        "flat keys, no files: {f:?}"
    );
    let exe = std::env::current_exe().expect("exe");
    let mut seen = Vec::new();
    for step in crash::STEPS.iter().chain(&["done"]) {
        let prefix = p.fresh();
        crash::prepare(&store_at(&prefix)).unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--exact",
            "s3_store::s3_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_PREFIX, &prefix)
        .env(URL_VAR, url());
        crash::kill_at(&mut cmd, step).unwrap_or_else(|e| panic!("{step}: {e}"));
        let s = store_at(&prefix);
        let which = crash::check(&s).unwrap_or_else(|e| panic!("killed at {step}: {e}"));
        seen.push((*step, which));
    }
    // The new body is there once placed (its PUT answered), the old one before.
    for (step, which) in &seen {
        let want = if matches!(*step, "placed" | "synced" | "done") {
            "new"
        } else {
            "old"
        };
        assert_eq!(*which, want, "killed at {step}: {seen:?}");
    }
}

/// A byte range is read from the object store (`GetObject` with `Range`): only the part is
/// sent (its `Content-Length` is the part's), with the `Content-Range` that places it; a range
/// past the end is told apart (416), not an error.
#[test]
fn a_byte_range_is_read_from_the_object_store() {
    use resourcesync_store::s3::{Bucket, ByteRange, Ranged};
    use std::io::Read as _;

    let mut prefixes = Prefixes::new();
    let cfg = S3Config::parse(&url())
        .and_then(|c| c.with_prefix(&prefixes.fresh()))
        .unwrap_or_else(|e| panic!("{e}"));
    let bucket = Bucket::new(cfg).unwrap_or_else(|e| panic!("{e}"));
    let body: Vec<u8> = (0..1000u32)
        .map(|i| b'0' + (i % 10) as u8 + (i / 100) as u8)
        .collect();
    let total = body.len() as u64;
    bucket
        .put("ranged.txt", &body, "text/plain")
        .unwrap_or_else(|e| panic!("{e}"));
    let from = |first, last| ByteRange::From { first, last };
    for (range, want) in [
        (from(0, Some(9)), 0..=9u64),
        (from(100, Some(199)), 100..=199),
        (ByteRange::Suffix(50), 950..=999),
        (from(900, None), 900..=999),
        // Past the end: cut at the end (RFC 9110 §14.1.2).
        (from(990, Some(5000)), 990..=999),
        // Longer than the object: all of it.
        (ByteRange::Suffix(5000), 0..=999),
    ] {
        match bucket.get_range("ranged.txt", range) {
            Ok(Some(Ranged::Part {
                info,
                first,
                last,
                total: t,
                mut reader,
            })) => {
                assert_eq!(
                    (first, last, t),
                    (*want.start(), *want.end(), total),
                    "{range:?}"
                );
                assert_eq!(info.length, want.end() - want.start() + 1, "{range:?}");
                let mut got = Vec::new();
                reader.read_to_end(&mut got).expect("read");
                let (a, b) = (*want.start() as usize, *want.end() as usize);
                assert_eq!(got, body[a..=b], "{range:?}");
            }
            other => panic!("{range:?}: {other:?}"),
        }
    }
    match bucket.get_range("ranged.txt", from(total, None)) {
        Ok(Some(Ranged::Unsatisfiable { total: t })) => {
            assert!(t.is_none_or(|t| t == total), "{t:?}");
        }
        other => panic!("past the end: {other:?}"),
    }
    assert!(matches!(
        bucket.get_range("absent.txt", from(0, Some(9))),
        Ok(None)
    ));
}
