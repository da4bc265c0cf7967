//! The source crate's error type.

use std::io;

use resourcesync_model::Category;
use std::path::PathBuf;

/// Everything that can go wrong publishing or serving a Source. Each error says its cause in
/// its message and exposes no `source()` (a model error is the model's, transparently), so
/// that a chain printed in full says each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory could not be read or written.
    #[error("{}: {cause}", .path.display())]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The I/O error (said in the message, not exposed as `source()`).
        cause: io::Error,
    },
    /// The state database failed.
    #[error("state database {}: {cause}", .path.display())]
    State {
        /// The database file.
        path: PathBuf,
        /// The SQLite error (said in the message, not exposed as `source()`).
        cause: rusqlite::Error,
    },
    /// Writing a document failed.
    #[error(transparent)]
    Document(#[from] resourcesync_model::Error),
    /// Writing a ZIP package failed.
    #[error("{}: {cause}", .path.display())]
    Zip {
        /// The package.
        path: PathBuf,
        /// The ZIP error (said in the message, not exposed as `source()`).
        cause: zip::result::ZipError,
    },
    /// The configuration is not usable.
    #[error("configuration: {0}")]
    Config(String),
    /// Listening or serving on a socket failed.
    #[error("{addr}: {cause}{}", net_hint(cause))]
    Net {
        /// The address concerned.
        addr: String,
        /// The I/O error (said in the message, not exposed as `source()`).
        cause: io::Error,
    },
    /// An inventory that could not list, or listed against its contract (see
    /// [`crate::inventory`]): nothing is recorded from such a listing.
    #[error("inventory: {0}")]
    Inventory(String),
    /// A background task (scan, publish, server) failed or was cancelled.
    #[error("task: {0}")]
    Task(String),
    /// The PostgreSQL inventory's database failed (`PgInventory`).
    #[cfg(feature = "postgres")]
    #[error("inventory database {target}: {}", pg_message(cause))]
    Postgres {
        /// The server, database and table (no user nor password).
        target: String,
        /// The client's error (said in the message, not exposed as `source()`).
        cause: postgres::Error,
    },
    /// The PostgreSQL inventory's table (or view) is not in the database.
    #[cfg(feature = "postgres")]
    #[error(
        "inventory database {target}: the table {table} does not exist (nor a view of that \
         name): create it, for example `CREATE TABLE {table} (path text PRIMARY KEY, updated_at \
         timestamptz NOT NULL DEFAULT now(), body bytea)` (the columns are in \
         docs/inventories.md), or name the table that holds the resources with \
         `table=SCHEMA.NAME` in the inventory's URL"
    )]
    MissingTable {
        /// The server, database and table (no user nor password).
        target: String,
        /// The table, as given (`table=`, default `resources`).
        table: String,
    },
}

impl Error {
    /// What a caller can do about it ([`Category`]): an unreadable file is skipped (the scan
    /// reports it and goes on; a file that vanished or changed is read again by the next scan),
    /// a full or read-only disk stops; a document refused by the model concerns that document;
    /// the state database, the configuration, a socket that cannot be bound, an inventory that
    /// breaks its contract and a failed task stop.
    pub fn category(&self) -> Category {
        match self {
            Error::Io { cause, .. } => Category::of_io(cause),
            Error::Document(e) => e.category(),
            Error::Zip { .. } => Category::Skip,
            Error::State { .. }
            | Error::Config(_)
            | Error::Net { .. }
            | Error::Inventory(_)
            | Error::Task(_) => Category::Stop,
            // A connection lost may come back; anything else (a refused login, a missing
            // table) stops.
            #[cfg(feature = "postgres")]
            Error::Postgres { cause, .. } if cause.is_closed() => Category::Retry,
            #[cfg(feature = "postgres")]
            Error::Postgres { .. } | Error::MissingTable { .. } => Category::Stop,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, cause: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }
}

/// A PostgreSQL error in full: the client's word for it ("db error") says nothing, the
/// server's message (or the I/O error) does.
#[cfg(feature = "postgres")]
fn pg_message(e: &postgres::Error) -> String {
    use std::error::Error as _;
    match e.source() {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}

/// What the user can do about a socket error, when there is something to say.
fn net_hint(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::AddrInUse => {
            ": another program listens there; stop it or choose another --listen (port 0 picks a free one)"
        }
        io::ErrorKind::AddrNotAvailable => {
            ": this machine has no such address; give one of its own (127.0.0.1 for this machine only)"
        }
        io::ErrorKind::InvalidInput => ": give HOST:PORT, such as 127.0.0.1:8080",
        io::ErrorKind::PermissionDenied => {
            ": ports below 1024 need privileges; choose a port from 1024 up"
        }
        _ => "",
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
