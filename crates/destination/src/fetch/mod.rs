//! Fetching: the job executor and what it runs.
//!
//! - [`job`](self::job) and [`ctx`](self::ctx): the leaves, which use no other module here:
//!   what a job is and comes to, and what the jobs of a run share (its ports, its settings,
//!   what it remembers).
//! - [`exec`](self::exec): jobs (fetch, delete) run with a bounded number in flight, each copy
//!   downloaded, verified and handed to the committer.
//! - [`download`](self::download): one copy's download (conditional, mirrors first, capped,
//!   verified) up to the committer's queue.
//! - [`patch`]: JSON Patch links of changes (Z39.99-2014 §14.4), applied to a copy instead of a
//!   download when the copy allows it.
//! - [`repair`]: the copies on disk checked against the state; a damaged one is fetched again.
//! - [`mtime`](self::mtime): the modification time a copy is given.
//! - [`handout`](self::handout) and [`shared`](self::shared): fetches handed to other workers
//!   ([`crate::share`]): the executor's hand-out, and [`SharedFetcher`] for the workers that
//!   take them.

pub(crate) mod ctx;
pub(crate) mod download;
pub(crate) mod exec;
pub(crate) mod handout;
pub(crate) mod mtime;
pub mod patch;
pub mod repair;
pub(crate) mod shared;

pub use shared::{SharedFetcher, SharedOutcome, SlotTicket};
