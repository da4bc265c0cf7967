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
//!    pending (module `dump_sync`). A copy the state does not have goes to an unnamed temporary
//!    file in its directory, linked into place instead of renamed ([`FsStore::create_temp_at`]; same
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
//! read from the package (at most [`MAX_PATCH_BYTES`], checked against the link's `length` and
//! `hash`) and applied to the copy as for a Change List's patch link ([`crate::patch`]: JSON
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

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use resourcesync_model::{
    Capability, Change, DocumentReader, Entry, Finding, Header, MultiHasher, ReadOptions, Severity,
    Validator, W3cDateTime,
};
use resourcesync_store::{
    Committed, DirHandles, Expect, FsStore, PendingChange, RelPath, ResourceRecord, TempFile,
};
use zip::ZipArchive;

use crate::commit::{Done, MAX_BATCH, Origin, Pending, Producer};
use crate::docs::{DocFetcher, ListSink, MAX_INDEX_ENTRIES, walk};
use crate::error::{Error, Result};
use crate::exec::Ctx;
use crate::http::{Http, body_error};
use crate::mapping::UriMapper;
use crate::patch::{MAX_PATCH_BYTES, PATCH_REL, PatchLink, patch_copy};
use crate::report::{Failure, Observer, push_capped};
use crate::staging::StagedItem;

/// The name of the manifest inside every package (Z39.99-2014 §11.2, §13.2).
pub const MANIFEST_NAME: &str = "manifest.xml";
/// Default [`DumpLimits::max_package_bytes`]: 4 GiB.
pub const DEFAULT_MAX_PACKAGE_BYTES: u64 = 4 << 30;
/// Default [`DumpLimits::max_unpacked_bytes`]: 16 GiB.
pub const DEFAULT_MAX_UNPACKED_BYTES: u64 = 16 << 30;
/// Default [`DumpLimits::max_ratio`]: 200 to 1 (text deflates 3 to 10 times, sparse data some
/// tens of times; deflate's ceiling is about 1,032).
pub const DEFAULT_MAX_RATIO: u64 = 200;
/// Entries that inflate to at most this many bytes are never refused for their ratio (a small
/// file of one repeated byte is harmless).
pub const RATIO_EXEMPT_BYTES: u64 = 1 << 20;
/// Longest `path` accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest path segment accepted, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;
/// Most warnings kept per dump (the rest are counted).
const MAX_WARNINGS: usize = 100;
/// Validation findings quoted when a manifest is refused.
const QUOTED_FINDINGS: usize = 3;
/// Validation findings kept per manifest.
const KEPT_FINDINGS: usize = 1000;
/// Errors of a manifest that do not refuse its package, only warn: they concern what the
/// Destination does not rely on (the manifest's own `at`/`from`, its `up` link, the leading slash
/// of `path`), and the reference implementation (`resync` 2.0.1) writes manifests without them.
pub const TOLERATED_RULES: [&str; 4] = [
    "RS-A-at-mandatory",
    "RS-A-from-mandatory",
    "RS-6.2-up-mandatory",
    "RS-11.2-path-leading-slash",
];

/// Bounds on packages (all input is hostile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpLimits {
    /// Largest package downloaded, in bytes (also when its entry publishes no `length`).
    pub max_package_bytes: u64,
    /// Most bytes all entries of one package may inflate to together.
    pub max_unpacked_bytes: u64,
    /// Largest ratio of an entry's inflated size to its compressed size (past
    /// [`RATIO_EXEMPT_BYTES`]).
    pub max_ratio: u64,
}

impl Default for DumpLimits {
    fn default() -> Self {
        DumpLimits {
            max_package_bytes: DEFAULT_MAX_PACKAGE_BYTES,
            max_unpacked_bytes: DEFAULT_MAX_UNPACKED_BYTES,
            max_ratio: DEFAULT_MAX_RATIO,
        }
    }
}

/// What applying dumps did.
#[derive(Debug, Clone, Default)]
pub(crate) struct DumpStats {
    /// Packages applied (possibly with some entries failed).
    pub packages: u64,
    /// Packages refused as a whole.
    pub refused: u64,
    /// Copies written that did not exist.
    pub created: u64,
    /// Copies replaced.
    pub updated: u64,
    /// Copies removed (Change Dumps, `--delete`).
    pub deleted: u64,
    /// Entries whose copy was already in place.
    pub unchanged: u64,
    /// Entries that failed.
    pub failed: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The Resource Dump's `at` (Z39.99-2014 §11.1).
    pub at: Option<W3cDateTime>,
    /// Whether the Source's lists fetch what the packages leave out (a Resource List after a
    /// Resource Dump, the Change Lists after a Change Dump): a failed entry or a refused
    /// package is then a warning; without them, a failure of the run ([`entry_failed`]).
    pub lists: bool,
    /// Entries and packages that failed the run (without lists), all counted.
    pub run_failed: u64,
    /// Those failures (at most [`crate::report::MAX_LISTED`]).
    pub failures: Vec<Failure>,
    /// The latest change time of the Change Dump entries taken into account (applied, or
    /// failed and kept as pending).
    pub last: Option<W3cDateTime>,
    /// The `from` of the Change Dump package refused first, without lists: the packages after
    /// it are not applied, and the cursor does not move past it (Z39.99-2014 §13.1: forward
    /// chronological order).
    pub stopped: Option<W3cDateTime>,
}

/// The ZIP entry name a manifest `path` names (Z39.99-2014 §11.2, §13.2: "relative to root of the
/// package and ... expressed with a leading slash"; a path without it, as `resync` 2.0.1 writes,
/// is read the same way), or why it is refused: an absolute path beyond the leading slash
/// (`//etc/x`), empty segments, `.` or `..` segments, backslashes, NUL or other control
/// characters, segments over [`MAX_SEGMENT_BYTES`], paths over [`MAX_PATH_BYTES`], or the
/// manifest itself.
pub fn entry_name(path: &str) -> std::result::Result<&str, &'static str> {
    if path.len() > MAX_PATH_BYTES {
        return Err("path longer than 4096 bytes");
    }
    let rest = path.strip_prefix('/').unwrap_or(path);
    if rest.starts_with('/') {
        return Err("absolute path after the leading slash");
    }
    if rest.is_empty() {
        return Err("names the package root, not a bitstream");
    }
    if rest.contains('\\') {
        return Err("backslash in the path");
    }
    if rest.contains('\0') {
        return Err("NUL in the path");
    }
    if rest.chars().any(char::is_control) {
        return Err("control character in the path");
    }
    for seg in rest.split('/') {
        if seg.is_empty() {
            return Err("empty path segment");
        }
        if seg == "." || seg == ".." {
            return Err("dot segment (. or ..) in the path");
        }
        if seg.len() > MAX_SEGMENT_BYTES {
            return Err("path segment longer than 255 bytes");
        }
    }
    if rest == MANIFEST_NAME {
        return Err("names the manifest itself");
    }
    Ok(rest)
}

/// A ZIP entry's name as shown in a message: lossy UTF-8, at most 200 characters.
fn shown_name(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).chars().take(200).collect()
}

fn warn(warnings: &mut Vec<String>, dropped: &mut u64, msg: String) {
    tracing::warn!("{msg}");
    if warnings.len() < MAX_WARNINGS {
        warnings.push(msg);
    } else {
        *dropped += 1;
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

async fn download_once(
    http: &Http,
    obs: &dyn Observer,
    dir: &Path,
    url: &str,
    declared: Option<u64>,
    expect: &Expect,
) -> Result<tempfile::TempPath> {
    let refuse = |message: String| Error::Package {
        url: url.to_owned(),
        message,
    };
    let limit = declared.unwrap_or(expect.max_bytes);
    let mut resp = http.get_once(url, None).await?;
    if resp.status().as_u16() == 304 {
        return Err(refuse(
            "304 Not Modified to an unconditional request".into(),
        ));
    }
    if let Some(n) = resp.content_length().filter(|n| *n > limit) {
        return Err(refuse(format!(
            "the server announces {n} bytes, more than the {limit} allowed"
        )));
    }
    let tmp = tempfile::Builder::new()
        .prefix("doc-pkg-")
        .tempfile_in(dir)
        .map_err(|e| Error::io(format!("temporary file in {}", dir.display()), e))?;
    let mut out = BufWriter::with_capacity(256 * 1024, tmp);
    let mut hasher = MultiHasher::new(&expect.hashes.known_algs());
    let mut n = 0u64;
    while let Some(chunk) = resp.chunk().await.map_err(|e| body_error(url, &e))? {
        n = n.saturating_add(chunk.len() as u64);
        if n > limit {
            return Err(refuse(format!("longer than the {limit} bytes allowed")));
        }
        hasher.update(&chunk);
        out.write_all(&chunk)
            .map_err(|e| Error::io("writing a package", e))?;
        obs.bytes(chunk.len() as u64);
    }
    let tmp = out
        .into_inner()
        .map_err(|e| Error::io("writing a package", e.into_error()))?;
    // Z39.99-2014 §11.1, §13.1: the package's `length` and `hash` as its entry publishes them.
    expect
        .verify(n, &hasher.finish())
        .map_err(|e| refuse(e.to_string()))?;
    Ok(tmp.into_temp_path())
}

/// Downloads a package (with retries) to a temporary file, verified against its entry.
pub(crate) async fn download_package(
    http: &Http,
    obs: &dyn Observer,
    dir: &Path,
    pkg: &Entry,
    limits: &DumpLimits,
) -> Result<tempfile::TempPath> {
    let url = pkg.loc.as_str();
    let declared = pkg.length();
    if let Some(n) = declared.filter(|n| *n > limits.max_package_bytes) {
        return Err(Error::Package {
            url: url.to_owned(),
            message: format!(
                "length {n} is more than the {} bytes allowed for a package",
                limits.max_package_bytes
            ),
        });
    }
    let expect = Expect {
        length: declared,
        hashes: pkg.hashes().cloned().unwrap_or_default(),
        max_bytes: limits.max_package_bytes,
        modified: None,
    };
    http.with_retries(|| download_once(http, obs, dir, url, declared, &expect))
        .await
}

/// Size of [`PackageReader`]'s buffer and of the buffer entries are inflated through.
const IO_BUF: usize = 64 * 1024;

/// A buffered reader of a package file that keeps its buffer across seeks that land inside it.
/// The ZIP reader seeks to each entry's local header and then to its data; a package holds
/// thousands of small entries in file order, which `std::io::BufReader` (it drops its buffer on
/// every seek) read again from the file, 64 KiB per entry. Reads are positional (`pread`), so
/// that clones (one per extracting thread, each with its own buffer and position) share the
/// file.
struct PackageReader {
    file: Arc<File>,
    buf: Box<[u8]>,
    /// The file offset of `buf[0]`.
    start: u64,
    /// Bytes of `buf` filled.
    len: usize,
    /// The read position in `buf`.
    pos: usize,
}

impl PackageReader {
    fn new(file: File) -> Self {
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
struct Extractor {
    url: String,
    zip: ZipArchive<PackageReader>,
    limits: DumpLimits,
    /// Uncompressed bytes the entries may still inflate to (the package's, shared).
    budget: Arc<AtomicU64>,
    /// The buffer entries are inflated through.
    buf: Vec<u8>,
    /// The directories opened for the unnamed temporary files of new copies
    /// ([`FsStore::create_temp_at`]).
    dirs: DirHandles,
}

impl Extractor {
    /// Another extractor of the same package, for another thread.
    fn fork(&self) -> Self {
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
    url: String,
    /// Its bitstreams (for the thread that reads the manifest).
    ex: Extractor,
    pub(crate) manifest: tempfile::TempPath,
    header: Header,
    /// Warnings about the package as a whole: manifest errors tolerated ([`TOLERATED_RULES`]),
    /// ZIP entries no manifest entry names (never read).
    notes: Vec<String>,
    /// The manifest entries refused on their own, by their position in the manifest (1 for the
    /// first entry; a line may hold several), and why (an unsafe `path`, a ZIP entry encrypted
    /// or declaring a zip bomb, no `path`): each is that entry's failure, the others are used.
    refused: HashMap<usize, String>,
    max_document_bytes: u64,
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
fn inflate(
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

/// What one manifest entry came to.
enum Applied {
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
enum Plan {
    /// The copy in place is current.
    Unchanged,
    /// Inflate and verify it.
    Extract(Job),
}

/// One bitstream to extract.
struct Job {
    uri: String,
    rel: RelPath,
    name: String,
    expect: Expect,
    lastmod: Option<W3cDateTime>,
    /// The state has a copy of it.
    update: bool,
}

/// Decides what to do with a manifest entry's bitstream (step 4 of the module documentation).
/// With `fresh` (the state had no row of this Source when the dump started), the state is not
/// consulted: nothing can be in place already but what this dump wrote, and an entry of it seen
/// twice is written twice.
fn plan(ctx: &Ctx, url: &str, e: &Entry, path: &str, fresh: bool) -> Result<Plan> {
    let uri = e.loc.as_str();
    let rel = ctx.mapper.map(uri)?;
    let name = entry_name(path).map_err(|why| Error::Package {
        url: url.to_owned(),
        message: format!("path {path:?}: {why}"),
    })?;
    let expect = Expect {
        length: e.length(),
        hashes: e.hashes().cloned().unwrap_or_default(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::mtime::copy_time(e.lastmod.as_ref(), None),
    };
    let prior = if fresh {
        None
    } else {
        ctx.state.resource(uri)?.filter(|p| !p.gone)
    };
    // Already in place (a resumed run, or an earlier package): the state proves it current.
    if let Some(p) = &prior {
        if let Some(m) = ctx.store.stat(&rel)? {
            if m.is_file
                && p.length == Some(m.length)
                && expect.length.is_none_or(|l| l == m.length)
                && expect.hashes.agrees_with(&p.hashes) == Some(true)
            {
                return Ok(Plan::Unchanged);
            }
        }
    }
    Ok(Plan::Extract(Job {
        uri: uri.to_owned(),
        rel,
        name: name.to_owned(),
        expect,
        lastmod: e.lastmod,
        update: prior.is_some(),
    }))
}

/// Extracts one bitstream into a verified temporary file.
fn extract_job(ctx: &Ctx, ex: &mut Extractor, job: Job) -> Result<Applied> {
    let Job {
        uri,
        rel,
        name,
        expect,
        lastmod,
        update,
    } = job;
    let obs = ctx.obs.clone();
    // A new copy goes to an unnamed file in its directory, linked into place (no temporary
    // name, no rename); one the state has, to a named temporary file renamed over it.
    let at = (!update).then_some(&rel);
    let tmp = inflate_entry(&ctx.store, ex, &name, expect, at, |n| obs.bytes(n))?;
    // Verified (length, every digest of the manifest entry) now; synced, renamed into place
    // and recorded with its batch (crate::commit).
    let body = ctx.store.verify(tmp)?;
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
            rel,
            row,
            origin: Origin::Package,
        }),
        update,
    })
}

/// [`plan`] then [`extract_job`], on this thread.
fn extract(ctx: &Ctx, pkg: &mut Package, e: &Entry, path: &str, fresh: bool) -> Result<Applied> {
    match plan(ctx, &pkg.url, e, path, fresh)? {
        Plan::Unchanged => Ok(Applied::Unchanged),
        Plan::Extract(job) => extract_job(ctx, &mut pkg.ex, job),
    }
}

/// Inflates the ZIP entry `name` of `pkg` into a temporary file of `store` (bounded by
/// `expect` and the package's limits), verifies it against `expect` and renames it to `rel`.
fn unpack_entry(
    store: &FsStore,
    pkg: &mut Package,
    name: &str,
    rel: &RelPath,
    expect: Expect,
    progress: impl FnMut(u64),
) -> Result<Committed> {
    let tmp = inflate_entry(store, &mut pkg.ex, name, expect, Some(rel), progress)?;
    // Verified (length, every digest of the manifest entry), then renamed into place.
    Ok(store.commit(tmp, rel)?)
}

/// Inflates one bitstream of a package into a temporary file of the store, bounded as the
/// module documentation says; not yet verified. `at`: the path of a copy expected to be new
/// (see [`FsStore::create_temp_at`]).
fn inflate_entry(
    store: &FsStore,
    ex: &mut Extractor,
    name: &str,
    expect: Expect,
    at: Option<&RelPath>,
    mut progress: impl FnMut(u64),
) -> Result<TempFile> {
    let Some(index) = ex.zip.index_for_name_raw(name.as_bytes()) else {
        return Err(Error::Package {
            url: ex.url.clone(),
            message: format!("no ZIP entry {name:?}, which the manifest lists"),
        });
    };
    let mut tmp = match at {
        Some(rel) => store.create_temp_at(expect, rel, &mut ex.dirs)?,
        None => store.create_temp(expect)?,
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
    store: &FsStore,
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
                modified: crate::mtime::copy_time(e.lastmod.as_ref(), None),
            };
            unpack_entry(store, &mut pkg, name, &rel, expect, |_| {})?;
            Ok(rel)
        })();
        out.push((e.loc, res));
    }
    Ok(out)
}

/// The `path` of an entry's patch link (Z39.99-2014 §14.4), if it has one.
fn patch_in_package(e: &Entry) -> Option<&str> {
    e.links
        .iter()
        .find(|l| l.has_rel(PATCH_REL))
        .and_then(|l| l.path.as_deref())
}

/// Applies the patch a package carries for an `updated` entry to the copy (Z39.99-2014 §14.4;
/// see [`crate::patch`]): the result must have the entry's length and digests.
fn extract_patch(
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
    let prior = ctx.state.resource(&e.loc).map_err(|e| e.to_string())?;
    let expect = Expect {
        length: e.length(),
        hashes: e.hashes().cloned().unwrap_or_default(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::mtime::copy_time(e.lastmod.as_ref(), None),
    };
    let body = patch_copy(
        ctx.store.as_ref(),
        &rel,
        prior.as_ref(),
        &link,
        &patch,
        &expect,
    )?;
    // Through the store like any copy: temporary file, verified again, then the batch.
    let mut tmp = ctx.store.create_temp(expect).map_err(|e| e.to_string())?;
    tmp.write(&body).map_err(|e| e.to_string())?;
    let body = ctx.store.verify(tmp).map_err(|e| e.to_string())?;
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
            rel,
            row,
            origin: Origin::Package,
        }),
        update: true,
    })
}

/// A `deleted` entry of a Change Dump Manifest: the copy goes only with `--delete`, as for a
/// Change List (Z39.99-2014 §13.2); otherwise the Change List reports it.
fn delete(ctx: &Ctx, uri: &str) -> Result<Applied> {
    if !ctx.delete {
        return Ok(Applied::Skipped);
    }
    let Some(p) = ctx.state.resource(uri)? else {
        return Ok(Applied::Skipped);
    };
    let rel = match RelPath::parse(&p.path) {
        Ok(r) => r,
        Err(_) => ctx.mapper.map(uri)?,
    };
    ctx.store.remove(&rel)?;
    ctx.state.remove_resource(uri)?;
    ctx.state.remove_pending(&ctx.key, uri)?;
    Ok(Applied::Deleted)
}

/// Second pass over the manifest: applies its entries in order (entries at or before `cursor`
/// are skipped, for Change Dumps). Entry failures are warnings.
fn apply_package(
    ctx: &Ctx,
    pkg: &mut Package,
    cursor: Option<W3cDateTime>,
    fresh: bool,
    stats: &mut DumpStats,
    warnings: &mut Vec<String>,
    dropped: &mut u64,
) -> Result<()> {
    for n in std::mem::take(&mut pkg.notes) {
        warn(warnings, dropped, n);
    }
    let fh = File::open(&pkg.manifest).map_err(|e| Error::io("reading a manifest", e))?;
    let mut r = DocumentReader::new(fh, manifest_opts(&pkg.url, pkg.max_document_bytes))?;
    let change_dump = pkg.header.capability() == Some(&Capability::ChangeDumpManifest);
    let threads = extract_threads();
    if !change_dump && cursor.is_none() && threads > 0 {
        // A Resource Dump: no deletes, no patches, every entry on its own.
        return apply_parallel(ctx, pkg, &mut r, threads, fresh, stats, warnings, dropped);
    }
    let mut batch = Batch::new(ctx)?;
    let mut nth = 0usize;
    while let Some(e) = r.next_entry()? {
        nth += 1;
        if let (Some(c), Some(t)) = (&cursor, e.change_time()) {
            if t.cmp_instant(c) != std::cmp::Ordering::Greater {
                continue;
            }
        }
        if let Some(t) = e.change_time() {
            if stats
                .last
                .is_none_or(|l| t.cmp_instant(&l) == std::cmp::Ordering::Greater)
            {
                stats.last = Some(*t);
            }
        }
        ctx.obs.add_total(1);
        let item = StagedItem::from_entry(&e);
        if let Some(why) = pkg.refused.get(&nth) {
            let res = Err(Error::Package {
                url: pkg.url.clone(),
                message: why.clone(),
            });
            settle(
                ctx, &mut batch, &pkg.url, item, res, stats, warnings, dropped,
            )?;
            continue;
        }
        let path = e.md.as_ref().and_then(|m| m.path.clone());
        let patch = patch_in_package(&e)
            .filter(|_| change_dump && e.change() == Some(&Change::Updated))
            .map(str::to_owned);
        let res = match (change_dump, e.change(), path) {
            (true, Some(Change::Deleted), _) => {
                // Earlier entries first: the copy a delete removes may be in the batch.
                batch.flush(ctx, &pkg.url, stats, warnings, dropped)?;
                delete(ctx, &e.loc)
            }
            // The whole bitstream first (nothing to trust but its digests); the patch when
            // there is none or it fails (Z39.99-2014 §14.4).
            (_, _, Some(p)) => match (extract_caught(ctx, pkg, &e, &p, fresh), patch) {
                (Err(err), Some(pp)) => {
                    batch.flush(ctx, &pkg.url, stats, warnings, dropped)?;
                    extract_patch(ctx, pkg, &e, &pp).map_err(|why| Error::Package {
                        url: pkg.url.clone(),
                        message: format!("{err}; its patch: {why}"),
                    })
                }
                (r, _) => r,
            },
            (_, _, None) => match patch {
                Some(pp) => {
                    // The patch applies to the copy as recorded: earlier entries first.
                    batch.flush(ctx, &pkg.url, stats, warnings, dropped)?;
                    extract_patch(ctx, pkg, &e, &pp).map_err(|why| Error::Package {
                        url: pkg.url.clone(),
                        message: format!("{}: patch: {why}", e.loc),
                    })
                }
                None => Ok(Applied::Skipped),
            },
        };
        settle(
            ctx, &mut batch, &pkg.url, item, res, stats, warnings, dropped,
        )?;
    }
    batch.flush(ctx, &pkg.url, stats, warnings, dropped)
}

/// [`extract`], where a panic (a bug: nothing known panics there) is that entry's error, as on
/// the extracting threads of [`apply_parallel`], instead of ending the whole run.
fn extract_caught(
    ctx: &Ctx,
    pkg: &mut Package,
    e: &Entry,
    path: &str,
    fresh: bool,
) -> Result<Applied> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        extract(ctx, pkg, e, path, fresh)
    }))
    .unwrap_or_else(|_| Err(Error::Task("extracting this entry panicked".into())))
}

/// What one manifest entry came to, taken into account: a verified copy goes to the batch, a
/// failure to [`entry_failed`].
#[allow(clippy::too_many_arguments)]
fn settle(
    ctx: &Ctx,
    batch: &mut Batch,
    url: &str,
    item: StagedItem,
    res: Result<Applied>,
    stats: &mut DumpStats,
    warnings: &mut Vec<String>,
    dropped: &mut u64,
) -> Result<()> {
    ctx.obs.resource_done();
    match res {
        Ok(Applied::Verified { pending, update }) => {
            batch.push(*pending, item, update)?;
            return batch.receive(ctx, url, stats, warnings, dropped, false);
        }
        Ok(Applied::Unchanged) => stats.unchanged += 1,
        Ok(Applied::Deleted) => stats.deleted += 1,
        Ok(Applied::Skipped) => return Ok(()),
        Err(err) => {
            let msg = match err {
                Error::Package { message, .. } => message,
                other => other.to_string(),
            };
            return entry_failed(ctx, url, item, msg, stats, warnings, dropped);
        }
    }
    note_dumped(ctx, &item.uri)
}

/// A manifest entry that could not be applied. Where the lists fetch what the packages leave
/// out ([`DumpStats::lists`]), a warning: the resource is fetched on its own. Otherwise a
/// failure of the run, kept as pending (with what the manifest publishes of it) for the next
/// run, which fetches it from its URI (or applies a newer package: see [`crate::dump_sync`]).
fn entry_failed(
    ctx: &Ctx,
    url: &str,
    item: StagedItem,
    msg: String,
    stats: &mut DumpStats,
    warnings: &mut Vec<String>,
    dropped: &mut u64,
) -> Result<()> {
    stats.failed += 1;
    let msg = if msg.contains(&item.uri) {
        msg
    } else {
        format!("{}: {msg}", item.uri)
    };
    if stats.lists {
        warn(
            warnings,
            dropped,
            format!("package {url}: {msg}: left to the lists, which fetch it on its own"),
        );
        return Ok(());
    }
    stats.run_failed += 1;
    let error = format!(
        "package {url}: {msg}; the Source offers no list to fetch it from instead: kept as \
         pending, the next sync tries again (from its URI, or from a newer package)"
    );
    if !ctx.dry_run {
        ctx.state.put_pending(&PendingChange {
            source: ctx.key.clone(),
            uri: item.uri.clone(),
            change: item.change.clone().or(Some(Change::Updated)),
            length: item.length,
            hashes: item.hashes.clone(),
            lastmod: item.lastmod,
            duplicates: item.duplicates.clone(),
            error: error.clone(),
        })?;
    }
    let path = ctx.mapper.map(&item.uri).ok().map(|r| r.to_string());
    // Dealt with: the pending changes retried in this run leave it alone.
    note_dumped(ctx, &item.uri)?;
    push_capped(&mut stats.failures, Failure::new(item.uri, path, error));
    Ok(())
}

/// Manifest entries handed to an extracting thread at once.
const JOB_CHUNK: usize = 64;

/// How many threads extract the bitstreams of a Resource Dump package (the one reading the
/// manifest aside): one per core, at most 4; none (the reading thread extracts) on one core.
fn extract_threads() -> usize {
    if cfg!(not(any(unix, windows))) {
        // No positional reads: the package file has one position.
        return 0;
    }
    match std::thread::available_parallelism().map_or(1, usize::from) {
        0 | 1 => 0,
        n => n.min(4),
    }
}

/// [`apply_package`] for a Resource Dump package with `threads` extracting threads: this one
/// reads the manifest and decides what to do with each entry ([`plan`]); the others inflate
/// and verify the bitstreams, chunks of [`JOB_CHUNK`] entries at a time; their outcomes are
/// taken into account here in manifest order, as one thread would have.
#[allow(clippy::too_many_arguments)]
fn apply_parallel(
    ctx: &Ctx,
    pkg: &mut Package,
    r: &mut DocumentReader<File>,
    threads: usize,
    fresh: bool,
    stats: &mut DumpStats,
    warnings: &mut Vec<String>,
    dropped: &mut u64,
) -> Result<()> {
    type Outcomes = Vec<(StagedItem, Result<Applied>)>;
    let url = pkg.url.clone();
    let mut batch = Batch::new(ctx)?;
    std::thread::scope(|scope| -> Result<()> {
        let (job_tx, job_rx) =
            std::sync::mpsc::sync_channel::<(u64, Vec<(StagedItem, Result<Plan>)>)>(threads * 2);
        let job_rx = Arc::new(std::sync::Mutex::new(job_rx));
        let (out_tx, out_rx) = std::sync::mpsc::channel::<(u64, Outcomes)>();
        for _ in 0..threads {
            let mut ex = pkg.ex.fork();
            let (job_rx, out_tx) = (job_rx.clone(), out_tx.clone());
            scope.spawn(move || {
                loop {
                    let next = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok((seq, jobs)) = next else {
                        return;
                    };
                    let out = jobs
                        .into_iter()
                        .map(|(item, p)| {
                            let res = p.and_then(|p| match p {
                                Plan::Unchanged => Ok(Applied::Unchanged),
                                // A panic here would leave its chunk unanswered and this
                                // function waiting for it: it is that entry's error instead.
                                Plan::Extract(job) => {
                                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                        extract_job(ctx, &mut ex, job)
                                    }))
                                    .unwrap_or_else(|_| {
                                        Err(Error::Task("extracting this entry panicked".into()))
                                    })
                                }
                            });
                            (item, res)
                        })
                        .collect();
                    if out_tx.send((seq, out)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(out_tx);
        // Chunks sent, and outcomes taken into account (in order), counted in chunks.
        let (mut sent, mut settled) = (0u64, 0u64);
        let mut early: std::collections::BTreeMap<u64, Outcomes> = Default::default();
        let mut take = |wait: bool,
                        settled: &mut u64,
                        batch: &mut Batch,
                        stats: &mut DumpStats,
                        warnings: &mut Vec<String>,
                        dropped: &mut u64|
         -> Result<()> {
            let got = if wait {
                Some(
                    out_rx
                        .recv()
                        .map_err(|_| Error::Task("an extracting thread has stopped".into()))?,
                )
            } else {
                out_rx.try_recv().ok()
            };
            if let Some((seq, out)) = got {
                early.insert(seq, out);
            }
            while let Some(out) = early.remove(settled) {
                *settled += 1;
                for (item, res) in out {
                    settle(ctx, batch, &url, item, res, stats, warnings, dropped)?;
                }
            }
            Ok(())
        };
        let mut chunk = Vec::with_capacity(JOB_CHUNK);
        let mut more = true;
        let mut nth = 0usize;
        while more {
            match r.next_entry()? {
                Some(e) => {
                    nth += 1;
                    ctx.obs.add_total(1);
                    let item = StagedItem::from_entry(&e);
                    // Refused on its own (an unsafe path, a ZIP entry refused, no path):
                    // that entry's failure.
                    let refused = pkg.refused.get(&nth).cloned();
                    let p = match (refused, e.md.as_ref().and_then(|m| m.path.as_deref())) {
                        (None, Some(path)) => plan(ctx, &url, &e, path, fresh),
                        (why, _) => Err(Error::Package {
                            url: url.clone(),
                            message: why.unwrap_or_else(|| format!("{}: no path", e.loc)),
                        }),
                    };
                    chunk.push((item, p));
                    if chunk.len() < JOB_CHUNK {
                        continue;
                    }
                }
                None => more = false,
            }
            if chunk.is_empty() {
                continue;
            }
            // At most two chunks per thread waiting or being extracted.
            while sent - settled >= (threads * 2) as u64 {
                take(true, &mut settled, &mut batch, stats, warnings, dropped)?;
            }
            let jobs = std::mem::replace(&mut chunk, Vec::with_capacity(JOB_CHUNK));
            job_tx
                .send((sent, jobs))
                .map_err(|_| Error::Task("the extracting threads have stopped".into()))?;
            sent += 1;
            take(false, &mut settled, &mut batch, stats, warnings, dropped)?;
        }
        drop(job_tx);
        while settled < sent {
            take(true, &mut settled, &mut batch, stats, warnings, dropped)?;
        }
        Ok(())
    })?;
    batch.flush(ctx, &url, stats, warnings, dropped)
}

/// Remembers that a dump package put this URI's copy in place during this run.
fn note_dumped(ctx: &Ctx, uri: &str) -> Result<()> {
    if let Some(d) = &ctx.dumped {
        d.lock()
            .map_err(|_| Error::Task("staging lock poisoned".into()))?
            .upsert(&StagedItem {
                uri: uri.to_owned(),
                ..StagedItem::default()
            })?;
    }
    Ok(())
}

/// Copies in a chunk handed to the committer at once.
const CHUNK: usize = 256;
/// Most chunks handed to the committer and not yet answered (bounds the temporary files and
/// the memory a package holds while the committer is behind): room for the batch being
/// recorded and the one filling, since the committer fills a batch before it commits it.
const MAX_IN_FLIGHT: usize = 2 * MAX_BATCH / CHUNK + 2;

/// The copies of a package on their way to the committer ([`crate::commit`]), which puts them
/// in place and records them in batches on its own thread while the next ones are extracted:
/// (copy, `<loc>`, whether the state had it) in chunks of [`CHUNK`].
struct Batch {
    chunk: Vec<Pending>,
    meta: Vec<(StagedItem, bool)>,
    /// The chunks handed over and not yet answered, by tag: their entries and flags.
    in_flight: std::collections::HashMap<u64, Vec<(StagedItem, bool)>>,
    next_tag: u64,
    producer: Producer,
    rx: std::sync::mpsc::Receiver<(u64, Vec<Done>)>,
}

impl Batch {
    fn new(ctx: &Ctx) -> Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        Ok(Batch {
            chunk: Vec::new(),
            meta: Vec::new(),
            in_flight: std::collections::HashMap::new(),
            next_tag: 0,
            producer: ctx.committer.producer(tx).map_err(Error::Task)?,
            rx,
        })
    }

    /// Adds a copy; a full chunk goes to the committer, announcing more.
    fn push(&mut self, p: Pending, item: StagedItem, update: bool) -> Result<()> {
        self.chunk.push(p);
        self.meta.push((item, update));
        if self.chunk.len() >= CHUNK {
            self.hand_over(true)?;
        }
        Ok(())
    }

    /// Hands the chunk to the committer (`more`: another follows at once).
    fn hand_over(&mut self, more: bool) -> Result<()> {
        if self.chunk.is_empty() && !more {
            // Nothing to add; a batch waiting for more is told there is none.
            return self.producer.end().map_err(Error::Task);
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        let items = std::mem::take(&mut self.chunk);
        self.producer.send(items, tag, more).map_err(Error::Task)?;
        self.in_flight.insert(tag, std::mem::take(&mut self.meta));
        Ok(())
    }

    /// Takes the outcomes the committer has sent: those ready, waiting while more than
    /// [`MAX_IN_FLIGHT`] chunks are out, or (`all`) every one.
    fn receive(
        &mut self,
        ctx: &Ctx,
        url: &str,
        stats: &mut DumpStats,
        warnings: &mut Vec<String>,
        dropped: &mut u64,
        all: bool,
    ) -> Result<()> {
        loop {
            let wait = if all {
                !self.in_flight.is_empty()
            } else {
                self.in_flight.len() > MAX_IN_FLIGHT
            };
            let got = if wait {
                self.rx
                    .recv()
                    .map_err(|_| Error::Task("the commit thread has stopped".into()))?
            } else {
                match self.rx.try_recv() {
                    Ok(g) => g,
                    Err(_) => return Ok(()),
                }
            };
            let (tag, done) = got;
            let Some(meta) = self.in_flight.remove(&tag) else {
                continue;
            };
            for (d, (item, update)) in done.into_iter().zip(meta) {
                match d {
                    Ok(put) => {
                        if update || put.replaced {
                            stats.updated += 1;
                        } else {
                            stats.created += 1;
                        }
                        stats.bytes += put.length;
                        note_dumped(ctx, &item.uri)?;
                    }
                    Err(msg) => entry_failed(ctx, url, item, msg, stats, warnings, dropped)?,
                }
            }
        }
    }

    /// Hands over what is left and waits until every copy is in place and recorded (or failed).
    fn flush(
        &mut self,
        ctx: &Ctx,
        url: &str,
        stats: &mut DumpStats,
        warnings: &mut Vec<String>,
        dropped: &mut u64,
    ) -> Result<()> {
        self.hand_over(false)?;
        self.receive(ctx, url, stats, warnings, dropped, true)
    }
}

/// Downloads, checks and applies one package. A refused package is an `Err`; entry failures are
/// warnings.
#[allow(clippy::too_many_arguments)]
async fn one_package(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    entry: &Entry,
    cap: Capability,
    cursor: Option<W3cDateTime>,
    fresh: bool,
    lists: bool,
    limits: &DumpLimits,
) -> Result<(DumpStats, Vec<String>, u64)> {
    ctx.obs.phase("downloading a package");
    let file = download_package(&ctx.http, ctx.obs.as_ref(), &fetcher.dir, entry, limits).await?;
    ctx.obs.phase("unpacking");
    let (ctx2, url, scratch, limits) =
        (ctx.clone(), entry.loc.clone(), fetcher.dir.clone(), *limits);
    let max_doc = fetcher.max_bytes;
    tokio::task::spawn_blocking(move || {
        let mut pkg = open_package(&file, &url, cap, limits, &scratch, max_doc)?;
        let mut stats = DumpStats {
            lists,
            ..DumpStats::default()
        };
        let mut warnings = Vec::new();
        let mut dropped = 0u64;
        apply_package(
            &ctx2,
            &mut pkg,
            cursor,
            fresh,
            &mut stats,
            &mut warnings,
            &mut dropped,
        )?;
        drop(file);
        Ok((stats, warnings, dropped))
    })
    .await?
}

fn merge(into: &mut DumpStats, s: DumpStats) {
    into.run_failed += s.run_failed;
    for f in s.failures {
        push_capped(&mut into.failures, f);
    }
    if let Some(t) = s.last {
        if into
            .last
            .is_none_or(|l| t.cmp_instant(&l) == std::cmp::Ordering::Greater)
        {
            into.last = Some(t);
        }
    }
    into.packages += s.packages;
    into.refused += s.refused;
    into.created += s.created;
    into.updated += s.updated;
    into.deleted += s.deleted;
    into.unchanged += s.unchanged;
    into.failed += s.failed;
    into.bytes += s.bytes;
}

/// Applies a list of packages in order (entries at or before the cursor skipped; `fresh`: see
/// [`extract`]; `lists`: see [`DumpStats::lists`]). A refused package is a warning where the
/// lists fetch its resources; otherwise a failure of the run, and for a Change Dump the end of
/// the packages applied (the later ones wait for it: §13.1 order).
async fn apply_all(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    packages: &[Entry],
    cap: Capability,
    (cursor, fresh, lists): (Option<W3cDateTime>, bool, bool),
    limits: &DumpLimits,
    warnings: &mut Vec<String>,
) -> Result<DumpStats> {
    let mut stats = DumpStats {
        lists,
        ..DumpStats::default()
    };
    let mut dropped = 0u64;
    for p in packages {
        match one_package(ctx, fetcher, p, cap.clone(), cursor, fresh, lists, limits).await {
            Ok((s, w, d)) => {
                merge(&mut stats, s);
                stats.packages += 1;
                for m in w {
                    warn(warnings, &mut dropped, m);
                }
                dropped += d;
            }
            // A refused package, or one that could not be fetched: its resources are left to
            // the lists. Store or state failures end the run.
            Err(e @ (Error::Package { .. } | Error::Status { .. } | Error::Transport { .. }))
                if lists =>
            {
                stats.refused += 1;
                warn(
                    warnings,
                    &mut dropped,
                    format!("{e}: package refused, its resources are fetched one by one"),
                );
            }
            Err(e @ (Error::Package { .. } | Error::Status { .. } | Error::Transport { .. })) => {
                stats.refused += 1;
                stats.run_failed += 1;
                let change_dump = cap == Capability::ChangeDumpManifest;
                let error = format!(
                    "{e}: package refused; the Source offers no list to fetch its resources from \
                     instead: the next sync tries the package again{}",
                    if change_dump {
                        ", and the packages after it"
                    } else {
                        ""
                    }
                );
                push_capped(
                    &mut stats.failures,
                    Failure::new(p.loc.clone(), None, error),
                );
                if change_dump {
                    stats.stopped = p.md.as_ref().and_then(|m| m.from).or(cursor);
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    if dropped > 0 {
        warnings.push(format!("{dropped} more warning(s) about packages"));
    }
    Ok(stats)
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
    ctx.obs.phase("reading the Resource Dump");
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
    let fresh = ctx.state.resources_page(&ctx.key, None, 1)?.is_empty();
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
    ctx.obs.phase("reading the Change Dump");
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
