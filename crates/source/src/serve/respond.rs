//! Answering a request: routing (documents, topics, `robots.txt`, the page, resources),
//! resolving a path to a document or a resource of the tree (never outside it), and the
//! response bodies.

use super::*;
use crate::inventory::names;
use crate::inventory::own::DOCS_DIR;
/// Marks a response the compression layer may gzip (documents only, never resources).
#[derive(Debug, Clone, Copy)]
pub(super) struct Compressible;

/// Responses being gzip-compressed at once, over every connection: each holds a compressor of
/// about 330 KiB until its body is sent or dropped, and a client that does not read (an HTTP/2
/// stream whose window stays shut) can hold it for as long as its connection lives. Past this,
/// documents are sent uncompressed.
pub const GZIP_AT_ONCE: usize = 32;

/// Bytes read from a file per chunk of a streamed body.
pub(super) const CHUNK: usize = 64 * 1024;

/// A reader that holds a permit for as long as it lives.
pub(super) struct Held<R> {
    pub(super) inner: R,
    pub(super) _permit: tokio::sync::OwnedSemaphorePermit,
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
pub(super) fn held_body<R>(r: R, permit: tokio::sync::OwnedSemaphorePermit) -> Body
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

pub(super) fn router(app: Arc<App>) -> Router {
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
/// gets its own strong ETag (RFC 9110 §8.8.3), `-gzip` appended; no type sniffing; and, but
/// for the page (its own policy), `Content-Security-Policy: sandbox`.
pub(super) async fn finish(mut res: Response) -> Response {
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
    let h = res.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The page sets its own policy; everything else (resources the publisher wrote, the
    // documents, the errors) runs sandboxed on this origin.
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(crate::page::SANDBOX_CSP),
        );
    }
    res
}

pub(super) fn plain(status: StatusCode, msg: &str) -> Response {
    let mut r = Response::new(Body::from(format!("{msg}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub(super) fn not_found() -> Response {
    plain(StatusCode::NOT_FOUND, "not found")
}

/// Why a path is not served from here.
#[derive(Debug)]
pub(super) enum Refusal {
    /// 404: nothing (servable) there.
    NotFound,
    /// 400: a path that could leave the directory.
    BadPath(UnsafePath),
    /// 302: the inventory keeps the resource's bytes at this URL
    /// ([`crate::inventory::Served::Redirect`]).
    Elsewhere(String),
    /// 503: the inventory could not be asked (its server is down); the client may retry.
    Unavailable,
}

impl Refusal {
    fn response(&self) -> Response {
        match self {
            // `/dir/` and `//`: nothing there.
            Refusal::BadPath(UnsafePath::Segment(s)) if s.is_empty() => not_found(),
            Refusal::BadPath(e) => plain(StatusCode::BAD_REQUEST, &format!("bad path: {e}")),
            Refusal::NotFound => not_found(),
            Refusal::Elsewhere(url) => match HeaderValue::from_str(url) {
                Ok(v) => {
                    let mut r = plain(StatusCode::FOUND, "found elsewhere");
                    r.headers_mut().insert(header::LOCATION, v);
                    r
                }
                Err(_) => plain(StatusCode::BAD_GATEWAY, "the inventory gave a bad URL"),
            },
            Refusal::Unavailable => {
                let mut r = plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the inventory is unavailable",
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                r
            }
        }
    }
}

pub(super) async fn handle(AxState(app): AxState<Arc<App>>, req: Request) -> Response {
    // The body is not needed (GET and HEAD only): dropped at once, so that a client sending
    // one anyway (HTTP/2 allows it) holds no buffered request data while its answer is made.
    let (parts, _) = req.into_parts();
    let timeout = app.request_timeout;
    match tokio::time::timeout(
        timeout,
        route(
            app,
            &parts.method,
            parts.uri.path(),
            parts.uri.query(),
            &parts.headers,
        ),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => plain(StatusCode::SERVICE_UNAVAILABLE, "timed out"),
    }
}

/// What kind of file is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A capability document: `application/xml`, compressible, revalidated by caches.
    Document,
    /// Another file among the documents (the static page, dump packages).
    Other,
    /// A resource of the directory.
    Resource,
}

/// A file to send, resolved and checked.
#[derive(Debug)]
pub(super) struct Resolved {
    pub(super) path: PathBuf,
    pub(super) kind: Kind,
    pub(super) content_type: HeaderValue,
    /// The recorded state of a resource, for its digest.
    pub(super) recorded: Option<Served>,
    /// The file opened, its metadata, and its content when small, all done on the blocking
    /// thread that resolved the path (one hand-off per request instead of one per step).
    pub(super) opened: Option<Opened>,
}

/// A file or resource opened on a blocking thread.
#[derive(Debug)]
pub(super) struct Opened {
    /// Its length, as sent in `Content-Length`.
    pub(super) len: u64,
    /// Its modification time (nanoseconds since the epoch).
    pub(super) mtime_ns: i128,
    /// The whole content, for files up to [`INLINE_FILE`] bytes.
    pub(super) content: Option<Vec<u8>>,
    /// Where the rest of the bytes come from.
    pub(super) reader: Reader,
}

/// Where the bytes of an [`Opened`] come from.
pub(super) enum Reader {
    /// A regular file: seekable (ranges), streamed by the runtime.
    File(std::fs::File),
    /// An inventory's reader: streamed from a blocking thread, whole (no ranges).
    Stream(Box<dyn io::Read + Send>),
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reader::File(file) => f.debug_tuple("File").field(file).finish(),
            Reader::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// Files up to this size are read whole when opened; larger ones are streamed, 64 KiB at a
/// time as the client takes them. This bounds what a response the client does not read holds
/// (an HTTP/2 stream whose window stays shut, a connection that stopped reading): at most
/// 64 KiB and an open file, see [`crate::serve::accept`]. Resources up to this size are also opened
/// and read on the runtime's worker thread, in a few system calls (as a web server without
/// asynchronous file I/O does); larger ones, and every document, go through the blocking
/// thread pool.
pub(super) const INLINE_FILE: u64 = 64 * 1024;

pub(super) fn open_resolved(mut r: Resolved) -> Resolved {
    use std::io::Read as _;
    if let Ok(mut file) = std::fs::File::open(&r.path) {
        if let Some(md) = file.metadata().ok().filter(|md| md.is_file()) {
            let content = (md.len() <= INLINE_FILE).then(|| {
                let mut buf = Vec::with_capacity(md.len() as usize);
                file.read_to_end(&mut buf).ok().map(|_| buf)
            });
            r.opened = Some(Opened {
                len: md.len(),
                mtime_ns: mtime_ns(&md),
                content: content.flatten(),
                reader: Reader::File(file),
            });
        }
    }
    r
}

pub(super) async fn route(
    app: Arc<App>,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response {
    let head = *method == Method::HEAD;
    if *method != Method::GET && !head {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    // The names routed here are those no inventory may publish (crate::inventory::names).
    let at_root = path.strip_prefix('/');
    if at_root == Some(names::ROBOTS) {
        return robots(app, head).await;
    }
    // For load balancers and service managers: the server answers (it shadows a resource
    // named `healthz` at the root of the host).
    if at_root == Some(names::HEALTHZ) {
        let mut r = plain(StatusCode::OK, "ok");
        if head {
            *r.body_mut() = Body::empty();
        }
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return r;
    }
    let well_known = || Resolved {
        path: app.well_known.clone(),
        kind: Kind::Document,
        content_type: HeaderValue::from_static(XML),
        recorded: None,
        opened: None,
    };
    // Z39.99-2014 §6.3.2: the Source Description at the well-known URI of the host.
    if at_root == Some(names::SOURCE_DESCRIPTION) {
        return send(&app, head, headers, well_known()).await;
    }
    let Some(rest) = path.strip_prefix(app.prefix.as_str()) else {
        return not_found();
    };
    if rest == names::SOURCE_DESCRIPTION {
        return send(&app, head, headers, well_known()).await;
    }
    if rest.is_empty() {
        // The Source's page, made for each request (crate::serve::page); with the Link header
        // of every page of the Source (Z39.99-2014 §6.3.3).
        let mut r = super::page::page(app.clone(), query, head).await;
        if let Some(l) = &app.link {
            r.headers_mut().insert(header::LINK, l.clone());
        }
        return r;
    }
    if let Some(r) = topic(&app, rest, head).await {
        return r;
    }
    if documents_path(rest).is_none() && app.inventory.local() {
        // A resource of a local inventory: resolved, opened and checked here; read here too
        // when small.
        return match resolve_resource(&app, rest) {
            Ok(r) => send(&app, head, headers, r).await,
            Err(refusal) => refusal.response(),
        };
    }
    let rest = rest.to_owned();
    let a = app.clone();
    let resolved = tokio::task::spawn_blocking(move || match documents_path(&rest) {
        Some(doc) => resolve_document(&a, doc).map(open_resolved),
        // A resource of an inventory that asks a server.
        None => resolve_resource(&a, &rest),
    })
    .await;
    match resolved {
        Ok(Ok(r)) => send(&app, head, headers, r).await,
        Ok(Err(refusal)) => refusal.response(),
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}

/// The path under the documents folder of a request's path under the base, when it is there.
pub(super) fn documents_path(rest: &str) -> Option<&str> {
    rest.strip_prefix(DOCS_DIR)?.strip_prefix('/')
}

pub(super) fn hidden(rel: &Path) -> bool {
    rel.components()
        .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

/// A document under the documents folder (no dotfiles: temporary files are never served).
pub(super) fn resolve_document(
    app: &App,
    url_path: &str,
) -> std::result::Result<Resolved, Refusal> {
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
pub(super) fn type_header(t: &str) -> HeaderValue {
    HeaderValue::from_str(t).unwrap_or(HeaderValue::from_static("application/octet-stream"))
}

/// A resource of the inventory, which checks what it would not list
/// ([`crate::inventory::Inventory::serve`]: for the directory, nothing outside it nor among the
/// Source's own files), and read whole when small.
pub(super) fn resolve_resource(
    app: &App,
    url_path: &str,
) -> std::result::Result<Resolved, Refusal> {
    let rel = decode_path(url_path).map_err(Refusal::BadPath)?;
    let in_state_dir = rel
        .components()
        .next()
        .is_some_and(|c| c.as_os_str() == STATE_DIR);
    if in_state_dir {
        return Err(Refusal::NotFound);
    }
    let served = match app.inventory.serve(&rel) {
        Ok(Some(s)) => s,
        Ok(None) => return Err(Refusal::NotFound),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Refusal::NotFound),
        Err(e) => {
            tracing::warn!("serving {}: {e}", rel.display());
            return Err(Refusal::Unavailable);
        }
    };
    let (path, opened) = match served {
        InventoryServed::File { file, path } => {
            let md = file.metadata().map_err(|_| Refusal::NotFound)?;
            if !md.is_file() {
                return Err(Refusal::NotFound);
            }
            (path, open_file(file, &md)?)
        }
        InventoryServed::Body {
            len,
            mtime_ns,
            body,
        } => (rel.clone(), open_stream(len, mtime_ns, body)?),
        InventoryServed::Redirect(url) => return Err(Refusal::Elsewhere(url)),
    };
    let recorded = app.publisher.served().get(&key(&rel));
    let content_type = match recorded.as_ref().and_then(|r| r.content_type.clone()) {
        Some(t) => t,
        None => type_header(&mime_type(&rel)),
    };
    let opened = Some(opened);
    Ok(Resolved {
        path,
        kind: Kind::Resource,
        content_type,
        recorded,
        opened,
    })
}

/// A regular file: small ones read here, the size fstat gave (no read to find the end: a file
/// growing meanwhile is sent as it was when opened, as Content-Length says). One that shrank
/// meanwhile is streamed instead, from its start.
fn open_file(mut file: std::fs::File, md: &std::fs::Metadata) -> Result<Opened, Refusal> {
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
    Ok(Opened {
        len: md.len(),
        mtime_ns: mtime_ns(md),
        content,
        reader: Reader::File(file),
    })
}

/// An inventory's reader of `len` bytes: read whole here when small (a reader that ends
/// early is a failed response: 503), streamed otherwise.
fn open_stream(
    len: u64,
    mtime_ns: i128,
    mut body: Box<dyn io::Read + Send>,
) -> Result<Opened, Refusal> {
    let content = if len <= INLINE_FILE {
        use std::io::Read as _;
        let mut buf = Vec::with_capacity(len as usize);
        (&mut body)
            .take(len)
            .read_to_end(&mut buf)
            .map_err(|_| Refusal::Unavailable)?;
        if buf.len() as u64 != len {
            return Err(Refusal::Unavailable);
        }
        Some(buf)
    } else {
        None
    };
    Ok(Opened {
        len,
        mtime_ns,
        content,
        reader: Reader::Stream(body),
    })
}
