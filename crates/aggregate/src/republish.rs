//! Republishing (Z39.99-2014 §14.8, Republishing Resources): the aggregator is
//! itself a Source. Each aggregated Source `NAME` is published by the Source engine of
//! `resourcesync-source` over an inventory of its copies ([`CopiesInventory`]), under
//! `BASE/rs/NAME/`, each resource with `<rs:ln rel="via">` to its original: the original's URI,
//! `modified` (its `<lastmod>`), `hash` and `length`, as the Destination's state recorded them.
//! The Source's change detection gives the aggregator's own Change Lists.
//!
//! Where things are, for the Source `NAME` (the working directory is inside the Source's
//! folder, under `.resourcesync/`, which the Destination never lists nor the inventory
//! publishes):
//!
//! ```text
//! STORE/NAME/...                                 the copies (the resources served)
//! STORE/NAME/.resourcesync/republish/index.sqlite   path → original, rebuilt per publish
//! STORE/NAME/.resourcesync/republish/state.sqlite   the Source's state (snapshots, changes)
//! STORE/NAME/.resourcesync/republish/www/           its documents
//! ```
//!
//! A publish runs after each successful sync of its Source, in the same follower (never while
//! the copies are being written), on a blocking thread. Memory does not grow with the number of
//! resources: the Destination's rows are read a page at a time into the index (on disk), which
//! the inventory lists a page at a time in path order; the scan streams.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use resourcesync_model::{Hashes, Link};
use resourcesync_source::inventory::{DirInventory, Inventory, Listed, Listing, Served, Skipped};
use resourcesync_source::state::{VIA, via_link, via_text};
use resourcesync_source::{BaseOrigin, Source, SourceConfig};
use resourcesync_store::{Records, ResourceRecord};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};

/// The path under the aggregator's base URL where the republished Sources are: `rs/NAME/`.
/// Chosen apart from the page for operators (`/`, `/sources/…`, `/api/…`, `/metrics`): a
/// Source named `api` or `metrics` still has its own URL space, and no resource path can shadow
/// a route of the page.
pub const PREFIX: &str = "rs";

/// Rows read from the Destination's state at a time, and listed from the index at a time.
const PAGE: usize = 1024;

/// The first segment of the documents' paths under a republished Source's base (see
/// [`resourcesync_source::layout`]): a copy whose path starts with it would be shadowed by
/// the documents, so it is not republished (and reported as skipped).
const DOCS: &str = "resourcesync";

/// Where the aggregator republishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Republish {
    /// The aggregator's public base URL (`http://host:port/`, ending with `/`).
    pub base_url: String,
    /// Whether it was given (`--base-url`) or is the address `--serve` listens on (then a
    /// Source published under an earlier address moves to the new one, keeping its history).
    pub origin: BaseOrigin,
}

impl Republish {
    /// The base URL of the republished Source `name`: `BASE/rs/NAME/`.
    pub fn source_base(&self, name: &str) -> String {
        format!("{}{PREFIX}/{name}/", self.base_url)
    }

    /// The Capability List of the republished Source `name`.
    pub fn capability_list(&self, name: &str) -> String {
        format!("{}resourcesync/capabilitylist.xml", self.source_base(name))
    }

    /// The aggregator's Source Description (Z39.99-2014 §6.3.2).
    pub fn description_url(&self) -> String {
        format!("{}.well-known/resourcesync", self.base_url)
    }
}

/// The working directory of the republished Source in `folder` (the Source's folder).
pub fn work_dir(folder: &Path) -> PathBuf {
    folder.join(resourcesync_store::STATE_DIR).join("republish")
}

/// Its documents (the Source's output directory).
pub fn docs_dir(folder: &Path) -> PathBuf {
    work_dir(folder).join("www")
}

/// Its state.
pub fn state_path(folder: &Path) -> PathBuf {
    work_dir(folder).join("state.sqlite")
}

/// What one publish did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// Resources republished.
    pub resources: u64,
    /// Changes recorded (created, updated, deleted).
    pub changes: u64,
    /// Copies not republished, with why (hidden paths, paths under `resourcesync/`).
    pub skipped: u64,
}

/// The provenance link of a copy (Z39.99-2014 §14.8): the original URI and what the
/// Destination recorded of it.
fn via_of(r: &ResourceRecord) -> Link {
    let mut l = Link::new(VIA, r.uri.clone());
    l.modified = r.lastmod;
    l.length = r.length;
    l.hash = Some(r.hashes.clone()).filter(|h| !h.is_empty());
    l
}

/// Whether a copy's path can be republished under the Source's base: not hidden (the
/// Destination's own files, and `.well-known`), not under the documents' folder.
fn republishable(path: &str) -> std::result::Result<(), &'static str> {
    if path.split('/').any(|s| s.starts_with('.')) {
        return Err("a hidden path (a segment starting with '.') is not republished");
    }
    if path == DOCS || path.starts_with("resourcesync/") {
        return Err("a path under resourcesync/ would be shadowed by the documents there");
    }
    Ok(())
}

/// The index of one Source's copies: each path (as bytes, the order of the Source's scan) with
/// the original's provenance link ([`via_text`]), or the reason it is not republished.
#[derive(Debug)]
struct Index {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl Index {
    fn open(path: &Path) -> Result<Index> {
        let err = |e: rusqlite::Error| Error::Republish(format!("{}: {e}", path.display()));
        let conn = Connection::open(path).map_err(err)?;
        // Rebuilt at every publish: made anew (an index of an earlier version included).
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF; PRAGMA cache_size=-4096;
             DROP TABLE IF EXISTS idx;
             CREATE TABLE idx(path BLOB PRIMARY KEY, via TEXT, skip TEXT, len INTEGER,
               hashes TEXT) WITHOUT ROWID;",
        )
        .map_err(err)?;
        Ok(Index {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        })
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        Error::Republish(format!("{}: {e}", self.path.display()))
    }

    /// Rebuilds the index from the Destination's rows of the Source `key` (a page at a time,
    /// in one transaction); copies kept after the Source deleted them (`gone`) are left out:
    /// the republished Source mirrors what the original publishes now.
    fn rebuild(&self, state: &dyn Records, key: &str) -> Result<()> {
        let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        tx.execute("DELETE FROM idx", []).map_err(|e| self.err(e))?;
        {
            let mut ins = tx
                .prepare(
                    "INSERT OR REPLACE INTO idx(path, via, skip, len, hashes)
                     VALUES(?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(|e| self.err(e))?;
            let mut after: Option<String> = None;
            loop {
                let page = state.resources_page(key, after.as_deref(), PAGE)?;
                let Some(last) = page.last() else { break };
                after = Some(last.uri.clone());
                for r in page.iter().filter(|r| !r.gone && !r.path.is_empty()) {
                    let skip = republishable(&r.path).err();
                    let hashes = Some(r.hashes.to_string()).filter(|h| !h.is_empty());
                    ins.execute(params![
                        r.path.as_bytes(),
                        via_text(&via_of(r)),
                        skip,
                        r.length.and_then(|n| i64::try_from(n).ok()),
                        hashes
                    ])
                    .map_err(|e| self.err(e))?;
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Up to [`PAGE`] rows after `after`, in path order.
    fn page(&self, after: Option<&[u8]>) -> Result<Vec<Row>> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached(
                "SELECT path, via, skip, len, hashes FROM idx WHERE path > ?1 ORDER BY path
                 LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![after.unwrap_or_default(), PAGE as i64], |r| {
                Ok(Row {
                    path: r.get(0)?,
                    via: r.get(1)?,
                    skip: r.get(2)?,
                    len: r
                        .get::<_, Option<i64>>(3)?
                        .and_then(|n| u64::try_from(n).ok()),
                    hashes: r.get(4)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// The recorded length and digests of a republishable path, when the index has both.
    fn recorded(&self, path: &[u8]) -> Result<Option<(u64, String)>> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let row: Option<(Option<i64>, Option<String>)> = conn
            .prepare_cached("SELECT len, hashes FROM idx WHERE path = ?1 AND skip IS NULL")
            .map_err(|e| self.err(e))?
            .query_row([path], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(match row {
            Some((Some(len), Some(h))) => u64::try_from(len).ok().map(|len| (len, h)),
            _ => None,
        })
    }

    /// The provenance link of a path, if the index has it (republishable).
    fn via(&self, path: &[u8]) -> Result<Option<String>> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.prepare_cached("SELECT via FROM idx WHERE path = ?1 AND skip IS NULL")
            .map_err(|e| self.err(e))?
            .query_row([path], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }
}

/// A row of the index.
struct Row {
    /// The copy's path (bytes).
    path: Vec<u8>,
    /// Its provenance link ([`via_text`]).
    via: Option<String>,
    /// Why it is not republished (none: it is).
    skip: Option<String>,
    /// Its length and digests as the Destination recorded them, once stored and verified.
    len: Option<u64>,
    hashes: Option<String>,
}

/// A stable stand-in for a modification time, from a copy's digests (FNV-1a): it changes
/// whenever the bytes do, which is all the Source's scan asks of it (a copy in a bucket has
/// no file time of its own to give).
fn fingerprint(hashes: &str) -> i128 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in hashes.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    i128::from(h >> 1)
}

fn rel_of(path: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(path).into_owned())
}

/// Where an aggregated Source's copies are.
#[derive(Debug, Clone)]
pub enum Copies {
    /// In its folder (the default store).
    Folder,
    /// In a bucket, under this prefix: the objects of an `S3Store` (`--store s3://…`).
    Bucket(Box<resourcesync_store::S3Config>),
}

/// The copies of one aggregated Source as an [`Inventory`]: the resources the Destination
/// recorded (not the files or objects that happen to be there), each with its provenance link;
/// the bytes read through the inventory of where they are: a [`DirInventory`] of the folder
/// (which refuses hidden paths and links out of it), or an [`S3Inventory`] of the bucket.
///
/// In a bucket, a copy's length and digests are the ones the Destination recorded once the
/// object was stored and verified (it records nothing before): they are listed as they are,
/// trusted ([`Inventory::listed_digests_trusted`]), so that a publish neither asks the object
/// store for each copy nor reads it.
///
/// [`S3Inventory`]: resourcesync_source::inventory::S3Inventory
#[derive(Debug)]
pub struct CopiesInventory {
    bytes: Arc<dyn Inventory>,
    /// Whether the rows' lengths and digests are listed as they are (a bucket).
    rows_trusted: bool,
    index: Index,
}

impl CopiesInventory {
    /// The copies in `folder`, indexed from the Destination's rows of the Source `key` in
    /// `state` (the index at `index`, rebuilt now).
    pub fn open(folder: &Path, index: &Path, state: &dyn Records, key: &str) -> Result<Self> {
        Self::open_at(folder, &Copies::Folder, index, state, key)
    }

    /// The copies of the Source `key` where `copies` says (its `folder` for [`Copies::Folder`]).
    pub fn open_at(
        folder: &Path,
        copies: &Copies,
        index: &Path,
        state: &dyn Records,
        key: &str,
    ) -> Result<Self> {
        let (bytes, rows_trusted): (Arc<dyn Inventory>, bool) = match copies {
            Copies::Folder => (
                Arc::new(DirInventory::new(folder, Vec::new(), false, Vec::new())?),
                false,
            ),
            Copies::Bucket(cfg) => {
                let bucket = resourcesync_store::s3::Bucket::new((**cfg).clone())?;
                (
                    Arc::new(resourcesync_source::inventory::S3Inventory::from_bucket(
                        bucket,
                    )),
                    true,
                )
            }
        };
        let index = Index::open(index)?;
        index.rebuild(state, key)?;
        Ok(CopiesInventory {
            bytes,
            rows_trusted,
            index,
        })
    }

    fn listed(&self, row: Row) -> Option<std::result::Result<Listed, Skipped>> {
        let Row {
            path,
            via,
            skip,
            len,
            hashes,
        } = row;
        let rel = rel_of(&path);
        if let Some(reason) = skip {
            return Some(Err(Skipped { path: rel, reason }));
        }
        if self.rows_trusted {
            if let (Some(len), Some(h)) = (len, hashes.as_deref()) {
                let mut l = Listed::new(rel, len, fingerprint(h));
                l.hashes = Hashes::parse(h).0;
                l.via = via.as_deref().and_then(via_link);
                return Some(Ok(l));
            }
        }
        match self.bytes.stat(&rel) {
            Ok((len, mtime_ns)) => {
                let mut l = Listed::new(rel, len, mtime_ns);
                l.via = via.as_deref().and_then(via_link);
                Some(Ok(l))
            }
            // A row without its copy (removed by hand): not there.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(Err(Skipped {
                path: rel,
                reason: e.to_string(),
            })),
        }
    }
}

/// The listing: the index a page at a time.
struct Pages<'a> {
    inv: &'a CopiesInventory,
    page: std::vec::IntoIter<Row>,
    after: Option<Vec<u8>>,
    done: bool,
}

impl Iterator for Pages<'_> {
    type Item = std::result::Result<Listed, Skipped>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.page.next() {
                self.after = Some(row.path.clone());
                match self.inv.listed(row) {
                    Some(item) => return Some(item),
                    None => continue,
                }
            }
            if self.done {
                return None;
            }
            match self.inv.index.page(self.after.as_deref()) {
                Ok(rows) => {
                    self.done = rows.len() < PAGE;
                    self.page = rows.into_iter();
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(Skipped::listing_broke(e.to_string())));
                }
            }
        }
    }
}

impl Inventory for CopiesInventory {
    fn list(&self) -> resourcesync_source::Result<Listing<'_>> {
        Ok(Box::new(Pages {
            inv: self,
            page: Vec::new().into_iter(),
            after: None,
            done: false,
        }))
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        self.bytes.open(rel)
    }

    /// In a bucket, what the listing gives: the recorded length, and the stand-in time of the
    /// recorded digests; else the copy's own.
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        if self.rows_trusted {
            let key = rel.to_string_lossy();
            let recorded = self
                .index
                .recorded(key.as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if let Some((len, hashes)) = recorded {
                return Ok((len, fingerprint(&hashes)));
            }
        }
        self.bytes.stat(rel)
    }

    fn listed_digests_trusted(&self) -> bool {
        self.rows_trusted
    }

    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        self.bytes.read_stable(rel, buf, sink)
    }

    fn serve(&self, rel: &Path) -> std::io::Result<Option<Served>> {
        let key = rel.to_string_lossy();
        match self.index.via(key.as_bytes()) {
            Ok(Some(_)) => self.bytes.serve(rel),
            Ok(None) => Ok(None),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    }

    fn local(&self) -> bool {
        self.bytes.local()
    }
}

/// Publishes the copies of the Source `name` (in `folder`, recorded in `state` under `key`)
/// as a Source under `at`: the index rebuilt, a scan, every document. Blocking. With
/// `versions` (the Source keeps them: `versions = true`), each entry also links its
/// original's TimeMap and memento in the aggregator's archive ([`crate::memento`]).
pub fn publish(
    at: &Republish,
    name: &str,
    folder: &Path,
    copies: &Copies,
    state: &dyn Records,
    key: &str,
    versions: bool,
) -> Result<Published> {
    let work = work_dir(folder);
    std::fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
    let inv = CopiesInventory::open_at(folder, copies, &work.join("index.sqlite"), state, key)?;
    let mut cfg = SourceConfig::new(&work, &at.source_base(name));
    cfg.out = Some(docs_dir(folder));
    cfg.state = Some(state_path(folder));
    cfg.base_origin = at.origin;
    if versions {
        cfg.publish.archive = Some(crate::memento::archive_base(&at.base_url, name));
    }
    let mut source = Source::open_with(cfg, Arc::new(inv))?;
    let scan = source.scan()?;
    for s in &scan.skipped {
        tracing::debug!(source = %name, path = %s.path.display(), reason = %s.reason, "not republished");
    }
    source.publish()?;
    Ok(Published {
        resources: scan.resources,
        changes: scan.created + scan.updated + scan.deleted,
        skipped: scan.skipped.len() as u64,
    })
}

/// The aggregator's Source Description (Z39.99-2014 §6.3.2, §8): one Capability List per
/// republished Source (`names`: those published at least once), with a `describedby` link
/// to the page for operators.
pub fn description(at: &Republish, names: &[String]) -> Result<Vec<u8>> {
    use resourcesync_model::{Capability, DocumentWriter, Entry, Header, Metadata, Root};
    let mut header = Header::new(
        Root::UrlSet,
        Metadata::with_capability(Capability::Description),
    );
    header
        .links
        .push(Link::new("describedby", at.base_url.clone()));
    let mut w = DocumentWriter::new(Vec::new(), "description", &header)
        .map_err(|e| Error::Republish(e.to_string()))?;
    for name in names {
        let mut e = Entry::new(at.capability_list(name));
        e.md = Some(Metadata::with_capability(Capability::CapabilityList));
        w.write_entry(&e)
            .map_err(|e| Error::Republish(e.to_string()))?;
    }
    w.finish().map_err(|e| Error::Republish(e.to_string()))
}

/// Whether the Source `name` in `folder` has been republished (its Capability List is there).
pub fn is_published(folder: &Path) -> bool {
    docs_dir(folder)
        .join("resourcesync/capabilitylist.xml")
        .is_file()
}
