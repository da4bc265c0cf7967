//! The workers watching a Source's queue (migration 6's `workers` table, one per Source's
//! schema): each worker sharing a PostgreSQL state renews a row per Source it watches (its
//! heartbeat, [`PgState::beat_workers`]) until a time to live from now; a coordinator asks
//! whether another is alive ([`PgState::other_workers`]) before it queues a page of fetches:
//! alone, it fetches them itself, as sharing costs PostgreSQL work that only another worker
//! can repay. A row per Source rather than one for the whole database: a worker helps only
//! with the Sources of its configuration.

use std::time::Duration;

use postgres::types::Type;

use super::{PgState, check_schemas, ttl_ms};
use crate::error::Result;

/// Schemas renewed by one statement of [`PgState::beat_workers`].
const SCHEMAS_PER_STATEMENT: usize = 200;

impl PgState {
    /// Renews `worker`'s row in the `workers` table of each of `schemas` that has one (a
    /// schema not made yet, or of an earlier version, is passed over), until `ttl` from now:
    /// one statement per 200 schemas, one transaction. With `ttl` zero, the rows are removed
    /// (a worker stopping: the others see it gone at once).
    pub fn beat_workers(&self, schemas: &[String], worker: &str, ttl: Duration) -> Result<()> {
        check_schemas(schemas)?;
        let ms = ttl_ms(ttl);
        let mut p = self.conn()?;
        let client = &mut p.get().client;
        let mut tx = client.transaction().map_err(|e| self.err(e))?;
        for group in schemas.chunks(SCHEMAS_PER_STATEMENT) {
            let existing = self.schemas_having(&mut tx, "workers", group)?;
            if existing.is_empty() {
                continue;
            }
            // Names checked by `valid_schema` above: plain identifiers, quoted. One statement
            // (data-modifying CTEs), the worker and the time to live as parameters.
            let sql = existing
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if ms == 0 {
                        format!("w{i} AS (DELETE FROM \"{s}\".workers WHERE name = $1)")
                    } else {
                        format!(
                            "w{i} AS (INSERT INTO \"{s}\".workers(name, expires) \
                             VALUES($1, now() + $2::BIGINT * interval '1 millisecond') \
                             ON CONFLICT (name) DO UPDATE SET expires = EXCLUDED.expires)"
                        )
                    }
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("WITH {sql} SELECT 1");
            // Typed, unprepared: one round trip rather than a prepare and an execute.
            if ms == 0 {
                tx.query_typed(&sql, &[(&worker, Type::TEXT)])
                    .map_err(|e| self.err(e))?;
            } else {
                tx.query_typed(&sql, &[(&worker, Type::TEXT), (&ms, Type::INT8)])
                    .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// How many workers other than `worker` watch this schema's queue, their heartbeat
    /// unexpired ([`PgState::beat_workers`]).
    pub fn other_workers(&self, worker: &str) -> Result<u64> {
        let rows = self.query(
            "SELECT COUNT(*) FROM workers WHERE name <> $1 AND expires > now()",
            &[&worker],
        )?;
        let n: i64 = match rows.first() {
            Some(r) => r.try_get(0).map_err(|e| self.err(e))?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// How many workers other than `worker` watch this schema's queue (as
    /// [`PgState::other_workers`]), and how many items of the Source `source` wait for a
    /// claim (never claimed, or their claim expired; those claimed are in a worker's hands,
    /// unlike [`crate::WorkQueue::work_left`]): one statement, what a coordinator asks before
    /// each page of its fetches. Asked with no other worker alive, it tells the workers
    /// listening on the queues' channel that one is wanted ([`WORKER_WANTED`]).
    pub fn others_and_left(&self, worker: &str, source: &str) -> Result<(u64, u64)> {
        // With no other worker's heartbeat here, the workers listening are told
        // (`SCHEMA wanted`, see [`WORKER_WANTED`]): a schema made after a worker's last heartbeat has
        // none of it until its next, a third of a lease later.
        let rows = self.query(
            "WITH o AS (SELECT COUNT(*) AS n FROM workers WHERE name <> $1 AND expires > now()) \
             SELECT o.n, (SELECT COUNT(*) FROM work WHERE source = $2 \
             AND (holder IS NULL OR expires <= now())), \
             CASE WHEN o.n = 0 THEN (SELECT 1 FROM pg_notify('resourcesync_work', \
             current_schema() || ' wanted')) ELSE 0 END FROM o",
            &[&worker, &source],
        )?;
        let Some(r) = rows.first() else {
            return Ok((0, 0));
        };
        let (others, left): (i64, i64) = (
            r.try_get(0).map_err(|e| self.err(e))?,
            r.try_get(1).map_err(|e| self.err(e))?,
        );
        Ok((
            u64::try_from(others).unwrap_or(0),
            u64::try_from(left).unwrap_or(0),
        ))
    }

    /// When a run of this schema's Source last completed, by any worker (the latest
    /// `synced_at` of its rows in `sources`): what a worker asks after taking the Source's
    /// lease, so that a Source one worker has just synced is not synced again by the next
    /// (`resourcesync-aggregate`'s schedule is the workers', not each worker's).
    pub fn last_synced(&self) -> Result<Option<resourcesync_model::W3cDateTime>> {
        let rows = self.query(
            "SELECT synced_at FROM sources WHERE synced_at IS NOT NULL",
            &[],
        )?;
        let mut last: Option<resourcesync_model::W3cDateTime> = None;
        for r in &rows {
            let t: String = r.try_get(0).map_err(|e| self.err(e))?;
            if let Ok(t) = resourcesync_model::W3cDateTime::parse(&t)
                && last.as_ref().is_none_or(|l| t.timestamp() > l.timestamp())
            {
                last = Some(t);
            }
        }
        Ok(last)
    }
}

/// What a coordinator alone says on the queues' channel (`SCHEMA wanted`): the workers that
/// watch the schema renew their heartbeat in it now, rather than at their next round.
pub const WORKER_WANTED: &str = "wanted";
