//! Nothing a served Source writes itself (its state database, the embedded hub's database, their
//! SQLite companions, its documents and their temporary files) is ever listed, served or seen as
//! a change, wherever the state and the documents are placed: inside the published directory
//! too (security issue, item 1). The embedded hub has a subscriber, so that its database is
//! written to with every notification. Batches are run by hand (no watcher); deliveries are
//! awaited with a deadline.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::response::IntoResponse;
use resourcesync_model::{DocumentReader, ReadOptions};
use resourcesync_source::server::{self, HubChoice, Running, ServeOptions};
use resourcesync_source::watch::WatchOptions;
use resourcesync_source::{Source, SourceConfig};
use resourcesync_websub::hub::HubEvent;
use resourcesync_websub::subscriber::VerificationRequest;
use tokio::sync::mpsc;

const DEADLINE: Duration = Duration::from_secs(20);

/// Batches run on an idle Source, each of which must record nothing.
const IDLE_BATCHES: usize = 5;

/// The files the test writes into the published directory: the only ones to be published.
const USER_FILES: [&str; 3] = ["a.txt", "sub/b.txt", "c.txt"];

/// A WebSub subscriber that agrees to every verification and passes on every delivery.
async fn callback_server() -> (String, mpsc::UnboundedReceiver<Bytes>) {
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let app = Router::new()
        .fallback(
            |State(tx): State<mpsc::UnboundedSender<Bytes>>, req: Request| async move {
                let q = req.uri().query().unwrap_or("").to_owned();
                let (parts, body) = req.into_parts();
                if parts.method == axum::http::Method::GET {
                    let v = VerificationRequest::parse(&q).expect("a hub request");
                    return v.answer(true).into_response();
                }
                let _ = tx.send(axum::body::to_bytes(body, 1 << 24).await.unwrap());
                "ok".into_response()
            },
        )
        .with_state(tx);
    let addr = resourcesync_testkit::serve(app).await;
    (format!("http://{addr}/cb"), rx)
}

/// The `<loc>`s of a document.
fn locs(body: &[u8]) -> Vec<String> {
    let mut r = DocumentReader::new(body, ReadOptions::named("document")).unwrap();
    let mut out = Vec::new();
    while let Some(e) = r.next_entry().unwrap() {
        out.push(e.loc);
    }
    out
}

/// Every file under `dir` (dotfiles too), relative, with `/` separators.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                todo.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_owned();
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// Where the state and the documents go, relative to the published directory.
struct Placement {
    state: Option<&'static str>,
    out: Option<&'static str>,
    include_hidden: bool,
    /// Files the Source must have written into the directory (so the check is not vacuous).
    expect_inside: &'static [&'static str],
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn get(client: &reqwest::Client, url: &str) -> (u16, Vec<u8>) {
    let r = client.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.bytes().await.unwrap().to_vec())
}

/// Serves a directory with the embedded hub and one subscriber, placed as `p` says, and checks
/// that only [`USER_FILES`] are ever published or served, and that an idle Source records no
/// change and sends no notification.
async fn only_the_published_files_leave(p: Placement) {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("served");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), "a").unwrap();
    std::fs::write(dir.join("sub/b.txt"), "b").unwrap();
    let listener = server::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let mut cfg = SourceConfig::new(&dir, &base);
    cfg.state = p.state.map(|s| dir.join(s));
    cfg.out = p.out.map(|o| {
        if o.is_empty() {
            dir.clone()
        } else {
            dir.join(o)
        }
    });
    cfg.include_hidden = p.include_hidden;
    server::prepare_config(&mut cfg);
    let source = Source::open(cfg).unwrap();
    let opts = ServeOptions {
        watch: WatchOptions {
            use_watcher: false,
            rescan_interval: Duration::from_secs(3600),
            ..WatchOptions::default()
        },
        ..ServeOptions::default()
    };
    let running: Running = server::start_with(source, listener, opts, Some(HubChoice::Embedded))
        .await
        .unwrap();
    let hub = running.hub().unwrap().clone();
    let client = resourcesync_websub::hub::http_client(Duration::from_secs(10)).unwrap();

    // A subscriber: from now on every notification is written to the hub's database.
    let topic = format!("{base}resourcesync/change-notification");
    let mut events = hub.events();
    let (cb, mut rx) = callback_server().await;
    resourcesync_websub::subscribe(
        &client,
        &format!("{base}resourcesync/hub"),
        &topic,
        &cb,
        Some("s3cret"),
        None,
    )
    .await
    .unwrap();
    tokio::time::timeout(DEADLINE, async {
        while !matches!(events.recv().await, Ok(HubEvent::Subscribed { .. })) {}
    })
    .await
    .unwrap();

    // One change, notified and delivered; the hub has then written its database.
    std::fs::write(dir.join("c.txt"), "c").unwrap();
    let first = running.publisher().batch(false).await.unwrap();
    assert_eq!(first.scan.created, 1, "{:?}", first.scan);
    tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .unwrap()
        .unwrap();
    wait_for("the hub to settle", || hub.pending().unwrap() == 0).await;

    // Idle: rescans record nothing (the databases written meanwhile are not changes), and
    // nothing is published to the hub.
    let mut events = hub.events();
    for i in 0..IDLE_BATCHES {
        let r = running.publisher().batch(false).await.unwrap();
        assert!(
            !r.scan.changed(),
            "batch {i} of an idle Source recorded changes: {} created, {} updated, {} deleted",
            r.scan.created,
            r.scan.updated,
            r.scan.deleted
        );
        wait_for("the hub to settle", || hub.pending().unwrap() == 0).await;
    }
    let published: Vec<HubEvent> = std::iter::from_fn(|| events.try_recv().ok())
        .filter(|e| matches!(e, HubEvent::Published { .. }))
        .collect();
    assert!(
        published.is_empty(),
        "an idle Source notified: {published:?}"
    );
    assert!(rx.try_recv().is_err(), "a delivery from an idle Source");

    // Listed: exactly the files the test wrote, in the Resource List and the Change Lists.
    running.publisher().batch(true).await.unwrap();
    let want: BTreeSet<String> = USER_FILES.iter().map(|f| format!("{base}{f}")).collect();
    let (_, cl) = get(&client, &format!("{base}resourcesync/capabilitylist.xml")).await;
    let docs = locs(&cl);
    let rl = docs
        .iter()
        .find(|u| u.contains("/resourcelists/"))
        .expect("a Resource List");
    let (status, rl) = get(&client, rl).await;
    assert_eq!(status, 200);
    let listed: BTreeSet<String> = locs(&rl).into_iter().collect();
    assert_eq!(
        listed, want,
        "the Resource List lists what the Source wrote"
    );
    let (_, index) = get(&client, &format!("{base}resourcesync/changelist-index.xml")).await;
    for part in locs(&index) {
        let (_, cl) = get(&client, &part).await;
        for loc in locs(&cl) {
            assert!(want.contains(&loc), "{loc} in the Change List {part}");
        }
    }

    // Served: none of the files the Source wrote into the directory.
    let written: Vec<String> = files_under(&dir)
        .into_iter()
        .filter(|f| !USER_FILES.contains(&f.as_str()))
        .collect();
    for f in p.expect_inside {
        assert!(written.iter().any(|w| w == f), "{f} not in {written:?}");
    }
    // With the documents written into the directory itself, `resourcesync/…` and
    // `.well-known/resourcesync` are the documents' own URLs: served as documents, never as
    // resources.
    let documents_at_their_urls = p.out == Some("");
    for f in &written {
        if documents_at_their_urls
            && (f.starts_with("resourcesync/") || f.starts_with(".well-known/"))
        {
            continue;
        }
        let (status, body) = get(&client, &format!("{base}{f}")).await;
        assert_eq!(status, 404, "{f} is served");
        assert!(!String::from_utf8_lossy(&body).contains("SQLite format"));
    }
    for f in USER_FILES {
        assert_eq!(get(&client, &format!("{base}{f}")).await.0, 200, "{f}");
    }
    running.shutdown().await.unwrap();
}

/// `--state DIR/state.sqlite`: the databases sit directly in the published directory, beside
/// the resources, and the documents in `DIR/state-www`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_file_in_the_directory() {
    only_the_published_files_leave(Placement {
        state: Some("state.sqlite"),
        out: None,
        include_hidden: false,
        expect_inside: &[
            "state.sqlite",
            "state.sqlite-wal",
            "state.sqlite-shm",
            "hub.sqlite",
            "hub.sqlite-wal",
            "hub.sqlite-shm",
            "state-www/resourcesync/capabilitylist.xml",
        ],
    })
    .await;
}

/// `--state DIR/data/state.sqlite`: a folder of the directory holds the databases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_file_in_a_subfolder() {
    only_the_published_files_leave(Placement {
        state: Some("data/state.sqlite"),
        out: None,
        include_hidden: false,
        expect_inside: &[
            "data/state.sqlite",
            "data/hub.sqlite",
            "data/hub.sqlite-wal",
        ],
    })
    .await;
}

/// The default state (`DIR/.resourcesync`), with dotfiles published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_state_with_dotfiles_published() {
    only_the_published_files_leave(Placement {
        state: None,
        out: None,
        include_hidden: true,
        expect_inside: &[
            ".resourcesync/state.sqlite",
            ".resourcesync/hub.sqlite",
            ".resourcesync/hub.sqlite-wal",
            ".resourcesync/www/resourcesync/capabilitylist.xml",
        ],
    })
    .await;
}

/// `--state DIR/state.sqlite --out DIR` with dotfiles published: documents, the Source
/// Description and the databases all among the resources.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_and_documents_in_the_directory_with_dotfiles() {
    only_the_published_files_leave(Placement {
        state: Some("state.sqlite"),
        out: Some(""),
        include_hidden: true,
        expect_inside: &[
            "state.sqlite",
            "hub.sqlite",
            "hub.sqlite-wal",
            ".well-known/resourcesync",
            "resourcesync/capabilitylist.xml",
            "resourcesync/notifications/change-notification.xml",
        ],
    })
    .await;
}

/// `--state DIR/db.sqlite --out DIR/www`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_file_and_output_folder_in_the_directory() {
    only_the_published_files_leave(Placement {
        state: Some("db.sqlite"),
        out: Some("www"),
        include_hidden: false,
        expect_inside: &[
            "db.sqlite",
            "db.sqlite-wal",
            "hub.sqlite",
            "hub.sqlite-wal",
            "www/resourcesync/capabilitylist.xml",
        ],
    })
    .await;
}
