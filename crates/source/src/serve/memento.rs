//! Memento (RFC 7089, HTTP Framework for Time-Based Access to Resource States): a TimeMap, a
//! TimeGate and the mementos of each original resource (URI-R) an [`Archive`] keeps versions
//! of. Shared by the servers that serve a Destination's copies (the aggregator's `--serve`:
//! `crates/aggregate/src/memento.rs` gives its [`Archive`]).
//!
//! The URL shapes are pywb's (and, but for the collection, the Wayback Machine's), relative to
//! a base the caller routes here (`BASE/`):
//!
//! | path | what |
//! | --- | --- |
//! | `timemap/link/{URI-R}` | the TimeMap (RFC 7089 §5), `application/link-format` (RFC 6690) |
//! | `timegate/{URI-R}` | the TimeGate (§4.1, pattern 2.2 of §4.2: a TimeGate apart from the original): `302` to the memento selected by `Accept-Datetime`, `Vary: accept-datetime` |
//! | `{YYYYMMDDhhmmss}/{URI-R}` | a memento (§4.1): its body, `Memento-Datetime` |
//!
//! The URI-R is the rest of the path and the query, verbatim (as pywb and the Wayback Machine
//! take it; when it is not found so, percent-decoded or with the scheme's `//` restored). It
//! is only looked up in the archive's records, never fetched and never used as a path.
//!
//! Selection (RFC 7089 §4.1.1 leaves it to the server): the memento current at the
//! `Accept-Datetime` (the last whose `Memento-Datetime` is not after it), the first when it is
//! before every memento, the last when none is asked for. A memento URL whose datetime is not
//! one memento's exactly redirects (`302`) to the memento current then, as the Wayback Machine
//! does. Datetimes are HTTP-dates (RFC 7089 §2.1.1, RFC 7231 §7.1.1.1), to the second: two
//! versions seen within one second are one URL, the later one's.
//!
//! Memory does not grow with the number of versions: a TimeGate reads them a page at a time
//! keeping five (first, previous, selected, next, last), a TimeMap is streamed a page at a
//! time, a body is streamed from the archive's reader.

use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;

/// The media type of a TimeMap (RFC 7089 §5: RFC 6690 link format).
pub const LINK_FORMAT: &str = "application/link-format";

/// Versions asked of an [`Archive`] at a time.
pub const PAGE: usize = 1000;

/// Bytes streamed at a time.
const CHUNK: usize = 64 * 1024;

/// One version of an original resource, as an [`Archive`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memento {
    /// Its number among the resource's versions (1, 2, … in time order).
    pub seq: u64,
    /// Its `Memento-Datetime`: when the resource had this state.
    pub datetime: Timestamp,
    /// Its body's length in bytes.
    pub length: u64,
    /// What names its body in the archive (a digest).
    pub digest: String,
}

impl Memento {
    /// Its datetime to the second, as its URL and `Memento-Datetime` give it.
    fn second(&self) -> i64 {
        self.datetime.as_second()
    }
}

/// Where the versions of original resources are kept: their records and their bodies. Called
/// on a blocking thread.
pub trait Archive: Send + Sync + 'static {
    /// Up to `limit` versions of `uri_r` numbered after `after`, in time order (empty when it
    /// has none); `Err` with a message saying what could not be read.
    fn mementos(
        &self,
        uri_r: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Memento>, String>;
    /// The body of `m`, a version of `uri_r`; `None` when it is not kept.
    fn open(&self, uri_r: &str, m: &Memento) -> Result<Option<Box<dyn io::Read + Send>>, String>;
    /// The media type to send a body of `uri_r` as.
    fn media_type(&self, uri_r: &str) -> String {
        mime_guess::from_path(uri_r.split(['?', '#']).next().unwrap_or(uri_r))
            .first_raw()
            .unwrap_or("application/octet-stream")
            .to_owned()
    }
}

/// What a path under the base asks for.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    TimeMap(String),
    TimeGate(String),
    Memento(Timestamp, String),
}

/// `rest` (the path after the base, with `?query` when there is one) as a Memento request;
/// `None` when it is none of them; `Err` for a memento datetime that is not one.
fn asked(rest: &str) -> Option<Result<Asked, String>> {
    if let Some(u) = rest.strip_prefix("timemap/link/") {
        return Some(Ok(Asked::TimeMap(u.to_owned())));
    }
    if let Some(u) = rest.strip_prefix("timegate/") {
        return Some(Ok(Asked::TimeGate(u.to_owned())));
    }
    let (ts, u) = rest.split_once('/')?;
    if ts.len() == 14 && ts.bytes().all(|b| b.is_ascii_digit()) {
        return Some(parse_14(ts).map(|t| Asked::Memento(t, u.to_owned())));
    }
    None
}

/// `YYYYMMDDhhmmss` (UTC), the datetime of a memento's URL.
pub fn format_14(t: Timestamp) -> String {
    t.strftime("%Y%m%d%H%M%S").to_string()
}

/// Parses [`format_14`]'s form.
fn parse_14(s: &str) -> Result<Timestamp, String> {
    let n = |a: usize, b: usize| s[a..b].parse::<i16>().unwrap_or(-1);
    jiff::civil::DateTime::new(
        n(0, 4),
        n(4, 6) as i8,
        n(6, 8) as i8,
        n(8, 10) as i8,
        n(10, 12) as i8,
        n(12, 14) as i8,
        0,
    )
    .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
    .map(|z| z.timestamp())
    .map_err(|e| format!("{s} is not a memento datetime (YYYYMMDDhhmmss, UTC): {e}"))
}

/// An HTTP-date (RFC 7231 §7.1.1.1, IMF-fixdate), as RFC 7089 §2.1.1 writes datetimes.
pub fn http_date(t: Timestamp) -> String {
    httpdate::fmt_http_date(SystemTime::from(t))
}

/// An `Accept-Datetime` value (RFC 7089 §2.1.1: an HTTP-date).
pub fn parse_accept_datetime(v: &str) -> Result<Timestamp, String> {
    let t = httpdate::parse_http_date(v.trim()).map_err(|_| {
        format!(
            "Accept-Datetime {:?} is not an HTTP-date (RFC 7089 §2.1.1), e.g. \
             \"Tue, 20 Jun 2000 18:02:59 GMT\"",
            v.chars().take(80).collect::<String>()
        )
    })?;
    Timestamp::try_from(t).map_err(|e| format!("Accept-Datetime out of range: {e}"))
}

/// `uri` with what cannot stand in a header or between `<` and `>` percent-encoded (controls,
/// spaces, non-ASCII, `<>"`): the URI-R as the URLs here write it.
pub fn uri_for_headers(uri: &str) -> String {
    use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
    const SET: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'<').add(b'>');
    utf8_percent_encode(uri, SET).to_string()
}

/// The URLs of one URI-R here.
struct Urls<'a> {
    base: &'a str,
    /// The URI-R as written in URLs and headers ([`uri_for_headers`]).
    uri_r: &'a str,
    /// The URI-R as the archive records it.
    key: &'a str,
}

impl Urls<'_> {
    fn timemap(&self) -> String {
        format!("{}timemap/link/{}", self.base, self.uri_r)
    }
    fn timegate(&self) -> String {
        format!("{}timegate/{}", self.base, self.uri_r)
    }
    fn memento(&self, m: &Memento) -> String {
        format!("{}{}/{}", self.base, format_14(m.datetime), self.uri_r)
    }
    /// A link to a memento with its relations and datetime (RFC 7089 §2.2.1).
    fn memento_link(&self, m: &Memento, rel: &str) -> String {
        format!(
            "<{}>; rel=\"{rel}\"; datetime=\"{}\"",
            self.memento(m),
            http_date(m.datetime)
        )
    }
    fn original_link(&self) -> String {
        format!("<{}>; rel=\"original\"", self.uri_r)
    }
    fn timegate_link(&self) -> String {
        format!("<{}>; rel=\"timegate\"", self.timegate())
    }
    fn timemap_link(&self) -> String {
        format!(
            "<{}>; rel=\"timemap\"; type=\"{LINK_FORMAT}\"",
            self.timemap()
        )
    }
}

/// What a TimeGate selects among a resource's mementos, read once in time order.
#[derive(Debug, Default)]
struct Selection {
    first: Option<Memento>,
    prev: Option<Memento>,
    selected: Option<Memento>,
    next: Option<Memento>,
    last: Option<Memento>,
}

impl Selection {
    /// Takes `m`, the next memento in time order, for the datetime `at` (`None`: the last).
    fn take(&mut self, m: Memento, at: Option<i64>) {
        if self.first.is_none() {
            self.first = Some(m.clone());
        }
        let current = match at {
            None => true,
            Some(at) => m.second() <= at || self.selected.is_none(),
        };
        if current {
            self.prev = self.selected.take();
            self.selected = Some(m.clone());
            self.next = None;
        } else if self.next.is_none() {
            self.next = Some(m.clone());
        }
        self.last = Some(m);
    }

    /// The TimeGate's `Link` entries for the mementos (RFC 7089 §4.1, §2.2.1): each memento
    /// once, its relations together (`first memento`, `prev memento`, `memento`, …).
    fn links(&self, urls: &Urls<'_>) -> Vec<String> {
        // Relations in one order: first, last, prev, next, then `memento`.
        let named = [
            ("first", &self.first),
            ("last", &self.last),
            ("prev", &self.prev),
            ("next", &self.next),
            ("", &self.selected),
        ];
        let mut out: Vec<(&Memento, String)> = Vec::new();
        for (rel, m) in named {
            let Some(m) = m else { continue };
            let i = match out.iter().position(|(x, _)| x.seq == m.seq) {
                Some(i) => i,
                None => {
                    out.push((m, String::new()));
                    out.len() - 1
                }
            };
            if !rel.is_empty() {
                out[i].1.push_str(rel);
                out[i].1.push(' ');
            }
        }
        // In time order.
        out.sort_by_key(|(m, _)| m.seq);
        out.iter()
            .map(|(m, rels)| urls.memento_link(m, &format!("{rels}memento")))
            .collect()
    }
}

fn text(status: StatusCode, msg: String) -> Response {
    (status, format!("{msg}\n")).into_response()
}

fn header_value(s: &str) -> HeaderValue {
    // URIs of the archive's records and our own URLs: visible ASCII; anything else is dropped.
    HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static(""))
}

/// Reads every memento of `uri_r` through `archive` on a blocking thread, into `sel`.
async fn select(
    archive: Arc<dyn Archive>,
    uri_r: String,
    at: Option<i64>,
) -> Result<Selection, String> {
    tokio::task::spawn_blocking(move || {
        let mut sel = Selection::default();
        let mut after = None;
        loop {
            let page = archive.mementos(&uri_r, after, PAGE)?;
            let n = page.len();
            for m in page {
                after = Some(m.seq);
                sel.take(m, at);
            }
            if n < PAGE {
                return Ok(sel);
            }
        }
    })
    .await
    .map_err(|e| format!("reading the versions: {e}"))?
}

/// What `raw` may have been: as asked, once percent-decoded (`http%3A%2F%2F…`), and with the
/// scheme's `//` restored where a proxy merged slashes (`http:/a.example/`), as pywb reads it.
fn candidates(raw: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |c: String| {
        if !out.contains(&c) {
            out.push(c);
        }
    };
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8_lossy()
        .into_owned();
    for c in [raw.to_owned(), decoded] {
        add(c.clone());
        for scheme in ["http:/", "https:/"] {
            if let Some(rest) = c.strip_prefix(scheme).filter(|r| !r.starts_with('/')) {
                add(format!("{scheme}/{rest}"));
            }
        }
    }
    out
}

/// The URI-R to look up: the first of [`candidates`] the archive has versions of; `None` when
/// it has none.
async fn resolve(archive: &Arc<dyn Archive>, raw: String) -> Result<Option<String>, String> {
    let a = archive.clone();
    tokio::task::spawn_blocking(move || {
        for c in candidates(&raw) {
            if !a.mementos(&c, None, 1)?.is_empty() {
                return Ok(Some(c));
            }
        }
        Ok(None)
    })
    .await
    .map_err(|e| format!("reading the versions: {e}"))?
}

/// Answers `rest` (the path after `base`, with its `?query`), a Memento request for one of
/// `archive`'s URI-Rs; `None` when `rest` is not one (the caller's other routes apply). `base`
/// is the absolute URL of this archive's URL space, ending with `/`.
pub async fn respond(
    archive: Arc<dyn Archive>,
    base: &str,
    rest: &str,
    method: &Method,
    headers: &HeaderMap,
) -> Option<Response> {
    let asked = match asked(rest)? {
        Ok(a) => a,
        Err(e) => return Some(text(StatusCode::BAD_REQUEST, e)),
    };
    let raw = match &asked {
        Asked::TimeMap(u) | Asked::TimeGate(u) | Asked::Memento(_, u) => u.clone(),
    };
    if raw.is_empty() {
        return Some(text(
            StatusCode::NOT_FOUND,
            "no original resource (URI-R) given after the path".into(),
        ));
    }
    let uri_r = match resolve(&archive, raw).await {
        Ok(Some(u)) => u,
        Ok(None) => {
            return Some(text(
                StatusCode::NOT_FOUND,
                "no versions of this resource are kept here".into(),
            ));
        }
        Err(e) => return Some(unavailable(&e)),
    };
    // As a URI in headers and the link format: controls, spaces, non-ASCII and `<>"`
    // percent-encoded (an IRI as its URI, RFC 3987 §3.1); the records are looked up as kept.
    let shown = uri_for_headers(&uri_r);
    let urls = Urls {
        base,
        uri_r: &shown,
        key: &uri_r,
    };
    Some(match asked {
        Asked::TimeMap(_) => timemap(archive, &urls).await,
        Asked::TimeGate(_) => timegate(archive, &urls, headers).await,
        Asked::Memento(t, _) => memento(archive, &urls, t, method).await,
    })
}

fn unavailable(e: &str) -> Response {
    tracing::warn!("memento: {e}");
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "the versions cannot be read now".into(),
    )
}

/// The TimeGate (RFC 7089 §4.1.1, §4.2.2: 302 to the selected memento).
async fn timegate(archive: Arc<dyn Archive>, urls: &Urls<'_>, headers: &HeaderMap) -> Response {
    let at = match headers.get("accept-datetime") {
        None => None,
        Some(v) => match v
            .to_str()
            .map_err(|_| "Accept-Datetime is not text".to_owned())
            .and_then(parse_accept_datetime)
        {
            Ok(t) => Some(t.as_second()),
            // RFC 7089 §4.5.3: 400 for an Accept-Datetime that is not one.
            Err(e) => return with_vary(text(StatusCode::BAD_REQUEST, e)),
        },
    };
    let sel = match select(archive, urls.key.to_owned(), at).await {
        Ok(s) => s,
        Err(e) => return unavailable(&e),
    };
    let Some(selected) = &sel.selected else {
        return text(
            StatusCode::NOT_FOUND,
            "no versions of this resource are kept here".into(),
        );
    };
    let mut links = vec![urls.original_link(), urls.timemap_link()];
    links.extend(sel.links(urls));
    let mut res = Response::new(Body::empty());
    *res.status_mut() = StatusCode::FOUND;
    let h = res.headers_mut();
    h.insert(header::LOCATION, header_value(&urls.memento(selected)));
    h.insert(header::LINK, header_value(&links.join(", ")));
    with_vary(res)
}

/// `Vary: accept-datetime` (RFC 7089 §4.1.2): the TimeGate's answers depend on it.
fn with_vary(mut res: Response) -> Response {
    res.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("accept-datetime"));
    res
}

/// A memento (RFC 7089 §4.1.3): the body of the version current at `t`, when `t` is its
/// datetime; else 302 to the memento current then.
async fn memento(
    archive: Arc<dyn Archive>,
    urls: &Urls<'_>,
    t: Timestamp,
    method: &Method,
) -> Response {
    let sel = match select(archive.clone(), urls.key.to_owned(), Some(t.as_second())).await {
        Ok(s) => s,
        Err(e) => return unavailable(&e),
    };
    let Some(m) = sel.selected else {
        return text(
            StatusCode::NOT_FOUND,
            "no versions of this resource are kept here".into(),
        );
    };
    let links = [
        urls.original_link(),
        urls.timegate_link(),
        urls.timemap_link(),
    ]
    .join(", ");
    if m.second() != t.as_second() {
        let mut res = Response::new(Body::empty());
        *res.status_mut() = StatusCode::FOUND;
        res.headers_mut()
            .insert(header::LOCATION, header_value(&urls.memento(&m)));
        res.headers_mut().insert(header::LINK, header_value(&links));
        return res;
    }
    let media_type = archive.media_type(urls.key);
    let mut res = if method == Method::HEAD {
        Response::new(Body::empty())
    } else {
        match body(archive, urls.key.to_owned(), m.clone()).await {
            Ok(b) => Response::new(b),
            Err(r) => return r,
        }
    };
    let h = res.headers_mut();
    h.insert("memento-datetime", header_value(&http_date(m.datetime)));
    h.insert(header::LINK, header_value(&links));
    h.insert(header::CONTENT_TYPE, header_value(&media_type));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(m.length));
    res
}

/// The body of `m`, streamed from the archive's reader on a blocking thread; 404 when it is not
/// kept. A body shorter or longer than its recorded length is cut (the client sees a failed
/// transfer, never other bytes as the memento).
async fn body(archive: Arc<dyn Archive>, uri_r: String, m: Memento) -> Result<Body, Response> {
    let (mut tx, rx) = tokio::io::duplex(CHUNK);
    let (opened_tx, opened_rx) = tokio::sync::oneshot::channel();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        use tokio::io::AsyncWriteExt as _;
        let reader = match archive.open(&uri_r, &m) {
            Ok(Some(r)) => r,
            Ok(None) => {
                let _ = opened_tx.send(Err(StatusCode::NOT_FOUND));
                return;
            }
            Err(e) => {
                tracing::warn!("memento: opening a body of {uri_r}: {e}");
                let _ = opened_tx.send(Err(StatusCode::SERVICE_UNAVAILABLE));
                return;
            }
        };
        let _ = opened_tx.send(Ok(()));
        let mut reader = reader.take(m.length);
        let mut buf = vec![0u8; CHUNK];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if rt.block_on(tx.write_all(&buf[..n])).is_err() {
                        return; // The client went away.
                    }
                }
            }
        }
    });
    match opened_rx.await {
        Ok(Ok(())) => Ok(Body::from_stream(tokio_util::io::ReaderStream::new(rx))),
        Ok(Err(StatusCode::NOT_FOUND)) => Err(text(
            StatusCode::NOT_FOUND,
            "this version's body is no longer kept".into(),
        )),
        _ => Err(unavailable("a version's body could not be read")),
    }
}

/// The TimeMap (RFC 7089 §5.1): `original`, `self`, `timegate`, then every memento in time
/// order, the first and the last saying so; streamed a page of versions at a time.
async fn timemap(archive: Arc<dyn Archive>, urls: &Urls<'_>) -> Response {
    let head = format!(
        "{},\n<{}>; rel=\"self\"; type=\"{LINK_FORMAT}\",\n{}",
        urls.original_link(),
        urls.timemap(),
        urls.timegate_link()
    );
    let (base, uri_r, key) = (
        urls.base.to_owned(),
        urls.uri_r.to_owned(),
        urls.key.to_owned(),
    );
    let (mut tx, rx) = tokio::io::duplex(CHUNK);
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        use tokio::io::AsyncWriteExt as _;
        let urls = Urls {
            base: &base,
            uri_r: &uri_r,
            key: &key,
        };
        let mut send = |s: &str| rt.block_on(tx.write_all(s.as_bytes())).is_ok();
        if !send(&head) {
            return;
        }
        // One memento held back: whether it is the last is known at the next.
        let mut held: Option<(Memento, bool)> = None;
        let mut after = None;
        loop {
            let page = match archive.mementos(&key, after, PAGE) {
                Ok(p) => p,
                Err(e) => {
                    // Cut short: the client sees a failed transfer, not a shorter TimeMap.
                    tracing::warn!("memento: the TimeMap of {uri_r}: {e}");
                    return;
                }
            };
            let n = page.len();
            for m in page {
                after = Some(m.seq);
                if let Some((h, first)) = held.take() {
                    let rel = if first { "first memento" } else { "memento" };
                    if !send(&format!(",\n{}", urls.memento_link(&h, rel))) {
                        return;
                    }
                    held = Some((m, false));
                } else {
                    held = Some((m, true));
                }
            }
            if n < PAGE {
                break;
            }
        }
        if let Some((h, first)) = held {
            let rel = if first {
                "first last memento"
            } else {
                "last memento"
            };
            send(&format!(",\n{}\n", urls.memento_link(&h, rel)));
        }
    });
    let mut res = Response::new(Body::from_stream(tokio_util::io::ReaderStream::new(rx)));
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(LINK_FORMAT));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(seq: u64, secs: i64) -> Memento {
        Memento {
            seq,
            datetime: Timestamp::from_second(secs).expect("t"),
            length: 1,
            digest: String::new(),
        }
    }

    #[test]
    fn paths_are_pywb_shapes() {
        assert_eq!(
            asked("timemap/link/http://a.example/x?y=1"),
            Some(Ok(Asked::TimeMap("http://a.example/x?y=1".into())))
        );
        assert_eq!(
            asked("timegate/http://a.example/"),
            Some(Ok(Asked::TimeGate("http://a.example/".into())))
        );
        assert_eq!(
            asked("20000620180259/http://a.example/"),
            Some(Ok(Asked::Memento(
                Timestamp::from_second(961_524_179).expect("t"),
                "http://a.example/".into()
            )))
        );
        assert!(matches!(asked("20001320180259/http://a/"), Some(Err(_))));
        assert_eq!(asked("2000/http://a/"), None);
        assert_eq!(asked("other"), None);
        assert_eq!(
            format_14(Timestamp::from_second(961_524_179).expect("t")),
            "20000620180259"
        );
    }

    #[test]
    fn a_uri_r_is_looked_up_as_asked_decoded_or_with_its_slashes() {
        assert_eq!(candidates("http://a/x"), ["http://a/x"]);
        assert_eq!(
            candidates("http%3A%2F%2Fa%2Fx"),
            ["http%3A%2F%2Fa%2Fx", "http://a/x"]
        );
        assert_eq!(candidates("https:/a/x"), ["https:/a/x", "https://a/x"]);
        assert_eq!(candidates("../etc/passwd"), ["../etc/passwd"]);
    }

    #[test]
    fn a_uri_r_is_written_as_a_uri() {
        assert_eq!(
            uri_for_headers("http://a.example/caf\u{e9} <x>\n\"y\"?q=1,2;3"),
            "http://a.example/caf%C3%A9%20%3Cx%3E%0A%22y%22?q=1,2;3"
        );
        assert!(HeaderValue::from_str(&uri_for_headers("http://a/\u{1F600}\r\n")).is_ok());
    }

    #[test]
    fn accept_datetime_is_an_http_date() {
        // RFC 7089 §2.1.1's example.
        let t = parse_accept_datetime("Thu, 31 May 2007 20:35:00 GMT").expect("date");
        assert_eq!(http_date(t), "Thu, 31 May 2007 20:35:00 GMT");
        for bad in ["", "yesterday", "2007-05-31T20:35:00Z", "Thu, 31 May 2007"] {
            assert!(parse_accept_datetime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_selected_memento_is_the_one_current_then() {
        let all = [m(1, 100), m(2, 200), m(3, 300)];
        let pick = |at: Option<i64>| {
            let mut s = Selection::default();
            for x in &all {
                s.take(x.clone(), at);
            }
            s
        };
        // RFC 7089 §4.1.1: before the first, the first; after the last, the last.
        let s = pick(Some(50));
        assert_eq!(s.selected.as_ref().map(|x| x.seq), Some(1));
        assert_eq!(s.next.as_ref().map(|x| x.seq), Some(2));
        assert!(s.prev.is_none());
        let s = pick(Some(150));
        assert_eq!(s.selected.as_ref().map(|x| x.seq), Some(1));
        let s = pick(Some(200));
        assert_eq!(s.selected.as_ref().map(|x| x.seq), Some(2));
        assert_eq!(s.prev.as_ref().map(|x| x.seq), Some(1));
        assert_eq!(s.next.as_ref().map(|x| x.seq), Some(3));
        let s = pick(Some(10_000));
        assert_eq!(s.selected.as_ref().map(|x| x.seq), Some(3));
        assert!(s.next.is_none());
        let s = pick(None);
        assert_eq!(s.selected.as_ref().map(|x| x.seq), Some(3));
        let urls = Urls {
            base: "http://h/m/",
            uri_r: "http://a/x",
            key: "http://a/x",
        };
        let links = pick(Some(150)).links(&urls);
        assert_eq!(links.len(), 3, "{links:?}");
        assert!(
            links[0].contains("rel=\"first memento\"") && links[0].contains("/19700101000140/"),
            "{links:?}"
        );
        assert!(links[1].contains("rel=\"next memento\""), "{links:?}");
        assert!(links[2].contains("rel=\"last memento\""), "{links:?}");
    }
}
