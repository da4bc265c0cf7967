//! The HTTP layer of resourcesync, shared by the Destination, the WebSub hub and subscriber,
//! and the coming aggregator.
//!
//! - [`Http`] ([`client`]): a pooled client; retries with exponential backoff and jitter on
//!   connection errors, timeouts, 429 and 5xx honouring `Retry-After` (RFC 9110 §10.2.3); a
//!   request rate per host; conditional GETs (RFC 9110 §13.1); a bearer token sent to one
//!   origin only; the user agent `resourcesync/VERSION`. Its `reqwest::Client` is built once
//!   per set of options and shared ([`cache`]).
//! - [`BlockingHttp`] ([`blocking`]): the same client for synchronous callers, on a runtime of
//!   its own; blocks where called (never on an async task).
//! - [`client_builder`]: the settings every client of the project starts from: redirects
//!   limited and never from `https` to `http` ([`redirect`]), a proxy only when asked
//!   ([`Proxy`]), rustls.
//! - [`body`]: header values, bodies read under a limit; [`Bandwidth`], a limit on the bytes
//!   of bodies shared by several clients ([`Http::chunk`] reads under it).
//! - [`link`]: `Link` headers (RFC 8288) read with the one parser of
//!   [`resourcesync_model::discovery`], and written.
//! - [`reach`]: where requests may go: public addresses ([`reach::is_public`]), a resolver
//!   keeping only those, and a per-party allow list of origins ([`Reach`]) enforced before every
//!   request, on every redirect and at name resolution.
//! - [`Error`], with [`Error::category`]: retry, skip this resource, or stop.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod adaptive;
pub mod bandwidth;
pub mod blocking;
pub mod body;
pub mod cache;
pub mod client;
pub mod error;
pub mod link;
pub mod options;
pub mod reach;
pub mod redirect;

pub use adaptive::{HostLimit, Slot};
pub use bandwidth::Bandwidth;
pub use blocking::{BlockingHttp, BlockingResponse, SendBody};
pub use body::{body_error, header, header_values, read_limited, read_prefix};
pub use client::{
    Http, USER_AGENT, backoff, build, client_builder, host_key, install_tls_provider,
    no_system_roots, parse_retry_after, with_retries_until,
};
pub use error::{Category, Error, Result, Retry, chain};
pub use options::{Conditional, HttpOptions, Proxy};
pub use reach::{HostRule, Reach};
