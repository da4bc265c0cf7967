//! `resourcesync serve` against hostile and heavy clients: a load of keep-alive
//! clients for 30 s with every answer checked (0 errors); traversal in every spelling; huge
//! request heads (431 or a clean close, and the server still answers); 10,000 idle connections
//! with the server's memory growth measured; the state directory never reachable. Linux only
//! (the server's memory is read from /proc).
//!
//! The load generator is written here in Rust rather than driving `wrk`: nothing to install in
//! CI (so the test cannot be skipped for a missing tool), and every response's status and body
//! are checked against the file served, which `wrk` does not do. `bench/serve-vs-nginx.sh`
//! remains the throughput benchmark. `Server` and `load` (in `robust_support`) take any command
//! and paths: `hub_under_load.rs` puts `resourcesync hub` under the same load.

#![cfg(target_os = "linux")]

use crate::robust_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use robust_support::*;

#[test]
fn serve_under_load_for_30_s_answers_every_request() {
    let secs = std::env::var("RESOURCESYNC_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = served_dir();
    let server = serve(dir.path());
    let mut targets: Vec<Req> = (0..50)
        .map(|i| {
            let p = format!("d{}/r{i}.txt", i % 5);
            let body = std::fs::read(dir.path().join(&p)).expect("read");
            Req::get(format!("/{p}"), Some(body))
        })
        .collect();
    for doc in [
        "/.well-known/resourcesync",
        "/resourcesync/capabilitylist.xml",
        "/robots.txt",
        "/",
    ] {
        targets.push(Req::get(doc, None));
    }
    let started = Instant::now();
    let l = load(&server.addr, &targets, 8, secs);
    let rate = l.requests as f64 / started.elapsed().as_secs_f64();
    eprintln!(
        "serve: {} requests in {secs} s ({rate:.0}/s), {} errors",
        l.requests, l.errors
    );
    assert_eq!(l.errors, 0, "first error: {:?}", l.first_error);
    assert!(l.requests > 1000, "{l:?}");
}

#[test]
fn traversal_and_the_state_directory_are_never_served() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("served");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("ok.txt"), "ok").expect("write");
    std::fs::write(parent.path().join("secret.txt"), "TOPSECRET").expect("write");
    std::os::unix::fs::symlink(parent.path().join("secret.txt"), dir.join("link.txt"))
        .expect("symlink");
    let server = serve(&dir);
    assert_eq!(get(&server.addr, "/ok.txt"), Some((200, b"ok".to_vec())));
    let attacks = [
        "/../secret.txt",
        "/served/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/..%2fsecret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/ok.txt%00.html",
        "//secret.txt",
        "/link.txt",
        "/.resourcesync/state.sqlite",
        "/%2eresourcesync/state.sqlite",
        "/.resourcesync/www/resourcesync/capabilitylist.xml",
        "/.resourcesync",
        "/.resourcesync/",
        "../secret.txt",
        "http://127.0.0.1/../secret.txt",
        "*",
    ];
    for a in attacks {
        let r = get(&server.addr, a);
        eprintln!("{a}: {:?}", r.as_ref().map(|(s, _)| s));
        if let Some((status, body)) = r {
            assert!(matches!(status, 400 | 404), "{a}: HTTP {status}");
            let text = String::from_utf8_lossy(&body);
            assert!(
                !text.contains("TOPSECRET") && !text.contains("SQLite format"),
                "{a}: {text}"
            );
        }
    }
    assert!(
        dir.join(".resourcesync/state.sqlite").is_file(),
        "the state exists"
    );
    assert_eq!(get(&server.addr, "/ok.txt"), Some((200, b"ok".to_vec())));
}

#[test]
fn huge_request_heads_get_431_or_a_clean_close() {
    let dir = served_dir();
    let server = serve(dir.path());
    huge_heads(&server, "/d0/r0.txt");
}

#[test]
fn ten_thousand_idle_connections_keep_memory_bounded() {
    // Before the server starts: it inherits the limit.
    raise_nofile(IDLE as u64 + 1_000);
    let dir = served_dir();
    let server = serve(dir.path());
    idle_connections("serve", &server, "/d0/r0.txt");
}

/// `serve d --hub embedded --state d/state.sqlite` (relative paths, as a user types them):
/// the databases sit among the resources. None of them (nor their companions, nor the
/// documents) is ever listed or served, and the writes the hub makes to its database after each
/// notification are not changes: the watcher does not take them for ones, and periodic rescans
/// record nothing (an idle Source that took them for changes would notify all the time, and a
/// `hub.sqlite*` listed would let anyone download every subscriber's secret).
#[test]
fn the_sources_own_files_are_never_published_nor_served() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("d");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("a.txt"), "a").expect("write");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    cmd.current_dir(parent.path())
        .args([
            "serve",
            "d",
            "--hub",
            "embedded",
            "--state",
            "d/state.sqlite",
        ])
        .args(["--rescan-interval", "1"])
        .env("RUST_LOG", "resourcesync_source=debug")
        .stderr(Stdio::piped());
    let mut server = Server::spawn(cmd);
    let (tx, log) = mpsc::channel::<String>();
    let stderr = server.child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = server.addr.clone();
    let base = format!("http://{addr}/");

    // A subscriber to the change topic: every notification is then written to the hub's
    // database, in the published directory.
    let seen = subscribe(&addr, &base);
    // Put in place whole (written beside the tree, then renamed in): a file created empty and
    // then written is two changes when a scan falls between them, which a loaded machine sees.
    let staged = parent.path().join("new.txt");
    std::fs::write(&staged, "new").expect("write");
    std::fs::rename(&staged, dir.join("new.txt")).expect("rename");
    until("the notification", || {
        seen.deliveries.load(Ordering::Relaxed) == 1
    });

    three_rescans_record_nothing(&log, &seen);
    neither_listed_nor_served(&dir, &addr, &base);
}

/// Subscribes a callback to the change topic of the server at `addr` (base URL `base`) with
/// [`SECRET`], and waits for the hub's verification of intent; what the callback sees.
fn subscribe(addr: &str, base: &str) -> Arc<Seen> {
    let (sub, seen) = subscriber();
    let q = Req {
        target: "/resourcesync/hub".into(),
        ..form(
            &[
                ("hub.mode", "subscribe"),
                (
                    "hub.topic",
                    &format!("{base}resourcesync/change-notification"),
                ),
                ("hub.callback", &format!("http://{sub}/cb")),
                ("hub.secret", SECRET),
            ],
            202,
        )
    };
    assert_eq!(exchange(addr, &q).map(|r| r.0), Some(202));
    until("the verification", || {
        seen.verifications.load(Ordering::Relaxed) == 1
    });
    seen
}

/// Three periodic rescans after one write (read from the server's log): none records a
/// change, nothing else is notified.
fn three_rescans_record_nothing(log: &mpsc::Receiver<String>, seen: &Seen) {
    let mut published = Vec::new();
    let mut rescans = 0;
    let end = Instant::now() + Duration::from_secs(60);
    while rescans < 3 {
        let left = end.saturating_duration_since(Instant::now());
        let line = log.recv_timeout(left).expect("three periodic rescans");
        if line.contains("periodic rescan") {
            rescans += 1;
        }
        if line.contains("changes published") {
            published.push(line);
        }
    }
    eprintln!(
        "serve --hub embedded --state d/state.sqlite: {} batches published changes and {} \
         notifications were delivered by the third periodic rescan after one write",
        published.len(),
        seen.deliveries.load(Ordering::Relaxed)
    );
    assert_eq!(published.len(), 1, "changes published: {published:#?}");
    assert_eq!(seen.deliveries.load(Ordering::Relaxed), 1);
    assert_eq!(seen.bad_signatures.load(Ordering::Relaxed), 0);
}

/// The server's own files (databases, their companions, the state's documents) in `dir` are
/// neither listed nor served by the server at `addr` (base URL `base`).
fn neither_listed_nor_served(dir: &Path, addr: &str, base: &str) {
    for f in [
        "hub.sqlite",
        "hub.sqlite-wal",
        "state.sqlite",
        "state.sqlite-wal",
    ] {
        assert!(dir.join(f).is_file(), "{f} is in the directory");
    }
    for f in [
        "hub.sqlite",
        "hub.sqlite-wal",
        "hub.sqlite-shm",
        "hub.sqlite-journal",
        "state.sqlite",
        "state.sqlite-wal",
        "state.sqlite-shm",
        "state.sqlite-journal",
        "state-www/resourcesync/capabilitylist.xml",
        "state-www/.well-known/resourcesync",
    ] {
        let (status, body) = get(addr, &format!("/{f}")).expect("an answer");
        assert_eq!(status, 404, "{f}");
        assert!(
            !String::from_utf8_lossy(&body).contains("SQLite format"),
            "{f}"
        );
    }
    let locs = |path: &str| -> Vec<String> {
        let (status, body) = get(addr, path).expect("a document");
        assert_eq!(status, 200, "{path}");
        let body = String::from_utf8_lossy(&body).into_owned();
        body.split("<loc>")
            .skip(1)
            .filter_map(|s| s.split("</loc>").next())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(locs(&resource_list_path(addr)), [format!("{base}a.txt")]);
    assert_eq!(
        locs("/resourcesync/changelists/00001.xml"),
        [format!("{base}new.txt")]
    );
}

/// Files in [`h2_served_dir`]: enough for a Resource List of about 240 KiB, larger than what a
/// server reading documents whole per request could hold cheaply for many streams.
const H2_FILES: usize = 1300;

/// A directory whose Resource List is about 240 KiB, and a 64 KiB resource (the largest one
/// read whole per request).
fn h2_served_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..H2_FILES {
        let d = dir.path().join(format!("d{}", i % 10));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(
            d.join(format!("resource-{i:05}.txt")),
            format!("resource {i}\n"),
        )
        .expect("write");
    }
    let big: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), big).expect("write");
    dir
}

/// The path of the Resource List named by the Capability List.
fn resource_list_path(addr: &str) -> String {
    let (status, cl) = get(addr, "/resourcesync/capabilitylist.xml").expect("capability list");
    assert_eq!(status, 200);
    let cl = String::from_utf8_lossy(&cl).into_owned();
    let url = cl
        .split("<loc>")
        .skip(1)
        .filter_map(|s| s.split("</loc>").next())
        .find(|u| u.contains("/resourcelists/"))
        .expect("a Resource List in the Capability List")
        .to_owned();
    let rest = url.strip_prefix("http://").expect("http URL");
    rest[rest.find('/').expect("a path")..].to_owned()
}

/// One GET over an HTTP/2 connection that reads everything (a well-behaved client): (status,
/// body).
async fn h2_get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("h2c handshake");
    tokio::spawn(conn);
    let mut send = send.ready().await.expect("ready");
    let req = axum::http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .expect("request");
    let (resp, _) = send.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("data");
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (status, out)
}

/// A response head held by a client that never reads its body.
type Held = Arc<std::sync::Mutex<Vec<axum::http::Response<h2::RecvStream>>>>;

/// h2c connections at a zero window, each with its streams asking for a large body and never
/// reading it.
struct Hostile {
    senders: Vec<h2::client::SendRequest<axum::body::Bytes>>,
    conns: Vec<tokio::task::JoinHandle<Result<(), h2::Error>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Response heads received, per connection.
    heads: Vec<Arc<AtomicU64>>,
    held: Held,
}

impl Hostile {
    /// Opens `connections` connections of `streams` streams each: two ask for the document
    /// `doc` with gzip (more streams than the server has compressors), three without, the rest
    /// for the resource.
    async fn open(addr: &str, doc: &str, connections: usize, streams: usize) -> Hostile {
        let heads: Vec<Arc<AtomicU64>> = (0..connections)
            .map(|_| Arc::new(AtomicU64::new(0)))
            .collect();
        let held: Held = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (mut senders, mut conns, mut tasks) = (Vec::new(), Vec::new(), Vec::new());
        for (c, head) in heads.iter().enumerate() {
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let (send, conn) = h2::client::Builder::new()
                .initial_window_size(0)
                .handshake::<_, axum::body::Bytes>(tcp)
                .await
                .expect("h2c handshake");
            conns.push(tokio::spawn(conn));
            let (path, gzip) = match c {
                0 | 1 => (doc.to_owned(), true),
                2..=4 => (doc.to_owned(), false),
                _ => ("/big.bin".to_owned(), false),
            };
            for _ in 0..streams {
                let url = format!("http://{addr}{path}");
                tasks.push(tokio::spawn(hold_one(
                    send.clone(),
                    url,
                    gzip,
                    head.clone(),
                    held.clone(),
                )));
            }
            senders.push(send);
        }
        Hostile {
            senders,
            conns,
            tasks,
            heads,
            held,
        }
    }

    /// Waits until every stream the server lets each connection open has its response head;
    /// how many there are.
    async fn wait_heads(&self, streams: usize) -> u64 {
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let done = self.senders.iter().zip(&self.heads).all(|(s, h)| {
                let n = h.load(Ordering::Relaxed) as usize;
                n > 0 && n == streams.min(s.current_max_send_streams())
            });
            if done {
                break;
            }
            assert!(
                Instant::now() < end,
                "response heads: {:?} (server limits: {:?})",
                self.heads
                    .iter()
                    .map(|h| h.load(Ordering::Relaxed))
                    .collect::<Vec<_>>(),
                self.senders
                    .iter()
                    .map(|s| s.current_max_send_streams())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.heads.iter().map(|h| h.load(Ordering::Relaxed)).sum()
    }

    /// Every hostile connection gone.
    fn close(self) {
        self.tasks.iter().for_each(|t| t.abort());
        self.conns.iter().for_each(|c| c.abort());
        self.held.lock().expect("lock").clear();
        drop(self.senders);
    }
}

/// One stream: asks for `url` and holds the response head, never reading the body.
async fn hold_one(
    send: h2::client::SendRequest<axum::body::Bytes>,
    url: String,
    gzip: bool,
    heads: Arc<AtomicU64>,
    held: Held,
) {
    // Streams past the server's limit wait here for one to end (none does).
    let Ok(mut send) = send.ready().await else {
        return;
    };
    let mut req = axum::http::Request::get(url);
    if gzip {
        req = req.header("accept-encoding", "gzip");
    }
    let Ok((resp, _)) = send.send_request(req.body(()).expect("request"), true) else {
        return;
    };
    if let Ok(resp) = resp.await {
        heads.fetch_add(1, Ordering::Relaxed);
        // Held, never read.
        held.lock().expect("lock").push(resp);
    }
}

/// `doc` asked for with gzip over HTTP/1.1 (blocking): (status, headers, body).
fn gzip_get(addr: &str, doc: &str) -> (u16, BTreeMap<String, String>, Vec<u8>) {
    let q = Req {
        headers: "Accept-Encoding: gzip\r\nConnection: close\r\n".into(),
        ..Req::get(doc.to_owned(), None)
    };
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (&s).write_all(&q.bytes(addr)).expect("send");
    read_response(&mut BufReader::new(&s)).expect("a response")
}

/// [`gzip_get`] on a blocking thread.
async fn gzip_get_async(addr: &str, doc: &str) -> (u16, BTreeMap<String, String>, Vec<u8>) {
    let (a, d) = (addr.to_owned(), doc.to_owned());
    tokio::task::spawn_blocking(move || gzip_get(&a, &d))
        .await
        .expect("join")
}

/// Eight h2c connections that advertise a zero flow-control window (SETTINGS_INITIAL_WINDOW_SIZE
/// 0) and open 200 streams each, asking for the largest document (plain and gzip) and the
/// largest resource read whole, and never read a byte of the bodies: the server holds every
/// response it has started. Its memory must grow by at most 100 MB, and a normal client (HTTP/1.1
/// and HTTP/2) is served meanwhile.
#[test]
fn http2_clients_that_never_read_cannot_pin_memory() {
    const CONNECTIONS: usize = 8;
    const STREAMS: usize = 200;
    let dir = h2_served_dir();
    let server = serve(dir.path());
    let addr = server.addr.clone();
    let doc = resource_list_path(&addr);
    let (status, doc_body) = get(&addr, &doc).expect("the Resource List");
    assert_eq!(status, 200);
    assert!(
        (200 * 1024..256 * 1024).contains(&doc_body.len()),
        "the Resource List is {} bytes: adjust H2_FILES",
        doc_body.len()
    );
    let big = std::fs::read(dir.path().join("big.bin")).expect("read");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // Warm up: the runtime's threads started, the document read once over HTTP/2.
        assert_eq!(h2_get(&addr, &doc).await, (200, doc_body.clone()));
        let before = server.rss_kib();
        let hostile = Hostile::open(&addr, &doc, CONNECTIONS, STREAMS).await;
        let streams = hostile.wait_heads(STREAMS).await;
        let during = server.rss_kib();
        let grown = during.saturating_sub(before);
        eprintln!(
            "serve: RSS {before} KiB -> {during} KiB (+{grown} KiB) with {CONNECTIONS} h2c \
             connections at a zero window holding {streams} responses"
        );
        assert!(
            grown <= 100 * 1024,
            "{grown} KiB more with {streams} responses held"
        );
        // A normal client is served meanwhile, over HTTP/1.1 and over HTTP/2.
        let a = addr.clone();
        let d = doc.clone();
        let h1 = tokio::task::spawn_blocking(move || get(&a, &d))
            .await
            .expect("join");
        assert_eq!(h1, Some((200, doc_body.clone())));
        assert_eq!(h2_get(&addr, "/big.bin").await, (200, big));
        // The compressors are held by responses that are not read: a document asked for with
        // gzip comes whole meanwhile (uncompressed when none is free; whether one is free
        // depends on how far the hostile responses got, so either form is accepted).
        let (status, headers, body) = gzip_get_async(&addr, &doc).await;
        assert_eq!(status, 200);
        let body = match headers.get("content-encoding").map(String::as_str) {
            None => body,
            Some("gzip") => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut out)
                    .expect("gzip");
                out
            }
            Some(other) => panic!("content-encoding {other}"),
        };
        assert!(body == doc_body, "the whole document");
        // The hostile connections gone, the server gives their compressors back.
        hostile.close();
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, headers, _) = gzip_get_async(&addr, &doc).await;
            assert_eq!(status, 200);
            if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
                break;
            }
            assert!(Instant::now() < end, "gzip never came back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
