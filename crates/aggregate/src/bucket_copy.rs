//! A republished copy kept in a bucket, sent over HTTP from the object store (see
//! [`crate::published`]): whole, or one byte range (RFC 9110 §14), as the copies kept in a
//! folder are sent by `tower-http`'s `ServeFile`.
//!
//! - No `Range`: the whole object, 200, with `Accept-Ranges: bytes` (§14.3).
//! - One range (`bytes=FIRST-LAST`, `bytes=FIRST-`, `bytes=-N`): passed to the object store's
//!   `GetObject` as its `Range`, so that only the part is read; 206 with the
//!   `Content-Range` the store gives (§14.4, §15.3.7), or 416 with `Content-Range: bytes
//!   */LENGTH` when the range starts past the end (§15.5.17). A store that ignores the range
//!   sends the whole object, sent on as 200 (§14.2 allows it).
//! - Several ranges, or a `Range` that does not parse: 416 with `Content-Range: bytes
//!   */LENGTH`, as `ServeFile` answers them (no multipart/byteranges).
//!
//! The bytes are read on a blocking thread of their own and handed to the response through a
//! bounded pipe: memory stays bounded whatever the object's size.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_range_header::{EndPosition, StartPosition};
use resourcesync_store::s3::{Bucket, ByteRange, ObjectInfo, ObjectReader, Ranged};

/// Bytes of an object read at once and handed to the response.
const CHUNK: usize = 64 * 1024;

/// What a request's `Range` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Whole,
    One(ByteRange),
    /// Several ranges, or a header that does not parse: answered 416.
    Refused,
}

/// The `Range` of a request, parsed as `ServeFile` parses it (`http-range-header`).
fn asked(range: Option<&HeaderValue>) -> Asked {
    let Some(v) = range else {
        return Asked::Whole;
    };
    let Some(parsed) = v
        .to_str()
        .ok()
        .and_then(|s| http_range_header::parse_range_header(s).ok())
    else {
        return Asked::Refused;
    };
    match parsed.ranges.as_slice() {
        [one] => Asked::One(match (one.start, one.end) {
            (StartPosition::Index(first), EndPosition::Index(last)) => {
                if last < first {
                    return Asked::Refused;
                }
                ByteRange::From {
                    first,
                    last: Some(last),
                }
            }
            (StartPosition::Index(first), EndPosition::LastByte) => {
                ByteRange::From { first, last: None }
            }
            (StartPosition::FromLast(n), _) => ByteRange::Suffix(n),
        }),
        _ => Asked::Refused,
    }
}

/// What the blocking reader found, before the bytes.
enum Head {
    Whole(ObjectInfo),
    Part(ObjectInfo, u64, u64, u64),
    Unsatisfiable(Option<u64>),
    NotFound,
    Unavailable,
}

/// Opens what `asked` asks of the object `name`; with the reader of its bytes, if any.
fn open(
    cfg: resourcesync_store::S3Config,
    name: &str,
    asked: Asked,
) -> (Head, Option<ObjectReader>) {
    let bucket = match Bucket::new(cfg) {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!("serving the copy {name}: {e}");
            return (Head::Unavailable, None);
        }
    };
    let r = match asked {
        Asked::Whole => bucket
            .get(name)
            .map(|o| o.map(|(info, reader)| Ranged::Whole(info, reader))),
        Asked::One(range) => bucket.get_range(name, range),
        // The object's length, for the 416's `Content-Range`.
        Asked::Refused => bucket.head(name).map(|o| {
            o.map(|info| Ranged::Unsatisfiable {
                total: Some(info.length),
            })
        }),
    };
    match r {
        Ok(Some(Ranged::Whole(info, reader))) => (Head::Whole(info), Some(reader)),
        Ok(Some(Ranged::Part {
            info,
            first,
            last,
            total,
            reader,
        })) => (Head::Part(info, first, last, total), Some(reader)),
        Ok(Some(Ranged::Unsatisfiable { total })) => {
            // The length for the 416's `Content-Range`, when the store did not give it.
            let total = total.or_else(|| bucket.head(name).ok().flatten().map(|i| i.length));
            (Head::Unsatisfiable(total), None)
        }
        Ok(None) => (Head::NotFound, None),
        Err(e) => {
            tracing::warn!("serving the copy {name}: {e}");
            (Head::Unavailable, None)
        }
    }
}

/// The copy `rel` in the bucket of `cfg` (its prefix the Source's), whole or the range
/// `range` asks for (see the module's documentation); 404 when the object is not there, 503
/// when the store does not answer.
pub(crate) async fn serve(
    cfg: resourcesync_store::S3Config,
    rel: PathBuf,
    range: Option<HeaderValue>,
) -> Response {
    let name = rel.to_string_lossy().into_owned();
    let asked = asked(range.as_ref());
    let (mut tx, rx) = tokio::io::duplex(CHUNK);
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    let rt = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        use tokio::io::AsyncWriteExt as _;
        let (head, reader) = open(cfg, &name, asked);
        let _ = head_tx.send(head);
        let Some(mut reader) = reader else {
            return;
        };
        let mut buf = vec![0u8; CHUNK];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if rt.block_on(tx.write_all(&buf[..n])).is_err() {
                        return; // The client went away.
                    }
                }
                // Cut short: the response ends before its Content-Length, which the client
                // sees as a failed transfer.
                Err(_) => return,
            }
        }
    });
    let head = head_rx.await.unwrap_or(Head::Unavailable);
    let (status, info, content_range) = match head {
        Head::Whole(info) => (StatusCode::OK, info, None),
        Head::Part(info, first, last, total) => (
            StatusCode::PARTIAL_CONTENT,
            info,
            Some(format!("bytes {first}-{last}/{total}")),
        ),
        Head::Unsatisfiable(total) => return unsatisfiable(total),
        Head::NotFound => return (StatusCode::NOT_FOUND, "not found\n").into_response(),
        Head::Unavailable => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the copy cannot be read now\n",
            )
                .into_response();
        }
    };
    let content_type = info
        .content_type
        .as_deref()
        .and_then(|t| HeaderValue::from_str(t).ok())
        .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream"));
    let mut res = Response::new(Body::from_stream(tokio_util::io::ReaderStream::new(rx)));
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type);
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(info.length));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Some(v) = content_range.and_then(|v| HeaderValue::from_str(&v).ok()) {
        h.insert(header::CONTENT_RANGE, v);
    }
    res
}

/// 416 (RFC 9110 §15.5.17), with the object's length when it is known.
fn unsatisfiable(total: Option<u64>) -> Response {
    let mut res = (
        StatusCode::RANGE_NOT_SATISFIABLE,
        "the range asked for is not satisfiable\n",
    )
        .into_response();
    if let Some(v) = total.and_then(|t| HeaderValue::from_str(&format!("bytes */{t}")).ok()) {
        res.headers_mut().insert(header::CONTENT_RANGE, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(v: &str) -> Asked {
        asked(Some(&HeaderValue::from_str(v).expect("header")))
    }

    #[test]
    fn ranges_are_read_as_serve_file_reads_them() {
        assert_eq!(asked(None), Asked::Whole);
        assert_eq!(
            of("bytes=0-9"),
            Asked::One(ByteRange::From {
                first: 0,
                last: Some(9)
            })
        );
        assert_eq!(
            of("bytes=5-"),
            Asked::One(ByteRange::From {
                first: 5,
                last: None
            })
        );
        assert_eq!(of("bytes=-3"), Asked::One(ByteRange::Suffix(3)));
        for refused in [
            "bytes=0-1,4-5",
            "bytes=9-0",
            "bytes=-0",
            "items=0-9",
            "bytes=a-b",
            "bytes=",
        ] {
            assert_eq!(of(refused), Asked::Refused, "{refused}");
        }
    }
}
