//! The writes of a [`Batch`](super::super::Batch) in SQLite: one [`Op`] at a time, inside the
//! batch's transaction.

use rusqlite::{OptionalExtension, Transaction, params};

use super::rows::{encode_dups, put_row, to_i64};
use crate::error::Error;
use crate::state::{Op, VersionRecord};

/// Why a write of a batch failed.
pub(super) enum Failed {
    Sql(rusqlite::Error),
    Lost(Error),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Self {
        Failed::Sql(e)
    }
}

/// One write of a batch, inside its transaction.
pub(super) fn apply_op(
    tx: &Transaction<'_>,
    op: &Op<'_>,
    now: i64,
) -> std::result::Result<(), Failed> {
    match *op {
        Op::PutResource(r) => put_row(tx, r)?,
        Op::RemoveResource(uri) => {
            tx.prepare_cached("DELETE FROM resources WHERE uri = ?1")?
                .execute([uri])?;
        }
        Op::SetGone(uri, gone) => {
            tx.prepare_cached("UPDATE resources SET gone = ?2 WHERE uri = ?1")?
                .execute(params![uri, i64::from(gone)])?;
        }
        Op::PutPending(p) => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO pending(source, uri, change, length, hashes, lastmod, \
                 duplicates, error) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                p.source,
                p.uri,
                p.change.as_ref().map(|c| c.as_str().to_owned()),
                to_i64(p.length),
                (!p.hashes.is_empty()).then(|| p.hashes.to_string()),
                p.lastmod.map(|d| d.to_string()),
                encode_dups(&p.duplicates),
                p.error,
            ])?;
        }
        Op::RemovePending(source, uri) => {
            tx.prepare_cached("DELETE FROM pending WHERE source = ?1 AND uri = ?2")?
                .execute([source, uri])?;
        }
        Op::SetCursor(c) => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO sources(source, cursor, synced_at, checked_at) \
                 VALUES(?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                c.source,
                c.cursor.map(|d| d.to_string()),
                c.synced_at.map(|d| d.to_string()),
                c.checked_at.map(|d| d.to_string())
            ])?;
        }
        Op::SetDocuments(start, docs) => {
            tx.prepare_cached("DELETE FROM documents WHERE start = ?1")?
                .execute([start])?;
            for d in docs {
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO documents(start, role, url, etag, last_modified) \
                     VALUES(?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    start,
                    d.role,
                    d.url,
                    d.etag,
                    d.last_modified
                ])?;
            }
        }
        Op::PutVersion(v) => put_version(tx, v)?,
        Op::EndVersion(e) => {
            tx.prepare_cached(
                "UPDATE versions SET until = ?3, deleted = 1, deleted_datetime = ?4 \
                 WHERE source = ?1 AND uri = ?2 AND until IS NULL",
            )?
            .execute(params![
                e.source,
                e.uri,
                e.at.to_string(),
                e.datetime.map(|d| d.to_string())
            ])?;
        }
        Op::RemoveVersion(source, uri, seq) => {
            tx.prepare_cached("DELETE FROM versions WHERE source = ?1 AND uri = ?2 AND seq = ?3")?
                .execute(params![source, uri, to_i64(Some(seq)).unwrap_or(-1)])?;
        }
        Op::Fence(l) => {
            let held = tx
                .prepare_cached(
                    "SELECT EXISTS(SELECT 1 FROM leases WHERE name = ?1 AND holder = ?2 \
                     AND token = ?3 AND expires_ms > ?4)",
                )?
                .query_row(params![l.name, l.holder, to_i64(Some(l.token)), now], |r| {
                    r.get::<_, i64>(0)
                })?;
            if held == 0 {
                return Err(Failed::Lost(Error::LeaseLost {
                    name: l.name.clone(),
                    holder: l.holder.clone(),
                }));
            }
        }
        Op::CompleteWork(cl) => {
            let n = tx
                .prepare_cached(
                    "DELETE FROM work WHERE key = ?1 AND holder = ?2 AND token = ?3 \
                     AND expires_ms > ?4",
                )?
                .execute(params![cl.item.key, cl.holder, to_i64(Some(cl.token)), now])?;
            if n == 0 {
                return Err(Failed::Lost(Error::LeaseLost {
                    name: cl.item.key.clone(),
                    holder: cl.holder.clone(),
                }));
            }
        }
    }
    Ok(())
}

/// [`Op::PutVersion`]: nothing when the current version has the digest; else the current one
/// ends and the new one, numbered one more than the last, begins.
fn put_version(tx: &Transaction<'_>, v: &VersionRecord) -> rusqlite::Result<()> {
    let last: Option<(i64, String, Option<String>)> = tx
        .prepare_cached(
            "SELECT seq, digest, until FROM versions WHERE source = ?1 AND uri = ?2 \
             ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![v.source, v.uri], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let first_seen = v.first_seen.to_string();
    let seq = match last {
        Some((_, digest, None)) if digest == v.digest => return Ok(()),
        Some((seq, _, until)) => {
            if until.is_none() {
                tx.prepare_cached(
                    "UPDATE versions SET until = ?4 WHERE source = ?1 AND uri = ?2 AND seq = ?3",
                )?
                .execute(params![v.source, v.uri, seq, first_seen])?;
            }
            seq.saturating_add(1)
        }
        None => 1,
    };
    tx.prepare_cached(
        "INSERT INTO versions(source, uri, seq, digest, length, datetime, first_seen) \
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        v.source,
        v.uri,
        seq,
        v.digest,
        to_i64(Some(v.length)).unwrap_or(i64::MAX),
        v.datetime.map(|d| d.to_string()),
        first_seen
    ])?;
    Ok(())
}
