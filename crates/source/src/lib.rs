//! A ResourceSync Source: the inventory of a directory, change tracking in SQLite, every
//! capability document, dumps, and an HTTP server.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod accept;
pub mod dump;
pub mod error;
pub mod inventory;
pub mod layout;
pub mod notify;
pub mod own;
pub mod page;
pub mod publish;
pub mod scan;
mod served;
pub mod server;
pub mod source;
pub mod state;
pub mod uri;
pub mod watch;

pub use error::{Error, Result};
pub use source::{BaseOrigin, Source, SourceConfig};
