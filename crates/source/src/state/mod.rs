//! The Source's durable state in an embedded SQLite database: the last snapshot of every
//! resource, the change log, change periods (one per Change List) and snapshots.
//!
//! Each scan is recorded in one transaction, so a crash leaves either the previous state or the
//! new one.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use resourcesync_model::{Change, HashAlg, Hashes, Link, W3cDateTime};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::error::{Error, Result};

mod lastmod;
mod read;
mod rebase;
mod record;
mod rendered;
mod stream;
mod via;
pub use lastmod::lastmod_of;
pub(crate) use lastmod::whole_second_lastmod_of;
pub use read::{Reader, Recorded};
pub use rebase::Moved;
pub use record::{Recorder, Rotation};
pub(crate) use rendered::Rendered;
pub use stream::KnownRow;
pub use via::{VIA, via_link, via_text};

/// What the Source knows of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Path relative to the Source directory, as bytes.
    pub path: Vec<u8>,
    /// The URI it is published under.
    pub uri: String,
    /// Length in bytes.
    pub length: u64,
    /// Modification time, nanoseconds since the epoch (for the unchanged-file shortcut).
    pub mtime_ns: i128,
    /// Modification time as published (`<lastmod>`).
    pub lastmod: W3cDateTime,
    /// Media type.
    pub mime_type: Option<String>,
    /// Digests.
    pub hashes: Hashes,
    /// Where it comes from, when the inventory said (`<rs:ln rel="via">`, Z39.99-2014 §14.8:
    /// a republished resource's original).
    pub via: Option<Box<Link>>,
}

/// What the previous snapshot says of a path: enough to tell that a file is unchanged (see
/// [`State::for_each_known`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known<'a> {
    /// Path relative to the Source directory, as bytes.
    pub path: &'a [u8],
    /// Length in bytes.
    pub length: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// The digests recorded, as a mask of [`alg_mask`] bits.
    pub algs: u8,
}

/// The mask of digests [`Known::algs`] has bits for (md5 1, sha-1 2, sha-256 4).
pub fn alg_mask(algs: &[HashAlg]) -> u8 {
    algs.iter()
        .map(|a| match a {
            HashAlg::Md5 => 1,
            HashAlg::Sha1 => 2,
            HashAlg::Sha256 => 4,
            HashAlg::Other(_) => 0,
        })
        .fold(0, |m, b| m | b)
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRecord {
    /// Order of recording.
    pub seq: i64,
    /// The resource's URI.
    pub uri: String,
    /// Created, updated or deleted.
    pub change: Change,
    /// When the change was detected (1.1 `datetime`).
    pub datetime: W3cDateTime,
    /// The resource's last modification (absent for deletions).
    pub lastmod: Option<W3cDateTime>,
    /// Length (absent for deletions).
    pub length: Option<u64>,
    /// Media type.
    pub mime_type: Option<String>,
    /// Digests (empty for deletions).
    pub hashes: Hashes,
    /// The period (Change List) it belongs to.
    pub period: i64,
    /// The resource's provenance link (see [`Resource::via`]; absent for deletions).
    pub via: Option<Box<Link>>,
}

/// A change period: the span one Change List covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// Number, from 1.
    pub id: i64,
    /// Start.
    pub from: W3cDateTime,
    /// End, once closed.
    pub until: Option<W3cDateTime>,
    /// Changes recorded in it.
    pub count: u64,
}

/// The state database.
#[derive(Debug)]
pub struct State {
    conn: Connection,
    path: PathBuf,
    /// The newest snapshot's Resource List entries, serialized in path order by the scan that
    /// recorded it (see [`crate::scan::scan`]), for the publish that follows: (snapshot id,
    /// entries).
    rendered: std::cell::RefCell<Option<(i64, Rendered)>>,
    /// A checkpoint of the write-ahead log running on its own connection after a large commit
    /// (see [`Recorder::commit`]); joined before the next scan and when the state is closed.
    checkpoint: std::cell::RefCell<Option<std::thread::JoinHandle<()>>>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS resources(
    path BLOB PRIMARY KEY,
    uri TEXT NOT NULL,
    length INTEGER NOT NULL,
    mtime_ns TEXT NOT NULL,
    lastmod TEXT NOT NULL,
    type TEXT,
    md5 TEXT, sha1 TEXT, sha256 TEXT,
    via TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS periods(
    id INTEGER PRIMARY KEY,
    from_dt TEXT NOT NULL,
    until_dt TEXT,
    count INTEGER NOT NULL DEFAULT 0,
    opened_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS changes(
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    uri TEXT NOT NULL,
    change TEXT NOT NULL,
    datetime TEXT NOT NULL,
    datetime_us INTEGER NOT NULL,
    lastmod TEXT,
    length INTEGER,
    type TEXT,
    md5 TEXT, sha1 TEXT, sha256 TEXT,
    period INTEGER NOT NULL REFERENCES periods(id),
    via TEXT
);
CREATE INDEX IF NOT EXISTS changes_period ON changes(period, seq);
-- The changes a scan found, in the order found, until it records them at its end (emptied in
-- the same transaction: see stream.rs).
CREATE TABLE IF NOT EXISTS scan_changes(
    seq INTEGER PRIMARY KEY,
    change TEXT NOT NULL,
    path BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS snapshots(
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    completed TEXT NOT NULL,
    count INTEGER NOT NULL
);
";

impl Drop for State {
    fn drop(&mut self) {
        // The checkpoint's thread ends before the connection closes (which checkpoints what is
        // left, and removes the log when it is the last one).
        let _ = self.settle();
    }
}

/// Rows a scan's transaction changes from which its checkpoint runs on a thread of its own
/// (see [`Recorder::commit`]): ~2 MB of log at ~180 bytes a row, a copy worth a thread; below
/// it a thread and a connection per commit (`serve` commits every change it sees) are not.
const BACKGROUND_CHECKPOINT_ROWS: u64 = 10_000;

/// Earlier versions indexed resources by URI; see [`State::resource_by_uri`].
const DROP_URI_INDEX: &str = "DROP INDEX IF EXISTS resources_uri;";

/// Earlier versions had no provenance link (`via`) on resources and changes: added to a state
/// they made (NULL for every row: none had one).
const ADD_VIA: &str =
    "ALTER TABLE resources ADD COLUMN via TEXT; ALTER TABLE changes ADD COLUMN via TEXT;";

/// The columns of a resource row, in the order [`row_resource`] reads them.
const RESOURCE_COLUMNS: &str = "path, uri, length, mtime_ns, lastmod, type, md5, sha1, sha256, via";

/// The columns of a change row, in the order [`row_change`] reads them.
const CHANGE_COLUMNS: &str =
    "seq, uri, change, datetime, lastmod, length, type, md5, sha1, sha256, period, via";

fn digest_of(h: &Hashes, alg: HashAlg) -> Option<String> {
    h.value_of(&alg)
}

/// The digest of `alg`, lower-case (borrowed when it is already: digests computed here are).
fn digest_ref(h: &Hashes, alg: HashAlg) -> Option<std::borrow::Cow<'_, str>> {
    h.get(&alg).map(|d| {
        if d.value.bytes().any(|b| b.is_ascii_uppercase()) {
            std::borrow::Cow::Owned(d.value.to_ascii_lowercase())
        } else {
            std::borrow::Cow::Borrowed(d.value.as_str())
        }
    })
}

fn dt(s: &str) -> W3cDateTime {
    W3cDateTime::parse(s).unwrap_or_else(|_| W3cDateTime::from_timestamp(Timestamp::UNIX_EPOCH))
}

/// The current time at microsecond precision (what change datetimes are recorded at: Python
/// clients parse at most six fractional digits).
pub fn now_us() -> Timestamp {
    let t = Timestamp::now();
    Timestamp::from_microsecond(t.as_microsecond()).unwrap_or(t)
}

impl State {
    /// Opens (creating) the database at `path`: it and its journals are owner-only (`0600`,
    /// missing directories `0700`; an existing one others may read is made so:
    /// [`resourcesync_fsmode::private_db`]).
    pub fn open(path: &Path) -> Result<Self> {
        resourcesync_fsmode::private_db(path).map_err(|e| Error::io(path, e))?;
        let conn = Connection::open(path).map_err(|cause| Error::State {
            path: path.to_owned(),
            cause,
        })?;
        let s = State {
            conn,
            path: path.to_owned(),
            rendered: std::cell::RefCell::new(None),
            checkpoint: std::cell::RefCell::new(None),
        };
        s.conn
            .execute_batch(
                // WAL, and no sync per commit for what can be rebuilt (settings, published
                // markers); the transaction recording a scan (the change log) is synced, see
                // `begin`. The page cache is 8 MiB: a scan reads the snapshot once in path order
                // and writes rows in that order (a large transaction spills its pages to the
                // log as it goes), so a cache that grew with the database would only make the
                // memory of a large publish grow with its resources. (`synchronous`
                // first: switching a new database to WAL is a commit of its own.) A new database
                // takes 16 KiB pages: a first scan of 100,000 files commits ~18 MB, written to
                // the WAL and checkpointed one page per write: a quarter as many writes as with
                // 4 KiB pages, a commit about a quarter shorter (an existing database keeps its
                // page size).
                "PRAGMA page_size=16384; PRAGMA synchronous=NORMAL; PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;
                 PRAGMA cache_size=-8192;",
            )
            .map_err(|e| s.err(e))?;
        // One transaction (one commit) for the whole schema.
        s.conn
            .execute_batch(&format!("BEGIN; {SCHEMA} {DROP_URI_INDEX} COMMIT;"))
            .map_err(|e| s.err(e))?;
        let has_via: bool = s
            .conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM pragma_table_info('resources') WHERE name='via')",
                [],
                |r| r.get(0),
            )
            .map_err(|e| s.err(e))?;
        if !has_via {
            s.conn
                .execute_batch(&format!("BEGIN; {ADD_VIA} COMMIT;"))
                .map_err(|e| s.err(e))?;
        }
        Ok(s)
    }

    /// Waits for the checkpoint a scan's commit left running (see [`Recorder::commit`]), and
    /// lets this connection checkpoint on its own again. Done before the next scan and when
    /// the state is dropped.
    pub fn settle(&self) -> Result<()> {
        let Some(h) = self.checkpoint.borrow_mut().take() else {
            return Ok(());
        };
        let _ = h.join();
        self.conn
            .pragma_update(None, "wal_autocheckpoint", 1000)
            .map_err(|e| self.err(e))
    }

    /// The folder of the database (where scratch files go).
    pub(crate) fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    }

    pub(crate) fn err(&self, cause: rusqlite::Error) -> Error {
        Error::State {
            path: self.path.clone(),
            cause,
        }
    }

    /// A stored setting.
    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.conn
            .prepare_cached("SELECT value FROM meta WHERE key=?1")
            .map_err(|e| self.err(e))?
            .query_row([key], |r| r.get(0))
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Stores a setting.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                params![key, value],
            )
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Every resource, ordered by path bytes.
    pub fn resources_by_path(&self) -> Result<Vec<Resource>> {
        self.query_resources("ORDER BY path")
    }

    /// Calls `f` for every resource in path order (the order of the table: streamed, no
    /// index lookups). The Resource List is written in this order.
    pub fn for_each_resource(&self, f: impl FnMut(Resource) -> Result<()>) -> Result<()> {
        self.for_each_resource_in(
            &format!("SELECT {RESOURCE_COLUMNS} FROM resources ORDER BY path"),
            f,
        )
    }

    /// Calls `f` for every row `sql` (a query of the resource columns) selects, in its order.
    fn for_each_resource_in(
        &self,
        sql: &str,
        mut f: impl FnMut(Resource) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            f(row_resource(row).map_err(|e| self.err(e))?)?;
        }
        Ok(())
    }

    /// Keeps the serialized Resource List entries of snapshot `id` for the next publish.
    pub(crate) fn stash_rendered(&self, id: i64, lines: Rendered) {
        *self.rendered.borrow_mut() = Some((id, lines));
    }

    /// Forgets serialized entries (a new scan starts).
    pub(crate) fn clear_rendered(&self) {
        *self.rendered.borrow_mut() = None;
    }

    /// The serialized Resource List entries of snapshot `id`, if the scan that recorded it kept
    /// them (taken: a second publish reads the state).
    pub(crate) fn take_rendered(&self, id: i64) -> Option<Rendered> {
        let mut r = self.rendered.borrow_mut();
        match r.take() {
            Some((i, lines)) if i == id => Some(lines),
            _ => None,
        }
    }

    /// Calls `f` for every resource in path order with what tells an unchanged file (streamed,
    /// nothing allocated per row).
    pub fn for_each_known(&self, mut f: impl FnMut(Known<'_>) -> Result<()>) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT path, length, mtime_ns,
                   (md5 IS NOT NULL) + 2 * (sha1 IS NOT NULL) + 4 * (sha256 IS NOT NULL)
                 FROM resources ORDER BY path",
            )
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let k = (|| -> rusqlite::Result<Known<'_>> {
                Ok(Known {
                    path: row.get_ref(0)?.as_blob()?,
                    length: row.get::<_, i64>(1)? as u64,
                    mtime_ns: parse_mtime(row.get_ref(2)?.as_str()?),
                    algs: row.get::<_, i64>(3)? as u8,
                })
            })()
            .map_err(|e| self.err(e))?;
            f(k)?;
        }
        Ok(())
    }

    /// The resource at a path (relative, as bytes).
    pub fn resource_by_path(&self, path: &[u8]) -> Result<Option<Resource>> {
        query_resource_by_path(&self.conn, path).map_err(|e| self.err(e))
    }

    /// Calls `f` for every resource in URI order (streamed; sorted by the query, URIs are not
    /// indexed).
    pub fn for_each_resource_by_uri(&self, f: impl FnMut(Resource) -> Result<()>) -> Result<()> {
        self.for_each_resource_in(
            &format!("SELECT {RESOURCE_COLUMNS} FROM resources ORDER BY uri"),
            f,
        )
    }

    fn query_resources(&self, order: &str) -> Result<Vec<Resource>> {
        let mut stmt = self
            .conn
            .prepare(&format!("SELECT {RESOURCE_COLUMNS} FROM resources {order}"))
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], row_resource).map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Whether any resource is recorded (without counting them).
    pub fn has_resources(&self) -> Result<bool> {
        self.conn
            .query_row("SELECT EXISTS(SELECT 1 FROM resources)", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// Number of resources.
    pub fn resource_count(&self) -> Result<u64> {
        self.conn
            .query_row("SELECT count(*) FROM resources", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.err(e))
    }

    /// Looks a resource up by URI.
    ///
    /// Resources are not indexed by URI (keeping that index cost every scan more than the few
    /// lookups it served): a resource's URI is its path under the base URL (`crate::uri`), so a
    /// URI under the recorded `base_url` is looked up by its path. Any other (a state scanned
    /// under another base) is looked for row by row.
    pub fn resource_by_uri(&self, uri: &str) -> Result<Option<Resource>> {
        let base = self.meta("base_url")?;
        let path = base
            .as_deref()
            .and_then(|b| uri.strip_prefix(b))
            .and_then(|rest| crate::uri::decode_path(rest).ok());
        if let Some(path) = path {
            let key = crate::uri::path_bytes(&path);
            return Ok(self.resource_by_path(&key)?.filter(|r| r.uri == uri));
        }
        self.conn
            .prepare_cached(&format!(
                "SELECT {RESOURCE_COLUMNS} FROM resources WHERE uri=?1"
            ))
            .map_err(|e| self.err(e))?
            .query_row([uri], row_resource)
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Starts a transaction recording one scan's results. Its commit is synced to disk
    /// (`synchronous=FULL` for that commit only): a change log entry, once published, survives a
    /// power loss.
    pub fn begin(&mut self) -> Result<Recorder<'_>> {
        self.settle()?;
        let path = self.path.clone();
        let err = |cause| Error::State {
            path: path.clone(),
            cause,
        };
        self.conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(err)?;
        let tx =
            Transaction::new_unchecked(&self.conn, TransactionBehavior::Deferred).map_err(err)?;
        Ok(Recorder {
            tx,
            conn: &self.conn,
            checkpoint: &self.checkpoint,
            changes_before: self.conn.total_changes(),
            path: path.clone(),
            last_us: std::cell::Cell::new(None),
            open: std::cell::Cell::new(None),
            uncounted: std::cell::Cell::new(0),
            scratch: Default::default(),
        })
    }

    /// Every period in order.
    pub fn periods(&self) -> Result<Vec<Period>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, from_dt, until_dt, count FROM periods ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(Period {
                    id: r.get(0)?,
                    from: dt(&r.get::<_, String>(1)?),
                    until: r.get::<_, Option<String>>(2)?.map(|s| dt(&s)),
                    count: r.get::<_, i64>(3)? as u64,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// The changes of a period in recording order (streamed).
    pub fn for_each_change(
        &self,
        period: i64,
        mut f: impl FnMut(ChangeRecord) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {CHANGE_COLUMNS} FROM changes WHERE period=?1 ORDER BY seq"
            ))
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query([period]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            f(row_change(row).map_err(|e| self.err(e))?)?;
        }
        Ok(())
    }

    /// The changes recorded after `seq`, in order (for notifications and live updates).
    pub fn changes_after(&self, seq: i64, limit: usize) -> Result<Vec<ChangeRecord>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {CHANGE_COLUMNS} FROM changes WHERE seq>?1 ORDER BY seq LIMIT ?2"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![seq, limit as i64], row_change)
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// The `limit` most recent changes, newest first (the Source's page).
    pub fn recent_changes(&self, limit: usize) -> Result<Vec<ChangeRecord>> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {CHANGE_COLUMNS} FROM changes ORDER BY seq DESC LIMIT ?1"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![limit as i64], row_change)
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// The newest snapshot, if any: (id, at, completed, count).
    pub fn last_snapshot(&self) -> Result<Option<(i64, W3cDateTime, W3cDateTime, u64)>> {
        self.conn
            .query_row(
                "SELECT id, at, completed, count FROM snapshots ORDER BY id DESC LIMIT 1",
                [],
                |r| {
                    Ok((
                        r.get(0)?,
                        dt(&r.get::<_, String>(1)?),
                        dt(&r.get::<_, String>(2)?),
                        r.get::<_, i64>(3)? as u64,
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every snapshot in order: (id, at, completed, count).
    pub fn snapshots(&self) -> Result<Vec<(i64, W3cDateTime, W3cDateTime, u64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, at, completed, count FROM snapshots ORDER BY id")
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    dt(&r.get::<_, String>(1)?),
                    dt(&r.get::<_, String>(2)?),
                    r.get::<_, i64>(3)? as u64,
                ))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// How many resources (URIs, each counted once) have a change recorded after `seq`.
    pub fn uris_changed_after(&self, seq: i64) -> Result<u64> {
        self.conn
            .query_row(
                "SELECT count(DISTINCT uri) FROM changes WHERE seq>?1",
                [seq],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.err(e))
    }

    /// The last change sequence number (0 when none).
    pub fn last_seq(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT coalesce(max(seq), 0) FROM changes", [], |r| {
                r.get(0)
            })
            .map_err(|e| self.err(e))
    }
}

fn row_resource(r: &rusqlite::Row<'_>) -> rusqlite::Result<Resource> {
    let mtime_ns: i128 = r.get::<_, String>(3)?.parse().unwrap_or(0);
    let mut lastmod = dt(&r.get::<_, String>(4)?);
    // A row recorded with the whole seconds of its time (by an earlier version) is read with
    // the fraction the time has: see `whole_second_lastmod_of`.
    if lastmod == whole_second_lastmod_of(mtime_ns) {
        lastmod = lastmod_of(mtime_ns);
    }
    Ok(Resource {
        path: r.get(0)?,
        uri: r.get(1)?,
        length: r.get::<_, i64>(2)? as u64,
        mtime_ns,
        lastmod,
        mime_type: r.get(5)?,
        hashes: Hashes::from_known(r.get(6)?, r.get(7)?, r.get(8)?),
        via: via_column(r, 9)?,
    })
}

/// The provenance link in column `i` (NULL: none).
fn via_column(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<Box<Link>>> {
    Ok(match r.get_ref(i)? {
        rusqlite::types::ValueRef::Text(t) => std::str::from_utf8(t).ok().and_then(via_link),
        _ => None,
    })
}

fn row_change(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChangeRecord> {
    Ok(ChangeRecord {
        seq: r.get(0)?,
        uri: r.get(1)?,
        change: Change::parse(&r.get::<_, String>(2)?),
        datetime: dt(&r.get::<_, String>(3)?),
        lastmod: r.get::<_, Option<String>>(4)?.map(|s| dt(&s)),
        length: r.get::<_, Option<i64>>(5)?.map(|n| n as u64),
        mime_type: r.get(6)?,
        hashes: Hashes::from_known(r.get(7)?, r.get(8)?, r.get(9)?),
        period: r.get(10)?,
        via: via_column(r, 11)?,
    })
}

/// Relative path of a resource row.
pub fn rel_path(r: &Resource) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(std::ffi::OsStr::from_bytes(&r.path))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(&r.path).into_owned())
    }
}

/// The row at a path (relative, as bytes), read through `c` (the state's connection, or a
/// transaction of it: it sees what that transaction wrote).
pub(crate) fn query_resource_by_path(
    c: &rusqlite::Connection,
    path: &[u8],
) -> rusqlite::Result<Option<Resource>> {
    c.prepare_cached(&format!(
        "SELECT {RESOURCE_COLUMNS} FROM resources WHERE path=?1"
    ))?
    .query_row([path], row_resource)
    .optional()
}

/// A modification time as the state keeps it (nanoseconds since the epoch, as text: an
/// `i128` does not fit SQLite's integers); 0 when unreadable. Read as an `i64` first, which
/// holds every time from 1677 to 2262 and parses several times faster (a re-publish reads
/// one per resource).
pub(crate) fn parse_mtime(s: &str) -> i128 {
    match s.parse::<i64>() {
        Ok(n) => i128::from(n),
        Err(_) => s.parse().unwrap_or(0),
    }
}

#[cfg(test)]
mod mtime_tests {
    use super::parse_mtime;

    /// Times within an `i64` and past it (before 1677, after 2262) read back as written; text
    /// that is no number reads as 0.
    #[test]
    fn modification_times_read_back_in_and_past_the_i64_range() {
        for t in [
            0i128,
            1_764_167_000_123_456_789,
            -1,
            i128::from(i64::MAX),
            i128::from(i64::MAX) + 1,
            i128::from(i64::MIN) - 1,
            253_402_300_799_000_000_000,
        ] {
            assert_eq!(parse_mtime(&t.to_string()), t, "{t}");
        }
        assert_eq!(parse_mtime("not a time"), 0);
        assert_eq!(parse_mtime(""), 0);
    }
}
