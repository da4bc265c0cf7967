//! What the aggregator shows and serves, against hostile Sources: a Source's HTML and SVG
//! copies are sent sandboxed (`Content-Security-Policy: sandbox`, `nosniff`) on the origin of
//! the operators' page, from a folder and from a bucket; the page keeps a policy of its own;
//! a key in a Source URL's query is never shown (page, API, errors); user information in a
//! Source URL is refused with the line and the way out (`token`).

use std::path::Path;
use std::time::Duration;

use resourcesync_testkit::Server;

use crate::republish::aggregator_in;
use crate::service::{publish, until};

/// A Source whose resources are an HTML page and an SVG image, both with a script.
async fn hostile_source() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let origin = Server::start(dir.path()).await;
    std::fs::write(
        dir.path().join("x.html"),
        "<!DOCTYPE html><script>fetch('/api/sources')</script>",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("y.svg"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>",
    )
    .expect("write");
    publish(dir.path(), &origin.base).await;
    (origin, dir)
}

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The copies `x.html` and `y.svg` of Source `name` at `base`: served whole, sandboxed. A copy
/// in a bucket is sent with the type the store gave the object (`application/octet-stream`: the
/// bucket store does not guess types), which the headers keep from being sniffed.
async fn copies_are_sandboxed(base: &str, name: &str) {
    for (file, ty) in [("x.html", "text/html"), ("y.svg", "image/svg+xml")] {
        let url = format!("{base}rs/{name}/{file}");
        let r = reqwest::get(&url).await.expect("GET");
        assert_eq!(r.status().as_u16(), 200, "{url}");
        let got = header(&r, "content-type");
        assert!(
            got.starts_with(ty) || got == "application/octet-stream",
            "{url}: {got}"
        );
        assert_eq!(header(&r, "content-security-policy"), "sandbox", "{url}");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{url}");
    }
}

fn source(name: &str, url: &str) -> String {
    format!("[[source]]\nname = \"{name}\"\nurl = \"{url}\"\nschedule = \"1h\"\n\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_in_a_folder_are_sandboxed_and_the_page_keeps_its_policy() {
    let (origin, _dir) = hostile_source().await;
    let store = tempfile::tempdir().expect("store");
    let text = source("h", &format!("{}.well-known/resourcesync", origin.base));
    let (agg, base) = aggregator_in(&text, store.path(), None).await;
    until(&agg, "h", Duration::from_secs(60), |v| v.republishes >= 1).await;
    copies_are_sandboxed(&base, "h").await;
    // The operators' page: a policy that lets its own style apply and nothing else run.
    for path in ["", "sources/h"] {
        let r = reqwest::get(format!("{base}{path}")).await.expect("GET");
        assert_eq!(r.status().as_u16(), 200);
        let csp = header(&r, "content-security-policy");
        assert!(
            csp.contains("default-src 'none'") && csp.contains("style-src 'unsafe-inline'"),
            "/{path}: {csp}"
        );
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
    }
    let r = reqwest::get(format!("{base}api/sources"))
        .await
        .expect("GET");
    assert_eq!(header(&r, "x-content-type-options"), "nosniff");
    agg.drain(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_in_a_bucket_are_sandboxed() {
    let s3 = crate::server_env("RESOURCESYNC_TEST_S3");
    let (origin, _dir) = hostile_source().await;
    let store = tempfile::tempdir().expect("work");
    let bucket = s3.replacen('?', &format!("/sandboxed-{:08x}?", fastrand::u32(..)), 1);
    let text = source("h", &format!("{}.well-known/resourcesync", origin.base));
    let (agg, base) = aggregator_in(&text, store.path(), Some(bucket)).await;
    let v = until(&agg, "h", Duration::from_secs(60), |v| v.republishes >= 1).await;
    assert!(v.republish_error.is_none(), "{v:#?}");
    assert!(!store.path().join("h/x.html").exists(), "in the bucket");
    copies_are_sandboxed(&base, "h").await;
    agg.drain(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_a_source_url_is_shown_nowhere() {
    // A Source that answers 404: its error (which quotes the URL) is on the page too.
    let broken = Server::empty().await;
    let store = tempfile::tempdir().expect("store");
    let secret = "S3cr3tK3y";
    let text = source(
        "keyed",
        &format!(
            "{}.well-known/resourcesync?api_key={secret}&X-Amz-Signature={secret}&page=1",
            broken.base
        ),
    );
    let (agg, base) = aggregator_in(&text, store.path(), None).await;
    let v = until(&agg, "keyed", Duration::from_secs(60), |v| {
        v.last_error.is_some()
    })
    .await;
    assert!(
        v.url
            .contains("api_key=REDACTED&X-Amz-Signature=REDACTED&page=1"),
        "{v:#?}"
    );
    for path in [
        "",
        "sources/keyed",
        "api/sources",
        "api/sources/keyed",
        "metrics",
    ] {
        let body = reqwest::get(format!("{base}{path}"))
            .await
            .expect("GET")
            .text()
            .await
            .expect("body");
        assert!(!body.contains(secret), "/{path} shows the key: {body}");
    }
    assert!(
        !format!("{v:?}").contains(secret),
        "the status holds the key: {v:#?}"
    );
    agg.drain(Duration::from_secs(5)).await;
}

#[test]
fn user_information_in_a_source_url_is_refused_with_its_line() {
    let text = "[limits]\nconcurrency = 2\n\n[[source]]\nname = \"a\"\n\
                url = \"https://alice:PASS@museum.example/.well-known/resourcesync\"\n";
    let e = resourcesync_aggregate::Config::parse(text, Path::new("agg.toml"))
        .expect_err("refused")
        .to_string();
    assert!(e.contains("agg.toml") && e.contains(":6"), "{e}");
    assert!(e.contains("token"), "{e}");
    assert!(!e.contains("PASS"), "the error shows the password: {e}");
    // A user name alone (a token given as one) too.
    let text = "[[source]]\nname = \"a\"\nurl = \"https://ghp_T0KEN@museum.example/\"\n";
    let e = resourcesync_aggregate::Config::parse(text, Path::new("agg.toml"))
        .expect_err("refused")
        .to_string();
    assert!(e.contains("token") && !e.contains("ghp_T0KEN"), "{e}");
}
