//! Sources that do what the specification does not forbid but an aggregator must still get
//! right: two Sources publishing the same URI.

use std::time::Duration;

use resourcesync_aggregate::status::Phase;
use resourcesync_aggregate::{Aggregator, Options, StateChoice};
use resourcesync_testkit::{Reply, Server};

use crate::service::{config, until};

fn md5_hex(b: &[u8]) -> String {
    use md5::Digest as _;
    hex::encode(md5::Md5::digest(b))
}

/// A Source written by hand whose Resource List lists `uri` (served elsewhere) with `body`'s
/// length and digest (Z39.99-2014 §10: nothing says a Source lists only its own URIs).
fn listing(s: &Server, uri: &str, body: &[u8]) {
    crate::route_source(
        s,
        "2026-11-01T00:00:00Z",
        &format!(
            r#"  <url><loc>{uri}</loc><rs:md hash="md5:{h}" length="{l}"/></url>"#,
            h = md5_hex(body),
            l = body.len(),
        ),
    );
}

/// Both Sources list the same URI: each keeps its own copy in its own folder, under its own
/// state, and neither's sync disturbs the other's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sources_publishing_the_same_uri_each_keep_their_copy() {
    let body = b"shared resource\n";
    let host = Server::empty().await;
    host.route("/shared/r.txt", Reply::ok(body.as_slice()));
    let uri = format!("{}shared/r.txt", host.base);
    let (a, b) = (Server::empty().await, Server::empty().await);
    listing(&a, &uri, body);
    listing(&b, &uri, body);
    let store = tempfile::tempdir().expect("store");
    // The copies map under each Source's base URL: the shared host's, given as the base.
    // The shared host is another origin than either Source's: each allows it.
    let text = format!(
        r#"
[[source]]
name = "a"
url = "{}caps.xml"
allow_hosts = ["http://{h}"]

[[source]]
name = "b"
url = "{}caps.xml"
allow_hosts = ["http://{h}"]
"#,
        a.base,
        b.base,
        h = host.addr
    );
    let agg = Aggregator::start(
        &config(&text),
        Options {
            store: store.path().to_owned(),
            state: StateChoice::PerSource,
            worker: "test".into(),
            object_store: None,
            republish: None,
        },
    )
    .expect("start");
    for name in ["a", "b"] {
        let v = until(&agg, name, Duration::from_secs(60), |v| {
            v.phase == Phase::Following || v.phase == Phase::Failing
        })
        .await;
        assert_eq!((v.phase, v.resources), (Phase::Following, 1), "{v:#?}");
    }
    let copies: Vec<_> = walk(store.path())
        .into_iter()
        .filter(|p| p.ends_with("shared/r.txt"))
        .collect();
    assert_eq!(copies.len(), 2, "one copy per Source: {copies:?}");
    for c in &copies {
        assert_eq!(std::fs::read(c).expect("copy"), body);
    }
    assert!(copies.iter().any(|c| c.starts_with(store.path().join("a"))));
    assert!(copies.iter().any(|c| c.starts_with(store.path().join("b"))));
}

/// Every file under `dir`, skipping the state folders.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".resourcesync") {
                continue;
            }
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}
