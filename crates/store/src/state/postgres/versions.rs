//! The versions of [`super::PgState`] (`state/versions.rs`): their statements, their writes
//! in a batch, one at a time, and their reads.

use postgres::Row;
use resourcesync_model::W3cDateTime;

use super::PgState;
use super::pool::Tx;
use crate::error::Result;
use crate::state::sqlite::{opt_u64, parse_dt, to_i64};
use crate::state::{MAX_VERSIONS_PAGE, VersionEnd, VersionRecord};

/// The columns of a version, in the order [`row_to_version`] reads them.
macro_rules! version_cols {
    () => {
        "source, uri, seq, digest, length, datetime, first_seen, until, deleted, \
         deleted_datetime"
    };
}

/// A page of a Source's versions after (`$2`, `$3`) in (URI, number) order: a row comparison,
/// which the primary key (source, uri, seq) seeks with.
const PAGE: &str = concat!(
    "SELECT ",
    version_cols!(),
    " FROM versions WHERE source = $1 AND (uri, seq) > ($2, $3) ORDER BY uri, seq LIMIT $4"
);

/// The last version of a resource, locked until the batch commits.
const LAST: &str = "SELECT seq, digest, until FROM versions WHERE source = $1 AND uri = $2 \
     ORDER BY seq DESC LIMIT 1 FOR UPDATE";

/// Ends one version (replaced).
const REPLACED: &str = "UPDATE versions SET until = $4 WHERE source = $1 AND uri = $2 AND seq = $3";

/// A new version.
const INSERT: &str = "INSERT INTO versions(source, uri, seq, digest, length, datetime, \
     first_seen) VALUES($1, $2, $3, $4, $5, $6, $7)";

/// Ends the current version of a resource the Source deleted.
const END: &str = "UPDATE versions SET until = $3, deleted = true, deleted_datetime = $4 \
     WHERE source = $1 AND uri = $2 AND until IS NULL";

/// Removes one version.
const REMOVE: &str = "DELETE FROM versions WHERE source = $1 AND uri = $2 AND seq = $3";

/// [`INSERT`] and [`REPLACED`] for many resources in one statement, one per element of the
/// arrays (each resource once): the last version of each (if any) is read, ended unless it has
/// the digest, and the new one inserted numbered one more, unless the current one has the
/// digest (as [`Tx::put_version`] does for one).
const PUT_ALL: &str = "WITH v AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], \
     $4::bigint[], $5::text[], $6::text[]) AS v(source, uri, digest, length, datetime, first_seen)), \
     last AS (SELECT v.*, l.seq, l.digest AS ldigest, l.until, \
         (l.seq IS NOT NULL AND l.until IS NULL AND l.digest = v.digest) AS same \
         FROM v LEFT JOIN LATERAL (SELECT x.seq, x.digest, x.until FROM versions x \
         WHERE x.source = v.source AND x.uri = v.uri ORDER BY x.seq DESC LIMIT 1) l ON true), \
     ended AS (UPDATE versions x SET until = last.first_seen FROM last \
         WHERE x.source = last.source AND x.uri = last.uri AND x.seq = last.seq \
         AND last.until IS NULL AND NOT last.same) \
     INSERT INTO versions(source, uri, seq, digest, length, datetime, first_seen) \
     SELECT source, uri, coalesce(seq, 0) + 1, digest, length, datetime, first_seen FROM last \
     WHERE NOT last.same";

/// Resources per [`PUT_ALL`] statement.
const CHUNK: usize = 1000;

/// Whether a row names a digest (the index `versions_digest`).
const REFERENCED: &str = "SELECT 1 FROM versions WHERE digest = $1 LIMIT 1";

impl PgState {
    fn row_to_version(&self, row: &Row) -> Result<VersionRecord> {
        self.version_of_row(row).map_err(|e| self.err(e))?
    }

    /// A version, or why its row is not one (`first_seen` not a W3C Datetime).
    fn version_of_row(
        &self,
        row: &Row,
    ) -> std::result::Result<Result<VersionRecord>, postgres::Error> {
        let first_seen: String = row.try_get(6)?;
        let first_seen = match W3cDateTime::parse(&first_seen) {
            Ok(t) => t,
            Err(e) => return Ok(Err(self.corrupt(format!("a version's first_seen: {e}")))),
        };
        Ok(Ok(VersionRecord {
            source: row.try_get(0)?,
            uri: row.try_get(1)?,
            seq: opt_u64(row.try_get(2)?).unwrap_or(0),
            digest: row.try_get(3)?,
            length: opt_u64(row.try_get(4)?).unwrap_or(0),
            datetime: parse_dt(row.try_get(5)?),
            first_seen,
            until: parse_dt(row.try_get(7)?),
            deleted: row.try_get(8)?,
            deleted_datetime: parse_dt(row.try_get(9)?),
        }))
    }

    /// [`crate::Records::versions_page`].
    pub(super) fn read_versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        let (uri, seq) = after.unwrap_or(("", 0));
        let seq = to_i64(Some(seq)).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit.min(MAX_VERSIONS_PAGE)).unwrap_or(i64::MAX);
        self.query(PAGE, &[&source, &uri, &seq, &limit])?
            .iter()
            .map(|r| self.row_to_version(r))
            .collect()
    }

    /// [`crate::Records::digest_referenced`].
    pub(super) fn read_digest_referenced(&self, digest: &str) -> Result<bool> {
        Ok(!self.query(REFERENCED, &[&digest])?.is_empty())
    }
}

impl Tx<'_, '_> {
    /// [`crate::Op::PutVersion`].
    pub(super) fn put_version(&mut self, v: &VersionRecord) -> Result<()> {
        let last = self.query(LAST, &[&v.source, &v.uri])?;
        let last: Option<(i64, String, Option<String>)> = match last.first() {
            Some(r) => Some(
                (|| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))()
                    .map_err(|e: postgres::Error| self.state.err(e))?,
            ),
            None => None,
        };
        let first_seen = v.first_seen.to_string();
        let seq = match last {
            Some((_, digest, None)) if digest == v.digest => return Ok(()),
            Some((seq, _, until)) => {
                if until.is_none() {
                    self.execute(REPLACED, &[&v.source, &v.uri, &seq, &first_seen])?;
                }
                seq.saturating_add(1)
            }
            None => 1,
        };
        self.execute(
            INSERT,
            &[
                &v.source,
                &v.uri,
                &seq,
                &v.digest,
                &to_i64(Some(v.length)).unwrap_or(i64::MAX),
                &v.datetime.map(|d| d.to_string()),
                &first_seen,
            ],
        )?;
        Ok(())
    }

    /// [`crate::Op::PutVersion`] of many resources in one statement per [`CHUNK`]; `false`
    /// (nothing written) when two are of one resource (applied one at a time, in order).
    pub(super) fn put_versions(&mut self, ops: &[&crate::Op<'_>]) -> Result<bool> {
        let vs: Vec<&VersionRecord> = ops
            .iter()
            .filter_map(|op| match op {
                crate::Op::PutVersion(v) => Some(*v),
                _ => None,
            })
            .collect();
        let mut seen = std::collections::HashSet::with_capacity(vs.len());
        if !vs
            .iter()
            .all(|v| seen.insert((v.source.as_str(), v.uri.as_str())))
        {
            return Ok(false);
        }
        for chunk in vs.chunks(CHUNK) {
            let source: Vec<&str> = chunk.iter().map(|v| v.source.as_str()).collect();
            let uri: Vec<&str> = chunk.iter().map(|v| v.uri.as_str()).collect();
            let digest: Vec<&str> = chunk.iter().map(|v| v.digest.as_str()).collect();
            let length: Vec<i64> = chunk
                .iter()
                .map(|v| to_i64(Some(v.length)).unwrap_or(i64::MAX))
                .collect();
            let datetime: Vec<Option<String>> = chunk
                .iter()
                .map(|v| v.datetime.map(|d| d.to_string()))
                .collect();
            let first_seen: Vec<String> = chunk.iter().map(|v| v.first_seen.to_string()).collect();
            self.execute(
                PUT_ALL,
                &[&source, &uri, &digest, &length, &datetime, &first_seen],
            )?;
        }
        Ok(true)
    }

    /// [`crate::Op::EndVersion`].
    pub(super) fn end_version(&mut self, e: &VersionEnd) -> Result<()> {
        self.execute(
            END,
            &[
                &e.source,
                &e.uri,
                &e.at.to_string(),
                &e.datetime.map(|d| d.to_string()),
            ],
        )?;
        Ok(())
    }

    /// [`crate::Op::RemoveVersion`].
    pub(super) fn remove_version(&mut self, source: &str, uri: &str, seq: u64) -> Result<()> {
        let seq = to_i64(Some(seq)).unwrap_or(-1);
        self.execute(REMOVE, &[&source, &uri, &seq])?;
        Ok(())
    }
}
