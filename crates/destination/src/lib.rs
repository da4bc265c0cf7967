//! A ResourceSync Destination (ANSI/NISO Z39.99-2014 §5.2; Z39.99-2017).
//!
//! - [`discover()`]: from any URL to the Capability List to sync (§6.3, §6.2).
//! - [`sync()`]: baseline from the Resource List (caught up from the Change Lists in the same
//!   run, see [`catch_up`]), incremental from the Change Lists after a durable cursor, baseline
//!   diff when the history does not reach the cursor; from the dumps alone for a Source that
//!   offers no list; concurrent, verified, atomic downloads; state in SQLite (see [`mod@sync`]).
//! - [`audit()`]: coverage and accuracy of the copies against the Source's current state (its
//!   Resource List, else its dumps' manifests).
//! - [`explore()`]: the tree of a Source's documents, each validated (see [`mod@explore`]).
//! - [`watch()`]: sync, then keep following the Change Lists until stopped (see [`mod@watch`]).
//! - [`watch_push()`]: sync, then follow the Source's Change Notifications over WebSub (see
//!   [`mod@push`]).
//! - [`dump`]: Resource Dump and Change Dump packages (§11, §13), checked as hostile input;
//!   [`patch`]: JSON Patch links of changes (§14.4).
//! - [`mapping`]: the rule from resource URIs to paths under the destination directory.
//! - [`http`]: the client: pool, retries with backoff and jitter, `Retry-After`, rate per host,
//!   conditional GETs, bearer token, user agent.
//!
//! Fatal problems are [`Error`]s; a resource that fails is reported in the [`SyncReport`] and the
//! run goes on.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The bottom layer: types every stage shares; none of these imports a stage.
pub mod crashpoint;
pub mod error;
pub mod filter;
pub mod http;
pub mod mapping;
pub mod options;
mod outcome;
pub mod ports;
pub mod report;
pub mod retention;
pub mod share;

// The stages, in the order data flows through them; each imports only the stages before it.
pub mod attime;
pub mod audit;
mod commit;
pub mod discover;
pub mod dump;
mod fetch;
mod job;
mod march;
mod plan;
mod task;

// The entry points.
pub mod explore;
pub mod push;
pub mod sync;
pub mod watch;

pub use discover::docs;
pub use fetch::{SharedFetcher, SharedOutcome, SlotTicket, patch, repair};
pub use sync::catch_up;

pub use audit::audit;
pub use discover::discover;
pub use error::{Error, Result};
pub use explore::{ExploreNode, ExploreOptions, ExploreReport, NodeStatus, explore};
pub use filter::UriFilter;
pub use http::{HttpOptions, USER_AGENT};
pub use mapping::UriMapper;
pub use options::{AuditOptions, SyncOptions};
pub use ports::Ports;
pub use push::{PushOptions, PushStats, watch_push};
pub use report::{
    AuditDifference, AuditReport, Failed, Failure, FailureKind, Mode, Observer, Planned, Quiet,
    SourceInfo, SyncReport, VersionsKept,
};
pub use share::{Downloads, SharedFetch};
pub use sync::{Destination, sync};
pub use watch::{ChangeSeen, Round, StopHandle, WatchOptions, WatchReport, changes_since, watch};
