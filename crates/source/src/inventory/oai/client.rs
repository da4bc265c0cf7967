//! The HTTP side of harvesting: one OAI-PMH request (HTTP GET, OAI-PMH 2.0 §3.1.1), its
//! response read up to a size limit, `503 Service Unavailable` with `Retry-After` waited for
//! (§3.1.2.2 "flow control") as told but no longer than a maximum, a bounded number of times;
//! a request that failed on a kept-alive connection the server closed sent again, once.

use std::io::Read;
use std::time::{Duration, Instant};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use super::OaiOptions;
use crate::error::{Error, Result};

/// Characters written `%XX` in a query value: all but RFC 3986 unreserved.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// How long to wait after a `503` that gives no `Retry-After`.
const DEFAULT_RETRY: Duration = Duration::from_secs(10);

/// A client of one repository.
#[derive(Debug)]
pub(crate) struct Client {
    /// Always there but while dropped (see the `Drop` impl).
    http: Option<reqwest::blocking::Client>,
    base: String,
    max_response_bytes: u64,
    max_retries: u32,
    max_retry_wait: Duration,
    request_timeout: Duration,
}

/// A request, for messages: the verb and its arguments, as sent.
pub(crate) fn describe(args: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (k, v) in args {
        if !s.is_empty() {
            s.push('&');
        }
        let v: String = v.chars().take(80).collect();
        s.push_str(&format!("{k}={v}"));
    }
    s
}

impl Drop for Client {
    /// The client's runtime is shut down where blocking is allowed (a Source is often dropped
    /// at the end of an async function: `serve` shutting down).
    fn drop(&mut self) {
        let http = self.http.take();
        resourcesync_store::blocking::call(move || drop(http));
    }
}

impl Client {
    pub(crate) fn new(base: &str, opts: &OaiOptions) -> Result<Self> {
        // A process that installed no rustls provider gets ring's (reqwest panics without).
        resourcesync_http::install_tls_provider();
        let builder = reqwest::blocking::Client::builder()
            .user_agent(concat!(
                "resourcesync/",
                env!("CARGO_PKG_VERSION"),
                " (OAI-PMH)"
            ))
            .connect_timeout(Duration::from_secs(30))
            .timeout(opts.request_timeout)
            .redirect(reqwest::redirect::Policy::limited(5));
        let http = builder
            .build()
            .map_err(|e| Error::Config(format!("oai-pmh: HTTP client: {e}")))?;
        Ok(Client {
            http: Some(http),
            base: base.to_owned(),
            max_response_bytes: opts.max_response_bytes,
            max_retries: opts.max_retries,
            max_retry_wait: opts.max_retry_wait,
            request_timeout: opts.request_timeout,
        })
    }

    /// The base URL.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// The URL of a request.
    fn url(&self, args: &[(&str, &str)]) -> String {
        let mut u = self.base.clone();
        for (i, (k, v)) in args.iter().enumerate() {
            u.push(if i == 0 { '?' } else { '&' });
            u.push_str(k);
            u.push('=');
            u.extend(utf8_percent_encode(v, QUERY));
        }
        u
    }

    /// Sends a request and gives the response's bytes; by `deadline` when given (the request
    /// and any wait after a `503` end by then).
    pub(crate) fn get(&self, args: &[(&str, &str)], deadline: Option<Instant>) -> Result<Vec<u8>> {
        let url = self.url(args);
        let what = describe(args);
        let fail = |m: String| Error::Inventory(format!("oai-pmh {} ({what}): {m}", self.base));
        let mut waited = 0u32;
        let mut resent = false;
        loop {
            let Some(http) = self.http.as_ref() else {
                return Err(fail("the client is closed".into()));
            };
            let mut rb = http.get(&url);
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if let Some(left) = left {
                if left.is_zero() {
                    return Err(fail("the harvest's time is up".into()));
                }
                rb = rb.timeout(left.min(self.request_timeout));
            }
            let resp = match rb.send() {
                Ok(resp) => resp,
                // A kept-alive connection the server closed as the request went out (servers
                // close idle connections without saying so): the GET is safe to send again
                // (OAI-PMH 2.0 §3.1.1), once, on a new connection.
                Err(e) if !resent && !e.is_timeout() && !e.is_connect() => {
                    tracing::info!(
                        "oai-pmh {}: {e}; sending the request again on a new connection",
                        self.base
                    );
                    resent = true;
                    continue;
                }
                Err(e) => return Err(fail(format!("{e}; is the repository reachable?"))),
            };
            let status = resp.status();
            if status == reqwest::StatusCode::SERVICE_UNAVAILABLE
                || status == reqwest::StatusCode::TOO_MANY_REQUESTS
            {
                if waited >= self.max_retries {
                    return Err(fail(format!(
                        "the repository answered {status} {} times in a row; try again later",
                        waited + 1
                    )));
                }
                let told = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(resourcesync_http::parse_retry_after)
                    .unwrap_or(DEFAULT_RETRY);
                let wait = told
                    .min(self.max_retry_wait)
                    .min(left.unwrap_or(Duration::MAX));
                tracing::info!(
                    "oai-pmh {}: {status}, waiting {wait:?} (told {told:?}) before asking again",
                    self.base
                );
                waited += 1;
                std::thread::sleep(wait);
                continue;
            }
            if !status.is_success() {
                return Err(fail(format!("HTTP status {status}")));
            }
            let max = self.max_response_bytes;
            if resp.content_length().is_some_and(|n| n > max) {
                return Err(fail(too_large(max)));
            }
            let mut bytes = Vec::new();
            resp.take(max.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|e| fail(format!("reading the response: {e}")))?;
            if bytes.len() as u64 > max {
                return Err(fail(too_large(max)));
            }
            return Ok(bytes);
        }
    }
}

fn too_large(max: u64) -> String {
    format!(
        "the response is larger than the limit of {max} bytes; nothing was taken from this \
         harvest (raise the limit, maxResponseBytes=N in the specification, if the repository's \
         pages are that large)"
    )
}
