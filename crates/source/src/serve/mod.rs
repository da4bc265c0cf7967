//! The HTTP server of a live Source: one process serving the resources of a directory and every
//! capability document, kept current by [`crate::serve::watch`].
//!
//! What is served (paths relative to the base URL's path, which is usually `/`):
//!
//! | path | what |
//! | --- | --- |
//! | `/.well-known/resourcesync` | the Source Description (Z39.99-2014 §6.3.2), also under the base |
//! | `/robots.txt` | a `Sitemap:` line for the newest published Resource List (§6.3.4) |
//! | `` (the base itself) | the page for people, with `<link rel="resourcesync">` (§6.3.3) |
//! | `resourcesync/...` | the documents (`application/xml`), gzip-compressed when asked |
//! | anything else | the resource at that path under the directory |
//!
//! Every resource response carries `Link: <Capability List>; rel="resourcesync"` (§6.3.3), a
//! strong `ETag` (from the recorded digest when the file is unchanged since it was hashed, else
//! from its size and modification time), `Last-Modified`, `Accept-Ranges`, `Content-Type` (the
//! recorded type, else from the extension) and `Content-Length`. Conditional requests
//! (`If-Match`, `If-Unmodified-Since`, `If-None-Match`, `If-Modified-Since`, evaluated in the
//! order of RFC 9110 §13.2.2), `HEAD` and single byte ranges (`Range`, `If-Range`; 206 or 416) are
//! supported.
//!
//! Speed: what a request needs of the recorded state (digest `ETag`, type, `Last-Modified`) is
//! kept in memory (`served.rs`), refreshed after every scan that changed something; no database
//! is asked per request. A resource is opened, checked and, up to 64 KiB, read in one go on the
//! runtime's worker thread (open, readlink, fstat, read: as a web server without asynchronous
//! file I/O does); larger files are streamed through the blocking pool, never read whole, and
//! documents are resolved there too (and, past 64 KiB, streamed likewise).
//!
//! Safety: a request path is mapped with [`decode_path`], which refuses `.`/`..` segments (raw or
//! percent-encoded), encoded slashes and backslashes and NUL (400); the file is opened without
//! blocking on special files, and the file actually opened (as the kernel resolved it) must lie
//! inside the canonical directory (so symbolic links out of the tree are 404, and the tree
//! changing between a check and the open cannot lead out of it), must be a regular file, must be
//! admitted by the inventory (dotfiles only with `--include-hidden`, excludes honoured; for a
//! link, its target too) and must not be inside the state directory or the output directory,
//! which are never served as resources.
//!
//! Limits: request headers are bounded by hyper's HTTP/1.1 defaults (at most 100 header fields,
//! and a read buffer of 408 KiB for the request head; larger heads get 431), every request must
//! produce its response within [`ServeOptions::request_timeout`] (else 503), and a connection
//! that makes no read or write progress for [`ServeOptions::idle_timeout`] is closed (this bounds
//! slow or stalled clients, including ones that never finish their request head). HTTP/2
//! (h2c) connections are bounded in streams, buffered response data and windows: see
//! [`crate::serve::accept`].

pub mod accept;
pub(crate) mod served;
pub mod watch;

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use jiff::Timestamp;
use jiff::fmt::rfc2822::{DateTimeParser, DateTimePrinter};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::io::ReaderStream;
use tokio_util::sync::CancellationToken;
use tower_http::compression::CompressionLayer;

pub use resourcesync_websub::listener::{IdleIo, IdleListener};

use crate::error::{Error, Result};
use crate::inventory::own::OwnPaths;
use crate::inventory::{DirInventory, opened_path};
use crate::publish::layout::Layout;
use crate::publish::published_resource_list;
use crate::scan::mime_type;
use crate::serve::served::Served;
use crate::serve::watch::{Publisher, WatchOptions, watch};
use crate::source::{STATE_DIR, Source, SourceConfig};
use crate::state::State;
use crate::uri::{UnsafePath, decode_path, path_bytes as key};

/// The media type of every XML document (Z39.99-2014 §7: documents are Sitemaps).
const XML: &str = "application/xml";
/// The media type of the page for people.
const HTML: &str = "text/html; charset=utf-8";

/// How to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServeOptions {
    /// Change detection and publishing.
    pub watch: WatchOptions,
    /// Longest time to produce a response's head (default 30 s); past it, 503.
    pub request_timeout: Duration,
    /// A connection with no read or write progress for this long is closed (default 60 s).
    pub idle_timeout: Duration,
    /// On shutdown, how long open connections may take to finish (default 10 s).
    pub shutdown_grace: Duration,
    /// Whether the embedded hub sends verifications and deliveries to private addresses
    /// (`None`, the default: when the server listens on a loopback or private address, see
    /// [`resourcesync_websub::reach::private_by_default`]).
    pub hub_private_addresses: Option<bool>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            watch: WatchOptions::default(),
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            hub_private_addresses: None,
        }
    }
}

/// Where a served Source writes its documents when no output directory is configured: inside
/// the state directory (`DIR/.resourcesync/www`), or next to an explicit state database
/// (`STATE-www` beside `STATE.sqlite`), so that the served directory itself is not written to.
pub fn default_out(cfg: &SourceConfig) -> PathBuf {
    match &cfg.state {
        None => cfg.dir.join(STATE_DIR).join("www"),
        Some(p) => {
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "state".into());
            p.with_file_name(format!("{stem}-www"))
        }
    }
}

/// Adjusts a configuration for serving: documents go to [`default_out`] unless an output
/// directory is set, and the top-level `resourcesync/` and `.well-known/` folders of the
/// directory are left out of the inventory, since their URLs are the documents'.
pub fn prepare_config(cfg: &mut SourceConfig) {
    if cfg.out.is_none() {
        cfg.out = Some(default_out(cfg));
    }
    for g in ["/resourcesync", "/.well-known"] {
        if !cfg.excludes.iter().any(|e| e == g) {
            cfg.excludes.push(g.to_owned());
        }
    }
    if cfg.dir.join(crate::publish::layout::DOCS_DIR).exists() {
        tracing::warn!(
            "{} is not served: its URLs are the documents'",
            cfg.dir.join(crate::publish::layout::DOCS_DIR).display()
        );
    }
}

/// Stops a running server (see [`Running::shutdown_handle`]).
#[derive(Debug, Clone)]
pub struct ShutdownHandle(CancellationToken);

impl ShutdownHandle {
    /// Starts a graceful shutdown: no new connections; open ones may finish within the grace
    /// period; the watcher stops after its current batch.
    pub fn shutdown(&self) {
        self.0.cancel();
    }
}

/// A server started by [`start`] or [`spawn`].
#[derive(Debug)]
pub struct Running {
    addr: SocketAddr,
    base: String,
    well_known: String,
    cancel: CancellationToken,
    task: JoinHandle<Result<()>>,
    publisher: Publisher,
    hub: Option<resourcesync_websub::Hub>,
    first: crate::serve::watch::BatchReport,
}

impl Running {
    /// The first scan and publish, made before the server answered.
    pub fn first_batch(&self) -> &crate::serve::watch::BatchReport {
        &self.first
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL resources are published under.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The Source Description's URL.
    pub fn source_description_url(&self) -> &str {
        &self.well_known
    }

    /// A handle that stops the server.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.cancel.clone())
    }

    /// The publisher (to run a batch by hand, or to reach the Source).
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// The embedded WebSub hub, when there is one.
    pub fn hub(&self) -> Option<&resourcesync_websub::Hub> {
        self.hub.as_ref()
    }

    /// Waits until the server has stopped (after a shutdown, or a fatal error).
    pub async fn wait(self) -> Result<()> {
        self.task
            .await
            .map_err(|e| Error::Task(format!("server: {e}")))?
    }

    /// Shuts down and waits until the server has stopped.
    pub async fn shutdown(self) -> Result<()> {
        self.cancel.cancel();
        self.wait().await
    }
}

/// Connections waiting to be accepted: the kernel's limit (`net.core.somaxconn`) still applies.
/// The standard library's 128 drops handshakes of a burst of clients while the accept loop is
/// busy (each dropped handshake is retried by the client a second later).
pub const LISTEN_BACKLOG: u32 = 1024;

/// Binds a listener (`127.0.0.1:8080`, `[::1]:0`, `localhost:8080`), with a listen backlog of
/// [`LISTEN_BACKLOG`].
pub async fn bind(addr: &str) -> Result<TcpListener> {
    let net = |cause| Error::Net {
        addr: addr.to_owned(),
        cause,
    };
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await.map_err(net)? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
        .map_err(net)?;
        // As the standard library and Tokio do: a restarted server binds its port again.
        socket.set_reuseaddr(true).map_err(net)?;
        match socket.bind(a).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(net(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::AddrNotAvailable, "no address to bind")
    })))
}

/// Binds `addr` and starts serving `source` (see [`start`]).
pub async fn spawn(source: Source, addr: &str, opts: ServeOptions) -> Result<Running> {
    let listener = bind(addr).await?;
    start(source, listener, opts).await
}

/// Which WebSub hub a served Source sends its notifications to (Change Notification 1.0.1 §4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubChoice {
    /// A hub in the same process, at `BASE/resourcesync/hub`, its state beside the Source's.
    Embedded,
    /// A hub elsewhere.
    Url(String),
}

/// Starts serving `source` on `listener`: sets up the watcher, runs a first scan and a full
/// publish, then serves in a background task until shut down. When this returns, every
/// document is published and requests are answered.
pub async fn start(source: Source, listener: TcpListener, opts: ServeOptions) -> Result<Running> {
    start_with(source, listener, opts, None).await
}

/// [`start`], sending Change and Framework Notifications through `hub` (see
/// [`crate::notify`]).
pub async fn start_with(
    mut source: Source,
    listener: TcpListener,
    opts: ServeOptions,
    hub: Option<HubChoice>,
) -> Result<Running> {
    let addr = listener.local_addr().map_err(|cause| Error::Net {
        addr: "listener".into(),
        cause,
    })?;
    let mut embedded: Option<resourcesync_websub::Hub> = None;
    let mut notifier = None;
    if let Some(choice) = hub {
        let layout = source.layout().clone();
        let (hub_url, target) = match choice {
            HubChoice::Embedded => {
                let url = layout.doc_url(crate::notify::HUB_PATH);
                // Never published nor served (it holds every subscriber's secret): see `own`.
                let db = source.hub_state_path();
                // The embedded hub relays this Source's topics only, and only what this
                // process publishes (in-process, `Hub::publish`): an open relay would let
                // anyone push forged notifications to the Destinations subscribed here (signed
                // by the hub with their own secrets) or make the hub fetch and deliver any URL.
                let mut hopts = resourcesync_websub::HubOptions::new(&url);
                hopts.allowed_topics = vec![layout.doc_url("")];
                hopts.publish_over_http = false;
                hopts.private_addresses = opts
                    .hub_private_addresses
                    .unwrap_or_else(|| resourcesync_websub::reach::private_by_default(addr));
                let h = resourcesync_websub::Hub::start(hopts, Some(&db))
                    .map_err(|e| Error::Config(format!("starting the hub: {e}")))?;
                embedded = Some(h.clone());
                (url, crate::notify::HubTarget::Embedded(h))
            }
            HubChoice::Url(u) => {
                let client = resourcesync_websub::hub::http_client(Duration::from_secs(10))
                    .map_err(|e| Error::Config(e.to_string()))?;
                (u, crate::notify::HubTarget::Remote(client))
            }
        };
        let channels = crate::notify::Channels::of(&layout, &hub_url);
        source.set_notification_channels(Some(channels.clone()));
        crate::notify::init_cursor(source.state())?;
        notifier = Some(crate::notify::Notifier::new(channels, target, layout));
    }
    let mut publisher = Publisher::new(source, opts.watch.resourcelist_interval);
    if let Some(n) = notifier {
        publisher = publisher.with_notifier(n);
    }
    let cancel = CancellationToken::new();
    // The watcher first, so that nothing written during the first scan is missed.
    let watching = {
        // Setting up a recursive watch walks the tree: blocking work.
        let (p, token) = (publisher.clone(), cancel.child_token());
        tokio::task::spawn_blocking(move || watch(p, opts.watch, token))
            .await
            .map_err(|e| Error::Task(format!("setting up the watcher: {e}")))??
    };
    let first = publisher.batch(true).await?;
    for s in &first.scan.skipped {
        tracing::warn!(path = %s.path.display(), reason = %s.reason, "skipped");
    }
    tracing::debug!(
        resources = first.scan.resources,
        bytes = first.scan.bytes,
        created = first.scan.created,
        updated = first.scan.updated,
        deleted = first.scan.deleted,
        read = first.scan.hashed,
        bytes_read = first.scan.bytes_hashed,
        documents_written = first.publish.as_ref().map_or(0, |p| p.written.len()),
        "first scan and publish"
    );
    let app = {
        let p = publisher.clone();
        let timeout = opts.request_timeout;
        tokio::task::spawn_blocking(move || App::new(&*p.lock()?, p.clone(), timeout))
            .await
            .map_err(|e| Error::Task(format!("opening the state: {e}")))??
    };
    let base = app.layout.base.clone();
    let well_known = app.layout.well_known_url();
    let mut router = router(Arc::new(app));
    if let Some(h) = &embedded {
        let path = format!(
            "{}{}/{}",
            base_path(&base),
            crate::publish::layout::DOCS_DIR,
            crate::notify::HUB_PATH
        );
        router = Router::new().nest_service(&path, h.router()).merge(router);
    }
    let listener = IdleListener::new(listener, opts.idle_timeout);
    let token = cancel.clone();
    let grace = opts.shutdown_grace;
    let hub_in_task = embedded.clone();
    let task = tokio::spawn(async move {
        let watcher = tokio::spawn(watching);
        let stop = token.clone();
        let mut server = tokio::spawn(crate::serve::accept::serve(listener, router, stop));
        let early = tokio::select! {
            r = &mut server => Some(r),
            () = token.cancelled() => None,
        };
        token.cancel();
        let served = match early {
            Some(r) => r,
            None => match tokio::time::timeout(grace, &mut server).await {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!("connections still open after {grace:?}: closing them");
                    server.abort();
                    Ok(())
                }
            },
        };
        // The watcher stops after its current batch (a scan cannot be interrupted; its
        // transaction keeps the state consistent either way).
        if tokio::time::timeout(grace, watcher).await.is_err() {
            tracing::warn!("a scan is still running after {grace:?}; not waiting for it");
        }
        if let Some(h) = hub_in_task {
            h.shutdown();
        }
        served.map_err(|e| Error::Task(format!("server on {addr}: {e}")))
    });
    Ok(Running {
        addr,
        base,
        well_known,
        cancel,
        task,
        publisher,
        hub: embedded,
        first,
    })
}

/// What the request handlers need.
#[derive(Debug)]
struct App {
    layout: Layout,
    /// The path of the base URL (`/`, or `/data/`).
    prefix: String,
    /// The canonical directory of resources.
    root: PathBuf,
    /// The canonical documents folder.
    docs: PathBuf,
    /// The Source Description's file.
    well_known: PathBuf,
    /// What is never served as a resource (documents, state).
    own: OwnPaths,
    inventory: DirInventory,
    /// A read connection to the state (for `robots.txt`).
    state: Mutex<State>,
    /// The recorded resources, in memory (digests and types, without a database lookup).
    publisher: Publisher,
    /// `<Capability List>; rel="resourcesync"`.
    link: Option<HeaderValue>,
    request_timeout: Duration,
    /// The notification channels, when notifications are sent.
    channels: Option<crate::notify::Channels>,
    /// Gzip responses in progress (see [`GZIP_AT_ONCE`]).
    gzip: Arc<tokio::sync::Semaphore>,
}

fn canonical(p: &Path) -> Result<PathBuf> {
    p.canonicalize().map_err(|e| Error::io(p, e))
}

impl App {
    fn new(src: &Source, publisher: Publisher, request_timeout: Duration) -> Result<Self> {
        let layout = src.layout().clone();
        let prefix = base_path(&layout.base);
        let root = canonical(src.inventory().root())?;
        let docs = canonical(&layout.docs_dir())?;
        let own = src.own_paths().clone();
        let state = State::open(src.state_path())?;
        // Z39.99-2014 §6.3.3: the Capability List covering the resource, in a Link header.
        let link = HeaderValue::from_str(&format!(
            "<{}>; rel=\"resourcesync\"",
            layout.doc_url("capabilitylist.xml")
        ))
        .ok();
        Ok(App {
            well_known: layout.well_known_path(),
            layout,
            prefix,
            root,
            docs,
            own,
            inventory: src.inventory().clone(),
            state: Mutex::new(state),
            publisher,
            link,
            request_timeout,
            channels: src.config().publish.notifications.clone(),
            gzip: Arc::new(tokio::sync::Semaphore::new(GZIP_AT_ONCE)),
        })
    }
}

/// The path of a base URL (`http://h:1/data/` → `/data/`).
fn base_path(base: &str) -> String {
    let after_scheme = base.split_once("://").map_or(base, |(_, r)| r);
    match after_scheme.find('/') {
        Some(i) => after_scheme[i..].to_owned(),
        None => "/".to_owned(),
    }
}

/// Change Notification 1.0.1 §4.1, Framework Notification 1.0.1 §4.1: a topic URI answers
/// HEAD/GET with 200, `application/xml`, `Link` rel=self and rel=hub, and the most recent
/// payload (empty, `Content-Length: 0`, before the first).
async fn topic(app: &App, rest: &str, head: bool) -> Option<Response> {
    let ch = app.channels.as_ref()?;
    let name = rest.strip_prefix("resourcesync/")?;
    let (topic, name) = match name {
        crate::notify::CHANGE_TOPIC => (&ch.change_topic, crate::notify::CHANGE_TOPIC),
        crate::notify::FRAMEWORK_TOPIC => (&ch.framework_topic, crate::notify::FRAMEWORK_TOPIC),
        _ => return None,
    };
    let path = crate::notify::latest_payload_path(&app.layout, name);
    let body = tokio::fs::read(&path).await.unwrap_or_default();
    let mut r = Response::new(if head {
        Body::empty()
    } else {
        Body::from(body.clone())
    });
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(XML));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&resourcesync_websub::link::notification_links(
        topic,
        &ch.hub,
        Some(&app.layout.doc_url("capabilitylist.xml")),
    )) {
        h.insert(header::LINK, v);
    }
    Some(r)
}

/// Marks a response the compression layer may gzip (documents only, never resources).
#[derive(Debug, Clone, Copy)]
struct Compressible;

/// Responses being gzip-compressed at once, over every connection: each holds a compressor of
/// about 330 KiB until its body is sent or dropped, and a client that does not read (an HTTP/2
/// stream whose window stays shut) can hold it for as long as its connection lives. Past this,
/// documents are sent uncompressed.
pub const GZIP_AT_ONCE: usize = 32;

/// Bytes read from a file per chunk of a streamed body.
const CHUNK: usize = 64 * 1024;

/// A reader that holds a permit for as long as it lives.
struct Held<R> {
    inner: R,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Held<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

/// A body streamed from `r` that holds `permit` until it is sent or dropped (the compressor
/// wrapping it is dropped with it).
fn held_body<R>(r: R, permit: tokio::sync::OwnedSemaphorePermit) -> Body
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
{
    Body::from_stream(ReaderStream::with_capacity(
        Held {
            inner: r,
            _permit: permit,
        },
        CHUNK,
    ))
}

fn router(app: Arc<App>) -> Router {
    let compression = CompressionLayer::new().compress_when(
        |status: StatusCode,
         _: axum::http::Version,
         _: &HeaderMap,
         ext: &axum::http::Extensions| {
            status == StatusCode::OK && ext.get::<Compressible>().is_some()
        },
    );
    Router::new()
        .fallback(handle)
        .with_state(app)
        .layer(compression)
        .layer(axum::middleware::map_response(finish))
}

/// Applied to every response after compression: a gzip body is another representation, so it
/// gets its own strong ETag (RFC 9110 §8.8.3), `-gzip` appended; and no type sniffing.
async fn finish(mut res: Response) -> Response {
    let gz = res
        .headers()
        .get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
    if gz {
        let tagged = res
            .headers()
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .and_then(|t| t.strip_suffix('"'))
            .filter(|t| !t.ends_with("-gzip"))
            .and_then(|t| HeaderValue::from_str(&format!("{t}-gzip\"")).ok());
        if let Some(v) = tagged {
            res.headers_mut().insert(header::ETAG, v);
        }
    }
    res.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

fn plain(status: StatusCode, msg: &str) -> Response {
    let mut r = Response::new(Body::from(format!("{msg}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "not found")
}

/// Why a path is not served.
#[derive(Debug)]
enum Refusal {
    /// 404: nothing (servable) there.
    NotFound,
    /// 400: a path that could leave the directory.
    BadPath(UnsafePath),
}

impl Refusal {
    fn response(&self) -> Response {
        match self {
            // `/dir/` and `//`: nothing there.
            Refusal::BadPath(UnsafePath::Segment(s)) if s.is_empty() => not_found(),
            Refusal::BadPath(e) => plain(StatusCode::BAD_REQUEST, &format!("bad path: {e}")),
            Refusal::NotFound => not_found(),
        }
    }
}

async fn handle(AxState(app): AxState<Arc<App>>, req: Request) -> Response {
    // The body is not needed (GET and HEAD only): dropped at once, so that a client sending
    // one anyway (HTTP/2 allows it) holds no buffered request data while its answer is made.
    let (parts, _) = req.into_parts();
    let timeout = app.request_timeout;
    match tokio::time::timeout(
        timeout,
        route(app, &parts.method, parts.uri.path(), &parts.headers),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => plain(StatusCode::SERVICE_UNAVAILABLE, "timed out"),
    }
}

/// What kind of file is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A capability document: `application/xml`, compressible, revalidated by caches.
    Document,
    /// Another file among the documents (the page, dump packages).
    Other,
    /// The page for people: carries the `Link` header too.
    Page,
    /// A resource of the directory.
    Resource,
}

/// A file to send, resolved and checked.
#[derive(Debug)]
struct Resolved {
    path: PathBuf,
    kind: Kind,
    content_type: HeaderValue,
    /// The recorded state of a resource, for its digest.
    recorded: Option<Served>,
    /// The file opened, its metadata, and its content when small, all done on the blocking
    /// thread that resolved the path (one hand-off per request instead of one per step).
    opened: Option<Opened>,
}

/// A file opened on a blocking thread.
#[derive(Debug)]
struct Opened {
    file: std::fs::File,
    md: std::fs::Metadata,
    /// The whole content, for files up to [`INLINE_FILE`] bytes.
    content: Option<Vec<u8>>,
}

/// Files up to this size are read whole when opened; larger ones are streamed, 64 KiB at a
/// time as the client takes them. This bounds what a response the client does not read holds
/// (an HTTP/2 stream whose window stays shut, a connection that stopped reading): at most
/// 64 KiB and an open file, see [`crate::serve::accept`]. Resources up to this size are also opened
/// and read on the runtime's worker thread, in a few system calls (as a web server without
/// asynchronous file I/O does); larger ones, and every document, go through the blocking
/// thread pool.
const INLINE_FILE: u64 = 64 * 1024;

/// Opens a file for reading without blocking on special files (a FIFO would wait for a
/// writer); only regular files are served, which `O_NONBLOCK` does not affect.
fn open_nonblocking(path: &Path) -> io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.custom_flags(libc::O_NONBLOCK);
    }
    o.open(path)
}

fn open_resolved(mut r: Resolved) -> Resolved {
    use std::io::Read as _;
    if let Ok(mut file) = std::fs::File::open(&r.path) {
        if let Ok(md) = file.metadata() {
            let content = (md.is_file() && md.len() <= INLINE_FILE).then(|| {
                let mut buf = Vec::with_capacity(md.len() as usize);
                file.read_to_end(&mut buf).ok().map(|_| buf)
            });
            r.opened = Some(Opened {
                file,
                md,
                content: content.flatten(),
            });
        }
    }
    r
}

async fn route(app: Arc<App>, method: &Method, path: &str, headers: &HeaderMap) -> Response {
    let head = *method == Method::HEAD;
    if *method != Method::GET && !head {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if path == "/robots.txt" {
        return robots(app, head).await;
    }
    let well_known = || Resolved {
        path: app.well_known.clone(),
        kind: Kind::Document,
        content_type: HeaderValue::from_static(XML),
        recorded: None,
        opened: None,
    };
    // Z39.99-2014 §6.3.2: the Source Description at the well-known URI of the host.
    if path == "/.well-known/resourcesync" {
        return send(&app, head, headers, well_known()).await;
    }
    let Some(rest) = path.strip_prefix(app.prefix.as_str()) else {
        return not_found();
    };
    if rest == ".well-known/resourcesync" {
        return send(&app, head, headers, well_known()).await;
    }
    if rest.is_empty() {
        let page = Resolved {
            path: app.docs.join("index.html"),
            kind: Kind::Page,
            content_type: HeaderValue::from_static(HTML),
            recorded: None,
            opened: None,
        };
        return send(&app, head, headers, page).await;
    }
    if let Some(r) = topic(&app, rest, head).await {
        return r;
    }
    if !rest.starts_with("resourcesync/") {
        // A resource: resolved, opened and checked here; read here too when small.
        return match resolve_resource(&app, rest) {
            Ok(r) => send(&app, head, headers, r).await,
            Err(refusal) => refusal.response(),
        };
    }
    let rest = rest.to_owned();
    let a = app.clone();
    let resolved = tokio::task::spawn_blocking(move || {
        resolve_document(&a, rest.strip_prefix("resourcesync/").unwrap_or(&rest)).map(open_resolved)
    })
    .await;
    match resolved {
        Ok(Ok(r)) => send(&app, head, headers, r).await,
        Ok(Err(refusal)) => refusal.response(),
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}

fn hidden(rel: &Path) -> bool {
    rel.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

/// A document under the documents folder (no dotfiles: temporary files are never served).
fn resolve_document(app: &App, url_path: &str) -> std::result::Result<Resolved, Refusal> {
    let rel = decode_path(url_path).map_err(Refusal::BadPath)?;
    if hidden(&rel) {
        return Err(Refusal::NotFound);
    }
    let path = app
        .docs
        .join(&rel)
        .canonicalize()
        .map_err(|_| Refusal::NotFound)?;
    if !path.starts_with(&app.docs) || !path.is_file() {
        return Err(Refusal::NotFound);
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let (kind, content_type) = match ext.as_deref() {
        Some("xml") => (Kind::Document, HeaderValue::from_static(XML)),
        Some("html") => (Kind::Other, HeaderValue::from_static(HTML)),
        _ => (Kind::Other, type_header(&mime_type(&path))),
    };
    Ok(Resolved {
        path,
        kind,
        content_type,
        recorded: None,
        opened: None,
    })
}

/// A media type as a header value (`application/octet-stream` if it cannot be one).
fn type_header(t: &str) -> HeaderValue {
    HeaderValue::from_str(t).unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

/// A resource of the directory, never outside it, never in the state or output directories:
/// opened (the file actually opened is checked, so no link can lead out of the tree between a
/// check and the open), and read whole when small.
fn resolve_resource(app: &App, url_path: &str) -> std::result::Result<Resolved, Refusal> {
    let rel = decode_path(url_path).map_err(Refusal::BadPath)?;
    let in_state_dir = rel
        .components()
        .next()
        .is_some_and(|c| c.as_os_str() == STATE_DIR);
    if in_state_dir || !app.inventory.admits(&rel) {
        return Err(Refusal::NotFound);
    }
    let full = app.root.join(&rel);
    // Opened beneath the root with no link on the way: the file is the one at `full`.
    // Otherwise (a link, no `openat2`): opened by path, then asked where it went.
    let (mut file, path) = match app.inventory.open_direct(&rel) {
        Ok(Some(file)) => (file, full.clone()),
        Ok(None) => {
            let file = open_nonblocking(&full).map_err(|_| Refusal::NotFound)?;
            let path = opened_path(&file)
                .map_or_else(|| full.canonicalize(), Ok)
                .map_err(|_| Refusal::NotFound)?;
            (file, path)
        }
        Err(_) => return Err(Refusal::NotFound),
    };
    if path != full {
        // Through a symbolic link: the target must be inside the tree and admitted too.
        let Ok(target_rel) = path.strip_prefix(&app.root) else {
            return Err(Refusal::NotFound);
        };
        if target_rel.as_os_str().is_empty() || !app.inventory.admits(target_rel) {
            return Err(Refusal::NotFound);
        }
    }
    if app.own.contains(&path) {
        return Err(Refusal::NotFound);
    }
    let md = file.metadata().map_err(|_| Refusal::NotFound)?;
    if !md.is_file() {
        return Err(Refusal::NotFound);
    }
    let recorded = app.publisher.served().get(&key(&rel)).cloned();
    let content_type = match recorded.as_ref().and_then(|r| r.content_type.clone()) {
        Some(t) => t,
        None => type_header(&mime_type(&rel)),
    };
    // Small: read here, the size fstat gave (no read to find the end: a file growing meanwhile
    // is sent as it was when opened, as Content-Length says). One that shrank meanwhile is
    // streamed instead, from its start.
    let content = if md.len() <= INLINE_FILE {
        use std::io::{Read as _, Seek as _};
        let mut buf = vec![0u8; md.len() as usize];
        match file.read_exact(&mut buf) {
            Ok(()) => Some(buf),
            Err(_) => {
                file.rewind().map_err(|_| Refusal::NotFound)?;
                None
            }
        }
    } else {
        None
    };
    let opened = Some(Opened { file, md, content });
    Ok(Resolved {
        path,
        kind: Kind::Resource,
        content_type,
        recorded,
        opened,
    })
}

async fn robots(app: Arc<App>, head: bool) -> Response {
    let a = app.clone();
    let url = tokio::task::spawn_blocking(move || {
        let st = a.state.lock().ok()?;
        published_resource_list(&a.layout, &st)
            .ok()
            .flatten()
            .map(|(.., url)| url)
    })
    .await
    .ok()
    .flatten();
    // Z39.99-2014 §6.3.4: the Resource List as a Sitemap directive.
    let mut body = String::from("User-agent: *\nDisallow:\n");
    if let Some(url) = url {
        body.push_str(&format!("Sitemap: {url}\n"));
    }
    let len = body.len();
    let mut r = Response::new(if head {
        Body::empty()
    } else {
        Body::from(body)
    });
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn mtime_ns(md: &std::fs::Metadata) -> i128 {
    md.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// A strong validator: the recorded digest when the file is as it was hashed, else size and
/// modification time (which change with every write).
fn etag(recorded: Option<&Served>, len: u64, mtime_ns: i128) -> HeaderValue {
    if let Some(t) = recorded
        .filter(|r| r.length == len && r.mtime_ns == mtime_ns)
        .and_then(|r| r.etag.clone())
    {
        return t;
    }
    HeaderValue::from_str(&format!("\"{len:x}-{mtime_ns:x}\""))
        .unwrap_or(HeaderValue::from_static("\"0\""))
}

fn http_date(secs: i64) -> Option<String> {
    let ts = Timestamp::from_second(secs).ok()?;
    DateTimePrinter::new().timestamp_to_rfc9110_string(&ts).ok()
}

/// An HTTP date as a header value.
pub(crate) fn http_date_value(secs: i64) -> Option<HeaderValue> {
    http_date(secs).and_then(|d| HeaderValue::from_str(&d).ok())
}

fn parse_http_date(v: &HeaderValue) -> Option<i64> {
    let s = v.to_str().ok()?;
    DateTimeParser::new()
        .parse_timestamp(s.trim())
        .ok()
        .map(|t| t.as_second())
}

/// The opaque part of an entity tag, without `W/` and without our `-gzip` representation
/// suffix (so that a validator of the gzip representation revalidates both).
fn opaque(tag: &str) -> &str {
    let t = tag.trim();
    let t = t.strip_prefix("W/").unwrap_or(t);
    match t.strip_suffix("-gzip\"") {
        Some(s) => s,
        None => t.strip_suffix('"').unwrap_or(t),
    }
}

/// Whether an `If-Match`/`If-None-Match` list matches `etag` (RFC 9110 §13.1.1-2).
fn tag_list_matches(v: &HeaderValue, etag: &str, weak_ok: bool) -> bool {
    let Ok(s) = v.to_str() else { return false };
    s.split(',')
        .map(str::trim)
        .any(|t| t == "*" || ((weak_ok || !t.starts_with("W/")) && opaque(t) == opaque(etag)))
}

fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let q_zero = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            coding.eq_ignore_ascii_case("gzip") && !q_zero
        })
}

/// A requested byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Range {
    /// Send the whole file (no range, several ranges, or one not understood).
    Whole,
    /// Bytes first..=last.
    Part(u64, u64),
    /// No byte of the range exists.
    Unsatisfiable,
}

fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a single-range `Range` header (RFC 9110 §14.1.2). Several ranges are answered with
/// the whole representation (§14.2 lets a server ignore `Range`).
fn parse_range(v: &str, len: u64) -> Range {
    let v = v.trim();
    let Some(spec) = v
        .get(..6)
        .filter(|u| u.eq_ignore_ascii_case("bytes="))
        .map(|_| &v[6..])
    else {
        return Range::Whole;
    };
    if spec.contains(',') {
        return Range::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Range::Whole;
    };
    if a.is_empty() {
        let Some(n) = digits(b) else {
            return Range::Whole;
        };
        if n == 0 || len == 0 {
            return Range::Unsatisfiable;
        }
        return Range::Part(len.saturating_sub(n), len - 1);
    }
    let Some(first) = digits(a) else {
        return Range::Whole;
    };
    let last = if b.is_empty() {
        None
    } else {
        match digits(b) {
            Some(l) if l >= first => Some(l),
            _ => return Range::Whole,
        }
    };
    if first >= len {
        return Range::Unsatisfiable;
    }
    Range::Part(first, last.map_or(len - 1, |l| l.min(len - 1)))
}

fn status_only(status: StatusCode, mut headers: HeaderMap) -> Response {
    headers.remove(header::CONTENT_LENGTH);
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

/// Sends a resolved file: validators, conditional requests, ranges, HEAD, streamed body.
async fn send(app: &App, head: bool, req: &HeaderMap, mut r: Resolved) -> Response {
    let (mut file, md, content) = match r.opened.take() {
        Some(o) => (tokio::fs::File::from_std(o.file), o.md, o.content),
        None => {
            let Ok(file) = tokio::fs::File::open(&r.path).await else {
                return not_found();
            };
            let Ok(md) = file.metadata().await else {
                return not_found();
            };
            (file, md, None)
        }
    };
    if !md.is_file() {
        return not_found();
    }
    let len = md.len();
    let mns = mtime_ns(&md);
    let mtime_secs = (mns.div_euclid(1_000_000_000)) as i64;
    let tag_value = etag(r.recorded.as_ref(), len, mns);
    let tag = tag_value.to_str().unwrap_or_default();

    let mut h = HeaderMap::with_capacity(12);
    h.insert(header::CONTENT_TYPE, r.content_type.clone());
    let compressible = r.kind == Kind::Document;
    // A 304 answers for the representation the client would get: the gzip one when it asks.
    let shown_tag = if compressible && accepts_gzip(req) {
        HeaderValue::from_str(&format!("{}-gzip\"", opaque(tag))).ok()
    } else {
        Some(tag_value.clone())
    };
    h.insert(header::ETAG, tag_value.clone());
    // Built when the index was loaded, for a file as it was hashed.
    let recorded_date = r
        .recorded
        .as_ref()
        .filter(|s| s.length == len && s.mtime_ns == mns)
        .and_then(|s| s.last_modified.clone());
    if let Some(v) = recorded_date.or_else(|| http_date_value(mtime_secs)) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if matches!(r.kind, Kind::Resource | Kind::Page) {
        if let Some(link) = &app.link {
            h.insert(header::LINK, link.clone());
        }
    }
    if r.kind != Kind::Resource {
        // Documents change as the Source changes: caches revalidate them every time.
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    if compressible {
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }

    // Preconditions, in the order of RFC 9110 §13.2.2.
    if let Some(v) = req.get(header::IF_MATCH) {
        if !tag_list_matches(v, tag, false) {
            return status_only(StatusCode::PRECONDITION_FAILED, h);
        }
    } else if let Some(since) = req
        .get(header::IF_UNMODIFIED_SINCE)
        .and_then(parse_http_date)
    {
        if mtime_secs > since {
            return status_only(StatusCode::PRECONDITION_FAILED, h);
        }
    }
    let not_modified = match req.get(header::IF_NONE_MATCH) {
        Some(v) => tag_list_matches(v, tag, true),
        None => req
            .get(header::IF_MODIFIED_SINCE)
            .and_then(parse_http_date)
            .is_some_and(|since| mtime_secs <= since),
    };
    if not_modified {
        if let Some(v) = shown_tag {
            h.insert(header::ETAG, v);
        }
        return status_only(StatusCode::NOT_MODIFIED, h);
    }

    // Range, unless If-Range names another representation (§13.1.5).
    let if_range_ok = match req.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(v) if v.trim_start().starts_with('"') => v.trim() == tag,
        Some(v) if v.trim_start().starts_with("W/") => false,
        Some(v) => DateTimeParser::new()
            .parse_timestamp(v.trim())
            .is_ok_and(|t| t.as_second() == mtime_secs),
    };
    let range = match req.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(v) if if_range_ok => parse_range(v, len),
        _ => Range::Whole,
    };
    let (status, first, count) = match range {
        Range::Whole => (StatusCode::OK, 0, len),
        Range::Part(a, b) => {
            let cr = format!("bytes {a}-{b}/{len}");
            if let Ok(v) = HeaderValue::from_str(&cr) {
                h.insert(header::CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, a, b - a + 1)
        }
        Range::Unsatisfiable => {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                h.insert(header::CONTENT_RANGE, v);
            }
            let mut resp = status_only(StatusCode::RANGE_NOT_SATISFIABLE, h);
            resp.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
            return resp;
        }
    };
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    // A gzip response holds a compressor (about 330 KiB) until its body is sent or dropped:
    // only GZIP_AT_ONCE at a time, the others are sent as they are (RFC 9110 §12.5.3: identity
    // is always acceptable unless the client excludes it).
    let gzip = (compressible && status == StatusCode::OK && accepts_gzip(req))
        .then(|| app.gzip.clone().try_acquire_owned().ok())
        .flatten();
    let gzipped = gzip.is_some();
    let body = if head {
        match gzip {
            Some(permit) => held_body(tokio::io::empty(), permit),
            None => Body::empty(),
        }
    } else if let Some(mut buf) = content.filter(|b| b.len() as u64 == len) {
        // Small file read when opened: the requested bytes, from memory.
        buf.truncate((first + count) as usize);
        buf.drain(..first as usize);
        match gzip {
            Some(permit) => held_body(io::Cursor::new(buf), permit),
            None => Body::from(buf),
        }
    } else {
        if first > 0 && file.seek(io::SeekFrom::Start(first)).await.is_err() {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "cannot read the file");
        }
        match gzip {
            Some(permit) => held_body(file.take(count), permit),
            None => Body::from_stream(ReaderStream::with_capacity(file.take(count), CHUNK)),
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = h;
    if gzipped {
        resp.extensions_mut().insert(Compressible);
    }
    resp
}

#[cfg(test)]
mod tests;
