//! The aggregator's error type.

use std::path::PathBuf;

/// Everything that can stop the aggregator (a Source that fails is not one of them: its
/// failure is its status, see [`crate::status`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is wrong: where, and what to change.
    #[error("{}{}: {message}", .file.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
    Config {
        /// The configuration file.
        file: PathBuf,
        /// The line, when the problem is on one.
        line: Option<usize>,
        /// What is wrong and what to do.
        message: String,
    },
    /// A file or directory could not be read or written.
    #[error("{}: {cause}", .path.display())]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The Destination engine failed before any Source ran (its store or state).
    #[error(transparent)]
    Destination(Box<resourcesync_destination::Error>),
    /// The state or store backend failed.
    #[error(transparent)]
    Store(Box<resourcesync_store::Error>),
    /// Republishing a Source's copies failed (its index, or the Source engine).
    #[error("republishing: {0}")]
    Republish(String),
    /// The Source engine that republishes the copies failed.
    #[error(transparent)]
    Source(Box<resourcesync_source::Error>),
    /// The web server could not start.
    #[error("serving on {addr}: {cause}")]
    Serve {
        /// The address asked.
        addr: String,
        /// Why.
        cause: String,
    },
}

impl From<resourcesync_destination::Error> for Error {
    fn from(e: resourcesync_destination::Error) -> Self {
        Error::Destination(Box::new(e))
    }
}

impl From<resourcesync_store::Error> for Error {
    fn from(e: resourcesync_store::Error) -> Self {
        Error::Store(Box::new(e))
    }
}

impl From<resourcesync_source::Error> for Error {
    fn from(e: resourcesync_source::Error) -> Self {
        Error::Source(Box::new(e))
    }
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }
}

/// The aggregator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
