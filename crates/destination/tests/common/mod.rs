//! A static HTTP server on 127.0.0.1:0 serving a published Source tree, counting requests and
//! injecting faults; and helpers to publish and compare trees.
#![allow(dead_code, unreachable_pub)]

pub mod fault_proxy;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::services::ServeDir;

/// What to do instead of serving a path.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this status.
    Status(u16),
    /// Serve these bytes.
    Body(Vec<u8>),
    /// Declare this Content-Length but send only these bytes.
    Truncate(u64, Vec<u8>),
    /// Never answer.
    Stall,
    /// Add a header to the normal response.
    Header(&'static str, String),
    /// Answer with this status (and `Retry-After: 0`) this many times, then serve normally.
    Flaky(u16, u32),
    /// Redirect (302) to this location.
    Redirect(String),
    /// Serve `prefix`, then spaces up to `total` bytes, generated as sent (never held in
    /// memory); with a `Content-Length` or chunked.
    Huge {
        prefix: Vec<u8>,
        total: u64,
        declare_length: bool,
    },
    /// Send one byte of `prefix` every `every`, then one space at a time, forever (a
    /// slowloris Source).
    Drip {
        prefix: Vec<u8>,
        every: std::time::Duration,
    },
}

/// A body of `prefix` then spaces, `total` bytes in all, generated as it is sent.
fn huge_body(prefix: Vec<u8>, total: u64) -> Body {
    use tokio::io::AsyncReadExt;
    let rest = total.saturating_sub(prefix.len() as u64);
    let r = std::io::Cursor::new(prefix).chain(tokio::io::repeat(b' ').take(rest));
    Body::from_stream(tokio_util::io::ReaderStream::with_capacity(r, 64 << 10))
}

/// `prefix`, then spaces, one byte every `every`, until the client goes away.
fn drip_body(prefix: Vec<u8>, every: std::time::Duration) -> Body {
    use tokio::io::AsyncWriteExt;
    let (mut w, r) = tokio::io::duplex(16);
    tokio::spawn(async move {
        for i in 0.. {
            tokio::time::sleep(every).await;
            let b = prefix.get(i).copied().unwrap_or(b' ');
            if w.write_all(&[b]).await.is_err() {
                break;
            }
        }
    });
    Body::from_stream(tokio_util::io::ReaderStream::new(r))
}

#[derive(Debug, Default)]
pub struct Shared {
    pub hits: Mutex<HashMap<String, u64>>,
    pub faults: Mutex<HashMap<String, Fault>>,
    /// After this many resource requests, stall every further one and signal.
    pub stall_after: Mutex<Option<(u64, std::sync::mpsc::Sender<()>)>>,
    pub resource_requests: Mutex<u64>,
    /// The HTTP versions of the requests seen since the last reset.
    pub versions: Mutex<std::collections::BTreeSet<String>>,
}

pub struct Server {
    pub addr: SocketAddr,
    pub base: String,
    pub shared: Arc<Shared>,
}

fn is_resource(path: &str) -> bool {
    !(path.starts_with("/resourcesync/")
        || path.starts_with("/.well-known/")
        || path == "/robots.txt"
        || path == "/"
        || path.starts_with("/hostile/"))
}

async fn faults(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    s.versions
        .lock()
        .expect("versions")
        .insert(format!("{:?}", req.version()));
    *s.hits
        .lock()
        .expect("hits")
        .entry(path.clone())
        .or_default() += 1;
    if is_resource(&path) {
        let n = {
            let mut g = s.resource_requests.lock().expect("count");
            *g += 1;
            *g
        };
        let stall = {
            let g = s.stall_after.lock().expect("stall");
            g.as_ref()
                .filter(|(after, _)| n > *after)
                .map(|(_, tx)| tx.clone())
        };
        if let Some(tx) = stall {
            let _ = tx.send(());
            std::future::pending::<()>().await;
        }
    }
    let fault = {
        let mut g = s.faults.lock().expect("faults");
        let f = g.get(&path).cloned();
        if let Some(Fault::Flaky(code, n)) = f {
            if n <= 1 {
                g.remove(&path);
            } else {
                g.insert(path.clone(), Fault::Flaky(code, n - 1));
            }
        }
        f
    };
    match fault {
        None => next.run(req).await,
        Some(Fault::Status(c)) => {
            (StatusCode::from_u16(c).expect("status"), "injected fault").into_response()
        }
        Some(Fault::Body(b)) => b.into_response(),
        Some(Fault::Truncate(declared, b)) => Response::builder()
            .header(header::CONTENT_LENGTH, declared)
            .body(Body::from(b))
            .expect("response"),
        Some(Fault::Stall) => {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
        Some(Fault::Flaky(code, _)) => Response::builder()
            .status(code)
            .header(header::RETRY_AFTER, "0")
            .body(Body::from("try again"))
            .expect("response"),
        Some(Fault::Redirect(to)) => Response::builder()
            .status(StatusCode::FOUND)
            .header(header::LOCATION, to)
            .body(Body::empty())
            .expect("response"),
        Some(Fault::Huge {
            prefix,
            total,
            declare_length,
        }) => {
            let mut r = Response::builder();
            if declare_length {
                r = r.header(header::CONTENT_LENGTH, total);
            }
            r.body(huge_body(prefix, total)).expect("response")
        }
        Some(Fault::Drip { prefix, every }) => Response::builder()
            .body(drip_body(prefix, every))
            .expect("response"),
        Some(Fault::Header(name, value)) => {
            let mut r = next.run(req).await;
            r.headers_mut()
                .insert(name, value.parse().expect("header value"));
            r
        }
    }
}

impl Server {
    /// Serves `root` on 127.0.0.1 with an ephemeral port, in the current Tokio runtime.
    pub async fn start(root: &Path) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared::default());
        let app = Router::new()
            .fallback_service(ServeDir::new(root))
            .layer(middleware::from_fn_with_state(shared.clone(), faults));
        tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve");
        });
        Server {
            addr,
            base: format!("http://{addr}/"),
            shared,
        }
    }

    /// Starts a server on a thread of its own (for tests that run the binary).
    pub fn start_in_thread(root: &Path) -> Server {
        let (tx, rx) = std::sync::mpsc::channel();
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(async move {
                let s = Server::start(&root).await;
                tx.send(s).expect("send");
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("server")
    }

    pub fn hits(&self, path: &str) -> u64 {
        self.shared
            .hits
            .lock()
            .expect("hits")
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    /// The HTTP versions of the requests since the last [`Server::reset_hits`].
    pub fn versions(&self) -> Vec<String> {
        self.shared
            .versions
            .lock()
            .expect("versions")
            .iter()
            .cloned()
            .collect()
    }

    pub fn reset_hits(&self) {
        self.shared.versions.lock().expect("versions").clear();
        self.shared.hits.lock().expect("hits").clear();
        *self.shared.resource_requests.lock().expect("n") = 0;
    }

    pub fn resource_hits(&self) -> u64 {
        self.shared
            .hits
            .lock()
            .expect("hits")
            .iter()
            .filter(|(p, _)| is_resource(p))
            .map(|(_, n)| n)
            .sum()
    }

    pub fn fault(&self, path: &str, f: Fault) {
        self.shared
            .faults
            .lock()
            .expect("faults")
            .insert(path.to_owned(), f);
    }

    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults").clear();
        *self.shared.stall_after.lock().expect("stall") = None;
    }

    pub fn stall_after(&self, n: u64) -> std::sync::mpsc::Receiver<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        *self.shared.stall_after.lock().expect("stall") = Some((n, tx));
        rx
    }
}

/// Writes files (relative path → content) under `root`.
pub fn write_tree(root: &Path, files: &[(&str, &[u8])]) {
    for (rel, content) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, content).expect("write");
    }
}

/// Scans and publishes `root` as a Source at `base` (documents written into `root`), splitting
/// the Resource List past `max_entries`.
pub fn publish(root: &Path, base: &str, max_entries: Option<usize>) {
    publish_with(root, base, |cfg| {
        if let Some(n) = max_entries {
            cfg.publish.split.max_entries = n;
        }
    });
}

/// Scans and publishes `root` with dumps, closing each Change List after `max_entries` changes
/// (so that each closed period has its Change Dump package).
pub fn publish_rotating(root: &Path, base: &str, max_entries: u64) {
    publish_with(root, base, |c| {
        c.publish.dumps = true;
        c.scan.rotation.max_entries = max_entries;
    })
}

/// Scans and publishes `root` with a configuration adjusted by `f`.
pub fn publish_with(
    root: &Path,
    base: &str,
    f: impl FnOnce(&mut resourcesync_source::SourceConfig),
) {
    let mut cfg = resourcesync_source::SourceConfig::new(root, base);
    f(&mut cfg);
    let mut s = resourcesync_source::Source::open(cfg).expect("source");
    s.scan().expect("scan");
    s.publish().expect("publish");
}

fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        let p = e.path();
        let rel = p
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        if skip
            .iter()
            .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
        {
            continue;
        }
        if e.file_type().expect("type").is_dir() {
            walk(root, &p, skip, out);
        } else {
            out.insert(rel, std::fs::read(&p).expect("read"));
        }
    }
}

/// The resource files of a Source tree (documents and state left out).
pub fn source_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    walk(
        root,
        root,
        &[
            "resourcesync",
            ".well-known",
            ".resourcesync",
            "hostile",
            "robots.txt",
            "index.html",
        ],
        &mut out,
    );
    out
}

/// The copies under a destination (its own folder left out).
pub fn dest_files(dest: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if dest.exists() {
        walk(dest, dest, &[".resourcesync"], &mut out);
    }
    out
}

/// The directories under a destination (relative, sorted; its own folder left out).
pub fn dest_dirs(dest: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dest.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let e = e.expect("entry");
            let p = e.path();
            let rel = p
                .strip_prefix(dest)
                .expect("under dest")
                .to_string_lossy()
                .replace('\\', "/");
            if e.file_type().expect("type").is_dir() && rel != ".resourcesync" {
                out.push(rel);
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Options for tests: small timeouts and backoff.
pub fn options(url: &str, dest: &Path) -> resourcesync_destination::SyncOptions {
    let mut o = resourcesync_destination::SyncOptions::new(url, dest);
    o.concurrency = 4;
    o.http.backoff_base = std::time::Duration::from_millis(5);
    o.http.backoff_max = std::time::Duration::from_millis(50);
    o.http.retries = 2;
    o.http.read_timeout = std::time::Duration::from_secs(5);
    o
}

pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn dest_in(t: &tempfile::TempDir) -> PathBuf {
    t.path().join("dest")
}

/// The seed of a randomized test: `RESOURCESYNC_TEST_SEED` when set, else drawn from the
/// clock. Printed (stderr is shown when a test fails) so that a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("RESOURCESYNC_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    eprintln!("{test}: seed {s} (replay with RESOURCESYNC_TEST_SEED={s})");
    s
}
