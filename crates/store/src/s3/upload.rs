//! The bodies of an [`super::S3Store`]: received into memory, spilled past [`SPILL`] into an
//! unnamed scratch file (nothing left behind by a crash on Linux, `O_TMPFILE`), verified by the
//! [`crate::Upload`] before a byte leaves the machine, then sent by `place` in one `PUT` or, at
//! and above the multipart threshold, as a multipart upload completed only once every part is
//! stored. Both become visible whole or not at all; each request carries `Content-MD5`, so the
//! server refuses a body changed on its way (`BadDigest`).

use std::any::Any;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::SystemTime;

use md5::{Digest as _, Md5};
use resourcesync_http::SendBody as Body;
use rusty_s3::Method;

use super::client::{Client, Req, base64};
use super::xml;
use crate::error::{Error, Result};
use crate::object::UploadSink;

/// Bytes of a body kept in memory before it goes to a scratch file.
pub(crate) const SPILL: usize = 1 << 20;
/// The smallest part S3 accepts (but the last).
pub(crate) const MIN_PART: u64 = 5 << 20;

/// Where a body being received is.
#[derive(Debug)]
pub(crate) struct S3Sink {
    mem: Vec<u8>,
    file: Option<File>,
    scratch: PathBuf,
    md5: Md5,
    len: u64,
    uri: Option<String>,
}

impl S3Sink {
    pub(crate) fn new(scratch: PathBuf, uri: Option<String>) -> Self {
        S3Sink {
            mem: Vec::new(),
            file: None,
            scratch,
            md5: Md5::new(),
            len: 0,
            uri,
        }
    }
}

/// A body received whole, not yet sent.
#[derive(Debug)]
pub(crate) enum Data {
    /// Small: in memory.
    Mem(Vec<u8>),
    /// Larger: an unnamed scratch file.
    File(File),
}

/// A sealed body, for `place`.
#[derive(Debug)]
pub(crate) struct S3Body {
    pub(crate) data: Data,
    pub(crate) len: u64,
    pub(crate) md5: [u8; 16],
    pub(crate) modified: Option<SystemTime>,
    pub(crate) uri: Option<String>,
}

fn scratch_err(dir: &std::path::Path, e: std::io::Error) -> Error {
    Error::io(dir, e)
}

impl UploadSink for S3Sink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        self.md5.update(buf);
        self.len += buf.len() as u64;
        if self.file.is_none() && self.mem.len() + buf.len() <= SPILL {
            self.mem.extend_from_slice(buf);
            return Ok(());
        }
        if self.file.is_none() {
            let mut f =
                tempfile::tempfile_in(&self.scratch).map_err(|e| scratch_err(&self.scratch, e))?;
            f.write_all(&self.mem)
                .map_err(|e| scratch_err(&self.scratch, e))?;
            self.mem = Vec::new();
            self.file = Some(f);
        }
        if let Some(f) = self.file.as_mut() {
            f.write_all(buf)
                .map_err(|e| scratch_err(&self.scratch, e))?;
        }
        Ok(())
    }

    fn seal(self: Box<Self>, modified: Option<SystemTime>) -> Result<Box<dyn Any + Send>> {
        let s = *self;
        let data = match s.file {
            Some(mut f) => {
                f.flush().map_err(|e| scratch_err(&s.scratch, e))?;
                Data::File(f)
            }
            None => Data::Mem(s.mem),
        };
        Ok(Box::new(S3Body {
            data,
            len: s.len,
            md5: s.md5.finalize().into(),
            modified,
            uri: s.uri,
        }))
    }
}

impl S3Body {
    /// `n` bytes from `off` as a request body, with their MD5 (a file is read twice: once
    /// to hash, once to send).
    fn part(&self, okey: &str, off: u64, n: u64) -> Result<(Body, [u8; 16])> {
        match &self.data {
            Data::Mem(v) => {
                let (a, b) = (off as usize, (off + n) as usize);
                let slice = v.get(a..b).unwrap_or_default();
                Ok((
                    Body::Bytes(slice.to_vec().into()),
                    Md5::digest(slice).into(),
                ))
            }
            Data::File(f) => {
                let io = |e| Error::io(format!("(scratch file of {okey})"), e);
                let mut f = f.try_clone().map_err(io)?;
                f.seek(SeekFrom::Start(off)).map_err(io)?;
                let mut h = Md5::new();
                let mut buf = vec![0u8; 64 * 1024];
                let mut left = n;
                while left > 0 {
                    let want = buf.len().min(left as usize);
                    let got = f.read(&mut buf[..want]).map_err(io)?;
                    if got == 0 {
                        return Err(io(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the scratch file is shorter than the body written",
                        )));
                    }
                    h.update(&buf[..got]);
                    left -= got as u64;
                }
                f.seek(SeekFrom::Start(off)).map_err(io)?;
                Ok((Body::Reader(Box::new(f.take(n)), n), h.finalize().into()))
            }
        }
    }

    /// The whole body, with its MD5 (computed as it was written).
    fn whole(&self, okey: &str) -> Result<Body> {
        match &self.data {
            Data::Mem(v) => Ok(Body::Bytes(v.clone().into())),
            Data::File(_) => Ok(self.part(okey, 0, self.len)?.0),
        }
    }
}

/// Puts a body at `okey` with the metadata `meta` (signed headers) and this `Content-Type`:
/// one `PUT` below `threshold`, else a multipart upload of `part_size` parts, aborted when any
/// step fails.
pub(crate) fn send(
    c: &Client,
    okey: &str,
    body: &S3Body,
    meta: &[(&'static str, String)],
    content_type: &str,
    threshold: u64,
    part_size: u64,
) -> Result<()> {
    if body.len < threshold || body.len <= part_size {
        let mut req = Req::new("PutObject", Method::Put, Some(okey))
            .header("content-md5", base64(&body.md5))
            .header("content-type", content_type);
        for (k, v) in meta {
            req = req.header(k, v.clone());
        }
        let r = c.send(&req, Some(body.whole(okey)?))?;
        c.check(&req, r)?;
        return Ok(());
    }
    let mut req = Req::new("CreateMultipartUpload", Method::Post, Some(okey))
        .query("uploads", "")
        .header("content-type", content_type);
    for (k, v) in meta {
        req = req.header(k, v.clone());
    }
    let id = xml::upload_id(&c.xml(&req, None)?)
        .map_err(|m| c.err("CreateMultipartUpload", Some(okey), None, m))?;
    let out = send_parts(c, okey, &id, body, part_size);
    if out.is_err() {
        // The first failure is the one to tell; the parts left by a failed abort go with
        // `clean_interrupted`.
        let _ = abort(c, okey, &id);
    }
    out
}

fn send_parts(c: &Client, okey: &str, id: &str, body: &S3Body, part_size: u64) -> Result<()> {
    let mut etags = Vec::new();
    let mut off = 0;
    while off < body.len {
        let n = part_size.min(body.len - off);
        let (b, md5) = body.part(okey, off, n)?;
        let req = Req::new("UploadPart", Method::Put, Some(okey))
            .query("partNumber", (etags.len() + 1).to_string())
            .query("uploadId", id)
            .header("content-md5", base64(&md5));
        let r = c.send(&req, Some(b))?;
        let r = c.check(&req, r)?;
        let etag = r
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| c.err("UploadPart", Some(okey), None, "no ETag in the answer"))?;
        etags.push(etag.to_owned());
        off += n;
    }
    let xml_body = xml::complete_body(&etags);
    let req = Req::new("CompleteMultipartUpload", Method::Post, Some(okey)).query("uploadId", id);
    let answer = c.xml(&req, Some(Body::Bytes(xml_body.into())))?;
    // An error may come after a `200 OK`, in the body.
    if let Some((code, message)) = xml::error_of(&answer) {
        return Err(Error::S3 {
            op: "CompleteMultipartUpload",
            bucket: c.cfg().bucket.clone(),
            key: okey.chars().take(200).collect(),
            status: Some(200),
            code: Some(code),
            message,
        });
    }
    Ok(())
}

/// Aborts a multipart upload (its parts are dropped).
pub(crate) fn abort(c: &Client, okey: &str, id: &str) -> Result<()> {
    let req = Req::new("AbortMultipartUpload", Method::Delete, Some(okey)).query("uploadId", id);
    let r = c.send(&req, None)?;
    if r.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(());
    }
    c.check(&req, r).map(drop)
}
