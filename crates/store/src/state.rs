//! What the Destination knows: the [`StateStore`] trait and its SQLite implementation.
//!
//! Per resource: URI, the Source it belongs to, path under DEST, length, digests (md5, sha-1,
//! sha-256), the Source's `<lastmod>`, the server's `ETag` and `Last-Modified`, and whether the
//! Source deleted it while the copy was kept. Per Source (keyed by its Capability List URL): the
//! cursor, i.e. the `datetime` (or `<lastmod>`) of the last change applied (Z39.99-2014 §12.1;
//! Z39.99-2017 §12.1), or the `at` of the Resource List a baseline came from (§10.1). Changes that
//! failed are kept as pending, to be retried by the next run.
//!
//! The Destination writes a resource's row only after its file is in place, so a crash leaves
//! at worst a file without a row (which the next run recognises by its digest), never a row for
//! a file that is not there.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use resourcesync_model::{Change, HashAlg, Hashes, W3cDateTime};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};

/// What the Destination knows of one copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRecord {
    /// The resource's URI (`<loc>`).
    pub uri: String,
    /// The Source it belongs to (its Capability List URL).
    pub source: String,
    /// Its path under DEST (`/`-separated).
    pub path: String,
    /// Its length.
    pub length: Option<u64>,
    /// Its digests (md5, sha-1 and sha-256 are kept).
    pub hashes: Hashes,
    /// The Source's `<lastmod>` for it.
    pub lastmod: Option<W3cDateTime>,
    /// The `ETag` the server sent.
    pub etag: Option<String>,
    /// The `Last-Modified` the server sent.
    pub last_modified: Option<String>,
    /// The Source deleted it and the copy was kept (no `--delete`).
    pub gone: bool,
}

/// Where a Destination is in a Source's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceCursor {
    /// The Source's Capability List URL (or the URL of the list synced, without one).
    pub source: String,
    /// The time of the last change applied, or the `at` of the Resource List of the last
    /// baseline; `None` while no baseline has completed.
    pub cursor: Option<W3cDateTime>,
    /// When the last run completed (a W3C Datetime).
    pub synced_at: Option<W3cDateTime>,
}

/// A change that failed and is retried by the next run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingChange {
    /// The Source.
    pub source: String,
    /// The resource.
    pub uri: String,
    /// The change (`created`, `updated`, `deleted`).
    pub change: Option<Change>,
    /// The published length.
    pub length: Option<u64>,
    /// The published digests.
    pub hashes: Hashes,
    /// The published `<lastmod>`.
    pub lastmod: Option<W3cDateTime>,
    /// Mirrors (`duplicate` links) as (priority, href).
    pub duplicates: Vec<(u32, String)>,
    /// Why it failed.
    pub error: String,
}

/// The Destination's state. Implementations must be usable from several threads.
pub trait StateStore: Send + Sync + Debug {
    /// The row of a resource.
    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>>;
    /// Writes (replaces) the row of a resource.
    fn put_resource(&self, r: &ResourceRecord) -> Result<()>;
    /// Writes (replaces) the rows of copies just put in place and forgets their pending
    /// changes, all or nothing (one transaction where the store has them).
    fn put_resources(&self, rows: &[ResourceRecord]) -> Result<()> {
        for r in rows {
            self.put_resource(r)?;
            self.remove_pending(&r.source, &r.uri)?;
        }
        Ok(())
    }
    /// Removes the row of a resource.
    fn remove_resource(&self, uri: &str) -> Result<()>;
    /// Marks a resource as deleted at the Source (copy kept), or not.
    fn set_gone(&self, uri: &str, gone: bool) -> Result<()>;
    /// Up to `limit` rows of a Source with URIs after `after`, in URI (byte) order.
    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>>;
    /// Whether some row has this path.
    fn has_path(&self, path: &str) -> Result<bool>;
    /// The cursor of a Source.
    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>>;
    /// Writes the cursor of a Source.
    fn set_cursor(&self, c: &SourceCursor) -> Result<()>;
    /// Up to `limit` pending changes of a Source with URIs after `after`, in URI order.
    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>>;
    /// Records a pending change (replacing one for the same URI).
    fn put_pending(&self, p: &PendingChange) -> Result<()>;
    /// Forgets a pending change.
    fn remove_pending(&self, source: &str, uri: &str) -> Result<()>;
}

/// Calls `f` for every row of a Source, in URI order, a page at a time.
pub fn for_each_resource(
    state: &dyn StateStore,
    source: &str,
    mut f: impl FnMut(ResourceRecord) -> Result<()>,
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = state.resources_page(source, after.as_deref(), 1000)?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.uri.clone());
        for r in page {
            f(r)?;
        }
    }
}

/// The state in an SQLite database (WAL, one writer at a time).
#[derive(Debug)]
pub struct SqliteState {
    conn: Mutex<Connection>,
    path: PathBuf,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS resources(
    uri TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    length INTEGER,
    md5 TEXT,
    sha1 TEXT,
    sha256 TEXT,
    lastmod TEXT,
    etag TEXT,
    last_modified TEXT,
    gone INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS resources_source_uri ON resources(source, uri);
CREATE INDEX IF NOT EXISTS resources_path ON resources(path);
CREATE TABLE IF NOT EXISTS sources(
    source TEXT PRIMARY KEY,
    cursor TEXT,
    synced_at TEXT
);
CREATE TABLE IF NOT EXISTS pending(
    source TEXT NOT NULL,
    uri TEXT NOT NULL,
    change TEXT,
    length INTEGER,
    hashes TEXT,
    lastmod TEXT,
    duplicates TEXT,
    error TEXT,
    PRIMARY KEY(source, uri)
);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
INSERT OR IGNORE INTO meta(key, value) VALUES('schema', '1');
";

/// A page of a Source's rows after `?2` (or from `''` with `first`: every text is `>= ''`), in
/// URI order. A condition such as `(?2 IS NULL OR uri > ?2)` would keep SQLite from seeking in
/// the index on (source, uri): each page would scan from the Source's first row, and reading
/// all rows a page at a time would take time quadratic in their number.
fn resources_page_sql(first: bool) -> String {
    let op = if first { ">=" } else { ">" };
    format!(
        "SELECT {RESOURCE_COLS} FROM resources \
         WHERE source = ?1 AND uri {op} ?2 ORDER BY uri LIMIT ?3"
    )
}

/// As [`resources_page_sql`], for the pending changes.
fn pending_page_sql(first: bool) -> String {
    let op = if first { ">=" } else { ">" };
    format!(
        "SELECT source, uri, change, length, hashes, lastmod, duplicates, error \
         FROM pending WHERE source = ?1 AND uri {op} ?2 ORDER BY uri LIMIT ?3"
    )
}

fn opt_u64(v: Option<i64>) -> Option<u64> {
    v.and_then(|n| u64::try_from(n).ok())
}

fn to_i64(v: Option<u64>) -> Option<i64> {
    v.and_then(|n| i64::try_from(n).ok())
}

fn parse_dt(s: Option<String>) -> Option<W3cDateTime> {
    s.and_then(|s| W3cDateTime::parse(&s).ok())
}

fn encode_dups(d: &[(u32, String)]) -> String {
    d.iter()
        .map(|(p, h)| format!("{p} {h}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn decode_dups(s: Option<String>) -> Vec<(u32, String)> {
    s.unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (p, h) = l.split_once(' ')?;
            Some((p.parse().ok()?, h.to_owned()))
        })
        .collect()
}

fn digest_of(h: &Hashes, alg: HashAlg) -> Option<String> {
    h.value_of(&alg)
}

const RESOURCE_COLS: &str =
    "uri, source, path, length, md5, sha1, sha256, lastmod, etag, last_modified, gone";

fn put_row(c: &Connection, r: &ResourceRecord) -> rusqlite::Result<()> {
    let mut st = c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO resources({RESOURCE_COLS}) \
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    ))?;
    st.execute(params![
        r.uri,
        r.source,
        r.path,
        to_i64(r.length),
        digest_of(&r.hashes, HashAlg::Md5),
        digest_of(&r.hashes, HashAlg::Sha1),
        digest_of(&r.hashes, HashAlg::Sha256),
        r.lastmod.map(|d| d.to_string()),
        r.etag,
        r.last_modified,
        i64::from(r.gone),
    ])
    .map(drop)
}

fn row_to_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<ResourceRecord> {
    Ok(ResourceRecord {
        uri: row.get(0)?,
        source: row.get(1)?,
        path: row.get(2)?,
        length: opt_u64(row.get(3)?),
        hashes: Hashes::from_known(row.get(4)?, row.get(5)?, row.get(6)?),
        lastmod: parse_dt(row.get(7)?),
        etag: row.get(8)?,
        last_modified: row.get(9)?,
        gone: row.get::<_, i64>(10)? != 0,
    })
}

fn row_to_pending(row: &rusqlite::Row<'_>) -> rusqlite::Result<PendingChange> {
    let hashes: Option<String> = row.get(4)?;
    Ok(PendingChange {
        source: row.get(0)?,
        uri: row.get(1)?,
        change: row.get::<_, Option<String>>(2)?.map(|c| Change::parse(&c)),
        length: opt_u64(row.get(3)?),
        hashes: hashes.map(|h| Hashes::parse(&h).0).unwrap_or_default(),
        lastmod: parse_dt(row.get(5)?),
        duplicates: decode_dups(row.get(6)?),
        error: row.get::<_, Option<String>>(7)?.unwrap_or_default(),
    })
}

impl SqliteState {
    /// Opens (creating) the state database for a sync, and holds it exclusively until dropped:
    /// a second process gets [`Error::Locked`].
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let conn = Connection::open(path).map_err(|e| sql(path, e))?;
        let s = SqliteState {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        };
        {
            let c = s.lock();
            c.busy_timeout(std::time::Duration::from_millis(250))
                .map_err(|e| s.err(e))?;
            // Exclusive locking mode: the lock taken by the first write is kept until the
            // connection closes, so two syncs cannot interleave; WAL then needs no shared memory.
            c.execute_batch("PRAGMA locking_mode=EXCLUSIVE;")
                .map_err(|e| s.err(e))?;
            match c.execute_batch("BEGIN EXCLUSIVE; COMMIT;") {
                Ok(()) => {}
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::DatabaseBusy
                        || f.code == rusqlite::ErrorCode::DatabaseLocked =>
                {
                    return Err(Error::Locked {
                        path: path.to_owned(),
                    });
                }
                Err(e) => return Err(s.err(e)),
            }
            // WAL with synchronous=NORMAL survives a killed process (the case that matters: a
            // row lost to a power cut only costs re-hashing the file, see the module docs).
            c.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
                .map_err(|e| s.err(e))?;
            c.execute_batch(SCHEMA).map_err(|e| s.err(e))?;
        }
        Ok(s)
    }

    /// Opens an existing state database (for audits and dry runs, which write no row); `None`
    /// when there is none.
    pub fn open_existing(path: &Path) -> Result<Option<Self>> {
        if !path.is_file() {
            return Ok(None);
        }
        SqliteState::open(path).map(Some)
    }

    /// Opens an existing state database for reading only (audits, explorations and dry runs,
    /// which write no row), so that a copy on a read-only file system or a database the user
    /// may not write can be audited; `None` when there is none. Every write then fails.
    ///
    /// A sync holding the database gives [`Error::Locked`]. On a read-only file system, where
    /// the write-ahead log's shared-memory index cannot be created, the database is opened as
    /// immutable (SQLite's `immutable=1`): nothing can write it there.
    pub fn open_read_only(path: &Path) -> Result<Option<Self>> {
        use rusqlite::OpenFlags;
        if !path.is_file() {
            return Ok(None);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let attempt = |immutable: bool| -> rusqlite::Result<Connection> {
            let mut uri = String::from("file:");
            uri.push_str(&uri_path(path));
            if immutable {
                uri.push_str("?immutable=1");
            }
            let c = Connection::open_with_flags(&uri, flags)?;
            c.busy_timeout(std::time::Duration::from_millis(250))?;
            // A read that sees the schema proves the database can be read.
            c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })?;
            Ok(c)
        };
        let conn = match attempt(false) {
            Ok(c) => c,
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::DatabaseBusy
                    || f.code == rusqlite::ErrorCode::DatabaseLocked =>
            {
                return Err(Error::Locked {
                    path: path.to_owned(),
                });
            }
            Err(_) if read_only_fs(path) => attempt(true).map_err(|e| sql(path, e))?,
            Err(e) => return Err(sql(path, e)),
        };
        Ok(Some(SqliteState {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        }))
    }

    /// An empty state in memory (dry runs without a state database).
    pub fn in_memory() -> Result<Self> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|e| sql(&path, e))?;
        conn.execute_batch(SCHEMA).map_err(|e| sql(&path, e))?;
        Ok(SqliteState {
            conn: Mutex::new(conn),
            path,
        })
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves the connection usable: SQLite rolls back an
        // unfinished statement itself.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        sql(&self.path, e)
    }
}

/// `path` as the path of an SQLite `file:` URI (RFC 8089), every byte but unreserved ones and
/// `/` percent-encoded (SQLite decodes them).
fn uri_path(path: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    #[cfg(unix)]
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(abs.as_os_str()).to_vec();
    #[cfg(not(unix))]
    let bytes = abs.to_string_lossy().replace('\\', "/").into_bytes();
    let mut out = String::with_capacity(bytes.len());
    for b in bytes {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether the file system holding `path` is mounted read-only.
fn read_only_fs(path: &Path) -> bool {
    rustix::fs::statvfs(path)
        .is_ok_and(|s| s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY))
}

fn sql(path: &Path, cause: rusqlite::Error) -> Error {
    Error::Sqlite {
        path: path.to_owned(),
        cause,
    }
}

impl StateStore for SqliteState {
    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>> {
        let c = self.lock();
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {RESOURCE_COLS} FROM resources WHERE uri = ?1"
            ))
            .map_err(|e| self.err(e))?;
        st.query_row([uri], row_to_record)
            .optional()
            .map_err(|e| self.err(e))
    }

    fn put_resource(&self, r: &ResourceRecord) -> Result<()> {
        let c = self.lock();
        put_row(&c, r).map_err(|e| self.err(e))
    }

    fn put_resources(&self, rows: &[ResourceRecord]) -> Result<()> {
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        for r in rows {
            put_row(&tx, r).map_err(|e| self.err(e))?;
            tx.prepare_cached("DELETE FROM pending WHERE source = ?1 AND uri = ?2")
                .and_then(|mut st| st.execute([&r.source, &r.uri]))
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    fn remove_resource(&self, uri: &str) -> Result<()> {
        self.lock()
            .execute("DELETE FROM resources WHERE uri = ?1", [uri])
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn set_gone(&self, uri: &str, gone: bool) -> Result<()> {
        self.lock()
            .execute(
                "UPDATE resources SET gone = ?2 WHERE uri = ?1",
                params![uri, i64::from(gone)],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let c = self.lock();
        let mut st = c
            .prepare_cached(&resources_page_sql(after.is_none()))
            .map_err(|e| self.err(e))?;
        let after = after.unwrap_or("");
        let rows = st
            .query_map(
                params![source, after, i64::try_from(limit).unwrap_or(i64::MAX)],
                row_to_record,
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn has_path(&self, path: &str) -> Result<bool> {
        let c = self.lock();
        let mut st = c
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM resources WHERE path = ?1)")
            .map_err(|e| self.err(e))?;
        st.query_row([path], |r| r.get::<_, i64>(0))
            .map(|n| n != 0)
            .map_err(|e| self.err(e))
    }

    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>> {
        self.lock()
            .query_row(
                "SELECT source, cursor, synced_at FROM sources WHERE source = ?1",
                [source],
                |r| {
                    Ok(SourceCursor {
                        source: r.get(0)?,
                        cursor: parse_dt(r.get(1)?),
                        synced_at: parse_dt(r.get(2)?),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn set_cursor(&self, c: &SourceCursor) -> Result<()> {
        self.lock()
            .execute(
                "INSERT OR REPLACE INTO sources(source, cursor, synced_at) VALUES(?1, ?2, ?3)",
                params![
                    c.source,
                    c.cursor.map(|d| d.to_string()),
                    c.synced_at.map(|d| d.to_string())
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>> {
        let c = self.lock();
        let mut st = c
            .prepare_cached(&pending_page_sql(after.is_none()))
            .map_err(|e| self.err(e))?;
        let after = after.unwrap_or("");
        let rows = st
            .query_map(
                params![source, after, i64::try_from(limit).unwrap_or(i64::MAX)],
                row_to_pending,
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn put_pending(&self, p: &PendingChange) -> Result<()> {
        self.lock()
            .execute(
                "INSERT OR REPLACE INTO pending(source, uri, change, length, hashes, lastmod, \
                 duplicates, error) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    p.source,
                    p.uri,
                    p.change.as_ref().map(|c| c.as_str().to_owned()),
                    to_i64(p.length),
                    (!p.hashes.is_empty()).then(|| p.hashes.to_string()),
                    p.lastmod.map(|d| d.to_string()),
                    encode_dups(&p.duplicates),
                    p.error,
                ],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }

    fn remove_pending(&self, source: &str, uri: &str) -> Result<()> {
        self.lock()
            .execute(
                "DELETE FROM pending WHERE source = ?1 AND uri = ?2",
                [source, uri],
            )
            .map(drop)
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_page_in_uri_order() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("s").join("state.sqlite");
        let s = SqliteState::open(&p).expect("open");
        for u in ["http://h/b", "http://h/a", "http://h/c"] {
            s.put_resource(&ResourceRecord {
                uri: u.into(),
                source: "cap".into(),
                path: u.trim_start_matches("http://h/").into(),
                length: Some(3),
                hashes: Hashes::parse("md5:900150983CD24FB0D6963F7D28E17F72").0,
                lastmod: Some(W3cDateTime::parse("2013-01-02T13:00:00Z").expect("dt")),
                etag: Some("\"x\"".into()),
                ..ResourceRecord::default()
            })
            .expect("put");
        }
        let page = s.resources_page("cap", None, 2).expect("page");
        assert_eq!(page.len(), 2);
        assert_eq!(page[0].uri, "http://h/a");
        assert_eq!(
            page[0].hashes.to_string(),
            "md5:900150983cd24fb0d6963f7d28e17f72"
        );
        let rest = s
            .resources_page("cap", Some("http://h/b"), 10)
            .expect("page");
        assert_eq!(rest.len(), 1);
        assert!(s.has_path("c").expect("path"));
        s.set_gone("http://h/c", true).expect("gone");
        assert!(s.resource("http://h/c").expect("get").expect("row").gone);
        s.set_cursor(&SourceCursor {
            source: "cap".into(),
            cursor: Some(W3cDateTime::parse("2013-01-03T00:00:00.5Z").expect("dt")),
            synced_at: None,
        })
        .expect("cursor");
        assert_eq!(
            s.cursor("cap")
                .expect("c")
                .expect("row")
                .cursor
                .map(|c| c.to_string()),
            Some("2013-01-03T00:00:00.5Z".into())
        );
        s.put_pending(&PendingChange {
            source: "cap".into(),
            uri: "http://h/z".into(),
            change: Some(Change::Updated),
            duplicates: vec![(1, "http://m/z".into())],
            error: "HTTP 500".into(),
            ..PendingChange::default()
        })
        .expect("pending");
        let p = s.pending_page("cap", None, 10).expect("pending");
        assert_eq!(p[0].duplicates, [(1, "http://m/z".to_owned())]);
        s.remove_pending("cap", "http://h/z").expect("rm");
        assert!(s.pending_page("cap", None, 10).expect("p").is_empty());
    }

    #[test]
    fn pages_seek_in_the_index_and_miss_no_row() {
        let d = tempfile::tempdir().expect("tmp");
        let s = SqliteState::open(&d.path().join("state.sqlite")).expect("open");
        // "" sorts first: the first page must still include it.
        let uris = ["", "http://h/a", "http://h/b", "http://h/c", "http://h/d"];
        for u in uris {
            s.put_resource(&ResourceRecord {
                uri: u.into(),
                source: "cap".into(),
                path: format!("p{}", u.len()),
                ..ResourceRecord::default()
            })
            .expect("put");
            s.put_pending(&PendingChange {
                source: "cap".into(),
                uri: u.into(),
                ..PendingChange::default()
            })
            .expect("pending");
        }
        let (mut seen, mut pending) = (Vec::new(), Vec::new());
        let mut after: Option<String> = None;
        loop {
            let page = s.resources_page("cap", after.as_deref(), 2).expect("page");
            let Some(last) = page.last() else { break };
            after = Some(last.uri.clone());
            seen.extend(page.into_iter().map(|r| r.uri));
        }
        let mut after: Option<String> = None;
        loop {
            let page = s.pending_page("cap", after.as_deref(), 2).expect("page");
            let Some(last) = page.last() else { break };
            after = Some(last.uri.clone());
            pending.extend(page.into_iter().map(|r| r.uri));
        }
        assert_eq!(seen, uris);
        assert_eq!(pending, uris);
        // A page after a URI seeks to it (a range on the index), not a scan from the start.
        let c = s.lock();
        for sql in [resources_page_sql(false), pending_page_sql(false)] {
            let plan: Vec<String> = c
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("plan")
                .query_map(params!["cap", "http://h/b", 2], |r| r.get::<_, String>(3))
                .expect("rows")
                .collect::<rusqlite::Result<_>>()
                .expect("plan rows");
            assert!(plan.iter().any(|p| p.contains("uri>?")), "{sql}: {plan:?}");
        }
    }

    #[test]
    fn a_second_writer_is_refused() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("state.sqlite");
        let _a = SqliteState::open(&p).expect("open");
        let b = SqliteState::open(&p);
        assert!(matches!(b, Err(Error::Locked { .. })), "{b:?}");
    }

    #[test]
    fn read_only_opens_read_what_a_sync_wrote_and_write_nothing() {
        let d = tempfile::tempdir().expect("tmp");
        // A name SQLite URIs must escape.
        let p = d.path().join("st?ate #1%.sqlite");
        assert!(SqliteState::open_read_only(&p).expect("none").is_none());
        {
            let w = SqliteState::open(&p).expect("open");
            w.put_resource(&ResourceRecord {
                uri: "http://h/a".into(),
                path: "a".into(),
                length: Some(1),
                ..ResourceRecord::default()
            })
            .expect("put");
        }
        let r = SqliteState::open_read_only(&p)
            .expect("read-only")
            .expect("exists");
        assert_eq!(
            r.resource("http://h/a").expect("read").map(|x| x.path),
            Some("a".to_owned())
        );
        // Every write fails.
        assert!(r.remove_resource("http://h/a").is_err());
        drop(r);
        let w = SqliteState::open(&p).expect("a sync opens it once the reader has gone");
        // A reader is refused while a sync holds it.
        let r = SqliteState::open_read_only(&p);
        assert!(matches!(r, Err(Error::Locked { .. })), "{r:?}");
        drop(w);
    }
}
