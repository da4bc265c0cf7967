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
//! looked up in the state database by path (`served.rs`: read-only connections, which neither
//! wait for a scan nor see one half-recorded), behind a bounded cache of recently served paths
//! emptied after every scan that changed something; memory does not grow with the number of
//! resources. A resource is looked up, opened, checked and, up to 64 KiB, read in one go on the
//! runtime's worker thread (a B-tree lookup in pages the operating system caches, then open,
//! readlink, fstat, read: as a web server without asynchronous file I/O does); larger files are
//! streamed through the blocking pool, never read whole, and documents are resolved there too
//! (and, past 64 KiB, streamed likewise).
//!
//! [`memento`] (RFC 7089: TimeMaps, TimeGates, mementos over an [`memento::Archive`] of versions)
//! is not routed by `serve`, which serves a Source's tree: the aggregator routes it over the
//! versions of its copies.
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
mod http;
pub mod memento;
mod page;
mod respond;
pub(crate) mod served;
pub mod tls;
pub mod watch;

use http::*;
pub use respond::GZIP_AT_ONCE;
use respond::*;

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
use crate::inventory::{Inventory, Served as InventoryServed};
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
    source: Source,
    listener: TcpListener,
    opts: ServeOptions,
    hub: Option<HubChoice>,
) -> Result<Running> {
    start_tls(source, listener, opts, hub, None).await
}

/// [`start_with`], over TLS when `tls` is given (HTTP/2 and HTTP/1.1 offered by ALPN; see
/// [`tls`]). The Source's base URL is the caller's to choose (`https://…`).
pub async fn start_tls(
    mut source: Source,
    listener: TcpListener,
    opts: ServeOptions,
    hub: Option<HubChoice>,
    tls: Option<tls::Tls>,
) -> Result<Running> {
    let addr = listener.local_addr().map_err(|cause| Error::Net {
        addr: "listener".into(),
        cause,
    })?;
    let (embedded, notifier) = match hub {
        Some(choice) => {
            let (embedded, n) = connect_hub(&mut source, choice, &opts, addr)?;
            (embedded, Some(n))
        }
        None => (None, None),
    };
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
    log_first(&first);
    let app = {
        let p = publisher.clone();
        let timeout = opts.request_timeout;
        tokio::task::spawn_blocking(move || App::new(&*p.lock()?, p.clone(), timeout))
            .await
            .map_err(|e| Error::Task(format!("opening the state: {e}")))??
    };
    let base = app.layout.base.clone();
    let well_known = app.layout.well_known_url();
    let mut app = app;
    app.hub.clone_from(&embedded);
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
    let serving = Serving {
        listener,
        router,
        tls,
        token: cancel.clone(),
        grace: opts.shutdown_grace,
        hub: embedded.clone(),
        addr,
    };
    let task = tokio::spawn(serving.until_cancelled(watching));
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

/// Starts the embedded hub or connects to a remote one, and makes the notifier that sends
/// this Source's notifications through it; the embedded hub, when it is one.
fn connect_hub(
    source: &mut Source,
    choice: HubChoice,
    opts: &ServeOptions,
    addr: std::net::SocketAddr,
) -> Result<(Option<resourcesync_websub::Hub>, crate::notify::Notifier)> {
    let mut embedded = None;
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
    let notifier = crate::notify::Notifier::new(channels, target, layout);
    Ok((embedded, notifier))
}

/// What the first scan and publish did: each file skipped, and the figures.
fn log_first(first: &crate::watch::BatchReport) {
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
}

/// The server's task: what it serves, and how it stops.
struct Serving {
    listener: IdleListener,
    router: Router,
    tls: Option<tls::Tls>,
    token: CancellationToken,
    /// How long open connections and the watcher's batch are waited for once cancelled.
    grace: Duration,
    /// The embedded hub, shut down at the end.
    hub: Option<resourcesync_websub::Hub>,
    addr: std::net::SocketAddr,
}

impl Serving {
    /// Serves until `token` is cancelled (or the server ends), then waits up to `grace` for the
    /// open connections and the watcher's current batch, and shuts the embedded hub down.
    async fn until_cancelled(
        self,
        watching: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let Serving {
            listener,
            router,
            tls,
            token,
            grace,
            hub: hub_in_task,
            addr,
        } = self;
        let watcher = tokio::spawn(watching);
        let stop = token.clone();
        let mut server = tokio::spawn(crate::serve::accept::serve(listener, router, stop, tls));
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
    }
}

/// What the request handlers need.
#[derive(Debug)]
struct App {
    layout: Layout,
    /// The path of the base URL (`/`, or `/data/`).
    prefix: String,
    /// The canonical documents folder.
    docs: PathBuf,
    /// The Source Description's file.
    well_known: PathBuf,
    /// What the Source publishes (which checks what it would not list).
    inventory: Arc<dyn Inventory>,
    /// A read connection to the state (for `robots.txt`).
    state: Mutex<State>,
    /// The publisher, and through it the recorded resources (digests and types).
    publisher: Publisher,
    /// `<Capability List>; rel="resourcesync"`.
    link: Option<HeaderValue>,
    request_timeout: Duration,
    /// The notification channels, when notifications are sent.
    channels: Option<crate::notify::Channels>,
    /// Gzip responses in progress (see [`GZIP_AT_ONCE`]).
    gzip: Arc<tokio::sync::Semaphore>,
    /// The embedded hub, whose subscribers the page lists.
    hub: Option<resourcesync_websub::Hub>,
}

fn canonical(p: &Path) -> Result<PathBuf> {
    p.canonicalize().map_err(|e| Error::io(p, e))
}

impl App {
    fn new(src: &Source, publisher: Publisher, request_timeout: Duration) -> Result<Self> {
        let layout = src.layout().clone();
        let prefix = base_path(&layout.base);
        let docs = canonical(&layout.docs_dir())?;
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
            docs,
            inventory: src.shared_inventory(),
            state: Mutex::new(state),
            publisher,
            link,
            request_timeout,
            channels: src.config().publish.notifications.clone(),
            gzip: Arc::new(tokio::sync::Semaphore::new(GZIP_AT_ONCE)),
            hub: None,
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
    let name = respond::documents_path(rest)?;
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

#[cfg(test)]
mod tests;
