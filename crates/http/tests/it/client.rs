//! The client against the test kit's Source server on loopback.

use std::time::Duration;

use resourcesync_http::{Category, Error, Http, HttpOptions, Proxy, read_limited};
use resourcesync_testkit::{Fault, Reply, Server};

fn fast(opts: HttpOptions) -> Http {
    Http::new(HttpOptions {
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(10),
        ..opts
    })
    .expect("client")
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[tokio::test]
async fn requests_go_through_the_proxy_only_when_asked() {
    let proxy = Server::empty().await;
    proxy.route("/doc", Reply::ok("through the proxy"));
    let target = format!("http://127.0.0.1:{}/doc", closed_port());

    let via = fast(HttpOptions {
        proxy: Proxy::Url(proxy.base.clone()),
        retries: 0,
        ..HttpOptions::default()
    });
    let resp = via
        .get_once(&target, None)
        .await
        .expect("through the proxy");
    let body = read_limited(&target, resp, 1024).await.expect("body");
    assert_eq!(body, b"through the proxy");
    assert_eq!(proxy.hits("/doc"), 1);

    let direct = fast(HttpOptions {
        retries: 0,
        ..HttpOptions::default()
    });
    let e = direct
        .get_once(&target, None)
        .await
        .expect_err("nothing there");
    assert_eq!(e.category(), Category::Retry, "{e}");
    assert_eq!(proxy.hits("/doc"), 1, "the default client used no proxy");
}

#[tokio::test]
async fn retries_follow_the_category() {
    let s = Server::empty().await;
    s.route("/flaky", Reply::ok("at last"));
    s.fault("/flaky", Fault::Flaky(503, 2));
    s.route("/gone", Reply::status(404));
    let http = fast(HttpOptions {
        retries: 3,
        ..HttpOptions::default()
    });
    let url = s.url("/flaky");
    let resp = http
        .with_retries(|| http.get_once(&url, None))
        .await
        .expect("retried past two 503");
    assert_eq!(resp.status(), 200);
    assert_eq!(s.hits("/flaky"), 3);

    let url = s.url("/gone");
    let e = http
        .with_retries(|| http.get_once(&url, None))
        .await
        .expect_err("404");
    assert!(matches!(e, Error::Status { status: 404, .. }), "{e}");
    assert_eq!(e.category(), Category::Skip);
    assert_eq!(s.hits("/gone"), 1, "a 404 is not retried");
}

#[tokio::test]
async fn redirects_are_limited() {
    let s = Server::empty().await;
    s.fault("/a", Fault::Redirect(s.url("/b")));
    s.fault("/b", Fault::Redirect(s.url("/a")));
    let http = fast(HttpOptions {
        max_redirects: 3,
        retries: 0,
        ..HttpOptions::default()
    });
    let e = http.get_once(&s.url("/a"), None).await.expect_err("a loop");
    assert!(
        e.to_string().contains("too many redirects (more than 3)"),
        "{e}"
    );
    assert_eq!(e.category(), Category::Skip);
    assert_eq!(
        s.hits("/a") + s.hits("/b"),
        4,
        "the request and 3 redirects"
    );
}

#[tokio::test]
async fn bodies_past_the_limit_are_refused() {
    let s = Server::empty().await;
    s.route("/big", Reply::ok(vec![b'x'; 4096]));
    s.fault(
        "/chunked",
        Fault::Huge {
            prefix: Vec::new(),
            total: 1 << 20,
            declare_length: false,
        },
    );
    let http = fast(HttpOptions::default());
    for path in ["/big", "/chunked"] {
        let url = s.url(path);
        let resp = http.get_once(&url, None).await.expect("200");
        let e = read_limited(&url, resp, 1000).await.expect_err("too large");
        assert!(
            matches!(e, Error::TooLarge { limit: 1000, .. }),
            "{path}: {e}"
        );
    }
}
