//! [`S3Store`]: the [`Store`] port in a bucket of an S3-compatible object store (AWS S3,
//! Garage, MinIO, Ceph RGW), under a prefix. Feature `s3` (on by default).
//!
//! A body is received and verified locally (`s3/upload.rs`: memory, then an unnamed scratch
//! file), so that a body that fails its published length or digests never reaches the bucket;
//! [`Store::place`] sends each verified body in one `PUT`, or a multipart upload at and above
//! the threshold (8 MiB parts): S3 makes either visible whole, at once, or not at all
//! (Z39.99-2014 §7: `length` and `hash` are what a copy is checked against). A process killed
//! at any point leaves the old object or the new one ([`Features::crash_safe`]), at worst an
//! unfinished multipart upload, invisible, that [`Interrupted::clean_interrupted`] aborts.
//!
//! Each object carries its resource's URI, digests and modification time as user metadata
//! (`x-amz-meta-rs-uri`, `-rs-hashes`, `-rs-modified`): [`Store::head`] and [`Store::hash`]
//! answer from them without reading the body. A listing (ListObjectsV2) carries no metadata:
//! its [`ObjectMeta`] has the length only.
//!
//! Requests are signed by `rusty-s3` and sent with `resourcesync_http::BlockingHttp` (`s3/client.rs`): every
//! method blocks, so async code calls them, and opens the store, through
//! [`crate::blocking::call`].

pub mod bucket;
mod client;
pub mod config;
pub mod range;
mod upload;
mod versions;
mod xml;

use std::collections::HashSet;
use std::io::Read;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use reqwest::header::{CONTENT_LENGTH, ETAG, HeaderMap, LAST_MODIFIED};
use resourcesync_model::{HashAlg, Hashes};
use rusty_s3::Method;

use self::bucket::MAX_KEY;
use self::client::{Client, Req, not_found};
use self::upload::{S3Body, S3Sink};
pub use bucket::{Bucket, BucketWriter, Object, ObjectInfo, ObjectReader, Ranged, etag_md5};
pub use config::S3Config;
pub use range::ByteRange;

use crate::error::{Error, Result};
use crate::features::{Features, Interrupted};
use crate::object::{
    Committed, Expect, Finished, ObjectMeta, Placed, Store, Upload, foreign_upload,
};
use crate::path::RelPath;

/// The default size at and above which a body is sent as a multipart upload, and of its parts.
pub const MULTIPART: u64 = 8 << 20;
/// Keys asked for per listing page (S3's most).
const PAGE: usize = 1000;
/// Uploads of one batch sent at once.
const PLACE_THREADS: usize = 16;

const META_URI: &str = "x-amz-meta-rs-uri";
const META_HASHES: &str = "x-amz-meta-rs-hashes";
const META_MODIFIED: &str = "x-amz-meta-rs-modified";

/// Objects in a bucket under a prefix. See the module documentation.
#[derive(Debug)]
pub struct S3Store {
    bucket: Bucket,
    scratch: PathBuf,
    threshold: u64,
    part_size: u64,
    stale_after: Duration,
}

impl S3Store {
    /// Sends a `CopyObject` request (to `key`) and checks its answer: a copy can fail after its
    /// `200 OK` has begun, and the error is then in the body.
    pub(crate) fn copy_object(&self, req: &Req, key: &str) -> Result<()> {
        let body = self.client().xml(
            req,
            Some(resourcesync_http::SendBody::Bytes(Vec::new().into())),
        )?;
        if let Some((code, message)) = xml::error_of(&body) {
            return Err(Error::S3 {
                op: "CopyObject",
                bucket: self.config().bucket.clone(),
                key: key.chars().take(200).collect(),
                status: Some(200),
                code: Some(code),
                message,
            });
        }
        Ok(())
    }

    /// A store for an `s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R` URL (see
    /// [`S3Config::parse`]). Nothing is asked of the server until the first operation.
    pub fn open(url: &str) -> Result<S3Store> {
        S3Store::with_config(S3Config::parse(url)?)
    }

    /// A store with these settings.
    pub fn with_config(cfg: S3Config) -> Result<S3Store> {
        Ok(S3Store {
            bucket: Bucket::new(cfg)?,
            scratch: std::env::temp_dir(),
            threshold: MULTIPART,
            part_size: MULTIPART,
            stale_after: Duration::from_secs(3600),
        })
    }

    /// Sends bodies of `threshold` bytes and more as multipart uploads of `part_size` parts
    /// (at least 5 MiB, S3's smallest part).
    pub fn with_multipart(mut self, threshold: u64, part_size: u64) -> Self {
        self.threshold = threshold;
        self.part_size = part_size.max(upload::MIN_PART);
        self
    }

    /// Keeps bodies larger than 1 MiB, while they are received, in unnamed files in `dir`
    /// (the system's temporary directory unless given).
    pub fn with_scratch(mut self, dir: impl Into<PathBuf>) -> Self {
        self.scratch = dir.into();
        self
    }

    /// [`Interrupted::clean_interrupted`] aborts the multipart uploads under the prefix begun at
    /// least `age` ago (an hour unless given: younger ones may be another process's, in
    /// flight).
    pub fn with_stale_after(mut self, age: Duration) -> Self {
        self.stale_after = age;
        self
    }

    /// The settings.
    pub fn config(&self) -> &S3Config {
        self.bucket.config()
    }

    /// The bucket and prefix of the store.
    pub fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    fn client(&self) -> &Client {
        self.bucket.client()
    }

    /// The object key of `key`: the prefix, then the key.
    fn object_key(&self, key: &RelPath) -> Result<String> {
        let k = format!("{}{}", self.config().prefix, key.as_str());
        if k.len() > MAX_KEY {
            return Err(Error::UnsafePath {
                path: k.chars().take(80).collect(),
                reason: "longer than the 1,024 bytes of an S3 object key (with the prefix)",
            });
        }
        Ok(k)
    }

    /// HEAD of an object: its headers, or `None` when there is none.
    fn head_raw(&self, okey: &str) -> Result<Option<HeaderMap>> {
        self.bucket.head_raw(okey)
    }

    /// The metadata headers of a body.
    fn meta_headers(
        uri: Option<&str>,
        hashes: &Hashes,
        modified: Option<SystemTime>,
    ) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(u) = uri {
            out.push((META_URI, meta_encode(u)));
        }
        let h = hashes.to_string();
        if !h.is_empty() && h.is_ascii() {
            out.push((META_HASHES, h));
        }
        if let Some(t) = modified.and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()) {
            out.push((
                META_MODIFIED,
                format!("{}.{:09}", t.as_secs(), t.subsec_nanos()),
            ));
        }
        out
    }

    /// Calls `f` with every object whose key starts with `prefix`, after `start` (all with
    /// `None`), in key order (see [`Bucket::scan`]).
    fn scan(
        &self,
        prefix: &str,
        start: Option<String>,
        f: &mut dyn FnMut(xml::Listed) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        self.bucket.scan(prefix, start, f)
    }

    /// Which of the object keys `okeys` (sorted) hold an object now: one listing of their key
    /// range instead of a `HEAD` per key. `None` when the range holds more than a page of keys
    /// per 250 of the batch (a batch spread over a large prefix): a `HEAD` per key then costs
    /// less than reading the range.
    fn existing(&self, okeys: &[String]) -> Result<Option<HashSet<String>>> {
        let (Some(min), Some(max)) = (okeys.first(), okeys.last()) else {
            return Ok(Some(HashSet::new()));
        };
        let common = char_floor(
            min,
            min.bytes()
                .zip(max.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
        // Just before `min` in key order: `min` without its last character.
        let before = min[..char_floor(min, min.len().saturating_sub(1))].to_owned();
        let wanted: HashSet<&str> = okeys.iter().map(String::as_str).collect();
        let limit = PAGE * okeys.len().div_ceil(250);
        let mut found = HashSet::new();
        let mut seen = 0;
        let mut complete = true;
        self.scan(&min[..common], Some(before), &mut |o| {
            if o.key.as_str() > max.as_str() {
                return Ok(ControlFlow::Break(()));
            }
            seen += 1;
            if seen > limit {
                complete = false;
                return Ok(ControlFlow::Break(()));
            }
            if wanted.contains(o.key.as_str()) {
                found.insert(o.key);
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(complete.then_some(found))
    }

    fn place_one(&self, f: Finished, existing: Option<&HashSet<String>>) -> Result<Placed> {
        let (key, body, committed) = f.into_parts();
        let body = body
            .downcast::<S3Body>()
            .map_err(|_| foreign_upload(&key))?;
        let okey = self.object_key(&key)?;
        let modified = Some(body.modified.unwrap_or_else(SystemTime::now));
        let meta = Self::meta_headers(body.uri.as_deref(), &committed.hashes, modified);
        // S3 does not say whether a PUT replaced something: the batch's listing says, else a
        // HEAD first. (Garage 2.5 ignores `If-None-Match: *` on a PUT, which would make it one
        // request.)
        let replaced = match existing {
            Some(set) => set.contains(&okey),
            None => self.head_raw(&okey)?.is_some(),
        };
        upload::send(
            self.client(),
            &okey,
            &body,
            &meta,
            "application/octet-stream",
            self.threshold,
            self.part_size,
        )?;
        Ok(Placed {
            committed: Committed {
                length: body.len,
                hashes: committed.hashes,
            },
            replaced,
        })
    }
}

/// The largest character boundary of `s` at or below `i`.
fn char_floor(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Percent-encodes a metadata value: header values are ASCII (S3 keeps them as sent).
fn meta_encode(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS.add(b'%').add(b' ');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

fn meta_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// What an object's headers say of it.
fn meta_of(h: &HeaderMap) -> ObjectMeta {
    let modified = header(h, META_MODIFIED)
        .and_then(|v| {
            let (s, n) = v.split_once('.').unwrap_or((v, "0"));
            let d = Duration::new(
                s.parse().ok()?,
                n.parse().ok().filter(|n| *n < 1_000_000_000)?,
            );
            SystemTime::UNIX_EPOCH.checked_add(d)
        })
        .or_else(|| {
            header(h, LAST_MODIFIED.as_str()).and_then(|v| httpdate::parse_http_date(v).ok())
        });
    ObjectMeta {
        length: header(h, CONTENT_LENGTH.as_str())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        modified,
        hashes: header(h, META_HASHES)
            .map(|v| Hashes::parse(v).0)
            .unwrap_or_default(),
        regular: true,
        uri: header(h, META_URI).map(meta_decode),
    }
}

fn missing(op: &'static str, c: &Client, okey: &str) -> Error {
    Error::S3 {
        op,
        bucket: c.cfg().bucket.clone(),
        key: okey.chars().take(200).collect(),
        status: Some(404),
        code: Some("NoSuchKey".into()),
        message: "no such object".into(),
    }
}

impl Store for S3Store {
    fn begin(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        self.object_key(key)?;
        let sink = S3Sink::new(self.scratch.clone(), expect.uri.clone());
        Ok(Upload::new(key.clone(), expect, Box::new(sink)))
    }

    fn place(&self, batch: Vec<Finished>) -> Vec<Result<Placed>> {
        if batch.len() <= 1 {
            return batch.into_iter().map(|f| self.place_one(f, None)).collect();
        }
        let mut okeys: Vec<String> = batch
            .iter()
            .filter_map(|f| self.object_key(f.key()).ok())
            .collect();
        okeys.sort_unstable();
        // A failed listing is no reason to fail the batch: each asks on its own then.
        let existing = self.existing(&okeys).ok().flatten();
        let existing = existing.as_ref();
        // Each object is its own request: send several at once, outcomes in order.
        let n = batch.len();
        let slots: Vec<std::sync::Mutex<Option<Finished>>> = batch
            .into_iter()
            .map(|f| std::sync::Mutex::new(Some(f)))
            .collect();
        let outs: Vec<std::sync::Mutex<Option<Result<Placed>>>> =
            (0..n).map(|_| std::sync::Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        std::thread::scope(|sc| {
            for _ in 0..PLACE_THREADS.min(n) {
                sc.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        let f = slots[i].lock().unwrap_or_else(|p| p.into_inner()).take();
                        if let Some(f) = f {
                            let r = self.place_one(f, existing);
                            *outs[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                        }
                    }
                });
            }
        });
        outs.into_iter()
            .map(|o| {
                o.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or_else(|| Err(self.client().err("PutObject", None, None, "not sent")))
            })
            .collect()
    }

    fn sync(&self) -> Result<()> {
        // A PUT (or a multipart completion) is durable when it is answered.
        Ok(())
    }

    fn get(&self, key: &RelPath) -> Result<Box<dyn Read + Send>> {
        let okey = self.object_key(key)?;
        let req = Req::new("GetObject", Method::Get, Some(&okey));
        let r = self.client().send(&req, None)?;
        if not_found(r.status()) {
            return Err(missing("GetObject", self.client(), &okey));
        }
        Ok(Box::new(self.client().check(&req, r)?))
    }

    fn head(&self, key: &RelPath) -> Result<Option<ObjectMeta>> {
        let okey = self.object_key(key)?;
        Ok(self.head_raw(&okey)?.map(|h| meta_of(&h)))
    }

    fn delete(&self, key: &RelPath) -> Result<bool> {
        let okey = self.object_key(key)?;
        // S3 answers a delete the same whether or not there was an object: ask first.
        if self.head_raw(&okey)?.is_none() {
            return Ok(false);
        }
        let req = Req::new("DeleteObject", Method::Delete, Some(&okey));
        let r = self.client().send(&req, None)?;
        if not_found(r.status()) {
            return Ok(false);
        }
        self.client().check(&req, r)?;
        Ok(true)
    }

    fn list(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<(RelPath, ObjectMeta)>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let prefix = self.config().prefix.clone();
        let start = after.map(|a| format!("{prefix}{}", a.as_str()));
        self.scan(&prefix, start, &mut |o| {
            let Some(rest) = o.key.strip_prefix(&prefix) else {
                return Err(self.client().err(
                    "ListObjectsV2",
                    None,
                    None,
                    format!(
                        "key {:?} outside the prefix",
                        o.key.chars().take(80).collect::<String>()
                    ),
                ));
            };
            // The Destination's own objects (kept versions) are no copies.
            if rest
                .strip_prefix(crate::fs::STATE_DIR)
                .is_some_and(|r| r.starts_with('/'))
            {
                return Ok(ControlFlow::Continue(()));
            }
            let item = RelPath::parse(rest).map_err(Error::from).map(|k| {
                (
                    k,
                    ObjectMeta {
                        length: o.size,
                        regular: true,
                        ..ObjectMeta::default()
                    },
                )
            });
            f(item)
        })
    }

    fn set_modified(&self, key: &RelPath, t: SystemTime) -> Result<bool> {
        // The time is metadata: copy the object onto itself with new metadata, on condition
        // that it is still the object read (its ETag), so a put in between is never given the
        // digests of the body it replaced.
        let okey = self.object_key(key)?;
        let h = self
            .head_raw(&okey)?
            .ok_or_else(|| missing("CopyObject", self.client(), &okey))?;
        let m = meta_of(&h);
        let etag = header(&h, ETAG.as_str()).unwrap_or("").to_owned();
        let source = format!(
            "/{}/{}",
            self.config().bucket,
            percent_encoding::utf8_percent_encode(&okey, COPY_SOURCE)
        );
        let mut req = Req::new("CopyObject", Method::Put, Some(&okey))
            .header("x-amz-copy-source", source)
            .header("x-amz-metadata-directive", "REPLACE")
            .header("content-type", "application/octet-stream");
        if !etag.is_empty() {
            req = req.header("x-amz-copy-source-if-match", etag);
        }
        for (k, v) in Self::meta_headers(m.uri.as_deref(), &m.hashes, Some(t)) {
            req = req.header(k, v);
        }
        self.copy_object(&req, &okey)?;
        Ok(true)
    }

    fn hash(&self, key: &RelPath, algs: &[HashAlg]) -> Result<(u64, Hashes)> {
        // The digests computed when the body was put, kept with it: no need to read it.
        if let Some(m) = self.head(key)? {
            if !algs.is_empty() && algs.iter().all(|a| m.hashes.get(a).is_some()) {
                let mut h = Hashes::default();
                for a in algs {
                    if let Some(d) = m.hashes.get(a) {
                        h.0.push(d.clone());
                    }
                }
                return Ok((m.length, h));
            }
        }
        let r = self.get(key)?;
        resourcesync_model::MultiHasher::new(algs)
            .hash_reader(r)
            .map_err(|e| Error::io(key.as_str(), e))
    }

    fn features(&self) -> Features<'_> {
        // Finishing flushes a local scratch file at most; the network is used by `place`.
        Features::new()
            .finish_blocks(false)
            .crash_safe(true)
            .interrupted(self)
            .versions(self)
    }
}

impl Interrupted for S3Store {
    fn clean_interrupted(&self) -> Result<u64> {
        let prefix = self.config().prefix.clone();
        let now = jiff::Timestamp::now();
        let mut aborted = 0;
        let mut markers: Option<(String, String)> = None;
        loop {
            let mut req = Req::new("ListMultipartUploads", Method::Get, None)
                .query("uploads", "")
                .query("encoding-type", "url")
                .query("prefix", prefix.clone());
            if let Some((k, u)) = &markers {
                req = req
                    .query("key-marker", k.clone())
                    .query("upload-id-marker", u.clone());
            }
            let body = self.client().xml(&req, None)?;
            let page = xml::uploads_page(&body)
                .map_err(|m| self.client().err("ListMultipartUploads", None, None, m))?;
            for u in &page.uploads {
                let age = u
                    .initiated
                    .as_deref()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .and_then(|t| now.duration_since(t).try_into().ok())
                    .unwrap_or(Duration::MAX);
                if u.key.starts_with(&prefix) && age >= self.stale_after {
                    upload::abort(self.client(), &u.key, &u.upload_id)?;
                    aborted += 1;
                }
            }
            if !page.truncated {
                return Ok(aborted);
            }
            let next = match (page.next_key, page.next_upload_id) {
                (Some(k), u) => (k, u.unwrap_or_default()),
                _ => {
                    return Err(self.client().err(
                        "ListMultipartUploads",
                        None,
                        None,
                        "a truncated listing without its next marker",
                    ));
                }
            };
            if markers.as_ref().is_some_and(|m| next <= *m) {
                return Err(self.client().err(
                    "ListMultipartUploads",
                    None,
                    None,
                    "a listing whose marker does not move on (a broken or looping listing)",
                ));
            }
            markers = Some(next);
        }
    }
}

/// `x-amz-copy-source` is `/bucket/key`, the key URL-encoded (its `/` kept).
const COPY_SOURCE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
