//! The versions the committer keeps (`sync --versions`, aggregate `versions = true`;
//! `docs/history.md`): every body it puts in place is kept, content-addressed by its sha-256,
//! in the store's version bodies ([`resourcesync_store::versions`]), and recorded as the
//! resource's new current version ([`Op::PutVersion`]) in the transaction of the copy's row; a
//! copy the Source deleted (removed or kept) ends its current version ([`Op::EndVersion`]).
//!
//! The order per copy is the committer's, with one step added: body synced → renamed → **body
//! kept as a version** (a hard link, a server-side copy) → synced (the same sync as the
//! rename's) → rows (the copy's and its version's, one transaction). A crash after the body is
//! kept and before the rows leaves a body no row names: the next run, fetching the copy
//! again or adopting it, finds the body kept already (same digest) and records the version
//! then. A body refused (length, digest, quota, a path taken) is never put in place, so it is
//! never kept. Only here: every path that puts a copy in place or deletes one (incremental,
//! baseline, repair, dump packages, shared fetches) goes through the committer.

use std::sync::atomic::{AtomicU64, Ordering};

use resourcesync_model::{HashAlg, W3cDateTime};
use resourcesync_store::{
    Op, RelPath, ResourceRecord, Store, VersionEnd, VersionRecord, version_digest,
};

use super::Write;
use crate::error::{Error, Result};
use crate::report::Failed;

/// What a run kept: versions recorded for the copies it put in place, and the bodies (and
/// their bytes) it stored anew (a body kept already, by this resource or another, is not
/// stored again).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    versions: AtomicU64,
    bodies: AtomicU64,
    bytes: AtomicU64,
}

impl Tally {
    /// (versions recorded, bodies stored anew, their bytes).
    pub(crate) fn get(&self) -> (u64, u64, u64) {
        (
            self.versions.load(Ordering::Relaxed),
            self.bodies.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        )
    }
}

/// Versions on for a committer: checked against its store when it starts.
#[derive(Debug, Default)]
pub(crate) struct Keeper {
    pub(crate) tally: Tally,
}

impl Keeper {
    /// A keeper for `store`, which must keep version bodies.
    pub(crate) fn for_store(store: &dyn Store) -> Result<Keeper> {
        if store.features().versions.is_none() {
            return Err(Error::Config(
                "--versions: this store cannot keep versions of its copies; use a directory or \
                 an S3 bucket, or sync without --versions"
                    .into(),
            ));
        }
        Ok(Keeper::default())
    }

    /// Keeps the body of the copy just put in place for `row` (its path, length and digests
    /// those of the body) as a version; the version to record (its `first_seen` set when it
    /// is recorded). A body without a sha-256 (a store that computed none) is hashed here.
    pub(crate) fn keep(
        &self,
        store: &dyn Store,
        row: &ResourceRecord,
    ) -> std::result::Result<VersionRecord, Failed> {
        let f = store.features();
        let Some(bodies) = f.versions else {
            return Err(Failed::other("the store keeps no versions"));
        };
        let key = RelPath::parse(&row.path).map_err(|e| Failed::other(e.to_string()))?;
        let (length, digest) = match version_digest(&row.hashes) {
            Some(d) => (row.length.unwrap_or(0), d),
            None => {
                let (n, h) = store.hash(&key, &[HashAlg::Sha256])?;
                let d = version_digest(&h)
                    .ok_or_else(|| Failed::other("no sha-256 of the copy to keep it by"))?;
                (n, d)
            }
        };
        if bodies.keep(&key, &digest)? {
            self.tally.bodies.fetch_add(1, Ordering::Relaxed);
            self.tally.bytes.fetch_add(length, Ordering::Relaxed);
        }
        crate::crashpoint::point("version-kept");
        Ok(VersionRecord {
            source: row.source.clone(),
            uri: row.uri.clone(),
            seq: 0,
            digest,
            length,
            datetime: row.lastmod,
            first_seen: W3cDateTime::now(true),
            until: None,
            deleted: false,
            deleted_datetime: None,
        })
    }

    /// The versions of the copies in place that `writes` record (adopted by their digest, or
    /// found current: [`Write::Row`]), their bodies kept (an existing one is found, not stored
    /// again; the state records nothing when the current version has the digest). A row
    /// without a sha-256 (written without `--versions`) or a body that cannot be kept records
    /// no version: the next body fetched does.
    pub(crate) fn keep_rows(
        &self,
        store: &dyn Store,
        writes: &[(Vec<Write>, impl Sized)],
    ) -> Vec<VersionRecord> {
        writes
            .iter()
            .flat_map(|(w, _)| w)
            .filter_map(|w| match w {
                Write::Row(r) if !r.gone && version_digest(&r.hashes).is_some() => {
                    self.keep(store, r).ok()
                }
                _ => None,
            })
            .collect()
    }

    /// Counts versions recorded.
    pub(crate) fn recorded(&self, n: usize) {
        self.tally.versions.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// The end of the current version of `uri`, deleted by its Source (at `datetime`, when it
/// said), now.
pub(crate) fn ended(source: &str, uri: &str, datetime: Option<W3cDateTime>) -> VersionEnd {
    VersionEnd {
        source: source.to_owned(),
        uri: uri.to_owned(),
        at: W3cDateTime::now(true),
        datetime,
    }
}

/// The versions of a batch as written: each first seen now (when recorded).
pub(crate) fn stamped(versions: &mut [VersionRecord]) {
    let now = W3cDateTime::now(true);
    for v in versions {
        v.first_seen = now;
    }
}

/// Adds the versions and ends to a batch.
pub(crate) fn add_to<'a>(
    batch: &mut resourcesync_store::Batch<'a>,
    versions: &'a [VersionRecord],
    ends: &'a [VersionEnd],
) {
    for v in versions {
        batch.push(Op::PutVersion(v));
    }
    for e in ends {
        batch.push(Op::EndVersion(e));
    }
}
