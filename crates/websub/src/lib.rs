//! A W3C WebSub hub and the subscriber side of WebSub, for ResourceSync Change Notification
//! (Change Notification 1.0.1 §4, Framework Notification 1.0.1 §4).
//!
//! - [`hub`]: a conformant hub as an axum [`Router`](axum::Router): subscription requests
//!   (WebSub §5.1), verification of intent (§5.3), denial (§5.2), leases, content distribution
//!   with retries and `X-Hub-Signature` (§7, §7.1), publishing the ResourceSync way (the payload
//!   POSTed with `Link` rel=self and rel=hub, Change Notification §4.1) and the `hub.mode=publish`
//!   way (WebSub §6 note: the hub fetches the topic). Subscriptions and pending deliveries live in
//!   SQLite ([`store`]) and survive a restart.
//! - [`subscriber`]: a subscription request (following 307/308 to another hub, §5.1.2), the
//!   answer to a verification request (§5.3.1), and signature checking (§7.1.2) in constant
//!   time.
//! - [`link`]: `Link` header parsing and writing (RFC 8288), for discovery (WebSub §4): the
//!   project's HTTP layer's ([`resourcesync_http::link`]), re-exported.
//! - [`signature`]: HMAC signatures (WebSub §7.1).
//! - [`reach`]: which addresses the hub may send requests to (no private ones by default).
//! - [`access`]: the access log of every server of the project (a line per request).
//! - [`listener`]: a listener whose idle connections close (every server of the project uses it).
//! - [`server`]: the hub's HTTP/1.1-only server.
//! - [`prefix`]: URL prefixes compared as parsed URLs (the hub's allowed topics).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod access;
pub mod hub;
pub mod listener;
pub mod prefix;
pub mod reach;
pub mod server;
pub mod signature;
pub mod store;
pub mod subscriber;

pub use hub::{Hub, HubOptions};
use resourcesync_http::Category;
pub use resourcesync_http::link;
pub use subscriber::{Subscription, subscribe, unsubscribe};

/// What can go wrong. Each error says its cause in its message and exposes no `source()`, so
/// that a chain printed in full says each cause once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The hub's database.
    #[error("hub state {path}: {cause}")]
    State {
        /// The database file.
        path: String,
        /// Why (said in the message, not exposed as `source()`).
        cause: rusqlite::Error,
    },
    /// A request parameter is missing or wrong (answered with 400).
    #[error("{0}")]
    BadRequest(String),
    /// An HTTP exchange failed.
    #[error("{url}: {message}")]
    Http {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// A hub answered a subscription request with something else than 202.
    #[error("hub {hub} answered {status}: {body}")]
    Refused {
        /// The hub URL.
        hub: String,
        /// The status code.
        status: u16,
        /// The start of the response body (WebSub §5.1.2: a description of the error).
        body: String,
    },
    /// A signature is missing, malformed, of an unknown method, or does not match.
    #[error("signature: {0}")]
    Signature(&'static str),
    /// Configuration.
    #[error("{0}")]
    Config(String),
    /// The hub has no room for a payload: it is larger than the bytes it keeps for pending
    /// deliveries ([`HubOptions::max_pending_bytes`]).
    #[error("{0}")]
    Full(String),
    /// No random numbers from the operating system.
    #[error("no randomness: {0}")]
    Random(String),
    /// A background task failed.
    #[error("task: {0}")]
    Task(String),
}

impl Error {
    /// What a caller can do about it ([`Category`]): an HTTP exchange that failed and a hub
    /// with no room yet are retried (deliveries back off, WebSub §7); a bad request, a refusal
    /// and a bad signature concern that one request; the state, the configuration, the
    /// operating system's randomness and a failed task stop.
    pub fn category(&self) -> Category {
        match self {
            Error::Http { .. } | Error::Full(_) => Category::Retry,
            Error::BadRequest(_) | Error::Refused { .. } | Error::Signature(_) => Category::Skip,
            Error::State { .. } | Error::Config(_) | Error::Random(_) | Error::Task(_) => {
                Category::Stop
            }
        }
    }
}

/// Result of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `n` random bytes from the operating system, as lowercase hex (`2n` characters): challenges,
/// secrets, unguessable callback tokens (WebSub §5.1.1, §8.2).
pub fn random_token(n: usize) -> Result<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(|e| Error::Random(e.to_string()))?;
    Ok(signature::hex(&buf))
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
