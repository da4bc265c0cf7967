//! Extracting one manifest entry: its bitstream inflated into a verified temporary file of the
//! store, a patch the package carries applied, a `deleted` entry removed (step 4 of the module
//! documentation of `dump`); and [`unpack_package`], the same without network or state.

use std::fs::File;
use std::path::Path;

use resourcesync_model::package::{DumpLimits, entry_name};
use resourcesync_model::{Capability, Change, DocumentReader, Entry, W3cDateTime};
use resourcesync_store::{Committed, Expect, RelPath, ResourceRecord, Store, Upload};

use crate::commit::{Origin, Pending, Write, not_recorded};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::fetch::patch::{MAX_PATCH_BYTES, patch_copy};
use crate::mapping::UriMapper;
use crate::march::{Kind, change_verdict};
use crate::plan::staging::PatchLink;
use crate::plan::staging::StagedItem;

use super::package::{Extractor, Package, inflate, manifest_opts, open_package};

/// What one manifest entry came to.
pub(super) enum Applied {
    /// Extracted and verified: put in place and recorded with its batch. `update`: the state
    /// has a copy of it (a file replaced at its path counts too, once placed).
    Verified {
        pending: Box<Pending>,
        update: bool,
    },
    Unchanged,
    Deleted,
    Skipped,
}

/// What is to be done with a manifest entry that has a bitstream: decided on the thread that
/// reads the manifest, carried out by an extracting one ([`extract_job`]).
pub(super) enum Plan {
    /// The copy in place is current.
    Unchanged,
    /// Left out by the include/exclude patterns (crate::filter): not extracted.
    Filtered,
    /// Inflate and verify it (boxed: a `Job` is large beside `Unchanged`).
    Extract(Box<Job>),
}

/// One bitstream to extract.
pub(super) struct Job {
    pub(super) uri: String,
    pub(super) rel: RelPath,
    pub(super) name: String,
    pub(super) expect: Expect,
    pub(super) lastmod: Option<W3cDateTime>,
    /// The state has a copy of it.
    pub(super) update: bool,
}

/// Decides what to do with a manifest entry's bitstream (step 4 of the module documentation).
/// With `fresh` (the state had no row of this Source when the dump started), the state is not
/// consulted: nothing can be in place already but what this dump wrote, and an entry of it seen
/// twice is written twice.
pub(super) fn plan(ctx: &Ctx, url: &str, e: &Entry, path: &str, fresh: bool) -> Result<Plan> {
    let uri = e.loc.as_str();
    if !ctx.filter.wants_mapped(uri, &ctx.mapper) {
        return Ok(Plan::Filtered);
    }
    let rel = ctx.mapper.map(uri)?;
    let name = entry_name(path).map_err(|why| Error::Package {
        url: url.to_owned(),
        message: format!("path {path:?}: {why}"),
    })?;
    let expect = Expect {
        length: e.length(),
        hashes: e.hashes().cloned().unwrap_or_default(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::fetch::mtime::copy_time(e.lastmod.as_ref(), None),
        uri: Some(uri.to_owned()),
        sha256: ctx.versions,
    };
    let prior = if fresh {
        None
    } else {
        ctx.ports.state.resource(uri)?.filter(|p| !p.gone)
    };
    // Already in place (a resumed run, or an earlier package): the state proves it current
    // (crate::plan::current, the rule of every change).
    if let Some(p) = &prior {
        let m = ctx.ports.store.head(&rel)?;
        // A bitstream to put in place, whatever its `change` says (a Change Dump's deletes are
        // taken before, crate::dump::apply): in place already when the verdict is the same.
        let item = StagedItem {
            change: None,
            ..StagedItem::from_entry(e)
        };
        if change_verdict(&item, Some(p), m.as_ref()) == Kind::Same {
            return Ok(Plan::Unchanged);
        }
    }
    Ok(Plan::Extract(Box::new(Job {
        uri: uri.to_owned(),
        rel,
        name: name.to_owned(),
        expect,
        lastmod: e.lastmod,
        update: prior.is_some(),
    })))
}

/// Extracts one bitstream into a verified temporary file.
pub(super) fn extract_job(ctx: &Ctx, ex: &mut Extractor, job: Job) -> Result<Applied> {
    let Job {
        uri,
        rel,
        name,
        expect,
        lastmod,
        update,
    } = job;
    let obs = ctx.ports.obs.clone();
    // A new copy takes the store's path for new objects (a directory: an unnamed file in its
    // directory, linked into place, no temporary name, no rename); one the state has, the
    // usual one (a named temporary file renamed over it).
    let tmp = inflate_entry(
        ctx.ports.store.as_ref(),
        ex,
        &name,
        &rel,
        expect,
        !update,
        |n| obs.bytes(n),
    )?;
    // Verified (length, every digest of the manifest entry) now; synced, put in place and
    // recorded with its batch (crate::commit).
    let body = tmp.finish()?;
    let row = ResourceRecord {
        path: rel.to_string(),
        uri,
        source: ctx.key.clone(),
        length: None,
        hashes: Default::default(),
        lastmod,
        etag: None,
        last_modified: None,
        gone: false,
    };
    Ok(Applied::Verified {
        pending: Box::new(Pending {
            body,
            row,
            origin: Origin::Package,
            // A copy the state has no current row of (none, or one kept after a delete).
            fresh: !update,
        }),
        update,
    })
}

/// [`plan`] then [`extract_job`], on this thread.
pub(super) fn extract(
    ctx: &Ctx,
    pkg: &mut Package,
    e: &Entry,
    path: &str,
    fresh: bool,
) -> Result<Applied> {
    match plan(ctx, &pkg.url, e, path, fresh)? {
        Plan::Unchanged => Ok(Applied::Unchanged),
        Plan::Filtered => Ok(Applied::Skipped),
        Plan::Extract(job) => extract_job(ctx, &mut pkg.ex, *job),
    }
}

/// Inflates the ZIP entry `name` of `pkg` into an upload to `rel` (bounded by `expect` and the
/// package's limits), verifies it against `expect` and puts it in place.
pub(super) fn unpack_entry(
    store: &dyn Store,
    pkg: &mut Package,
    name: &str,
    rel: &RelPath,
    expect: Expect,
    progress: impl FnMut(u64),
) -> Result<Committed> {
    let tmp = inflate_entry(store, &mut pkg.ex, name, rel, expect, true, progress)?;
    // Verified (length, every digest of the manifest entry), then put in place.
    let mut placed = store.publish(vec![tmp.finish()?])?;
    match placed.pop() {
        Some(p) => Ok(p?.committed),
        None => Err(resourcesync_store::object::foreign_upload(rel).into()),
    }
}

/// Inflates one bitstream of a package into an upload to `rel`, bounded as the module
/// documentation says; not yet verified. `new`: no copy is expected at `rel` (see
/// [`Store::begin_new`]).
pub(super) fn inflate_entry(
    store: &dyn Store,
    ex: &mut Extractor,
    name: &str,
    rel: &RelPath,
    expect: Expect,
    new: bool,
    mut progress: impl FnMut(u64),
) -> Result<Upload> {
    let Some(index) = ex.zip.index_for_name_raw(name.as_bytes()) else {
        return Err(Error::Package {
            url: ex.url.clone(),
            message: format!("no ZIP entry {name:?}, which the manifest lists"),
        });
    };
    let mut tmp = if new {
        store.begin_new(rel, expect)?
    } else {
        store.begin(rel, expect)?
    };
    let Extractor {
        zip,
        limits,
        budget,
        url,
        buf,
        ..
    } = ex;
    inflate(zip, index, limits, budget, buf, |chunk| {
        tmp.write(chunk)?;
        progress(chunk.len() as u64);
        Ok(())
    })
    .map_err(|message| Error::Package {
        url: url.clone(),
        message: format!("{name}: {message}"),
    })?;
    crate::crashpoint::point("package-entry");
    Ok(tmp)
}

/// What [`unpack_package`] did with each manifest entry that has a `path`: its `<loc>`, and the
/// path written or why it was not.
#[doc(hidden)]
pub type Unpacked = Vec<(String, Result<RelPath>)>;

/// Limits of [`unpack_package`].
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct UnpackLimits {
    /// The package limits.
    pub dump: DumpLimits,
    /// Largest manifest, in bytes after inflating.
    pub max_document_bytes: u64,
    /// Largest bitstream written when its manifest entry publishes no `length`.
    pub max_resource_bytes: u64,
}

/// Opens and checks the package in `file` (a Resource Dump Manifest package for
/// [`Capability::ResourceDumpManifest`], a Change Dump one for
/// [`Capability::ChangeDumpManifest`]) and extracts every bitstream its manifest lists into
/// `store`, at the path `mapper` gives its `<loc>`: steps 2 to 4 of the module documentation,
/// without network, state database or cursor (every entry is applied; `deleted` entries are
/// skipped). `scratch` receives the inflated manifest while the package is read.
///
/// `Err` when the package is refused as a whole; otherwise, per manifest entry with a `path`,
/// in manifest order, its `<loc>` and the path written or why it was not.
///
/// Not part of the stable API: the entry point of the `dump` fuzz target (`fuzz/`) and of
/// tests of hostile packages.
#[doc(hidden)]
pub fn unpack_package(
    file: &Path,
    cap: Capability,
    limits: UnpackLimits,
    scratch: &Path,
    mapper: &UriMapper,
    store: &dyn Store,
) -> Result<Unpacked> {
    let url = file.display().to_string();
    let mut pkg = open_package(
        file,
        &url,
        cap,
        limits.dump,
        scratch,
        limits.max_document_bytes,
    )?;
    let fh = File::open(&pkg.manifest).map_err(|e| Error::io("reading a manifest", e))?;
    let mut r = DocumentReader::new(fh, manifest_opts(&pkg.url, pkg.max_document_bytes))?;
    let mut out = Vec::new();
    let mut nth = 0usize;
    while let Some(e) = r.next_entry()? {
        nth += 1;
        let Some(path) = e.md.as_ref().and_then(|m| m.path.clone()) else {
            continue;
        };
        if e.change() == Some(&Change::Deleted) {
            continue;
        }
        let refused = pkg.refused.get(&nth).cloned();
        let res = (|| {
            if let Some(why) = refused {
                return Err(Error::Package {
                    url: url.clone(),
                    message: why,
                });
            }
            let rel = mapper.map(&e.loc)?;
            let name = entry_name(&path).map_err(|why| Error::Package {
                url: url.clone(),
                message: format!("path {path:?}: {why}"),
            })?;
            let expect = Expect {
                length: e.length(),
                hashes: e.hashes().cloned().unwrap_or_default(),
                max_bytes: limits.max_resource_bytes,
                modified: crate::fetch::mtime::copy_time(e.lastmod.as_ref(), None),
                uri: Some(e.loc.clone()),
                sha256: false,
            };
            unpack_entry(store, &mut pkg, name, &rel, expect, |_| {})?;
            Ok(rel)
        })();
        out.push((e.loc, res));
    }
    Ok(out)
}

/// Applies the patch a package carries for an `updated` entry to the copy (Z39.99-2014 §14.4;
/// see [`crate::fetch::patch`]): the result must have the entry's length and digests.
pub(super) fn extract_patch(
    ctx: &Ctx,
    pkg: &mut Package,
    e: &Entry,
    path: &str,
) -> std::result::Result<Applied, String> {
    let link = PatchLink::from_entry(e).ok_or("no patch link")?;
    let rel = ctx.mapper.map(&e.loc).map_err(|e| e.to_string())?;
    let name = entry_name(path)?;
    let index = pkg
        .ex
        .zip
        .index_for_name_raw(name.as_bytes())
        .ok_or_else(|| format!("no ZIP entry {name:?}, which the manifest lists"))?;
    let limit = link.length.unwrap_or(MAX_PATCH_BYTES).min(MAX_PATCH_BYTES);
    let mut patch = Vec::new();
    inflate(
        &mut pkg.ex.zip,
        index,
        &pkg.ex.limits,
        &pkg.ex.budget,
        &mut pkg.ex.buf,
        |chunk| {
            if (patch.len() + chunk.len()) as u64 > limit {
                return Err(Error::Patch {
                    url: format!("{}#{name}", pkg.url),
                    message: format!("longer than the {limit} bytes allowed"),
                });
            }
            patch.extend_from_slice(chunk);
            Ok(())
        },
    )?;
    let prior = ctx
        .ports
        .state
        .resource(&e.loc)
        .map_err(|e| e.to_string())?;
    let expect = Expect {
        length: e.length(),
        hashes: e.hashes().cloned().unwrap_or_default(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::fetch::mtime::copy_time(e.lastmod.as_ref(), None),
        uri: Some(e.loc.clone()),
        sha256: ctx.versions,
    };
    let body = patch_copy(
        ctx.ports.store.as_ref(),
        &rel,
        prior.as_ref(),
        &link,
        &patch,
        &expect,
    )?;
    // Through the store like any copy: an upload, verified again, then the batch.
    let mut tmp = ctx
        .ports
        .store
        .begin(&rel, expect)
        .map_err(|e| e.to_string())?;
    tmp.write(&body).map_err(|e| e.to_string())?;
    let body = tmp.finish().map_err(|e| e.to_string())?;
    let row = ResourceRecord {
        uri: e.loc.clone(),
        source: ctx.key.clone(),
        path: rel.to_string(),
        length: None,
        hashes: Default::default(),
        lastmod: e.lastmod,
        etag: None,
        last_modified: None,
        gone: false,
    };
    Ok(Applied::Verified {
        pending: Box::new(Pending {
            body,
            row,
            origin: Origin::Package,
            fresh: prior.is_none(),
        }),
        update: true,
    })
}

/// A `deleted` entry of a Change Dump Manifest: the copy goes only with `--delete`, as for a
/// Change List (Z39.99-2014 §13.2); otherwise the Change List reports it.
pub(super) fn delete(ctx: &Ctx, uri: &str) -> Result<Applied> {
    if !ctx.delete {
        return Ok(Applied::Skipped);
    }
    let Some(p) = ctx.ports.state.resource(uri)? else {
        return Ok(Applied::Skipped);
    };
    let rel = match RelPath::parse(&p.path) {
        Ok(r) => r,
        Err(_) => ctx.mapper.map(uri)?,
    };
    ctx.ports.store.delete(&rel)?;
    // The row only once the copy is gone, by the committer.
    ctx.ports
        .committer
        .write_blocking(vec![Write::Removed {
            source: ctx.key.clone(),
            uri: uri.to_owned(),
            when: None,
        }])
        .map_err(not_recorded)?;
    Ok(Applied::Deleted)
}
