//! [`SqliteState`]: the state in an SQLite database, its schema and its migrations.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Batch, KnownDocument, MAX_KNOWN_DOCUMENTS, PendingChange, Records, ResourceRecord,
    SourceCursor, VersionRecord, millis,
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
}

mod apply;
mod rows;
mod schema;
mod work;
use apply::{Failed, apply_op};
use rows::{RESOURCE_COLS, VERSION_COLS, row_to_pending, row_to_record, row_to_version};
pub(super) use rows::{decode_dups, encode_dups, opt_u64, parse_dt, to_i64};
use schema::migrate;
#[cfg(test)]
mod tests;
