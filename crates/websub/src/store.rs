//! The hub's durable state in SQLite: subscriptions (topic, callback, secret, lease end) and the
//! queue of pending deliveries, so that both survive a restart (a payload accepted with 200/202
//! is delivered even if the hub is killed right after).
//!
//! A payload is stored once and referenced by one delivery row per subscription; it is removed
//! when its last delivery is done. Deliveries of one subscription are sent in the order they
//! were queued, one at a time (see [`crate::hub`]), which keeps a Source's notifications in order
//! (Change Notification 1.0.1 §3).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use crate::{Error, Result};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS subscriptions(
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    callback TEXT NOT NULL,
    secret BLOB,
    lease_end INTEGER NOT NULL,
    created INTEGER NOT NULL,
    UNIQUE(topic, callback)
);
CREATE TABLE IF NOT EXISTS payloads(
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS deliveries(
    id INTEGER PRIMARY KEY,
    sub_id INTEGER NOT NULL REFERENCES subscriptions(id) ON DELETE CASCADE,
    payload_id INTEGER NOT NULL REFERENCES payloads(id),
    attempts INTEGER NOT NULL DEFAULT 0,
    next_ms INTEGER NOT NULL,
    queued_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_sub ON deliveries(sub_id, id);
CREATE INDEX IF NOT EXISTS deliveries_payload ON deliveries(payload_id);
";

/// One subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRow {
    /// Row id.
    pub id: i64,
    /// The topic URL.
    pub topic: String,
    /// The callback URL.
    pub callback: String,
    /// The secret, when one was given (WebSub §5.1).
    pub secret: Option<Vec<u8>>,
    /// End of the lease, seconds since the epoch.
    pub lease_end: i64,
    /// Deliveries waiting.
    pub pending: u64,
}

/// A delivery due: the oldest pending one of its subscription.
#[derive(Debug, Clone)]
pub struct Due {
    /// Delivery row id.
    pub id: i64,
    /// The subscription.
    pub sub_id: i64,
    /// Its callback.
    pub callback: String,
    /// Its secret.
    pub secret: Option<Vec<u8>>,
    /// The topic (for `Link: rel=self`).
    pub topic: String,
    /// The payload's media type.
    pub content_type: String,
    /// The payload.
    pub body: Vec<u8>,
    /// Attempts made so far.
    pub attempts: u32,
    /// When it was queued (ms since the epoch).
    pub queued_ms: i64,
}

/// Bounds of the queue of pending deliveries ([`Store::enqueue`]).
#[derive(Debug, Clone, Copy)]
pub struct QueueLimits {
    /// Deliveries waiting per subscription; past it the subscription's oldest is dropped.
    pub max_pending: u64,
    /// Bytes of the payloads waiting, in all; past it the oldest payloads are dropped (a
    /// payload larger than this is refused).
    pub max_bytes: u64,
}

/// What [`Store::enqueue`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Enqueued {
    /// Deliveries queued (one per subscription of the topic whose lease has not ended).
    pub subscribers: u64,
    /// Deliveries dropped because their subscription had `max_pending` waiting.
    pub dropped: u64,
    /// Payloads dropped, oldest first, to keep the bytes waiting within `max_bytes`.
    pub dropped_payloads: u64,
    /// Deliveries those payloads still had waiting.
    pub dropped_for_bytes: u64,
}

/// The database.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl Store {
    /// Opens (creating) the database at `path`. It holds every subscriber's secret: it and its
    /// journals are owner-only (`0600`, missing directories `0700`; an existing one others may
    /// read is made so: [`resourcesync_fsmode::private_db`]).
    pub fn open(path: &Path) -> Result<Self> {
        resourcesync_fsmode::private_db(path).map_err(|e| {
            Error::Config(format!(
                "preparing the hub database {}: {e}",
                path.display()
            ))
        })?;
        let conn = Connection::open(path).map_err(|cause| Error::State {
            path: path.display().to_string(),
            cause,
        })?;
        Self::init(conn, path.to_owned())
    }

    /// A database in memory (nothing survives the process).
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory().map_err(|cause| Error::State {
            path: ":memory:".into(),
            cause,
        })?;
        Self::init(conn, PathBuf::from(":memory:"))
    }

    fn init(conn: Connection, path: PathBuf) -> Result<Self> {
        let s = Store {
            conn: Mutex::new(conn),
            path,
        };
        s.with(|c| {
            c.execute_batch(
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
            )?;
            c.execute_batch(SCHEMA)
        })?;
        Ok(s)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> Result<T> {
        let mut g = self
            .conn
            .lock()
            .map_err(|_| Error::Task("hub state lock poisoned".into()))?;
        f(&mut g).map_err(|cause| Error::State {
            path: self.path.display().to_string(),
            cause,
        })
    }

    /// Subscriptions of a topic (expired ones included until swept).
    pub fn count_for_topic(&self, topic: &str) -> Result<u64> {
        self.with(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM subscriptions WHERE topic=?1",
                [topic],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n as u64)
    }

    /// Every subscription.
    pub fn count(&self) -> Result<u64> {
        self.with(|c| {
            c.query_row("SELECT COUNT(*) FROM subscriptions", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map(|n| n as u64)
    }

    /// Whether (topic, callback) is subscribed.
    pub fn exists(&self, topic: &str, callback: &str) -> Result<bool> {
        self.with(|c| {
            c.query_row(
                "SELECT 1 FROM subscriptions WHERE topic=?1 AND callback=?2",
                [topic, callback],
                |_| Ok(()),
            )
            .optional()
        })
        .map(|o| o.is_some())
    }

    /// Creates or renews a subscription (WebSub §5.1: a new request overrides the previous state
    /// of the same topic and callback; its pending deliveries are kept).
    pub fn upsert(
        &self,
        topic: &str,
        callback: &str,
        secret: Option<&[u8]>,
        lease_end: i64,
        now: i64,
    ) -> Result<i64> {
        self.with(|c| {
            c.query_row(
                "INSERT INTO subscriptions(topic, callback, secret, lease_end, created) VALUES(?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(topic, callback) DO UPDATE SET secret=excluded.secret, lease_end=excluded.lease_end
                 RETURNING id",
                params![topic, callback, secret, lease_end, now],
                |r| r.get(0),
            )
        })
    }

    /// Removes a subscription and its pending deliveries. Whether there was one.
    pub fn remove(&self, topic: &str, callback: &str) -> Result<bool> {
        self.with(|c| {
            let tx = c.transaction()?;
            let n = tx.execute(
                "DELETE FROM subscriptions WHERE topic=?1 AND callback=?2",
                [topic, callback],
            )?;
            gc_payloads(&tx)?;
            tx.commit()?;
            Ok(n > 0)
        })
    }

    /// Removes a subscription by id.
    pub fn remove_id(&self, id: i64) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute("DELETE FROM subscriptions WHERE id=?1", [id])?;
            gc_payloads(&tx)?;
            tx.commit()
        })
    }

    /// Removes subscriptions whose lease ended at or before `now` (WebSub §5.3.1: hubs MUST
    /// enforce lease expirations). Returns (topic, callback) of each.
    pub fn expire(&self, now: i64) -> Result<Vec<(String, String)>> {
        self.with(|c| {
            let tx = c.transaction()?;
            let gone: Vec<(String, String)> = {
                let mut st = tx.prepare(
                    "DELETE FROM subscriptions WHERE lease_end<=?1 RETURNING topic, callback",
                )?;
                st.query_map([now], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<rusqlite::Result<_>>()?
            };
            if !gone.is_empty() {
                gc_payloads(&tx)?;
            }
            tx.commit()?;
            Ok(gone)
        })
    }

    /// Queues `body` for every subscription of `topic` whose lease has not ended. A subscription
    /// with `max_pending` deliveries waiting loses its oldest one (the subscriber has been failing
    /// for long; a ResourceSync Destination sees the gap in `from`/`until` and catches up from
    /// the Change List). When the payloads waiting would take more than `max_bytes`, the oldest
    /// are dropped with their deliveries (the subscribers that still wait for them are the
    /// failing or slow ones, and catch up the same way); a payload larger than `max_bytes` is
    /// refused ([`Error::Full`]).
    pub fn enqueue(
        &self,
        topic: &str,
        content_type: &str,
        body: &[u8],
        now_ms: i64,
        limits: QueueLimits,
    ) -> Result<Enqueued> {
        let QueueLimits {
            max_pending,
            max_bytes,
        } = limits;
        if body.len() as u64 > max_bytes {
            return Err(Error::Full(format!(
                "a payload of {} bytes is larger than the {max_bytes} bytes the hub keeps for \
                 pending deliveries",
                body.len()
            )));
        }
        self.with(|c| {
            let tx = c.transaction()?;
            let subs: Vec<i64> = {
                let mut st =
                    tx.prepare_cached("SELECT id FROM subscriptions WHERE topic=?1 AND lease_end>?2")?;
                st.query_map(params![topic, now_ms / 1000], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?
            };
            if subs.is_empty() {
                return Ok(Enqueued::default());
            }
            let mut out = Enqueued {
                subscribers: subs.len() as u64,
                ..Enqueued::default()
            };
            // The disk budget: the oldest payloads go first.
            let mut total: i64 = tx.query_row(
                "SELECT COALESCE(SUM(length(body)), 0) FROM payloads",
                [],
                |r| r.get(0),
            )?;
            while total.saturating_add(body.len() as i64) > max_bytes as i64 {
                let Some((pid, len)) = tx
                    .query_row(
                        "SELECT id, length(body) FROM payloads ORDER BY id LIMIT 1",
                        [],
                        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
                    )
                    .optional()?
                else {
                    break;
                };
                out.dropped_for_bytes +=
                    tx.execute("DELETE FROM deliveries WHERE payload_id=?1", [pid])? as u64;
                tx.execute("DELETE FROM payloads WHERE id=?1", [pid])?;
                out.dropped_payloads += 1;
                total -= len;
            }
            tx.execute(
                "INSERT INTO payloads(topic, content_type, body) VALUES(?1, ?2, ?3)",
                params![topic, content_type, body],
            )?;
            let pid = tx.last_insert_rowid();
            for s in &subs {
                let n: i64 = tx.query_row(
                    "SELECT COUNT(*) FROM deliveries WHERE sub_id=?1",
                    [s],
                    |r| r.get(0),
                )?;
                if n as u64 >= max_pending.max(1) {
                    out.dropped += tx.execute(
                        "DELETE FROM deliveries WHERE id=(SELECT MIN(id) FROM deliveries WHERE sub_id=?1)",
                        [s],
                    )? as u64;
                }
                tx.execute(
                    "INSERT INTO deliveries(sub_id, payload_id, next_ms, queued_ms) VALUES(?1, ?2, ?3, ?3)",
                    params![s, pid, now_ms],
                )?;
            }
            if out.dropped > 0 {
                gc_payloads(&tx)?;
            }
            tx.commit()?;
            Ok(out)
        })
    }

    /// The oldest pending delivery of each subscription whose lease has not ended, due at or
    /// before `now_ms`, in the order they fell due; of those, the first `limit` that `accept`
    /// takes (given the subscription id and its callback; it is not asked again once `limit` are
    /// taken). Payloads are read only for the deliveries taken.
    pub fn due(
        &self,
        now_ms: i64,
        limit: usize,
        mut accept: impl FnMut(i64, &str) -> bool,
    ) -> Result<Vec<Due>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.with(|c| {
            let mut taken = Vec::new();
            {
                let mut st = c.prepare_cached(
                    "SELECT d.id, d.sub_id, s.callback
                     FROM deliveries d JOIN subscriptions s ON s.id=d.sub_id
                     WHERE d.id IN (SELECT MIN(id) FROM deliveries GROUP BY sub_id)
                       AND d.next_ms<=?1 AND s.lease_end>?2
                     ORDER BY d.next_ms, d.id",
                )?;
                let mut rows = st.query(params![now_ms, now_ms / 1000])?;
                while let Some(r) = rows.next()? {
                    let (id, sub, cb): (i64, i64, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
                    if accept(sub, &cb) {
                        taken.push(id);
                        if taken.len() >= limit {
                            break;
                        }
                    }
                }
            }
            let mut st = c.prepare_cached(
                "SELECT d.id, d.sub_id, s.callback, s.secret, p.topic, p.content_type, p.body, d.attempts, d.queued_ms
                 FROM deliveries d JOIN subscriptions s ON s.id=d.sub_id JOIN payloads p ON p.id=d.payload_id
                 WHERE d.id=?1",
            )?;
            let mut out = Vec::with_capacity(taken.len());
            for id in taken {
                let d = st
                    .query_row([id], |r| {
                        Ok(Due {
                            id: r.get(0)?,
                            sub_id: r.get(1)?,
                            callback: r.get(2)?,
                            secret: r.get(3)?,
                            topic: r.get(4)?,
                            content_type: r.get(5)?,
                            body: r.get(6)?,
                            attempts: r.get::<_, i64>(7)?.clamp(0, u32::MAX as i64) as u32,
                            queued_ms: r.get(8)?,
                        })
                    })
                    .optional()?;
                out.extend(d);
            }
            Ok(out)
        })
    }

    /// When the next delivery is due: the oldest of a subscription that `accept` takes (given
    /// the subscription id and its callback).
    pub fn next_due(&self, mut accept: impl FnMut(i64, &str) -> bool) -> Result<Option<i64>> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT d.sub_id, s.callback, d.next_ms
                 FROM deliveries d JOIN subscriptions s ON s.id=d.sub_id
                 WHERE d.id IN (SELECT MIN(id) FROM deliveries GROUP BY sub_id)",
            )?;
            let mut rows = st.query([])?;
            let mut best: Option<i64> = None;
            while let Some(r) = rows.next()? {
                let (s, cb, t): (i64, String, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
                if accept(s, &cb) {
                    best = Some(best.map_or(t, |b| b.min(t)));
                }
            }
            Ok(best)
        })
    }

    /// A delivery succeeded.
    pub fn delivered(&self, id: i64) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            let pid: Option<i64> = tx
                .query_row(
                    "DELETE FROM deliveries WHERE id=?1 RETURNING payload_id",
                    [id],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(p) = pid {
                tx.execute(
                    "DELETE FROM payloads WHERE id=?1 AND NOT EXISTS (SELECT 1 FROM deliveries WHERE payload_id=?1)",
                    [p],
                )?;
            }
            tx.commit()
        })
    }

    /// A delivery failed: try again at `next_ms`.
    pub fn failed(&self, id: i64, next_ms: i64) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE deliveries SET attempts=attempts+1, next_ms=?2 WHERE id=?1",
                params![id, next_ms],
            )
            .map(|_| ())
        })
    }

    /// Every subscription with its pending deliveries.
    pub fn subscriptions(&self) -> Result<Vec<SubscriptionRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT s.id, s.topic, s.callback, s.secret, s.lease_end,
                        (SELECT COUNT(*) FROM deliveries d WHERE d.sub_id=s.id)
                 FROM subscriptions s ORDER BY s.topic, s.callback",
            )?;
            st.query_map([], |r| {
                Ok(SubscriptionRow {
                    id: r.get(0)?,
                    topic: r.get(1)?,
                    callback: r.get(2)?,
                    secret: r.get(3)?,
                    lease_end: r.get(4)?,
                    pending: r.get::<_, i64>(5)? as u64,
                })
            })?
            .collect()
        })
    }

    /// Bytes of the payloads waiting (bounded by [`QueueLimits::max_bytes`]).
    pub fn pending_bytes(&self) -> Result<u64> {
        self.with(|c| {
            c.query_row(
                "SELECT COALESCE(SUM(length(body)), 0) FROM payloads",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .map(|n| n.max(0) as u64)
    }

    /// Deliveries waiting, over all subscriptions.
    pub fn pending(&self) -> Result<u64> {
        self.with(|c| {
            c.query_row("SELECT COUNT(*) FROM deliveries", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .map(|n| n as u64)
    }
}

fn gc_payloads(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM payloads WHERE NOT EXISTS (SELECT 1 FROM deliveries WHERE payload_id=payloads.id)",
        [],
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_order_caps_and_cascade() {
        let s = Store::in_memory().unwrap();
        let a = s.upsert("t", "http://a/", Some(b"k"), 100, 0).unwrap();
        s.upsert("t", "http://b/", None, 100, 0).unwrap();
        assert_eq!(s.upsert("t", "http://a/", None, 200, 0).unwrap(), a);
        let limits = QueueLimits {
            max_pending: 2,
            max_bytes: 1 << 20,
        };
        for i in 0..3 {
            s.enqueue(
                "t",
                "application/xml",
                format!("p{i}").as_bytes(),
                1000,
                limits,
            )
            .unwrap();
        }
        // Capped at 2 per subscription: p0 dropped.
        let due = s.due(1000, 10, |_, _| true).unwrap();
        assert_eq!(due.len(), 2);
        assert!(due.iter().all(|d| d.body == b"p1"));
        s.delivered(due[0].id).unwrap();
        let busy = due[1].sub_id;
        let due2 = s.due(1000, 10, |sub, _| sub != busy).unwrap();
        assert_eq!(due2.len(), 1);
        assert_eq!(due2[0].body, b"p2");
        s.failed(due2[0].id, 5000).unwrap();
        assert_eq!(s.next_due(|sub, _| sub != busy).unwrap(), Some(5000));
        // Lease end (seconds) past: nothing due, then swept.
        assert!(s.due(300_000, 10, |_, _| true).unwrap().is_empty());
        assert_eq!(s.expire(300).unwrap().len(), 2);
        assert_eq!(s.pending().unwrap(), 0);
        assert_eq!(
            s.with(|c| c.query_row("SELECT COUNT(*) FROM payloads", [], |r| r.get::<_, i64>(0)))
                .unwrap(),
            0
        );
    }

    #[test]
    fn the_oldest_payloads_go_past_the_byte_budget() {
        let s = Store::in_memory().unwrap();
        s.upsert("t", "http://a/", None, i64::MAX / 2000, 0)
            .unwrap();
        let limits = QueueLimits {
            max_pending: 1000,
            max_bytes: 2500,
        };
        for i in 0..5u8 {
            let q = s
                .enqueue("t", "application/xml", &[i; 1000], 1000, limits)
                .unwrap();
            assert_eq!(q.dropped_payloads, u64::from(i.saturating_sub(1)).min(1));
        }
        assert_eq!(s.pending_bytes().unwrap(), 2000);
        let due = s.due(1000, 10, |_, _| true).unwrap();
        assert_eq!(due[0].body, vec![3u8; 1000], "the newest two are kept");
        assert!(matches!(
            s.enqueue("t", "application/xml", &[0; 2501], 1000, limits),
            Err(Error::Full(_))
        ));
    }
}
