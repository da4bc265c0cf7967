//! Resource Dump and Change Dump packages (Z39.99-2014 §11, §13) as hostile input: the bytes
//! are the ZIP file (first byte even), or describe a package built from them (first byte odd: a
//! manifest with fuzzed `<loc>`s, `path`s, lengths and digests, and ZIP entries that may or may
//! not match it), whose ZIP entries and manifest are checked by `resourcesync_model::package`
//! (the checks of a package that need no I/O) with small limits.
//!
//! Must never panic, hang or allocate without bound, and:
//! - every manifest entry used names its bitstream (and its patch) by a path that
//!   `entry_name` accepts and that stays inside the package when joined to a root;
//! - a ZIP entry is taken as named exactly when a manifest `path` names it (the others are
//!   never read);
//! - the entries used never declare more than the package's budget;
//! - an entry whose `path` names a smuggled ZIP entry by an unsafe name is refused (structured
//!   inputs, where what the ZIP holds is known).
//!
//! The extraction into a destination directory (the store, the state) is the Destination's
//! I/O and is not fuzzed here: `crates/destination/tests/it/hostile.rs` and the unit tests of
//! `destination::dump` cover it (`unpack_package`).
#![no_main]

use std::collections::HashSet;
use std::io::{Cursor, Read, Write};
use std::path::{Component, Path};

use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use resourcesync_model::package::{
    DumpLimits, MANIFEST_NAME, MAX_PATH_BYTES, ManifestCheck, ZipListing, entry_name, patch_path,
};
use resourcesync_model::{Capability, DocumentReader, HashAlg, MultiHasher, ReadOptions};
use zip::ZipArchive;

const BASE: &str = "http://example.org/data/";

/// Most bytes of a manifest read.
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Most manifest entries.
const MAX_ENTRIES: usize = 1000;

fn limits() -> DumpLimits {
    DumpLimits {
        max_package_bytes: 1 << 20,
        max_unpacked_bytes: 2 << 20,
        max_ratio: 50,
    }
}

#[derive(Arbitrary, Debug)]
enum Loc {
    /// `BASE` + this.
    UnderBase(String),
    /// As is.
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Length {
    Honest,
    Absent,
    Lie(u32),
}

#[derive(Arbitrary, Debug)]
enum Digest {
    Md5,
    Sha256,
    Absent,
    Wrong,
}

#[derive(Arbitrary, Debug)]
struct BuiltEntry {
    loc: Loc,
    /// The manifest `path` (none when absent).
    path: Option<String>,
    /// Whether the ZIP has an entry for the path (named as the path without its leading
    /// slash, or `zip_name` when given).
    in_zip: bool,
    zip_name: Option<String>,
    content: Vec<u8>,
    /// Repeat `content` this many times (compressible bodies, ratio limits).
    repeat: u16,
    deflate: bool,
    length: Length,
    digest: Digest,
    deleted: bool,
}

#[derive(Arbitrary, Debug)]
struct Built {
    change_dump: bool,
    entries: Vec<BuiltEntry>,
    /// ZIP entries the manifest does not list (smuggled files, directories).
    extra: Vec<(String, Vec<u8>)>,
    /// Omit the manifest from the ZIP.
    no_manifest: bool,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn digest(alg: HashAlg, body: &[u8]) -> String {
    let mut h = MultiHasher::new(&[alg]);
    h.update(body);
    h.finish().to_string()
}

/// The package bytes, and the names of the ZIP entries it holds besides the manifest.
fn build(b: &Built) -> (Vec<u8>, Vec<String>) {
    let cap = if b.change_dump {
        r#"capability="changedump-manifest" from="2020-01-01T00:00:00Z" until="2020-01-02T00:00:00Z""#
    } else {
        r#"capability="resourcedump-manifest" at="2020-01-01T00:00:00Z""#
    };
    let mut m = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:ln rel=\"up\" href=\"http://example.org/cap.xml\"/>\n<rs:md {cap}/>\n"
    );
    let mut files: Vec<(String, Vec<u8>, bool)> = Vec::new();
    for (i, e) in b.entries.iter().enumerate() {
        let body = e.content.repeat(usize::from(e.repeat % 4096) + 1);
        let loc = match &e.loc {
            Loc::UnderBase(s) => format!("{BASE}{s}"),
            Loc::Raw(s) => s.clone(),
        };
        let mut md = String::new();
        if b.change_dump {
            let change = if e.deleted { "deleted" } else { "updated" };
            md.push_str(&format!(
                " change=\"{change}\" datetime=\"2020-01-01T00:{:02}:{:02}Z\"",
                (i / 60) % 60,
                i % 60
            ));
        }
        match e.length {
            Length::Honest => md.push_str(&format!(" length=\"{}\"", body.len())),
            Length::Absent => {}
            Length::Lie(n) => md.push_str(&format!(" length=\"{n}\"")),
        }
        match e.digest {
            Digest::Md5 => md.push_str(&format!(" hash=\"{}\"", digest(HashAlg::Md5, &body))),
            Digest::Sha256 => md.push_str(&format!(" hash=\"{}\"", digest(HashAlg::Sha256, &body))),
            Digest::Absent => {}
            Digest::Wrong => md.push_str(" hash=\"md5:00000000000000000000000000000000\""),
        }
        if let Some(p) = &e.path {
            md.push_str(&format!(" path=\"{}\"", esc(p)));
            if e.in_zip {
                let name = e
                    .zip_name
                    .clone()
                    .unwrap_or_else(|| p.strip_prefix('/').unwrap_or(p).to_owned());
                files.push((name, body, e.deflate));
            }
        }
        m.push_str(&format!(
            "<url><loc>{}</loc><rs:md{md}/></url>\n",
            esc(&loc)
        ));
    }
    m.push_str("</urlset>\n");
    for (name, body) in &b.extra {
        files.push((name.clone(), body.clone(), true));
    }
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = |deflate: bool| {
        zip::write::SimpleFileOptions::default().compression_method(if deflate {
            zip::CompressionMethod::Deflated
        } else {
            zip::CompressionMethod::Stored
        })
    };
    if !b.no_manifest {
        w.start_file("manifest.xml", opts(true)).expect("manifest");
        w.write_all(m.as_bytes()).expect("write");
    }
    let mut names = Vec::new();
    for (name, body, deflate) in files {
        // Duplicate or unacceptable names are refused by the writer: leave them out.
        if w.start_file(name.as_str(), opts(deflate)).is_ok() {
            w.write_all(&body).expect("write");
            names.push(name);
        }
    }
    (w.finish().expect("finish").into_inner(), names)
}

/// Whether `name` (accepted by [`entry_name`]) stays inside the package when joined to a root.
fn check_name(name: &str) {
    assert!(!name.is_empty() && name.len() <= MAX_PATH_BYTES, "{name:?}");
    assert!(!name.starts_with('/'), "absolute: {name:?}");
    assert!(!name.contains(['\\', '\0']), "{name:?}");
    assert!(!name.chars().any(char::is_control), "{name:?}");
    assert_ne!(name, MANIFEST_NAME);
    let root = Path::new("/package/root");
    let joined = root.join(name);
    let rest = joined.strip_prefix(root).expect("under the root");
    assert!(
        rest.components().all(|c| matches!(c, Component::Normal(_))),
        "{name:?} joins as {rest:?}"
    );
}

fn run(zip: &[u8], cap: Capability, smuggled: Option<&[String]>) {
    let limits = limits();
    let Ok(mut zip) = ZipArchive::new(Cursor::new(zip)) else {
        return;
    };
    let mut listing = ZipListing::new();
    let mut zip_names = Vec::new();
    for i in 0..zip.len() {
        let Ok(e) = zip.by_index_raw(i) else {
            return;
        };
        listing.add(
            e.name_raw(),
            e.encrypted(),
            e.size(),
            e.compressed_size(),
            &limits,
        );
        zip_names.push(e.name_raw().to_vec());
    }
    let Some(mi) = zip.index_for_name(MANIFEST_NAME) else {
        return;
    };
    let mut manifest = Vec::new();
    {
        let Ok(f) = zip.by_index(mi) else {
            return;
        };
        if f.take(MAX_MANIFEST_BYTES).read_to_end(&mut manifest).is_err() {
            return;
        }
    }
    let Ok(mut r) = DocumentReader::new(&manifest[..], ReadOptions::named(MANIFEST_NAME)) else {
        return;
    };
    let mut check = ManifestCheck::new(listing, cap, MAX_ENTRIES);
    let mut entries = Vec::new();
    loop {
        match r.next_entry() {
            Ok(Some(e)) => {
                if check.entry(&e).is_err() {
                    assert!(entries.len() >= MAX_ENTRIES, "refused before {MAX_ENTRIES} entries");
                    return;
                }
                entries.push(e);
            }
            Ok(None) => break,
            Err(_) => return,
        }
    }
    if let Ok(total) = check.declared(&limits) {
        assert!(total <= limits.max_unpacked_bytes);
    }
    // A ZIP entry no manifest `path` names is never read (it is reported as unlisted).
    let named: HashSet<Vec<u8>> = entries
        .iter()
        .flat_map(|e| {
            let path = e.md.as_ref().and_then(|m| m.path.as_deref());
            path.into_iter().chain(patch_path(e))
        })
        .map(|p| p.strip_prefix('/').unwrap_or(p).as_bytes().to_vec())
        .collect();
    for n in &zip_names {
        assert_eq!(check.names(n), named.contains(n), "{:?}", String::from_utf8_lossy(n));
    }
    let refused = check.into_refused();
    assert!(refused.keys().all(|k| (1..=entries.len()).contains(k)));
    // Every entry used names its bitstream by a safe path.
    for (i, e) in entries.iter().enumerate() {
        if refused.contains_key(&(i + 1)) {
            continue;
        }
        for p in e.md.as_ref().and_then(|m| m.path.as_deref()).into_iter().chain(patch_path(e)) {
            let n = entry_name(p).expect("an entry used has a safe path");
            check_name(n);
        }
    }
    // What the ZIP holds is known: an entry naming a smuggled file with an unsafe name is
    // refused.
    if let Some(names) = smuggled {
        for (i, e) in entries.iter().enumerate() {
            let Some(p) = e.md.as_ref().and_then(|m| m.path.as_deref()) else {
                continue;
            };
            let raw = p.strip_prefix('/').unwrap_or(p);
            if names.iter().any(|n| n == raw) && entry_name(p).is_err() {
                assert!(refused.contains_key(&(i + 1)), "entry with path {p:?} used");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let cap = if mode % 4 == 0 {
            Capability::ResourceDumpManifest
        } else {
            Capability::ChangeDumpManifest
        };
        run(rest, cap, None);
        return;
    }
    let Ok(b) = Built::arbitrary_take_rest(Unstructured::new(rest)) else {
        return;
    };
    if b.entries.len() > 64 || b.extra.len() > 16 {
        return;
    }
    let (zip, names) = build(&b);
    let cap = if b.change_dump {
        Capability::ChangeDumpManifest
    } else {
        Capability::ResourceDumpManifest
    };
    run(&zip, cap, Some(&names));
});
