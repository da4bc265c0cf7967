//! Resource Dump and Change Dump packages (Z39.99-2014 §11, §13) as hostile input: the bytes
//! are the ZIP file (first byte even), or describe a package built from them (first byte odd: a
//! manifest with fuzzed `<loc>`s, `path`s, lengths and digests, and ZIP entries that may or may
//! not match it), which `resourcesync_destination::dump::unpack_package` opens, checks and
//! extracts into a fresh destination directory with small limits.
//!
//! Must never panic, hang or allocate without bound, and:
//! - nothing is written outside the destination directory: the work directory holds exactly
//!   the package, the (empty) scratch directory and DEST afterwards;
//! - DEST holds no symbolic link, no temporary file left over, and no file that is not the
//!   path of an entry reported written;
//! - a package is refused when a ZIP entry is not listed in its manifest or a listed `path` is
//!   unsafe (structured inputs, where what the ZIP holds is known).
#![no_main]

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{Cursor, Write};
use std::path::Path;

use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use resourcesync_destination::UriMapper;
use resourcesync_destination::dump::{DumpLimits, UnpackLimits, entry_name, unpack_package};
use resourcesync_model::{Capability, HashAlg, MultiHasher};
use resourcesync_store::{FsStore, RelPath, STATE_DIR};

const BASE: &str = "http://example.org/data/";

fn limits() -> UnpackLimits {
    UnpackLimits {
        dump: DumpLimits {
            max_package_bytes: 1 << 20,
            max_unpacked_bytes: 2 << 20,
            max_ratio: 50,
        },
        max_document_bytes: 64 * 1024,
        max_resource_bytes: 256 * 1024,
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

/// Every file and directory under `dir`, relative, with `/`; panics on a symbolic link.
fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, bool)>) {
    for e in fs::read_dir(dir).expect("read_dir") {
        let e = e.expect("entry");
        let name = e.file_name().into_string().expect("UTF-8 name");
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let ft = e.file_type().expect("file type");
        assert!(!ft.is_symlink(), "symbolic link written: {rel}");
        if ft.is_dir() {
            out.push((rel.clone(), true));
            walk(&e.path(), &rel, out);
        } else {
            out.push((rel, false));
        }
    }
}

fn work_dir() -> tempfile::TempDir {
    // tmpfs when there is one: the store syncs every file it commits.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).expect("tempdir")
    } else {
        tempfile::tempdir().expect("tempdir")
    }
}

fn run(zip: &[u8], cap: Capability, smuggled: Option<&[String]>) {
    let work = work_dir();
    let file = work.path().join("package.zip");
    fs::write(&file, zip).expect("write package");
    let scratch = work.path().join("scratch");
    fs::create_dir(&scratch).expect("scratch");
    let dest = work.path().join("dest");
    let store = FsStore::open(&dest).expect("store");
    let mapper = UriMapper::new(BASE).expect("mapper");

    let res = unpack_package(&file, cap, limits(), &scratch, &mapper, &store);

    // Nothing outside DEST: the work directory is as it was.
    let top: BTreeSet<String> = fs::read_dir(work.path())
        .expect("work")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    assert_eq!(
        top,
        ["dest", "package.zip", "scratch"]
            .map(String::from)
            .into_iter()
            .collect(),
        "something written next to DEST"
    );
    assert_eq!(
        fs::read_dir(&scratch).expect("scratch").count(),
        0,
        "inflated manifest left in the scratch directory"
    );
    assert_eq!(fs::read(&file).expect("package"), zip, "package changed");

    let written: HashSet<String> = match &res {
        Ok(entries) => entries
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|r| r.as_str().to_owned())
            .collect(),
        Err(_) => HashSet::new(),
    };
    let mut found = Vec::new();
    walk(&dest, "", &mut found);
    for (rel, dir) in &found {
        if rel == STATE_DIR || rel == &format!("{STATE_DIR}/tmp") {
            assert!(dir, "{rel} is not a directory");
            continue;
        }
        assert!(
            !rel.starts_with(&format!("{STATE_DIR}/")),
            "left in the state folder: {rel}"
        );
        let p = RelPath::parse(rel).expect("every file under DEST has a safe relative path");
        if *dir {
            assert!(
                written.iter().any(|w| w.starts_with(&format!("{rel}/"))),
                "directory {rel} made for no file written"
            );
        } else {
            assert!(
                written.contains(p.as_str()),
                "file {rel} is not the path of an entry written"
            );
        }
    }
    for w in &written {
        let p = RelPath::parse(w).expect("written path");
        assert!(
            p.under(&dest).is_file(),
            "entry reported written but {w} is not a file"
        );
    }

    // What the ZIP holds is known: a package that smuggles a file, or lists an unsafe path,
    // is refused.
    if let (Ok(_), Some(names)) = (&res, smuggled) {
        for n in names {
            let is_dir = n.ends_with('/');
            assert!(
                is_dir || n == "manifest.xml" || entry_name(&format!("/{n}")).is_ok(),
                "package with ZIP entry {n:?} accepted"
            );
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
