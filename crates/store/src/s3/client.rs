//! Signed S3 requests over the blocking face of `resourcesync-http` (no retries, no redirects): each request is signed by `rusty-s3` (AWS
//! Signature Version 4 in the query string, valid for [`EXPIRES`]), headers included, and its
//! failure is an [`Error::S3`] naming the operation, bucket, key and what the server said.
//!
//! Blocking: call it from a thread that may block; async code through
//! [`crate::blocking::call`].

use std::io::Read;
use std::time::Duration;

use reqwest::StatusCode;
use resourcesync_http::{BlockingHttp, BlockingResponse as Response, HttpOptions, SendBody};
use rusty_s3::{Bucket, Method, UrlStyle};

use super::config::S3Config;
use super::xml;
use crate::error::{Error, Result};

/// How long a signature is valid: a request must start within it.
const EXPIRES: u64 = 3600;
/// The most bytes of an XML answer read (a listing page of 1,000 keys of 1,024 bytes is
/// about 1.5 MB; an error is a few hundred bytes).
pub(crate) const MAX_XML: u64 = 16 << 20;
/// How long to wait to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, its body included (a part of 8 MiB, or a body read by
/// `get`; reqwest's blocking client has no timeout between bytes).
const TIMEOUT: Duration = Duration::from_secs(600);

/// The signer, the connection pool and the bucket.
#[derive(Debug)]
pub(crate) struct Client {
    /// The blocking face of the project's one HTTP layer (no retries: see the module).
    http: BlockingHttp,
    bucket: Bucket,
    cfg: S3Config,
}

/// A request: the method, the object key (none: the bucket), the query and the headers to sign
/// and send (lower-case names).
pub(crate) struct Req<'a> {
    pub(crate) op: &'static str,
    pub(crate) method: Method,
    pub(crate) key: Option<&'a str>,
    pub(crate) query: Vec<(&'a str, String)>,
    pub(crate) headers: Vec<(&'a str, String)>,
}

impl<'a> Req<'a> {
    pub(crate) fn new(op: &'static str, method: Method, key: Option<&'a str>) -> Self {
        Req {
            op,
            method,
            key,
            query: Vec::new(),
            headers: Vec::new(),
        }
    }

    pub(crate) fn query(mut self, k: &'a str, v: impl Into<String>) -> Self {
        self.query.push((k, v.into()));
        self
    }

    pub(crate) fn header(mut self, k: &'a str, v: impl Into<String>) -> Self {
        self.headers.push((k, v.into()));
        self
    }
}

impl Client {
    /// A client for the bucket of `cfg` (the connection is made at the first request).
    pub(crate) fn new(cfg: S3Config) -> Result<Client> {
        // reqwest is built with rustls and no provider: install ring once (an application's
        // own provider, installed first, is kept).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bucket = Bucket::new(
            cfg.endpoint.clone(),
            UrlStyle::Path,
            cfg.bucket.clone(),
            cfg.region.clone(),
        )
        .map_err(|e| Error::Config {
            what: cfg.location(),
            reason: e.to_string(),
        })?;
        let http = BlockingHttp::new(HttpOptions {
            connect_timeout: CONNECT_TIMEOUT,
            // No timeout between bytes (a part of 8 MiB is sent before the server answers):
            // the whole request's.
            read_timeout: TIMEOUT,
            request_timeout: TIMEOUT,
            pool_per_host: 64,
            // The caller retries (`Error::category`); S3 redirects are errors.
            retries: 0,
            max_redirects: 0,
            ..HttpOptions::default()
        })
        .map_err(|e| Error::Config {
            what: cfg.location(),
            reason: format!("HTTP client: {e}"),
        })?;
        Ok(Client { http, bucket, cfg })
    }

    /// The settings.
    pub(crate) fn cfg(&self) -> &S3Config {
        &self.cfg
    }

    /// An error of an operation on `key`.
    pub(crate) fn err(
        &self,
        op: &'static str,
        key: Option<&str>,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Error {
        Error::S3 {
            op,
            bucket: self.cfg.bucket.clone(),
            key: key.unwrap_or("").chars().take(200).collect(),
            status,
            code: None,
            message: message.into(),
        }
    }

    /// Sends a request, with `body` (and its length) for a PUT or POST; the answer whatever
    /// its status (see [`Client::check`]).
    pub(crate) fn send(&self, req: &Req<'_>, body: Option<SendBody>) -> Result<Response> {
        let url = match req.key {
            Some(k) => self.bucket.object_url(k),
            None => Ok(self.bucket.base_url().clone()),
        }
        .map_err(|e| self.err(req.op, req.key, None, format!("URL: {e}")))?;
        let mut query: Vec<(&str, &str)> =
            req.query.iter().map(|(k, v)| (*k, v.as_str())).collect();
        query.sort_unstable();
        let mut headers: Vec<(&str, &str)> =
            req.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        headers.sort_unstable();
        let signed = rusty_s3::signing::sign(
            &jiff::Timestamp::now(),
            req.method,
            url,
            &self.cfg.key_id,
            &self.cfg.secret,
            None,
            &self.cfg.region,
            EXPIRES,
            query.iter().copied(),
            headers.iter().copied(),
        );
        let method = match req.method {
            Method::Head => reqwest::Method::HEAD,
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
        };
        let mut map = reqwest::header::HeaderMap::new();
        for (k, v) in &headers {
            let (Ok(k), Ok(v)) = (
                reqwest::header::HeaderName::from_bytes(k.as_bytes()),
                reqwest::header::HeaderValue::from_str(v),
            ) else {
                return Err(self.err(req.op, req.key, None, format!("header field {k}")));
            };
            map.insert(k, v);
        }
        self.http
            .send(method, signed.as_str(), map, body)
            .map_err(|e| {
                // Without its URL: a presigned URL carries the access key's id and a signature
                // valid for an hour, which must not reach logs, reports or an operator's page.
                let (m, timeout) = match e {
                    resourcesync_http::Error::Transport { message, .. } => {
                        let t = message.contains("timed out");
                        (message, t)
                    }
                    other => (other.to_string(), false),
                };
                let mut err = self.err(req.op, req.key, None, m);
                if let Error::S3 { code, .. } = &mut err {
                    *code = Some(if timeout { "Timeout" } else { "Connection" }.into());
                }
                err
            })
    }

    /// The answer if its status is a success, else the error it says (its XML `Error`, read
    /// up to [`MAX_XML`]).
    pub(crate) fn check(&self, req: &Req<'_>, r: Response) -> Result<Response> {
        if r.status().is_success() {
            return Ok(r);
        }
        Err(self.status_error(req, r))
    }

    /// The error of an answer that is not a success.
    pub(crate) fn status_error(&self, req: &Req<'_>, r: Response) -> Error {
        let status = r.status();
        let body = read_capped(r, MAX_XML).unwrap_or_default();
        let (code, message) = xml::error_of(&body).unwrap_or_else(|| {
            (
                status.canonical_reason().unwrap_or("").replace(' ', ""),
                String::new(),
            )
        });
        Error::S3 {
            op: req.op,
            bucket: self.cfg.bucket.clone(),
            key: req.key.unwrap_or("").chars().take(200).collect(),
            status: Some(status.as_u16()),
            code: Some(code).filter(|c| !c.is_empty()),
            message: message.chars().take(500).collect(),
        }
    }

    /// Sends a request and reads its XML answer (a success), up to [`MAX_XML`].
    pub(crate) fn xml(&self, req: &Req<'_>, body: Option<SendBody>) -> Result<Vec<u8>> {
        let r = self.send(req, body)?;
        let r = self.check(req, r)?;
        read_capped(r, MAX_XML).map_err(|m| self.err(req.op, req.key, None, m))
    }
}

/// Whether a status is "not found".
pub(crate) fn not_found(s: StatusCode) -> bool {
    s == StatusCode::NOT_FOUND
}

/// Reads at most `max` bytes of an answer: more is an error.
pub(crate) fn read_capped(r: Response, max: u64) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::new();
    r.take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("reading the answer: {e}"))?;
    if out.len() as u64 > max {
        return Err(format!("an answer longer than {max} bytes"));
    }
    Ok(out)
}

/// Standard base64 (RFC 4648 §4) of a digest, for `Content-MD5`.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_is_rfc_4648() {
        assert_eq!(super::base64(b""), "");
        assert_eq!(super::base64(b"f"), "Zg==");
        assert_eq!(super::base64(b"fo"), "Zm8=");
        assert_eq!(super::base64(b"foo"), "Zm9v");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
    }
}
