//! A hand-written Source server on 127.0.0.1:0: serves a directory (a published Source tree)
//! and documents or bodies given in memory ([`Reply`]: status, headers, delay), injects faults
//! ([`Fault`]) and counts requests per path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::services::ServeDir;

/// A response given in memory: a status, headers, a body, sent after a delay.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The status.
    pub status: u16,
    /// Headers (name, value).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// How long to wait before answering.
    pub delay: Duration,
}

impl Reply {
    /// A 200 with this body.
    pub fn ok(body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
        }
    }

    /// An XML document (`Content-Type: application/xml`).
    pub fn xml(body: impl Into<Vec<u8>>) -> Reply {
        Reply::ok(body).header("content-type", "application/xml")
    }

    /// This status, with a short body.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            ..Reply::ok("status")
        }
    }

    /// With this status.
    pub fn with_status(mut self, status: u16) -> Reply {
        self.status = status;
        self
    }

    /// With one more header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sent after `delay`.
    pub fn delayed(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }

    async fn into_response(self) -> Response {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let mut r = Response::builder().status(StatusCode::from_u16(self.status).expect("status"));
        for (n, v) in &self.headers {
            r = r.header(
                HeaderName::from_bytes(n.as_bytes()).expect("header name"),
                HeaderValue::from_str(v).expect("header value"),
            );
        }
        r.body(Body::from(self.body)).expect("response")
    }
}

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
        /// The first bytes.
        prefix: Vec<u8>,
        /// The length of the whole body.
        total: u64,
        /// Whether a `Content-Length` is sent.
        declare_length: bool,
    },
    /// Send one byte of `prefix` every `every`, then one space at a time, forever (a
    /// slowloris Source).
    Drip {
        /// The first bytes.
        prefix: Vec<u8>,
        /// The time between two bytes.
        every: std::time::Duration,
    },
    /// Answer normally, this late.
    Delay(Duration),
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

/// The state a [`Server`] shares with its handler.
#[derive(Debug, Default)]
pub struct Shared {
    /// Requests per path.
    pub hits: Mutex<HashMap<String, u64>>,
    /// Faults per path.
    pub faults: Mutex<HashMap<String, Fault>>,
    /// After this many resource requests, stall every further one and signal.
    pub stall_after: Mutex<Option<(u64, std::sync::mpsc::Sender<()>)>>,
    /// Requests of resources (not documents) so far.
    pub resource_requests: Mutex<u64>,
    /// The HTTP versions of the requests seen since the last reset.
    pub versions: Mutex<std::collections::BTreeSet<String>>,
    /// Paths answered from memory, before faults and the directory.
    pub routes: Mutex<HashMap<String, Reply>>,
    /// Resource requests being answered now.
    pub in_flight: Mutex<usize>,
    /// The number of resource requests in flight as each arrived (itself included).
    pub arrivals: Mutex<Vec<usize>>,
    /// Above this many resource requests in flight, answer 503 with `Retry-After: 0`.
    pub max_in_flight: Mutex<Option<usize>>,
    /// Answer each resource request this late.
    pub resource_delay: Mutex<Option<Duration>>,
}

/// Counts a resource request in flight until dropped.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut g = self.0.in_flight.lock().expect("in flight");
        *g = g.saturating_sub(1);
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://ADDR/`.
    pub base: String,
    /// What it shares with its handler.
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
        let now = {
            let mut g = s.in_flight.lock().expect("in flight");
            *g += 1;
            *g
        };
        let _guard = InFlight(s.clone());
        s.arrivals.lock().expect("arrivals").push(now);
        let limit = *s.max_in_flight.lock().expect("limit");
        if limit.is_some_and(|l| now > l) {
            return Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .header(header::RETRY_AFTER, "0")
                .body(Body::from("busy"))
                .expect("response");
        }
        let delay = *s.resource_delay.lock().expect("delay");
        if let Some(d) = delay {
            tokio::time::sleep(d).await;
        }
        return serve(&s, &path, req, next).await;
    }
    serve(&s, &path, req, next).await
}

async fn serve(s: &Arc<Shared>, path: &str, req: Request, next: Next) -> Response {
    let path = path.to_owned();
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
    let route = s.routes.lock().expect("routes").get(&path).cloned();
    match fault {
        None => match route {
            Some(reply) => reply.into_response().await,
            None => next.run(req).await,
        },
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
        Some(Fault::Delay(d)) => {
            tokio::time::sleep(d).await;
            match route {
                Some(reply) => reply.into_response().await,
                None => next.run(req).await,
            }
        }
        Some(Fault::Header(name, value)) => {
            let mut r = match route {
                Some(reply) => reply.into_response().await,
                None => next.run(req).await,
            };
            r.headers_mut()
                .insert(name, value.parse().expect("header value"));
            r
        }
    }
}

impl Server {
    /// Serves only what [`Server::route`] gives (404 elsewhere), on 127.0.0.1 with an ephemeral
    /// port, in the current Tokio runtime.
    pub async fn empty() -> Server {
        let dir = std::env::temp_dir().join("resourcesync-testkit-nothing-here");
        Server::start(&dir).await
    }

    /// Answers `path` with `reply` from now on (a fault set on the path comes first).
    pub fn route(&self, path: &str, reply: Reply) {
        self.shared
            .routes
            .lock()
            .expect("routes")
            .insert(path.to_owned(), reply);
    }

    /// `base` joined with `path` (without its leading `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path.trim_start_matches('/'))
    }

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

    /// [`Server::empty`] on a thread of its own (for tests that run the binary).
    pub fn empty_in_thread() -> Server {
        Server::start_in_thread(&std::env::temp_dir().join("resourcesync-testkit-nothing-here"))
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

    /// Requests of `path` since the last [`Server::reset_hits`].
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

    /// Forgets the requests counted.
    pub fn reset_hits(&self) {
        self.shared.versions.lock().expect("versions").clear();
        self.shared.hits.lock().expect("hits").clear();
        *self.shared.resource_requests.lock().expect("n") = 0;
    }

    /// Requests of resources (paths outside the documents' folders) counted.
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

    /// Answers `path` with `f` from now on.
    pub fn fault(&self, path: &str, f: Fault) {
        self.shared
            .faults
            .lock()
            .expect("faults")
            .insert(path.to_owned(), f);
    }

    /// Removes every fault, and the stall of [`Server::stall_after`].
    pub fn clear_faults(&self) {
        self.shared.faults.lock().expect("faults").clear();
        *self.shared.stall_after.lock().expect("stall") = None;
    }

    /// Stalls every resource request after the `n`th, signalling each on the channel.
    pub fn stall_after(&self, n: u64) -> std::sync::mpsc::Receiver<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        *self.shared.stall_after.lock().expect("stall") = Some((n, tx));
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One HTTP/1.0 GET: the whole response as text.
    async fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
            .await
            .expect("send");
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.expect("read");
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn routes_answer_with_their_status_headers_and_delay() {
        let s = Server::empty().await;
        s.route(
            "/doc.xml",
            Reply::xml("<urlset/>")
                .with_status(203)
                .header("link", "<http://e/c>; rel=\"resourcesync\"")
                .delayed(Duration::from_millis(80)),
        );
        let t = tokio::time::Instant::now();
        let r = get(s.addr, "/doc.xml").await;
        assert!(t.elapsed() >= Duration::from_millis(80), "not delayed");
        assert!(r.starts_with("HTTP/1.0 203"), "{r}");
        assert!(r.contains("content-type: application/xml"), "{r}");
        assert!(
            r.contains("link: <http://e/c>; rel=\"resourcesync\""),
            "{r}"
        );
        assert!(r.ends_with("<urlset/>"), "{r}");
        assert!(get(s.addr, "/other").await.starts_with("HTTP/1.0 404"));
        s.fault("/doc.xml", Fault::Status(503));
        assert!(get(s.addr, "/doc.xml").await.starts_with("HTTP/1.0 503"));
        assert_eq!(s.hits("/doc.xml"), 2);
        assert_eq!(s.hits("/other"), 1);
        assert_eq!(s.url("/doc.xml"), format!("http://{}/doc.xml", s.addr));
    }
}
