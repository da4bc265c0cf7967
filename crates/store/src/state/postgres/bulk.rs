//! A batch in few statements: the writes of a [`Batch`] that go to different tables commute,
//! so a run of them is applied as one statement per kind of write (arrays of parameters,
//! `unnest`), not one per row. A commit of a thousand copies is then a handful of round trips
//! to the server instead of two or three thousand (the row, the pending change it clears, and,
//! for a claimed fetch, the claim's completion: see [`crate::Claimed`]).
//!
//! The outcome is the batch applied one write at a time, in order, in its transaction:
//!
//! - A *segment* is a run of consecutive writes in which each table is written by one kind of
//!   write only (rows put, pending changes removed, claims completed, …). Writes to different
//!   tables commute; writes of one kind to one table commute unless two are about the same
//!   key. Segments are applied in order, and within one the kinds in the order they first
//!   appear (so that a lease's fence, first in a fenced batch, locks its row first).
//! - A kind whose writes repeat a key (two rows of one URI, one claim twice) is applied a write
//!   at a time, in order, as before: later wins, and a claim completed twice fails the second
//!   time.
//! - The completions of claims are one `DELETE … RETURNING key`: a claim whose item was not
//!   removed (it expired and was taken over) fails the batch with [`Error::LeaseLost`] naming
//!   the first such claim in the batch's order, as the write-at-a-time path does.

use std::collections::HashSet;

use resourcesync_model::HashAlg;

use super::pool::Tx;
use super::token;
use crate::error::{Error, Result};
use crate::state::sqlite::to_i64;
use crate::state::{Batch, Claim, Op, ResourceRecord};

/// Rows per statement (each row is a dozen parameters' worth of array elements).
const CHUNK: usize = 1000;

/// Writes (replaces) rows of copies, one per element of the arrays.
const PUT_RESOURCES: &str = "INSERT INTO resources(uri, source, path, length, md5, sha1, sha256, \
     lastmod, etag, last_modified, gone) \
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], \
     $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bool[]) \
     ON CONFLICT (uri) DO UPDATE SET source = EXCLUDED.source, path = EXCLUDED.path, \
     length = EXCLUDED.length, md5 = EXCLUDED.md5, sha1 = EXCLUDED.sha1, \
     sha256 = EXCLUDED.sha256, lastmod = EXCLUDED.lastmod, etag = EXCLUDED.etag, \
     last_modified = EXCLUDED.last_modified, gone = EXCLUDED.gone";

/// Forgets pending changes, by (source, uri).
const REMOVE_PENDINGS: &str = "DELETE FROM pending p USING unnest($1::text[], $2::text[]) AS u(s, r) \
     WHERE p.source = u.s AND p.uri = u.r";

/// Removes claimed items while their claims are held: the keys removed.
const COMPLETE_ALL: &str = "DELETE FROM work w \
     USING unnest($1::text[], $2::text[], $3::bigint[]) AS c(k, h, t) \
     WHERE w.key = c.k AND w.holder = c.h AND w.token = c.t AND w.expires > now() \
     RETURNING w.key";

/// Puts claimed items back in the queue while their claims are held.
const RELEASE_ALL: &str = "UPDATE work w SET holder = NULL, expires = NULL \
     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS c(k, h, t) \
     WHERE w.key = c.k AND w.holder = c.h AND w.token = c.t AND w.expires > now()";

/// Extends claimed items' claims while they are held, to `now()` plus `$4` milliseconds: the
/// keys and tokens renewed and their new expiry.
const RENEW_ALL: &str = "UPDATE work w SET expires = now() + $4::BIGINT * interval '1 millisecond' \
     FROM unnest($1::text[], $2::text[], $3::bigint[]) AS c(k, h, t) \
     WHERE w.key = c.k AND w.holder = c.h AND w.token = c.t AND w.expires > now() \
     RETURNING w.key, w.token, floor(extract(epoch FROM w.expires) * 1000)::BIGINT";

/// The kinds of write applied in bulk, and the others (one at a time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    PutResource,
    RemoveResource,
    SetGone,
    PutPending,
    RemovePending,
    SetCursor,
    SetDocuments,
    Fence,
    CompleteWork,
    PutVersion,
    EndVersion,
    RemoveVersion,
}

/// The table a kind writes (or locks), as an index.
fn table(k: Kind) -> usize {
    match k {
        Kind::PutResource | Kind::RemoveResource | Kind::SetGone => 0,
        Kind::PutPending | Kind::RemovePending => 1,
        Kind::SetCursor => 2,
        Kind::SetDocuments => 3,
        Kind::Fence => 4,
        Kind::CompleteWork => 5,
        Kind::PutVersion | Kind::EndVersion | Kind::RemoveVersion => 6,
    }
}

const TABLES: usize = 7;

fn kind(op: &Op<'_>) -> Kind {
    match op {
        Op::PutResource(_) => Kind::PutResource,
        Op::RemoveResource(_) => Kind::RemoveResource,
        Op::SetGone(..) => Kind::SetGone,
        Op::PutPending(_) => Kind::PutPending,
        Op::RemovePending(..) => Kind::RemovePending,
        Op::SetCursor(_) => Kind::SetCursor,
        Op::SetDocuments(..) => Kind::SetDocuments,
        Op::Fence(_) => Kind::Fence,
        Op::CompleteWork(_) => Kind::CompleteWork,
        Op::PutVersion(_) => Kind::PutVersion,
        Op::EndVersion(_) => Kind::EndVersion,
        Op::RemoveVersion(..) => Kind::RemoveVersion,
    }
}

/// Settles claims in one statement per [`CHUNK`]: `complete` removes their items, otherwise
/// they are put back in the queue; how many were still held.
pub(super) fn settle_all(tx: &mut Tx<'_, '_>, claims: &[Claim], complete: bool) -> Result<usize> {
    let claims: Vec<&Claim> = claims.iter().collect();
    let mut n = 0usize;
    for chunk in claims.chunks(CHUNK) {
        let (keys, holders, tokens) = claim_arrays(chunk);
        n += if complete {
            tx.query(COMPLETE_ALL, &[&keys, &holders, &tokens])?.len()
        } else {
            usize::try_from(tx.execute(RELEASE_ALL, &[&keys, &holders, &tokens])?)
                .unwrap_or(usize::MAX)
        };
    }
    Ok(n)
}

/// Renews the claims still held (see [`RENEW_ALL`]), a statement per [`CHUNK`]: the keys
/// and tokens renewed, each with its new expiry in milliseconds since the epoch.
pub(super) fn renew_all(
    tx: &mut Tx<'_, '_>,
    claims: &[Claim],
    ttl_ms: i64,
) -> Result<Vec<((String, i64), i64)>> {
    let claims: Vec<&Claim> = claims.iter().collect();
    let mut out = Vec::new();
    for chunk in claims.chunks(CHUNK) {
        let (keys, holders, tokens) = claim_arrays(chunk);
        for r in tx.query(RENEW_ALL, &[&keys, &holders, &tokens, &ttl_ms])? {
            let got = (|| Ok(((r.try_get(0)?, r.try_get(1)?), r.try_get(2)?)))();
            out.push(got.map_err(|e: postgres::Error| tx.state.err(e))?);
        }
    }
    Ok(out)
}

fn claim_arrays<'a>(claims: &[&'a Claim]) -> (Vec<&'a str>, Vec<&'a str>, Vec<i64>) {
    (
        claims.iter().map(|c| c.item.key.as_str()).collect(),
        claims.iter().map(|c| c.holder.as_str()).collect(),
        claims.iter().map(|c| token(c.token)).collect(),
    )
}

impl Tx<'_, '_> {
    /// Applies every write of `batch` (see the module's documentation).
    pub(super) fn apply_batch(&mut self, batch: &Batch<'_>) -> Result<()> {
        let ops = batch.ops();
        let mut start = 0;
        while start < ops.len() {
            let mut seen: [Option<Kind>; TABLES] = [None; TABLES];
            let mut end = start;
            while let Some(op) = ops.get(end) {
                let k = kind(op);
                match seen[table(k)] {
                    Some(s) if s != k => break,
                    _ => seen[table(k)] = Some(k),
                }
                end += 1;
            }
            self.apply_segment(&ops[start..end])?;
            start = end;
        }
        Ok(())
    }

    /// A segment: each kind in the order it first appears, in bulk where it can be.
    fn apply_segment(&mut self, ops: &[Op<'_>]) -> Result<()> {
        let mut kinds: Vec<Kind> = Vec::new();
        for op in ops {
            let k = kind(op);
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        for k in kinds {
            let of: Vec<&Op<'_>> = ops.iter().filter(|op| kind(op) == k).collect();
            let done = match k {
                Kind::PutResource if of.len() > 1 => self.put_all(&of)?,
                Kind::RemovePending if of.len() > 1 => self.unpend_all(&of)?,
                Kind::CompleteWork if of.len() > 1 => self.complete_all(&of)?,
                Kind::PutVersion if of.len() > 1 => self.put_versions(&of)?,
                _ => false,
            };
            if !done {
                for op in of {
                    self.apply_op(op)?;
                }
            }
        }
        Ok(())
    }

    /// Rows put in bulk; `false` (nothing written) when two are of one URI.
    fn put_all(&mut self, ops: &[&Op<'_>]) -> Result<bool> {
        let rows: Vec<&ResourceRecord> = ops
            .iter()
            .filter_map(|op| match op {
                Op::PutResource(r) => Some(*r),
                _ => None,
            })
            .collect();
        let mut uris = HashSet::with_capacity(rows.len());
        if !rows.iter().all(|r| uris.insert(r.uri.as_str())) {
            return Ok(false);
        }
        for chunk in rows.chunks(CHUNK) {
            let uri: Vec<&str> = chunk.iter().map(|r| r.uri.as_str()).collect();
            let source: Vec<&str> = chunk.iter().map(|r| r.source.as_str()).collect();
            let path: Vec<&str> = chunk.iter().map(|r| r.path.as_str()).collect();
            let length: Vec<Option<i64>> = chunk.iter().map(|r| to_i64(r.length)).collect();
            let digest = |alg: HashAlg| -> Vec<Option<String>> {
                chunk.iter().map(|r| r.hashes.value_of(&alg)).collect()
            };
            let (md5, sha1, sha256) = (
                digest(HashAlg::Md5),
                digest(HashAlg::Sha1),
                digest(HashAlg::Sha256),
            );
            let lastmod: Vec<Option<String>> = chunk
                .iter()
                .map(|r| r.lastmod.map(|d| d.to_string()))
                .collect();
            let etag: Vec<Option<&str>> = chunk.iter().map(|r| r.etag.as_deref()).collect();
            let last_modified: Vec<Option<&str>> =
                chunk.iter().map(|r| r.last_modified.as_deref()).collect();
            let gone: Vec<bool> = chunk.iter().map(|r| r.gone).collect();
            self.execute(
                PUT_RESOURCES,
                &[
                    &uri,
                    &source,
                    &path,
                    &length,
                    &md5,
                    &sha1,
                    &sha256,
                    &lastmod,
                    &etag,
                    &last_modified,
                    &gone,
                ],
            )?;
        }
        Ok(true)
    }

    /// Pending changes forgotten in bulk (a pair twice is harmless).
    fn unpend_all(&mut self, ops: &[&Op<'_>]) -> Result<bool> {
        let pairs: Vec<(&str, &str)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::RemovePending(s, u) => Some((*s, *u)),
                _ => None,
            })
            .collect();
        for chunk in pairs.chunks(CHUNK) {
            let sources: Vec<&str> = chunk.iter().map(|p| p.0).collect();
            let uris: Vec<&str> = chunk.iter().map(|p| p.1).collect();
            self.execute(REMOVE_PENDINGS, &[&sources, &uris])?;
        }
        Ok(true)
    }

    /// Claims completed in bulk; `false` (nothing written) when one item is claimed twice.
    fn complete_all(&mut self, ops: &[&Op<'_>]) -> Result<bool> {
        let claims: Vec<&Claim> = ops
            .iter()
            .filter_map(|op| match op {
                Op::CompleteWork(c) => Some(*c),
                _ => None,
            })
            .collect();
        let mut keys = HashSet::with_capacity(claims.len());
        if !claims.iter().all(|c| keys.insert(c.item.key.as_str())) {
            return Ok(false);
        }
        let mut removed: HashSet<String> = HashSet::with_capacity(claims.len());
        for chunk in claims.chunks(CHUNK) {
            let (k, h, t) = claim_arrays(chunk);
            for row in self.query(COMPLETE_ALL, &[&k, &h, &t])? {
                removed.insert(row.try_get(0).map_err(|e| self.state.err(e))?);
            }
        }
        match claims.iter().find(|c| !removed.contains(&c.item.key)) {
            None => Ok(true),
            Some(lost) => Err(Error::LeaseLost {
                name: lost.item.key.clone(),
                holder: lost.holder.clone(),
            }),
        }
    }
}
