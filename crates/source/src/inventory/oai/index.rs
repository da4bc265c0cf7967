//! The on-disk index of a harvested repository (SQLite, in the Source's working directory):
//! one row per record (path, identifier, datestamp, deleted, length, MD5, the metadata bytes),
//! the harvests made, and what the index was made for. The listing and the change feed read
//! it in path order, a page at a time; a harvest writes it in one transaction.
//!
//! Each row remembers the harvest that last changed it (`changed`) and the last that saw it
//! (`seen`, for deletions found by absence in a full harvest).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::error::{Error, Result};

/// Rows read per query of a listing.
pub(crate) const PAGE: usize = 512;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    path TEXT NOT NULL UNIQUE,      -- BINARY collation: the order of the path's bytes
    identifier TEXT NOT NULL,
    datestamp TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    deleted INTEGER NOT NULL,
    length INTEGER NOT NULL,
    md5 TEXT,
    body BLOB,
    changed INTEGER NOT NULL,
    seen INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_changed ON records (changed, path);
CREATE TABLE IF NOT EXISTS harvests (
    seq INTEGER PRIMARY KEY,
    response_date TEXT NOT NULL,
    full INTEGER NOT NULL
);
";

/// A row as the listing and the change feed give it.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) path: String,
    pub(crate) deleted: bool,
    pub(crate) length: u64,
    pub(crate) mtime_ns: i128,
    pub(crate) md5: Option<String>,
}

/// What a harvest found of one record, to be written.
#[derive(Debug)]
pub(crate) struct Incoming<'a> {
    pub(crate) path: &'a str,
    pub(crate) identifier: &'a str,
    pub(crate) datestamp: &'a str,
    pub(crate) mtime_ns: i64,
    /// The metadata document and its MD5 (hex), or `None` for a deleted record.
    pub(crate) body: Option<(&'a [u8], String)>,
}

/// The index: a connection that writes (harvests) and one that reads (listings, serving),
/// so that a harvest in progress does not hold up readers (WAL: they see the last commit).
#[derive(Debug)]
pub(crate) struct Index {
    path: PathBuf,
    write: Mutex<Connection>,
    read: Mutex<Connection>,
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Index {
    /// Opens (creating) the index at `path` for the repository `key` (URL, prefix, set): an
    /// index made for another key is emptied first.
    pub(crate) fn open(path: &Path, key: &str) -> Result<Self> {
        let err = |e: rusqlite::Error| Error::State {
            path: path.to_owned(),
            cause: e,
        };
        let write = Connection::open(path).map_err(err)?;
        write
            .execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
            .map_err(err)?;
        write
            .busy_timeout(std::time::Duration::from_secs(30))
            .map_err(err)?;
        write.execute_batch(SCHEMA).map_err(err)?;
        let old: Option<String> = write
            .query_row("SELECT value FROM meta WHERE key = 'key'", [], |r| r.get(0))
            .optional()
            .map_err(err)?;
        if old.as_deref() != Some(key) {
            if old.is_some() {
                tracing::info!(
                    "oai-pmh index {}: made for another repository or format; harvesting anew",
                    path.display()
                );
            }
            write
                .execute_batch("DELETE FROM records; DELETE FROM harvests; DELETE FROM meta;")
                .map_err(err)?;
            write
                .execute("INSERT INTO meta (key, value) VALUES ('key', ?1)", [key])
                .map_err(err)?;
        }
        let read = Connection::open(path).map_err(err)?;
        read.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(err)?;
        Ok(Index {
            path: path.to_owned(),
            write: Mutex::new(write),
            read: Mutex::new(read),
        })
    }

    pub(crate) fn err(&self, e: rusqlite::Error) -> Error {
        Error::State {
            path: self.path.clone(),
            cause: e,
        }
    }

    /// The writing connection, held for a harvest.
    pub(crate) fn writer(&self) -> MutexGuard<'_, Connection> {
        lock(&self.write)
    }

    /// The last harvest: its number and `responseDate`.
    pub(crate) fn last_harvest(&self) -> Result<Option<(i64, String)>> {
        lock(&self.read)
            .query_row(
                "SELECT seq, response_date FROM harvests ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The `responseDate` of harvest `seq`, if it is one of this index's.
    pub(crate) fn harvest_date(&self, seq: i64) -> Result<Option<String>> {
        lock(&self.read)
            .query_row(
                "SELECT response_date FROM harvests WHERE seq = ?1",
                [seq],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Up to [`PAGE`] rows after `after` in path order: present ones, or (with `changed_after`)
    /// those changed by a harvest after that one, deleted ones included.
    pub(crate) fn page(&self, after: Option<&str>, changed_after: Option<i64>) -> Result<Vec<Row>> {
        let c = lock(&self.read);
        let after = after.unwrap_or("");
        let map = |r: &rusqlite::Row<'_>| {
            Ok(Row {
                path: r.get(0)?,
                deleted: r.get::<_, i64>(1)? != 0,
                length: r.get::<_, i64>(2)?.max(0) as u64,
                mtime_ns: i128::from(r.get::<_, i64>(3)?),
                md5: r.get(4)?,
            })
        };
        let rows: rusqlite::Result<Vec<Row>> = match changed_after {
            None => c
                .prepare_cached(
                    "SELECT path, deleted, length, mtime_ns, md5 FROM records \
                     WHERE deleted = 0 AND path > ?1 ORDER BY path LIMIT ?2",
                )
                .and_then(|mut s| s.query_map(params![after, PAGE as i64], map)?.collect()),
            Some(seq) => c
                .prepare_cached(
                    "SELECT path, deleted, length, mtime_ns, md5 FROM records \
                     WHERE changed > ?3 AND path > ?1 ORDER BY path LIMIT ?2",
                )
                .and_then(|mut s| {
                    s.query_map(params![after, PAGE as i64, seq], map)?
                        .collect()
                }),
        };
        rows.map_err(|e| self.err(e))
    }

    /// A present record's bytes, length and time.
    pub(crate) fn body(&self, path: &str) -> Result<Option<(Vec<u8>, i128)>> {
        lock(&self.read)
            .query_row(
                "SELECT body, mtime_ns FROM records WHERE path = ?1 AND deleted = 0",
                [path],
                |r| Ok((r.get::<_, Vec<u8>>(0)?, i128::from(r.get::<_, i64>(1)?))),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// A present record's length and time.
    pub(crate) fn stat(&self, path: &str) -> Result<Option<(u64, i128)>> {
        lock(&self.read)
            .query_row(
                "SELECT length, mtime_ns FROM records WHERE path = ?1 AND deleted = 0",
                [path],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?.max(0) as u64,
                        i128::from(r.get::<_, i64>(1)?),
                    ))
                },
            )
            .optional()
            .map_err(|e| self.err(e))
    }
}

/// Records one harvested record in harvest `seq`: returns whether the index changed (a new
/// record, other bytes or datestamp, a deletion). A deleted record never seen is not kept.
pub(crate) fn upsert(tx: &Transaction<'_>, seq: i64, rec: &Incoming<'_>) -> rusqlite::Result<bool> {
    let old: Option<(String, bool, Option<String>)> = tx
        .prepare_cached("SELECT datestamp, deleted, md5 FROM records WHERE path = ?1")?
        .query_row([rec.path], |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get(2)?))
        })
        .optional()?;
    let same = match (&old, &rec.body) {
        (None, None) => return Ok(false),
        (Some((_, true, _)), None) => true,
        (Some((ds, false, md5)), Some((_, m))) => *ds == rec.datestamp && md5.as_ref() == Some(m),
        _ => false,
    };
    if same {
        tx.prepare_cached("UPDATE records SET seen = ?2 WHERE path = ?1")?
            .execute(params![rec.path, seq])?;
        return Ok(false);
    }
    let (body, md5, len, deleted): (Option<&[u8]>, Option<&str>, i64, i64) = match &rec.body {
        Some((b, m)) => (Some(b), Some(m.as_str()), b.len() as i64, 0),
        None => (None, None, 0, 1),
    };
    tx.prepare_cached(
        "INSERT INTO records (path, identifier, datestamp, mtime_ns, deleted, length, md5, body, \
         changed, seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) \
         ON CONFLICT (path) DO UPDATE SET identifier = ?2, datestamp = ?3, mtime_ns = ?4, \
         deleted = ?5, length = ?6, md5 = ?7, body = ?8, changed = ?9, seen = ?9",
    )?
    .execute(params![
        rec.path,
        rec.identifier,
        rec.datestamp,
        rec.mtime_ns,
        deleted,
        len,
        md5,
        body,
        seq
    ])?;
    Ok(true)
}

/// After a full harvest `seq`: every present record it did not see is deleted (found by
/// absence, for a repository that does not keep deleted records). Returns how many.
pub(crate) fn delete_unseen(tx: &Transaction<'_>, seq: i64) -> rusqlite::Result<usize> {
    tx.execute(
        "UPDATE records SET deleted = 1, body = NULL, length = 0, md5 = NULL, changed = ?1 \
         WHERE seen < ?1 AND deleted = 0",
        [seq],
    )
}

/// Records harvest `seq` as done, with the `responseDate` it started at.
pub(crate) fn finish(
    tx: &Transaction<'_>,
    seq: i64,
    response_date: &str,
    full: bool,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO harvests (seq, response_date, full) VALUES (?1, ?2, ?3)",
        params![seq, response_date, full],
    )?;
    Ok(())
}

/// The number the next harvest gets.
pub(crate) fn next_seq(tx: &Transaction<'_>) -> rusqlite::Result<i64> {
    tx.query_row("SELECT COALESCE(MAX(seq), 0) + 1 FROM harvests", [], |r| {
        r.get(0)
    })
}
