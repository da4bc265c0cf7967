//! What the server knows of every recorded resource, kept in memory so that answering a request
//! needs no database lookup: per relative path, the size and modification time the resource
//! had when it was hashed, its strong `ETag` (from the recorded digest) and its `Content-Type`,
//! as ready header values.
//!
//! The index is rebuilt from the state after every scan that changed something (see
//! [`crate::serve::watch::Publisher`]) and swapped in whole, so readers never wait for a scan. Memory is
//! about 250 bytes per resource.

use std::collections::HashMap;

use axum::http::HeaderValue;
use resourcesync_model::HashAlg;

use crate::error::Result;
use crate::state::{Resource, State};

/// What is served for one recorded resource.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    /// Size when hashed.
    pub(crate) length: u64,
    /// Modification time when hashed (nanoseconds since the epoch).
    pub(crate) mtime_ns: i128,
    /// The strong validator from the recorded digest (valid while size and time are as
    /// recorded), if a digest was recorded.
    pub(crate) etag: Option<HeaderValue>,
    /// The recorded media type, if valid as a header value.
    pub(crate) content_type: Option<HeaderValue>,
    /// `Last-Modified` for the recorded modification time.
    pub(crate) last_modified: Option<HeaderValue>,
}

/// Every recorded resource, by path relative to the Source directory (as bytes).
#[derive(Debug, Default)]
pub(crate) struct ServedIndex {
    by_path: HashMap<Box<[u8]>, Served>,
}

/// The strong entity tag of a digest (`"md5-…"`), preferring the strongest recorded.
pub(crate) fn digest_etag(r: &Resource) -> Option<String> {
    [HashAlg::Sha256, HashAlg::Md5, HashAlg::Sha1]
        .iter()
        .find_map(|alg| {
            r.hashes
                .get(alg)
                .map(|d| format!("\"{}-{}\"", alg.token(), d.value))
        })
}

impl ServedIndex {
    /// Loads every resource of the newest scan from `state`.
    pub(crate) fn load(state: &State) -> Result<Self> {
        // Media types repeat: one shared header value per distinct type.
        let mut types: HashMap<String, HeaderValue> = HashMap::new();
        let mut by_path = HashMap::new();
        state.for_each_resource(|r| {
            let content_type = r.mime_type.as_ref().and_then(|t| {
                if let Some(v) = types.get(t) {
                    return Some(v.clone());
                }
                let v = HeaderValue::from_str(t).ok()?;
                types.insert(t.clone(), v.clone());
                Some(v)
            });
            let etag = digest_etag(&r).and_then(|t| HeaderValue::from_str(&t).ok());
            let last_modified =
                crate::serve::http_date_value(r.mtime_ns.div_euclid(1_000_000_000) as i64);
            by_path.insert(
                r.path.into_boxed_slice(),
                Served {
                    length: r.length,
                    mtime_ns: r.mtime_ns,
                    etag,
                    content_type,
                    last_modified,
                },
            );
            Ok(())
        })?;
        Ok(ServedIndex { by_path })
    }

    /// The recorded resource at a relative path.
    pub(crate) fn get(&self, rel: &[u8]) -> Option<&Served> {
        self.by_path.get(rel)
    }
}
