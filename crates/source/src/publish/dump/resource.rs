//! The Resource Dump of a snapshot (Z39.99-2014 §11), in stable ranges of URIs, reusing the
//! packages of the previous dump that did not change.
//!
//! Resources are packaged in URI order. The previous dump's packages cut the URI space into
//! ranges, each starting at the URI of its package's first resource; a package of the new dump
//! never spans two of those ranges (it is cut earlier when the limits say so, and resources
//! before the first range get a package of their own). Each range is planned in full first:
//! its manifest entry lines, and their SHA-256 (the package's *fingerprint*, kept in the state
//! with its record). A range whose first URI and fingerprint are those of a package of the
//! previous dump, whose package file still has its recorded length and whose manifest copy is
//! there, is **carried over**: listed again as it is, with its own `at`/`completed` (its
//! manifest's), not read or written. Equal fingerprints mean equal manifests entry for entry
//! (loc, lastmod, length, digests, type, path), so the carried-over package describes the new
//! snapshot exactly for its range. Any other range is written anew, every bitstream copied
//! from the Source and checked as before; a resource added, removed or changed therefore
//! rewrites only the package of its range.
//!
//! A range is planned in memory: at most [`DumpOptions::max_files`] entries, as the manifest
//! of one package always was.
//!
//! Packages are removed one dump late: once a new Resource Dump is in place, the packages of
//! the dump before the previous one (and leftovers) are removed, while those of the previous
//! dump stay until the next one, so that a Destination still downloading the previous dump's
//! packages does not find them gone.

use super::*;

/// Meta key of the snapshot whose Resource Dump was written last.
const LAST_KEY: &str = "resourcedump:last";
/// Meta key of the last change recorded when that dump was written (its snapshot holds every
/// change up to it).
const LAST_SEQ_KEY: &str = "resourcedump:last-seq";

/// Read buffer of a previous package: an entry's local header and, for small bitstreams, its
/// data in one read.
const OLD_PACKAGE_BUFFER: usize = 4096;

/// A resource planned into a package.
struct Member {
    r: crate::state::Resource,
    rel: PathBuf,
    /// The ZIP entry name, unique in the package.
    name: String,
    /// Its manifest entry.
    line: String,
    est: u64,
}

/// A run of resources, in URI order, that becomes one package.
struct Range {
    /// The previous dump's package whose range this one is in (index in
    /// [`DumpWriter::ranges`]).
    old: Option<usize>,
    members: Vec<Member>,
    names: HashSet<String>,
    size: Size,
    fingerprint: MultiHasher,
}

impl Range {
    fn new() -> Self {
        Range {
            old: None,
            members: Vec::new(),
            names: HashSet::new(),
            size: Size {
                entries: 0,
                estimate: ZIP_PACKAGE_OVERHEAD,
                body: 0,
            },
            fingerprint: MultiHasher::new(&[HashAlg::Sha256]),
        }
    }

    /// A name not used yet in this range.
    fn unique_name(&self, name: String) -> String {
        if !self.names.contains(&name) {
            return name;
        }
        (2u64..)
            .map(|i| format!("{name}~{i}"))
            .find(|n| !self.names.contains(n))
            .unwrap_or(name)
    }

    fn push(&mut self, m: Member) {
        self.fingerprint.update(m.line.as_bytes());
        self.size.entries += 1;
        self.size.estimate = self
            .size
            .estimate
            .saturating_add(m.est)
            .saturating_add(m.line.len() as u64);
        self.size.body += m.line.len() as u64;
        self.names.insert(m.name.clone());
        self.members.push(m);
    }
}

/// The fingerprint of a package: the SHA-256 of its manifest's entry lines.
fn fingerprint_of(h: MultiHasher) -> String {
    h.finish().to_string()
}

/// The records of the last Resource Dump written (of an earlier snapshot, or of this one
/// when its files went missing); none when there is none or it predates fingerprints.
fn previous_records(state: &State) -> Result<Vec<PackageRecord>> {
    let Some(last) = state.meta(LAST_KEY)? else {
        return Ok(Vec::new());
    };
    Ok(state
        .meta(&format!("resourcedump:{last}"))?
        .and_then(|v| decode_records(&v))
        .unwrap_or_default())
}

/// Whether a package of the previous dump is still there as recorded: the package with its
/// length, and its manifest copy.
fn intact(layout: &Layout, rec: &PackageRecord) -> bool {
    std::fs::metadata(layout.doc_path(&rec.name))
        .is_ok_and(|m| m.is_file() && m.len() == rec.length)
        && layout.doc_path(&manifest_copy_name(&rec.name)).is_file()
}

/// Writes the packages of a Resource Dump, range by range.
struct DumpWriter<'a> {
    layout: &'a Layout,
    inv: &'a dyn Inventory,
    snapshot: i64,
    completed: W3cDateTime,
    at: W3cDateTime,
    manifest_header: Header,
    large_threshold: Option<u64>,
    /// The previous dump's packages carrying a fingerprint, by the URI they start at.
    previous: HashMap<String, PackageRecord>,
    /// The previous dump's packages with the URI they start at, in URI order: the ranges.
    ranges: Vec<PackageRecord>,
    /// Names of the previous dump's packages (a new package never takes one).
    previous_names: HashSet<String>,
    next_number: usize,
    records: Vec<PackageRecord>,
    report: DumpReport,
}

impl DumpWriter<'_> {
    /// The previous dump's package of range `i`, when it is there as recorded.
    fn open_old(&self, i: usize) -> Option<OldPackage> {
        let rec = self.ranges.get(i)?;
        if !intact(self.layout, rec) {
            return None;
        }
        let f = File::open(self.layout.doc_path(&rec.name)).ok()?;
        // Small: every entry is read after a seek, which empties the buffer (a large one made
        // carrying 100,000 entries over cost more than deflating them again).
        zip::ZipArchive::new(io::BufReader::with_capacity(OLD_PACKAGE_BUFFER, f)).ok()
    }

    /// Carries the range's package over from the previous dump, or writes it.
    fn close(&mut self, range: Range) -> Result<()> {
        let Some(start) = range.members.first().map(|m| m.r.uri.clone()) else {
            return Ok(());
        };
        let fingerprint = fingerprint_of(range.fingerprint);
        if let Some(old) = self.previous.get(&start) {
            if old.fingerprint.as_deref() == Some(fingerprint.as_str()) && intact(self.layout, old)
            {
                self.records.push(old.clone());
                self.report.reused += 1;
                return Ok(());
            }
        }
        let name = loop {
            let n = resource_dump_package_name(self.snapshot, self.next_number);
            self.next_number += 1;
            if !self.previous_names.contains(&n) {
                break n;
            }
        };
        let mut pkg = Package::create(self.layout, name)?;
        pkg.large_threshold = self.large_threshold;
        let mut old = range.old.and_then(|i| self.open_old(i));
        for m in range.members {
            let b = Bitstream {
                rel: &m.rel,
                name: &m.name,
                length: m.r.length,
                hashes: &m.r.hashes,
                mime: m.r.mime_type.as_deref(),
                lastmod: &m.r.lastmod,
            };
            if let Some(z) = old.as_mut() {
                if pkg.carry(z, &b)? {
                    pkg.push_line(&m.line, m.est, None);
                    self.report.files += 1;
                    self.report.carried += 1;
                    continue;
                }
            }
            match pkg.copy(self.inv, &b)? {
                CopyOutcome::Done(_) => {
                    pkg.push_line(&m.line, m.est, None);
                    self.report.files += 1;
                }
                outcome => left_out(&mut self.report, m.rel, m.r.length, outcome),
            }
        }
        if pkg.entries == 0 {
            // Every resource of the range left out: the package is dropped with its temporary
            // file.
            return Ok(());
        }
        // The fingerprint of what was written: a resource left out makes it differ from the
        // plan, so that the next dump writes this range again.
        let mut written = MultiHasher::new(&[HashAlg::Sha256]);
        written.update(pkg.body.as_bytes());
        let mut f = pkg.finish(self.layout, &self.manifest_header, &self.completed)?;
        f.record.at = Some(self.at);
        f.record.completed = Some(self.completed);
        f.record.start = Some(start);
        f.record.fingerprint = Some(fingerprint_of(written));
        note_finished(&mut self.report, &mut self.records, f);
        Ok(())
    }
}

/// Writes the Resource Dump of the newest snapshot (Z39.99-2014 §11): every resource of the
/// state, in URI order, packaged into `resourcesync/dumps/resourcedump-SSSSSS-NNNNN.zip` with a
/// Resource Dump Manifest (§11.2) inside and a copy next to it, then `resourcesync/resourcedump.xml`
/// (§11.1) listing the packages with their type, length, md5 and sha-256, `at`/`completed` and
/// a `contents` link to the manifest copy.
///
/// Packages of the previous dump whose every entry is unchanged are carried over instead of
/// written again (see the [module documentation](self)).
///
/// Nothing is done when the dump of this snapshot was already written (state meta key
/// `resourcedump:<snapshot>`) and its files are all there. Once the new dump is complete, the
/// packages of the dump before the previous one (and any stale file of an interrupted run) are
/// removed.
///
/// A resource whose file changed since the scan is left out (see the [dump module
/// documentation](super)); every manifest entry's length and digests are those of the bytes in
/// the package.
pub fn write_resource_dump(
    layout: &Layout,
    state: &State,
    inv: &dyn Inventory,
    opts: &DumpOptions,
) -> Result<DumpReport> {
    write_resource_dump_with(layout, state, inv, opts, None)
}

pub(super) fn write_resource_dump_with(
    layout: &Layout,
    state: &State,
    inv: &dyn Inventory,
    opts: &DumpOptions,
    large_threshold: Option<u64>,
) -> Result<DumpReport> {
    let opts = opts.clamped();
    let (id, at, completed, _) = state
        .last_snapshot()?
        .ok_or_else(|| Error::Config("nothing to dump: no scan recorded yet".into()))?;
    let key = format!("resourcedump:{id}");
    if let Some(records) = state.meta(&key)?.and_then(|v| decode_records(&v)) {
        if records_present(layout, &records) && layout.doc_path("resourcedump.xml").is_file() {
            return Ok(DumpReport::default());
        }
    }

    // Z39.99-2014 §11.2: capability resourcedump-manifest, at (and completed) of the snapshot,
    // and a link up to the Capability List.
    let mut md = Metadata::with_capability(Capability::ResourceDumpManifest);
    md.at = Some(at);
    md.completed = Some(completed);
    let mut manifest_header = Header::new(Root::UrlSet, md);
    manifest_header.links.push(up(layout));

    if let Some(behind) = kept_behind(layout, state, &opts)? {
        tracing::info!(
            "the Resource Dump of an earlier snapshot is kept: {behind} resources changed since \
             (at most {}% of those it holds: --dump-rebuild-after)",
            opts.rebuild_after
        );
        return Ok(DumpReport {
            behind: Some(behind),
            ..DumpReport::default()
        });
    }

    let previous = previous_records(state)?;
    // The ranges of the previous dump start at these URIs, in order.
    let ranges: Vec<PackageRecord> = previous
        .iter()
        .filter(|r| r.start.is_some())
        .cloned()
        .collect();
    let bounds: Vec<String> = ranges.iter().filter_map(|r| r.start.clone()).collect();
    let mut w = DumpWriter {
        layout,
        inv,
        snapshot: id,
        at,
        completed,
        manifest_header,
        large_threshold,
        previous: previous
            .iter()
            .filter(|r| r.fingerprint.is_some())
            .filter_map(|r| Some((r.start.clone()?, r.clone())))
            .collect(),
        previous_names: previous.iter().map(|r| r.name.clone()).collect(),
        ranges,
        next_number: 1,
        records: Vec::new(),
        report: DumpReport::default(),
    };
    let mut range = Range::new();
    let mut bound = 0;
    let mut line = String::with_capacity(512);
    state.for_each_resource_by_uri(|r| {
        // A range never spans a boundary of the previous dump's ranges.
        let mut crossed = false;
        while bound < bounds.len() && r.uri.as_str() >= bounds[bound].as_str() {
            bound += 1;
            crossed = true;
        }
        if crossed && !range.members.is_empty() {
            w.close(std::mem::replace(&mut range, Range::new()))?;
        }
        let rel = rel_path(&r);
        let Some(base) = zip_name(RESOURCE_PREFIX, &rel) else {
            w.report.skipped += 1;
            w.report.problems.push(Skipped {
                path: rel,
                reason: "no ZIP entry name for this path".into(),
            });
            return Ok(());
        };
        // Z39.99-2014 §11.2: loc, lastmod, and rs:md with path (leading slash), hash, length
        // and type, as in the Resource List of the same snapshot.
        let mut e = resource_entry(&r);
        e.md_mut().path = Some(format!("/{base}"));
        line.clear();
        entry_xml(&mut line, MANIFEST_NAME, Root::UrlSet, &[], &e)?;
        let est = bitstream_estimate(r.length, base.len());
        if !range.size.fits(est, line.len(), &opts) {
            w.close(std::mem::replace(&mut range, Range::new()))?;
        }
        if range.members.is_empty() {
            range.old = bound.checked_sub(1);
        }
        let name = range.unique_name(base.clone());
        if name != base {
            e.md_mut().path = Some(format!("/{name}"));
            line.clear();
            entry_xml(&mut line, MANIFEST_NAME, Root::UrlSet, &[], &e)?;
        }
        range.push(Member {
            r,
            rel,
            name,
            line: line.clone(),
            est,
        });
        Ok(())
    })?;
    w.close(range)?;

    let mut report = std::mem::take(&mut w.report);
    let snapshot = (key.as_str(), at, completed);
    let seq = state.last_seq()?;
    finish_resource_dump(layout, state, snapshot, &w.records, &previous, &mut report)?;
    state.set_meta(LAST_KEY, &id.to_string())?;
    state.set_meta(LAST_SEQ_KEY, &seq.to_string())?;
    Ok(report)
}

/// The resources changed since the snapshot of the last Resource Dump, when that dump is kept
/// for the current snapshot ([`DumpOptions::rebuild_after`]): it is complete on disk, the
/// state knows the last change it holds, and the resources changed since are at most
/// `rebuild_after` percent of those it holds. `None`: a new one is written.
fn kept_behind(layout: &Layout, state: &State, opts: &DumpOptions) -> Result<Option<u64>> {
    if opts.rebuild_after == 0 || !layout.doc_path("resourcedump.xml").is_file() {
        return Ok(None);
    }
    let (Some(last), Some(seq)) = (state.meta(LAST_KEY)?, state.meta(LAST_SEQ_KEY)?) else {
        return Ok(None);
    };
    let (Ok(last), Ok(seq)) = (last.parse::<i64>(), seq.parse::<i64>()) else {
        return Ok(None);
    };
    let Some(held) = state
        .snapshots()?
        .into_iter()
        .find(|(id, ..)| *id == last)
        .map(|(.., count)| count)
    else {
        return Ok(None);
    };
    let records = previous_records(state)?;
    if records.is_empty() || !records.iter().all(|r| intact(layout, r)) {
        return Ok(None);
    }
    let changed = state.uris_changed_after(seq)?;
    let within = u128::from(changed) * 100 <= u128::from(held) * u128::from(opts.rebuild_after);
    Ok(within.then_some(changed))
}

/// A resource not copied into the dump, counted and reported with why.
fn left_out(report: &mut DumpReport, rel: PathBuf, recorded: u64, outcome: CopyOutcome) {
    let reason = match outcome {
        CopyOutcome::Changed { length } => format!(
            "changed since the scan ({length} bytes read, {recorded} recorded, or other digests): left out of the dump until the next scan"
        ),
        CopyOutcome::Unreadable(reason) => reason,
        CopyOutcome::Done(_) => return,
    };
    report.skipped += 1;
    report.problems.push(Skipped { path: rel, reason });
}

/// The Resource Dump of the snapshot (`key`, `at`, `completed`) once its packages are
/// written: the document listing them, the records kept under `key`, and the packages neither
/// it nor the `previous` dump lists (older dumps' and leftovers) removed.
fn finish_resource_dump(
    layout: &Layout,
    state: &State,
    (key, at, completed): (&str, W3cDateTime, W3cDateTime),
    records: &[PackageRecord],
    previous: &[PackageRecord],
    report: &mut DumpReport,
) -> Result<()> {
    // Z39.99-2014 §11.1: capability resourcedump with at/completed, a link up, one entry per
    // package.
    let mut md = Metadata::with_capability(Capability::ResourceDump);
    md.at = Some(at);
    md.completed = Some(completed);
    let mut header = Header::new(Root::UrlSet, md);
    header.links.push(up(layout));
    let entries = records
        .iter()
        .map(|rec| package_entry(layout, rec, Some((at, completed))));
    report.written.extend(write_dump_document(
        layout,
        "resourcedump",
        header,
        entries,
    )?);
    state.set_meta(key, &encode_records(records))?;

    // The new dump is complete: remove the packages of older dumps and leftovers, keeping the
    // previous dump's for Destinations still downloading it.
    let keep: HashSet<PathBuf> = records
        .iter()
        .chain(previous)
        .flat_map(|r| {
            [
                layout.doc_path(&r.name),
                layout.doc_path(&manifest_copy_name(&r.name)),
            ]
        })
        .collect();
    report.removed = prune(&layout.doc_path(RESOURCE_DUMP_DIR), "resourcedump-", &keep);
    Ok(())
}
