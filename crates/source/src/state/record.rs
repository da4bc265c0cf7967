//! Recording one scan: resource rows, change events (with the rotation of Change List
//! periods) and the snapshot, in one transaction (a crash leaves the previous state or the
//! new one).

use super::*;
/// Records one scan: resource rows, change events and the snapshot, committed together.
#[derive(Debug)]
pub struct Recorder<'a> {
    pub(super) tx: Transaction<'a>,
    /// The connection, to restore `synchronous=NORMAL` after the commit.
    pub(super) conn: &'a Connection,
    /// Where the commit leaves its checkpoint (see [`Recorder::commit`]).
    pub(super) checkpoint: &'a std::cell::RefCell<Option<std::thread::JoinHandle<()>>>,
    /// The connection's count of rows changed when the transaction began.
    pub(super) changes_before: u64,
    pub(super) path: PathBuf,
    /// The newest change time recorded, loaded once per transaction (recording a change must
    /// not scan the change log: that made a first publish quadratic).
    pub(super) last_us: std::cell::Cell<Option<Option<i64>>>,
    /// The open period (id, count, opened), cached for the same reason.
    pub(super) open: std::cell::Cell<Option<(i64, i64, i64)>>,
    /// Changes recorded in the open period whose count is not written yet (written once when
    /// the period closes or the transaction commits, not once per change).
    pub(super) uncounted: std::cell::Cell<i64>,
    /// Text buffers for a row's modification time and `lastmod` (reused: no allocation per
    /// row).
    pub(super) scratch: std::cell::RefCell<(String, String)>,
}

/// When to close the open Change List and start a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Most changes in one Change List.
    pub max_entries: u64,
    /// Longest period of one Change List, in seconds.
    pub max_age_secs: i64,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_entries: 10_000,
            max_age_secs: 86_400,
        }
    }
}

impl Recorder<'_> {
    pub(super) fn err(&self, cause: rusqlite::Error) -> Error {
        Error::State {
            path: self.path.clone(),
            cause,
        }
    }

    /// Inserts or replaces a resource row.
    pub fn put(&self, r: &Resource) -> Result<()> {
        use std::fmt::Write as _;
        let mut scratch = self.scratch.borrow_mut();
        let (mtime, lastmod) = &mut *scratch;
        mtime.clear();
        let _ = write!(mtime, "{}", r.mtime_ns);
        lastmod.clear();
        let _ = write!(lastmod, "{}", r.lastmod);
        self.tx
            .prepare_cached(
                "INSERT INTO resources(path, uri, length, mtime_ns, lastmod, type, md5, sha1, sha256, via)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 ON CONFLICT(path) DO UPDATE SET uri=excluded.uri, length=excluded.length,
                   mtime_ns=excluded.mtime_ns, lastmod=excluded.lastmod, type=excluded.type,
                   md5=excluded.md5, sha1=excluded.sha1, sha256=excluded.sha256, via=excluded.via",
            )
            .map_err(|e| self.err(e))?
            .execute(params![
                    r.path,
                    r.uri,
                    r.length as i64,
                    mtime.as_str(),
                    lastmod.as_str(),
                    r.mime_type,
                    digest_ref(&r.hashes, HashAlg::Md5),
                    digest_ref(&r.hashes, HashAlg::Sha1),
                    digest_ref(&r.hashes, HashAlg::Sha256),
                    r.via.as_deref().map(via_text),
            ])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// Writes the count of changes recorded in the open period since the last write.
    fn flush_count(&self) -> Result<()> {
        let n = self.uncounted.replace(0);
        if let (true, Some((id, ..))) = (n > 0, self.open.get()) {
            self.tx
                .prepare_cached("UPDATE periods SET count=count+?1 WHERE id=?2")
                .map_err(|e| self.err(e))?
                .execute([n, id])
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Removes a resource row.
    pub fn remove(&self, path: &[u8]) -> Result<()> {
        self.tx
            .prepare_cached("DELETE FROM resources WHERE path=?1")
            .map_err(|e| self.err(e))?
            .execute([path])
            .map(|_| ())
            .map_err(|e| self.err(e))
    }

    /// The open period, rotated first if it is full or too old at `now`; created when none is
    /// open.
    fn open_period(&self, now: Timestamp, rotation: Rotation) -> Result<i64> {
        let open: Option<(i64, i64, i64)> = match self.open.get() {
            Some(o) => Some(o),
            None => self
                .tx
                .query_row(
                    "SELECT id, count, opened_us FROM periods WHERE until_dt IS NULL ORDER BY id DESC LIMIT 1",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(|e| self.err(e))?,
        };
        let now_dt = W3cDateTime::from_timestamp(now).to_string();
        if let Some((id, count, opened_us)) = open {
            let age = (now.as_microsecond() - opened_us) / 1_000_000;
            if (count as u64) < rotation.max_entries && age < rotation.max_age_secs {
                self.open.set(Some((id, count, opened_us)));
                return Ok(id);
            }
            self.flush_count()?;
            // Close at the last change recorded in it (or now, for an empty one): the next
            // period starts there, so periods are consecutive.
            let last: Option<String> = self
                .tx
                .query_row(
                    "SELECT datetime FROM changes WHERE period=?1 ORDER BY seq DESC LIMIT 1",
                    [id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| self.err(e))?;
            let until = last.unwrap_or_else(|| now_dt.clone());
            self.tx
                .execute(
                    "UPDATE periods SET until_dt=?1 WHERE id=?2",
                    params![until, id],
                )
                .map_err(|e| self.err(e))?;
            self.tx
                .execute(
                    "INSERT INTO periods(from_dt, count, opened_us) VALUES(?1, 0, ?2)",
                    params![until, now.as_microsecond()],
                )
                .map_err(|e| self.err(e))?;
        } else {
            // The first period starts at the first snapshot (or now).
            let from: Option<String> = self
                .tx
                .query_row("SELECT at FROM snapshots ORDER BY id LIMIT 1", [], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| self.err(e))?;
            self.tx
                .execute(
                    "INSERT INTO periods(from_dt, count, opened_us) VALUES(?1, 0, ?2)",
                    params![from.unwrap_or(now_dt), now.as_microsecond()],
                )
                .map_err(|e| self.err(e))?;
        }
        let id = self.tx.last_insert_rowid();
        self.open.set(Some((id, 0, now.as_microsecond())));
        Ok(id)
    }

    /// Makes sure a period is open (so that an empty Change List can be published from the
    /// first snapshot on), rotating it when due.
    pub fn ensure_period(&self, now: Timestamp, rotation: Rotation) -> Result<i64> {
        self.open_period(now, rotation)
    }

    /// Records a change at `datetime` (strictly after every change recorded before, so that
    /// URI+datetime is unique and Change Lists stay in forward chronological order). Returns
    /// the datetime actually used.
    pub fn record_change(
        &self,
        change: Change,
        r: &Resource,
        datetime: Timestamp,
        rotation: Rotation,
    ) -> Result<Timestamp> {
        let last_us: Option<i64> = match self.last_us.get() {
            Some(v) => v,
            None => self
                .tx
                .query_row("SELECT max(datetime_us) FROM changes", [], |row| row.get(0))
                .map_err(|e| self.err(e))?,
        };
        let mut us = datetime.as_microsecond();
        if let Some(l) = last_us {
            if us <= l {
                us = l + 1;
            }
        }
        let ts = Timestamp::from_microsecond(us).unwrap_or(datetime);
        let period = self.open_period(ts, rotation)?;
        let deleted = change == Change::Deleted;
        self.tx
            .prepare_cached(
                "INSERT INTO changes(uri, change, datetime, datetime_us, lastmod, length, type, md5, sha1, sha256, period, via)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .map_err(|e| self.err(e))?
            .execute(params![
                    r.uri,
                    change.as_str(),
                    W3cDateTime::from_timestamp(ts).to_string(),
                    us,
                    (!deleted).then(|| r.lastmod.to_string()),
                    (!deleted).then_some(r.length as i64),
                    r.mime_type.as_deref().filter(|_| !deleted),
                    digest_of(&r.hashes, HashAlg::Md5).filter(|_| !deleted),
                    digest_of(&r.hashes, HashAlg::Sha1).filter(|_| !deleted),
                    digest_of(&r.hashes, HashAlg::Sha256).filter(|_| !deleted),
                    period,
                    r.via.as_deref().filter(|_| !deleted).map(via_text),
            ])
            .map_err(|e| self.err(e))?;
        self.uncounted.set(self.uncounted.get() + 1);
        self.last_us.set(Some(Some(us)));
        if let Some((id, count, opened)) = self.open.get() {
            self.open.set(Some((id, count + 1, opened)));
        }
        Ok(ts)
    }

    /// Records a snapshot (a completed scan).
    pub fn snapshot(&self, at: &W3cDateTime, completed: &W3cDateTime, count: u64) -> Result<i64> {
        self.tx
            .execute(
                "INSERT INTO snapshots(at, completed, count) VALUES(?1, ?2, ?3)",
                params![at.to_string(), completed.to_string(), count as i64],
            )
            .map_err(|e| self.err(e))?;
        Ok(self.tx.last_insert_rowid())
    }

    /// Commits everything recorded (synced: see [`State::begin`]).
    ///
    /// The commit appends the transaction to the write-ahead log; after a large one (at least
    /// `BACKGROUND_CHECKPOINT_ROWS` rows changed), copying the log into the database (a
    /// checkpoint: a first scan of 100,000 files writes ~18 MB twice) is left to a thread with
    /// its own connection, so that the documents are published meanwhile. Until
    /// [`State::settle`] joins it, this connection does not checkpoint on its own (it would
    /// do the same copy, in the way). A crash meanwhile loses nothing: the log is the commit,
    /// and the next open replays it. Smaller commits (a re-publish, a change `serve` saw)
    /// checkpoint as usual.
    pub fn commit(self) -> Result<()> {
        self.flush_count()?;
        let path = self.path.clone();
        let conn = self.conn;
        if conn.total_changes().saturating_sub(self.changes_before) < BACKGROUND_CHECKPOINT_ROWS {
            self.tx
                .commit()
                .map_err(|cause| Error::State { path, cause })?;
            return conn
                .pragma_update(None, "synchronous", "NORMAL")
                .map_err(|cause| Error::State {
                    path: self.path.clone(),
                    cause,
                });
        }
        let err = |cause| Error::State {
            path: self.path.clone(),
            cause,
        };
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(err)?;
        if let Err(cause) = self.tx.commit() {
            // Rolled back: nothing for a thread to copy, and this connection checkpoints again.
            let _ = conn.pragma_update(None, "wal_autocheckpoint", 1000);
            return Err(Error::State { path, cause });
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(err)?;
        let db = self.path.clone();
        let started = std::thread::Builder::new()
            .name("resourcesync-checkpoint".into())
            .spawn(move || {
                // Best effort: what it does not copy, the next checkpoint does.
                if let Ok(c) = Connection::open(&db) {
                    let _ = c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            });
        match started {
            Ok(h) => *self.checkpoint.borrow_mut() = Some(h),
            // No thread: the checkpoint happens here.
            Err(_) => conn
                .pragma_update(None, "wal_autocheckpoint", 1000)
                .map_err(err)?,
        }
        Ok(())
    }
}
