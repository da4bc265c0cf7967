//! The service against real Sources on loopback: ours (a directory published by
//! `resourcesync-source`, served as files), one written by hand, one that answers 404 and one
//! that never answers. The good ones are baselined and then followed incrementally while the
//! bad ones fail on their own; a reload adds and removes Sources; the page, the JSON API and
//! the metrics say what happens. Synchronisation is by polling with deadlines.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use resourcesync_aggregate::status::{Phase, SourceView};
use resourcesync_aggregate::{Aggregator, Config, Options, StateChoice};
use resourcesync_source::{Source, SourceConfig};
use resourcesync_testkit::{Reply, Server};

/// Publishes `dir` as a Source at `base` (documents inside it), as `resourcesync publish`.
pub(crate) async fn publish(dir: &Path, base: &str) {
    let (dir, base) = (dir.to_owned(), base.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut s = Source::open(SourceConfig::new(&dir, &base)).expect("open source");
        s.scan().expect("scan");
        s.publish().expect("publish");
    })
    .await
    .expect("publish task");
}

/// A directory of `n` files published and served as files.
async fn our_source(n: usize) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path()).await;
    for i in 0..n {
        std::fs::write(
            dir.path().join(format!("r{i:03}.txt")),
            format!("resource {i}\n"),
        )
        .expect("write");
    }
    publish(dir.path(), &server.base).await;
    (server, dir)
}

fn md5_hex(b: &[u8]) -> String {
    use md5::Digest as _;
    hex::encode(md5::Md5::digest(b))
}

/// A Source written by hand (Z39.99-2014 §6.3.2, §9, §10): a Source Description, a
/// Capability List and a Resource List of two resources.
pub(crate) async fn hand_written() -> Server {
    let s = Server::empty().await;
    let b = s.base.clone();
    let (x, y) = (b"first resource\n".as_slice(), b"second\n".as_slice());
    crate::route_source(
        &s,
        "2026-11-01T00:00:00Z",
        &format!(
            r#"  <url><loc>{b}x/one.txt</loc><lastmod>2026-10-01T00:00:00Z</lastmod><rs:md hash="md5:{hx}" length="{lx}"/></url>
  <url><loc>{b}x/two.txt</loc><lastmod>2026-10-02T00:00:00Z</lastmod><rs:md hash="md5:{hy}" length="{ly}"/></url>"#,
            hx = md5_hex(x),
            lx = x.len(),
            hy = md5_hex(y),
            ly = y.len(),
        ),
    );
    s.route("/x/one.txt", Reply::ok(x));
    s.route("/x/two.txt", Reply::ok(y));
    s
}

/// A listener that accepts connections and never answers.
async fn hanging() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let h = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = l.accept().await {
            held.push(c);
        }
    });
    (addr, h)
}

/// An aggregator over `text`, its copies and states (SQLite, one per Source) under `store`.
pub(crate) fn start_local(text: &str, store: &std::path::Path) -> Arc<Aggregator> {
    Arc::new(
        Aggregator::start(
            &config(text),
            Options {
                store: store.to_owned(),
                state: StateChoice::PerSource,
                worker: "test".into(),
                object_store: None,
                republish: None,
            },
        )
        .expect("start"),
    )
}

pub(crate) fn config(text: &str) -> Config {
    Config::parse(text, Path::new("test.toml")).expect("config")
}

/// Polls `f` on the status of `name` until it holds, for at most `limit`.
pub(crate) async fn until(
    agg: &Aggregator,
    name: &str,
    limit: Duration,
    f: impl Fn(&SourceView) -> bool,
) -> SourceView {
    let end = Instant::now() + limit;
    loop {
        let v = agg.status().get(name);
        if let Some(v) = v.as_ref().filter(|v| f(v)) {
            return v.clone();
        }
        assert!(Instant::now() < end, "{name}: not within {limit:?}: {v:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("GET");
    (r.status().as_u16(), r.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_sources_are_followed_while_bad_ones_fail_on_their_own() {
    let (ours, ours_dir) = our_source(20).await;
    let hand = hand_written().await;
    let broken = Server::empty().await;
    let (stuck, _stuck_task) = hanging().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        r#"
[limits]
concurrency = 3
timeout = "2s"

[[source]]
name = "ours"
url = "{}.well-known/resourcesync"
schedule = "1s"
delete = true

[[source]]
name = "hand"
url = "{}.well-known/resourcesync"
schedule = "1s"

[[source]]
name = "broken"
url = "{}.well-known/resourcesync"
schedule = "1s"

[[source]]
name = "stuck"
url = "http://{stuck}/.well-known/resourcesync"
schedule = "1s"
"#,
        ours.base, hand.base, broken.base
    );
    let agg = start_local(&text, store.path());
    let limit = Duration::from_secs(60);
    // Z39.99-2014 §10: each good Source baselined, whatever the others do.
    let v = until(&agg, "ours", limit, |v| {
        v.phase == Phase::Following && v.resources == 20
    })
    .await;
    assert!(v.bytes > 0 && v.last_error.is_none(), "{v:#?}");
    until(&agg, "hand", limit, |v| {
        v.phase == Phase::Following && v.resources == 2
    })
    .await;
    for i in [0, 7, 19] {
        let p = format!("r{i:03}.txt");
        assert_eq!(
            std::fs::read(store.path().join("ours").join(&p)).expect("copy"),
            std::fs::read(ours_dir.path().join(&p)).expect("original"),
            "{p}"
        );
    }
    assert_eq!(
        std::fs::read(store.path().join("hand/x/one.txt")).expect("copy"),
        b"first resource\n"
    );
    bad_sources_fail(&agg, limit).await;

    // Incremental (§12): a change at the Source reaches the copy by the next sync.
    changes_reach_the_copy(
        &agg,
        &store.path().join("ours"),
        ours_dir.path(),
        &ours.base,
        limit,
    )
    .await;

    // The page, the JSON API and the metrics.
    page_api_and_metrics(&agg).await;

    // A reload: `hand` and `stuck` go, `second` comes; nothing restarts.
    let (second, _second_dir) = our_source(5).await;
    let syncs_before = agg.status().get("ours").map(|v| v.syncs).unwrap_or(0);
    agg.reload(&config(&format!(
        "[[source]]\nname = \"ours\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\ndelete = true\n\n\
         [[source]]\nname = \"broken\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n\n\
         [[source]]\nname = \"second\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n",
        ours.base, broken.base, second.base
    )))
    .expect("reload");
    until(&agg, "second", limit, |v| {
        v.phase == Phase::Following && v.resources == 5
    })
    .await;
    let names: Vec<String> = agg
        .status()
        .snapshot()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["broken", "ours", "second"]);
    // `ours` kept its counters (it was not restarted).
    assert!(
        agg.status()
            .get("ours")
            .is_some_and(|v| v.syncs >= syncs_before)
    );

    // Drain: returns within its grace even with syncs running.
    let t = Instant::now();
    agg.drain(Duration::from_secs(5)).await;
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
}

/// A Source that answers 404 and one that never answers fail on their own; the one that never
/// answers backs off.
async fn bad_sources_fail(agg: &Aggregator, limit: Duration) {
    let b = until(agg, "broken", limit, |v| v.phase == Phase::Failing).await;
    assert!(
        b.last_error.as_deref().is_some_and(|e| e.contains("404")),
        "{b:#?}"
    );
    let s = until(agg, "stuck", limit, |v| v.phase == Phase::Failing).await;
    assert!(
        s.last_error
            .as_deref()
            .is_some_and(|e| e.contains("time limit") || e.contains("timed out")),
        "{s:#?}"
    );
    // A failing Source backs off: its next try is further away than its schedule.
    assert!(s.next_sync.is_some() || s.running, "{s:#?}");
}

/// A change at the Source (one updated, one created, one deleted) reaches the copy by the
/// next sync, an incremental one.
async fn changes_reach_the_copy(
    agg: &Aggregator,
    copy: &Path,
    src: &Path,
    base: &str,
    limit: Duration,
) {
    std::fs::write(src.join("r003.txt"), "changed\n").expect("write");
    std::fs::write(src.join("new.txt"), "new\n").expect("write");
    std::fs::remove_file(src.join("r004.txt")).expect("remove");
    publish(src, base).await;
    let end = Instant::now() + limit;
    while !(std::fs::read(copy.join("r003.txt")).is_ok_and(|b| b == b"changed\n")
        && copy.join("new.txt").exists()
        && !copy.join("r004.txt").exists())
    {
        assert!(Instant::now() < end, "the change did not reach the copy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v = until(agg, "ours", limit, |v| v.syncs >= 2 && v.resources == 20).await;
    assert!(
        v.recent
            .iter()
            .any(|e| e.summary.starts_with("incremental")),
        "{v:#?}"
    );
}

/// The page lists every Source, the API gives their phases, the metrics whether each is up.
async fn page_api_and_metrics(agg: &Arc<Aggregator>) {
    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;
    let (st, page) = get(&format!("http://{web}/")).await;
    assert_eq!(st, 200);
    for n in ["ours", "hand", "broken", "stuck"] {
        assert!(
            page.contains(&format!("sources/{n}\"")),
            "{n} missing from the page"
        );
    }
    assert!(page.contains("failing since"), "{page}");
    assert_eq!(
        get(&format!("http://{web}/healthz")).await,
        (200, "ok\n".into())
    );
    let (st, api) = get(&format!("http://{web}/api/sources")).await;
    assert_eq!(st, 200);
    let api: serde_json::Value = serde_json::from_str(&api).expect("JSON");
    let phases: Vec<(String, String)> = api
        .as_array()
        .expect("array")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or("").into(),
                s["phase"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert!(
        phases.contains(&("ours".into(), "following".into())),
        "{phases:?}"
    );
    assert!(
        phases.contains(&("broken".into(), "failing".into())),
        "{phases:?}"
    );
    let (st, one) = get(&format!("http://{web}/sources/broken")).await;
    assert_eq!(st, 200);
    assert!(one.contains("404"), "{one}");
    assert_eq!(get(&format!("http://{web}/sources/nobody")).await.0, 404);
    let (st, m) = get(&format!("http://{web}/metrics")).await;
    assert_eq!(st, 200);
    assert!(
        m.contains("resourcesync_aggregate_up{source=\"broken\"} 0"),
        "{m}"
    );
    assert!(
        m.contains("resourcesync_aggregate_up{source=\"ours\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("resourcesync_aggregate_resources{source=\"hand\"} 2"),
        "{m}"
    );
}

/// The test S3 server's URL (scripts/s3.sh: Garage on 127.0.0.1), with `prefix` after the
/// bucket.
fn s3_url(prefix: &str) -> String {
    let url = crate::server_env("RESOURCESYNC_TEST_S3");
    match url.split_once('?') {
        Some((base, query)) => format!("{}/{prefix}?{query}", base.trim_end_matches('/')),
        None => format!("{}/{prefix}", url.trim_end_matches('/')),
    }
}

/// The copies in an S3-compatible bucket (Garage), the state local; the
/// engine does not know which store it writes to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_go_to_an_s3_bucket() {
    use resourcesync_store::{RelPath, Store as _};
    let (ours, ours_dir) = our_source(12).await;
    let work = tempfile::tempdir().expect("work");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let prefix = format!("agg-{}-{nanos}", std::process::id());
    let text = format!(
        "[[source]]\nname = \"ours\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\ndelete = true\n",
        ours.base
    );
    let agg = Aggregator::start(
        &config(&text),
        Options {
            store: work.path().to_owned(),
            object_store: Some(s3_url(&prefix)),
            state: StateChoice::PerSource,
            worker: "test".into(),
            republish: None,
        },
    )
    .expect("start");
    let limit = Duration::from_secs(60);
    until(&agg, "ours", limit, |v| {
        v.phase == Phase::Following && v.resources == 12
    })
    .await;
    let bucket =
        resourcesync_store::S3Store::open(&s3_url(&format!("{prefix}/ours"))).expect("bucket");
    let check = tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let mut body = Vec::new();
        bucket
            .get(&RelPath::parse("r003.txt").expect("key"))
            .expect("object")
            .read_to_end(&mut body)
            .expect("read");
        let meta = bucket
            .head(&RelPath::parse("r003.txt").expect("key"))
            .expect("head")
            .expect("there");
        let mut listed = 0;
        bucket
            .list(None, &mut |k| {
                k.expect("a key");
                listed += 1;
                Ok(std::ops::ControlFlow::Continue(()))
            })
            .expect("list");
        (body, meta, listed, bucket)
    })
    .await
    .expect("task");
    assert_eq!(check.0, b"resource 3\n");
    // The object carries what the copy is of.
    assert!(
        check
            .1
            .uri
            .as_deref()
            .is_some_and(|u| u.ends_with("/r003.txt")),
        "{:?}",
        check.1
    );
    assert_eq!(
        check.2, 12,
        "only the copies, nothing else under the prefix"
    );
    // Nothing of the copies on the local disk: only the state and scratch space.
    assert!(!work.path().join("ours/r003.txt").exists());
    assert!(work.path().join("ours/.resourcesync/state.sqlite").exists());

    // Incremental: an update and a delete reach the bucket.
    std::fs::write(ours_dir.path().join("r003.txt"), "changed\n").expect("write");
    std::fs::remove_file(ours_dir.path().join("r004.txt")).expect("remove");
    publish(ours_dir.path(), &ours.base).await;
    let bucket = check.3;
    let bucket = std::sync::Arc::new(bucket);
    let end = Instant::now() + limit;
    loop {
        let b = bucket.clone();
        let (body, gone) = tokio::task::spawn_blocking(move || {
            use std::io::Read as _;
            let mut body = Vec::new();
            if let Ok(mut r) = b.get(&RelPath::parse("r003.txt").expect("key")) {
                let _ = r.read_to_end(&mut body);
            }
            let gone = b
                .head(&RelPath::parse("r004.txt").expect("key"))
                .expect("head")
                .is_none();
            (body, gone)
        })
        .await
        .expect("task");
        if body == b"changed\n" && gone {
            break;
        }
        assert!(Instant::now() < end, "the change did not reach the bucket");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    agg.drain(Duration::from_secs(5)).await;
}
