//! Memento (RFC 7089) over the versions an aggregator keeps (`versions = true`): a resource
//! changed twice at a real Source on loopback is synced three times; its TimeMap, TimeGate and
//! mementos are read by hand and by two Memento clients we did not write (the Python
//! `memento_client` and the npm `memento-client`, installed by scripts/memento-clients.sh, their
//! folder in RESOURCESYNC_TEST_MEMENTO_CLIENTS; a test without them fails loudly).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use resourcesync_aggregate::Aggregator;
use resourcesync_aggregate::status::Phase;
use resourcesync_testkit::{Reply, Server};

use resourcesync_model::{Capability, Entry};

use crate::republish::{document, named};
use crate::service::until;

/// The three states of the resource: its body and the Source's `<lastmod>` for it, and the
/// `Memento-Datetime` each is served with (RFC 7089 §2.1.1: an HTTP-date).
const STATES: [(&[u8], &str, &str); 3] = [
    (
        b"the first text\n",
        "2026-10-01T00:00:00Z",
        "Thu, 01 Oct 2026 00:00:00 GMT",
    ),
    (
        b"the second text, longer\n",
        "2026-10-05T12:30:00Z",
        "Mon, 05 Oct 2026 12:30:00 GMT",
    ),
    (
        b"third\n",
        "2026-10-09T08:00:05Z",
        "Fri, 09 Oct 2026 08:00:05 GMT",
    ),
];

/// The 14-digit datetimes of the mementos' URLs.
const STAMPS: [&str; 3] = ["20261001000000", "20261005123000", "20261009080005"];

fn clients() -> PathBuf {
    let dir = std::env::var("RESOURCESYNC_TEST_MEMENTO_CLIENTS").unwrap_or_else(|_| {
        panic!(
            "RESOURCESYNC_TEST_MEMENTO_CLIENTS is not set: run the tests with scripts/test.sh, \
             which installs the Memento clients (scripts/memento-clients.sh)"
        )
    });
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("venv/bin/python").is_file()
            && dir.join("node/node_modules/memento-client").is_dir(),
        "the Memento clients are not in {}: run scripts/memento-clients.sh",
        dir.display()
    );
    dir
}

/// A Source of one resource, `doc.txt`, in state `k` of [`STATES`].
fn set_state(s: &Server, k: usize) {
    let b = &s.base;
    let (body, lastmod, _) = STATES[k];
    crate::route_source(
        s,
        lastmod,
        &format!(
            r#"  <url><loc>{b}doc.txt</loc><lastmod>{lastmod}</lastmod><rs:md length="{}"/></url>"#,
            body.len()
        ),
    );
    s.route("/doc.txt", Reply::ok(body));
}

/// Waits until the state of `name` keeps `n` versions of `uri` (polling, with a deadline).
async fn until_versions(agg: &Arc<Aggregator>, name: &str, uri: &str, n: usize) {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let (a, name2, uri2) = (agg.clone(), name.to_owned(), uri.to_owned());
        let got = tokio::task::spawn_blocking(move || a.versions(&name2, &uri2, None, None, 100))
            .await
            .expect("task");
        if let Ok(Some(v)) = &got
            && v.versions.len() >= n
        {
            assert_eq!(v.versions.len(), n, "{v:#?}");
            return;
        }
        assert!(Instant::now() < end, "{n} versions of {uri}: {got:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// An aggregator (republishing) following the Source `src` as `kept` with `versions = true`,
/// its copies in `store` or in the bucket `bucket`, through the three states of `doc.txt`: it,
/// its base URL and the URI-R.
async fn three_versions(
    src: &Server,
    store: &std::path::Path,
    bucket: Option<String>,
) -> (Arc<Aggregator>, String, String) {
    set_state(src, 0);
    let text = format!(
        "[[source]]\nname = \"kept\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n\
         versions = true\n",
        src.base
    );
    // Republished too: the lists link the archive.
    let (agg, agg_base) = crate::republish::aggregator_in(&text, store, bucket).await;
    let uri_r = format!("{}doc.txt", src.base);
    until(&agg, "kept", Duration::from_secs(60), |v| {
        v.phase == Phase::Following && v.resources == 1
    })
    .await;
    until_versions(&agg, "kept", &uri_r, 1).await;
    set_state(src, 1);
    until_versions(&agg, "kept", &uri_r, 2).await;
    set_state(src, 2);
    until_versions(&agg, "kept", &uri_r, 3).await;
    (agg, agg_base, uri_r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_changed_twice_has_three_mementos() {
    let clients = clients();
    let src = Server::empty().await;
    let store = tempfile::tempdir().expect("store");
    let (agg, agg_base, uri_r) = three_versions(&src, store.path(), None).await;

    let web = agg_base
        .strip_prefix("http://")
        .and_then(|w| w.strip_suffix('/'))
        .expect("http://HOST:PORT/")
        .to_owned();
    let base = format!("{agg_base}memento/kept/");
    let http = no_redirects();

    // The TimeMap (RFC 7089 §5): the original, itself, the TimeGate, then three mementos in
    // time order with their datetimes, the first and the last saying so.
    let r = http
        .get(format!("{base}timemap/link/{uri_r}"))
        .send()
        .await
        .expect("GET timemap");
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "application/link-format");
    let map = r.text().await.expect("body");
    assert!(
        map.starts_with(&format!("<{uri_r}>; rel=\"original\",")),
        "{map}"
    );
    assert!(
        map.contains(&format!("<{base}timegate/{uri_r}>; rel=\"timegate\"")),
        "{map}"
    );
    let mementos: Vec<&str> = map.lines().filter(|l| l.contains("memento\"")).collect();
    assert_eq!(mementos.len(), 3, "{map}");
    for (i, (line, rel)) in mementos
        .iter()
        .zip(["first memento", "memento", "last memento"])
        .enumerate()
    {
        let want = format!(
            "<{base}{}/{uri_r}>; rel=\"{rel}\"; datetime=\"{}\"",
            STAMPS[i], STATES[i].2
        );
        assert!(line.starts_with(&want), "{line} is not {want}");
    }

    // Each memento (RFC 7089 §4.1.3): that version's bytes, its Memento-Datetime, its links.
    for (i, (body, _, datetime)) in STATES.iter().enumerate() {
        let r = http
            .get(format!("{base}{}/{uri_r}", STAMPS[i]))
            .send()
            .await
            .expect("GET memento");
        assert_eq!(r.status(), 200, "memento {i}");
        assert_eq!(header(&r, "memento-datetime"), *datetime);
        let link = header(&r, "link");
        assert!(
            link.contains(&format!("<{uri_r}>; rel=\"original\"")),
            "{link}"
        );
        assert!(
            link.contains("rel=\"timegate\"") && link.contains("rel=\"timemap\""),
            "{link}"
        );
        assert_eq!(header(&r, "content-type"), "text/plain");
        assert_eq!(
            r.bytes().await.expect("body").as_ref(),
            *body,
            "memento {i}"
        );
    }
    // A datetime between two mementos' is redirected to the one current then.
    let r = http
        .get(format!("{base}20261007000000/{uri_r}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 302);
    assert_eq!(
        header(&r, "location"),
        format!("{base}{}/{uri_r}", STAMPS[1])
    );

    // The TimeGate (RFC 7089 §4.1.1): Accept-Datetime between the first and the second gives
    // the first; before the first, the first; after the last, the last; none, the last.
    let gate = format!("{base}timegate/{uri_r}");
    for (asked, want) in [
        (Some("Sat, 03 Oct 2026 10:00:00 GMT"), 0),
        (Some("Mon, 05 Oct 2026 12:29:59 GMT"), 0),
        (Some("Mon, 05 Oct 2026 12:30:00 GMT"), 1),
        (Some("Tue, 01 Jan 1980 00:00:00 GMT"), 0),
        (Some("Sun, 01 Jan 2040 00:00:00 GMT"), 2),
        (None, 2),
    ] {
        let mut req = http.get(&gate);
        if let Some(a) = asked {
            req = req.header("accept-datetime", a);
        }
        let r = req.send().await.expect("GET timegate");
        assert_eq!(r.status(), 302, "{asked:?}");
        assert_eq!(
            header(&r, "location"),
            format!("{base}{}/{uri_r}", STAMPS[want]),
            "{asked:?}"
        );
        assert_eq!(header(&r, "vary"), "accept-datetime");
        let link = header(&r, "link");
        assert!(
            link.contains(&format!("<{uri_r}>; rel=\"original\"")),
            "{link}"
        );
        assert!(
            link.contains(&format!(
                "<{base}timemap/link/{uri_r}>; rel=\"timemap\"; type=\"application/link-format\""
            )),
            "{link}"
        );
        assert!(
            link.contains("rel=\"first") && link.contains("rel=\"last"),
            "{link}"
        );
    }
    let r = http
        .get(&gate)
        .header("accept-datetime", "Sat, 03 Oct 2026 10:00:00 GMT")
        .send()
        .await
        .expect("GET");
    let link = header(&r, "link");
    assert!(
        link.contains(&format!(
            "<{base}{}/{uri_r}>; rel=\"first memento\"; datetime=\"{}\"",
            STAMPS[0], STATES[0].2
        )) && link.contains(&format!(
            "<{base}{}/{uri_r}>; rel=\"next memento\"; datetime=\"{}\"",
            STAMPS[1], STATES[1].2
        )) && link.contains(&format!(
            "<{base}{}/{uri_r}>; rel=\"last memento\"; datetime=\"{}\"",
            STAMPS[2], STATES[2].2
        )),
        "{link}"
    );
    // RFC 7089 §4.5.3: an Accept-Datetime that is not an HTTP-date is 400, with Vary.
    for bad in ["yesterday", "2026-10-03T10:00:00Z", "Sat, 03 Oct 2026"] {
        let r = http
            .get(&gate)
            .header("accept-datetime", bad)
            .send()
            .await
            .expect("GET");
        assert_eq!(r.status(), 400, "{bad}");
        assert_eq!(header(&r, "vary"), "accept-datetime");
    }
    // A URI-R with no versions, and paths that are not URIs of the Source, are 404: looked up,
    // never fetched nor opened.
    for path in [
        format!("timegate/{}other.txt", src.base),
        format!("timemap/link/{}other.txt", src.base),
        format!("{}/{}other.txt", STAMPS[0], src.base),
        "timegate/../../../etc/passwd".into(),
        "timegate/%2e%2e/.resourcesync/state.sqlite".into(),
        "timegate/".into(),
    ] {
        let r = http.get(format!("{base}{path}")).send().await.expect("GET");
        assert_eq!(r.status(), 404, "{path}");
    }
    // The URI-R percent-encoded, or with the scheme's slashes merged (by a proxy), is found.
    for asked in [
        uri_r.replacen("://", ":/", 1),
        percent_encoding::utf8_percent_encode(&uri_r, percent_encoding::NON_ALPHANUMERIC)
            .to_string(),
    ] {
        let r = http
            .get(format!("{base}timegate/{asked}"))
            .send()
            .await
            .expect("GET");
        assert_eq!(r.status(), 302, "{asked}");
        assert_eq!(
            header(&r, "location"),
            format!("{base}{}/{uri_r}", STAMPS[2]),
            "{asked}"
        );
    }
    let r = http
        .get(format!("http://{web}/memento/nobody/timegate/{uri_r}"))
        .send()
        .await
        .expect("GET");
    assert_eq!(r.status(), 404);

    // The Python client of the Memento authors' group: the memento closest to a datetime
    // between the first and the second is the first, with its neighbours.
    let script = r#"
import json, sys
from datetime import datetime
from memento_client import MementoClient
mc = MementoClient(timegate_uri=sys.argv[1], check_native_timegate=False)
info = mc.get_memento_info(sys.argv[2], datetime(2026, 10, 3, 10, 0, 0))
m = info["mementos"]
out = {k: {"uri": m[k]["uri"][0], "datetime": m[k]["datetime"].strftime("%Y%m%d%H%M%S")}
       for k in ("closest", "first", "last", "next") if k in m}
out["prev"] = "prev" in m
print(json.dumps(out))
"#;
    let out = run(Command::new(clients.join("venv/bin/python")).args([
        "-c",
        script,
        &format!("{base}timegate/"),
        &uri_r,
    ]))
    .await;
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    for (k, i) in [("closest", 0), ("first", 0), ("next", 1), ("last", 2)] {
        assert_eq!(
            v[k]["uri"],
            format!("{base}{}/{uri_r}", STAMPS[i]),
            "{k}: {v:#}"
        );
        assert_eq!(v[k]["datetime"], STAMPS[i], "{k}: {v:#}");
    }
    assert_eq!(v["prev"], false, "{v:#}");

    // The npm client: the mementos of the TimeMap served at PREFIX + URI-R.
    let script = r#"
const memento = require('memento-client')
memento(process.argv[2], {host: process.argv[1]}, (err, links) => {
  if (err) { console.error(err); process.exit(1) }
  console.log(JSON.stringify(links))
})
"#;
    let out = run(Command::new("node")
        .current_dir(clients.join("node"))
        .args(["-e", script, &format!("{base}timemap/link/"), &uri_r]))
    .await;
    let links: Vec<serde_json::Value> = serde_json::from_str(&out).expect(&out);
    let listed: Vec<(String, String)> = links
        .iter()
        .filter(|l| l["rel"].as_str().is_some_and(|r| r.ends_with("memento")))
        .map(|l| {
            (
                l["href"].as_str().unwrap_or_default().to_owned(),
                l["datetime"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = (0..3)
        .map(|i| {
            (
                format!("{base}{}/{uri_r}", STAMPS[i]),
                STATES[i].2.to_owned(),
            )
        })
        .collect();
    assert_eq!(listed, want, "{out}");

    // The republished Resource List and Change List link each copy's original's TimeMap and
    // its memento (Z39.99-2014 §12 link relations `timemap`, `memento`), and validate.
    let before = agg.status().get("kept").expect("kept").republishes;
    until(&agg, "kept", Duration::from_secs(60), |v| {
        v.republishes > before
    })
    .await;
    let (_, caps) = document(&format!(
        "{agg_base}rs/kept/resourcesync/capabilitylist.xml"
    ))
    .await;
    let (_, list) = document(&named(&caps, Capability::ResourceList)).await;
    assert_eq!(list.len(), 1, "{list:?}");
    links_the_archive(&list[0], &base, &uri_r, 2);
    let (_, changes) = document(&named(&caps, Capability::ChangeList)).await;
    let updated: Vec<&Entry> = changes
        .iter()
        .filter(|e| e.links.iter().any(|l| l.rel == "via"))
        .collect();
    assert!(!updated.is_empty(), "{changes:?}");
    links_the_archive(updated[updated.len() - 1], &base, &uri_r, 2);
    agg.drain(Duration::from_secs(5)).await;
}

/// Copies kept in a bucket (the real Garage of `scripts/s3.sh`, `RESOURCESYNC_TEST_S3`): each
/// memento's body is read from the bucket's kept versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mementos_of_copies_in_a_bucket_are_read_from_it() {
    let s3 = crate::server_env("RESOURCESYNC_TEST_S3");
    let bucket = s3.replacen('?', &format!("/memento-{:08x}?", fastrand::u32(..)), 1);
    let src = Server::empty().await;
    let store = tempfile::tempdir().expect("store");
    let (agg, agg_base, uri_r) = three_versions(&src, store.path(), Some(bucket)).await;
    // No copy, no kept body in the folder: they are in the bucket.
    assert!(!store.path().join("kept/doc.txt").exists());
    assert!(!store.path().join("kept/.resourcesync/versions").exists());
    let base = format!("{agg_base}memento/kept/");
    for (i, (body, _, datetime)) in STATES.iter().enumerate() {
        let r = reqwest::get(format!("{base}{}/{uri_r}", STAMPS[i]))
            .await
            .expect("GET memento");
        assert_eq!(r.status(), 200, "memento {i}");
        assert_eq!(header(&r, "memento-datetime"), *datetime);
        assert_eq!(
            r.bytes().await.expect("body").as_ref(),
            *body,
            "memento {i}"
        );
    }
    agg.drain(Duration::from_secs(5)).await;
}

/// Runs a client on a blocking thread; its standard output (it must succeed).
async fn run(cmd: &mut Command) -> String {
    let out = {
        let mut cmd = std::mem::replace(cmd, Command::new("true"));
        tokio::task::spawn_blocking(move || cmd.output().expect("run the client"))
            .await
            .expect("task")
    };
    assert!(
        out.status.success(),
        "the client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `e` links its original `uri_r` (`via`), the original's TimeMap in the archive at `base`,
/// and its memento of state `k` of [`STATES`].
fn links_the_archive(e: &Entry, base: &str, uri_r: &str, k: usize) {
    let link = |rel: &str| {
        e.links
            .iter()
            .find(|l| l.rel == rel)
            .unwrap_or_else(|| panic!("no rel={rel}: {e:?}"))
    };
    assert_eq!(link("via").href, uri_r);
    let timemap = link("timemap");
    assert_eq!(timemap.href, format!("{base}timemap/link/{uri_r}"));
    assert_eq!(
        timemap.mime_type.as_deref(),
        Some("application/link-format")
    );
    let memento = link("memento");
    assert_eq!(memento.href, format!("{base}{}/{uri_r}", STAMPS[k]));
    assert_eq!(
        memento.modified.map(|m| m.to_string()).as_deref(),
        Some(STATES[k].1)
    );
}

/// Measures (ignored; `cargo test -p resourcesync-aggregate --test it
/// memento::many_versions -- --ignored --nocapture`, figures in docs/performance.md): a TimeGate
/// and a TimeMap over `RESOURCESYNC_VERSIONS` (default 10,000) versions of one resource,
/// written into the Source's state after its aggregator is drained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement"]
async fn many_versions() {
    use resourcesync_model::W3cDateTime;
    use resourcesync_store::{Batch, Op, Records as _, SqliteState, VersionRecord};
    let n: u64 = std::env::var("RESOURCESYNC_VERSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let src = Server::empty().await;
    let store = tempfile::tempdir().expect("store");
    let (agg, agg_base, uri_r) = three_versions(&src, store.path(), None).await;
    agg.drain(Duration::from_secs(5)).await;
    let db = store.path().join("kept/.resourcesync/state.sqlite");
    let uri = uri_r.clone();
    tokio::task::spawn_blocking(move || {
        let state = SqliteState::open(&db).expect("state");
        let key = state.resource(&uri).expect("row").expect("row").source;
        let t0 = W3cDateTime::parse("2027-01-01T00:00:00Z")
            .expect("t")
            .timestamp()
            .as_second();
        let rows: Vec<VersionRecord> = (0..n as i64)
            .map(|i| {
                let t = W3cDateTime::parse(
                    &jiff::Timestamp::from_second(t0 + 60 * i)
                        .expect("t")
                        .to_string(),
                )
                .expect("t");
                VersionRecord {
                    source: key.clone(),
                    uri: uri.clone(),
                    seq: 0,
                    digest: format!("sha-256:{:064x}", i + 1),
                    length: 10,
                    datetime: Some(t),
                    first_seen: t,
                    until: None,
                    deleted: false,
                    deleted_datetime: None,
                }
            })
            .collect();
        for chunk in rows.chunks(1000) {
            let mut b = Batch::new();
            for r in chunk {
                b.push(Op::PutVersion(r));
            }
            state.apply(&b).expect("apply");
        }
    })
    .await
    .expect("task");
    let base = format!("{agg_base}memento/kept/");
    let http = no_redirects();
    let timed = |req: reqwest::RequestBuilder| async move {
        let t = Instant::now();
        let r = req.send().await.expect("GET");
        let status = r.status().as_u16();
        let len = r.bytes().await.expect("body").len();
        (status, len, t.elapsed())
    };
    for _ in 0..3 {
        let (s, _, gate) = timed(
            http.get(format!("{base}timegate/{uri_r}"))
                .header("accept-datetime", "Fri, 01 Jan 2027 12:00:00 GMT"),
        )
        .await;
        assert_eq!(s, 302);
        let (s, len, map) = timed(http.get(format!("{base}timemap/link/{uri_r}"))).await;
        assert_eq!(s, 200);
        println!(
            "{} versions: TimeGate {:.1} ms, TimeMap {:.1} ms ({len} bytes)",
            n + 3,
            gate.as_secs_f64() * 1e3,
            map.as_secs_f64() * 1e3
        );
    }
}

/// `keep_versions = 1` (docs/history.md, Retention): after each of the Source's syncs only the
/// current version stays, and the bodies of the others are removed; the TimeMap's rows are the
/// versions kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_versions_prunes_after_each_sync() {
    let src = Server::empty().await;
    set_state(&src, 0);
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"kept\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n\
         versions = true\nkeep_versions = 1\n",
        src.base
    );
    let agg = crate::service::start_local(&text, store.path());
    let uri_r = format!("{}doc.txt", src.base);
    until_versions(&agg, "kept", &uri_r, 1).await;
    let bodies = store.path().join("kept/.resourcesync/versions/sha256");
    let count = || {
        std::fs::read_dir(&bodies)
            .map(|rd| {
                rd.flatten()
                    .map(|d| std::fs::read_dir(d.path()).map(|f| f.count()).unwrap_or(0))
                    .sum::<usize>()
            })
            .unwrap_or(0)
    };
    assert_eq!(count(), 1);
    set_state(&src, 1);
    // Polled with a deadline: the versions become [2] (1 pruned) after the sync that saw it.
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let (a, uri) = (agg.clone(), uri_r.clone());
        let v = tokio::task::spawn_blocking(move || a.versions("kept", &uri, None, None, 100))
            .await
            .expect("task")
            .expect("versions")
            .expect("the Source");
        let seqs: Vec<u64> = v.versions.iter().map(|v| v.seq).collect();
        if seqs == [2] {
            break;
        }
        assert!(
            seqs == [1] || seqs == [1, 2],
            "only the current version is ever kept past a sync: {seqs:?}"
        );
        assert!(Instant::now() < end, "not pruned: {seqs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count(), 1, "the first body is removed with its row");
    agg.drain(Duration::from_secs(5)).await;
}
