//! [`Bucket`]: the objects of an S3-compatible bucket under a prefix, as plain operations
//! (list, head, get, a byte range, put, delete) over the signed client of `s3/client.rs`. [`super::S3Store`]
//! is built on it, and so are the Source's bucket inventory and document sink (crate
//! `resourcesync-source`, feature `s3`).
//!
//! Objects are named by their key below the prefix (a *name*). Every call blocks: make them
//! where blocking is allowed (async code: through [`crate::blocking::call`]). The client and
//! readers may be dropped anywhere (the HTTP layer's blocking face: `resourcesync_http::blocking`).

use std::collections::HashSet;
use std::io::Read;
use std::ops::ControlFlow;
use std::time::SystemTime;

use reqwest::header::{
    CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, HeaderMap, LAST_MODIFIED,
};
use rusty_s3::Method;

use super::client::{Client, Req, base64, not_found};
use super::config::S3Config;
use super::range::{ByteRange, content_range, unsatisfied_length};
use super::upload::{S3Body, S3Sink};
use super::{MULTIPART, upload, xml};
use crate::error::{Error, Result};
use crate::object::UploadSink;

/// The longest object key S3 accepts, in bytes.
pub(crate) const MAX_KEY: usize = 1024;
/// Keys asked for per listing page (S3's most).
const PAGE: usize = 1000;
/// Empty pages in a row a listing accepts before it calls the server broken.
const MAX_EMPTY_PAGES: u32 = 100;

/// Objects in a bucket under a prefix (see the module's documentation).
#[derive(Debug)]
pub struct Bucket {
    /// Always `Some` but while dropped.
    client: Option<Client>,
}

/// An object as a listing gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its whole key (the prefix included). Bytes that are not UTF-8 are replaced by U+FFFD
    /// (see [`Object::utf8`]).
    pub key: String,
    /// Its key below the prefix.
    pub name: String,
    /// Whether the key is valid UTF-8 (S3 keys are; a broken server's may not be).
    pub utf8: bool,
    /// Its size in bytes.
    pub size: u64,
    /// Its `ETag`, quotes removed.
    pub etag: Option<String>,
    /// Its last modification (`LastModified`), when given and readable.
    pub last_modified: Option<SystemTime>,
}

/// What a `HEAD` or `GET` says of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its length (`Content-Length`).
    pub length: u64,
    /// Its last modification (`Last-Modified`: whole seconds).
    pub last_modified: Option<SystemTime>,
    /// Its `ETag`, quotes removed.
    pub etag: Option<String>,
    /// Its `Content-Type`.
    pub content_type: Option<String>,
}

/// The MD5 of an object's bytes its `ETag` gives, as lower-case hex: the `ETag` of an object
/// put whole (one `PUT`) is the MD5 of its bytes; that of a multipart upload is `HEX-N` (a
/// digest of the parts' digests, not of the bytes), and is no MD5. (An object encrypted with
/// SSE-C or SSE-KMS on AWS has an `ETag` that is no MD5 either, with nothing to tell it.)
pub fn etag_md5(etag: &str) -> Option<String> {
    let e = etag.trim().trim_matches('"');
    (e.len() == 32 && e.bytes().all(|b| b.is_ascii_hexdigit())).then(|| e.to_ascii_lowercase())
}

/// An object's bytes, as the server sends them: exactly [`ObjectInfo::length`] of them, or
/// an error (a body cut short is an `UnexpectedEof`, never a shorter object).
pub struct ObjectReader {
    resp: Option<resourcesync_http::BlockingResponse>,
    left: u64,
}

/// What a `GetObject` of a [`ByteRange`] ([`Bucket::get_range`]) came to.
#[derive(Debug)]
pub enum Ranged {
    /// The range (206): what the server says of the part (`length` is the part's), its first
    /// and last byte and the object's whole length (its `Content-Range`), and its bytes.
    Part {
        /// What the server says of the part.
        info: ObjectInfo,
        /// Its first byte in the object.
        first: u64,
        /// Its last byte in the object.
        last: u64,
        /// The object's length.
        total: u64,
        /// Its bytes.
        reader: ObjectReader,
    },
    /// The whole object: the server ignored the range (RFC 9110 §14.2 allows it).
    Whole(ObjectInfo, ObjectReader),
    /// The range starts past the object's end (416); the object's length when the server
    /// says it (`Content-Range: bytes */LENGTH`).
    Unsatisfiable {
        /// The object's length.
        total: Option<u64>,
    },
}

impl std::fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectReader")
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(r) = self.resp.as_mut() else {
            return Ok(0);
        };
        if buf.is_empty() {
            return Ok(0);
        }
        // One byte more than announced is asked for: a body longer than its length is an
        // error too.
        let want = buf
            .len()
            .min(usize::try_from(self.left.saturating_add(1)).unwrap_or(usize::MAX));
        let n = r.read(&mut buf[..want])?;
        if n == 0 && self.left > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the object's body ended {} bytes short", self.left),
            ));
        }
        if n as u64 > self.left {
            return Err(std::io::Error::other(
                "the object's body is longer than its Content-Length",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// An object being written to a bucket: kept locally (memory, then an unnamed scratch file
/// past 1 MiB), sent whole by [`Bucket::commit`] (one `PUT`, or a multipart upload from
/// 8 MiB): the object appears whole or not at all.
pub struct BucketWriter {
    key: String,
    content_type: String,
    sink: Box<S3Sink>,
}

impl std::fmt::Debug for BucketWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketWriter")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl std::io::Write for BucketWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sink
            .write_all(buf)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

fn unquoted(etag: &str) -> String {
    etag.trim().trim_matches('"').to_owned()
}

fn info_of(h: &HeaderMap) -> ObjectInfo {
    ObjectInfo {
        length: header(h, CONTENT_LENGTH.as_str())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        last_modified: header(h, LAST_MODIFIED.as_str())
            .and_then(|v| httpdate::parse_http_date(v).ok()),
        etag: header(h, ETAG.as_str()).map(unquoted),
        content_type: header(h, CONTENT_TYPE.as_str()).map(str::to_owned),
    }
}

impl Bucket {
    /// The bucket and prefix of an `s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R` URL
    /// (see [`S3Config::parse`]). Nothing is asked of the server until the first operation.
    pub fn open(url: &str) -> Result<Bucket> {
        Bucket::new(S3Config::parse(url)?)
    }

    /// The bucket and prefix of `cfg`.
    pub fn new(cfg: S3Config) -> Result<Bucket> {
        Ok(Bucket {
            client: Some(Client::new(cfg)?),
        })
    }

    pub(crate) fn client(&self) -> &Client {
        match &self.client {
            Some(c) => c,
            None => unreachable!("the client is taken only when the bucket is dropped"),
        }
    }

    /// The settings.
    pub fn config(&self) -> &S3Config {
        self.client().cfg()
    }

    /// The whole key of the object `name`: the prefix, then the name (at most 1,024 bytes).
    pub fn key(&self, name: &str) -> Result<String> {
        let k = format!("{}{name}", self.config().prefix);
        if name.is_empty() || k.len() > MAX_KEY {
            return Err(Error::UnsafePath {
                path: k.chars().take(80).collect(),
                reason: "empty, or longer than the 1,024 bytes of an S3 object key (with the prefix)",
            });
        }
        Ok(k)
    }

    /// The object's URL at the endpoint (unsigned: reachable as is when the bucket is public
    /// or a CDN serves it).
    pub fn object_url(&self, name: &str) -> Result<String> {
        let key = self.key(name)?;
        let mut u = self.config().endpoint.clone();
        {
            let mut segs = u.path_segments_mut().map_err(|()| {
                self.client().err(
                    "GetObject",
                    Some(&key),
                    None,
                    "the endpoint cannot have a path",
                )
            })?;
            segs.pop_if_empty().push(&self.config().bucket);
            for s in key.split('/') {
                segs.push(s);
            }
        }
        Ok(u.to_string())
    }

    /// Calls `f` with every object under the prefix whose name starts with `under` and comes
    /// after `after` (all with `None`), in key order (ListObjectsV2, paged: one page of keys
    /// in memory at a time). A broken or looping listing is an error (see [`Bucket::scan`]);
    /// `f` ends it early with `Break`.
    pub fn list(
        &self,
        under: &str,
        after: Option<&str>,
        f: &mut dyn FnMut(Object) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let prefix = self.config().prefix.clone();
        let start = after.map(|a| format!("{prefix}{a}"));
        self.scan(&format!("{prefix}{under}"), start, &mut |o| {
            let utf8 = std::str::from_utf8(&o.raw).is_ok();
            let name = o.key.get(prefix.len()..).unwrap_or_default().to_owned();
            f(Object {
                name,
                utf8,
                size: o.size,
                etag: o.etag.as_deref().map(unquoted),
                last_modified: o
                    .last_modified
                    .as_deref()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .map(SystemTime::from),
                key: o.key,
            })
        })
    }

    /// Calls `f` with every object whose key starts with `prefix`, after `start` (all with
    /// `None`), in key order: ListObjectsV2, paged. Keys must come strictly increasing (in
    /// bytes): a page served again (a loop) or out of order, a continuation token given twice
    /// or too many empty pages in a row is the server's error, never an endless listing.
    pub(crate) fn scan(
        &self,
        prefix: &str,
        start: Option<String>,
        f: &mut dyn FnMut(xml::Listed) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let mut last: Option<Vec<u8>> = start.clone().map(String::into_bytes);
        let mut token: Option<String> = None;
        let mut tokens: HashSet<String> = HashSet::new();
        let mut empty = 0;
        let client = self.client();
        let broken = |m: String| client.err("ListObjectsV2", None, None, m);
        let shown = |b: &[u8]| {
            String::from_utf8_lossy(b)
                .chars()
                .take(80)
                .collect::<String>()
        };
        loop {
            let mut req = Req::new("ListObjectsV2", Method::Get, None)
                .query("list-type", "2")
                .query("encoding-type", "url")
                .query("max-keys", PAGE.to_string())
                .query("prefix", prefix);
            match (&token, &start) {
                (Some(t), _) => req = req.query("continuation-token", t.clone()),
                (None, Some(s)) => req = req.query("start-after", s.clone()),
                (None, None) => {}
            }
            let body = client.xml(&req, None)?;
            let page = xml::list_page(&body).map_err(broken)?;
            empty = if page.objects.is_empty() {
                empty + 1
            } else {
                0
            };
            for o in page.objects {
                if last
                    .as_ref()
                    .is_some_and(|l| o.raw.as_slice() <= l.as_slice())
                {
                    return Err(broken(format!(
                        "key {:?} listed after {:?}: not in key order (a broken or looping listing)",
                        shown(&o.raw),
                        shown(last.as_deref().unwrap_or_default()),
                    )));
                }
                if !o.raw.starts_with(prefix.as_bytes()) {
                    return Err(broken(format!(
                        "key {:?} outside the prefix asked",
                        shown(&o.raw)
                    )));
                }
                last = Some(o.raw.clone());
                if f(o)?.is_break() {
                    return Ok(());
                }
            }
            if !page.truncated {
                return Ok(());
            }
            match page.next_token {
                Some(t) if !tokens.contains(&t) && empty < MAX_EMPTY_PAGES => {
                    tokens.insert(t.clone());
                    token = Some(t);
                }
                other => {
                    return Err(broken(format!(
                        "a truncated listing with {} continuation token (after {empty} empty pages in a row)",
                        if other.is_some() { "a repeated" } else { "no" }
                    )));
                }
            }
        }
    }

    /// The headers of an object (`HEAD`), or `None` when there is none.
    pub(crate) fn head_raw(&self, okey: &str) -> Result<Option<HeaderMap>> {
        let req = Req::new("HeadObject", Method::Head, Some(okey));
        let r = self.client().send(&req, None)?;
        if not_found(r.status()) {
            return Ok(None);
        }
        let r = self.client().check(&req, r)?;
        Ok(Some(r.headers().clone()))
    }

    /// What the server says of the object `name` (`HEAD`), or `None` when there is none.
    pub fn head(&self, name: &str) -> Result<Option<ObjectInfo>> {
        let key = self.key(name)?;
        Ok(self.head_raw(&key)?.map(|h| info_of(&h)))
    }

    /// The object `name` (`GET`): what the server says of it and its bytes, or `None` when
    /// there is none.
    pub fn get(&self, name: &str) -> Result<Option<(ObjectInfo, ObjectReader)>> {
        let key = self.key(name)?;
        let req = Req::new("GetObject", Method::Get, Some(&key));
        let r = self.client().send(&req, None)?;
        if not_found(r.status()) {
            drop(r);
            return Ok(None);
        }
        let r = self.client().check(&req, r)?;
        let info = info_of(r.headers());
        if r.headers().get(CONTENT_LENGTH).is_none() {
            drop(r);
            return Err(self.client().err(
                "GetObject",
                Some(&key),
                None,
                "an answer without Content-Length",
            ));
        }
        let left = info.length;
        Ok(Some((
            info,
            ObjectReader {
                resp: Some(r),
                left,
            },
        )))
    }

    /// The byte range `range` of the object `name` (`GET` with `Range`: only the part is
    /// sent), or `None` when there is none; see [`Ranged`]. A `Content-Range` that does not fit
    /// the object or the part's length is an error.
    pub fn get_range(&self, name: &str, range: ByteRange) -> Result<Option<Ranged>> {
        let key = self.key(name)?;
        let req = Req::new("GetObject", Method::Get, Some(&key)).header("range", range.header());
        let r = self.client().send(&req, None)?;
        if not_found(r.status()) {
            drop(r);
            return Ok(None);
        }
        if r.status() == reqwest::StatusCode::RANGE_NOT_SATISFIABLE {
            let total = header(r.headers(), CONTENT_RANGE.as_str()).and_then(unsatisfied_length);
            drop(r);
            return Ok(Some(Ranged::Unsatisfiable { total }));
        }
        let r = self.client().check(&req, r)?;
        let bad = |r: resourcesync_http::BlockingResponse, what: &str| {
            drop(r);
            Err(self.client().err("GetObject", Some(&key), None, what))
        };
        if r.headers().get(CONTENT_LENGTH).is_none() {
            return bad(r, "an answer without Content-Length");
        }
        let info = info_of(r.headers());
        let left = info.length;
        if r.status() != reqwest::StatusCode::PARTIAL_CONTENT {
            let reader = ObjectReader {
                resp: Some(r),
                left,
            };
            return Ok(Some(Ranged::Whole(info, reader)));
        }
        let Some((first, last, total)) =
            header(r.headers(), CONTENT_RANGE.as_str()).and_then(content_range)
        else {
            return bad(r, "a part without a valid Content-Range");
        };
        if last - first + 1 != left {
            return bad(r, "a part whose Content-Length is not its Content-Range's");
        }
        Ok(Some(Ranged::Part {
            info,
            first,
            last,
            total,
            reader: ObjectReader {
                resp: Some(r),
                left,
            },
        }))
    }

    /// A writer of the object `name`, made visible whole by [`Bucket::commit`], with this
    /// `Content-Type`.
    pub fn writer(&self, name: &str, content_type: &str) -> Result<BucketWriter> {
        Ok(BucketWriter {
            key: self.key(name)?,
            content_type: content_type.to_owned(),
            sink: Box::new(S3Sink::new(std::env::temp_dir(), None)),
        })
    }

    /// Sends the bytes written to `w`: the object is in place when this returns `Ok`.
    pub fn commit(&self, w: BucketWriter) -> Result<()> {
        let sealed = w.sink.seal(None)?;
        let body = sealed.downcast::<S3Body>().map_err(|_| {
            self.client()
                .err("PutObject", Some(&w.key), None, "not a body")
        })?;
        upload::send(
            self.client(),
            &w.key,
            &body,
            &[],
            &w.content_type,
            MULTIPART,
            MULTIPART,
        )
    }

    /// Puts `bytes` as the object `name` (one `PUT` with `Content-MD5`: the server stores
    /// them whole or refuses them).
    pub fn put(&self, name: &str, bytes: &[u8], content_type: &str) -> Result<()> {
        use md5::Digest as _;
        let key = self.key(name)?;
        let req = Req::new("PutObject", Method::Put, Some(&key))
            .header("content-md5", base64(&md5::Md5::digest(bytes)))
            .header("content-type", content_type);
        let body = resourcesync_http::SendBody::Bytes(bytes.to_vec().into());
        let r = self.client().send(&req, Some(body))?;
        self.client().check(&req, r).map(drop)
    }

    /// Deletes the object `name` (none there: nothing to do; S3 answers the same).
    pub fn delete(&self, name: &str) -> Result<()> {
        let key = self.key(name)?;
        let req = Req::new("DeleteObject", Method::Delete, Some(&key));
        let r = self.client().send(&req, None)?;
        if not_found(r.status()) {
            return Ok(());
        }
        self.client().check(&req, r).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_objects_etag_is_an_md5() {
        assert_eq!(
            etag_md5("\"D41D8CD98F00B204E9800998ECF8427E\"").as_deref(),
            Some("d41d8cd98f00b204e9800998ecf8427e")
        );
        assert_eq!(etag_md5("d41d8cd98f00b204e9800998ecf8427e-2"), None);
        assert_eq!(etag_md5("\"abc\""), None);
        assert_eq!(etag_md5("zz1d8cd98f00b204e9800998ecf8427e"), None);
    }

    #[test]
    fn an_object_url_is_path_style_and_encoded() {
        let b = Bucket::open("s3://k:s@127.0.0.1:9/bkt/p/q").expect("bucket");
        assert_eq!(
            b.object_url("a b/ü?#").expect("url"),
            "http://127.0.0.1:9/bkt/p/q/a%20b/%C3%BC%3F%23"
        );
    }
}
