//! The Source's resources as its dumps' manifests list them, for an audit of a Source that
//! offers no Resource List (Z39.99-2017 §5.2: audit needs "an up-to-date list of resources",
//! which the manifests give): the latest Resource Dump's manifests (§11.2), then the entries of
//! the Change Dump's manifests after the Resource Dump's `at` (§13.2).
//!
//! Each package is downloaded and checked as for a sync ([`crate::dump`]: its published length
//! and digest, a readable ZIP, a valid manifest); nothing is extracted. A package that cannot be
//! read fails the audit: a list read in part would report the rest as extra.

use std::fs::File;
use std::sync::Arc;

use resourcesync_model::{Capability, DocumentReader, W3cDateTime};

use crate::discover::docs::{DocFetcher, ListSink};
use crate::dump::{
    DumpLimits, download_package, manifest_opts, open_package, packages_after, read_packages,
};
use crate::error::{Error, Result};
use crate::report::Observer;

/// Streams into `sink` every entry of the manifests of the packages of the Resource Dump (or
/// Change Dump) `url`: for a Change Dump, only the packages whose period ends after `after`
/// (the sink skips the entries at or before it). Returns the sink and the dump's `at`.
pub(crate) async fn manifests<S: ListSink>(
    fetcher: &DocFetcher,
    obs: &Arc<dyn Observer>,
    url: &str,
    after: Option<W3cDateTime>,
    limits: &DumpLimits,
    mut sink: S,
    warnings: &mut Vec<String>,
) -> Result<(S, Option<W3cDateTime>)> {
    let (cap, manifest_cap) = if after.is_some() {
        (Capability::ChangeDump, Capability::ChangeDumpManifest)
    } else {
        (Capability::ResourceDump, Capability::ResourceDumpManifest)
    };
    let Some((packages, top)) = read_packages(fetcher, url, cap, None, warnings).await? else {
        return Ok((sink, None));
    };
    let packages = match &after {
        Some(a) => packages_after(packages, a),
        None => packages,
    };
    for p in &packages {
        let file = download_package(&fetcher.http, obs.as_ref(), &fetcher.dir, p, limits).await?;
        let (purl, scratch, max_doc, cap, limits) = (
            p.loc.clone(),
            fetcher.dir.clone(),
            fetcher.max_bytes,
            manifest_cap.clone(),
            *limits,
        );
        sink = tokio::task::spawn_blocking(move || -> Result<S> {
            let pkg = open_package(&file, &purl, cap, limits, &scratch, max_doc)?;
            let fh = File::open(&pkg.manifest).map_err(|e| Error::io("reading a manifest", e))?;
            let mut r = DocumentReader::new(fh, manifest_opts(&purl, max_doc))?;
            while let Some(e) = r.next_entry()? {
                sink.entry(e)?;
            }
            drop(file);
            Ok(sink)
        })
        .await??;
    }
    Ok((sink, top.md.as_ref().and_then(|m| m.at)))
}
