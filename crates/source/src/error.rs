//! The source crate's error type.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong publishing or serving a Source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The state database failed.
    #[error("state database {path}: {source}")]
    State {
        /// The database file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// Writing a document failed.
    #[error(transparent)]
    Document(#[from] resourcesync_model::Error),
    /// Writing a ZIP package failed.
    #[error("{path}: {source}")]
    Zip {
        /// The package.
        path: PathBuf,
        /// The ZIP error.
        #[source]
        source: zip::result::ZipError,
    },
    /// The configuration is not usable.
    #[error("configuration: {0}")]
    Config(String),
    /// Listening or serving on a socket failed.
    #[error("{addr}: {source}")]
    Net {
        /// The address concerned.
        addr: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A background task (scan, publish, server) failed or was cancelled.
    #[error("task: {0}")]
    Task(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
