//! The work queue of a [`PgState`]: items queued in pages (one statement per page, not per
//! item), claimed with `FOR UPDATE SKIP LOCKED`, counted per Source; and which of several
//! schemas have items waiting for a claimer ([`PgState::schemas_with_work`]), in one query, so
//! that a worker watching many Sources' queues holds one connection, not one per Source.

use std::time::Duration;

use postgres::types::Type;

use super::sql::CLAIM;
use super::{PgState, check_schemas, ttl_ms};
use crate::error::Result;
use crate::state::{Claim, WorkItem, from_millis};

/// Items inserted by one statement.
const PAGE: usize = 1000;

/// Schemas asked about by one query of [`PgState::schemas_with_work`].
const SCHEMAS_PER_QUERY: usize = 200;

/// Inserts a page of items (arrays unnested in order, so that `seq` follows it); an item whose
/// key is queued already is left as it is.
const ADD_PAGE: &str = "INSERT INTO work(key, source, payload) \
     SELECT k, s, p FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(k, s, p, o) \
     ORDER BY o ON CONFLICT (key) DO NOTHING";

impl PgState {
    /// Those of `schemas` that hold a table `table` (a schema not made yet, or made by an
    /// earlier version, has none), asked on `client`.
    pub(super) fn schemas_having(
        &self,
        client: &mut impl postgres::GenericClient,
        table: &str,
        schemas: &[String],
    ) -> Result<Vec<String>> {
        let names: Vec<&str> = schemas.iter().map(String::as_str).collect();
        // Typed, unprepared: one round trip (a prepared one would be two, each look).
        client
            .query_typed(
                "SELECT table_schema::text FROM information_schema.tables \
                 WHERE table_name = $1 AND table_schema = ANY($2)",
                &[(&table, Type::TEXT), (&names, Type::TEXT_ARRAY)],
            )
            .map_err(|e| self.err(e))?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    /// See [`crate::WorkQueue::add_work`]: one transaction, a statement per [`PAGE`] items.
    pub(super) fn queue_work(&self, items: &[WorkItem]) -> Result<usize> {
        if items.is_empty() {
            return Ok(0);
        }
        self.in_tx(|tx| {
            let mut n = 0;
            for page in items.chunks(PAGE) {
                let keys: Vec<&str> = page.iter().map(|i| i.key.as_str()).collect();
                let sources: Vec<&str> = page.iter().map(|i| i.source.as_str()).collect();
                let payloads: Vec<&str> = page.iter().map(|i| i.payload.as_str()).collect();
                n += tx.execute(ADD_PAGE, &[&keys, &sources, &payloads])?;
            }
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    /// See [`crate::WorkQueue::claim_work`].
    pub(super) fn claim_rows(&self, worker: &str, n: usize, ttl: Duration) -> Result<Vec<Claim>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let rows = self.query(CLAIM, &[&worker, &n, &ttl_ms(ttl)])?;
        let mut out = rows
            .iter()
            .map(|r| {
                let seq: i64 = r.try_get(6)?;
                let claim = Claim {
                    item: WorkItem {
                        key: r.try_get(0)?,
                        source: r.try_get(1)?,
                        payload: r.try_get(2)?,
                    },
                    holder: worker.to_owned(),
                    token: u64::try_from(r.try_get::<_, i64>(3)?).unwrap_or(0),
                    expires: from_millis(r.try_get(4)?),
                    attempts: u32::try_from(r.try_get::<_, i32>(5)?).unwrap_or(0),
                };
                Ok((seq, claim))
            })
            .collect::<std::result::Result<Vec<_>, postgres::Error>>()
            .map_err(|e| self.err(e))?;
        // UPDATE … RETURNING says nothing of its order: in the order queued.
        out.sort_by_key(|(seq, _)| *seq);
        Ok(out.into_iter().map(|(_, c)| c).collect())
    }

    /// See [`crate::WorkQueue::work_left`].
    pub(super) fn count_work(&self, source: &str) -> Result<u64> {
        let rows = self.query("SELECT COUNT(*) FROM work WHERE source = $1", &[&source])?;
        let n: i64 = match rows.first() {
            Some(r) => r.try_get(0).map_err(|e| self.err(e))?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Which of `schemas` (states in the same database, such as an aggregator's one per
    /// Source) hold work items that a worker may claim now (unclaimed, or whose claim
    /// expired), in the order given; schemas that do not exist (yet) are not. Asked on this
    /// state's connection, a query per 200 schemas.
    pub fn schemas_with_work(&self, schemas: &[String]) -> Result<Vec<String>> {
        check_schemas(schemas)?;
        let mut out = Vec::new();
        let mut p = self.conn()?;
        let client = &mut p.get().client;
        for group in schemas.chunks(SCHEMAS_PER_QUERY) {
            let existing = self.schemas_having(client, "work", group)?;
            if existing.is_empty() {
                continue;
            }
            // Names checked by `valid_schema` above: plain identifiers, quoted.
            let sql = existing
                .iter()
                .map(|s| {
                    format!(
                        "SELECT '{s}'::text WHERE EXISTS (SELECT 1 FROM \"{s}\".work \
                         WHERE holder IS NULL OR expires <= now())"
                    )
                })
                .collect::<Vec<_>>()
                .join(" UNION ALL ");
            let with: Vec<String> = client
                .query_typed(&sql, &[])
                .map_err(|e| self.err(e))?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| self.err(e))?;
            out.extend(group.iter().filter(|s| with.contains(s)).cloned());
        }
        Ok(out)
    }
}
