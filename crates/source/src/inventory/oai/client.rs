//! The HTTP side of harvesting: one OAI-PMH request (HTTP GET, OAI-PMH 2.0 §3.1.1) on the
//! blocking face of `resourcesync-http` and its one retry policy, its response read up to a
//! size limit: `503 Service Unavailable` (or 429, or a failed connection) asked again, a
//! `Retry-After` waited for (§3.1.2.2 "flow control") as told but no longer than a maximum
//! (`maxRetryWait`), a bounded number of times (`maxRetries`); a request that failed on a
//! kept-alive connection the server closed sent again at once, once.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use resourcesync_http::{BlockingHttp, Error as H, HttpOptions};

use super::OaiOptions;
use crate::error::{Error, Result};

/// Characters written `%XX` in a query value: all but RFC 3986 unreserved.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A client of one repository.
#[derive(Debug)]
pub(crate) struct Client {
    http: BlockingHttp,
    base: String,
    max_response_bytes: u64,
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

impl Client {
    pub(crate) fn new(base: &str, opts: &OaiOptions) -> Result<Self> {
        let http = BlockingHttp::new(HttpOptions {
            connect_timeout: Duration::from_secs(30),
            read_timeout: opts.request_timeout,
            request_timeout: opts.request_timeout,
            retries: opts.max_retries,
            backoff_base: Duration::from_secs(1),
            backoff_max: opts.max_retry_wait,
            max_redirects: 5,
            ..HttpOptions::default()
        })
        .map_err(|e| Error::Config(format!("oai-pmh: HTTP client: {e}")))?;
        Ok(Client {
            http,
            base: base.to_owned(),
            max_response_bytes: opts.max_response_bytes,
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
        let sent = AtomicU32::new(0);
        let max = self.max_response_bytes;
        let got = self
            .http
            .get(&url, deadline, Some(&sent))
            .and_then(|r| r.read_limited(max));
        got.map_err(|e| match e {
            H::Status { status, .. } if status == 503 || status == 429 => fail(format!(
                "the repository answered {} {} times in a row; try again later",
                said(status),
                sent.load(Ordering::Relaxed)
            )),
            H::Status { status, .. } => fail(format!("HTTP status {}", said(status))),
            H::Transport {
                transient: false, ..
            } if deadline.is_some_and(|d| Instant::now() >= d) => {
                fail("the harvest's time is up".into())
            }
            H::Transport { message, .. } => {
                fail(format!("{message}; is the repository reachable?"))
            }
            H::TooLarge { .. } => fail(too_large(max)),
            other => fail(other.to_string()),
        })
    }
}

/// A status as reqwest says it (`503 Service Unavailable`).
fn said(status: u16) -> String {
    reqwest::StatusCode::from_u16(status).map_or_else(|_| status.to_string(), |s| s.to_string())
}

fn too_large(max: u64) -> String {
    format!(
        "the response is larger than the limit of {max} bytes; nothing was taken from this \
         harvest (raise the limit, maxResponseBytes=N in the specification, if the repository's \
         pages are that large)"
    )
}
