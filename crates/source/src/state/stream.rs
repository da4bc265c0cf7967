//! What a scan reads and writes while it streams (see [`crate::scan::scan`]), inside its one
//! transaction: the previous snapshot a page at a time in path order, a row by path, and the
//! changes found, queued in the `scan_changes` table until the scan records them at its end
//! (their `datetime` is the scan's end) and emptied then, so that nothing about them is held
//! in memory and a crash leaves the table as it was (empty).

use super::*;

/// What the previous snapshot says of a path: enough to tell that a file is unchanged (an
/// owned [`Known`], as [`Recorder::known_page`] reads them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownRow {
    /// Path relative to the Source directory, as bytes.
    pub path: Vec<u8>,
    /// Length in bytes.
    pub length: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// The digests recorded, as a mask of [`alg_mask`] bits.
    pub algs: u8,
    /// The provenance link recorded, as the state keeps it ([`via_text`]).
    pub via: Option<String>,
}

impl Recorder<'_> {
    /// Appends to `out` up to `limit` rows of the snapshot whose paths come after `after`
    /// (from the first with `None`), in path order (the table's order: a range of its key).
    ///
    /// Read inside this transaction, a page sees the rows written in it; a scan writes only
    /// rows at or before the paths it has merged, so the rows after the last one it read are
    /// still the previous snapshot's.
    pub fn known_page(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        out: &mut Vec<KnownRow>,
    ) -> Result<()> {
        let sql = if after.is_some() {
            "SELECT path, length, mtime_ns,
               (md5 IS NOT NULL) + 2 * (sha1 IS NOT NULL) + 4 * (sha256 IS NOT NULL), via
             FROM resources WHERE path > ?1 ORDER BY path LIMIT ?2"
        } else {
            "SELECT path, length, mtime_ns,
               (md5 IS NOT NULL) + 2 * (sha1 IS NOT NULL) + 4 * (sha256 IS NOT NULL), via
             FROM resources ORDER BY path LIMIT ?1"
        };
        let mut stmt = self.tx.prepare_cached(sql).map_err(|e| self.err(e))?;
        let limit = limit as i64;
        let mut rows = match after {
            Some(a) => stmt.query(params![a, limit]),
            None => stmt.query(params![limit]),
        }
        .map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let k = (|| -> rusqlite::Result<KnownRow> {
                Ok(KnownRow {
                    path: row.get_ref(0)?.as_blob()?.to_vec(),
                    length: row.get::<_, i64>(1)? as u64,
                    mtime_ns: parse_mtime(row.get_ref(2)?.as_str()?),
                    algs: row.get::<_, i64>(3)? as u8,
                    via: row.get(4)?,
                })
            })()
            .map_err(|e| self.err(e))?;
            out.push(k);
        }
        Ok(())
    }

    /// What the snapshot says of one path (a change feed's scan looks each change up).
    pub fn known(&self, path: &[u8]) -> Result<Option<KnownRow>> {
        self.tx
            .prepare_cached(
                "SELECT length, mtime_ns,
                   (md5 IS NOT NULL) + 2 * (sha1 IS NOT NULL) + 4 * (sha256 IS NOT NULL), via
                 FROM resources WHERE path = ?1",
            )
            .map_err(|e| self.err(e))?
            .query_row([path], |row| {
                Ok(KnownRow {
                    path: path.to_vec(),
                    length: row.get::<_, i64>(0)? as u64,
                    mtime_ns: parse_mtime(row.get_ref(1)?.as_str()?),
                    algs: row.get::<_, i64>(2)? as u8,
                    via: row.get(3)?,
                })
            })
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The rows of the snapshot as written so far in this transaction: how many, and the sum
    /// of their lengths.
    pub fn totals(&self) -> Result<(u64, u64)> {
        self.tx
            .query_row(
                "SELECT count(*), coalesce(sum(length), 0) FROM resources",
                [],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64)),
            )
            .map_err(|e| self.err(e))
    }

    /// Stores a setting in this transaction (committed with the scan: a change feed's cursor
    /// is recorded with the changes it gave, never before them).
    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.tx
            .prepare_cached(
                "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            )
            .map_err(|e| self.err(e))?
            .execute(params![key, value])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Removes a setting in this transaction.
    pub fn remove_meta(&self, key: &str) -> Result<()> {
        self.tx
            .prepare_cached("DELETE FROM meta WHERE key = ?1")
            .map_err(|e| self.err(e))?
            .execute([key])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The row at a path, as this transaction sees it.
    pub fn resource_by_path(&self, path: &[u8]) -> Result<Option<Resource>> {
        super::query_resource_by_path(&self.tx, path).map_err(|e| self.err(e))
    }

    /// Queues a change found at `path` (created or updated: its row is written; deleted: its
    /// row is still there), to be recorded by [`Recorder::record_queued`].
    pub fn queue_change(&self, path: &[u8], change: &Change) -> Result<()> {
        self.tx
            .prepare_cached("INSERT INTO scan_changes(change, path) VALUES(?1, ?2)")
            .map_err(|e| self.err(e))?
            .execute(params![change.as_str(), path])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Empties the queue of changes (a scan starts; it is empty unless a scan failed and its
    /// transaction was not rolled back). Nothing is written when it is empty (a scan that
    /// finds nothing new commits no page, and syncs nothing).
    pub fn clear_queued(&self) -> Result<()> {
        let any: bool = self
            .tx
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM scan_changes)")
            .map_err(|e| self.err(e))?
            .query_row([], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        if !any {
            return Ok(());
        }
        self.tx
            .execute("DELETE FROM scan_changes", [])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Calls `f` with every queued change (its row and the change) in the order queued,
    /// creations and updates first, then deletions (a page at a time), and empties the queue.
    /// `f` may write (record the change, remove the row).
    pub fn record_queued(&self, mut f: impl FnMut(Resource, Change) -> Result<()>) -> Result<()> {
        const PAGE: i64 = 1024;
        let mut page: Vec<(i64, String, Vec<u8>)> = Vec::new();
        for deleted in [false, true] {
            let mut after = 0i64;
            loop {
                page.clear();
                {
                    let mut stmt = self
                        .tx
                        .prepare_cached(
                            "SELECT seq, change, path FROM scan_changes
                             WHERE (change='deleted')=?1 AND seq>?2 ORDER BY seq LIMIT ?3",
                        )
                        .map_err(|e| self.err(e))?;
                    let mut rows = stmt
                        .query(params![deleted, after, PAGE])
                        .map_err(|e| self.err(e))?;
                    while let Some(row) = rows.next().map_err(|e| self.err(e))? {
                        page.push((
                            row.get(0).map_err(|e| self.err(e))?,
                            row.get(1).map_err(|e| self.err(e))?,
                            row.get(2).map_err(|e| self.err(e))?,
                        ));
                    }
                }
                let Some(&(last, ..)) = page.last() else {
                    break;
                };
                after = last;
                for (_, change, path) in page.drain(..) {
                    if let Some(r) = self.resource_by_path(&path)? {
                        f(r, Change::parse(&change))?;
                    }
                }
            }
        }
        self.clear_queued()
    }
}
