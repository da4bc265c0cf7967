//! Resource Dumps and Change Dumps: ZIP packages of bitstreams, each with its manifest
//! (Z39.99-2014 §11 and §13; Z39.99-2017 §11 and §13).
//!
//! Files, under the documents folder (`resourcesync/`):
//!
//! ```text
//! resourcedump.xml                                  Resource Dump (§11.1)
//! dumps/resourcedump-SSSSSS-NNNNN.zip               packages of snapshot SSSSSS
//! dumps/resourcedump-SSSSSS-NNNNN.manifest.xml      copies of their manifests (rel="contents")
//! changedump.xml                                    Change Dump (§13.1)
//! changedumps/changedump-PPPPP.zip                  the package of closed change period PPPPP
//! changedumps/changedump-PPPPP-NNNNN.zip            its further parts (N ≥ 2), when split
//! changedumps/changedump-PPPPP[-NNNNN].manifest.xml copies of their manifests
//! ```
//!
//! Both documents are written through the model crate's [`SplitWriter`], so past 50,000
//! packages they become indexes (§11.1, §13.1: "must group them using a ... Index").
//!
//! # Packages
//!
//! Every package has `manifest.xml` at its top level (§11.2, §13.2), written last, after every
//! bitstream has been copied and checked. Bitstreams are stored under `resources/` (Resource
//! Dumps) or `changes/` (Change Dumps) followed by the resource's path relative to the Source
//! directory, as the examples of the specification do (Example 18 `/resources/res1`, Example 23
//! `/changes/res7.html`): a resource named `manifest.xml` at the top of the Source directory
//! can then never collide with the manifest. The manifest's `path` is `/` followed by exactly
//! the ZIP entry name. A path that is not UTF-8, or that has control characters or a backslash
//! (which ZIP tools read as a separator), is stored under its percent-encoded form instead
//! (the URL path of the resource), made unique with a `~N` suffix in the unlikely case that the
//! name is taken.
//!
//! Packages are split so that none has more than [`DumpOptions::max_files`] manifest entries
//! (at most 50,000, the Sitemap limit every manifest must keep, Z39.99-2014 §7), a manifest of
//! more than 50 MB, or more than [`DumpOptions::max_bytes`] bytes, counting the bitstreams
//! uncompressed plus their ZIP headers and manifest lines (an upper bound of the ZIP size). A
//! single bitstream larger than `max_bytes` gets a package of its own. Entries larger than 4 GiB
//! are written with ZIP64 sizes (`large_file`); archives of more than 65,535 entries or past
//! 4 GiB get a ZIP64 end of central directory from the `zip` crate itself.
//!
//! Bitstreams of types that are already compressed (JPEG, PNG, video, ZIP, gzip, ...) are
//! stored, and so are bitstreams shorter than 1 KiB (`STORED_BELOW`: deflate saves
//! little there, and its set-up per entry was most of the time of publishing small files); all
//! others are deflated.
//!
//! Package files are written to a temporary file and renamed into place
//! ([`AtomicFile`]); the manifest copy is written the same way, with the same bytes as the
//! manifest inside the package (§11.1, §13.1: the copy must match).
//!
//! # A file that changed since the scan
//!
//! Every bitstream is hashed while it is copied into the package, with the algorithms of the
//! digests recorded for it. When its length or a digest differs from what the state recorded
//! (the file changed after the scan), the partial entry is removed from the package again
//! (`abort_file`, and the package file is cut back) and **no manifest entry is written for
//! it**. In a Resource Dump the resource is left out and counted in [`DumpReport::skipped`],
//! with the reason in [`DumpReport::problems`]: the dump then describes the snapshot exactly (the
//! Resource List of the same snapshot has the same digests), and the new content reaches
//! Destinations through the next scan's Change List and the next dump. A manifest entry's digest
//! therefore always matches the bytes at its `path`.
//!
//! # Change Dumps and older versions
//!
//! One package is made per closed change period (the span of one Change List) not yet dumped,
//! listing the period's changes in forward chronological order (§13.2). A `deleted` change is
//! listed without a path (§13.2). A `created` or `updated` change needs the resource's content
//! as of that change, but the Source only has the current content: a change is packaged only
//! when its recorded length and digests equal those of the current content, verified on the
//! bytes copied. Changes whose content has since been replaced or deleted are **left out of
//! the manifest** and counted in [`DumpReport::superseded`]: §13.2 makes `path` mandatory for
//! them, so an entry without a bitstream would be invalid, and a bitstream of newer content
//! would carry a wrong digest. A Destination reading the Change Dump still converges: the
//! later change that superseded the left-out one is in a later (or the same) package. This
//! departs from §13.2's "bitstream for all resource changes that occurred during the specified
//! interval must be included", which no Source keeping only current content can meet. Several
//! changes of one resource with the same content share one bitstream in the package.

mod package;
mod resource;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::{Component, Path, PathBuf};

use resourcesync_model::document::{MAX_DOCUMENT_BYTES, MAX_ENTRIES};
use resourcesync_model::writer::{SplitLimits, SplitWriter, entry_xml, header_xml};
use resourcesync_model::{
    Capability, Change, Entry, HashAlg, Hashes, Header, Link, Metadata, MultiHasher, Root,
    W3cDateTime,
};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Skipped};
use crate::publish::layout::{AtomicFile, Layout, write_file};
use crate::publish::sink::{DirSink, DocSink, SinkParts};
use crate::publish::{change_entry, resource_entry};
use crate::state::rel_path;
use crate::state::{Period, State};

/// The name of the manifest inside every package (Z39.99-2014 §11.2, §13.2).
pub const MANIFEST_NAME: &str = "manifest.xml";
/// Folder of Resource Dump packages, under the documents folder.
pub const RESOURCE_DUMP_DIR: &str = "dumps";
/// Folder of Change Dump packages, under the documents folder.
pub const CHANGE_DUMP_DIR: &str = "changedumps";
/// Folder of the bitstreams inside a Resource Dump package.
pub const RESOURCE_PREFIX: &str = "resources/";
/// Folder of the bitstreams inside a Change Dump package.
pub const CHANGE_PREFIX: &str = "changes/";
/// Default [`DumpOptions::max_bytes`]: 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;
/// Default [`DumpOptions::max_files`]: 10,000. Smaller than the Sitemap limit so that a
/// change touches few packages and a re-publish rewrites only those (see [`resource`]).
pub const DEFAULT_MAX_FILES: usize = 10_000;
/// Default [`DumpOptions::rebuild_after`]: 10 (%). A Destination starting from a Resource Dump
/// that old fetches at most a tenth of the resources one by one.
pub const DEFAULT_REBUILD_AFTER: u32 = 10;

/// Bytes counted per ZIP entry besides its data and name: local header (30), central header
/// (46), ZIP64 extra fields (up to 48) and slack.
const ZIP_ENTRY_OVERHEAD: u64 = 128;
/// Bytes counted per package besides its entries: end of central directory records, the
/// manifest's headers and its root element.
const ZIP_PACKAGE_OVERHEAD: u64 = 4096;
/// Room kept in a manifest for its header and footer.
const MANIFEST_HEADER_RESERVE: u64 = 4096;
/// Digests of packages, as listed in the Resource Dump and the Change Dump.
const PACKAGE_ALGS: [HashAlg; 2] = [HashAlg::Md5, HashAlg::Sha256];

/// How packages are split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpOptions {
    /// Largest package in bytes (default 1 GiB), counting bitstreams uncompressed plus their
    /// ZIP headers and manifest lines. A bitstream larger than this gets a package of its own.
    pub max_bytes: u64,
    /// Most manifest entries in one package (default [`DEFAULT_MAX_FILES`]; upper bound 50,000,
    /// the Sitemap limit on the manifest, Z39.99-2014 §7; values outside 1..=50,000 are
    /// clamped).
    pub max_files: usize,
    /// How far the Resource Dump may fall behind, in percent of the resources it holds: while
    /// the resources changed since its snapshot (created, updated or deleted, counted once each)
    /// are at most this share, a new snapshot keeps it as it is, and the changes reach
    /// Destinations through the Change Lists and Change Dumps (Z39.99-2014 §11.1: a Resource
    /// Dump describes the snapshot of its `at`; a Destination starting from it catches up from
    /// there). Past it, a Resource Dump of the new snapshot is written (reusing the unchanged
    /// packages, see [`resource`]). 0: a new Resource Dump for every snapshot. Default
    /// [`DEFAULT_REBUILD_AFTER`].
    pub rebuild_after: u32,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            max_bytes: DEFAULT_MAX_BYTES,
            max_files: DEFAULT_MAX_FILES,
            rebuild_after: DEFAULT_REBUILD_AFTER,
        }
    }
}

impl DumpOptions {
    fn clamped(&self) -> DumpOptions {
        DumpOptions {
            max_bytes: self.max_bytes.max(1),
            max_files: self.max_files.clamp(1, MAX_ENTRIES),
            rebuild_after: self.rebuild_after.min(100),
        }
    }
}

/// What a dump call did.
#[derive(Debug, Clone, Default)]
pub struct DumpReport {
    /// Packages written by this call (0 when everything was up to date).
    pub packages: usize,
    /// Packages of the previous Resource Dump listed again in the new one, not rewritten
    /// (every entry of their manifest is as the new snapshot has it).
    pub reused: usize,
    /// Bitstreams written into those packages.
    pub files: u64,
    /// Of those, bitstreams copied from the previous dump's package of their range as they
    /// were (compressed bytes reused, after their content was checked against the state).
    pub carried: u64,
    /// Total size of those packages in bytes.
    pub bytes: u64,
    /// Resources left out of a Resource Dump (changed since the scan, unreadable, or with a
    /// name no package can hold); see [`DumpReport::problems`].
    pub skipped: u64,
    /// Changes left out of a Change Dump manifest because the content they describe is no
    /// longer available (replaced or deleted since, or changed after the scan).
    pub superseded: u64,
    /// Why resources were skipped (paths relative to the Source directory).
    pub problems: Vec<Skipped>,
    /// Files written (packages, manifest copies, the Resource Dump or Change Dump).
    pub written: Vec<PathBuf>,
    /// Packages and manifest copies of older snapshots removed.
    pub removed: Vec<PathBuf>,
    /// When the Resource Dump of an earlier snapshot was kept ([`DumpOptions::rebuild_after`]):
    /// the resources changed since its snapshot.
    pub behind: Option<u64>,
}

/// Name (relative to the documents folder) of package `n` (from 1) of the Resource Dump of a
/// snapshot.
pub fn resource_dump_package_name(snapshot: i64, n: usize) -> String {
    format!("{RESOURCE_DUMP_DIR}/resourcedump-{snapshot:06}-{n:05}.zip")
}

/// Name (relative to the documents folder) of part `n` (from 1) of the Change Dump package of
/// a period: `changedump-PPPPP.zip` for the first, `changedump-PPPPP-NNNNN.zip` for the others.
pub fn change_dump_package_name(period: i64, n: usize) -> String {
    if n <= 1 {
        format!("{CHANGE_DUMP_DIR}/changedump-{period:05}.zip")
    } else {
        format!("{CHANGE_DUMP_DIR}/changedump-{period:05}-{n:05}.zip")
    }
}

/// Name of the manifest copy published next to a package (`X.zip` → `X.manifest.xml`).
pub fn manifest_copy_name(package: &str) -> String {
    let stem = package.strip_suffix(".zip").unwrap_or(package);
    format!("{stem}.manifest.xml")
}

/// Whether an entry of `len` bytes needs ZIP64 sizes (`large_file`): when it or its deflated
/// form (deflate can add a few bytes per block to incompressible data) could reach 4 GiB.
pub fn needs_large_file(len: u64) -> bool {
    len.saturating_add(len / 1024)
        .saturating_add(1 << 20)
        .saturating_add(1)
        >= zip::ZIP64_BYTES_THR
}

use package::*;
pub use resource::write_resource_dump;

/// The entry of a package in the Resource Dump or the Change Dump (Z39.99-2014 §11.1, §13.1).
fn package_entry(
    layout: &Layout,
    rec: &PackageRecord,
    at: Option<(W3cDateTime, W3cDateTime)>,
) -> Entry {
    let mut e = Entry::new(layout.doc_url(&rec.name));
    let md = e.md_mut();
    md.mime_type = Some("application/zip".into());
    md.length = Some(rec.length);
    md.hash = Some(rec.hashes.clone());
    match at {
        Some((at, completed)) => {
            // A package carried over from an earlier snapshot keeps that snapshot's times, as
            // its manifest does (Z39.99-2014 §11.1: the package's own at/completed).
            let (at, completed) = (rec.at.unwrap_or(at), rec.completed.unwrap_or(completed));
            md.at = Some(at);
            md.completed = Some(completed);
            e.lastmod = Some(completed);
        }
        None => {
            md.from = rec.from;
            md.until = rec.until;
            e.lastmod = rec.until;
        }
    }
    let mut contents = Link::new("contents", layout.doc_url(&manifest_copy_name(&rec.name)));
    contents.mime_type = Some("application/xml".into());
    e.links.push(contents);
    e
}

/// Writes a Resource Dump or Change Dump document (split into an index past the Sitemap
/// limits), returning the files written.
fn write_dump_document(
    layout: &Layout,
    name: &str,
    header: Header,
    entries: impl IntoIterator<Item = Entry>,
) -> Result<Vec<PathBuf>> {
    // Through the one document sink, as every other document (the packages themselves are
    // ZIP files written in place: a ZIP writer seeks).
    let sink = DirSink::new(&layout.out);
    let parts = SinkParts::new(&sink, layout, name);
    let mut w = SplitWriter::new(parts, name, header, SplitLimits::default())?;
    for e in entries {
        w.write_entry(&e)?;
    }
    let (parts, _) = w.finish()?;
    Ok(parts
        .written
        .iter()
        .filter_map(|k| sink.local_path(k))
        .collect())
}

/// Removes the files in `dir` whose names start with `prefix` and are not in `keep`.
fn prune(dir: &Path, prefix: &str, keep: &HashSet<PathBuf>) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return removed;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ours = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(prefix));
        if ours && !keep.contains(&p) && p.is_file() {
            match std::fs::remove_file(&p) {
                Ok(()) => removed.push(p),
                Err(err) => tracing::warn!("cannot remove {}: {err}", p.display()),
            }
        }
    }
    removed
}

fn records_present(layout: &Layout, records: &[PackageRecord]) -> bool {
    records.iter().all(|r| {
        layout.doc_path(&r.name).is_file()
            && layout.doc_path(&manifest_copy_name(&r.name)).is_file()
    })
}

fn note_finished(report: &mut DumpReport, records: &mut Vec<PackageRecord>, f: Finished) {
    report.packages += 1;
    report.bytes += f.record.length;
    report.written.extend(f.files);
    records.push(f.record);
}

/// The bytes of a change: its resource now, its path, its entry name in the package.
type Bytes = (crate::state::Resource, PathBuf, String);

/// Where the bytes of change `c` come from: `Some(None)` for a deletion (none),
/// `Some(Some((resource, path, ZIP entry name)))` while the resource still has the content of
/// the change; `None` (counted as superseded) when it was replaced or deleted since, or its
/// path has no ZIP entry name.
fn change_source(
    state: &State,
    c: &crate::state::ChangeRecord,
    report: &mut DumpReport,
) -> Result<Option<Option<Bytes>>> {
    if c.change == Change::Deleted {
        return Ok(Some(None));
    }
    let r = match state.resource_by_uri(&c.uri)? {
        Some(r) if Some(r.length) == c.length && r.hashes.agrees_with(&c.hashes) == Some(true) => r,
        // Replaced or deleted since: the content of this change is gone.
        _ => {
            report.superseded += 1;
            return Ok(None);
        }
    };
    let rel = rel_path(&r);
    let Some(base) = zip_name(CHANGE_PREFIX, &rel) else {
        report.superseded += 1;
        report.problems.push(Skipped {
            path: rel,
            reason: "no ZIP entry name for this path".into(),
        });
        return Ok(None);
    };
    Ok(Some(Some((r, rel, base))))
}

/// Copies the bitstream of a change's resource `r` into `pkg` (the first time the package
/// needs it), checked against the digests of both the change and the current state; the
/// outcome, and what the package's estimate grows by.
fn copy_change(
    pkg: &mut Package,
    inv: &dyn Inventory,
    r: &crate::state::Resource,
    rel: &Path,
    base: &str,
    change_hashes: &Hashes,
) -> Result<(CopyOutcome, u64)> {
    let name = pkg.unique_name(base.to_owned());
    let est = bitstream_estimate(r.length, name.len());
    let mut expected = change_hashes.clone();
    for d in &r.hashes.0 {
        if expected.get(&d.alg).is_none() {
            expected.0.push(d.clone());
        }
    }
    let b = Bitstream {
        rel,
        name: &name,
        length: r.length,
        hashes: &expected,
        mime: r.mime_type.as_deref(),
        lastmod: &r.lastmod,
    };
    let o = pkg.copy(inv, &b)?;
    pkg.copied.insert(r.path.clone(), o.clone());
    Ok((o, est))
}

/// Writes one package (or several parts) for a closed period, returning their records.
fn dump_period(
    layout: &Layout,
    state: &State,
    inv: &dyn Inventory,
    opts: &DumpOptions,
    period: &Period,
    until: W3cDateTime,
    report: &mut DumpReport,
) -> Result<Vec<PackageRecord>> {
    let manifest_header = |from: W3cDateTime, until: W3cDateTime| {
        // Z39.99-2014 §13.2: capability changedump-manifest, from/until of the package, a link
        // up to the Capability List.
        let mut md = Metadata::with_capability(Capability::ChangeDumpManifest);
        md.from = Some(from);
        md.until = Some(until);
        let mut h = Header::new(Root::UrlSet, md);
        h.links.push(up(layout));
        h
    };
    let mut records: Vec<PackageRecord> = Vec::new();
    let mut current: Option<Package> = None;
    let mut part_from = period.from;
    let mut line = String::with_capacity(512);
    state.for_each_change(period.id, |c| {
        // Z39.99-2014 §13.2, Z39.99-2017 §13.2: loc, lastmod, rs:md change, datetime, hash,
        // length, type, and path unless deleted; entries in forward chronological order
        // (the state records changes in strictly increasing datetime order).
        let mut e = change_entry(&c);
        let Some(source) = change_source(state, &c, report)? else {
            return Ok(());
        };
        if let Some((_, _, base)) = &source {
            e.md_mut().path = Some(format!("/{base}"));
        }
        line.clear();
        entry_xml(&mut line, MANIFEST_NAME, Root::UrlSet, &[], &e)?;
        // What one more entry would add to the package (nothing for a bitstream it has).
        let needed = match &source {
            Some((r, _, base))
                if !current
                    .as_ref()
                    .is_some_and(|p| p.copied.contains_key(&r.path)) =>
            {
                bitstream_estimate(r.length, base.len())
            }
            _ => 0,
        };
        if current
            .as_ref()
            .is_some_and(|p| !p.fits(needed, line.len(), opts))
        {
            if let Some(p) = current.take() {
                let part_until = p.last_time.unwrap_or(part_from);
                let f = p.finish(layout, &manifest_header(part_from, part_until), &part_until)?;
                note_finished(report, &mut records, f);
                part_from = part_until;
            }
        }
        let pkg = match &mut current {
            Some(p) => p,
            None => current.insert(Package::create(
                layout,
                change_dump_package_name(period.id, records.len() + 1),
            )?),
        };
        // What the package estimate grows by: the bitstream's size when copied now.
        let mut est = 0;
        if let Some((r, rel, base)) = source {
            let outcome = match pkg.copied.get(&r.path) {
                Some(o) => o.clone(),
                None => {
                    let (o, grown) = copy_change(pkg, inv, &r, &rel, &base, &c.hashes)?;
                    est = grown;
                    o
                }
            };
            match outcome {
                CopyOutcome::Done(copied) => {
                    if copied.name != base {
                        e.md_mut().path = Some(format!("/{}", copied.name));
                        line.clear();
                        entry_xml(&mut line, MANIFEST_NAME, Root::UrlSet, &[], &e)?;
                    }
                    report.files += u64::from(est > 0);
                }
                // Changed after the scan: this change's content is gone too.
                CopyOutcome::Changed { .. } => {
                    report.superseded += 1;
                    return Ok(());
                }
                CopyOutcome::Unreadable(reason) => {
                    report.superseded += 1;
                    report.problems.push(Skipped { path: rel, reason });
                    return Ok(());
                }
            }
        }
        pkg.push_line(&line, est, Some(c.datetime));
        Ok(())
    })?;
    // The last part ends at the period's end; it is written even when empty, so that the
    // packages cover the whole period.
    let p = match current.take() {
        Some(p) => p,
        None => Package::create(
            layout,
            change_dump_package_name(period.id, records.len() + 1),
        )?,
    };
    let f = p.finish(layout, &manifest_header(part_from, until), &until)?;
    note_finished(report, &mut records, f);
    Ok(records)
}

/// Writes Change Dump packages for every closed change period not dumped yet (Z39.99-2014
/// §13): `resourcesync/changedumps/changedump-PPPPP.zip` (further parts
/// `changedump-PPPPP-NNNNN.zip` when a period exceeds the limits) with a Change Dump Manifest
/// (§13.2) inside and a copy next to it, then `resourcesync/changedump.xml` (§13.1): `from` of
/// the first period, a link up, and one entry per package in forward chronological order with
/// type, length, md5 and sha-256, `from`/`until`, `<lastmod>` = `until`, and a `contents` link
/// to the manifest copy.
///
/// A period is dumped once (state meta key `changedump:<period>`); the open period never is.
/// Changes whose content is no longer the current content are left out of the manifest and
/// counted in [`DumpReport::superseded`] (see the [module documentation](self)); `deleted`
/// changes are listed without a path. The Change Dump document is only rewritten when a
/// package was added (or it is missing).
pub fn write_change_dumps(
    layout: &Layout,
    state: &State,
    inv: &dyn Inventory,
    opts: &DumpOptions,
) -> Result<DumpReport> {
    let opts = opts.clamped();
    let mut report = DumpReport::default();
    let periods = state.periods()?;
    let mut all: Vec<PackageRecord> = Vec::new();
    for p in &periods {
        let Some(until) = p.until else {
            continue;
        };
        let key = format!("changedump:{}", p.id);
        let done = state
            .meta(&key)?
            .and_then(|v| decode_records(&v))
            .filter(|recs| !recs.is_empty() && records_present(layout, recs));
        let recs = match done {
            Some(r) => r,
            None => {
                let r = dump_period(layout, state, inv, &opts, p, until, &mut report)?;
                state.set_meta(&key, &encode_records(&r))?;
                r
            }
        };
        all.extend(recs);
    }
    if report.packages > 0 || !layout.doc_path("changedump.xml").is_file() {
        // Z39.99-2014 §13.1: capability changedump with from, a link up, packages in forward
        // chronological order.
        let mut md = Metadata::with_capability(Capability::ChangeDump);
        md.from = Some(
            periods
                .first()
                .map(|p| p.from)
                .unwrap_or_else(|| W3cDateTime::now(false)),
        );
        let mut header = Header::new(Root::UrlSet, md);
        header.links.push(up(layout));
        let entries = all.iter().map(|rec| package_entry(layout, rec, None));
        report
            .written
            .extend(write_dump_document(layout, "changedump", header, entries)?);
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
