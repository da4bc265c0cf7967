//! The leases on Sources and the work queue of a [`SqliteState`]: each lease and claim held
//! by one worker, with a token and an expiry, taken over once it has expired.

use std::time::{Duration, SystemTime};

use rusqlite::{OptionalExtension, params};

use super::SqliteState;
use super::rows::to_i64;
use crate::error::Result;
use crate::state::{Claim, Lease, Leases, WorkItem, WorkQueue, expiry, from_millis, millis};

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
