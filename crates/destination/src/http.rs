//! The HTTP client: the project's one HTTP layer, [`resourcesync_http`] (pool, retries with
//! backoff and jitter, `Retry-After`, rate per host, conditional GETs, bearer token, safe
//! redirects, explicit proxy, user agent), under the name this crate has always used.

pub use resourcesync_http::{
    Bandwidth, Category, Conditional, Http, HttpOptions, Proxy, Retry, USER_AGENT, body_error,
    header, parse_retry_after,
};
