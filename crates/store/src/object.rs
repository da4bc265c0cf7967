//! The [`Store`] port: where a Destination keeps its copies, shaped as objects under keys so
//! that a directory ([`crate::FsStore`]), memory ([`crate::MemStore`]) and an S3-compatible
//! bucket serve it equally well.
//!
//! A body is put under a key in three steps (Z39.99-2014 §5.2 Baseline and Incremental
//! Synchronization; §7 `length` and `hash` are what a copy is verified against):
//!
//! 1. [`Store::begin`] an [`Upload`] with what the body must be ([`Expect`]: the published
//!    length and digests), and [`Upload::write`] it: the upload counts and hashes every byte
//!    and refuses to grow past the published length (or the maximum size);
//! 2. [`Upload::finish`]: the backend flushes what it buffered, then the length and every
//!    published digest of a known algorithm are checked: a body that fails is dropped, never
//!    visible. The result is a [`Finished`] upload, still invisible;
//! 3. [`Store::place`] a batch of finished uploads (each visible atomically: a reader sees the
//!    old body or the new one, never a part) and [`Store::sync`] (durable). [`Store::publish`]
//!    does both for a batch: a directory syncs its whole batch with one `syncfs(2)`, a bucket
//!    makes each object visible and durable with its own `PUT` (or multipart completion).
//!
//! Keys are [`RelPath`]s: checked relative paths, so no key escapes a directory or names the
//! Destination's own folder. Listing is in key (byte) order, streamed.
//!
//! What a backend offers beyond these operations (hints such as crash safety, and optional
//! capabilities such as a local directory) is one [`Store::features`] value
//! ([`crate::features`]), which callers ask for and do without where absent.
//!
//! Implementers: run [`crate::conformance::store`] on the new backend.

use std::any::Any;
use std::fmt::Debug;
use std::io::Read;
use std::ops::ControlFlow;
use std::time::SystemTime;

use resourcesync_model::{HashAlg, Hashes, MultiHasher};

use crate::error::{Error, Result};
use crate::features::Features;
use crate::path::RelPath;

/// What a body must be: its published length and digests, and the most bytes accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    /// The published `length`, if any: a hard cap, and checked exactly at commit.
    pub length: Option<u64>,
    /// The published digests: every one of a known algorithm is checked at commit.
    pub hashes: Hashes,
    /// The most bytes accepted when no length is published.
    pub max_bytes: u64,
    /// The modification time the copy gets (the resource's `<lastmod>`, or its
    /// `Last-Modified`), set once the body is complete, before it is put in place: tools that
    /// compare files by time (rsync, make, backups) see the Source's times. `None`: the time
    /// it was written.
    pub modified: Option<SystemTime>,
    /// The URI of the resource the body is a copy of, kept with the object where the backend
    /// keeps metadata (an S3 object's `x-amz-meta-rs-uri`; a directory keeps none).
    pub uri: Option<String>,
    /// Computes the body's sha-256 even when the Source publishes another digest: the name of
    /// a kept version ([`crate::versions`], `sync --versions`).
    pub sha256: bool,
}

impl Expect {
    /// The limit on the body: the published length, else the maximum size.
    pub fn limit(&self) -> (u64, &'static str) {
        match self.length {
            Some(n) => (n, "published length"),
            None => (self.max_bytes, "maximum resource size"),
        }
    }

    /// The algorithms computed while writing: the published known ones, else sha-256 (so the
    /// state always has a digest of the copy); sha-256 too when [`Expect::sha256`] asks.
    pub fn algs(&self) -> Vec<HashAlg> {
        let mut known = self.hashes.known_algs();
        if known.is_empty() || (self.sha256 && !known.contains(&HashAlg::Sha256)) {
            known.push(HashAlg::Sha256);
        }
        known
    }

    /// Checks a length and computed digests against the expectation.
    pub fn verify(&self, length: u64, computed: &Hashes) -> Result<()> {
        if let Some(expected) = self.length {
            if expected != length {
                return Err(Error::LengthMismatch {
                    expected,
                    actual: length,
                });
            }
        }
        for d in &self.hashes.0 {
            if !d.alg.is_known() {
                continue;
            }
            let actual = computed.get(&d.alg).map(|c| c.value.clone());
            match actual {
                Some(a) if a.eq_ignore_ascii_case(&d.value) => {}
                other => {
                    return Err(Error::DigestMismatch {
                        alg: d.alg.clone(),
                        expected: d.value.clone(),
                        actual: other.unwrap_or_else(|| "(not computed)".into()),
                    });
                }
            }
        }
        Ok(())
    }
}

/// A body put in place: its length and digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Its length.
    pub length: u64,
    /// Its digests (the published algorithms, else sha-256).
    pub hashes: Hashes,
}

/// A copy put in place by [`Store::place`] (or `FsStore::place_in`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Its length and digests.
    pub committed: Committed,
    /// Whether an object was at its key before (and was replaced).
    pub replaced: bool,
}

/// What is at a key ([`Store::head`], [`Store::list`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Its length in bytes.
    pub length: u64,
    /// Its modification time, where the backend keeps one.
    pub modified: Option<SystemTime>,
    /// The digests the backend keeps with the object (computed when it was put), if any: a
    /// directory keeps none.
    pub hashes: Hashes,
    /// Whether it is a plain object. `false`: something else is at the key (a symbolic link in
    /// a directory), which [`Store::get`] refuses and [`Store::delete`] removes.
    pub regular: bool,
    /// The URI of the resource kept with the object ([`Expect::uri`]), where the backend keeps
    /// one and [`Store::head`] was asked (listings leave it out).
    pub uri: Option<String>,
}

/// The backend's half of an [`Upload`] (for implementers of [`Store`]): where the bytes go.
pub trait UploadSink: Send + Debug {
    /// Appends bytes (already counted and checked against the limit by the [`Upload`]).
    fn write_all(&mut self, buf: &[u8]) -> Result<()>;
    /// Called once with every byte written, before the body is verified: flushes what is
    /// buffered, gives the body the modification time `modified` where the backend keeps one,
    /// and returns what [`Store::place`] needs to make it visible (downcast there). Dropping
    /// what is returned, or the sink, must discard the body.
    fn seal(self: Box<Self>, modified: Option<SystemTime>) -> Result<Box<dyn Any + Send>>;
}

/// A body being received for a key: counts, hashes and caps what is written.
#[derive(Debug)]
pub struct Upload {
    key: RelPath,
    sink: Box<dyn UploadSink>,
    hasher: MultiHasher,
    expect: Expect,
    written: u64,
}

impl Upload {
    /// An upload to `key` through a backend's `sink` (for implementers of [`Store::begin`]).
    pub fn new(key: RelPath, expect: Expect, sink: Box<dyn UploadSink>) -> Self {
        Upload {
            hasher: MultiHasher::new(&expect.algs()),
            key,
            sink,
            expect,
            written: 0,
        }
    }

    /// Appends bytes. Fails, keeping nothing written past the limit, once the body would pass
    /// it (the published length, else the maximum size).
    pub fn write(&mut self, buf: &[u8]) -> Result<()> {
        let (limit, what) = self.expect.limit();
        let total = self.written.saturating_add(buf.len() as u64);
        if total > limit {
            return Err(Error::TooLong { limit, what });
        }
        self.sink.write_all(buf)?;
        self.hasher.update(buf);
        self.written = total;
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// What the body must be.
    pub fn expect(&self) -> &Expect {
        &self.expect
    }

    /// The key it goes to.
    pub fn key(&self) -> &RelPath {
        &self.key
    }

    /// Flushes the body and checks it against its published length and every published digest
    /// of a known algorithm (Z39.99-2014 §7). A body that fails is discarded: it never becomes
    /// visible. May wait for the disk (a directory off Linux syncs each file here).
    pub fn finish(self) -> Result<Finished> {
        let Upload {
            key,
            sink,
            hasher,
            expect,
            written,
        } = self;
        let body = sink.seal(expect.modified)?;
        let hashes = hasher.finish();
        expect.verify(written, &hashes)?;
        Ok(Finished {
            key,
            body,
            committed: Committed {
                length: written,
                hashes,
            },
        })
    }
}

/// A body received and verified, not yet visible: [`Store::place`] (or [`Store::publish`])
/// makes it so. Dropped, it is discarded.
#[derive(Debug)]
pub struct Finished {
    key: RelPath,
    body: Box<dyn Any + Send>,
    committed: Committed,
}

impl Finished {
    /// The key it goes to.
    pub fn key(&self) -> &RelPath {
        &self.key
    }

    /// Its length and digests.
    pub fn committed(&self) -> &Committed {
        &self.committed
    }

    /// Its parts, for [`Store::place`]: the key, the backend's body (from
    /// [`UploadSink::seal`]), and its length and digests.
    pub fn into_parts(self) -> (RelPath, Box<dyn Any + Send>, Committed) {
        (self.key, self.body, self.committed)
    }
}

/// The error of a [`Finished`] upload given to a store that did not begin it.
pub fn foreign_upload(key: &RelPath) -> Error {
    Error::UnsafePath {
        path: key.as_str().chars().take(80).collect(),
        reason: "an upload begun by another kind of store",
    }
}

/// Where a Destination keeps its copies: objects under checked keys. Implementations must be
/// usable from several threads, and pass [`crate::conformance::store`].
pub trait Store: Send + Sync + Debug {
    /// Starts receiving the body of the object at `key`; nothing is visible before it is
    /// placed.
    fn begin(&self, key: &RelPath, expect: Expect) -> Result<Upload>;

    /// [`Store::begin`] for a key where no object is expected (a baseline), so that a backend
    /// may take a faster path for new objects (a directory writes an unnamed file in place,
    /// given its name by one `linkat(2)`). Whatever is there after all is replaced as usual.
    fn begin_new(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        self.begin(key, expect)
    }

    /// Makes each finished upload of a batch visible at its key, atomically (a reader sees the
    /// old body or the new one); one outcome per upload, in order. Call [`Store::sync`] before
    /// (so that the bodies are durable before their names) and after (before recording them
    /// anywhere): a caller can so make one sync serve the names of one batch and the bodies of
    /// the next. [`Store::publish`] does all of it.
    fn place(&self, batch: Vec<Finished>) -> Vec<Result<Placed>>;

    /// Makes durable every body finished and every key placed or deleted through this store so
    /// far (one `syncfs(2)` for a directory on Linux; nothing for a store whose puts are
    /// durable when they return).
    fn sync(&self) -> Result<()>;

    /// Makes a batch of finished uploads visible and durable: [`Store::sync`],
    /// [`Store::place`], [`Store::sync`]. The outer error is a failed sync: then no upload
    /// of the batch may be counted durable.
    fn publish(&self, batch: Vec<Finished>) -> Result<Vec<Result<Placed>>> {
        self.sync()?;
        let out = self.place(batch);
        self.sync()?;
        Ok(out)
    }

    /// Puts a whole body read from `body` at `key`: begin, write, finish, publish.
    fn put(&self, key: &RelPath, expect: Expect, body: &mut dyn Read) -> Result<Placed> {
        let mut up = self.begin(key, expect)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = body.read(&mut buf).map_err(|e| Error::Io {
                path: key.as_str().into(),
                cause: e,
            })?;
            if n == 0 {
                break;
            }
            up.write(&buf[..n])?;
        }
        let f = up.finish()?;
        let mut out = self.publish(vec![f])?;
        out.pop().unwrap_or_else(|| Err(foreign_upload(key)))
    }

    /// Opens the object at `key` for reading (an error when there is none).
    fn get(&self, key: &RelPath) -> Result<Box<dyn Read + Send>>;

    /// What is at `key`, if anything.
    fn head(&self, key: &RelPath) -> Result<Option<ObjectMeta>>;

    /// Removes the object at `key`; whether there was one.
    fn delete(&self, key: &RelPath) -> Result<bool>;

    /// Calls `f` with every key after `after` (all with `None`), in key (byte) order, streamed:
    /// `f` returns [`ControlFlow::Break`] to stop. A name found in the backend that is not a
    /// valid [`RelPath`] is passed as an error, in its place when it has one.
    fn list(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<(RelPath, ObjectMeta)>) -> Result<ControlFlow<()>>,
    ) -> Result<()>;

    /// [`Store::list`] without what is known of each object: the same keys (and errors), in
    /// the same order, for a caller that needs the names only (`sync --delete` looking for
    /// files no resource maps to). The default calls `list`; a backend that pays for each
    /// object's metadata apart from its name (a directory: one `stat` per file) leaves it out.
    fn list_keys(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<RelPath>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        self.list(after, &mut |item| f(item.map(|(k, _)| k)))
    }

    /// Gives the object at `key` the modification time `t`; `false` where the backend keeps no
    /// settable time (a bucket).
    fn set_modified(&self, key: &RelPath, t: SystemTime) -> Result<bool>;

    /// Hashes the object at `key`: its length and digests of `algs`.
    fn hash(&self, key: &RelPath, algs: &[HashAlg]) -> Result<(u64, Hashes)> {
        let r = self.get(key)?;
        MultiHasher::new(algs)
            .hash_reader(r)
            .map_err(|e| Error::Io {
                path: key.as_str().into(),
                cause: e,
            })
    }

    /// What the store offers beyond these operations: hints (whether finishing blocks, crash
    /// safety) and optional capabilities (a local directory, cleaning after an interrupted run,
    /// keys that nest), which a caller asks for and does without where absent. The default
    /// declares nothing ([`Features::default`]).
    fn features(&self) -> Features<'_> {
        Features::default()
    }
}
