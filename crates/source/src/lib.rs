//! A ResourceSync Source: the inventory of a directory, change tracking in SQLite, every
//! capability document, dumps, and an HTTP server.
//!
//! The modules, from the bottom up (no module uses one above it):
//!
//! - [`error`], [`uri`]: the error type; paths ↔ URIs; [`crashpoint`], a test hook.
//! - [`inventory`]: what a Source has (the [`inventory::Inventory`] port, the directory and
//!   in-memory implementations, their conformance suite).
//! - [`state`]: the recorded snapshots and changes (SQLite).
//! - [`scan`]: change detection: the inventory's listing merged with the previous snapshot.
//! - [`publish`]: every document, written through a [`publish::sink::DocSink`].
//! - [`notify`]: Change and Framework Notifications to a WebSub hub.
//! - [`source`]: a Source over a directory (configuration, scan, publish).
//! - [`serve`]: the HTTP server of a live Source and the watcher that keeps it current.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod crashpoint;
pub mod error;
pub mod inventory;
pub mod notify;
pub mod publish;
pub mod scan;
pub mod serve;
pub mod source;
pub mod state;
pub mod uri;

// The paths of earlier releases, kept for callers.
pub use inventory::own;
pub use publish::{dump, layout, page};
pub use serve as server;
pub use serve::{accept, watch};

pub use error::{Error, Result};
pub use source::{BaseOrigin, Source, SourceConfig};
