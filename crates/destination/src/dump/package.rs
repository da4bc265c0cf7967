//! Opening a package: the ZIP archive checked as hostile input, its manifest inflated, read and
//! validated, the entries it names matched with the ZIP entries (steps 2 and 3 of the module
//! documentation of `dump`).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use resourcesync_model::{
    Capability, Change, DocumentReader, Finding, Header, ReadOptions, Severity, Validator,
};
use resourcesync_store::DirHandles;
use zip::ZipArchive;

use crate::discover::docs::MAX_INDEX_ENTRIES;
use crate::error::{Error, Result};
use crate::options::{DumpLimits, RATIO_EXEMPT_BYTES};

use super::check::entry_name;
use super::extract::patch_in_package;
use super::{KEPT_FINDINGS, MANIFEST_NAME, QUOTED_FINDINGS, TOLERATED_RULES, shown_name};

/// Size of [`PackageReader`]'s buffer and of the buffer entries are inflated through.
pub(super) const IO_BUF: usize = 64 * 1024;

/// A buffered reader of a package file that keeps its buffer across seeks that land inside it.
/// The ZIP reader seeks to each entry's local header and then to its data; a package holds
/// thousands of small entries in file order, which `std::io::BufReader` (it drops its buffer on
/// every seek) read again from the file, 64 KiB per entry. Reads are positional (`pread`), so
/// that clones (one per extracting thread, each with its own buffer and position) share the
/// file.
pub(super) struct PackageReader {
    pub(super) file: Arc<File>,
    pub(super) buf: Box<[u8]>,
    /// The file offset of `buf[0]`.
    pub(super) start: u64,
    /// Bytes of `buf` filled.
    pub(super) len: usize,
    /// The read position in `buf`.
    pub(super) pos: usize,
}

impl PackageReader {
    pub(super) fn new(file: File) -> Self {
        PackageReader {
            file: Arc::new(file),
            buf: vec![0u8; IO_BUF].into_boxed_slice(),
            start: 0,
            len: 0,
            pos: 0,
        }
    }

    /// Reads at `offset` of the file, leaving no position behind.
    fn read_at(&self, out: &mut [u8], offset: u64) -> io::Result<usize> {
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::read_at(self.file.as_ref(), out, offset)
        }
        #[cfg(windows)]
        {
            std::os::windows::fs::FileExt::seek_read(self.file.as_ref(), out, offset)
        }
        #[cfg(not(any(unix, windows)))]
        {
            // No positional read: one thread extracts (see `extract_threads`).
            let mut f = self.file.as_ref();
            f.seek(SeekFrom::Start(offset))?;
            f.read(out)
        }
    }
}

impl Clone for PackageReader {
    fn clone(&self) -> Self {
        PackageReader {
            file: self.file.clone(),
            buf: vec![0u8; IO_BUF].into_boxed_slice(),
            start: self.start + self.pos as u64,
            len: 0,
            pos: 0,
        }
    }
}

impl Read for PackageReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len {
            self.start += self.len as u64;
            self.len = 0;
            self.pos = 0;
            // A read as large as the buffer bypasses it.
            if out.len() >= self.buf.len() {
                let n = self.read_at(out, self.start)?;
                self.start += n as u64;
                return Ok(n);
            }
            let mut buf = std::mem::take(&mut self.buf);
            let r = self.read_at(&mut buf, self.start);
            self.buf = buf;
            self.len = r?;
        }
        let n = out.len().min(self.len - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

impl Seek for PackageReader {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let here = self.start + self.pos as u64;
        let target = match to {
            SeekFrom::Start(n) => n,
            SeekFrom::Current(d) => here.checked_add_signed(d).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "seek before the start")
            })?,
            SeekFrom::End(d) => {
                let end = self.file.metadata()?.len();
                end.checked_add_signed(d).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidInput, "seek before the start")
                })?
            }
        };
        if target >= self.start && target - self.start <= self.len as u64 {
            // Inside the buffer: nothing read again.
            self.pos = (target - self.start) as usize;
        } else {
            (self.start, self.len, self.pos) = (target, 0, 0);
        }
        Ok(target)
    }
}

/// What reading bitstreams out of a package takes, one per extracting thread
/// ([`Extractor::fork`]): the ZIP reader, the buffers, the directories opened; the package's
/// uncompressed budget is shared.
pub(super) struct Extractor {
    pub(super) url: String,
    pub(super) zip: ZipArchive<PackageReader>,
    pub(super) limits: DumpLimits,
    /// Uncompressed bytes the entries may still inflate to (the package's, shared).
    pub(super) budget: Arc<AtomicU64>,
    /// The buffer entries are inflated through.
    pub(super) buf: Vec<u8>,
    /// The directories opened for the unnamed temporary files of new copies
    /// ([`FsStore::create_temp_at`]).
    pub(super) dirs: DirHandles,
}

impl Extractor {
    /// Another extractor of the same package, for another thread.
    pub(super) fn fork(&self) -> Self {
        Extractor {
            url: self.url.clone(),
            zip: self.zip.clone(),
            limits: self.limits,
            budget: self.budget.clone(),
            buf: vec![0u8; IO_BUF],
            dirs: DirHandles::default(),
        }
    }
}

/// An opened, checked package.
pub(crate) struct Package {
    pub(super) url: String,
    /// Its bitstreams (for the thread that reads the manifest).
    pub(super) ex: Extractor,
    pub(crate) manifest: tempfile::TempPath,
    pub(super) header: Header,
    /// Warnings about the package as a whole: manifest errors tolerated ([`TOLERATED_RULES`]),
    /// ZIP entries no manifest entry names (never read).
    pub(super) notes: Vec<String>,
    /// The manifest entries refused on their own, by their position in the manifest (1 for the
    /// first entry; a line may hold several), and why (an unsafe `path`, a ZIP entry encrypted
    /// or declaring a zip bomb, no `path`): each is that entry's failure, the others are used.
    pub(super) refused: HashMap<usize, String>,
    pub(super) max_document_bytes: u64,
}

impl std::fmt::Debug for Package {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Package")
            .field("url", &self.url)
            .field("entries", &self.ex.zip.len())
            .finish_non_exhaustive()
    }
}

pub(crate) fn manifest_opts(url: &str, max_bytes: u64) -> ReadOptions {
    let mut o = ReadOptions::named(format!("{url}#{MANIFEST_NAME}"));
    o.max_document_bytes = max_bytes.max(1);
    o
}

/// Inflates entry `index` through `sink` (reading into `buf`), stopping past `limits.max_ratio`
/// times its compressed size (beyond [`RATIO_EXEMPT_BYTES`]) or past `budget`, which it lowers
/// by what was read.
pub(super) fn inflate(
    zip: &mut ZipArchive<PackageReader>,
    index: usize,
    limits: &DumpLimits,
    budget: &AtomicU64,
    buf: &mut [u8],
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> std::result::Result<u64, String> {
    let mut f = zip.by_index(index).map_err(|e| e.to_string())?;
    let compressed = f.compressed_size();
    let ratio_cap = compressed
        .saturating_mul(limits.max_ratio)
        .max(RATIO_EXEMPT_BYTES);
    // Bytes read, each taken from the package's budget as it is read (other threads may be
    // reading other entries of the package); given back if the entry fails.
    let mut n = 0u64;
    let res = loop {
        let k = match f.read(buf) {
            Ok(0) => break Ok(n),
            Ok(k) => k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => break Err(format!("inflating: {e} (a damaged entry, or a zip bomb)")),
        };
        if n.saturating_add(k as u64) > ratio_cap {
            break Err(format!(
                "inflates to more than {} times its {compressed} compressed bytes (a zip bomb?)",
                limits.max_ratio
            ));
        }
        let taken = budget.fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
            b.checked_sub(k as u64)
        });
        if taken.is_err() {
            break Err(format!(
                "the package inflates past its budget of {} bytes (a zip bomb?)",
                limits.max_unpacked_bytes
            ));
        }
        n += k as u64;
        if let Err(e) = sink(&buf[..k]) {
            break Err(e.to_string());
        }
    };
    if res.is_err() {
        budget.fetch_add(n, Ordering::AcqRel);
    }
    res
}

/// Opens and checks a package (steps 2 and 3 of the module documentation).
pub(crate) fn open_package(
    file: &Path,
    url: &str,
    cap: Capability,
    limits: DumpLimits,
    scratch: &Path,
    max_document_bytes: u64,
) -> Result<Package> {
    let refuse = |message: String| Error::Package {
        url: url.to_owned(),
        message,
    };
    let f = File::open(file).map_err(|e| Error::io(format!("reading {url}"), e))?;
    let mut zip = ZipArchive::new(PackageReader::new(f))
        .map_err(|e| refuse(format!("not a readable ZIP package: {e}")))?;
    // Refused as a whole: which bytes a manifest `path` names cannot be told.
    if zip.has_duplicate_names() {
        return Err(refuse(
            "two ZIP entries have the same name: which one a manifest path names cannot be told"
                .into(),
        ));
    }
    match zip.has_overlapping_entries() {
        Ok(false) => {}
        Ok(true) => {
            return Err(refuse(
                "ZIP entries share bytes (overlapping entries: a zip bomb)".into(),
            ));
        }
        Err(e) => return Err(refuse(format!("not a readable ZIP package: {e}"))),
    }
    // Refused on their own (a manifest entry that names one fails, the others are used): the
    // ZIP entries encrypted, or declaring a zip bomb. The declared sizes of the others, for the
    // package's total once the manifest says which are used.
    let mut bad: HashMap<Vec<u8>, String> = HashMap::new();
    let mut sizes: HashMap<Vec<u8>, u64> = HashMap::new();
    for i in 0..zip.len() {
        let e = zip
            .by_index_data(i)
            .map_err(|e| refuse(format!("ZIP entry {i}: {e}")))?;
        let raw = e.name_raw().to_vec();
        let (size, compressed) = (e.size(), e.compressed_size());
        let why = if e.encrypted() {
            Some("is encrypted (a Destination has no key to read it)".to_owned())
        } else if size > RATIO_EXEMPT_BYTES && size > compressed.saturating_mul(limits.max_ratio) {
            Some(format!(
                "declares {size} bytes from {compressed} compressed: a ratio over the {}:1 \
                 allowed (a zip bomb?)",
                limits.max_ratio
            ))
        } else if size > limits.max_unpacked_bytes {
            Some(format!(
                "declares {size} bytes, more than the {} a package may inflate to (a zip bomb?)",
                limits.max_unpacked_bytes
            ))
        } else {
            None
        };
        match why {
            Some(w) => {
                bad.insert(raw, format!("ZIP entry {:?} {w}", shown_name(e.name_raw())));
            }
            None => {
                sizes.insert(raw, size);
            }
        }
    }
    let budget = Arc::new(AtomicU64::new(limits.max_unpacked_bytes));

    // Z39.99-2014 §11.2, §13.2: "named manifest.xml and ... located at the top level".
    let Some(mi) = zip.index_for_name_raw(MANIFEST_NAME.as_bytes()) else {
        return Err(refuse(format!(
            "no {MANIFEST_NAME} at the top level of the package (Z39.99-2014 §11.2)"
        )));
    };
    let tmp = tempfile::Builder::new()
        .prefix("doc-manifest-")
        .tempfile_in(scratch)
        .map_err(|e| Error::io(format!("temporary file in {}", scratch.display()), e))?;
    let mut out = BufWriter::new(tmp);
    let mut written = 0u64;
    let mut buf = vec![0u8; IO_BUF];
    inflate(&mut zip, mi, &limits, &budget, &mut buf, |chunk| {
        written = written.saturating_add(chunk.len() as u64);
        if written > max_document_bytes {
            return Err(Error::BadDocument {
                url: format!("{url}#{MANIFEST_NAME}"),
                message: format!("larger than the {max_document_bytes} bytes allowed"),
            });
        }
        out.write_all(chunk)
            .map_err(|e| Error::io("writing a manifest", e))
    })
    .map_err(|m| refuse(format!("{MANIFEST_NAME}: {m}")))?;
    let manifest = out
        .into_inner()
        .map_err(|e| Error::io("writing a manifest", e.into_error()))?
        .into_temp_path();

    // First pass over the manifest: validity, and the set of paths it lists.
    let fh = File::open(&manifest).map_err(|e| Error::io("reading a manifest", e))?;
    let mut r = DocumentReader::new(fh, manifest_opts(url, max_document_bytes))
        .map_err(|e| refuse(format!("{MANIFEST_NAME}: {e}")))?;
    let header = r.header().clone();
    if header.capability() != Some(&cap) || header.is_index() {
        return Err(refuse(format!(
            "{MANIFEST_NAME} is a {}, not a {cap} document (Z39.99-2014 §11.2, §13.2)",
            header.kind_name()
        )));
    }
    let mut v = Validator::new(&header, r.header_position(), KEPT_FINDINGS);
    // The ZIP entries the manifest names (a bitstream, or a patch, §14.4), the names of those
    // refused for their path (not reported again as unlisted), and the entries refused.
    let mut names: HashSet<Vec<u8>> = HashSet::new();
    let mut unsafe_names: HashSet<Vec<u8>> = HashSet::new();
    let mut refused: HashMap<usize, String> = HashMap::new();
    let mut count = 0usize;
    while let Some(e) = r
        .next_entry()
        .map_err(|e| refuse(format!("{MANIFEST_NAME}: {e}")))?
    {
        count += 1;
        if count > MAX_INDEX_ENTRIES {
            return Err(refuse(format!(
                "{MANIFEST_NAME} has more than {MAX_INDEX_ENTRIES} entries"
            )));
        }
        v.entry(&e);
        let line = e.position.line;
        // Why this entry is refused, if it is: the first reason found.
        let mut why: Option<String> = None;
        let mut name_of = |what: &str, p: &str, why: &mut Option<String>| match entry_name(p) {
            Ok(n) => {
                if let Some(b) = bad.get(n.as_bytes()) {
                    why.get_or_insert_with(|| b.clone());
                }
                names.insert(n.as_bytes().to_vec());
            }
            Err(rule) => {
                let raw = p.strip_prefix('/').unwrap_or(p);
                unsafe_names.insert(raw.as_bytes().to_vec());
                why.get_or_insert_with(|| {
                    format!(
                        "{what} {:?}: {rule} (Z39.99-2014 §11.2, §13.2: a path names a bitstream \
                         inside the package, a ZIP slip otherwise)",
                        p.chars().take(200).collect::<String>()
                    )
                });
            }
        };
        // Z39.99-2014 §14.4: a patch link of a Change Dump Manifest entry names, with `path`,
        // the change description inside the package.
        let patch_path = patch_in_package(&e);
        if let Some(p) = patch_path {
            name_of("patch path", p, &mut why);
        }
        let path = e.md.as_ref().and_then(|m| m.path.as_deref());
        match path {
            // Z39.99-2014 §13.2: a deleted resource has no bitstream.
            None if cap == Capability::ChangeDumpManifest
                && e.change() == Some(&Change::Deleted) => {}
            // An update shipped as a patch alone (§14.4): applied to the copy, or left to the
            // lists. §13.2 asks for a `path` on every other entry; that finding is not fatal here.
            None if cap == Capability::ChangeDumpManifest
                && e.change() == Some(&Change::Updated)
                && patch_path.is_some() => {}
            None => {
                why.get_or_insert_with(|| {
                    "no path (Z39.99-2014 §11.2, §13.2: every manifest entry names its bitstream)"
                        .to_owned()
                });
            }
            Some(p) => name_of("path", p, &mut why),
        }
        if let Some(why) = why {
            refused.insert(
                count,
                format!("{MANIFEST_NAME} line {line}: {}: refused: {why}", e.loc),
            );
        }
    }
    let name = r.name().to_owned();
    let mut findings = r.take_findings();
    findings.extend(v.finish(&name, r.bytes_read()).findings);
    let errors: Vec<&Finding> = findings
        .as_slice()
        .iter()
        .filter(|f| f.severity() == Severity::Error)
        .collect();
    // An entry without a `path` is refused on its own above (or is an update shipped as a
    // patch alone): its finding does not refuse the package.
    let (tolerated, fatal): (Vec<&Finding>, Vec<&Finding>) = errors
        .iter()
        .copied()
        .partition(|f| TOLERATED_RULES.contains(&f.rule.id) || f.rule.id == "RS-11.2-path");
    // Errors not kept cannot be told apart: they refuse the package too.
    if !fatal.is_empty() || findings.error_count() > errors.len() as u64 {
        let quoted: Vec<String> = fatal
            .iter()
            .chain(tolerated.iter())
            .take(QUOTED_FINDINGS)
            .map(ToString::to_string)
            .collect();
        return Err(refuse(format!(
            "{MANIFEST_NAME} is not valid ({} error(s)): {}",
            findings.error_count(),
            quoted.join("; ")
        )));
    }
    let mut notes: Vec<String> = tolerated
        .first()
        .map(|f| {
            format!(
                "package {url}: {MANIFEST_NAME} departs from the specification in what is not relied on: {f}{}",
                match tolerated.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                }
            )
        })
        .into_iter()
        .collect();
    // What the entries used declare, together (a zip bomb of many entries, each within the
    // ratio): the package as a whole.
    let declared = names
        .iter()
        .filter_map(|n| sizes.get(n))
        .fold(0u64, |a, n| a.saturating_add(*n));
    if declared > limits.max_unpacked_bytes {
        return Err(refuse(format!(
            "the entries declare {declared} bytes in all, more than the {} allowed (a zip bomb?)",
            limits.max_unpacked_bytes
        )));
    }
    // A ZIP entry no manifest entry names is never read (bitstreams are found by the manifest's
    // paths, and written where their `<loc>` maps): said, not refused.
    let mut unlisted = 0usize;
    for i in 0..zip.len() {
        let e = zip
            .by_index_data(i)
            .map_err(|e| refuse(format!("ZIP entry {i}: {e}")))?;
        let raw = e.name_raw();
        let dir = raw.ends_with(b"/") && e.size() == 0;
        if i == mi || dir || names.contains(raw) || unsafe_names.contains(raw) {
            continue;
        }
        unlisted += 1;
        if unlisted <= QUOTED_FINDINGS {
            notes.push(format!(
                "package {url}: ZIP entry {:?} is not listed in the manifest: not read \
                 (Z39.99-2014 §11.2: the manifest lists every bitstream)",
                shown_name(raw)
            ));
        }
    }
    if unlisted > QUOTED_FINDINGS {
        notes.push(format!(
            "package {url}: {} more ZIP entries not listed in the manifest: not read",
            unlisted - QUOTED_FINDINGS
        ));
    }
    Ok(Package {
        url: url.to_owned(),
        ex: Extractor {
            url: url.to_owned(),
            zip,
            limits,
            budget,
            buf,
            dirs: DirHandles::default(),
        },
        manifest,
        header,
        notes,
        refused,
        max_document_bytes,
    })
}
