//! [`SqliteState`]: the state in an SQLite database, its schema and its migrations.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use resourcesync_model::{Change, HashAlg, Hashes, W3cDateTime};
use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Batch, Claim, KnownDocument, Lease, Leases, MAX_KNOWN_DOCUMENTS, PendingChange, Records,
    ResourceRecord, SourceCursor, VersionRecord, WorkItem, WorkQueue, expiry, from_millis, millis,
};
use crate::error::{Error, Result};
use crate::path::RelPath;

/// The state in an SQLite database (WAL, one writer at a time).
#[derive(Debug)]
pub struct SqliteState {
    conn: Mutex<Connection>,
    path: PathBuf,
    settled: super::settled::Settled,
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

/// The schema version this program writes.
const VERSION: i64 = 5;

/// The migrations, from version 1: `MIGRATIONS[i]` takes a database from version `i + 1` to
/// `i + 2`, in one transaction with the new version number.
const MIGRATIONS: &[&str] = &[
    // 2: leases on Sources and work items, for several workers.
    "CREATE TABLE leases(
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        token INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
    );
    CREATE TABLE work(
        key TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        source TEXT NOT NULL,
        payload TEXT NOT NULL,
        holder TEXT,
        token INTEGER NOT NULL DEFAULT 0,
        expires_ms INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX work_seq ON work(seq);",
    // 3: the documents discovery found, per start URL.
    "CREATE TABLE documents(
        start TEXT NOT NULL,
        role TEXT NOT NULL,
        url TEXT NOT NULL,
        etag TEXT,
        last_modified TEXT,
        PRIMARY KEY(start, role, url)
    );",
    // 4: when every copy was last checked; the rows kept after a delete, indexed apart.
    "ALTER TABLE sources ADD COLUMN checked_at TEXT;
    CREATE INDEX resources_gone ON resources(source, uri) WHERE gone <> 0;",
    // 5: the versions kept of each resource (`state/versions.rs`), and which name a body.
    "CREATE TABLE versions(
        source TEXT NOT NULL,
        uri TEXT NOT NULL,
        seq INTEGER NOT NULL,
        digest TEXT NOT NULL,
        length INTEGER NOT NULL,
        datetime TEXT,
        first_seen TEXT NOT NULL,
        until TEXT,
        deleted INTEGER NOT NULL DEFAULT 0,
        deleted_datetime TEXT,
        PRIMARY KEY(source, uri, seq)
    );
    CREATE INDEX versions_digest ON versions(digest);",
];

/// Creates the schema of version 1 where there is none, then migrates to [`VERSION`]. A
/// database of a newer version is refused, untouched.
pub(super) fn migrate(c: &mut Connection, path: &Path) -> Result<()> {
    let e = |e| sql(path, e);
    c.execute_batch(SCHEMA).map_err(e)?;
    let v: String = c
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
            r.get(0)
        })
        .map_err(e)?;
    let v: i64 = v.parse().map_err(|_| Error::Corrupt {
        path: path.to_owned(),
        message: format!("schema version {v:?} is not a number"),
    })?;
    if v > VERSION {
        return Err(Error::NewerSchema {
            target: path.display().to_string(),
            found: v,
            known: VERSION,
        });
    }
    if !(1..=VERSION).contains(&v) {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            message: format!("schema version {v}, this program knows 1 to {VERSION}"),
        });
    }
    for (from, step) in
        (v..VERSION).zip(MIGRATIONS.iter().skip(usize::try_from(v - 1).unwrap_or(0)))
    {
        let tx = c.transaction().map_err(e)?;
        tx.execute_batch(step).map_err(e)?;
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema'",
            [(from + 1).to_string()],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
    }
    Ok(())
}

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

/// As [`resources_page_sql`], for the rows kept after a delete (the partial index
/// `resources_gone`: its condition is the query's).
fn gone_page_sql(first: bool) -> String {
    let op = if first { ">=" } else { ">" };
    format!(
        "SELECT {RESOURCE_COLS} FROM resources \
         WHERE source = ?1 AND gone <> 0 AND uri {op} ?2 ORDER BY uri LIMIT ?3"
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

pub(super) fn opt_u64(v: Option<i64>) -> Option<u64> {
    v.and_then(|n| u64::try_from(n).ok())
}

pub(super) fn to_i64(v: Option<u64>) -> Option<i64> {
    v.and_then(|n| i64::try_from(n).ok())
}

pub(super) fn parse_dt(s: Option<String>) -> Option<W3cDateTime> {
    s.and_then(|s| W3cDateTime::parse(&s).ok())
}

pub(super) fn encode_dups(d: &[(u32, String)]) -> String {
    crate::state::encode_duplicates(d)
}

pub(super) fn decode_dups(s: Option<String>) -> Vec<(u32, String)> {
    crate::state::decode_duplicates(s.as_deref().unwrap_or_default())
}

fn digest_of(h: &Hashes, alg: HashAlg) -> Option<String> {
    h.value_of(&alg)
}

const RESOURCE_COLS: &str =
    "uri, source, path, length, md5, sha1, sha256, lastmod, etag, last_modified, gone";

/// Writes the row of `r`, replacing the row of its URI.
///
/// Most rows replace one of the same Source and path (a copy's placeholder, then its row; an
/// update): those are updated in place, which leaves the indexes on `uri`, `(source, uri)` and
/// `path` as they are. `INSERT OR REPLACE` deletes the old row and inserts a new one, writing
/// every index twice; it stays for the others (a new URI, a row moving to another Source or
/// path).
fn put_row(c: &Connection, r: &ResourceRecord) -> rusqlite::Result<()> {
    let (md5, sha1, sha256) = (
        digest_of(&r.hashes, HashAlg::Md5),
        digest_of(&r.hashes, HashAlg::Sha1),
        digest_of(&r.hashes, HashAlg::Sha256),
    );
    let lastmod = r.lastmod.map(|d| d.to_string());
    let p = params![
        r.uri,
        r.source,
        r.path,
        to_i64(r.length),
        md5,
        sha1,
        sha256,
        lastmod,
        r.etag,
        r.last_modified,
        i64::from(r.gone),
    ];
    let upsert = c.prepare_cached(
        "INSERT INTO resources(uri, source, path, length, md5, sha1, sha256, lastmod, etag, \
         last_modified, gone) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT(uri) DO UPDATE SET length = excluded.length, md5 = excluded.md5, \
         sha1 = excluded.sha1, sha256 = excluded.sha256, lastmod = excluded.lastmod, \
         etag = excluded.etag, last_modified = excluded.last_modified, gone = excluded.gone \
         WHERE source = excluded.source AND path = excluded.path",
    );
    if upsert?.execute(p)? == 1 {
        return Ok(());
    }
    // The URI's row is another Source's or another path's.
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO resources({RESOURCE_COLS}) \
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    ))?
    .execute(p)
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

/// The columns of a version, in the order [`row_to_version`] reads them.
const VERSION_COLS: &str = "source, uri, seq, digest, length, datetime, first_seen, until, \
     deleted, deleted_datetime";

fn row_to_version(row: &rusqlite::Row<'_>) -> rusqlite::Result<VersionRecord> {
    let first_seen: String = row.get(6)?;
    Ok(VersionRecord {
        source: row.get(0)?,
        uri: row.get(1)?,
        seq: opt_u64(row.get(2)?).unwrap_or(0),
        digest: row.get(3)?,
        length: opt_u64(row.get(4)?).unwrap_or(0),
        datetime: parse_dt(row.get(5)?),
        first_seen: W3cDateTime::parse(&first_seen).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, Box::new(e))
        })?,
        until: parse_dt(row.get(7)?),
        deleted: row.get::<_, i64>(8)? != 0,
        deleted_datetime: parse_dt(row.get(9)?),
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

/// Calls `open` until it gives something other than [`Error::Locked`] or `wait` has passed:
/// tried again after 25 ms, doubling to 250 ms.
fn retry_locked<T>(wait: std::time::Duration, mut open: impl FnMut() -> Result<T>) -> Result<T> {
    let end = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_millis(25);
    loop {
        match open() {
            Err(Error::Locked { .. }) if std::time::Instant::now() < end => {
                std::thread::sleep(pause.min(end - std::time::Instant::now()));
                pause = (pause * 2).min(std::time::Duration::from_millis(250));
            }
            r => return r,
        }
    }
}

impl SqliteState {
    /// Opens (creating) the state database for a sync, and holds it exclusively until dropped:
    /// a second process gets [`Error::Locked`]. The database and its journals are owner-only
    /// (`0600`, missing directories `0700`; an existing one others may read is made so:
    /// [`resourcesync_fsmode::private_db`]).
    pub fn open(path: &Path) -> Result<Self> {
        resourcesync_fsmode::private_db(path).map_err(|e| Error::io(path, e))?;
        let conn = Connection::open(path).map_err(|e| sql(path, e))?;
        let s = SqliteState {
            conn: Mutex::new(conn),
            path: path.to_owned(),
            settled: super::settled::Settled::default(),
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
        }
        migrate(&mut s.lock(), path)?;
        Ok(s)
    }

    /// [`SqliteState::open`], waiting up to `wait` while another holder in this process has
    /// it for a moment (a push round, and the aggregator's republish and count of the same
    /// Source's state, take turns): tried again after 25 ms, doubling to 250 ms. Blocks: call
    /// it where blocking is allowed (`crate::blocking`).
    pub fn open_waiting(path: &Path, wait: std::time::Duration) -> Result<Self> {
        retry_locked(wait, || SqliteState::open(path))
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
            settled: super::settled::Settled::default(),
        }))
    }

    /// [`SqliteState::open_read_only`], waiting up to `wait` while a holder in this process
    /// has the database (as [`SqliteState::open_waiting`] does). For counting what a state
    /// records beside the syncs that write it: a reader takes no lock past its read and never
    /// creates or migrates the database. Blocks.
    pub fn open_read_only_waiting(path: &Path, wait: std::time::Duration) -> Result<Option<Self>> {
        retry_locked(wait, || SqliteState::open_read_only(path))
    }

    /// An empty state in memory (dry runs without a state database).
    pub fn in_memory() -> Result<Self> {
        let path = PathBuf::from(":memory:");
        let mut conn = Connection::open_in_memory().map_err(|e| sql(&path, e))?;
        migrate(&mut conn, &path)?;
        Ok(SqliteState {
            conn: Mutex::new(conn),
            path,
            settled: super::settled::Settled::default(),
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

/// The URI owning a path (`?1`), the least in byte order (`Records::path_owner`): `min` over
/// the rows the index on `path` finds (NULL for none), with no sort (`ORDER BY uri LIMIT 1`
/// sorted them in a temporary b-tree, twice the time per lookup of a baseline's copies).
const PATH_OWNER: &str = "SELECT min(uri) FROM resources WHERE path = ?1";

impl Records for SqliteState {
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

    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        self.records_page(&resources_page_sql(after.is_none()), source, after, limit)
    }

    fn gone_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        self.records_page(&gone_page_sql(after.is_none()), source, after, limit)
    }

    fn has_path(&self, path: &RelPath) -> Result<bool> {
        let path = path.as_str();
        let c = self.lock();
        let mut st = c
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM resources WHERE path = ?1)")
            .map_err(|e| self.err(e))?;
        st.query_row([path], |r| r.get::<_, i64>(0))
            .map(|n| n != 0)
            .map_err(|e| self.err(e))
    }

    fn has_paths(&self, paths: &[&RelPath]) -> Result<Vec<bool>> {
        // One lock, one statement and one read transaction for the batch: on its own, each
        // statement would take and release the database's shared lock. The index on `path`
        // answers each without reading the row.
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let known = {
            let mut st = tx
                .prepare_cached("SELECT EXISTS(SELECT 1 FROM resources WHERE path = ?1)")
                .map_err(|e| self.err(e))?;
            paths
                .iter()
                .map(|p| {
                    st.query_row([p.as_str()], |r| r.get::<_, i64>(0))
                        .map(|n| n != 0)
                        .map_err(|e| self.err(e))
                })
                .collect::<Result<Vec<_>>>()?
        };
        // Nothing was written: ending it either way is the same.
        tx.rollback().map_err(|e| self.err(e))?;
        Ok(known)
    }

    fn path_owner(&self, path: &RelPath) -> Result<Option<String>> {
        let path = path.as_str();
        let c = self.lock();
        let mut st = c.prepare_cached(PATH_OWNER).map_err(|e| self.err(e))?;
        st.query_row([path], |r| r.get::<_, Option<String>>(0))
            .map_err(|e| self.err(e))
    }

    fn path_owners(&self, paths: &[&RelPath]) -> Result<Vec<Option<String>>> {
        let paths: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        // One lock, one statement and one read transaction for the batch: on its own, each
        // statement would take and release the database's shared lock.
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let owners = {
            let mut st = tx.prepare_cached(PATH_OWNER).map_err(|e| self.err(e))?;
            paths
                .iter()
                .map(|p| {
                    st.query_row([p], |r| r.get::<_, Option<String>>(0))
                        .map_err(|e| self.err(e))
                })
                .collect::<Result<Vec<_>>>()?
        };
        // Nothing was written: ending it either way is the same.
        tx.rollback().map_err(|e| self.err(e))?;
        Ok(owners)
    }

    fn count_resources(&self, source: &str) -> Result<u64> {
        let c = self.lock();
        let mut st = c
            .prepare_cached("SELECT count(*) FROM resources WHERE source = ?1")
            .map_err(|e| self.err(e))?;
        st.query_row([source], |r| r.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.err(e))
    }

    fn bytes_recorded(&self, source: &str) -> Result<u64> {
        let c = self.lock();
        let mut st = c
            .prepare_cached("SELECT coalesce(sum(length), 0) FROM resources WHERE source = ?1")
            .map_err(|e| self.err(e))?;
        st.query_row([source], |r| r.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(|e| self.err(e))
    }

    fn in_place(&self) -> bool {
        true
    }

    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        let c = self.lock();
        // A row value: SQLite seeks in the primary key (source, uri, seq) with it.
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {VERSION_COLS} FROM versions \
                 WHERE source = ?1 AND (uri, seq) > (?2, ?3) ORDER BY uri, seq LIMIT ?4"
            ))
            .map_err(|e| self.err(e))?;
        let (uri, seq) = after.unwrap_or(("", 0));
        let limit = limit.min(super::MAX_VERSIONS_PAGE);
        let rows = st
            .query_map(
                params![
                    source,
                    uri,
                    to_i64(Some(seq)).unwrap_or(i64::MAX),
                    i64::try_from(limit).unwrap_or(i64::MAX)
                ],
                row_to_version,
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn digest_referenced(&self, digest: &str) -> Result<bool> {
        let c = self.lock();
        let mut st = c
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM versions WHERE digest = ?1)")
            .map_err(|e| self.err(e))?;
        st.query_row([digest], |r| r.get::<_, i64>(0))
            .map(|n| n != 0)
            .map_err(|e| self.err(e))
    }

    fn recorded_totals(&self) -> Result<(u64, u64)> {
        let c = self.lock();
        let mut st = c
            .prepare_cached("SELECT count(*), coalesce(sum(length), 0) FROM resources")
            .map_err(|e| self.err(e))?;
        st.query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .map(|(n, b)| (u64::try_from(n).unwrap_or(0), u64::try_from(b).unwrap_or(0)))
            .map_err(|e| self.err(e))
    }

    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>> {
        self.lock()
            .query_row(
                "SELECT source, cursor, synced_at, checked_at FROM sources WHERE source = ?1",
                [source],
                |r| {
                    Ok(SourceCursor {
                        source: r.get(0)?,
                        cursor: parse_dt(r.get(1)?),
                        synced_at: parse_dt(r.get(2)?),
                        checked_at: parse_dt(r.get(3)?),
                    })
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn documents(&self, start: &str) -> Result<Vec<KnownDocument>> {
        let c = self.lock();
        let mut st = c
            .prepare_cached(
                "SELECT role, url, etag, last_modified FROM documents WHERE start = ?1 \
                 ORDER BY role, url LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map(
                params![
                    start,
                    i64::try_from(MAX_KNOWN_DOCUMENTS).unwrap_or(i64::MAX)
                ],
                |r| {
                    Ok(KnownDocument {
                        role: r.get(0)?,
                        url: r.get(1)?,
                        etag: r.get(2)?,
                        last_modified: r.get(3)?,
                    })
                },
            )
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
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

    fn apply(&self, batch: &Batch<'_>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let now = millis(SystemTime::now());
        for op in batch.ops() {
            // Dropped on an error: the transaction rolls back, nothing of the batch is written.
            apply_op(&tx, op, now).map_err(|e| match e {
                Failed::Sql(e) => self.err(e),
                Failed::Lost(e) => e,
            })?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        drop(c);
        if batch
            .ops()
            .iter()
            .any(|op| matches!(op, super::Op::CompleteWork(_)))
        {
            self.settled.bump();
        }
        Ok(())
    }
}

impl Leases for SqliteState {
    fn lease_source(&self, source: &str, worker: &str, ttl: Duration) -> Result<Option<Lease>> {
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let now = millis(SystemTime::now());
        let held: Option<(String, i64, i64)> = tx
            .query_row(
                "SELECT holder, token, expires_ms FROM leases WHERE name = ?1",
                [source],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let token = match held {
            // Renewed by its holder: same token.
            Some((h, t, exp)) if h == worker && exp > now => t,
            // Held by another worker.
            Some((_, _, exp)) if exp > now => return Ok(None),
            // Expired: taken over.
            Some((_, t, _)) => t.saturating_add(1),
            None => 1,
        };
        let expires = expiry(now, ttl);
        tx.execute(
            "INSERT OR REPLACE INTO leases(name, holder, token, expires_ms) VALUES(?1, ?2, ?3, ?4)",
            params![source, worker, token, expires],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(Lease {
            name: source.to_owned(),
            holder: worker.to_owned(),
            token: u64::try_from(token).unwrap_or(0),
            expires: from_millis(expires),
        }))
    }

    fn release_source(&self, lease: &Lease) -> Result<bool> {
        self.lock()
            // Kept, expired, so that the token goes on growing.
            .execute(
                "UPDATE leases SET expires_ms = 0 \
                 WHERE name = ?1 AND holder = ?2 AND token = ?3 AND expires_ms > 0",
                params![lease.name, lease.holder, to_i64(Some(lease.token))],
            )
            .map(|n| n > 0)
            .map_err(|e| self.err(e))
    }
}

impl WorkQueue for SqliteState {
    fn add_work(&self, items: &[WorkItem]) -> Result<usize> {
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let mut added = 0;
        {
            let mut st = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO work(key, seq, source, payload) \
                     VALUES(?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM work), ?2, ?3)",
                )
                .map_err(|e| self.err(e))?;
            for i in items {
                added += st
                    .execute(params![i.key, i.source, i.payload])
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(added)
    }

    fn claim_work(&self, worker: &str, n: usize, ttl: Duration) -> Result<Vec<Claim>> {
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let now = millis(SystemTime::now());
        let expires = expiry(now, ttl);
        // One connection under a lock: nothing else claims meanwhile (PostgreSQL would use
        // `FOR UPDATE SKIP LOCKED` here).
        let free: Vec<(String, String, String, i64, i64)> = {
            let mut st = tx
                .prepare_cached(
                    "SELECT key, source, payload, token, attempts FROM work \
                     WHERE holder IS NULL OR expires_ms <= ?1 ORDER BY seq LIMIT ?2",
                )
                .map_err(|e| self.err(e))?;
            st.query_map(params![now, i64::try_from(n).unwrap_or(i64::MAX)], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.err(e))?
        };
        let mut out = Vec::with_capacity(free.len());
        for (key, source, payload, token, attempts) in free {
            let (token, attempts) = (token.saturating_add(1), attempts.saturating_add(1));
            tx.execute(
                "UPDATE work SET holder = ?2, token = ?3, expires_ms = ?4, attempts = ?5 \
                 WHERE key = ?1",
                params![key, worker, token, expires, attempts],
            )
            .map_err(|e| self.err(e))?;
            out.push(Claim {
                item: WorkItem {
                    key,
                    source,
                    payload,
                },
                holder: worker.to_owned(),
                token: u64::try_from(token).unwrap_or(0),
                expires: from_millis(expires),
                attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            });
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(out)
    }

    fn complete(&self, claims: &[Claim]) -> Result<usize> {
        let n = self.settle(claims, "DELETE FROM work")?;
        if n > 0 {
            self.settled.bump();
        }
        Ok(n)
    }

    fn release(&self, claims: &[Claim]) -> Result<usize> {
        self.settle(claims, "UPDATE work SET holder = NULL, expires_ms = NULL")
    }

    fn renew_work(&self, claims: &[Claim], ttl: Duration) -> Result<Vec<Claim>> {
        // A statement per claim: a SQLite state is one worker's (the aggregator shares work
        // through PostgreSQL only).
        let expires = expiry(millis(SystemTime::now()), ttl);
        let set = format!("UPDATE work SET expires_ms = {expires}");
        let mut out = Vec::new();
        for c in claims {
            if self.settle(std::slice::from_ref(c), &set)? > 0 {
                let expires = from_millis(expires);
                out.push(Claim {
                    expires,
                    ..c.clone()
                });
            }
        }
        Ok(out)
    }

    fn work_left(&self, source: &str) -> Result<u64> {
        let c = self.lock();
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM work WHERE source = ?1",
                params![source],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// A SQLite state is held by one process ([`SqliteState::open`]): every completion is
    /// made through this value, and wakes the waiter.
    fn wait_drained(&self, source: &str, timeout: Duration) -> Result<bool> {
        self.settled
            .wait_drained(|| self.work_left(source), timeout)
    }
}

impl SqliteState {
    /// One page of a Source's rows by `sql` (`?1` Source, `?2` the URI after which, `?3` limit).
    fn records_page(
        &self,
        sql: &str,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let c = self.lock();
        let mut st = c.prepare_cached(sql).map_err(|e| self.err(e))?;
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

    /// Runs `what` (a DELETE or an UPDATE) on the items of the claims still held; how many.
    fn settle(&self, claims: &[Claim], what: &str) -> Result<usize> {
        let mut c = self.lock();
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let now = millis(SystemTime::now());
        let mut n = 0;
        {
            let mut st = tx
                .prepare_cached(&format!(
                    "{what} WHERE key = ?1 AND holder = ?2 AND token = ?3 AND expires_ms > ?4"
                ))
                .map_err(|e| self.err(e))?;
            for cl in claims {
                n += st
                    .execute(params![cl.item.key, cl.holder, to_i64(Some(cl.token)), now])
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(n)
    }
}

mod apply;
use apply::{Failed, apply_op};
#[cfg(test)]
mod tests;
