//! The one error type of the crate.

use std::path::PathBuf;

use resourcesync_model::{Category, HashAlg};

/// Everything that can go wrong storing copies or state. Each error says its cause in its
/// message and exposes no `source()`, so that a chain printed in full says each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A path that could leave the destination directory, or that no file system accepts.
    #[error("unsafe path {path:?}: {reason}")]
    UnsafePath {
        /// The path (or segment) refused, cut to 80 characters.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// An I/O operation failed.
    #[error("{}: {cause}", .path.display())]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The I/O error (said in the message, not exposed as `source()`).
        cause: std::io::Error,
    },
    /// A path exists but is not what is needed (a file where a directory must be, a symbolic
    /// link inside the destination, a directory where a file must be).
    #[error("{}: {reason}", .path.display())]
    Conflict {
        /// The path.
        path: PathBuf,
        /// What is in the way.
        reason: &'static str,
    },
    /// The body is longer than the limit (the published length, or the maximum size).
    #[error("body longer than {limit} bytes ({what}): cut off and rejected")]
    TooLong {
        /// The limit.
        limit: u64,
        /// Which limit: "published length" or "maximum resource size".
        what: &'static str,
    },
    /// The body's length is not the published one (Z39.99-2014 §7 `length`).
    #[error("length {actual} is not the published length {expected}")]
    LengthMismatch {
        /// The published length.
        expected: u64,
        /// The length received.
        actual: u64,
    },
    /// A digest is not the published one (Z39.99-2014 §7 `hash`).
    #[error("{alg} digest {actual} is not the published {expected}")]
    DigestMismatch {
        /// The algorithm.
        alg: HashAlg,
        /// The published digest.
        expected: String,
        /// The digest of the body received.
        actual: String,
    },
    /// The state database failed.
    #[error("state database {}: {cause}", .path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The SQLite error (said in the message, not exposed as `source()`).
        cause: rusqlite::Error,
    },
    /// Another process holds the state database.
    #[error(
        "state database {} is in use by another process (one sync per destination at a time)",
        .path.display()
    )]
    Locked {
        /// The database file.
        path: PathBuf,
    },
    /// A write fenced by a lease, or the completion of a claimed work item, came after the
    /// lease or claim expired or changed hands: nothing of its batch was written.
    #[error("the lease on {name:?} is no longer held by {holder:?}: nothing written")]
    LeaseLost {
        /// What the lease was on (a Source, or a work item's key).
        name: String,
        /// The worker that held it.
        holder: String,
    },
    /// The PostgreSQL state database failed (`PgState`).
    #[cfg(feature = "postgres")]
    #[error("state database {target}: {}", pg_message(cause))]
    Postgres {
        /// The server, database and schema (no user nor password).
        target: String,
        /// The client's error (said in the message, not exposed as `source()`).
        cause: postgres::Error,
    },
    /// An S3-compatible object store refused a request or could not be reached (`S3Store`).
    #[cfg(feature = "s3")]
    #[error("S3 {op} of {}: {}", s3_target(bucket, key), s3_message(*status, code.as_deref(), message))]
    S3 {
        /// What was being done (`PutObject`, `ListObjectsV2`, ...).
        op: &'static str,
        /// The bucket.
        bucket: String,
        /// The object's key in the bucket (empty for a request on the bucket), cut to 200
        /// characters.
        key: String,
        /// The HTTP status of the answer, if one came.
        status: Option<u16>,
        /// The server's error code (`AccessDenied`, `NoSuchBucket`, `SlowDown`), or
        /// `Connection` and `Timeout` when no answer came.
        code: Option<String>,
        /// The server's message, or what went wrong.
        message: String,
    },
    /// A setting is not one this crate can use (a PostgreSQL schema name).
    #[error("{what}: {reason}")]
    Config {
        /// What is set.
        what: String,
        /// Why it is refused.
        reason: String,
    },
    /// The state database's schema is of a newer version than this program knows: a newer
    /// release migrated it (another worker sharing it, or this host upgraded and downgraded).
    /// Refused untouched; only a release that knows the version can use it.
    #[error(
        "state database {target}: schema version {found} is newer than this program knows \
         (1 to {known}): a newer release of resourcesync migrated it; upgrade this program to \
         that release (every worker sharing a state must run one that knows its schema)"
    )]
    NewerSchema {
        /// The database (file, or server, database and schema).
        target: String,
        /// The schema's version.
        found: i64,
        /// The newest version this program knows.
        known: i64,
    },
    /// A value in the state database cannot be read back.
    #[error("state database {}: {message}", .path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// What a caller can do about it ([`Category`]): a body that is not the published one, a
    /// path that is unsafe or taken, concern one resource (skipped, reported; the Source may have
    /// changed it since it was listed); full, read-only or forbidden storage and a state
    /// database that is corrupt, unreadable or held by another process stop the run; an I/O
    /// error otherwise by its kind ([`Category::of_io`]).
    pub fn category(&self) -> Category {
        match self {
            Error::UnsafePath { .. }
            | Error::Conflict { .. }
            | Error::TooLong { .. }
            | Error::LengthMismatch { .. }
            | Error::DigestMismatch { .. } => Category::Skip,
            Error::Io { cause, .. } => Category::of_io(cause),
            // A lease lost: this worker's share of the work is someone else's now.
            Error::Sqlite { .. }
            | Error::Locked { .. }
            | Error::Corrupt { .. }
            | Error::NewerSchema { .. }
            | Error::LeaseLost { .. }
            | Error::Config { .. } => Category::Stop,
            #[cfg(feature = "postgres")]
            Error::Postgres { cause, .. } => pg_category(cause),
            #[cfg(feature = "s3")]
            Error::S3 { status, code, .. } => s3_category(*status, code.as_deref()),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }

    /// Whether the error is a verification failure of a body (length or digest): the body was
    /// wrong, not the destination.
    pub fn is_verification(&self) -> bool {
        matches!(
            self,
            Error::TooLong { .. } | Error::LengthMismatch { .. } | Error::DigestMismatch { .. }
        )
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

/// What a caller can do about a PostgreSQL error: a connection lost or refused, a server
/// shutting down or out of connections, a serialization failure or a deadlock may pass
/// (SQLSTATE classes 08, 40, 57P, 53300); a value the server refuses (class 22, data exception;
/// 54000, e.g. a URI too long for an index) concerns the one row; anything else (a refused
/// login, a missing privilege, a broken schema) stops the run.
#[cfg(feature = "postgres")]
fn pg_category(e: &postgres::Error) -> Category {
    use std::error::Error as _;
    if e.is_closed() {
        return Category::Retry;
    }
    if let Some(code) = e.code() {
        let c = code.code();
        return if c.starts_with("08")
            || c.starts_with("40")
            || c.starts_with("57P")
            || matches!(c, "53300" | "55P03" | "57014")
        {
            Category::Retry
        } else if c.starts_with("22") || c == "54000" {
            Category::Skip
        } else {
            Category::Stop
        };
    }
    // No SQLSTATE: the connection failed (an I/O error, a timeout) or the client refused
    // something (the URL, a value it cannot convert).
    match e.source().and_then(|s| s.downcast_ref::<std::io::Error>()) {
        Some(io) if Category::of_io(io) == Category::Stop => Category::Stop,
        Some(_) => Category::Retry,
        None if e.to_string().starts_with("timeout") => Category::Retry,
        None => Category::Stop,
    }
}

/// Where an S3 request went: `bucket/key` (or the bucket).
#[cfg(feature = "s3")]
fn s3_target(bucket: &str, key: &str) -> String {
    if key.is_empty() {
        format!("bucket {bucket:?}")
    } else {
        format!("{bucket}/{key}")
    }
}

/// What the server said, and what the user can do about it.
#[cfg(feature = "s3")]
fn s3_message(status: Option<u16>, code: Option<&str>, message: &str) -> String {
    let mut s = String::new();
    if let Some(st) = status {
        s.push_str(&format!("HTTP {st}"));
    }
    if let Some(c) = code {
        s.push_str(&format!("{}{c}", if s.is_empty() { "" } else { " " }));
    }
    if !message.is_empty() {
        s.push_str(&format!(
            "{}{message}",
            if s.is_empty() { "" } else { ": " }
        ));
    }
    let hint = match (status, code) {
        (_, Some("NoSuchBucket")) => "create the bucket, or correct its name in the s3:// URL",
        (_, Some("InvalidAccessKeyId" | "SignatureDoesNotMatch")) => {
            "check the access key id and secret (in the s3:// URL, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) and the region (?region=)"
        }
        (Some(401 | 403), _) => {
            "check the access key id and secret, that the key may read and write the bucket, and the region (?region=)"
        }
        (_, Some("Connection")) => {
            "is the server running at the endpoint of the s3:// URL, and reachable?"
        }
        (Some(507), _) | (_, Some("QuotaExceeded")) => {
            "the bucket is full: free space or raise its quota"
        }
        _ => "",
    };
    if !hint.is_empty() {
        s.push_str(&format!(" ({hint})"));
    }
    s
}

/// What a caller can do about an S3 error: no answer, a timeout, a server busy or failing
/// (5xx, 429, `SlowDown`) may pass; a body the server refuses (`BadDigest`, `EntityTooLarge`,
/// `InvalidDigest`: the body changed on its way, or is too large for the bucket) concerns the
/// one object; anything else (a refused key, a missing bucket, a full bucket, a request the
/// server does not understand) stops the run.
#[cfg(feature = "s3")]
fn s3_category(status: Option<u16>, code: Option<&str>) -> Category {
    match (status, code) {
        (Some(507), _) | (_, Some("QuotaExceeded")) => Category::Stop,
        (_, Some("Connection" | "Timeout" | "SlowDown" | "RequestTimeout" | "InternalError")) => {
            Category::Retry
        }
        (Some(s), _) if s == 429 || (500..600).contains(&s) => Category::Retry,
        (
            _,
            Some(
                "BadDigest" | "EntityTooLarge" | "InvalidDigest" | "KeyTooLongError" | "NoSuchKey",
            ),
        ) => Category::Skip,
        _ => Category::Stop,
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// [`RelPath`](crate::RelPath)'s refusals (defined in the model) as this crate's
/// [`Error::UnsafePath`].
impl From<resourcesync_model::Error> for Error {
    fn from(e: resourcesync_model::Error) -> Self {
        match e {
            resourcesync_model::Error::UnsafePath { path, reason } => {
                Error::UnsafePath { path, reason }
            }
            other => Error::Io {
                path: PathBuf::new(),
                cause: std::io::Error::other(other.to_string()),
            },
        }
    }
}
