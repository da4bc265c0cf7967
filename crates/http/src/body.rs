//! Reading responses: header values, bodies under a limit, body-reading errors.

use reqwest::Response;
use reqwest::header::HeaderName;

use crate::error::{Error, Result, transport};

/// The first value of a response header, as text.
pub fn header(resp: &Response, name: HeaderName) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Every value of a response header that is text, in order.
pub fn header_values(resp: &Response, name: HeaderName) -> Vec<String> {
    resp.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect()
}

/// Turns a body-reading error into a (transient) transport error.
pub fn body_error(url: &str, e: &reqwest::Error) -> Error {
    let mut err = transport(url, e);
    if let Error::Transport { transient, .. } = &mut err {
        *transient = true;
    }
    err
}

/// The whole body, refused past `limit` bytes (announced or read): hostile servers do not
/// choose how much is kept in memory.
pub async fn read_limited(url: &str, mut resp: Response, limit: u64) -> Result<Vec<u8>> {
    let too_large = || Error::TooLarge {
        url: url.to_owned(),
        limit,
    };
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| body_error(url, &e))? {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most the first `max` bytes of the body (what is past them is not read), for an error
/// message; empty when the body cannot be read.
pub async fn read_prefix(mut resp: Response, max: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < max {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = max - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    body
}
