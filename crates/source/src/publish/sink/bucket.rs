//! [`BucketSink`]: documents published into an S3-compatible bucket under a prefix
//! (`publish --out s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R`), so that the bucket, or
//! any CDN in front of it, serves them at the base URL. Feature `s3`.
//!
//! A document's key is its key under the output root (`resourcesync/capabilitylist.xml`,
//! `.well-known/resourcesync`) after the prefix. Each is written locally (memory, then an
//! unnamed scratch file past 1 MiB) and sent whole on commit, in one `PUT` with `Content-MD5`
//! (or a multipart upload from 8 MiB): S3 makes an object visible whole or not at all, so a
//! reader sees the previous document or the new one, never a part. `Content-Type` is
//! `application/xml` (Z39.99-2017 §4: the documents are Sitemaps), `text/html` for `.html`.
//! A document whose bytes are those already there (its `ETag`, the MD5 of an object put whole)
//! is not sent again: its `Last-Modified`, and a CDN's copy, stay as they are.

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use resourcesync_model::path::RelPath;
use resourcesync_model::{HashAlg, MultiHasher};
use resourcesync_store::s3::{Bucket, BucketWriter, etag_md5};

use crate::error::{Error, Result};
use crate::publish::sink::{DocSink, DocWriter, doc_key};

/// Documents as objects of a bucket under a prefix (see the module's documentation).
#[derive(Debug, Clone)]
pub struct BucketSink {
    bucket: Arc<Bucket>,
}

fn s3_err(key: &str, e: resourcesync_store::Error) -> Error {
    Error::io(Path::new(key), io::Error::other(e.to_string()))
}

/// The media type of a document by its key.
fn content_type(key: &str) -> &'static str {
    if key.ends_with(".html") {
        "text/html; charset=utf-8"
    } else {
        "application/xml"
    }
}

impl BucketSink {
    /// A sink writing into the bucket and prefix of `url`
    /// (`s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R`).
    pub fn open(url: &str) -> Result<Self> {
        let bucket = Bucket::open(url).map_err(|e| Error::Config(format!("--out: {e}")))?;
        Ok(BucketSink {
            bucket: Arc::new(bucket),
        })
    }

    /// The keys under `prefix`, as the bucket has them (ListObjectsV2, paged).
    fn names(&self, prefix: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        self.bucket
            .list(prefix, None, &mut |o| {
                keys.push(o.name);
                Ok(std::ops::ControlFlow::Continue(()))
            })
            .map_err(|e| s3_err(prefix, e))?;
        Ok(keys)
    }

    /// The bucket.
    pub fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    /// Where the documents go: `s3://HOST/BUCKET/PREFIX` (no credentials).
    pub fn location(&self) -> String {
        self.bucket.config().location()
    }
}

/// A document on its way to the bucket.
struct BucketDoc {
    bucket: Arc<Bucket>,
    key: String,
    w: BucketWriter,
}

impl Write for BucketDoc {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.w.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl DocWriter for BucketDoc {
    fn commit(self: Box<Self>) -> Result<()> {
        let BucketDoc { bucket, key, w } = *self;
        bucket.commit(w).map_err(|e| s3_err(&key, e))
    }
}

impl DocSink for BucketSink {
    fn create(&self, key: &RelPath) -> Result<Box<dyn DocWriter>> {
        let key = key.as_str();
        let w = self
            .bucket
            .writer(key, content_type(key))
            .map_err(|e| s3_err(key, e))?;
        Ok(Box::new(BucketDoc {
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            w,
        }))
    }

    /// One `PUT`, unless the object there has these bytes already.
    fn put(&self, key: &RelPath, bytes: &[u8]) -> Result<()> {
        let key = key.as_str();
        let mut h = MultiHasher::new(&[HashAlg::Md5]);
        h.update(bytes);
        let md5 = h.finish().value_of(&HashAlg::Md5);
        let there = self.bucket.head(key).map_err(|e| s3_err(key, e))?;
        let same = there.is_some_and(|i| {
            i.length == bytes.len() as u64 && i.etag.as_deref().and_then(etag_md5) == md5
        });
        if same {
            return Ok(());
        }
        self.bucket
            .put(key, bytes, content_type(key))
            .map_err(|e| s3_err(key, e))
    }

    fn exists(&self, key: &RelPath) -> Result<bool> {
        let key = key.as_str();
        Ok(self.bucket.head(key).map_err(|e| s3_err(key, e))?.is_some())
    }

    fn delete(&self, key: &RelPath) -> Result<()> {
        let key = key.as_str();
        self.bucket.delete(key).map_err(|e| s3_err(key, e))
    }

    /// One listing of the keys under `prefix` (ListObjectsV2, paged).
    fn list(&self, prefix: &str) -> Result<Vec<RelPath>> {
        self.names(prefix)?.iter().map(|k| doc_key(k)).collect()
    }

    /// Every object under `prefix`, whatever its key (one that is no document's too).
    fn delete_prefix(&self, prefix: &str) -> Result<()> {
        for k in self.names(prefix)? {
            self.bucket.delete(&k).map_err(|e| s3_err(&k, e))?;
        }
        Ok(())
    }
}
