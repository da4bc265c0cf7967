//! Opening a package: the ZIP archive checked as hostile input, its manifest inflated, read and
//! validated, the entries it names matched with the ZIP entries (steps 2 and 3 of the module
//! documentation of `dump`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use resourcesync_model::package::DumpLimits;
use resourcesync_model::package::{
    ManifestCheck, QUOTED_FINDINGS, RATIO_EXEMPT_BYTES, ZipListing, judge_findings, shown_name,
};
use resourcesync_model::{Capability, DocumentReader, Header, ReadOptions, Validator};
use tempfile::TempPath;
use zip::ZipArchive;

use crate::discover::docs::MAX_INDEX_ENTRIES;
use crate::error::{Error, Result};

use super::{KEPT_FINDINGS, MANIFEST_NAME};

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
        }
    }
}

/// An opened, checked package.
pub(crate) struct Package {
    pub(super) url: String,
    /// Its bitstreams (for the thread that reads the manifest).
    pub(super) ex: Extractor,
    pub(crate) manifest: TempPath,
    pub(super) header: Header,
    /// Warnings about the package as a whole: manifest errors tolerated ([`resourcesync_model::package::TOLERATED_RULES`]),
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
    // As the lists' (crate::discover::docs): one form of each URI.
    o.iris_as_uris = true;
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
    let listing = list_zip(&mut zip, &limits).map_err(refuse)?;
    let budget = Arc::new(AtomicU64::new(limits.max_unpacked_bytes));
    // Z39.99-2014 §11.2, §13.2: "named manifest.xml and ... located at the top level".
    let Some(mi) = zip.index_for_name_raw(MANIFEST_NAME.as_bytes()) else {
        return Err(refuse(format!(
            "no {MANIFEST_NAME} at the top level of the package (Z39.99-2014 §11.2)"
        )));
    };
    let mut ex = Extractor {
        url: url.to_owned(),
        zip,
        limits,
        budget,
        buf: vec![0u8; IO_BUF],
    };
    let manifest = inflate_manifest(&mut ex, mi, scratch, max_document_bytes)?;
    let (header, check, mut notes) =
        check_manifest(&manifest, url, cap, listing, max_document_bytes)?;
    check.declared(&limits).map_err(refuse)?;
    notes.extend(unlisted(&mut ex.zip, mi, url, &check).map_err(refuse)?);
    Ok(Package {
        url: url.to_owned(),
        ex,
        manifest,
        header,
        notes,
        refused: check.into_refused(),
        max_document_bytes,
    })
}

/// The ZIP entries of a package as its central directory declares them; `Err` (why) refuses
/// the package as a whole: two entries of one name or entries sharing bytes (which bytes a
/// manifest `path` names cannot be told then).
fn list_zip(
    zip: &mut ZipArchive<PackageReader>,
    limits: &DumpLimits,
) -> std::result::Result<ZipListing, String> {
    if zip.has_duplicate_names() {
        return Err(
            "two ZIP entries have the same name: which one a manifest path names cannot be told"
                .into(),
        );
    }
    match zip.has_overlapping_entries() {
        Ok(false) => {}
        Ok(true) => {
            return Err("ZIP entries share bytes (overlapping entries: a zip bomb)".into());
        }
        Err(e) => return Err(format!("not a readable ZIP package: {e}")),
    }
    // Refused on their own (a manifest entry that names one fails, the others are used): the
    // ZIP entries encrypted, or declaring a zip bomb. The declared sizes of the others, for the
    // package's total once the manifest says which are used.
    let mut listing = ZipListing::new();
    for i in 0..zip.len() {
        let e = zip
            .by_index_data(i)
            .map_err(|e| format!("ZIP entry {i}: {e}"))?;
        listing.add(
            e.name_raw(),
            e.encrypted(),
            e.size(),
            e.compressed_size(),
            limits,
        );
    }
    Ok(listing)
}

/// Inflates the manifest (ZIP entry `mi`) into a temporary file of `scratch`, bounded like any
/// document.
fn inflate_manifest(
    ex: &mut Extractor,
    mi: usize,
    scratch: &Path,
    max_document_bytes: u64,
) -> Result<TempPath> {
    let url = ex.url.as_str();
    let tmp = tempfile::Builder::new()
        .prefix("doc-manifest-")
        .tempfile_in(scratch)
        .map_err(|e| Error::io(format!("temporary file in {}", scratch.display()), e))?;
    let mut out = BufWriter::new(tmp);
    let mut written = 0u64;
    inflate(
        &mut ex.zip,
        mi,
        &ex.limits,
        &ex.budget,
        &mut ex.buf,
        |chunk| {
            written = written.saturating_add(chunk.len() as u64);
            if written > max_document_bytes {
                return Err(Error::BadDocument {
                    url: format!("{url}#{MANIFEST_NAME}"),
                    message: format!("larger than the {max_document_bytes} bytes allowed"),
                });
            }
            out.write_all(chunk)
                .map_err(|e| Error::io("writing a manifest", e))
        },
    )
    .map_err(|m| Error::Package {
        url: url.to_owned(),
        message: format!("{MANIFEST_NAME}: {m}"),
    })?;
    Ok(out
        .into_inner()
        .map_err(|e| Error::io("writing a manifest", e.into_error()))?
        .into_temp_path())
}

/// First pass over the manifest: its kind, its validity, and its entries matched with the ZIP
/// entries (the package is refused when one of these fails); with the notes to give.
fn check_manifest(
    manifest: &Path,
    url: &str,
    cap: Capability,
    listing: ZipListing,
    max_document_bytes: u64,
) -> Result<(Header, ManifestCheck, Vec<String>)> {
    let refuse = |message: String| Error::Package {
        url: url.to_owned(),
        message,
    };
    let fh = File::open(manifest).map_err(|e| Error::io("reading a manifest", e))?;
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
    let mut check = ManifestCheck::new(listing, cap, MAX_INDEX_ENTRIES);
    while let Some(e) = r
        .next_entry()
        .map_err(|e| refuse(format!("{MANIFEST_NAME}: {e}")))?
    {
        check.entry(&e).map_err(refuse)?;
        v.entry(&e);
    }
    let name = r.name().to_owned();
    let mut findings = r.take_findings();
    findings.extend(v.finish(&name, r.bytes_read()).findings);
    let notes = judge_findings(&findings, url).map_err(refuse)?;
    Ok((header, check, notes.into_iter().collect()))
}

/// The notes on the ZIP entries no manifest entry names: never read (bitstreams are found by the
/// manifest's paths, and written where their `<loc>` maps): said, not refused.
fn unlisted(
    zip: &mut ZipArchive<PackageReader>,
    mi: usize,
    url: &str,
    check: &ManifestCheck,
) -> std::result::Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let mut unlisted = 0usize;
    for i in 0..zip.len() {
        let e = zip
            .by_index_data(i)
            .map_err(|e| format!("ZIP entry {i}: {e}"))?;
        let raw = e.name_raw();
        let dir = raw.ends_with(b"/") && e.size() == 0;
        if i == mi || dir || check.names(raw) {
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
    Ok(notes)
}
