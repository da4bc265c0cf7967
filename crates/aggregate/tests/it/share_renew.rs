//! Claims renewed while their downloads run (no resource fetched twice in steady state, none
//! lost). Two workers share a PostgreSQL state (`scripts/postgres.sh`,
//! `RESOURCESYNC_TEST_POSTGRES`) and the download work of one Source, with claims that expire
//! after a second (`limits.lease`); one resource's body is held by the Source's server for
//! three leases, until the test releases it. Its claim is renewed meanwhile, so that the other
//! worker never takes it over: every resource is fetched exactly once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use resourcesync_aggregate::status::Phase;
use resourcesync_aggregate::{Aggregator, Options, StateChoice};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tower_http::services::ServeDir;

use crate::service::{config, publish};

/// The resources besides the slow one.
const N: usize = 8;

/// The Source's server: its folder as files, `/slow.txt` sent half at once and half once the
/// test releases it; the GET requests counted per path.
pub(crate) struct Held {
    pub(crate) base: String,
    hits: Arc<Mutex<HashMap<String, u64>>>,
    pub(crate) release: watch::Sender<bool>,
}

impl Held {
    pub(crate) fn hits(&self, path: &str) -> u64 {
        self.hits
            .lock()
            .expect("hits")
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

pub(crate) async fn held_server(dir: &Path) -> Held {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let (release, _) = watch::channel(false);
    let slow: Arc<Vec<u8>> = Arc::new(std::fs::read(dir.join("slow.txt")).expect("slow"));
    let rx = release.subscribe();
    let slow_route = move || {
        let (body, mut rx) = (slow.clone(), rx.clone());
        async move {
            let (mut w, r) = tokio::io::duplex(body.len());
            let length = body.len();
            tokio::spawn(async move {
                let half = body.len() / 2;
                let _ = w.write_all(&body[..half]).await;
                let _ = rx.wait_for(|go| *go).await;
                let _ = w.write_all(&body[half..]).await;
            });
            Response::builder()
                .header(header::CONTENT_LENGTH, length)
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from_stream(tokio_util::io::ReaderStream::new(r)))
                .expect("response")
        }
    };
    let counted = hits.clone();
    let count = move |req: Request, next: Next| {
        let hits = counted.clone();
        async move {
            if req.method() == Method::GET {
                *hits
                    .lock()
                    .expect("hits")
                    .entry(req.uri().path().to_owned())
                    .or_default() += 1;
            }
            next.run(req).await
        }
    };
    let app = Router::new()
        .route("/slow.txt", get(slow_route))
        .fallback_service(ServeDir::new(dir))
        .layer(middleware::from_fn(count));
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Held {
        base: format!("http://{addr}/"),
        hits,
        release,
    }
}

fn worker(store: &Path, pg: &str, name: &str, source: &str, base: &str) -> Aggregator {
    let text = format!(
        r#"
[limits]
lease = "1s"
share_above = 2
timeout = "120s"
backoff_max = "1s"

[[source]]
name = "{source}"
url = "{base}"
schedule = "1s"
concurrency = 2
"#
    );
    Aggregator::start(
        &config(&text),
        Options {
            store: store.to_owned(),
            state: StateChoice::Postgres(pg.to_owned()),
            worker: name.into(),
            object_store: None,
            republish: None,
        },
    )
    .expect("start")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_longer_than_the_lease_is_fetched_once() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..N {
        std::fs::write(
            dir.path().join(format!("r{i}.txt")),
            format!("resource {i}\n"),
        )
        .expect("write");
    }
    let slow: Vec<u8> = (0..64 * 1024u32).map(|i| b'a' + (i % 26) as u8).collect();
    std::fs::write(dir.path().join("slow.txt"), &slow).expect("write");
    let server = held_server(dir.path()).await;
    publish(dir.path(), &server.base).await;

    // A schema of this run only (`agg_NAME`).
    let source = format!("renew_{:08x}", fastrand::u32(..));
    let store = tempfile::tempdir().expect("store");
    // A third worker alive: the fetches are queued whichever of the two starts first (a
    // coordinator alone does them itself).
    crate::share_alone::other_worker_alive(&pg, &source);
    let a = worker(store.path(), &pg, "renew-a", &source, &server.base);
    let b = worker(store.path(), &pg, "renew-b", &source, &server.base);

    // The slow download has begun; its body is held for three leases (each claim of it
    // would have expired twice over), during which no other fetch of it may start.
    let limit = Duration::from_secs(120);
    let end = Instant::now() + limit;
    while server.hits("/slow.txt") == 0 {
        assert!(
            Instant::now() < end,
            "the slow resource was never asked for"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held_until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < held_until {
        assert_eq!(
            server.hits("/slow.txt"),
            1,
            "fetched again while its first download ran"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.release.send_replace(true);

    // The sync ends with every resource copied, by either worker.
    let done = |agg: &Aggregator| {
        agg.status().get(&source).is_some_and(|v| {
            v.phase == Phase::Following
                && !v.running
                && v.resources == (N + 1) as u64
                && v.last_error.is_none()
        })
    };
    while !done(&a) && !done(&b) {
        assert!(
            Instant::now() < end,
            "not synced: {:#?} {:#?}",
            a.status().get(&source),
            b.status().get(&source)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.drain(Duration::from_secs(30)).await;
    b.drain(Duration::from_secs(30)).await;

    assert_eq!(
        server.hits("/slow.txt"),
        1,
        "the slow resource fetched twice"
    );
    for i in 0..N {
        let p = format!("/r{i}.txt");
        assert_eq!(server.hits(&p), 1, "{p} fetched {} times", server.hits(&p));
    }
    let copies: PathBuf = store.path().join(&source);
    assert_eq!(std::fs::read(copies.join("slow.txt")).expect("copy"), slow);
}
