//! The checks of a Resource Dump or Change Dump package that need no I/O (Z39.99-2014 §11.2,
//! §13.2; Z39.99-2017 §11, §13), all input being hostile:
//!
//! - [`entry_name`]: the ZIP entry name a manifest `path` names, refused when it could leave the
//!   package ("ZIP slip");
//! - [`ZipListing`]: the ZIP entries as the archive's central directory declares them, those
//!   refused on their own (encrypted, a zip bomb by ratio or size) set apart;
//! - [`ManifestCheck`]: the manifest's entries, one at a time, matched with the ZIP entries: an
//!   entry whose `path` is missing, unsafe or names a refused ZIP entry is refused on its own;
//!   the total the entries used declare, and the ZIP entries no entry names;
//! - [`judge_findings`]: which validation errors of a manifest refuse its package.
//!
//! Reading the archive and inflating entries is the caller's (the Destination's `dump` module):
//! these functions take what the archive declares as plain values.

use std::collections::{HashMap, HashSet};

use crate::document::REL_PATCH;
use crate::{Capability, Change, Entry, Finding, Findings, Severity};

/// The name of the manifest inside every package (Z39.99-2014 §11.2, §13.2).
pub const MANIFEST_NAME: &str = "manifest.xml";
/// Longest `path` accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest path segment accepted, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;
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
/// Validation findings (and unlisted ZIP entries) quoted in a message.
pub const QUOTED_FINDINGS: usize = 3;
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

/// The ZIP entry name a manifest `path` names (Z39.99-2014 §11.2, §13.2: "relative to root of the
/// package and ... expressed with a leading slash"; a path without it, as `resync` 2.0.1 writes,
/// is read the same way), or why it is refused: an absolute path beyond the leading slash
/// (`//etc/x`), empty segments, `.` or `..` segments, backslashes, NUL or other control
/// characters, segments over [`MAX_SEGMENT_BYTES`], paths over [`MAX_PATH_BYTES`], or the
/// manifest itself.
pub fn entry_name(path: &str) -> Result<&str, &'static str> {
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
pub fn shown_name(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).chars().take(200).collect()
}

/// The `path` of an entry's patch link inside the package (Z39.99-2014 §14.4), if it has one.
pub fn patch_path(e: &Entry) -> Option<&str> {
    e.links
        .iter()
        .find(|l| l.has_rel(REL_PATCH))
        .and_then(|l| l.path.as_deref())
}

/// The ZIP entries of a package as its central directory declares them.
#[derive(Debug, Default)]
pub struct ZipListing {
    /// The entries refused on their own, by raw name: why.
    refused: HashMap<Vec<u8>, String>,
    /// The declared (inflated) size of the others, by raw name.
    sizes: HashMap<Vec<u8>, u64>,
}

impl ZipListing {
    /// An empty listing.
    pub fn new() -> Self {
        ZipListing::default()
    }

    /// Adds a ZIP entry: refused on its own (a manifest entry that names it fails, the others
    /// are used) when it is encrypted, or declares more than `limits.max_ratio` times its
    /// compressed size (past [`RATIO_EXEMPT_BYTES`]) or more than `limits.max_unpacked_bytes`.
    pub fn add(
        &mut self,
        raw_name: &[u8],
        encrypted: bool,
        size: u64,
        compressed: u64,
        limits: &DumpLimits,
    ) {
        let why = if encrypted {
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
                self.refused.insert(
                    raw_name.to_vec(),
                    format!("ZIP entry {:?} {w}", shown_name(raw_name)),
                );
            }
            None => {
                self.sizes.insert(raw_name.to_vec(), size);
            }
        }
    }
}

/// The entries of a manifest checked against the ZIP entries of its package, one at a time.
#[derive(Debug)]
pub struct ManifestCheck {
    zip: ZipListing,
    cap: Capability,
    max_entries: usize,
    /// The ZIP entries the manifest names (a bitstream, or a patch, §14.4).
    names: HashSet<Vec<u8>>,
    /// The names of those refused for their path (not reported again as unlisted).
    unsafe_names: HashSet<Vec<u8>>,
    /// The manifest entries refused, by their number (from 1): why.
    refused: HashMap<usize, String>,
    count: usize,
}

impl ManifestCheck {
    /// A check of the manifest of a package of kind `cap` (a Resource Dump Manifest or a Change
    /// Dump Manifest) holding the ZIP entries `zip`, refused past `max_entries` entries.
    pub fn new(zip: ZipListing, cap: Capability, max_entries: usize) -> Self {
        ManifestCheck {
            zip,
            cap,
            max_entries,
            names: HashSet::new(),
            unsafe_names: HashSet::new(),
            refused: HashMap::new(),
            count: 0,
        }
    }

    /// Takes the next manifest entry into account; `Err` (why) refuses the package as a whole.
    pub fn entry(&mut self, e: &Entry) -> Result<(), String> {
        self.count += 1;
        if self.count > self.max_entries {
            return Err(format!(
                "{MANIFEST_NAME} has more than {} entries",
                self.max_entries
            ));
        }
        // Why this entry is refused, if it is: the first reason found.
        let mut why: Option<String> = None;
        // Z39.99-2014 §14.4: a patch link of a Change Dump Manifest entry names, with `path`,
        // the change description inside the package.
        let patch = patch_path(e);
        if let Some(p) = patch {
            self.name("patch path", p, &mut why);
        }
        let change = self.cap == Capability::ChangeDumpManifest;
        match e.md.as_ref().and_then(|m| m.path.as_deref()) {
            // Z39.99-2014 §13.2: a deleted resource has no bitstream.
            None if change && e.change() == Some(&Change::Deleted) => {}
            // An update shipped as a patch alone (§14.4): applied to the copy, or left to the
            // lists. §13.2 asks for a `path` on every other entry; that finding is not fatal here.
            None if change && e.change() == Some(&Change::Updated) && patch.is_some() => {}
            None => {
                why.get_or_insert_with(|| {
                    "no path (Z39.99-2014 §11.2, §13.2: every manifest entry names its bitstream)"
                        .to_owned()
                });
            }
            Some(p) => self.name("path", p, &mut why),
        }
        if let Some(why) = why {
            self.refused.insert(
                self.count,
                format!(
                    "{MANIFEST_NAME} line {}: {}: refused: {why}",
                    e.position.line, e.loc
                ),
            );
        }
        Ok(())
    }

    /// Records the ZIP entry a `path` (`what`: of the entry, or of its patch) names, or why it
    /// is refused.
    fn name(&mut self, what: &str, p: &str, why: &mut Option<String>) {
        match entry_name(p) {
            Ok(n) => {
                if let Some(b) = self.zip.refused.get(n.as_bytes()) {
                    why.get_or_insert_with(|| b.clone());
                }
                self.names.insert(n.as_bytes().to_vec());
            }
            Err(rule) => {
                let raw = p.strip_prefix('/').unwrap_or(p);
                self.unsafe_names.insert(raw.as_bytes().to_vec());
                why.get_or_insert_with(|| {
                    format!(
                        "{what} {:?}: {rule} (Z39.99-2014 §11.2, §13.2: a path names a bitstream \
                         inside the package, a ZIP slip otherwise)",
                        p.chars().take(200).collect::<String>()
                    )
                });
            }
        }
    }

    /// What the entries used declare, together, unless it is more than
    /// `limits.max_unpacked_bytes` (a zip bomb of many entries, each within the ratio): then why
    /// the package is refused.
    pub fn declared(&self, limits: &DumpLimits) -> Result<u64, String> {
        let declared = self
            .names
            .iter()
            .filter_map(|n| self.zip.sizes.get(n))
            .fold(0u64, |a, n| a.saturating_add(*n));
        if declared > limits.max_unpacked_bytes {
            return Err(format!(
                "the entries declare {declared} bytes in all, more than the {} allowed (a zip bomb?)",
                limits.max_unpacked_bytes
            ));
        }
        Ok(declared)
    }

    /// Whether a manifest entry names the ZIP entry `raw` (its `path` or its patch's, safe or
    /// not).
    pub fn names(&self, raw: &[u8]) -> bool {
        self.names.contains(raw) || self.unsafe_names.contains(raw)
    }

    /// The manifest entries refused on their own, by their number (from 1): why.
    pub fn into_refused(self) -> HashMap<usize, String> {
        self.refused
    }
}

/// Whether a manifest with these findings is used: `Err` (why) when an error other than the
/// [`TOLERATED_RULES`] (and `RS-11.2-path`: an entry without a `path` is refused on its own by
/// [`ManifestCheck`]) was found, or errors were found that were not kept (they cannot be told
/// apart); otherwise the note to give about the tolerated ones, if any, for package `url`.
pub fn judge_findings(findings: &Findings, url: &str) -> Result<Option<String>, String> {
    let errors: Vec<&Finding> = findings
        .as_slice()
        .iter()
        .filter(|f| f.severity() == Severity::Error)
        .collect();
    let (tolerated, fatal): (Vec<&Finding>, Vec<&Finding>) = errors
        .iter()
        .copied()
        .partition(|f| TOLERATED_RULES.contains(&f.rule.id) || f.rule.id == "RS-11.2-path");
    if !fatal.is_empty() || findings.error_count() > errors.len() as u64 {
        let quoted: Vec<String> = fatal
            .iter()
            .chain(tolerated.iter())
            .take(QUOTED_FINDINGS)
            .map(ToString::to_string)
            .collect();
        return Err(format!(
            "{MANIFEST_NAME} is not valid ({} error(s)): {}",
            findings.error_count(),
            quoted.join("; ")
        ));
    }
    Ok(tolerated.first().map(|f| {
        format!(
            "package {url}: {MANIFEST_NAME} departs from the specification in what is not relied on: {f}{}",
            match tolerated.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            }
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_that_leave_the_package_are_refused() {
        assert_eq!(entry_name("/a/b.txt"), Ok("a/b.txt"));
        assert_eq!(entry_name("a/b.txt"), Ok("a/b.txt"));
        for bad in [
            "//etc/passwd",
            "/",
            "/a/../b",
            "/a/./b",
            "/a//b",
            "/a\\b",
            "/a\0b",
            "/a\nb",
            "/manifest.xml",
        ] {
            assert!(entry_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(entry_name(&format!("/{}", "a".repeat(256))).is_err());
        assert!(entry_name(&format!("/{}", "a/".repeat(2100))).is_err());
    }

    #[test]
    fn zip_entries_are_refused_for_ratio_size_or_encryption() {
        let limits = DumpLimits {
            max_package_bytes: 1 << 20,
            max_unpacked_bytes: 8 << 20,
            max_ratio: 10,
        };
        let mut z = ZipListing::new();
        z.add(b"ok", false, 2 << 20, 1 << 20, &limits);
        z.add(b"small", false, 1 << 20, 1, &limits);
        z.add(b"ratio", false, 2 << 20, 1000, &limits);
        z.add(b"big", false, 9 << 20, 9 << 20, &limits);
        z.add(b"secret", true, 10, 10, &limits);
        let mut refused: Vec<&[u8]> = z.refused.keys().map(Vec::as_slice).collect();
        refused.sort();
        assert_eq!(refused, [&b"big"[..], b"ratio", b"secret"]);
        assert_eq!(z.sizes.len(), 2);
    }

    fn entry(loc: &str, path: Option<&str>) -> Entry {
        let mut e = Entry::new(loc);
        e.md_mut().path = path.map(str::to_owned);
        e
    }

    #[test]
    fn manifest_entries_are_matched_with_zip_entries() {
        let limits = DumpLimits {
            max_package_bytes: 1 << 20,
            max_unpacked_bytes: 100,
            max_ratio: 10,
        };
        let mut z = ZipListing::new();
        z.add(b"a", false, 60, 60, &limits);
        z.add(b"b", false, 60, 60, &limits);
        z.add(b"c", true, 1, 1, &limits);
        z.add(b"stray", false, 1, 1, &limits);
        let mut m = ManifestCheck::new(z, Capability::ResourceDumpManifest, 5);
        m.entry(&entry("http://e.org/a", Some("/a"))).expect("a");
        assert_eq!(m.declared(&limits), Ok(60));
        m.entry(&entry("http://e.org/c", Some("/c"))).expect("c");
        m.entry(&entry("http://e.org/x", Some("/../x"))).expect("x");
        m.entry(&entry("http://e.org/y", None)).expect("y");
        assert!(m.names(b"a") && m.names(b"c") && m.names(b"../x"));
        assert!(!m.names(b"b") && !m.names(b"stray"));
        m.entry(&entry("http://e.org/b", Some("b"))).expect("b");
        assert!(
            m.declared(&limits).is_err(),
            "120 bytes declared, 100 allowed"
        );
        assert!(m.entry(&entry("http://e.org/z", Some("/z"))).is_err());
        let refused = m.into_refused();
        let mut numbers: Vec<usize> = refused.keys().copied().collect();
        numbers.sort_unstable();
        assert_eq!(numbers, [2, 3, 4]);
        assert!(refused[&2].contains("is encrypted"), "{}", refused[&2]);
        assert!(refused[&3].contains("ZIP slip"), "{}", refused[&3]);
        assert!(refused[&4].contains("no path"), "{}", refused[&4]);
    }
}
