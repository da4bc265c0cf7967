//! Resource Dumps and Change Dumps on the Destination side (Z39.99-2014 §11, §13; Z39.99-2017
//! §11, §13): packages of bitstreams fetched in a few requests instead of one per resource.
//!
//! # What is done with a package
//!
//! 1. It is downloaded to a temporary file that refuses to grow past the `length` its Resource
//!    Dump (or Change Dump) entry publishes, and past [`DumpLimits::max_package_bytes`]; its
//!    length and every published digest of a known algorithm are then checked (§11.1, §13.1).
//! 2. It is opened with the `zip` crate, and refused as a whole when it has two entries of one
//!    name or entries sharing bytes (the overlapping-entries zip bomb): which bytes a manifest
//!    `path` names cannot be told then. A ZIP entry that is encrypted, or whose declared size is
//!    more than [`DumpLimits::max_ratio`] times its compressed size (past
//!    [`RATIO_EXEMPT_BYTES`]) or more than [`DumpLimits::max_unpacked_bytes`] alone, is refused
//!    on its own: a manifest entry that names it fails.
//! 3. Its `manifest.xml` (at the top level, §11.2, §13.2) is inflated (bounded like any
//!    document) and read with the model's reader and validator: it must be a Resource Dump
//!    Manifest (or a Change Dump Manifest) and valid, or the package is refused. A manifest entry
//!    whose `path` is unsafe (see [`entry_name`]: "ZIP slip") or missing, or names a refused ZIP
//!    entry, is refused on its own, with an error naming the package, the entry and the rule;
//!    the others are used. The entries used must not declare more than
//!    [`DumpLimits::max_unpacked_bytes`] together, or the package is refused. A ZIP entry no
//!    manifest entry names is never read (a warning).
//! 4. Each manifest entry's bitstream is streamed into the store's temporary file: reading stops
//!    as soon as it passes the manifest `length` (or the maximum resource size), more than
//!    `max_ratio` times its compressed size, or the package's remaining uncompressed budget; the
//!    length and every digest of the manifest entry are verified, and the file is renamed to the
//!    path its **`<loc>`** maps to ([`crate::mapping`]), never to anything derived from the ZIP
//!    name. The state row is written after that, as for a download. An entry that fails is
//!    reported as a warning and left to the Resource List or the Change Lists, which fetch the
//!    resource on its own; a Source with no list gets a failure of the run instead, kept as
//!    pending (module `dump::only`). A copy the state does not have goes to an unnamed temporary
//!    file in its directory, linked into place instead of renamed ([`resourcesync_store::FsStore::create_temp_at`]; same
//!    order: verified, synced, linked, synced, recorded). The entries of a Resource Dump package
//!    are extracted by one thread per core (at most 4), chunks of manifest entries at a time,
//!    while the thread reading the manifest takes their outcomes into account in manifest order;
//!    Change Dump packages (deletes and patches depend on the entries before) by that thread
//!    alone.
//!
//! # Patches
//!
//! An `updated` entry of a Change Dump Manifest may carry a patch link whose `path` names the
//! change description inside the package (Z39.99-2014 §14.4). Its ZIP entry counts as listed.
//! The whole bitstream is used when the entry has one and it verifies; otherwise the patch is
//! read from the package (at most [`crate::fetch::patch::MAX_PATCH_BYTES`], checked against the link's `length` and
//! `hash`) and applied to the copy as for a Change List's patch link ([`crate::fetch::patch`]: JSON
//! Patch only, the copy must be the version the state records, the result must have the entry's
//! length and digests). An entry shipped as a patch alone, without a `path` of its own, is
//! accepted (the validator's `RS-11.2-path` finding for it does not refuse the package).
//!
//! # Baseline
//!
//! A first run against a Source whose Capability List offers a Resource Dump (unless
//! `--no-dump`) applies every package of it, then reads the Resource List as usual: resources
//! the dump brought (already recorded, same digest) are left alone, the others — created since
//! the dump, or left out of it — are fetched one by one, and resources deleted since are handled
//! as deletes. When the Resource List is older than the dump, it is not diffed; the run goes on
//! from the dump's `at` through the Change Lists instead.
//!
//! # Incremental
//!
//! With `--prefer-dumps`, the Change Dump's packages whose period ends after the cursor
//! are applied in forward chronological order (§13.1), their entries after the cursor in manifest
//! order (§13.2); `deleted` entries remove the copy only with `--delete` (otherwise the Change
//! List reports them, once). The Change Lists are then read from the cursor as usual: what the
//! packages applied is found current in the state and not fetched again, and whatever they did
//! not cover (a newer open period, a refused package, a left-out change) is fetched.

mod apply;
mod download;
mod extract;
pub(crate) mod list;
pub(crate) mod only;
mod package;

pub use extract::{UnpackLimits, Unpacked, unpack_package};

use std::sync::Arc;

use resourcesync_model::{Capability, Entry, Header, W3cDateTime};

use crate::discover::docs::{DocFetcher, ListSink, MAX_INDEX_ENTRIES, walk};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
pub(crate) use crate::outcome::DumpStats;
pub use resourcesync_model::package::{
    DEFAULT_MAX_PACKAGE_BYTES, DEFAULT_MAX_RATIO, DEFAULT_MAX_UNPACKED_BYTES, DumpLimits,
    MANIFEST_NAME, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, RATIO_EXEMPT_BYTES, TOLERATED_RULES,
    entry_name,
};

use apply::apply_all;
use download::download_package;
use package::{manifest_opts, open_package};

/// Most warnings kept per dump (the rest are counted).
const MAX_WARNINGS: usize = 100;
/// Validation findings kept per manifest.
const KEPT_FINDINGS: usize = 1000;

fn warn(warnings: &mut Vec<String>, dropped: &mut u64, msg: String) {
    tracing::warn!("{msg}");
    if warnings.len() < MAX_WARNINGS {
        warnings.push(msg);
    } else {
        *dropped += 1;
    }
}

/// What applying one package comes to: its counts, and its warnings (past [`MAX_WARNINGS`],
/// only counted in `dropped`).
#[derive(Debug, Default)]
struct Told {
    stats: DumpStats,
    warnings: Vec<String>,
    dropped: u64,
}

impl Told {
    /// Adds a warning (see [`warn`]).
    fn warn(&mut self, msg: String) {
        warn(&mut self.warnings, &mut self.dropped, msg);
    }
}

/// Collects the package entries of a Resource Dump or Change Dump (or their index).
struct PackageSink {
    url: String,
    packages: Vec<Entry>,
}

impl ListSink for PackageSink {
    fn entry(&mut self, e: Entry) -> Result<()> {
        if self.packages.len() >= MAX_INDEX_ENTRIES {
            return Err(Error::BadDocument {
                url: self.url.clone(),
                message: format!(
                    "more than {MAX_INDEX_ENTRIES} packages: tell the Source's maintainer"
                ),
            });
        }
        self.packages.push(e);
        Ok(())
    }
}

/// Baseline from a Resource Dump (Z39.99-2014 §11): every package applied; the context's
/// `dumped` set receives the URIs whose copy is in place from it. With `lists` (a Resource List
/// follows), a Resource Dump that cannot be read is a warning (the Resource List does the
/// work); without, an error.
pub(crate) async fn resource_dump(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    url: &str,
    lists: bool,
    limits: &DumpLimits,
    warnings: &mut Vec<String>,
) -> Result<DumpStats> {
    ctx.ports.obs.phase("reading the Resource Dump");
    let Some((packages, top)) = read_packages(
        fetcher,
        url,
        Capability::ResourceDump,
        lists.then_some("baseline from the Resource List alone"),
        warnings,
    )
    .await?
    else {
        return Ok(DumpStats::default());
    };
    // A first baseline not resumed: no row to look up for any entry.
    let fresh = ctx
        .ports
        .state
        .resources_page(&ctx.key, None, 1)?
        .is_empty();
    let mut stats = apply_all(
        ctx,
        fetcher,
        &packages,
        Capability::ResourceDumpManifest,
        (None, fresh, lists),
        limits,
        warnings,
    )
    .await?;
    // Z39.99-2014 §11.1: `at`, when the snapshot of the dump started (of no use when nothing
    // was applied; nor, without a Resource List, when a package was refused: the next run
    // applies the dump again rather than follow changes from a snapshot it does not have).
    if stats.packages > 0 && (lists || stats.refused == 0) {
        stats.at = top.md.as_ref().and_then(|m| m.at);
    }
    Ok(stats)
}

/// The package entries of a Resource Dump or Change Dump (every part of an index) and the top
/// document's header. A document that cannot be read is an error; or, with `fallback` (what
/// does the work instead), a warning saying it, and `None`.
pub(crate) async fn read_packages(
    fetcher: &DocFetcher,
    url: &str,
    cap: Capability,
    fallback: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<Option<(Vec<Entry>, Header)>> {
    let sink = PackageSink {
        url: url.to_owned(),
        packages: Vec::new(),
    };
    let what = if cap == Capability::ResourceDump {
        "Resource Dump"
    } else {
        "Change Dump"
    };
    match walk(fetcher, url, cap, sink).await {
        Ok((sink, info)) => {
            warnings.extend(info.warnings);
            Ok(Some((sink.packages, info.top)))
        }
        Err(e) => match fallback {
            Some(fallback) => {
                warnings.push(format!("{what} {url}: {e}: {fallback}"));
                Ok(None)
            }
            None => Err(e),
        },
    }
}

/// Incremental from a Change Dump (Z39.99-2014 §13): the packages whose period ends after
/// the cursor, in forward chronological order (§13.1), their entries after the cursor. With
/// `lists` (the Change Lists follow), a Change Dump that cannot be read is a warning; without,
/// an error.
pub(crate) async fn change_dumps(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    url: &str,
    cursor: W3cDateTime,
    lists: bool,
    limits: &DumpLimits,
    warnings: &mut Vec<String>,
) -> Result<DumpStats> {
    ctx.ports.obs.phase("reading the Change Dump");
    let Some((packages, _)) = read_packages(
        fetcher,
        url,
        Capability::ChangeDump,
        lists.then_some("changes from the Change Lists alone"),
        warnings,
    )
    .await?
    else {
        return Ok(DumpStats::default());
    };
    let packages = packages_after(packages, &cursor);
    apply_all(
        ctx,
        fetcher,
        &packages,
        Capability::ChangeDumpManifest,
        (Some(cursor), false, lists),
        limits,
        warnings,
    )
    .await
}

/// The Change Dump packages holding changes after `cursor`, in forward chronological order
/// (Z39.99-2014 §13.1): every package whose period ends after the cursor (or has no end), not
/// only those starting after it: a period that was open at the last sync holds both changes
/// already applied and later ones (the entries at or before the cursor are skipped when the
/// manifest is applied). Packages without `from` are left to the Change Lists.
pub(crate) fn packages_after(packages: Vec<Entry>, cursor: &W3cDateTime) -> Vec<Entry> {
    let mut selected: Vec<(W3cDateTime, Entry)> = packages
        .into_iter()
        .filter_map(|e| {
            let md = e.md.as_ref()?;
            let from = md.from?;
            let ends_after = md
                .until
                .is_none_or(|u| u.cmp_instant(cursor) == std::cmp::Ordering::Greater);
            ends_after.then_some((from, e))
        })
        .collect();
    // Stable: packages of one period keep the document's order.
    selected.sort_by(|a, b| a.0.cmp_instant(&b.0));
    selected.into_iter().map(|(_, e)| e).collect()
}

#[cfg(test)]
mod tests;
