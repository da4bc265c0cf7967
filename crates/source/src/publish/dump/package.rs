//! The ZIP packages of dumps: what goes in (bitstreams, compressed or stored by type, named
//! under `resources/` or `changes/`), the package written durably with its manifest last
//! (Z39.99-2014 §11.2, §13.2), and the records of packages written.

use super::*;
/// Media types whose content is already compressed: stored, not deflated.
pub(super) fn is_compressed_type(mime: &str) -> bool {
    let m = mime.trim().to_ascii_lowercase();
    let essence = m.split(';').next().unwrap_or_default().trim();
    matches!(
        essence,
        "image/jpeg"
            | "image/png"
            | "image/gif"
            | "image/webp"
            | "image/avif"
            | "image/heic"
            | "image/jp2"
            | "application/zip"
            | "application/gzip"
            | "application/x-gzip"
            | "application/x-bzip2"
            | "application/x-xz"
            | "application/x-7z-compressed"
            | "application/zstd"
            | "application/vnd.rar"
            | "application/x-rar-compressed"
            | "application/java-archive"
            | "application/epub+zip"
            | "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            | "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
            | "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            | "application/vnd.oasis.opendocument.text"
            | "application/vnd.oasis.opendocument.spreadsheet"
            | "font/woff"
            | "font/woff2"
    ) || essence.starts_with("video/")
        || (essence.starts_with("audio/") && !matches!(essence, "audio/wav" | "audio/x-wav"))
}

/// Bitstreams shorter than this are stored, not deflated: below it deflating saves next to
/// nothing after its own overhead, and costs a Huffman table built and a compressor reset per
/// entry. Stored (method 0) is a ZIP compression method every reader has (Z39.99-2014 §11:
/// packages are ZIP files, [ZIP] APPNOTE §4.4.5).
///
/// Kept small on purpose: at 1 KiB, publishing 30,000 files of 512 B took 1.11 s instead of
/// 1.77 s, but the package grew from 9.1 to 20.2 MB. A dump is published once and downloaded
/// by every Destination, often over slow links: the bytes they download weigh more than the
/// publisher's CPU.
pub(super) const STORED_BELOW: u64 = 128;

/// How a bitstream of `len` bytes and type `mime` goes into a package: stored when it is
/// short ([`STORED_BELOW`]) or already compressed, deflated otherwise.
pub(super) fn compression_for(mime: Option<&str>, len: u64) -> CompressionMethod {
    match mime {
        _ if len < STORED_BELOW => CompressionMethod::Stored,
        Some(m) if is_compressed_type(m) => CompressionMethod::Stored,
        _ => CompressionMethod::Deflated,
    }
}

/// A ZIP (MS-DOS) timestamp for a datetime, in UTC; 1980-01-01 when out of its range.
pub(super) fn zip_time(t: &W3cDateTime) -> zip::DateTime {
    let d = t.timestamp().to_zoned(jiff::tz::TimeZone::UTC).datetime();
    let part = |v: i8| u8::try_from(v).ok();
    (|| {
        zip::DateTime::from_date_and_time(
            u16::try_from(d.year()).ok()?,
            part(d.month())?,
            part(d.day())?,
            part(d.hour())?,
            part(d.minute())?,
            part(d.second())?,
        )
        .ok()
    })()
    .unwrap_or_default()
}

/// The ZIP entry name of a bitstream: `prefix` and the relative path with `/` separators, or
/// `prefix` and the percent-encoded path when the path is not UTF-8 or has control characters
/// or backslashes. `None` for paths with components other than names.
pub(super) fn zip_name(prefix: &str, rel: &Path) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    let mut literal = true;
    for c in rel.components() {
        let Component::Normal(n) = c else {
            return None;
        };
        match n.to_str() {
            Some(s)
                if !s.is_empty()
                    && !s
                        .chars()
                        .any(|c| c.is_control() || matches!(c, '\\' | '\u{FFFE}' | '\u{FFFF}')) =>
            {
                parts.push(s)
            }
            _ => literal = false,
        }
    }
    if parts.is_empty() && literal {
        return None;
    }
    let rest = if literal {
        parts.join("/")
    } else {
        crate::uri::encode_path(rel)?
    };
    // ZIP names are at most 65,535 bytes.
    (prefix.len() + rest.len() <= usize::from(u16::MAX)).then(|| format!("{prefix}{rest}"))
}

/// What the package estimate counts for a bitstream: its bytes, deflate's worst expansion, its
/// name twice (local and central headers) and the headers.
pub(super) fn bitstream_estimate(len: u64, name_len: usize) -> u64 {
    len.saturating_add(len / 1024)
        .saturating_add(2 * name_len as u64)
        .saturating_add(ZIP_ENTRY_OVERHEAD)
}

pub(super) fn up(layout: &Layout) -> Link {
    Link::new("up", layout.doc_url("capabilitylist.xml"))
}

/// A package written: what the Resource Dump or Change Dump lists about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PackageRecord {
    /// Name relative to the documents folder.
    pub(super) name: String,
    pub(super) length: u64,
    pub(super) hashes: Hashes,
    pub(super) from: Option<W3cDateTime>,
    pub(super) until: Option<W3cDateTime>,
    /// Resource Dump packages: `at` and `completed` of the snapshot the package was made for
    /// (its manifest's; a package carried over keeps them, Z39.99-2014 §11.1).
    pub(super) at: Option<W3cDateTime>,
    pub(super) completed: Option<W3cDateTime>,
    /// Resource Dump packages: the URI of its first resource, where its range starts.
    pub(super) start: Option<String>,
    /// Resource Dump packages: the digest of its manifest's entry lines (see
    /// [`super::resource`]).
    pub(super) fingerprint: Option<String>,
}

impl PackageRecord {
    /// A record of a package just written, with nothing of the Resource Dump's own fields.
    pub(super) fn new(name: String, length: u64, hashes: Hashes) -> Self {
        PackageRecord {
            name,
            length,
            hashes,
            from: None,
            until: None,
            at: None,
            completed: None,
            start: None,
            fingerprint: None,
        }
    }
}

/// Records as kept in the state's meta table: one line per package, tab-separated (name,
/// length, digests, from, until, at, completed, start, fingerprint; a URI has no tab or line
/// break).
pub(super) fn encode_records(records: &[PackageRecord]) -> String {
    let dt = |d: &Option<W3cDateTime>| d.map(|d| d.to_string()).unwrap_or_default();
    let text = |s: &Option<String>| {
        s.as_deref()
            .filter(|s| !s.contains(['\t', '\n', '\r']))
            .unwrap_or_default()
            .to_owned()
    };
    records
        .iter()
        .map(|r| {
            format!(
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                r.name,
                r.length,
                r.hashes,
                dt(&r.from),
                dt(&r.until),
                dt(&r.at),
                dt(&r.completed),
                text(&r.start),
                text(&r.fingerprint),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn decode_records(s: &str) -> Option<Vec<PackageRecord>> {
    let dt = |v: &str| -> Option<Option<W3cDateTime>> {
        if v.is_empty() {
            Some(None)
        } else {
            W3cDateTime::parse(v).ok().map(Some)
        }
    };
    s.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut f = l.split('\t');
            let name = f.next()?.to_owned();
            let length = f.next()?.parse().ok()?;
            let (hashes, bad) = Hashes::parse(f.next()?);
            let from = dt(f.next()?)?;
            let until = dt(f.next()?)?;
            // Records of older versions end here: their packages are not carried over.
            let at = dt(f.next().unwrap_or_default())?;
            let completed = dt(f.next().unwrap_or_default())?;
            let text = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(str::to_owned);
            let start = text(f.next());
            let fingerprint = text(f.next());
            (bad.is_empty() && !name.is_empty()).then_some(PackageRecord {
                name,
                length,
                hashes,
                from,
                until,
                at,
                completed,
                start,
                fingerprint,
            })
        })
        .collect()
}

/// A bitstream in the package being written.
#[derive(Debug, Clone)]
pub(super) struct Copied {
    /// The ZIP entry name.
    pub(super) name: String,
}

/// A bitstream to copy into a package, with what the state recorded about it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bitstream<'a> {
    /// Path relative to the Source directory.
    pub(super) rel: &'a Path,
    /// The ZIP entry name.
    pub(super) name: &'a str,
    /// Expected length.
    pub(super) length: u64,
    /// Expected digests.
    pub(super) hashes: &'a Hashes,
    /// Media type (chooses stored or deflated).
    pub(super) mime: Option<&'a str>,
    /// Modification time of the entry.
    pub(super) lastmod: &'a W3cDateTime,
}

/// What copying a bitstream into a package came to.
#[derive(Debug, Clone)]
pub(super) enum CopyOutcome {
    /// Copied; the bytes have the expected length and digests.
    Done(Copied),
    /// The content differs from what the state recorded: left out.
    Changed {
        /// Bytes read (up to one past the expected length).
        length: u64,
    },
    /// It could not be read: left out.
    Unreadable(String),
}

/// How full a package is: entries, estimated size (see [`DumpOptions::max_bytes`]), and
/// the manifest's entry lines in bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Size {
    pub(super) entries: usize,
    pub(super) estimate: u64,
    pub(super) body: u64,
}

impl Size {
    /// Whether one more manifest entry (line of `line_len` bytes) with a bitstream counted as
    /// `est` bytes fits. An empty package takes anything.
    pub(super) fn fits(&self, est: u64, line_len: usize, opts: &DumpOptions) -> bool {
        let line = line_len as u64;
        self.entries == 0
            || (self.entries < opts.max_files
                && self.estimate.saturating_add(est).saturating_add(line) <= opts.max_bytes
                && self.body + line + MANIFEST_HEADER_RESERVE <= MAX_DOCUMENT_BYTES)
    }
}

/// A package of the previous dump, read for the entries a new package carries over.
pub(super) type OldPackage = zip::ZipArchive<io::BufReader<File>>;

/// A package being written: the ZIP in a temporary file, and its manifest's entries.
pub(super) struct Package {
    /// Name relative to the documents folder.
    pub(super) name: String,
    pub(super) target: PathBuf,
    pub(super) file: AtomicFile,
    pub(super) zip: ZipWriter<BufWriter<File>>,
    /// Manifest entry lines.
    pub(super) body: String,
    pub(super) entries: usize,
    /// Estimated size (see [`DumpOptions::max_bytes`]).
    pub(super) estimate: u64,
    pub(super) names: HashSet<String>,
    /// Bitstreams copied (or that failed), by source path (Change Dumps reuse them).
    pub(super) copied: HashMap<Vec<u8>, CopyOutcome>,
    /// Time of the last change listed (Change Dumps).
    pub(super) last_time: Option<W3cDateTime>,
    /// Entries at least this long are written with ZIP64 sizes (lowered by tests).
    pub(super) large_threshold: Option<u64>,
    pub(super) buf: Vec<u8>,
}

impl std::fmt::Debug for Package {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Package")
            .field("name", &self.name)
            .field("entries", &self.entries)
            .field("estimate", &self.estimate)
            .finish_non_exhaustive()
    }
}

/// A package completed: its record and the files written.
pub(super) struct Finished {
    pub(super) record: PackageRecord,
    pub(super) files: [PathBuf; 2],
}

impl Package {
    pub(super) fn create(layout: &Layout, name: String) -> Result<Self> {
        let target = layout.doc_path(&name);
        let mut file = AtomicFile::create(&target)?;
        let handle = file.file().try_clone().map_err(|e| Error::io(&target, e))?;
        Ok(Package {
            name,
            zip: ZipWriter::new(BufWriter::with_capacity(256 * 1024, handle)),
            file,
            target,
            body: String::new(),
            entries: 0,
            estimate: ZIP_PACKAGE_OVERHEAD,
            names: HashSet::new(),
            copied: HashMap::new(),
            last_time: None,
            large_threshold: None,
            buf: vec![0; 64 * 1024],
        })
    }

    pub(super) fn zip_err(&self, cause: zip::result::ZipError) -> Error {
        Error::Zip {
            path: self.target.clone(),
            cause,
        }
    }

    pub(super) fn io_err(&self, source: io::Error) -> Error {
        Error::io(&self.target, source)
    }

    /// Whether one more manifest entry (line of `line_len` bytes) with a bitstream counted as
    /// `est` bytes fits. An empty package takes anything.
    pub(super) fn fits(&self, est: u64, line_len: usize, opts: &DumpOptions) -> bool {
        let size = Size {
            entries: self.entries,
            estimate: self.estimate,
            body: self.body.len() as u64,
        };
        size.fits(est, line_len, opts)
    }

    /// A name not used yet in this package.
    pub(super) fn unique_name(&self, name: String) -> String {
        if !self.names.contains(&name) {
            return name;
        }
        (2u64..)
            .map(|i| format!("{name}~{i}"))
            .find(|n| !self.names.contains(n))
            .unwrap_or(name)
    }

    /// Appends a manifest entry line.
    pub(super) fn push_line(&mut self, line: &str, est: u64, time: Option<W3cDateTime>) {
        self.body.push_str(line);
        self.entries += 1;
        self.estimate = self
            .estimate
            .saturating_add(est)
            .saturating_add(line.len() as u64);
        if time.is_some() {
            self.last_time = time;
        }
    }

    /// Removes the entry being written, and cuts the file back to where it started.
    pub(super) fn abort_entry(&mut self) -> Result<()> {
        self.zip.abort_file().map_err(|e| self.zip_err(e))?;
        // The writer is now positioned at the aborted entry's header (or, if it could not
        // rewind, at the end of the file); both handles share the file offset.
        self.zip.flush().map_err(|e| self.io_err(e))?;
        let f = self.file.file();
        let pos = f
            .stream_position()
            .map_err(|e| Error::io(&self.target, e))?;
        f.set_len(pos).map_err(|e| Error::io(&self.target, e))?;
        Ok(())
    }

    /// Copies a bitstream into the package, hashing the bytes written with the algorithms of
    /// its expected digests; keeps it only when length and digests are as expected.
    pub(super) fn copy(&mut self, inv: &dyn Inventory, b: &Bitstream<'_>) -> Result<CopyOutcome> {
        let Bitstream {
            rel,
            name,
            length: expected_len,
            hashes: expected,
            mime,
            lastmod,
        } = *b;
        let known = expected.known_algs();
        let algs = if known.is_empty() {
            vec![HashAlg::Md5]
        } else {
            known.clone()
        };
        let reader = match inv.open(rel) {
            Ok(r) => r,
            Err(e) => return Ok(CopyOutcome::Unreadable(format!("cannot be opened: {e}"))),
        };
        let large = match self.large_threshold {
            Some(t) => expected_len >= t,
            None => needs_large_file(expected_len),
        };
        let options = SimpleFileOptions::default()
            .compression_method(compression_for(mime, expected_len))
            .large_file(large)
            .last_modified_time(zip_time(lastmod))
            .unix_permissions(0o644);
        self.zip
            .start_file(name, options)
            .map_err(|e| self.zip_err(e))?;
        let mut hasher = MultiHasher::new(&algs);
        // Never more than one byte past the expected length: enough to see that the file grew,
        // and the entry stays within the size its ZIP64 choice was made for.
        let mut limited = reader.take(expected_len.saturating_add(1));
        loop {
            let n = match limited.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.abort_entry()?;
                    return Ok(CopyOutcome::Unreadable(format!("read failed: {e}")));
                }
            };
            let chunk = &self.buf[..n];
            hasher.update(chunk);
            if let Err(e) = self.zip.write_all(chunk) {
                return Err(Error::io(&self.target, e));
            }
        }
        let length = hasher.length();
        let hashes = hasher.finish();
        let same = length == expected_len
            && (known.is_empty() || expected.agrees_with(&hashes) == Some(true));
        if !same {
            self.abort_entry()?;
            return Ok(CopyOutcome::Changed { length });
        }
        self.names.insert(name.to_owned());
        Ok(CopyOutcome::Done(Copied {
            name: name.to_owned(),
        }))
    }

    /// Copies the entry `b.name` of the previous dump's package `old` into this package as it
    /// is (its compressed bytes: not deflated again) when its content, inflated and hashed
    /// now, has the length and digests `b` expects; `false` (nothing written) otherwise, and
    /// for entries that need ZIP64 sizes or a bitstream without digests to check.
    pub(super) fn carry(&mut self, old: &mut OldPackage, b: &Bitstream<'_>) -> Result<bool> {
        let known = b.hashes.known_algs();
        if known.is_empty() || self.large_threshold.is_some() || needs_large_file(b.length) {
            return Ok(false);
        }
        let Some(i) = old.index_for_name(b.name) else {
            return Ok(false);
        };
        let same = match old.by_index(i) {
            Ok(f) if f.size() == b.length => MultiHasher::new(&known)
                .hash_reader(f.take(b.length.saturating_add(1)))
                .is_ok_and(|(len, h)| len == b.length && b.hashes.agrees_with(&h) == Some(true)),
            _ => false,
        };
        if !same {
            return Ok(false);
        }
        let Ok(raw) = old.by_index_raw(i) else {
            return Ok(false);
        };
        self.zip
            .raw_copy_file_touch(raw, zip_time(b.lastmod), Some(0o644))
            .map_err(|e| Error::Zip {
                path: self.target.clone(),
                cause: e,
            })?;
        self.names.insert(b.name.to_owned());
        Ok(true)
    }

    /// Writes the manifest (into the package and as a copy next to it), completes the ZIP,
    /// hashes it and renames it into place.
    pub(super) fn finish(
        mut self,
        layout: &Layout,
        header: &Header,
        time: &W3cDateTime,
    ) -> Result<Finished> {
        let doc = manifest_copy_name(&self.name);
        let mut xml = header_xml(&doc, header)?;
        xml.push_str(&self.body);
        xml.push_str("</urlset>\n");
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .last_modified_time(zip_time(time))
            .unix_permissions(0o644);
        // Z39.99-2014 §11.2, §13.2: named manifest.xml, at the top level of the package.
        self.zip
            .start_file(MANIFEST_NAME, options)
            .map_err(|e| self.zip_err(e))?;
        if let Err(e) = self.zip.write_all(xml.as_bytes()) {
            return Err(self.io_err(e));
        }
        let target = self.target.clone();
        let zip_err = |cause| Error::Zip {
            path: target.clone(),
            cause,
        };
        let w = self.zip.finish().map_err(zip_err)?;
        let mut handle = w
            .into_inner()
            .map_err(|e| Error::io(&target, e.into_error()))?;
        handle.flush().map_err(|e| Error::io(&target, e))?;
        drop(handle);
        let f = self.file.file();
        f.rewind().map_err(|e| Error::io(&target, e))?;
        let (length, hashes) = MultiHasher::new(&PACKAGE_ALGS)
            .hash_reader(&mut *f)
            .map_err(|e| Error::io(&target, e))?;
        // The copy first: once the package is in place, the copy it links to is there too.
        // Z39.99-2014 §11.1, §13.1: the copy must match the manifest in the package.
        let copy_path = layout.doc_path(&doc);
        write_file(&copy_path, xml.as_bytes())?;
        self.file.commit()?;
        Ok(Finished {
            record: PackageRecord {
                from: header.md.as_ref().and_then(|m| m.from),
                until: header.md.as_ref().and_then(|m| m.until),
                ..PackageRecord::new(self.name, length, hashes)
            },
            files: [target, copy_path],
        })
    }
}
