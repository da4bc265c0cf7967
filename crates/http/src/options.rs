//! How the client behaves: [`HttpOptions`], [`Proxy`], and the validators of a conditional GET.

use std::sync::Arc;
use std::time::Duration;

use crate::bandwidth::Bandwidth;

/// Which proxy requests go through. Nothing is read from the environment unless asked
/// ([`Proxy::FromEnvironment`]): a library that fetches on behalf of others does not let
/// `HTTP_PROXY` decide where its requests (and bearer tokens) go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Proxy {
    /// Direct connections; `HTTP_PROXY` and the other variables are ignored.
    #[default]
    None,
    /// The proxy named by `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY`, as curl reads
    /// them.
    FromEnvironment,
    /// Every request through this proxy URL.
    Url(String),
}

/// How the client behaves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Connections kept alive per host.
    pub pool_per_host: usize,
    /// The most requests in flight per host (HTTP/2 streams included): the number adapts
    /// below it, from 32 (more when the first round trips are long), to what the host answers
    /// ([`crate::adaptive`]).
    pub max_in_flight: usize,
    /// Time to establish a connection.
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a response.
    pub read_timeout: Duration,
    /// Longest time for one whole request, body included.
    pub request_timeout: Duration,
    /// Attempts after the first one for transient failures.
    pub retries: u32,
    /// First backoff delay; doubled per attempt, with jitter.
    pub backoff_base: Duration,
    /// Longest backoff delay, and longest `Retry-After` honoured.
    pub backoff_max: Duration,
    /// Requests per second per host (`None`: unlimited).
    pub rate: Option<f64>,
    /// A bearer token, sent only to the host discovery started from.
    pub token: Option<String>,
    /// Most redirects followed (0: none). A redirect from `https` to `http` is never followed,
    /// nor one to another scheme (see [`crate::redirect`]).
    pub max_redirects: usize,
    /// The proxy (none by default).
    pub proxy: Proxy,
    /// HTTP/2 only, without negotiation on plain `http://` (h2c with prior knowledge, RFC 9113
    /// §3.3; on `https://` ALPN then offers `h2` alone). Off by default: an HTTP/1-only server
    /// cannot answer it. Without it, `https://` connections offer `h2` and `http/1.1` (ALPN) and
    /// use HTTP/2 whenever the server accepts it.
    pub http2_prior_knowledge: bool,
    /// A bandwidth limit on response bodies, shared by every client holding the same `Arc`
    /// (`None`: unlimited).
    pub bandwidth: Option<Arc<Bandwidth>>,
    /// A PEM file of extra trusted root certificates (a private CA), trusted on `https://`
    /// besides the system's roots (`sync --ca-cert FILE`).
    pub ca_cert: Option<std::path::PathBuf>,
    /// The origins requests may go to ([`crate::reach`]): checked before each request and on
    /// each redirect, with private addresses dropped at name resolution for hosts not named
    /// exactly. `None` (the default): anywhere. Not with a proxy (which would resolve the names
    /// itself): [`crate::Http::new`] refuses the two together.
    pub reach: Option<crate::reach::Reach>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            pool_per_host: 32,
            max_in_flight: crate::adaptive::DEFAULT_CEILING,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(600),
            retries: 4,
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            rate: None,
            token: None,
            max_redirects: 10,
            proxy: Proxy::None,
            http2_prior_knowledge: false,
            bandwidth: None,
            ca_cert: None,
            reach: None,
        }
    }
}

/// Validators of a stored copy, for a conditional GET (RFC 9110 §13.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conditional {
    /// The stored `ETag`.
    pub etag: Option<String>,
    /// The stored `Last-Modified`.
    pub last_modified: Option<String>,
}

impl Conditional {
    /// Whether there is anything to send.
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }
}
