//! [`S3Inventory`]: the resources of a Source as the objects of an S3-compatible bucket (AWS
//! S3, Garage, MinIO, Ceph RGW) under a prefix. Feature `s3` (on by default).
//!
//! `--inventory s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R` (credentials also from
//! `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`; see the store crate's `S3Config` for the
//! URL), with this inventory's own parameters, taken out of the URL:
//!
//! - `serve=body` (the default) or `serve=redirect`: `serve` streams an object's bytes, or
//!   answers `302 Found` with the object's URL at the endpoint (useful when the bucket is
//!   public: the Source then carries no bytes). `redirect_base=URL` redirects to `URL` + the
//!   object's key instead (a CDN in front of the bucket), and implies `serve=redirect`.
//! - `etag=md5` (the default) or `etag=ignore`: whether an object's `ETag` is published as its
//!   MD5 (see below).
//!
//! # Resources
//!
//! An object's key below the prefix is the resource's path relative to the base URL (its URI
//! is the base URL + the path, percent-encoded); `Content-Length` its length (Z39.99-2017
//! §7, `length`); `LastModified`, in whole seconds, its `lastmod`. The listing is ListObjectsV2
//! in pages of 1,000 keys, which S3 gives in key order (UTF-8 bytes: the order of the state and
//! of the Resource List); one page at a time is in memory, on a thread of its own. A listing
//! that goes backwards, repeats a page or a continuation token, or gives empty pages without
//! end is the server's error: the listing ends with [`Skipped::listing_broke`] and nothing is
//! recorded (the store crate's `Bucket::scan`).
//!
//! A key that does not map to a safe path is skipped with its reason and the listing goes on:
//! not UTF-8, an empty, `.` or `..` segment, a key ending with `/` (a folder marker, what
//! consoles make for a "folder"), a control byte, the Destination's `.resourcesync` folder
//! (see `RelPath`; its `versions/`, the bodies a Destination keeps, are left out silently).
//! The prefix's own folder marker and the documents' places under the base
//! URL (`resourcesync/…` and `.well-known/resourcesync`, which `serve` answers with the
//! documents, and where `publish --out` the same URL writes them) are left out silently.
//!
//! # Digests
//!
//! The `ETag` of an object put whole (one `PUT`) is the MD5 of its bytes: it is published as
//! the resource's `md5` without reading the bytes ([`Inventory::listed_digests_trusted`]). The
//! `ETag` of a multipart upload (`HEX-N`) is no MD5: such an object is read and hashed, as is
//! every object when other digests are asked (`--hash sha-256`). On AWS, objects encrypted
//! with SSE-C or SSE-KMS have `ETag`s that are not MD5s either and look like one: give
//! `etag=ignore` for such a bucket (every object is then read and hashed once).
//!
//! There is no change feed (S3's event notifications need a queue this does not read): every
//! scan lists the prefix and compares lengths and times with the state. An object replaced
//! within the same second by one of the same length is seen at its next change.
//!
//! Every call blocks (`resourcesync_http::BlockingHttp`): `serve` makes them on its blocking
//! pool; the inventory and its readers may be dropped anywhere.

use std::io::Read;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use resourcesync_model::Hashes;
use resourcesync_model::path::RelPath;
use resourcesync_store::s3::{Bucket, Object, ObjectInfo, etag_md5};

use crate::error::{Error, Result};
use crate::inventory::names::SOURCE_DESCRIPTION;
use crate::inventory::own::DOCS_DIR;
use crate::inventory::{Inventory, Listed, Listing, Served, Skipped, feed_known};
use crate::uri::{encode_path, path_bytes};

/// The scheme of `--inventory s3://…`.
pub(crate) const SCHEME: &str = "s3";

/// Listed objects a listing holds ahead of its reader (two pages).
const AHEAD: usize = 2000;

/// How `serve` answers for an object.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Serve {
    /// Its bytes.
    Body,
    /// `302 Found` to its URL at the endpoint.
    Endpoint,
    /// `302 Found` to this base + its key.
    Base(String),
}

/// The objects of a bucket under a prefix (see the module's documentation).
#[derive(Debug, Clone)]
pub struct S3Inventory {
    bucket: Arc<Bucket>,
    serve: Serve,
    etags: bool,
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn not_found(rel: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{}: no such resource", rel.display()),
    )
}

/// Seconds since the epoch, as nanoseconds (S3 times are whole seconds in `HEAD` and `GET`;
/// a listing's milliseconds are dropped so that all three agree).
fn whole_seconds_ns(t: SystemTime) -> i128 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => i128::from(d.as_secs()) * 1_000_000_000,
        Err(e) => {
            let d = e.duration();
            -(i128::from(d.as_secs()) + i128::from(d.subsec_nanos() > 0)) * 1_000_000_000
        }
    }
}

/// Whether a safe name is where the Source's own documents are served, which a Source
/// publishing into its bucket writes itself: left out silently. Other names no Destination
/// could fetch are left out, reported, by the rule every inventory's listing goes through
/// ([`crate::inventory::names`]).
fn documents_place(name: &str) -> bool {
    name.strip_prefix(DOCS_DIR)
        .is_some_and(|r| r.starts_with('/'))
        || name == SOURCE_DESCRIPTION
}

/// Why an object's name is not a resource's path: `Ok(None)` when it is left out silently.
fn unsafe_name(name: &str) -> std::result::Result<(), Option<String>> {
    // The versions a Destination keeps of its copies (`.resourcesync/versions/…`, when the
    // bucket holds a Destination's copies: docs/history.md): not resources, left out
    // silently (there is one per body kept, not one mistake to report).
    let own = name
        .strip_prefix(resourcesync_model::path::STATE_DIR)
        .is_some_and(|r| r.starts_with("/versions/"));
    if name.is_empty() || documents_place(name) || own {
        return Err(None);
    }
    if name.ends_with('/') {
        return Err(Some(
            "a folder marker (a key ending with /), not a resource".into(),
        ));
    }
    if name.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(Some("the key has a control byte".into()));
    }
    RelPath::parse(name)
        .map(drop)
        .map_err(|e| Some(format!("the key is not a safe path: {e}")))
}

impl S3Inventory {
    /// The inventory of `spec`: `s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R` with this
    /// inventory's own parameters (see the module's documentation). Nothing is asked of the
    /// server until the first listing.
    pub fn from_spec(spec: &str) -> Result<Self> {
        let (url, query) = spec.split_once('?').unwrap_or((spec, ""));
        let (mut serve, mut base, mut etags, mut kept) = (None, None, true, Vec::new());
        let bad = |p: &str, why: &str| {
            Error::Config(format!(
                "--inventory s3://…: {}: {why}",
                p.chars().take(200).collect::<String>()
            ))
        };
        for p in query.split('&').filter(|p| !p.is_empty()) {
            match p.split_once('=') {
                Some(("serve", "body")) => serve = Some(Serve::Body),
                Some(("serve", "redirect")) => serve = Some(Serve::Endpoint),
                Some(("serve", _)) => return Err(bad(p, "serve=body or serve=redirect")),
                Some(("etag", "md5")) => etags = true,
                Some(("etag", "ignore")) => etags = false,
                Some(("etag", _)) => return Err(bad(p, "etag=md5 or etag=ignore")),
                Some(("redirect_base", v)) => {
                    let v = percent_encoding::percent_decode_str(v)
                        .decode_utf8()
                        .map_err(|_| bad(p, "not UTF-8"))?
                        .into_owned();
                    let ok = (v.starts_with("https://") || v.starts_with("http://"))
                        && !v.contains(['?', '#', ' '])
                        && !v.bytes().any(|b| b < 0x20 || b == 0x7f);
                    if !ok {
                        return Err(bad(p, "an http(s) URL without query nor fragment"));
                    }
                    base = Some(crate::uri::normalize_base(&v));
                }
                _ => kept.push(p),
            }
        }
        let url = if kept.is_empty() {
            url.to_owned()
        } else {
            format!("{url}?{}", kept.join("&"))
        };
        let bucket = Bucket::open(&url).map_err(|e| Error::Config(e.to_string()))?;
        let serve = match (base, serve) {
            (Some(b), None | Some(Serve::Endpoint)) => Serve::Base(b),
            (Some(_), Some(_)) => {
                return Err(bad("redirect_base", "redirects: not with serve=body"));
            }
            (None, s) => s.unwrap_or(Serve::Body),
        };
        Ok(S3Inventory {
            bucket: Arc::new(bucket),
            serve,
            etags,
        })
    }

    /// The objects of `bucket` (under its prefix), served as bodies, ETags taken as MD5s where
    /// they are (an aggregator republishing the copies it keeps in a bucket).
    pub fn from_bucket(bucket: Bucket) -> Self {
        S3Inventory {
            bucket: Arc::new(bucket),
            serve: Serve::Body,
            etags: true,
        }
    }

    /// The bucket (for a caller putting or deleting objects, or publishing beside them).
    pub fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    /// The object name of `rel`, when it is one this inventory would list.
    fn name_of(rel: &Path) -> Option<String> {
        let name = std::str::from_utf8(&path_bytes(rel)).ok()?.to_owned();
        unsafe_name(&name).ok()?;
        Some(name)
    }

    /// The record of a listed object, `None` for one left out silently.
    fn record(&self, o: Object) -> Option<std::result::Result<Listed, Skipped>> {
        let skip = |reason: String| {
            Some(Err(Skipped {
                path: PathBuf::from(&o.name),
                reason,
            }))
        };
        if !o.utf8 {
            return skip("the key is not valid UTF-8".into());
        }
        if let Err(why) = unsafe_name(&o.name) {
            return why.and_then(skip);
        }
        let Some(t) = o.last_modified else {
            return skip("the listing gives no LastModified".into());
        };
        let hashes = match o.etag.as_deref().and_then(etag_md5) {
            Some(md5) if self.etags => Hashes::from_known(Some(md5), None, None),
            _ => Hashes::default(),
        };
        Some(Ok(Listed {
            rel: PathBuf::from(o.name),
            len: o.size,
            mtime_ns: whole_seconds_ns(t),
            hashes,
            via: None,
        }))
    }

    /// What `HEAD` or `GET` says of an object, as (length, time).
    fn stat_of(rel: &Path, info: &ObjectInfo) -> std::io::Result<(u64, i128)> {
        let t = info.last_modified.ok_or_else(|| {
            io_err(format!(
                "{}: the object has no Last-Modified",
                rel.display()
            ))
        })?;
        Ok((info.length, whole_seconds_ns(t)))
    }

    /// The object of `rel`, opened (`GET`).
    fn get(
        &self,
        rel: &Path,
    ) -> std::io::Result<(ObjectInfo, resourcesync_store::s3::ObjectReader)> {
        let name = Self::name_of(rel).ok_or_else(|| not_found(rel))?;
        self.bucket
            .get(&name)
            .map_err(io_err)?
            .ok_or_else(|| not_found(rel))
    }
}

impl Inventory for S3Inventory {
    /// Pages of ListObjectsV2 read on a thread of their own, a bounded number of records
    /// ahead; dropping the listing ends it at the next record.
    fn list(&self) -> Result<Listing<'_>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(AHEAD);
        let me = self.clone();
        std::thread::Builder::new()
            .name("s3-listing".into())
            .spawn(move || {
                let out = me.bucket.list("", None, &mut |o| {
                    let gone = me.record(o).is_some_and(|item| tx.send(item).is_err());
                    Ok(if gone {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    })
                });
                if let Err(e) = out {
                    let _ = tx.send(Err(Skipped::listing_broke(format!(
                        "{}: {e}",
                        me.bucket.config().location()
                    ))));
                }
            })
            .map_err(|e| Error::Inventory(format!("starting a listing: {e}")))?;
        Ok(Box::new(rx.into_iter()))
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(self.get(rel)?.1))
    }

    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let name = Self::name_of(rel).ok_or_else(|| not_found(rel))?;
        match self.bucket.head(&name).map_err(io_err)? {
            Some(info) => Self::stat_of(rel, &info),
            None => Err(not_found(rel)),
        }
    }

    /// One `GET`: the length and time of the version whose bytes are read.
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let (info, mut body) = self.get(rel)?;
        let (len, mtime) = Self::stat_of(rel, &info)?;
        let n = feed_known(&mut body, buf, len, sink)?;
        Ok((n == len).then_some((len, mtime)))
    }

    fn listed_digests_trusted(&self) -> bool {
        self.etags
    }

    /// The object's bytes, or a redirect to its URL (after a `HEAD`: never a redirect for an
    /// object that is not there or not listed).
    fn serve(&self, rel: &Path) -> std::io::Result<Option<Served>> {
        let Some(name) = Self::name_of(rel) else {
            return Ok(None);
        };
        if self.serve == Serve::Body {
            return Ok(match self.bucket.get(&name).map_err(io_err)? {
                None => None,
                Some((info, body)) => {
                    let (len, mtime_ns) = Self::stat_of(rel, &info)?;
                    Some(Served::Body {
                        len,
                        mtime_ns,
                        body: Box::new(body),
                    })
                }
            });
        }
        if self.bucket.head(&name).map_err(io_err)?.is_none() {
            return Ok(None);
        }
        let url = match &self.serve {
            Serve::Base(b) => {
                let key = self.bucket.key(&name).map_err(io_err)?;
                let enc = encode_path(Path::new(&key)).ok_or_else(|| not_found(rel))?;
                format!("{b}{enc}")
            }
            _ => self.bucket.object_url(&name).map_err(io_err)?,
        };
        Ok(Some(Served::Redirect(url)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_no_safe_path_are_skipped_with_a_reason() {
        for (n, ok) in [
            ("a/b.txt", Ok(())),
            ("a b/é", Ok(())),
            ("", Err(false)),
            ("resourcesync/capabilitylist.xml", Err(false)),
            (".well-known/resourcesync", Err(false)),
            ("dir/", Err(true)),
            ("a//b", Err(true)),
            ("a/../b", Err(true)),
            ("./a", Err(true)),
            ("/abs", Err(true)),
            ("a\u{1}b", Err(true)),
            (".resourcesync/state.sqlite", Err(true)),
            (".resourcesync/versions/sha256/ab/ab12", Err(false)),
        ] {
            assert_eq!(
                unsafe_name(n).map_err(|r| r.is_some()),
                ok,
                "{n:?}: {:?}",
                unsafe_name(n)
            );
        }
    }

    #[test]
    fn the_inventorys_parameters_are_read_and_checked() {
        let i = S3Inventory::from_spec("s3://k:s@127.0.0.1:9/bkt/p?region=garage&serve=redirect")
            .expect("spec");
        assert_eq!(i.serve, Serve::Endpoint);
        assert_eq!(i.bucket.config().region, "garage");
        let i = S3Inventory::from_spec(
            "s3://k:s@127.0.0.1:9/bkt?redirect_base=https%3A%2F%2Fcdn.example.org%2Fx&etag=ignore",
        )
        .expect("spec");
        assert_eq!(i.serve, Serve::Base("https://cdn.example.org/x/".into()));
        assert!(!i.listed_digests_trusted());
        for bad in [
            "s3://k:s@127.0.0.1:9/bkt?serve=stream",
            "s3://k:s@127.0.0.1:9/bkt?etag=sha1",
            "s3://k:s@127.0.0.1:9/bkt?redirect_base=javascript:x",
            "s3://k:s@127.0.0.1:9/bkt?redirect_base=https://a/&serve=body",
            "s3://k:s@127.0.0.1:9/bkt?unknown=1",
            "s3://k:SECRET@127.0.0.1:9/B",
        ] {
            let e = S3Inventory::from_spec(bad).expect_err(bad).to_string();
            assert!(!e.contains("SECRET"), "{bad}: {e}");
        }
    }

    #[test]
    fn times_are_whole_seconds() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_500);
        assert_eq!(whole_seconds_ns(t), 1_000_000_000);
    }
}
