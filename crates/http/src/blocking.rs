//! The blocking face of [`Http`]: the same client layer (one retry policy with `Retry-After`
//! for 429 and 503, the request rate per host, the reach and redirect policy, the user agent,
//! the timeouts) for synchronous callers: the OAI-PMH inventory, `validate` of a URL.
//!
//! Every [`BlockingHttp`] runs its requests on one process-wide multi-threaded runtime of two
//! workers (`resourcesync-http`), which drives their connections, and waits for them with
//! [`tokio::runtime::Handle::block_on`] on the caller's thread. So, as the ports of
//! `resourcesync-store`, it blocks where it is called: from a thread that may block (a plain
//! thread, a `spawn_blocking` task, inside `resourcesync_store::blocking::call`), never on an
//! async task, where it panics ("Cannot start a runtime from within a runtime") rather than
//! stall a worker. The runtime is never dropped, so a client or a response may be dropped
//! anywhere.

use std::future::Future;
use std::io::Read;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::runtime::{Handle, Runtime};

use crate::client::Http;
use crate::error::{Error, Result};
use crate::options::HttpOptions;

/// The runtime of every blocking client, made at first use.
fn runtime() -> Result<Handle> {
    static RT: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("resourcesync-http")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    });
    match rt {
        Ok(rt) => Ok(rt.handle().clone()),
        Err(e) => Err(Error::Config(format!("the HTTP client's runtime: {e}"))),
    }
}

/// [`Http`] for synchronous callers (see the module).
#[derive(Debug, Clone)]
pub struct BlockingHttp {
    http: Arc<Http>,
    rt: Handle,
}

impl BlockingHttp {
    /// The client of `opts` ([`Http::new`], built on the blocking face's runtime: clients of
    /// equal options share their connections).
    pub fn new(opts: HttpOptions) -> Result<Self> {
        let rt = runtime()?;
        let http = {
            let _in = rt.enter();
            Http::new(opts)?
        };
        Ok(BlockingHttp {
            http: Arc::new(http),
            rt,
        })
    }

    /// The async client underneath.
    pub fn http(&self) -> &Http {
        &self.http
    }

    /// Runs `f` to its end on the client's runtime, blocking this thread (a panic on an async
    /// task: see the module).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// A GET under the client's one retry policy ([`Http::with_retries_until`] over
    /// [`Http::get_once`]), ended by `deadline` when given: each attempt's time and each wait
    /// are cut to it, and an attempt after it is an error saying so. A GET that failed in
    /// transport (such as on a kept-alive connection the server had closed) is sent again at
    /// once, once, besides the retries: a GET is safe to repeat (RFC 9110 §9.2.1).
    /// `attempts`, when given, counts the requests sent.
    pub fn get(
        &self,
        url: &str,
        deadline: Option<std::time::Instant>,
        attempts: Option<&std::sync::atomic::AtomicU32>,
    ) -> Result<BlockingResponse> {
        let end = deadline.map(tokio::time::Instant::from_std);
        let http = &self.http;
        let resent = std::sync::atomic::AtomicBool::new(false);
        let once = || async {
            let left = end.map(|e| e.saturating_duration_since(tokio::time::Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(Error::Transport {
                    url: url.to_owned(),
                    message: "the time given to it is up".into(),
                    transient: false,
                });
            }
            if let Some(n) = attempts {
                n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let limit = left.map_or(Duration::MAX, |l| l.min(http.options().request_timeout));
            match tokio::time::timeout(limit, http.get_once(url, None)).await {
                Ok(r) => r,
                Err(_) => Err(Error::Transport {
                    url: url.to_owned(),
                    message: format!("no answer within {limit:?}"),
                    transient: true,
                }),
            }
        };
        let resp = self.block_on(http.with_retries_until(end, || async {
            match once().await {
                Err(Error::Transport {
                    transient: true, ..
                }) if !resent.swap(true, std::sync::atomic::Ordering::Relaxed) => once().await,
                r => r,
            }
        }))?;
        Ok(self.response(resp, url))
    }

    /// One request of any method, header fields and body ([`Http::send_once`]: no retry; the
    /// response whatever its status). A body read from a reader is sent as it is read, on
    /// this thread, with the `Content-Length` given.
    pub fn send(
        &self,
        method: reqwest::Method,
        url: &str,
        mut headers: HeaderMap,
        body: Option<SendBody>,
    ) -> Result<BlockingResponse> {
        let http = self.http.clone();
        let resp = match body {
            None => self.block_on(http.send_once(method, url, headers, None))?,
            Some(SendBody::Bytes(b)) => {
                headers.insert(reqwest::header::CONTENT_LENGTH, b.len().into());
                self.block_on(http.send_once(method, url, headers, Some(b.into())))?
            }
            Some(SendBody::Reader(r, len)) => {
                headers.insert(reqwest::header::CONTENT_LENGTH, len.into());
                self.send_streamed(method, url, headers, r)?
            }
        };
        Ok(self.response(resp, url))
    }

    /// A request whose body is read from `r` on this thread and handed to the request's task
    /// a part at a time (two parts in flight at most).
    fn send_streamed(
        &self,
        method: reqwest::Method,
        url: &str,
        headers: HeaderMap,
        mut r: Box<dyn Read + Send>,
    ) -> Result<reqwest::Response> {
        let (mut tx, rx) = http_body_util::channel::Channel::<bytes::Bytes, Error>::new(2);
        let body = reqwest::Body::wrap(rx);
        let (http, u) = (self.http.clone(), url.to_owned());
        let sent = self
            .rt
            .spawn(async move { http.send_once(method, &u, headers, Some(body)).await });
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    sent.abort();
                    return Err(Error::Transport {
                        url: url.to_owned(),
                        message: format!("reading the body to send: {e}"),
                        transient: false,
                    });
                }
            };
            let chunk = bytes::Bytes::copy_from_slice(&buf[..n]);
            // Refused: the request ended (its answer, or its error, says why).
            if self.block_on(tx.send_data(chunk)).is_err() {
                break;
            }
        }
        drop(tx);
        match self.block_on(sent) {
            Ok(r) => r,
            Err(e) => Err(Error::Transport {
                url: url.to_owned(),
                message: format!("the request's task: {e}"),
                transient: true,
            }),
        }
    }

    fn response(&self, resp: reqwest::Response, url: &str) -> BlockingResponse {
        BlockingResponse {
            status: resp.status(),
            headers: resp.headers().clone(),
            resp: Some(resp),
            http: self.http.clone(),
            rt: self.rt.clone(),
            url: url.to_owned(),
            left: bytes::Bytes::new(),
        }
    }
}

/// The body of a request of [`BlockingHttp::send`].
pub enum SendBody {
    /// Bytes in memory.
    Bytes(bytes::Bytes),
    /// This many bytes, read from the reader as they are sent.
    Reader(Box<dyn Read + Send>, u64),
}

impl std::fmt::Debug for SendBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendBody::Bytes(b) => write!(f, "SendBody::Bytes({} bytes)", b.len()),
            SendBody::Reader(_, n) => write!(f, "SendBody::Reader({n} bytes)"),
        }
    }
}

/// A response of [`BlockingHttp::get`] (a 2xx or 304) or [`BlockingHttp::send`] (any status): its head, and its body as a reader (or
/// read whole under a limit).
#[derive(Debug)]
pub struct BlockingResponse {
    status: StatusCode,
    headers: HeaderMap,
    resp: Option<reqwest::Response>,
    http: Arc<Http>,
    rt: Handle,
    url: String,
    /// What was received of the body and not read yet.
    left: bytes::Bytes,
}

impl BlockingResponse {
    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The header fields.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The length the server announced (`Content-Length`), if any.
    pub fn content_length(&self) -> Option<u64> {
        self.headers
            .get(reqwest::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok())
    }

    /// The whole body, at most `max` bytes ([`Error::TooLarge`] past them: announced or
    /// received).
    pub fn read_limited(mut self, max: u64) -> Result<Vec<u8>> {
        let too_large = |url: &str| Error::TooLarge {
            url: url.to_owned(),
            limit: max,
        };
        if self.content_length().is_some_and(|n| n > max) {
            return Err(too_large(&self.url));
        }
        let mut out = Vec::new();
        while let Some(c) = self.next_chunk()? {
            if (out.len() + c.len()) as u64 > max {
                return Err(too_large(&self.url));
            }
            out.extend_from_slice(&c);
        }
        Ok(out)
    }

    /// The next part of the body, `None` at its end.
    fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>> {
        if !self.left.is_empty() {
            return Ok(Some(std::mem::take(&mut self.left)));
        }
        let Some(resp) = self.resp.as_mut() else {
            return Ok(None);
        };
        let (http, url) = (&self.http, self.url.as_str());
        let c = self.rt.block_on(http.chunk(resp, url))?;
        if c.is_none() {
            self.resp = None;
        }
        Ok(c)
    }
}

impl Read for BlockingResponse {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.left.is_empty() {
                match self.next_chunk() {
                    Ok(Some(c)) => self.left = c,
                    Ok(None) => return Ok(0),
                    Err(e) => return Err(std::io::Error::other(e)),
                }
            }
            if !self.left.is_empty() {
                let n = buf.len().min(self.left.len());
                buf[..n].copy_from_slice(&self.left.split_to(n));
                return Ok(n);
            }
        }
    }
}

#[cfg(test)]
#[path = "blocking_tests.rs"]
mod tests;
