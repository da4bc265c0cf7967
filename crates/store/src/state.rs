//! What the Destination knows: three ports and their implementations. [`Records`] (the rows,
//! cursors, pending changes and remembered documents, read, and written in [`Batch`]es through
//! [`Records::apply`]; [`RecordWrites`] are its one-write conveniences) is all a run needs;
//! [`Leases`] and [`WorkQueue`] are for workers sharing one state (an aggregator).
//!
//! Per resource: URI, the Source it belongs to, path under DEST, length, digests (md5, sha-1,
//! sha-256), the Source's `<lastmod>`, the server's `ETag` and `Last-Modified`, and whether the
//! Source deleted it while the copy was kept. Per Source (keyed by its Capability List URL): the
//! cursor, i.e. the `datetime` (or `<lastmod>`) of the last change applied (Z39.99-2014 §12.1;
//! Z39.99-2017 §12.1), or the `at` of the Resource List a baseline came from (§10.1). Changes that
//! failed are kept as pending, to be retried by the next run.
//!
//! The Destination writes a resource's row only after its file is in place, so a crash leaves
//! at worst a file without a row (which the next run recognises by its digest), never a row for
//! a file that is not there.
//!
//! Writes go in [`Batch`]es, applied all or nothing ([`Records::apply`]). For several
//! workers sharing one state (an aggregator's processes over PostgreSQL), a worker takes a
//! [`Lease`] on a Source ([`Leases::lease_source`]) and claims work items
//! ([`WorkQueue::claim_work`]), each for a time: a lease not renewed expires and is taken over,
//! and a batch fenced by a lease ([`Batch::fence`]) fails once the lease is lost, so that a
//! worker that stalled past its lease never writes over its successor. Implementations:
//! [`SqliteState`] (`state/sqlite.rs`), [`MemState`] (`state/mem.rs`) and, with the `postgres`
//! feature (on by default), `PgState` (`state/postgres.rs`: the state shared by several
//! processes); all pass [`crate::conformance::state`].

use std::fmt::Debug;
use std::time::{Duration, SystemTime};

use resourcesync_model::{Change, Hashes, W3cDateTime};

use crate::error::Result;
use crate::path::RelPath;

mod claimed;
mod fenced;
mod guarded;
mod mem;
#[cfg(feature = "postgres")]
pub mod postgres;
mod settled;
mod sqlite;
mod versions;

pub use claimed::{Claimed, Claims};
pub use fenced::{Fence, Fenced};
pub use guarded::{BatchGuard, Guarded};
pub use mem::MemState;
#[cfg(feature = "postgres")]
pub use postgres::{PgState, WORKER_WANTED};
pub use sqlite::SqliteState;
pub use versions::{MAX_VERSIONS_PAGE, VersionEnd, VersionRecord};

/// What the Destination knows of one copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRecord {
    /// The resource's URI (`<loc>`).
    pub uri: String,
    /// The Source it belongs to (its Capability List URL).
    pub source: String,
    /// Its path under DEST (`/`-separated).
    pub path: String,
    /// Its length.
    pub length: Option<u64>,
    /// Its digests (md5, sha-1 and sha-256 are kept).
    pub hashes: Hashes,
    /// The Source's `<lastmod>` for it.
    pub lastmod: Option<W3cDateTime>,
    /// The `ETag` the server sent.
    pub etag: Option<String>,
    /// The `Last-Modified` the server sent.
    pub last_modified: Option<String>,
    /// The Source deleted it and the copy was kept (no `--delete`).
    pub gone: bool,
}

/// Where a Destination is in a Source's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceCursor {
    /// The Source's Capability List URL (or the URL of the list synced, without one).
    pub source: String,
    /// The time of the last change applied, or the `at` of the Resource List of the last
    /// baseline; `None` while no baseline has completed.
    pub cursor: Option<W3cDateTime>,
    /// When the last run completed (a W3C Datetime).
    pub synced_at: Option<W3cDateTime>,
    /// When every copy of the Source was last checked against its row and found (or made)
    /// current: recorded by a run only once such a check has completed; `None` while none
    /// has. What a Destination's schedule of copy checks goes by.
    pub checked_at: Option<W3cDateTime>,
}

/// A change that failed and is retried by the next run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingChange {
    /// The Source.
    pub source: String,
    /// The resource.
    pub uri: String,
    /// The change (`created`, `updated`, `deleted`).
    pub change: Option<Change>,
    /// The published length.
    pub length: Option<u64>,
    /// The published digests.
    pub hashes: Hashes,
    /// The published `<lastmod>`.
    pub lastmod: Option<W3cDateTime>,
    /// Mirrors (`duplicate` links) as (priority, href).
    pub duplicates: Vec<(u32, String)>,
    /// Why it failed.
    pub error: String,
}

/// A document a Destination found at a Source, remembered with the state so that its next run
/// starts from it rather than discovering the Source again: its URL, what it is to
/// the Destination (`role`, as the caller names it: the store keeps it as text), and the
/// validators of the copy last read (RFC 9110 §8.8), for a conditional GET (§13.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownDocument {
    /// What the document is to the caller (e.g. `capabilitylist`, `changelist`).
    pub role: String,
    /// Its URL.
    pub url: String,
    /// The `ETag` it was last served with.
    pub etag: Option<String>,
    /// The `Last-Modified` it was last served with.
    pub last_modified: Option<String>,
}

/// Most documents remembered for one start URL ([`Records::documents`] reads no more).
pub const MAX_KNOWN_DOCUMENTS: usize = 256;

/// One write of a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op<'a> {
    /// Writes (replaces) the row of a resource.
    PutResource(&'a ResourceRecord),
    /// Removes the row of a resource (by URI).
    RemoveResource(&'a str),
    /// Marks a resource as deleted at the Source (copy kept), or not.
    SetGone(&'a str, bool),
    /// Records a pending change (replacing one for the same Source and URI).
    PutPending(&'a PendingChange),
    /// Forgets a pending change: its Source and URI.
    RemovePending(&'a str, &'a str),
    /// Writes the cursor of a Source.
    SetCursor(&'a SourceCursor),
    /// Replaces every document remembered for a start URL (the URL discovery started from)
    /// with these (none: forgets them).
    SetDocuments(&'a str, &'a [KnownDocument]),
    /// Applies the batch only while this lease is held (same holder and token, not expired):
    /// else the whole batch fails with [`crate::Error::LeaseLost`].
    Fence(&'a Lease),
    /// Removes a claimed work item, only while the claim is held (else the whole batch fails
    /// with [`crate::Error::LeaseLost`]): the work and what it wrote are recorded together.
    CompleteWork(&'a Claim),
    /// Records a version of a resource whose body is in the store (`state/versions.rs`): the
    /// new current one, numbered one more than the resource's last ([`VersionRecord::seq`]
    /// is ignored), the current one ending (`until`) at its `first_seen`. Nothing when the
    /// current version has the same digest (a body listed again is one version).
    PutVersion(&'a VersionRecord),
    /// Ends the current version of a resource the Source deleted: `until`, `deleted` and the
    /// Source's time of the delete. Nothing when the resource has no current version.
    EndVersion(&'a VersionEnd),
    /// Removes one version's row (pruning): its Source, URI and number. The numbers of the
    /// others are kept; a number is given again only if the resource's last version is removed.
    RemoveVersion(&'a str, &'a str, u64),
}

/// Writes applied together, all or nothing ([`Records::apply`]), in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch<'a> {
    ops: Vec<Op<'a>>,
}

impl<'a> Batch<'a> {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Adds a write.
    pub fn push(&mut self, op: Op<'a>) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Writes the row of a copy just put in place and forgets its pending change.
    pub fn put_resource(&mut self, r: &'a ResourceRecord) -> &mut Self {
        self.push(Op::PutResource(r))
            .push(Op::RemovePending(&r.source, &r.uri))
    }

    /// Makes the batch conditional on `lease` (see [`Op::Fence`]).
    pub fn fence(&mut self, lease: &'a Lease) -> &mut Self {
        self.push(Op::Fence(lease))
    }

    /// The writes, in order.
    pub fn ops(&self) -> &[Op<'a>] {
        &self.ops
    }

    /// Whether it holds no write.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A Source (or any named thing) held by one worker until `expires`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// What is held (the Source's key).
    pub name: String,
    /// The worker holding it.
    pub holder: String,
    /// Grows each time the lease changes hands (or is taken again after it expired): a fencing
    /// token, so that a write fenced by an older holder's lease fails.
    pub token: u64,
    /// When it expires unless renewed (kept to the millisecond).
    pub expires: SystemTime,
}

/// A unit of work queued for the workers ([`WorkQueue::add_work`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkItem {
    /// Its key: an item whose key is queued already is not queued again.
    pub key: String,
    /// The Source it belongs to.
    pub source: String,
    /// What to do, as the caller writes it.
    pub payload: String,
}

/// A work item claimed by a worker until `expires` ([`WorkQueue::claim_work`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The item.
    pub item: WorkItem,
    /// The worker.
    pub holder: String,
    /// Grows each time the item is claimed: a claim that expired and was taken over no longer
    /// completes it.
    pub token: u64,
    /// When the claim expires and the item may be claimed by another worker.
    pub expires: SystemTime,
    /// How many times the item has been claimed, this one included.
    pub attempts: u32,
}

/// The time in milliseconds since the Unix epoch (0 before it), as leases keep it.
pub(crate) fn millis(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The time of a number of milliseconds since the Unix epoch.
pub(crate) fn from_millis(ms: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// The expiry of a lease taken at `now` for `ttl`, in milliseconds.
pub(crate) fn expiry(now: i64, ttl: Duration) -> i64 {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}

/// The text form of `duplicate` links (Z39.99-2014 §14.2: `pri` and `href`) kept in a state or
/// staging database: one `PRI HREF` per line.
pub fn encode_duplicates(d: &[(u32, String)]) -> String {
    d.iter()
        .map(|(p, h)| format!("{p} {h}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `duplicate` links of [`encode_duplicates`]' text; lines that do not parse are skipped.
pub fn decode_duplicates(s: &str) -> Vec<(u32, String)> {
    s.lines()
        .filter_map(|l| {
            let (p, h) = l.split_once(' ')?;
            Some((p.parse().ok()?, h.to_owned()))
        })
        .collect()
}

/// What the Destination knows, read and written: the port of a run. Reads answer from the rows;
/// every write goes through [`Records::apply`], a [`Batch`] all or nothing (the conveniences of
/// [`RecordWrites`] are batches of one or a few writes, and cannot be overridden to bypass it).
/// Implementations must be usable from several threads (and, for a shared database, from
/// several processes), and pass [`crate::conformance::state`].
pub trait Records: Send + Sync + Debug {
    /// The row of a resource.
    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>>;
    /// Up to `limit` rows of a Source with URIs after `after`, in URI (byte) order.
    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>>;
    /// Up to `limit` rows of a Source kept after the Source deleted them
    /// ([`ResourceRecord::gone`]) with URIs after `after`, in URI (byte) order. The default
    /// reads every row a page at a time; a database answers from an index of those rows alone,
    /// so that a run finds none among many rows without reading them.
    fn gone_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let mut out = Vec::new();
        let mut after = after.map(str::to_owned);
        while out.len() < limit {
            let page = self.resources_page(source, after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.uri.clone());
            out.extend(page.into_iter().filter(|r| r.gone));
        }
        out.truncate(limit);
        Ok(out)
    }
    /// Whether some row has this path.
    fn has_path(&self, path: &RelPath) -> Result<bool>;
    /// [`Records::has_path`] of each path, in order (a walk of the copies looks its keys up a
    /// batch at a time). The default asks for each in turn; a database answers the batch in
    /// one transaction or one query.
    fn has_paths(&self, paths: &[&RelPath]) -> Result<Vec<bool>> {
        paths.iter().map(|p| self.has_path(p)).collect()
    }
    /// The URI whose row has this path (placeholders and copies kept after a delete included),
    /// if any: the least in byte order when several have it (a state written before a path
    /// was held by one URI at most may have such rows). The Destination refuses to put one
    /// URI's copy at a path another URI's row has: two URIs never share a copy.
    fn path_owner(&self, path: &RelPath) -> Result<Option<String>>;
    /// [`Records::path_owner`] of each path, in order. The default asks for each in turn; a
    /// database across a network answers with one query.
    fn path_owners(&self, paths: &[&RelPath]) -> Result<Vec<Option<String>>> {
        paths.iter().map(|p| self.path_owner(p)).collect()
    }
    /// How many rows a Source has (copies recorded, those kept after a delete included). The
    /// default counts them a page at a time; a database answers with one query.
    fn count_resources(&self, source: &str) -> Result<u64> {
        let mut n = 0u64;
        for_each_resource(self, source, |_| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }
    /// The bytes of a Source's copies: the sum of the lengths its rows record (a placeholder
    /// has none). The default sums them a page at a time; a database answers with one query.
    fn bytes_recorded(&self, source: &str) -> Result<u64> {
        let mut n = 0u64;
        for_each_resource(self, source, |r| {
            n = n.saturating_add(r.length.unwrap_or(0));
            Ok(())
        })?;
        Ok(n)
    }
    /// The rows and the bytes they record over every Source of this state (what
    /// [`Records::count_resources`] and [`Records::bytes_recorded`] give, summed), in
    /// one query: for a caller that keeps one state per Source (an aggregator) and wants its
    /// figures without knowing the key its rows are recorded under.
    fn recorded_totals(&self) -> Result<(u64, u64)>;
    /// The cursor of a Source.
    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>>;
    /// The documents remembered for a start URL ([`Op::SetDocuments`]), in (role, URL) order,
    /// at most [`MAX_KNOWN_DOCUMENTS`].
    fn documents(&self, start: &str) -> Result<Vec<KnownDocument>>;
    /// Up to `limit` pending changes of a Source with URIs after `after`, in URI order.
    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>>;

    /// Up to `limit` (at most [`MAX_VERSIONS_PAGE`]) versions of a Source's resources after
    /// `after` (a URI and a version number), in (URI, number) order: each resource's versions
    /// in time order, the resources in URI (byte) order. For listing and pruning.
    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>>;
    /// Up to `limit` (at most [`MAX_VERSIONS_PAGE`]) versions of one resource numbered after
    /// `after`, in time order (the order this Destination saw them; the last is current unless
    /// it has an `until`). The default reads them from [`Records::versions_page`].
    fn versions_of(
        &self,
        source: &str,
        uri: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        let mut page = self.versions_page(source, Some((uri, after.unwrap_or(0))), limit)?;
        page.retain(|v| v.uri == uri);
        Ok(page)
    }
    /// Whether some version (of any Source of this state) has this digest: a body no row names
    /// may be removed from the store.
    fn digest_referenced(&self, digest: &str) -> Result<bool>;

    /// Whether every call answers from local storage (a file, memory) in about the time of a
    /// file read, never waiting for a network: async code may then make it in place, and
    /// [`crate::OffWorker`] leaves such records as they are. `false` unless declared.
    fn in_place(&self) -> bool {
        false
    }

    /// Applies a batch of writes, in order, all or nothing (one transaction where the store has
    /// them): a failed write, or a fence whose lease is lost ([`Op::Fence`]), or a claim lost
    /// ([`Op::CompleteWork`]), leaves the state as it was.
    fn apply(&self, batch: &Batch<'_>) -> Result<()>;
}

/// Writes of one kind as [`Batch`]es over [`Records::apply`], for every [`Records`] (a blanket
/// implementation: no implementation or wrapper can make them bypass `apply`).
pub trait RecordWrites: Records {
    /// Writes (replaces) the row of a copy just put in place and forgets its pending change,
    /// in one transaction: [`Batch::put_resource`] alone. (A row without that, such as a
    /// placeholder, is an [`Op::PutResource`] of a batch.)
    fn put_resource(&self, r: &ResourceRecord) -> Result<()> {
        self.apply(Batch::new().put_resource(r))
    }
    /// Writes (replaces) the rows of copies just put in place and forgets their pending
    /// changes, all or nothing: [`RecordWrites::put_resource`] of each, in one transaction.
    fn put_resources(&self, rows: &[ResourceRecord]) -> Result<()> {
        let mut b = Batch::new();
        for r in rows {
            b.put_resource(r);
        }
        self.apply(&b)
    }
    /// Removes the row of a resource.
    fn remove_resource(&self, uri: &str) -> Result<()> {
        self.apply(Batch::new().push(Op::RemoveResource(uri)))
    }
    /// Marks a resource as deleted at the Source (copy kept), or not.
    fn set_gone(&self, uri: &str, gone: bool) -> Result<()> {
        self.apply(Batch::new().push(Op::SetGone(uri, gone)))
    }
    /// Writes the cursor of a Source.
    fn set_cursor(&self, c: &SourceCursor) -> Result<()> {
        self.apply(Batch::new().push(Op::SetCursor(c)))
    }
    /// Replaces the documents remembered for a start URL.
    fn set_documents(&self, start: &str, docs: &[KnownDocument]) -> Result<()> {
        self.apply(Batch::new().push(Op::SetDocuments(start, docs)))
    }
    /// Records a pending change (replacing one for the same URI).
    fn put_pending(&self, p: &PendingChange) -> Result<()> {
        self.apply(Batch::new().push(Op::PutPending(p)))
    }
    /// Forgets a pending change.
    fn remove_pending(&self, source: &str, uri: &str) -> Result<()> {
        self.apply(Batch::new().push(Op::RemovePending(source, uri)))
    }
}

impl<T: Records + ?Sized> RecordWrites for T {}

/// Leases on Sources, for workers sharing one state: at most one worker holds a Source at a
/// time, and a batch fenced by its lease ([`Op::Fence`]) fails once it is lost. Used by the
/// aggregator's processes (and [`Fenced`]); a single run does without.
pub trait Leases: Send + Sync + Debug {
    /// Takes (or renews) the lease on `source` for `worker` until `ttl` from now: `None` while
    /// another worker holds it unexpired. Renewing keeps the token; taking it over (from
    /// another worker or after it expired) raises it. At most one worker holds a lease at a
    /// time.
    fn lease_source(&self, source: &str, worker: &str, ttl: Duration) -> Result<Option<Lease>>;
    /// Gives a lease up (if still held as `lease` says); whether it was.
    fn release_source(&self, lease: &Lease) -> Result<bool>;
}

/// A queue of work items shared by workers, each claimed for a time: the shared fetches of an
/// aggregator's processes. A claim is completed with the rows it wrote ([`Op::CompleteWork`],
/// [`Claimed`]) or here.
pub trait WorkQueue: Send + Sync + Debug {
    /// Queues work items (an item whose key is queued already is left as it is); how many
    /// were added.
    fn add_work(&self, items: &[WorkItem]) -> Result<usize>;
    /// Claims up to `n` items for `worker` until `ttl` from now, in the order they were
    /// queued: items no one holds, or whose claim expired (taken over). Two workers never hold
    /// the same item at once (PostgreSQL: `SELECT … FOR UPDATE SKIP LOCKED`).
    fn claim_work(&self, worker: &str, n: usize, ttl: Duration) -> Result<Vec<Claim>>;
    /// Removes the items of claims still held (as each claim says); how many.
    fn complete(&self, claims: &[Claim]) -> Result<usize>;
    /// Puts the items of claims still held back in the queue, unclaimed; how many.
    fn release(&self, claims: &[Claim]) -> Result<usize>;
    /// Extends the claims still held (as each claim says: holder, token, unexpired) to `ttl`
    /// from now, all in one go (PostgreSQL: one statement per thousand); the claims renewed,
    /// with their new expiry. A claim missing from the answer was lost (it expired and may
    /// have been taken over) or settled: its completion is refused as before. A worker
    /// renews the claims of its downloads in flight so that a download longer than the
    /// claims' time to live is not taken over by another worker.
    fn renew_work(&self, claims: &[Claim], ttl: Duration) -> Result<Vec<Claim>>;
    /// How many items of the Source `source` are queued, claimed or not (those completed are
    /// gone): what a worker that queued them waits to see reach 0.
    fn work_left(&self, source: &str) -> Result<u64>;
    /// Waits until no item of `source` is left (`true`), or until `timeout` passes with items
    /// left (`false`): what a worker that queued items waits on. Woken by completions, not by
    /// polling: PostgreSQL's by `LISTEN`/`NOTIFY` (every worker's completions, on any
    /// machine); the in-process states' by the completions made through the same value (a
    /// completion made by another process is seen at `timeout`).
    fn wait_drained(&self, source: &str, timeout: Duration) -> Result<bool>;
}

/// Calls `f` for every row of a Source, in URI order, a page at a time.
pub fn for_each_resource<S: Records + ?Sized>(
    state: &S,
    source: &str,
    mut f: impl FnMut(ResourceRecord) -> Result<()>,
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = state.resources_page(source, after.as_deref(), 1000)?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.uri.clone());
        for r in page {
            f(r)?;
        }
    }
}
