//! A ResourceSync aggregator: follows many Sources as one long-running service.
//!
//! - [`config`]: the TOML file: the Sources (`[[source]]`: name, url, schedule, …) and the
//!   limits they share; every mistake an error naming its line.
//! - [`service`]: [`Aggregator`]: one follower per Source, shared limits (syncs at once, per
//!   host), reload without a restart, drain.
//! - [`follow`]: a Source's loop: a sync through the Destination engine on its ports every
//!   interval (or its push session), failures backed off, never waiting on another Source.
//! - [`status`]: what each Source is doing, bounded; its copies and their bytes as its state
//!   records them (`recorded`: read at start and after each sync).
//! - [`republish`]: the aggregator as a Source (Z39.99-2014 §14.8): each Source's copies
//!   published under `BASE/rs/NAME/`, each entry with `<rs:ln rel="via">` to its original.
//! - [`memento`]: Memento (RFC 7089) over the versions kept of each Source's copies: TimeMaps,
//!   TimeGates and mementos under `/memento/NAME/`.
//! - [`published`]: the republished Sources over HTTP (Source Description, documents, copies).
//! - `bucket_copy`: a copy kept in a bucket sent from the object store, whole or one byte
//!   range (RFC 9110 §14), the range passed to the store's `GetObject`.
//! - [`listing`]: the list of Sources for the page and the API: summary counts, a filter by
//!   name and state, failing Sources first, pages of 100.
//! - [`web`]: the page for operators, the JSON API and the Prometheus metrics, and the
//!   republished Sources' documents and resources.
//! - [`work`]: with a PostgreSQL state, a large sync's fetches shared by every worker (a
//!   queue per Source, claimed per resource).
//!
//! The copies of each Source go to its own folder of the store (`STORE/NAME/`), its state to
//! SQLite in that folder (the default) or to PostgreSQL (a schema per Source).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod bucket_copy;
pub mod config;
pub mod error;
pub mod follow;
mod gate;
pub mod history;
pub mod listing;
pub mod memento;
pub mod published;
mod queue;
mod recorded;
pub mod republish;
pub mod service;
mod shared;
pub mod status;
pub mod web;
pub mod work;

pub use config::{Config, Limits, Schedule, SourceSpec};
pub use error::{Error, Result};
/// The settings of an `s3://` store (re-exported for programs that describe one).
pub use resourcesync_store::S3Config;
pub use service::{Aggregator, Options, StateChoice};
