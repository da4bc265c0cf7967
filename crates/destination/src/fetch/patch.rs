//! Patches (Z39.99-2014 §14.4, Z39.99-2017 §14.4): a Change List entry may link, with the
//! relation `http://www.openarchives.org/rs/terms/patch`, to a description of how the resource
//! changed, to be applied to the previous version.
//!
//! The Destination uses such a link for an `updated` change when all of these hold; otherwise
//! (and on any failure) it fetches `<loc>` whole, as §14.4 asks of a Destination that does not
//! understand the patch:
//!
//! - the link's `type` is JSON Patch (RFC 6902: `application/json-patch+json`, or
//!   `application/json-patch` as in Example 27 of the specification);
//! - the change publishes a digest of a known algorithm (the patched result must be verified);
//! - the state has a row for the copy with a digest, and the file in place has that length and
//!   digest (the patch applies to the previous version, which is what the state records);
//! - the copy is at most [`MAX_PATCHED_BYTES`] and the patch at most [`MAX_PATCH_BYTES`] (and its
//!   published `length`, whose `hash`, when given, it must also match).
//!
//! The patch is applied with the `json-patch` crate (all or nothing) to the copy parsed with
//! `serde_json` (object members kept in their order). JSON has many serializations of one value,
//! so the result is written in the copy's own style first (indentation detected, trailing newline
//! kept), then compact, two-space indented, and Python's default (`", "`, `": "`); the first
//! whose length and every digest match the change's `<rs:md>` is committed through the store like
//! a download (temporary file, verification, rename), and recorded.

use std::io::Read;
use std::sync::Arc;

use resourcesync_model::MultiHasher;
use resourcesync_store::{Expect, RelPath, ResourceRecord, Store};
use serde::Serialize;

use crate::commit::{Origin, Pending};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::http::Http;
use crate::plan::staging::{PatchLink, StagedItem};

/// Largest patch fetched, in bytes: 16 MiB.
pub const MAX_PATCH_BYTES: u64 = 16 << 20;
/// Largest copy patched in memory, in bytes: 64 MiB (larger ones are fetched whole).
pub const MAX_PATCHED_BYTES: u64 = 64 << 20;

/// `", "` between members and elements and `": "` after keys, on one line: Python's
/// `json.dumps` default.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

fn with_formatter<F: serde_json::ser::Formatter>(v: &serde_json::Value, f: F) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, f);
    v.serialize(&mut ser).ok()?;
    Some(buf)
}

/// The indentation of the first indented line, if the text is spread over lines.
fn detect_indent(text: &[u8]) -> Option<Vec<u8>> {
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let i = body.iter().position(|b| *b == b'\n')?;
    let ws: Vec<u8> = body[i + 1..]
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .copied()
        .collect();
    (!ws.is_empty()).then_some(ws)
}

/// Serializations of a value to try, the original's style first.
fn serializations(v: &serde_json::Value, original: &[u8]) -> Vec<Vec<u8>> {
    let pretty =
        |indent: &[u8]| with_formatter(v, serde_json::ser::PrettyFormatter::with_indent(indent));
    let mut styles: Vec<Option<Vec<u8>>> = Vec::new();
    if let Some(indent) = detect_indent(original) {
        styles.push(pretty(&indent));
    }
    styles.push(serde_json::to_vec(v).ok());
    styles.push(pretty(b"  "));
    styles.push(with_formatter(v, Spaced));
    let newline_first = original.ends_with(b"\n");
    let mut out: Vec<Vec<u8>> = Vec::new();
    for s in styles.into_iter().flatten() {
        let mut nl = s.clone();
        nl.push(b'\n');
        let pair = if newline_first { [nl, s] } else { [s, nl] };
        for c in pair {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

/// Applies an RFC 6902 JSON Patch to a JSON text: the candidate serializations of the result,
/// most likely first, or why it cannot be done.
pub fn apply_json_patch(
    original: &[u8],
    patch: &[u8],
) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut doc: serde_json::Value =
        serde_json::from_slice(original).map_err(|e| format!("the copy is not JSON: {e}"))?;
    let p: json_patch::Patch = serde_json::from_slice(patch)
        .map_err(|e| format!("not a JSON Patch document (RFC 6902): {e}"))?;
    json_patch::patch(&mut doc, &p).map_err(|e| format!("does not apply to the copy: {e}"))?;
    Ok(serializations(&doc, original))
}

async fn fetch_once(http: &Http, url: &str, limit: u64) -> Result<Vec<u8>> {
    let mut resp = http.get_once(url, None).await?;
    let too_long = || Error::Patch {
        url: url.to_owned(),
        message: format!("longer than the {limit} bytes allowed"),
    };
    if resp.status().as_u16() == 304 || resp.content_length().is_some_and(|n| n > limit) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = http.chunk(&mut resp, url).await? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Updates the copy at `rel` by applying the item's patch (see the module documentation).
/// Returns the new length; any `Err` means: fetch the resource whole.
pub(crate) async fn try_patch(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
    prior: &ResourceRecord,
) -> Result<u64> {
    let Some(link) = item.patch.clone() else {
        return Err(Error::Patch {
            url: String::new(),
            message: "no patch link".into(),
        });
    };
    check_copy(ctx, item, rel, prior, &link).await?;
    let body = fetch_patch(ctx, &link).await?;
    let href = link.href.clone();
    let pending = {
        let ctx = ctx.clone();
        let rel = rel.clone();
        let item = item.clone();
        tokio::task::spawn_blocking(move || patched(&ctx, &item, &rel, &link, &body)).await??
    };
    // Put in place and recorded by the committer, like a download.
    let recorded = match ctx.ports.committer.enqueue(pending).await {
        Ok(receipt) => receipt.done().await.map_err(|f| f.message),
        Err(e) => Err(e),
    };
    recorded
        .map(|put| put.length)
        .map_err(|message| Error::Patch {
            url: href,
            message: format!("putting the patched copy in place: {message}"),
        })
}

/// Whether the patch can be applied: JSON Patch, a digest to verify the result by, and the
/// copy in place the version the state records (the patch applies to the previous version).
async fn check_copy(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
    prior: &ResourceRecord,
    link: &PatchLink,
) -> Result<()> {
    let fail = |message: String| Error::Patch {
        url: link.href.clone(),
        message,
    };
    if !link.is_json_patch() {
        return Err(fail(format!(
            "type {:?} is not JSON Patch",
            link.mime_type.as_deref().unwrap_or_default()
        )));
    }
    if item.hashes.known_algs().is_empty() {
        return Err(fail(
            "the change publishes no digest to verify the result".into(),
        ));
    }
    let Some(plen) = prior.length.filter(|_| !prior.gone) else {
        return Err(fail("no current copy recorded".into()));
    };
    if plen > MAX_PATCHED_BYTES {
        return Err(fail(format!("the copy is over {MAX_PATCHED_BYTES} bytes")));
    }
    let algs = prior.hashes.known_algs();
    if algs.is_empty() {
        return Err(fail("the state has no digest of the copy".into()));
    }
    // The patch applies to the previous version: the copy must be what the state records.
    let store = ctx.ports.store.clone();
    let r = rel.clone();
    let (len, hashes) = tokio::task::spawn_blocking(move || store.hash(&r, &algs)).await??;
    let recorded = Expect {
        length: prior.length,
        hashes: prior.hashes.clone(),
        max_bytes: MAX_PATCHED_BYTES,
        modified: None,
        uri: None,
        sha256: false,
    };
    recorded
        .verify(len, &hashes)
        .map_err(|e| fail(format!("the copy is not the version recorded: {e}")))?;
    Ok(())
}

/// The patch, fetched (at most [`MAX_PATCH_BYTES`], or its published `length`) and verified
/// against the link's `length` and `hash`.
async fn fetch_patch(ctx: &Arc<Ctx>, link: &PatchLink) -> Result<Vec<u8>> {
    let url = link.href.clone();
    let fail = |message: String| Error::Patch {
        url: url.clone(),
        message,
    };
    if let Some(n) = link.length.filter(|n| *n > MAX_PATCH_BYTES) {
        return Err(fail(format!("length {n} is over {MAX_PATCH_BYTES} bytes")));
    }
    let limit = link.length.unwrap_or(MAX_PATCH_BYTES);
    let body = ctx
        .ports
        .http
        .with_retries(|| fetch_once(&ctx.ports.http, &url, limit))
        .await?;
    let mut h = MultiHasher::new(&link.hashes.known_algs());
    h.update(&body);
    Expect {
        length: link.length,
        hashes: link.hashes.clone(),
        max_bytes: limit,
        modified: None,
        uri: None,
        sha256: false,
    }
    .verify(body.len() as u64, &h.finish())
    .map_err(|e| fail(e.to_string()))?;
    ctx.ports.obs.bytes(body.len() as u64);

    Ok(body)
}

/// Applies the patch to the copy; the first serialization of the result with the change's
/// length and digests is written to an upload of the store and verified, like a download, for
/// the committer to put in place and record.
fn patched(
    ctx: &Ctx,
    item: &StagedItem,
    rel: &RelPath,
    link: &PatchLink,
    body: &[u8],
) -> Result<Pending> {
    let fail = |message: String| Error::Patch {
        url: link.href.clone(),
        message,
    };
    let mut original = Vec::new();
    ctx.ports
        .store
        .get(rel)?
        .take(MAX_PATCHED_BYTES + 1)
        .read_to_end(&mut original)
        .map_err(|e| Error::io(format!("reading {rel}"), e))?;
    let candidates = apply_json_patch(&original, body).map_err(fail)?;
    let expect = Expect {
        length: item.length,
        hashes: item.hashes.clone(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::fetch::mtime::copy_time(item.lastmod.as_ref(), None),
        uri: None,
        sha256: ctx.versions,
    };
    let algs = expect.algs();
    let chosen = candidates
        .into_iter()
        .filter(|c| item.length.is_none_or(|l| l == c.len() as u64))
        .find(|c| {
            let mut h = MultiHasher::new(&algs);
            h.update(c);
            expect.verify(c.len() as u64, &h.finish()).is_ok()
        })
        .ok_or_else(|| {
            fail("the patched copy does not have the published length and digests".into())
        })?;
    // Through the store like a download: an upload, verified again.
    let mut up = ctx.ports.store.begin(rel, expect)?;
    up.write(&chosen)?;
    Ok(Pending {
        body: up.finish()?,
        row: ResourceRecord {
            uri: item.uri.clone(),
            source: ctx.key.clone(),
            path: rel.to_string(),
            // Taken from the body by the committer.
            length: None,
            hashes: Default::default(),
            lastmod: item.lastmod,
            // The server's validators were for the old representation.
            etag: None,
            last_modified: None,
            gone: false,
        },
        origin: Origin::Download,
        // The state has its row: the patch applies to the copy it records.
        fresh: false,
    })
}

/// The copy at `rel` with a JSON Patch applied, for a patch that came in a Change Dump package
/// (Z39.99-2014 §14.4: "the entry in the Change Dump Manifest must have the path attribute for
/// the `<rs:ln>` element that points to the change description that is included in the content
/// package"): the same conditions as for a patch link of a Change List (module documentation),
/// checked on this thread. Returns the serialization whose length and digests match `expect`.
pub(crate) fn patch_copy(
    store: &dyn Store,
    rel: &RelPath,
    prior: Option<&ResourceRecord>,
    link: &PatchLink,
    patch: &[u8],
    expect: &Expect,
) -> std::result::Result<Vec<u8>, String> {
    if !link.is_json_patch() {
        return Err(format!(
            "patch type {:?} is not JSON Patch",
            link.mime_type.as_deref().unwrap_or_default()
        ));
    }
    if expect.hashes.known_algs().is_empty() {
        return Err("the change publishes no digest to verify the patched copy".into());
    }
    let Some(prior) = prior.filter(|p| !p.gone) else {
        return Err("no current copy recorded to patch".into());
    };
    let Some(plen) = prior.length.filter(|n| *n <= MAX_PATCHED_BYTES) else {
        return Err(format!(
            "the copy's recorded length is unknown or over {MAX_PATCHED_BYTES} bytes"
        ));
    };
    let algs = prior.hashes.known_algs();
    if algs.is_empty() {
        return Err("the state has no digest of the copy".into());
    }
    let mut h = MultiHasher::new(&link.hashes.known_algs());
    h.update(patch);
    Expect {
        length: link.length,
        hashes: link.hashes.clone(),
        max_bytes: MAX_PATCH_BYTES,
        modified: None,
        uri: None,
        sha256: false,
    }
    .verify(patch.len() as u64, &h.finish())
    .map_err(|e| format!("the patch: {e}"))?;
    let mut original = Vec::new();
    store
        .get(rel)
        .map_err(|e| e.to_string())?
        .take(MAX_PATCHED_BYTES + 1)
        .read_to_end(&mut original)
        .map_err(|e| format!("reading {rel}: {e}"))?;
    // The patch applies to the previous version: the copy must be what the state records.
    let mut h = MultiHasher::new(&algs);
    h.update(&original);
    Expect {
        length: Some(plen),
        hashes: prior.hashes.clone(),
        max_bytes: MAX_PATCHED_BYTES,
        modified: None,
        uri: None,
        sha256: false,
    }
    .verify(original.len() as u64, &h.finish())
    .map_err(|e| format!("the copy is not the version recorded: {e}"))?;
    let algs = expect.algs();
    apply_json_patch(&original, patch)?
        .into_iter()
        .find(|c| {
            let mut h = MultiHasher::new(&algs);
            h.update(c);
            expect.verify(c.len() as u64, &h.finish()).is_ok()
        })
        .ok_or_else(|| "the patched copy does not have the published length and digests".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use resourcesync_model::Hashes;

    #[test]
    fn json_patch_keeps_member_order_and_style() {
        let original = b"{\n    \"b\": 1,\n    \"a\": [1, 2]\n}\n";
        let patch =
            br#"[{"op":"replace","path":"/b","value":2},{"op":"add","path":"/a/-","value":3}]"#;
        let c = apply_json_patch(original, patch).expect("applies");
        assert_eq!(
            String::from_utf8(c[0].clone()).expect("utf-8"),
            "{\n    \"b\": 2,\n    \"a\": [\n        1,\n        2,\n        3\n    ]\n}\n"
        );
        let compact = apply_json_patch(br#"{"z":0,"y":1}"#, br#"[{"op":"remove","path":"/z"}]"#)
            .expect("applies");
        assert_eq!(compact[0], br#"{"y":1}"#);
        assert!(compact.iter().any(|c| c == b"{\"y\": 1}"));
    }

    #[test]
    fn bad_patches_are_refused() {
        assert!(apply_json_patch(b"not json", b"[]").is_err());
        assert!(apply_json_patch(b"{}", b"{\"op\":1}").is_err());
        assert!(
            apply_json_patch(b"{}", br#"[{"op":"remove","path":"/missing"}]"#).is_err(),
            "a path that does not exist"
        );
        assert!(
            apply_json_patch(br#"{"a":1}"#, br#"[{"op":"test","path":"/a","value":2}]"#).is_err()
        );
    }

    #[test]
    fn links_round_trip_and_types() {
        let l = PatchLink {
            href: "http://h/p".into(),
            mime_type: Some("application/json-patch+json".into()),
            length: Some(73),
            hashes: Hashes::parse("md5:00").0,
        };
        assert_eq!(PatchLink::decode(&l.encode()), Some(l.clone()));
        assert!(l.is_json_patch());
        let mut t = l.clone();
        t.mime_type = Some("application/x-tiff-diff".into());
        assert!(!t.is_json_patch());
        t.mime_type = Some("application/json-patch".into());
        assert!(t.is_json_patch());
        let bare = PatchLink {
            href: "http://h/p".into(),
            ..PatchLink::default()
        };
        assert_eq!(PatchLink::decode(&bare.encode()), Some(bare));
    }
}
