//! A ResourceSync Destination's storage: its copies of resources and what it knows about them,
//! as two ports with their implementations and one conformance suite each.
//!
//! - [`object`]: the [`Store`] port, objects under checked keys ([`RelPath`]): begin an
//!   [`Upload`], write, finish (length and every published digest verified), then place a batch
//!   visibly and atomically and sync it; get, head, delete, list in key order. Implementations:
//!   [`FsStore`] ([`fs`]: temporary files in `DEST/.resourcesync/tmp`, or on Linux unnamed
//!   files linked into place, `fs/anon.rs`; one `syncfs` per batch), [`MemStore`] ([`mem`])
//!   and (feature `s3`, on by default) `S3Store` (`s3`: objects in an S3-compatible bucket
//!   under a prefix, each verified before it is sent, metadata carrying URI and digests).
//! - [`state`]: three ports. [`Records`], batched ([`Batch`] of [`Op`]s, all or nothing, the
//!   only way to write: [`RecordWrites`] are batches), and for several workers [`Leases`] (on
//!   Sources) and a [`WorkQueue`] ([`WorkItem`]s claimed and completed, taken over when a claim
//!   expires); [`Fenced`] and [`Claimed`] are records whose batches a [`BatchGuard`] changes: per resource its URI, path, length, digests, lastmod, ETag and
//!   Last-Modified; per Source its cursor; changes to retry. Implementations: [`SqliteState`],
//!   [`MemState`] and (feature `postgres`, on by default) `PgState`, shared by several
//!   processes. Rows are written only after the file they describe is in place.
//! - [`versions`]: the bodies of kept versions, content-addressed by sha-256 beside the
//!   copies ([`VersionBodies`], a capability of [`Features`]); their rows are the state's
//!   ([`VersionRecord`]).
//! - [`conformance`]: the suites every implementation runs (`tests/it/conformance.rs` runs them
//!   for the four here, and kills a child process at each step of a put for [`FsStore`]).
//! - [`path`]: [`RelPath`] (defined in `resourcesync_model::path`).
//! - [`blocking`]: the one sync/async boundary: ports block; async code calls them only
//!   through [`blocking::call`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod blocking;
pub mod conformance;
pub mod error;
pub mod features;
pub mod fs;
pub mod mem;
pub mod object;
mod off_worker;
pub mod path;
#[cfg(feature = "s3")]
pub mod s3;
pub mod state;
pub mod versions;

pub use error::{Error, Result};
pub use features::{At, Features, Hierarchy, Interrupted};
pub use fs::STATE_DIR;
pub use fs::{FsStore, child_rel};
pub use mem::MemStore;
pub use object::{
    Committed, Expect, Finished, ObjectMeta, Placed, Store, Upload, UploadSink, foreign_upload,
};
pub use off_worker::OffWorker;
pub use path::RelPath;
#[cfg(feature = "s3")]
pub use s3::{S3Config, S3Store};
pub use state::{
    Batch, BatchGuard, Claim, Claimed, Claims, Fence, Fenced, Guarded, KnownDocument, Lease,
    Leases, MAX_KNOWN_DOCUMENTS, MAX_VERSIONS_PAGE, MemState, Op, PendingChange, RecordWrites,
    Records, ResourceRecord, SourceCursor, SqliteState, VersionEnd, VersionRecord, WorkItem,
    WorkQueue, for_each_resource,
};
#[cfg(feature = "postgres")]
pub use state::{PgState, WORKER_WANTED};
pub use versions::{VersionBodies, digest_of_name, version_digest, version_name};
