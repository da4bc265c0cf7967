//! The one error type of the crate.

use std::time::Duration;

use resourcesync_http::Error as H;
use resourcesync_model::Category;

use crate::report::{Failed, FailureKind};

/// Everything that can go wrong on the Destination side. Each error says its cause in its
/// message and exposes no `source()` (a store error is the store's, transparently), so that a
/// chain printed in full says each cause once. Errors returned by [`crate::sync()`]
/// and [`crate::audit()`] are fatal (exit status 2); a resource that fails is reported in the
/// report instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No ResourceSync document could be found from the URL given.
    #[error("discovery from {url}: {message}")]
    Discovery {
        /// The URL discovery started from.
        url: String,
        /// What was tried and what failed.
        message: String,
    },
    /// The Source offers several sets of resources and none was chosen (Z39.99-2014 §8).
    #[error(
        "{url} lists {} Capability Lists; choose one with --set URL:\n  {}",
        .found.len(),
        .found.join("\n  ")
    )]
    SeveralSets {
        /// The Source Description.
        url: String,
        /// The Capability Lists it lists.
        found: Vec<String>,
    },
    /// An HTTP exchange failed: a status that is not success, a transport error (connection,
    /// timeout, truncated body, too many redirects), a body over its limit, a request outside
    /// the client's reach; said and categorized as the HTTP layer says it.
    #[error(transparent)]
    Http(#[from] resourcesync_http::Error),
    /// A document could not be read.
    #[error("{cause}{}", document_hint(.cause))]
    Document {
        /// The model's error, which names the document, line and column.
        cause: resourcesync_model::Error,
    },
    /// A document is readable but not what was expected (wrong capability, missing link).
    #[error("{url}: {message}")]
    BadDocument {
        /// The document.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The Change Lists do not reach back to the cursor: a baseline diff is needed
    /// (Z39.99-2014 §12.1 `from`).
    #[error("{}", history_gap(.url, .from.as_deref(), .cursor))]
    HistoryGap {
        /// The Change List (or its index) read.
        url: String,
        /// Where the history starts (`None`: the document gives no `from`).
        from: Option<String>,
        /// The cursor.
        cursor: String,
    },
    /// A Change List whose entries go back in time (Z39.99-2014 §12.1: "must be provided in
    /// forward chronological order"). Which of several changes of a resource is the last cannot
    /// be trusted, so the run diffs against the Resource List instead.
    #[error(
        "{url}, line {line}: {loc} changed at {at}, before the entry above it ({previous}); \
         Change List entries must be in forward chronological order (RS-12.1-chronological, \
         Z39.99-2014 §12.1)"
    )]
    ChangesOutOfOrder {
        /// The Change List.
        url: String,
        /// The line of the entry.
        line: u64,
        /// The entry's `<loc>`.
        loc: String,
        /// The entry's time.
        at: String,
        /// The later time of an entry before it.
        previous: String,
    },
    /// An index nested deeper than [`crate::discover::docs::MAX_INDEX_DEPTH`]: its parts are not read,
    /// and a list read in part is not taken for the whole (Z39.99-2014 §10.2, §12.2).
    #[error(
        "{url}: index nested deeper than {depth} levels: refused (Z39.99-2014 §10.2, §12.2: an \
         index lists lists); tell the Source's maintainer"
    )]
    IndexTooDeep {
        /// The index found too deep.
        url: String,
        /// The deepest nesting followed.
        depth: usize,
    },
    /// A URI that cannot be mapped to a path under the destination.
    #[error("refused {uri}: {reason}")]
    Unmappable {
        /// The URI.
        uri: String,
        /// Why.
        reason: String,
    },
    /// A copy refused because its path under the destination is another URI's (two URIs never
    /// share a copy; see the module `owner`): the other URI's copy is left as it is.
    #[error(
        "refused {uri}: its path {path} under the destination is taken by {owner}{}; two \
         URIs never share a copy: to keep both, sync one of them to another destination (or with \
         another --base-url), or leave one out (--exclude, or `exclude` of the aggregator's \
         source)",
        if *.owner_gone { " (kept after its Source deleted it: --delete removes it)" } else { "" }
    )]
    PathTaken {
        /// The URI refused.
        uri: String,
        /// Its path under the destination.
        path: String,
        /// The URI whose copy (or copy in progress) has that path.
        owner: String,
        /// The other URI's copy was kept after its Source deleted it.
        owner_gone: bool,
    },
    /// A dump package was refused as a whole (Z39.99-2014 §11, §13): its length or digest is
    /// not the published one, it is not a readable ZIP, its manifest is missing or invalid, a
    /// `path` is unsafe, an entry is not listed in the manifest, or it inflates too much.
    #[error("package {url}: {message}")]
    Package {
        /// The package.
        url: String,
        /// Why it was refused.
        message: String,
    },
    /// A patch (Z39.99-2014 §14.4) could not be used; the resource is fetched whole instead.
    #[error("patch {url}: {message}")]
    Patch {
        /// The patch.
        url: String,
        /// Why it could not be used.
        message: String,
    },
    /// The Resource List is older than the Resource Dump applied before it, so it is not diffed
    /// against the copies (Z39.99-2014 §10.1, §11.1 `at`).
    #[error("the Resource List of {at} is older than the Resource Dump of {dump_at}")]
    ListOlderThanDump {
        /// The Resource List's `at`.
        at: String,
        /// The Resource Dump's `at`.
        dump_at: String,
    },
    /// The store or the state failed.
    #[error(transparent)]
    Store(#[from] resourcesync_store::Error),
    /// A failed change could not be recorded as pending in the state (a full disk, most often):
    /// the cursor was not moved, so that the next run sees the change again.
    #[error(
        "{message}; the cursor was not moved: fix what the error says (a full disk, a database \
         that refused the write or is out of connections) and run sync again, which applies what \
         this run could not record"
    )]
    StateWrite {
        /// What failed, naming the state database and the error.
        message: String,
    },
    /// The staging database (lists being diffed or collapsed) failed.
    #[error("staging database: {0}")]
    Staging(rusqlite::Error),
    /// A local I/O operation failed.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        cause: std::io::Error,
    },
    /// The overall time limit was reached.
    #[error("time limit of {0:?} reached (work done so far is kept)")]
    Deadline(Duration),
    /// The options do not make sense.
    #[error("{0}")]
    Config(String),
    /// A worker task failed.
    #[error("internal task failed: {0}")]
    Task(String),
}

/// What to do about a document the reader refused (it names the document, the line and the rule).
fn document_hint(cause: &resourcesync_model::Error) -> &'static str {
    use resourcesync_model::Error as M;
    match cause {
        M::Malformed { .. } | M::Forbidden { .. } | M::Limit { .. } | M::NotSitemap { .. } => {
            " (the Source's document cannot be used: tell the Source's maintainer; `resourcesync \
             validate URL` lists its problems)"
        }
        _ => "",
    }
}

/// The text of [`Error::HistoryGap`].
fn history_gap(url: &str, from: Option<&str>, cursor: &str) -> String {
    match from {
        Some(from) => format!(
            "{url}: the change history starts at {from}, after the cursor {cursor} (Z39.99-2014 \
             §12.1 `from`): the changes in between are not known"
        ),
        None => format!(
            "{url}: no `from` in its <rs:md> (Z39.99-2014 §12.1 requires one), so the change \
             history cannot be shown to reach back to the cursor {cursor}; tell the Source's \
             maintainer"
        ),
    }
}

impl Error {
    /// What a caller can do about it ([`Category`]): the client's errors by theirs (a network
    /// failure, 429 or 5xx is retried; another status concerns that resource), the store's by
    /// its (a body other than the published one is skipped; a full disk stops); a document
    /// that cannot be read or is wrong, a URI that maps to no path, a package or patch refused
    /// concern that item; discovery, configuration, state and staging failures, a history
    /// that cannot be followed and a deadline stop the run.
    pub fn category(&self) -> Category {
        match self {
            Error::Http(e) => e.category(),
            Error::Document { cause } => cause.category(),
            Error::Store(e) => e.category(),
            Error::Io { cause, .. } => Category::of_io(cause),
            Error::BadDocument { .. }
            | Error::Unmappable { .. }
            | Error::PathTaken { .. }
            | Error::Package { .. }
            | Error::Patch { .. } => Category::Skip,
            Error::Discovery { .. }
            | Error::SeveralSets { .. }
            | Error::HistoryGap { .. }
            | Error::ChangesOutOfOrder { .. }
            | Error::IndexTooDeep { .. }
            | Error::ListOlderThanDump { .. }
            | Error::StateWrite { .. }
            | Error::Staging(_)
            | Error::Deadline(_)
            | Error::Config(_)
            | Error::Task(_) => Category::Stop,
        }
    }

    /// What a failure with this error says of the body the Source serves now: other than the
    /// one listed (a length or digest other than the published one), or gone (404, 410).
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            Error::Store(e) if e.is_verification() => FailureKind::Changed,
            Error::Store(_) => FailureKind::Store,
            Error::Http(H::Status {
                status: 404 | 410, ..
            }) => FailureKind::Gone,
            _ => FailureKind::Other,
        }
    }

    /// Whether trying the same request again may succeed: connection errors, timeouts, cut
    /// bodies, 429 and 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Http(e) => e.is_transient(),
            _ => false,
        }
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Http(e) => e.retry_after(),
            _ => None,
        }
    }

    pub(crate) fn io(what: impl Into<String>, cause: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            cause,
        }
    }
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed {
            category: e.category(),
            kind: e.failure_kind(),
            message: e.to_string(),
        }
    }
}

impl From<resourcesync_store::Error> for Failed {
    fn from(e: resourcesync_store::Error) -> Failed {
        Failed::from(Error::Store(e))
    }
}

impl From<resourcesync_model::Error> for Error {
    fn from(cause: resourcesync_model::Error) -> Self {
        Error::Document { cause }
    }
}

impl resourcesync_http::Retry for Error {
    fn is_transient(&self) -> bool {
        Error::is_transient(self)
    }
    fn retry_after(&self) -> Option<Duration> {
        Error::retry_after(self)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Staging(e)
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::Task(e.to_string())
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// DEST names something that is not a directory (a regular file, say): the error of `sync`
/// and `audit` alike, `what` saying what cannot be done there and what to do.
pub(crate) fn not_a_directory(dest: &std::path::Path, what: &str) -> Error {
    Error::Config(format!("{} is not a directory: {what}", dest.display()))
}
