//! The versions of a resource a Destination keeps beside its current copy (issue 37): one row
//! per time a resource had a body, its body content-addressed by its digest (the body itself
//! is in the store, under [`VersionRecord::digest`]: see `docs/history.md`).
//!
//! A resource's versions are numbered 1, 2, … ([`VersionRecord::seq`]) in the order this
//! Destination saw them, which is their time order. The last one is current until it is
//! replaced (the next version's [`VersionRecord::first_seen`] is its `until`) or the Source
//! deletes the resource ([`Op::EndVersion`]: `until`, [`VersionRecord::deleted`] and the
//! Source's time of the delete). A body seen again after another one (A, B, A) is a new
//! version whose digest names the body stored once.
//!
//! Written through [`Batch`](super::Batch)es, in the same transaction as the copy's row, and
//! only once the body is in the store: a version row never names a body that is not there.

use resourcesync_model::W3cDateTime;

#[cfg(doc)]
use super::Op;

/// One version of a resource: a body it had, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRecord {
    /// The Source the resource belongs to (its Capability List URL).
    pub source: String,
    /// The resource's URI (`<loc>`).
    pub uri: String,
    /// Its number among the resource's versions: 1 for the first this Destination saw, then
    /// one more for each. Given by the state when written ([`Op::PutVersion`] ignores it).
    pub seq: u64,
    /// The body's digest, `ALGORITHM:HEX` as Z39.99-2014 §7 writes `hash` (`sha-256:…`
    /// whenever the store computed it; else the strongest the Source published and the store
    /// verified): what names the stored body.
    pub digest: String,
    /// The body's length in bytes.
    pub length: u64,
    /// The Source's time for it: the `datetime` of the change (Z39.99-2014 §12.1) or the
    /// `<lastmod>` of the Resource List entry (§10.1) it came with; `None` when it had
    /// neither.
    pub datetime: Option<W3cDateTime>,
    /// When this Destination first saw it (its own clock: when the row was written).
    pub first_seen: W3cDateTime,
    /// When it stopped being current, by this Destination's clock: the next version's
    /// `first_seen`, or when the delete was applied; `None` while it is current.
    pub until: Option<W3cDateTime>,
    /// It stopped being current because the Source deleted the resource.
    pub deleted: bool,
    /// The Source's time of that delete (the `datetime` of the `deleted` change), when it gave
    /// one.
    pub deleted_datetime: Option<W3cDateTime>,
}

/// The end of a resource's current version: the Source deleted it ([`Op::EndVersion`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionEnd {
    /// The Source.
    pub source: String,
    /// The resource.
    pub uri: String,
    /// When the delete was applied (this Destination's clock): the version's `until`.
    pub at: W3cDateTime,
    /// The Source's time of the delete, if it gave one.
    pub datetime: Option<W3cDateTime>,
}

/// Most versions [`crate::Records::versions_of`] and [`crate::Records::versions_page`] give in
/// one page, whatever the limit asked.
pub const MAX_VERSIONS_PAGE: usize = 10_000;
