//! The one error type of the crate, and what a caller does about it ([`Category`]).

use std::time::Duration;

/// What a caller does about an error: the project's one answer (retry, skip, stop), from
/// [`resourcesync_model::Category`].
pub use resourcesync_model::Category;

/// Everything that can go wrong in an HTTP exchange. Each error says its cause in its message
/// and exposes no `source()`, so that a chain printed in full says each cause once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An HTTP status that is not success.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
        /// The `Retry-After` delay, if the server sent one.
        retry_after: Option<Duration>,
    },
    /// A transport error: connection, timeout, truncated body, too many redirects, a redirect
    /// refused.
    #[error("{url}: {message}")]
    Transport {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
        /// Whether trying again may help (connection errors, timeouts, cut bodies).
        transient: bool,
    },
    /// A body longer than the caller's limit.
    #[error("{url}: the body is longer than {limit} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A request the client's [`crate::Reach`] does not allow (another origin, a redirect
    /// there, a name resolving only to private addresses): refused before anything was sent
    /// to it, and never retried.
    #[error("{url}: {reason}")]
    Refused {
        /// The URL.
        url: String,
        /// Why, and what the user can do about it.
        reason: String,
    },
    /// The client could not be built with the options given.
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// What to do about this error.
    pub fn category(&self) -> Category {
        match self {
            Error::Transport {
                transient: true, ..
            } => Category::Retry,
            Error::Status { status, .. } if *status == 429 || (500..600).contains(status) => {
                Category::Retry
            }
            Error::Status { .. }
            | Error::Transport { .. }
            | Error::TooLarge { .. }
            | Error::Refused { .. } => Category::Skip,
            Error::Config(_) => Category::Stop,
        }
    }

    /// Whether trying the same request again may succeed ([`Category::Retry`]).
    pub fn is_transient(&self) -> bool {
        self.category() == Category::Retry
    }

    /// The delay the server asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// An error [`crate::Http::with_retries`] can retry: the crate's own, or a caller's that wraps
/// it.
pub trait Retry {
    /// Whether trying the same request again may succeed.
    fn is_transient(&self) -> bool;
    /// The delay the server asked for, if any.
    fn retry_after(&self) -> Option<Duration>;
}

impl Retry for Error {
    fn is_transient(&self) -> bool {
        Error::is_transient(self)
    }
    fn retry_after(&self) -> Option<Duration> {
        Error::retry_after(self)
    }
}

/// An error with its causes, each said once (reqwest's own message leaves out why a connection
/// failed; hyper and reqwest repeat some causes at several levels).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut message = e.to_string();
    let mut src = e.source();
    // "error sending request for url (URL)" says nothing the caller does not (it names the
    // URL itself): its causes say what happened.
    if message.starts_with("error sending request") {
        if let Some(s) = src {
            message = s.to_string();
            src = s.source();
        }
    }
    while let Some(s) = src {
        let text = s.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        src = s.source();
    }
    roots_hint(message, crate::client::no_system_roots())
}

/// `message`, with what to install when the machine has no CA certificate (`no_roots`:
/// [`crate::client::no_system_roots`]) and the message is a certificate's refusal: a client
/// built without roots trusts no https server (the hub's and the push subscription's clients;
/// [`crate::Http`] refuses such URLs before asking).
fn roots_hint(mut message: String, no_roots: bool) -> String {
    if no_roots && message.contains("certificate") {
        message.push_str(
            " (this machine's trust store has no CA certificate: install the system's CA \
             certificates, the ca-certificates package)",
        );
    }
    message
}

/// A reqwest error as a transport error, or as [`Error::Refused`] when a cause is a refusal of
/// the client's reach (a redirect out of it, a name resolving only to private addresses).
pub(crate) fn transport(url: &str, e: &reqwest::Error) -> Error {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(u) = s.downcast_ref::<crate::reach::Unreachable>() {
            return Error::Refused {
                url: url.to_owned(),
                reason: u.0.clone(),
            };
        }
        src = s.source();
    }
    Error::Transport {
        url: url.to_owned(),
        message: chain(e),
        transient: !e.is_redirect() && !e.is_builder(),
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_refused_on_a_machine_without_roots_says_what_to_install() {
        let refused = "invalid peer certificate: UnknownIssuer".to_owned();
        assert!(roots_hint(refused.clone(), true).contains("ca-certificates package"));
        assert_eq!(roots_hint(refused.clone(), false), refused);
        let other = "connection refused".to_owned();
        assert_eq!(roots_hint(other.clone(), true), other);
    }

    #[test]
    fn categories() {
        let status = |status| Error::Status {
            url: "u".into(),
            status,
            retry_after: None,
        };
        assert_eq!(status(503).category(), Category::Retry);
        assert_eq!(status(429).category(), Category::Retry);
        assert_eq!(status(404).category(), Category::Skip);
        assert_eq!(status(403).category(), Category::Skip);
        let transport = |transient| Error::Transport {
            url: "u".into(),
            message: "m".into(),
            transient,
        };
        assert_eq!(transport(true).category(), Category::Retry);
        assert_eq!(transport(false).category(), Category::Skip);
        let big = Error::TooLarge {
            url: "u".into(),
            limit: 1,
        };
        assert_eq!(big.category(), Category::Skip);
        let refused = Error::Refused {
            url: "u".into(),
            reason: "r".into(),
        };
        assert_eq!(refused.category(), Category::Skip);
        assert!(!refused.is_transient());
        assert_eq!(Error::Config("x".into()).category(), Category::Stop);
    }
}
