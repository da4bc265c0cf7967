//! The simulator's error.

/// What can go wrong in a simulation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot be simulated.
    #[error("invalid simulation: {0}")]
    Config(String),
    /// The combination is not implemented yet.
    #[error("{0}")]
    Unsupported(String),
    /// A real run went wrong (a task failed, the copies are not what the run expects).
    #[error("real run: {0}")]
    Run(String),
    /// Our Source failed in real mode.
    #[error("Source: {0}")]
    Source(resourcesync_source::Error),
    /// Our Destination failed in real mode.
    #[error("Destination: {0}")]
    Destination(resourcesync_destination::Error),
    /// The Destination's state could not be read or written in real mode.
    #[error("Destination state: {0}")]
    Store(resourcesync_store::Error),
    /// A file or socket.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        cause: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("plot {path}: {message}")]
    Plot {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A document could not be sized by the writer.
    #[error("sizing documents: {0}")]
    Model(resourcesync_model::Error),
}

/// Each variant says its cause in its message and exposes no `source()`, so that a chain
/// printed in full says each cause once.
macro_rules! from_cause {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::$v(e)
            }
        }
    )*};
}

from_cause! {
    resourcesync_source::Error => Source,
    resourcesync_destination::Error => Destination,
    resourcesync_store::Error => Store,
    resourcesync_model::Error => Model,
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, cause: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            cause,
        }
    }
}

/// The simulator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
