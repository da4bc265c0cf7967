//! HTTP semantics of a response: validators (`ETag`, `Last-Modified`), conditional requests
//! (RFC 9110 §13.2.2), single byte ranges, and sending the resolved document or resource.

use super::*;
pub(super) async fn robots(app: Arc<App>, head: bool) -> Response {
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

pub(super) fn mtime_ns(md: &std::fs::Metadata) -> i128 {
    md.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// A strong validator: the recorded digest when the file is as it was hashed, else size and
/// modification time (which change with every write).
pub(super) fn etag(recorded: Option<&Served>, len: u64, mtime_ns: i128) -> HeaderValue {
    if let Some(t) = recorded
        .filter(|r| r.length == len && r.mtime_ns == mtime_ns)
        .and_then(|r| r.etag.clone())
    {
        return t;
    }
    HeaderValue::from_str(&format!("\"{len:x}-{mtime_ns:x}\""))
        .unwrap_or(HeaderValue::from_static("\"0\""))
}

pub(super) fn http_date(secs: i64) -> Option<String> {
    let ts = Timestamp::from_second(secs).ok()?;
    DateTimePrinter::new().timestamp_to_rfc9110_string(&ts).ok()
}

/// An HTTP date as a header value.
pub(crate) fn http_date_value(secs: i64) -> Option<HeaderValue> {
    http_date(secs).and_then(|d| HeaderValue::from_str(&d).ok())
}

pub(super) fn parse_http_date(v: &HeaderValue) -> Option<i64> {
    let s = v.to_str().ok()?;
    DateTimeParser::new()
        .parse_timestamp(s.trim())
        .ok()
        .map(|t| t.as_second())
}

/// The opaque part of an entity tag, without `W/` and without our `-gzip` representation
/// suffix (so that a validator of the gzip representation revalidates both).
pub(super) fn opaque(tag: &str) -> &str {
    let t = tag.trim();
    let t = t.strip_prefix("W/").unwrap_or(t);
    match t.strip_suffix("-gzip\"") {
        Some(s) => s,
        None => t.strip_suffix('"').unwrap_or(t),
    }
}

/// Whether an `If-Match`/`If-None-Match` list matches `etag` (RFC 9110 §13.1.1-2).
pub(super) fn tag_list_matches(v: &HeaderValue, etag: &str, weak_ok: bool) -> bool {
    let Ok(s) = v.to_str() else { return false };
    s.split(',')
        .map(str::trim)
        .any(|t| t == "*" || ((weak_ok || !t.starts_with("W/")) && opaque(t) == opaque(etag)))
}

pub(super) fn accepts_gzip(headers: &HeaderMap) -> bool {
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
pub(super) enum Range {
    /// Send the whole file (no range, several ranges, or one not understood).
    Whole,
    /// Bytes first..=last.
    Part(u64, u64),
    /// No byte of the range exists.
    Unsatisfiable,
}

pub(super) fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a single-range `Range` header (RFC 9110 §14.1.2). Several ranges are answered with
/// the whole representation (§14.2 lets a server ignore `Range`).
pub(super) fn parse_range(v: &str, len: u64) -> Range {
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

pub(super) fn status_only(status: StatusCode, mut headers: HeaderMap) -> Response {
    headers.remove(header::CONTENT_LENGTH);
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

/// Sends a resolved file: validators, conditional requests, ranges, HEAD, streamed body.
pub(super) async fn send(app: &App, head: bool, req: &HeaderMap, mut r: Resolved) -> Response {
    let Some(Opened {
        len,
        mtime_ns: mns,
        content,
        reader,
    }) = opened(&mut r).await
    else {
        return not_found();
    };
    // Ranges need a file to seek in, or the bytes in memory; an inventory's stream is sent
    // whole (RFC 9110 §14.2: a server may ignore Range).
    let ranges = content.is_some() || matches!(reader, Reader::File(_));
    let mtime_secs = (mns.div_euclid(1_000_000_000)) as i64;
    let tag_value = etag(r.recorded.as_ref(), len, mns);
    let tag = tag_value.to_str().unwrap_or_default();
    let compressible = r.kind == Kind::Document;
    let mut h = representation_headers(app, &r, &tag_value, len, mns, ranges);
    if let Err(status) = preconditions(req, tag, mtime_secs) {
        if status == StatusCode::NOT_MODIFIED {
            // A 304 answers for the representation the client would get: the gzip one when
            // it asks.
            let shown_tag = if compressible && accepts_gzip(req) {
                HeaderValue::from_str(&format!("{}-gzip\"", opaque(tag))).ok()
            } else {
                Some(tag_value.clone())
            };
            if let Some(v) = shown_tag {
                h.insert(header::ETAG, v);
            }
        }
        return status_only(status, h);
    }
    let range = requested_range(req, tag, mtime_secs, ranges, len);
    let (status, first, count) = match range {
        Range::Whole => (StatusCode::OK, 0, len),
        Range::Part(a, b) => {
            let cr = format!("bytes {a}-{b}/{len}");
            if let Ok(v) = HeaderValue::from_str(&cr) {
                h.insert(header::CONTENT_RANGE, v);
            }
            (StatusCode::PARTIAL_CONTENT, a, b - a + 1)
        }
        Range::Unsatisfiable => return unsatisfiable(h, len),
    };
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    // A gzip response holds a compressor (about 330 KiB) until its body is sent or dropped:
    // only GZIP_AT_ONCE at a time, the others are sent as they are (RFC 9110 §12.5.3: identity
    // is always acceptable unless the client excludes it).
    let gzip = (compressible && status == StatusCode::OK && accepts_gzip(req))
        .then(|| app.gzip.clone().try_acquire_owned().ok())
        .flatten();
    let gzipped = gzip.is_some();
    let bytes = Opened {
        len,
        mtime_ns: mns,
        content,
        reader,
    };
    let body = match body_of(head, bytes, first, count, gzip).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    *resp.headers_mut() = h;
    if gzipped {
        resp.extensions_mut().insert(Compressible);
    }
    resp
}

/// The file or resource to send: opened when resolved, or else the file at its path (none
/// when that is no regular file).
async fn opened(r: &mut Resolved) -> Option<Opened> {
    if let Some(o) = r.opened.take() {
        return Some(o);
    }
    let file = tokio::fs::File::open(&r.path).await.ok()?;
    let md = file.metadata().await.ok()?;
    if !md.is_file() {
        return None;
    }
    Some(Opened {
        len: md.len(),
        mtime_ns: mtime_ns(&md),
        content: None,
        reader: Reader::File(file.into_std().await),
    })
}

/// The headers of the representation: type, validators, ranges accepted, the resource's
/// `Link`, caching of documents, `Vary`.
fn representation_headers(
    app: &App,
    r: &Resolved,
    tag_value: &HeaderValue,
    len: u64,
    mns: i128,
    ranges: bool,
) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(12);
    h.insert(header::CONTENT_TYPE, r.content_type.clone());
    h.insert(header::ETAG, tag_value.clone());
    // Built when the index was loaded, for a file as it was hashed.
    let recorded_date = r
        .recorded
        .as_ref()
        .filter(|s| s.length == len && s.mtime_ns == mns)
        .and_then(|s| s.last_modified.clone());
    let mtime_secs = (mns.div_euclid(1_000_000_000)) as i64;
    if let Some(v) = recorded_date.or_else(|| http_date_value(mtime_secs)) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.insert(
        header::ACCEPT_RANGES,
        HeaderValue::from_static(if ranges { "bytes" } else { "none" }),
    );
    if r.kind == Kind::Resource {
        if let Some(link) = &app.link {
            h.insert(header::LINK, link.clone());
        }
    }
    if r.kind != Kind::Resource {
        // Documents change as the Source changes: caches revalidate them every time.
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    }
    if r.kind == Kind::Document {
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    h
}

/// The preconditions, in the order of RFC 9110 §13.2.2: `Err` with the status that answers
/// instead of the representation (412, or 304).
fn preconditions(req: &HeaderMap, tag: &str, mtime_secs: i64) -> Result<(), StatusCode> {
    if let Some(v) = req.get(header::IF_MATCH) {
        if !tag_list_matches(v, tag, false) {
            return Err(StatusCode::PRECONDITION_FAILED);
        }
    } else if let Some(since) = req
        .get(header::IF_UNMODIFIED_SINCE)
        .and_then(parse_http_date)
    {
        if mtime_secs > since {
            return Err(StatusCode::PRECONDITION_FAILED);
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
        return Err(StatusCode::NOT_MODIFIED);
    }
    Ok(())
}

/// The range asked for, unless `If-Range` names another representation (§13.1.5) or the
/// bytes cannot be sent in part.
fn requested_range(req: &HeaderMap, tag: &str, mtime_secs: i64, ranges: bool, len: u64) -> Range {
    let if_range_ok = match req.get(header::IF_RANGE).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(v) if v.trim_start().starts_with('"') => v.trim() == tag,
        Some(v) if v.trim_start().starts_with("W/") => false,
        Some(v) => DateTimeParser::new()
            .parse_timestamp(v.trim())
            .is_ok_and(|t| t.as_second() == mtime_secs),
    };
    match req.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(v) if if_range_ok && ranges => parse_range(v, len),
        _ => Range::Whole,
    }
}

/// 416, with the length the range missed.
fn unsatisfiable(mut h: HeaderMap, len: u64) -> Response {
    if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
        h.insert(header::CONTENT_RANGE, v);
    }
    let mut resp = status_only(StatusCode::RANGE_NOT_SATISFIABLE, h);
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
    resp
}

/// The body: `count` bytes from `first` (none for HEAD), from memory, the file or the
/// inventory's stream, through a compressor when `gzip` holds a permit.
async fn body_of(
    head: bool,
    bytes: Opened,
    first: u64,
    count: u64,
    gzip: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Result<Body, Response> {
    if head {
        return Ok(match gzip {
            Some(permit) => held_body(tokio::io::empty(), permit),
            None => Body::empty(),
        });
    }
    let Opened {
        len,
        content,
        reader,
        ..
    } = bytes;
    if let Some(mut buf) = content.filter(|b| b.len() as u64 == len) {
        // Small file read when opened: the requested bytes, from memory.
        buf.truncate((first + count) as usize);
        buf.drain(..first as usize);
        return Ok(match gzip {
            Some(permit) => held_body(io::Cursor::new(buf), permit),
            None => Body::from(buf),
        });
    }
    Ok(match reader {
        Reader::File(file) => {
            let mut file = tokio::fs::File::from_std(file);
            if first > 0 && file.seek(io::SeekFrom::Start(first)).await.is_err() {
                return Err(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot read the file",
                ));
            }
            match gzip {
                Some(permit) => held_body(file.take(count), permit),
                None => Body::from_stream(ReaderStream::with_capacity(file.take(count), CHUNK)),
            }
        }
        Reader::Stream(body) => {
            let piped = pipe_blocking(body, count);
            match gzip {
                Some(permit) => held_body(piped, permit),
                None => Body::from_stream(ReaderStream::with_capacity(piped, CHUNK)),
            }
        }
    })
}

/// Streams `count` bytes of a blocking reader (an inventory's) through a pipe of one chunk
/// from a blocking thread, as the client takes them. A reader that ends early or fails ends
/// the pipe early: the body is shorter than its `Content-Length`, which the server reports by
/// closing the connection, so that no client takes a part for the whole.
fn pipe_blocking(body: Box<dyn io::Read + Send>, count: u64) -> tokio::io::DuplexStream {
    let (theirs, ours) = tokio::io::duplex(CHUNK);
    tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let mut w = tokio_util::io::SyncIoBridge::new(ours);
        let mut r = body.take(count);
        if let Err(e) = io::copy(&mut r, &mut w) {
            tracing::debug!("streaming a resource: {e}");
        }
    });
    theirs
}
