//! `Http`s of equal options share one `reqwest::Client` (`resourcesync_http::cache`), and so its
//! connections; per-Source settings stay their own.
//!
//! The server speaks HTTP/2 without TLS (h2c, RFC 9113 §3.3) and the clients use prior
//! knowledge: an HTTP/2 connection enters the client's pool once its handshake is done, so the
//! second request finds it there deterministically (an HTTP/1.1 connection goes back to the
//! pool on a task of its own, after the body: a race with the next request).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Response, header::AUTHORIZATION};
use resourcesync_http::{Http, HttpOptions, read_limited};

/// An h2c server on 127.0.0.1:0 answering `ok` to every request; it counts the connections
/// it accepts and keeps each request's `Authorization` header.
struct H2c {
    addr: SocketAddr,
    accepted: Arc<AtomicU64>,
    authorization: Arc<Mutex<Vec<Option<String>>>>,
}

impl H2c {
    async fn start() -> H2c {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicU64::new(0));
        let authorization = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (accepted.clone(), authorization.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        let auth = req
                            .headers()
                            .get(AUTHORIZATION)
                            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
                        seen.lock().expect("seen").push(auth);
                        let resp = Response::builder().status(200).body(()).expect("response");
                        if let Ok(mut body) = respond.send_response(resp, false) {
                            let _ = body.send_data(bytes::Bytes::from_static(b"ok"), true);
                        }
                    }
                });
            }
        });
        H2c {
            addr,
            accepted,
            authorization,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn h2(opts: HttpOptions) -> HttpOptions {
    HttpOptions {
        http2_prior_knowledge: true,
        retries: 0,
        ..opts
    }
}

async fn fetch(http: &Http, url: &str) {
    let resp = http.get_once(url, None).await.expect("200");
    let body = read_limited(url, resp, 16).await.expect("body");
    assert_eq!(body, b"ok");
}

#[tokio::test]
async fn equal_options_share_one_connection() {
    let s = H2c::start().await;
    let first = Http::new(h2(HttpOptions::default())).expect("client");
    fetch(&first, &s.url("/a")).await;
    // The aggregator drops a Source's `Http` after its sync: the client stays in the cache.
    drop(first);
    let second = Http::new(h2(HttpOptions::default())).expect("client");
    fetch(&second, &s.url("/b")).await;
    assert_eq!(
        s.accepted(),
        1,
        "the second Http reused the first one's connection"
    );
}

#[tokio::test]
async fn other_options_get_another_client() {
    let s = H2c::start().await;
    let first = Http::new(h2(HttpOptions::default())).expect("client");
    fetch(&first, &s.url("/a")).await;
    let second = Http::new(h2(HttpOptions {
        connect_timeout: Duration::from_secs(7),
        ..HttpOptions::default()
    }))
    .expect("client");
    fetch(&second, &s.url("/b")).await;
    assert_eq!(s.accepted(), 2, "another connect timeout, another client");
    fetch(&first, &s.url("/c")).await;
    assert_eq!(s.accepted(), 2, "each client kept its connection");
}

#[tokio::test]
async fn the_token_stays_with_its_source() {
    let s = H2c::start().await;
    let with_token = Http::new(h2(HttpOptions {
        token: Some("secret".into()),
        ..HttpOptions::default()
    }))
    .expect("client");
    with_token.trust_host_of(&s.url("/"));
    let without = Http::new(h2(HttpOptions::default())).expect("client");
    fetch(&with_token, &s.url("/a")).await;
    fetch(&without, &s.url("/b")).await;
    fetch(&with_token, &s.url("/c")).await;
    assert_eq!(s.accepted(), 1, "one client, one connection");
    assert_eq!(
        *s.authorization.lock().expect("seen"),
        [
            Some("Bearer secret".to_owned()),
            None,
            Some("Bearer secret".to_owned())
        ]
    );
}

/// The CPU time of this process so far (user and system, `/proc/self/stat`, in clock ticks of
/// 10 ms).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which ends with the last ')'.
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

/// What `Http::new` costs, built 50 times with options all different (each builds a client,
/// as every construction did before the cache) and 50 times with equal ones (their client
/// built once before). Run in release:
/// `cargo test --release -p resourcesync-http --test it shared::construction_cost -- --ignored
/// --nocapture`.
#[tokio::test]
#[ignore = "a measurement, not a check"]
async fn construction_cost() {
    const N: u32 = 50;
    let measure = |what: &str, opts: &dyn Fn(u32) -> HttpOptions| {
        let (cpu, wall) = (cpu_ticks(), std::time::Instant::now());
        for i in 0..N {
            drop(Http::new(opts(i)).expect("client"));
        }
        let (cpu, wall) = (cpu_ticks() - cpu, wall.elapsed());
        println!(
            "{what}: {N} in {wall:?} ({:?} each), {} ms CPU ({:.2} ms each)",
            wall / N,
            cpu * 10,
            (cpu * 10) as f64 / f64::from(N)
        );
    };
    measure("all different (a client each)", &|i| HttpOptions {
        request_timeout: Duration::from_secs(600) + Duration::from_millis(u64::from(i) + 1),
        ..HttpOptions::default()
    });
    // The first of equal options builds their client: built here, the 50 find it.
    drop(Http::new(HttpOptions::default()).expect("client"));
    measure("all equal (one client)", &|_| HttpOptions::default());
}
