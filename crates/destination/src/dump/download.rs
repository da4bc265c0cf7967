//! Downloading a package to a temporary file, capped at its published length and verified
//! against it (Z39.99-2014 §11.1, §13.1).

use std::io::{BufWriter, Write};
use std::path::Path;

use resourcesync_model::package::DumpLimits;
use resourcesync_model::{Entry, MultiHasher};
use resourcesync_store::Expect;

use crate::error::{Error, Result};
use crate::http::Http;
use crate::report::Observer;

pub(super) async fn download_once(
    http: &Http,
    obs: &dyn Observer,
    dir: &Path,
    url: &str,
    declared: Option<u64>,
    expect: &Expect,
) -> Result<tempfile::TempPath> {
    let refuse = |message: String| Error::Package {
        url: url.to_owned(),
        message,
    };
    let limit = declared.unwrap_or(expect.max_bytes);
    let mut resp = http.get_once(url, None).await?;
    if resp.status().as_u16() == 304 {
        return Err(refuse(
            "304 Not Modified to an unconditional request".into(),
        ));
    }
    if let Some(n) = resp.content_length().filter(|n| *n > limit) {
        return Err(refuse(format!(
            "the server announces {n} bytes, more than the {limit} allowed"
        )));
    }
    let tmp = tempfile::Builder::new()
        .prefix("doc-pkg-")
        .tempfile_in(dir)
        .map_err(|e| Error::io(format!("temporary file in {}", dir.display()), e))?;
    let mut out = BufWriter::with_capacity(256 * 1024, tmp);
    let mut hasher = MultiHasher::new(&expect.hashes.known_algs());
    let mut n = 0u64;
    while let Some(chunk) = http.chunk(&mut resp, url).await? {
        n = n.saturating_add(chunk.len() as u64);
        if n > limit {
            return Err(refuse(format!("longer than the {limit} bytes allowed")));
        }
        hasher.update(&chunk);
        out.write_all(&chunk)
            .map_err(|e| Error::io("writing a package", e))?;
        obs.bytes(chunk.len() as u64);
    }
    let tmp = out
        .into_inner()
        .map_err(|e| Error::io("writing a package", e.into_error()))?;
    // Z39.99-2014 §11.1, §13.1: the package's `length` and `hash` as its entry publishes them.
    expect
        .verify(n, &hasher.finish())
        .map_err(|e| refuse(e.to_string()))?;
    Ok(tmp.into_temp_path())
}

/// Downloads a package (with retries) to a temporary file, verified against its entry.
pub(crate) async fn download_package(
    http: &Http,
    obs: &dyn Observer,
    dir: &Path,
    pkg: &Entry,
    limits: &DumpLimits,
) -> Result<tempfile::TempPath> {
    let url = pkg.loc.as_str();
    let declared = pkg.length();
    if let Some(n) = declared.filter(|n| *n > limits.max_package_bytes) {
        return Err(Error::Package {
            url: url.to_owned(),
            message: format!(
                "length {n} is more than the {} bytes allowed for a package",
                limits.max_package_bytes
            ),
        });
    }
    let expect = Expect {
        length: declared,
        hashes: pkg.hashes().cloned().unwrap_or_default(),
        max_bytes: limits.max_package_bytes,
        modified: None,
        uri: None,
        sha256: false,
    };
    http.with_retries(|| download_once(http, obs, dir, url, declared, &expect))
        .await
}
