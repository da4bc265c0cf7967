//! Inventories: what resources a Source has right now, as a port other kinds of Sources plug
//! into (a database table, an object-store bucket, OAI-PMH).
//!
//! The contract of [`Inventory`], which [`conformance`] checks for any implementation:
//!
//! - [`Inventory::list`] streams every resource as a [`Listed`] record (relative path, which
//!   maps to its URI through [`crate::uri::path_to_uri`]; length; modification time; the
//!   digests the backend knows), in strictly increasing order of the path's bytes (the order
//!   of the state and of the Resource List), in memory bounded by the backend's shape (for a
//!   directory: the entries of the directories on the way down), never the whole inventory.
//!   A problem with one entry is an `Err(Skipped)` item: the listing goes on. A path no
//!   Destination could fetch ([`names::unpublishable`]) is left out by the scan, a `Skipped`.
//!   A listing that breaks off (the backend lost) ends with [`Skipped::listing_broke`]: the
//!   caller stops rather than take what was not listed for deleted.
//! - [`Inventory::open`] and [`Inventory::read_stable`] give a resource's bytes.
//! - [`Inventory::change_feed`] is an optional capability: a backend that records its changes
//!   (a database table with a sequence, an S3 event queue, OAI-PMH `from`) offers them as a
//!   [`ChangeFeed`]; the directory does not.
//!
//! - [`Inventory::serve`] gives what `serve` sends for a request: an open file, a reader of the
//!   bytes, or a URL to redirect to.
//!
//! Implementations: [`DirInventory`] (a directory tree, `dir.rs` and `dir/walk.rs`),
//! [`MemInventory`] (in memory, `mem.rs`: for tests, and the template for a new backend),
//! with the feature `postgres`, `PgInventory` (the rows of a table or view, `postgres.rs`),
//! with the feature `oai-pmh`, `oai::OaiInventory` (an OAI-PMH repository, `oai/`), and with
//! the feature `s3`, `S3Inventory` (the objects of an S3-compatible bucket, `s3.rs`).
//! [`open::open`] opens them from what a user writes after `--inventory`.
//!
//! What any of them may publish is one rule, [`names`]: a scan passes every listing and change
//! feed through it, and the server routes the names it reserves itself.
//!
//! A resource's path is a [`Path`], not the checked `RelPath` of `resourcesync_model::path`
//! that names a document in a [`crate::publish::sink::DocSink`] and a copy in a Destination's
//! store: a Source publishes paths `RelPath` refuses (a name that is not UTF-8, under its
//! percent-encoded form; a first segment `.ResourceSync` in another case; deeper than 128
//! segments or longer than 4,000 bytes), and a listing carries each path as the backend has it
//! so that [`names::unpublishable`] can report one it refuses, naming it.

pub mod conformance;
mod dir;
mod mem;
pub mod names;
#[cfg(feature = "oai-pmh")]
pub mod oai;
pub mod open;
pub mod own;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "s3")]
mod s3;

use std::io::Read;
use std::path::{Path, PathBuf};

use resourcesync_model::{Hashes, Link};

use crate::error::Result;
pub(crate) use crate::uri::path_bytes;

pub use dir::DirInventory;
pub use mem::MemInventory;
#[cfg(feature = "postgres")]
pub use postgres::{DEFAULT_FEED_WINDOW, DEFAULT_TABLE, POOL_SIZE, PgInventory};
#[cfg(feature = "s3")]
pub use s3::S3Inventory;

/// One resource as listed by an inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Path relative to the inventory's root (the URI relative to the base URL, decoded).
    pub rel: PathBuf,
    /// Size in bytes (0 when not asked: see [`Inventory::list_names`]).
    pub len: u64,
    /// Modification time, nanoseconds since the epoch (0 when not asked).
    pub mtime_ns: i128,
    /// The digests the backend knows of the current bytes without reading them (a stored
    /// checksum, an object store's content MD5); empty when it knows none.
    pub hashes: Hashes,
    /// Where the resource comes from, when the inventory knows (an aggregator's copy: the
    /// original's URI, `modified`, `hash`, `length`): published as `<rs:ln rel="via">` in its
    /// Resource List and Change List entries (Z39.99-2014 §14.8, Republishing Resources).
    /// `None` for most inventories.
    pub via: Option<Box<Link>>,
}

impl Listed {
    /// A record with no digests.
    pub fn new(rel: PathBuf, len: u64, mtime_ns: i128) -> Self {
        Listed {
            rel,
            len,
            mtime_ns,
            hashes: Hashes::default(),
            via: None,
        }
    }
}

/// A resource that could not be listed or read, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The path (relative when known).
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

impl Skipped {
    /// The item a listing ends with when it breaks off (a lost connection to the backend):
    /// an empty path. A caller stops on it, without taking the resources not listed for
    /// deleted (the scan fails with [`crate::Error::Inventory`], recording nothing).
    pub fn listing_broke(reason: impl Into<String>) -> Self {
        Skipped {
            path: PathBuf::new(),
            reason: reason.into(),
        }
    }

    /// Whether this is the end of a broken listing ([`Skipped::listing_broke`]), not a
    /// problem with one resource.
    pub fn is_listing_broken(&self) -> bool {
        self.path.as_os_str().is_empty()
    }
}

/// A listing: every resource in order, a problem with one of them an `Err` item.
pub type Listing<'a> = Box<dyn Iterator<Item = std::result::Result<Listed, Skipped>> + Send + 'a>;

/// What a Source publishes.
pub trait Inventory: Send + Sync + std::fmt::Debug {
    /// Lists every resource, in strictly increasing order of the path's bytes, as a stream
    /// (see the module's contract). Problems with single entries are `Err` items, not fatal;
    /// `Err` from the call itself means no listing at all (the backend is unreachable).
    fn list(&self) -> Result<Listing<'_>>;

    /// Lists every resource like [`Inventory::list`], for a caller that reads every one of
    /// them anyway ([`Inventory::read_stable`] gives each one's size and modification time as
    /// read): `len` and `mtime_ns` may then be left at 0 where finding them would cost a
    /// lookup of their own. The default is [`Inventory::list`].
    fn list_names(&self) -> Result<Listing<'_>> {
        self.list()
    }

    /// Opens a resource for reading.
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>>;

    /// Size and modification time of a resource now (to detect a change during hashing).
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)>;

    /// Reads a resource whole, feeding its bytes to `sink` (through `buf`, reused across
    /// calls), and returns its size and modification time when they were the same before and
    /// after the read and the bytes fed match that size; `None` when it changed meanwhile (the
    /// caller may try again).
    ///
    /// The default asks [`Inventory::stat`], then [`Inventory::open`], then `stat` again; an
    /// inventory that can ask the opened resource itself should (one lookup instead of three).
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let before = self.stat(rel)?;
        let mut f = self.open(rel)?;
        let n = feed_known(&mut f, buf, before.0, sink)?;
        let after = self.stat(rel)?;
        Ok((before == after && n == before.0).then_some(after))
    }

    /// The backend's own record of its changes, when it keeps one (an optional capability;
    /// `None`, the default, means a caller finds changes by listing everything and comparing).
    fn change_feed(&self) -> Option<&dyn ChangeFeed> {
        None
    }

    /// Whether a listed record's length and digests are the resource's own, stored by the
    /// backend (a database's checksum columns): a scan then records a new or changed record
    /// that carries every digest it computes as listed, without reading the bytes (a record
    /// missing one is read and hashed as usual). `false`, the default: the scan reads and
    /// hashes every new or changed resource, whatever the listing says.
    fn listed_digests_trusted(&self) -> bool {
        false
    }

    /// What `serve` answers for a request of `rel` (a path decoded from the request's URL,
    /// not checked against anything yet): `Ok(None)` when the inventory has no such resource
    /// or would not list it (excluded, hidden, the Source's own files), which the server
    /// answers 404 like any unknown path. A backend checks here what it must (the directory:
    /// no link leading out of the tree).
    ///
    /// The default opens the resource ([`Inventory::stat`] then [`Inventory::open`]): enough
    /// for a backend whose `open` refuses what it would not list. A backend that stores a URL
    /// where the bytes are answers [`Served::Redirect`]; the directory answers
    /// [`Served::File`], which the server sends with ranges and conditional requests.
    fn serve(&self, rel: &Path) -> std::io::Result<Option<Served>> {
        let (len, mtime_ns) = match self.stat(rel) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let body = self.open(rel)?;
        Ok(Some(Served::Body {
            len,
            mtime_ns,
            body,
        }))
    }

    /// A local directory whose file-system events announce this inventory's changes (the
    /// directory inventory's root, which `serve` watches); `None`, the default, for a backend
    /// whose changes are found by its [`ChangeFeed`] or by listing again.
    fn watch_root(&self) -> Option<&Path> {
        None
    }

    /// Whether [`Inventory::serve`] is a few local file-system calls, cheap enough for the
    /// server to make on its asynchronous worker threads (the directory); `false`, the
    /// default, for a backend that asks a server (a database, an object store), which the
    /// server then calls on its blocking thread pool.
    fn local(&self) -> bool {
        false
    }
}

/// A resource as `serve` sends it (see [`Inventory::serve`]).
pub enum Served {
    /// A regular file, opened (checked by the inventory to be the resource): sent with its
    /// metadata, ranges and `sendfile`. `path` is where it was found (for its media type).
    File {
        /// The open file.
        file: std::fs::File,
        /// The file's path, as opened.
        path: PathBuf,
    },
    /// The bytes, from a reader that gives exactly `len` of them (a shorter one is a failed
    /// response, never a short body presented as whole).
    Body {
        /// Length in bytes.
        len: u64,
        /// Modification time, nanoseconds since the epoch (`Last-Modified`).
        mtime_ns: i128,
        /// The bytes.
        body: Box<dyn Read + Send>,
    },
    /// The bytes are elsewhere: the server answers `302 Found` with this absolute URL.
    Redirect(String),
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Served::File { path, .. } => f.debug_struct("File").field("path", path).finish(),
            Served::Body { len, mtime_ns, .. } => f
                .debug_struct("Body")
                .field("len", len)
                .field("mtime_ns", mtime_ns)
                .finish_non_exhaustive(),
            Served::Redirect(u) => f.debug_tuple("Redirect").field(u).finish(),
        }
    }
}

/// What changed of one resource after a cursor: there now (with its record), or gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// Created or updated: the record as it is now.
    Present(Listed),
    /// Deleted.
    Gone(PathBuf),
}

impl Changed {
    /// The resource's path.
    pub fn rel(&self) -> &Path {
        match self {
            Changed::Present(l) => &l.rel,
            Changed::Gone(p) => p,
        }
    }
}

/// The changes after a cursor: each resource changed once (its state now), in the order of
/// [`Inventory::list`], and the cursor to ask from next time.
pub struct Feed<'a> {
    /// The changes, a problem with one of them an `Err` item.
    pub changes: Box<dyn Iterator<Item = std::result::Result<Changed, Skipped>> + Send + 'a>,
    /// Where the next [`ChangeFeed::changes_since`] starts (covers every change given here).
    pub cursor: String,
}

impl std::fmt::Debug for Feed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

/// The optional change-feed capability of an [`Inventory`] (see [`Inventory::change_feed`]).
pub trait ChangeFeed: Send + Sync {
    /// The position now: [`ChangeFeed::changes_since`] it gives what changes from now on.
    fn cursor(&self) -> Result<String>;
    /// Every resource changed after `cursor` (from [`ChangeFeed::cursor`] or an earlier
    /// [`Feed::cursor`]). A cursor the backend no longer knows (expired, or not one of its own)
    /// is an error: the caller lists everything instead.
    fn changes_since(&self, cursor: &str) -> Result<Feed<'_>>;
}

/// The largest read buffer used for hashing (per hashing thread).
pub(crate) const READ_BUF: usize = 256 * 1024;

/// Whether `p` is `d` or lies inside it. Both must be normalized (absolute or both relative, no
/// `.` or `..`, no repeated or trailing separator: canonical paths and paths joined from
/// them are): then comparing bytes gives what `Path::starts_with` gives, without parsing both
/// into components.
pub(crate) fn under(p: &Path, d: &Path) -> bool {
    #[cfg(unix)]
    {
        let (p, d) = (path_bytes(p), path_bytes(d));
        p.starts_with(&d) && (p.len() == d.len() || p[d.len()] == b'/' || d.ends_with(b"/"))
    }
    #[cfg(not(unix))]
    {
        p.starts_with(d)
    }
}

/// Whether a relative path has a segment starting with `.` (a dotfile or dot-directory).
pub(crate) fn hidden(rel: &Path) -> bool {
    #[cfg(unix)]
    {
        let b = path_bytes(rel);
        b.first() == Some(&b'.') || b.windows(2).any(|w| w == b"/.")
    }
    #[cfg(not(unix))]
    {
        rel.components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    }
}

/// Reads `r` into `sink` through `buf` until `len` bytes came (or the end, or more than
/// `len`: the file changed). Every read asks one byte more than is left: for a file of `len`
/// bytes the read that brings the last of them is short, which is the end of a regular file
/// (for other readers, a resource that grew past `len` without its size changing is not seen:
/// `read_stable` compares sizes before and after). Returns the bytes read.
pub(crate) fn feed_known(
    r: &mut dyn Read,
    buf: &mut Vec<u8>,
    len: u64,
    sink: &mut dyn FnMut(&[u8]),
) -> std::io::Result<u64> {
    let mut total = 0u64;
    loop {
        let left = len.saturating_sub(total).saturating_add(1);
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(READ_BUF);
        if buf.len() < want {
            buf.resize(want, 0);
        }
        let n = match r.read(&mut buf[..want]) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        sink(&buf[..n]);
        total += n as u64;
        if total >= len && n < want {
            return Ok(total);
        }
    }
}
