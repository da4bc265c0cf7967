//! [`VersionBodies`] of a bucket: each body an object under `PREFIX.resourcesync/versions/`,
//! copied on the server from the copy just placed (`CopyObject`, no byte through this
//! process), on condition that the copy is still the object whose sha-256 (kept with it when
//! it was put) is the version's.

use std::io::Read;

use reqwest::header::ETAG;
use rusty_s3::Method;

use super::client::Req;
use super::{COPY_SOURCE, S3Store, header, meta_of, missing};
use crate::error::Result;
use crate::fs::STATE_DIR;
use crate::path::RelPath;
use crate::versions::{VERSION_ALG, VERSIONS_DIR, VersionBodies, digest_of_name, version_name};

impl S3Store {
    /// The name (under the prefix) of the body named `digest`.
    fn version_object(digest: &str) -> Result<String> {
        Ok(format!("{STATE_DIR}/{}", version_name(digest)?))
    }
}

impl VersionBodies for S3Store {
    fn keep(&self, key: &RelPath, digest: &str) -> Result<bool> {
        let vkey = self.bucket.key(&Self::version_object(digest)?)?;
        if self.bucket.head_raw(&vkey)?.is_some() {
            return Ok(false);
        }
        let okey = self.object_key(key)?;
        let h = self
            .bucket
            .head_raw(&okey)?
            .ok_or_else(|| missing("CopyObject", self.client(), &okey))?;
        // The object at the key must be the body named: its sha-256, kept with it when put.
        let kept = meta_of(&h).hashes.value_of(&VERSION_ALG);
        let want = digest.split_once(':').map(|(_, hex)| hex);
        if !kept
            .as_deref()
            .zip(want)
            .is_some_and(|(k, w)| k.eq_ignore_ascii_case(w))
        {
            return Err(self.client().err(
                "CopyObject",
                Some(&okey),
                None,
                format!(
                    "the object is not the body {digest} (its sha-256 is {})",
                    kept.as_deref().unwrap_or("not kept with it")
                ),
            ));
        }
        let source = format!(
            "/{}/{}",
            self.config().bucket,
            percent_encoding::utf8_percent_encode(&okey, COPY_SOURCE)
        );
        let mut req = Req::new("CopyObject", Method::Put, Some(&vkey))
            .header("x-amz-copy-source", source)
            .header("x-amz-metadata-directive", "COPY");
        if let Some(etag) = header(&h, ETAG.as_str()).filter(|e| !e.is_empty()) {
            req = req.header("x-amz-copy-source-if-match", etag.to_owned());
        }
        self.copy_object(&req, &vkey)?;
        Ok(true)
    }

    fn open_version(&self, digest: &str) -> Result<Option<Box<dyn Read + Send>>> {
        Ok(self
            .bucket
            .get(&Self::version_object(digest)?)?
            .map(|(_, r)| Box::new(r) as Box<dyn Read + Send>))
    }

    fn version_length(&self, digest: &str) -> Result<Option<u64>> {
        Ok(self
            .bucket
            .head(&Self::version_object(digest)?)?
            .map(|i| i.length))
    }

    fn remove_version(&self, digest: &str) -> Result<bool> {
        let name = Self::version_object(digest)?;
        if self.bucket.head(&name)?.is_none() {
            return Ok(false);
        }
        self.bucket.delete(&name)?;
        Ok(true)
    }

    fn versions_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        let under = format!("{STATE_DIR}/{VERSIONS_DIR}/sha256/");
        let start = after.map(Self::version_object).transpose()?;
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.bucket.list(&under, start.as_deref(), &mut |o| {
            if let Some(d) = o.name.rsplit('/').next().and_then(digest_of_name) {
                out.push(d);
            }
            Ok(if out.len() >= limit {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            })
        })?;
        Ok(out)
    }
}
