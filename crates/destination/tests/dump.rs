//! Resource Dumps, Change Dumps and patch links on the Destination side (Z39.99-2014 §11, §13,
//! §14.4), against an in-process Source or hand-built hostile packages, served on loopback.

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use common::*;
use resourcesync_destination::{Mode, Quiet, SyncOptions, SyncReport, sync};
use resourcesync_model::{Capability, DocumentReader, HashAlg, MultiHasher, ReadOptions};
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

fn md5_of(b: &[u8]) -> String {
    let (_, h) = MultiHasher::new(&[HashAlg::Md5])
        .hash_reader(b)
        .expect("hash");
    h.to_string()
}

/// Deterministic incompressible bytes.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The (capability, loc) of every entry of a Capability List.
fn capabilities(path: &Path) -> Vec<(Capability, String)> {
    let bytes = std::fs::read(path).expect("capability list");
    let mut r = DocumentReader::new(bytes.as_slice(), ReadOptions::named("cap")).expect("read");
    let mut out = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        let c =
            e.md.as_ref()
                .and_then(|m| m.capability.clone())
                .expect("capability");
        out.push((c, e.loc));
    }
    out
}

fn loc_of(caps: &[(Capability, String)], c: &Capability) -> String {
    caps.iter()
        .find(|(k, _)| k == c)
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("no {c} in the Capability List"))
}

/// Publishes, leaving out `hostile/` (patches served beside the resources).
fn publish_plain(root: &Path, base: &str) {
    publish_with(root, base, |c| c.excludes = vec!["/hostile/".into()]);
}

fn publish_dumps(root: &Path, base: &str) {
    publish_with(root, base, |c| c.publish.dumps = true);
}

fn has_warning(r: &SyncReport, what: &str) -> bool {
    r.warnings.iter().any(|w| w.contains(what))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_from_the_resource_dump_fetches_no_resource() {
    let src = tmp();
    let big = noise(300_000, 7);
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("sub/b c.txt", b"bravo with a space"),
            ("data.json", br#"{"k":1}"#),
            ("naive/caf\u{e9}.txt", b"unicode name"),
            ("big.bin", &big),
        ],
    );
    // Files of 2001: their <lastmod> is the copies' modification time.
    let then = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for f in source_files(src.path()).keys() {
        std::fs::File::options()
            .write(true)
            .open(src.path().join(f))
            .and_then(|h| h.set_modified(then))
            .expect("touch");
    }
    let server = Server::start(src.path()).await;
    publish_dumps(src.path(), &server.base);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!((r.created, r.failed), (5, 0), "{r:?}");
    assert_eq!((r.packages, r.from_packages), (1, 5), "{r:?}");
    assert_eq!(r.unchanged, 0, "counted once: {r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
    for f in dest_files(&dest).keys() {
        let m = std::fs::metadata(dest.join(f)).and_then(|m| m.modified());
        assert_eq!(m.ok(), Some(then), "{f}: the <lastmod> of its dump entry");
    }
    assert_eq!(server.resource_hits(), 0, "no resource fetched on its own");
    assert_eq!(
        server.hits("/resourcesync/dumps/resourcedump-000001-00001.zip"),
        1
    );
    assert!(r.cursor.is_some());

    // The state is the one a Resource List baseline makes: nothing to do next time.
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (0, 0, 0), "{r:?}");
    assert_eq!(server.resource_hits(), 0);

    // Changes after the dump come from the Change Lists.
    write_tree(
        src.path(),
        &[("a.txt", b"alpha, changed"), ("new.txt", b"new")],
    );
    publish_dumps(src.path(), &server.base);
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (1, 1, 0), "{r:?}");
    assert_eq!(r.packages, 0);
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // --no-dump: every resource on its own.
    let out2 = tmp();
    let dest2 = dest_in(&out2);
    let mut o2 = options(&server.base, &dest2);
    o2.use_dumps = false;
    server.reset_hits();
    let r = run(&o2).await;
    assert_eq!((r.created, r.packages), (6, 0), "{r:?}");
    assert_eq!(server.resource_hits(), 6);
    assert_eq!(dest_files(&dest2), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_older_than_the_resource_list_is_completed_from_the_list() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish_dumps(src.path(), &server.base);
    let cap_path = src.path().join("resourcesync/capabilitylist.xml");
    let cap1 = std::fs::read_to_string(&cap_path).expect("cap");
    let rl1 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    // A second snapshot without dumps: the dump (and its `at`) stay those of the first.
    write_tree(
        src.path(),
        &[("b.txt", b"bravo, changed"), ("d.txt", b"delta")],
    );
    std::fs::remove_file(src.path().join("c.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    let rl2 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    assert_ne!(rl1, rl2);
    std::fs::write(&cap_path, cap1.replace(&rl1, &rl2)).expect("cap");

    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(r.packages, 1);
    // a from the dump; b updated and d created from the list; c removed again.
    assert_eq!(server.resource_hits(), 2, "{r:?}");
    assert_eq!(server.hits("/a.txt"), 0);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_newer_than_the_resource_list_is_followed_by_the_change_lists() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("b.txt", b"bravo")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let cap_path = src.path().join("resourcesync/capabilitylist.xml");
    let rl1 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    // Snapshot times are kept to the second: date the first list back, so that it is older
    // than the dump made in the same second.
    let rl1_path = src
        .path()
        .join(rl1.strip_prefix(&server.base).expect("under base"));
    let text = std::fs::read_to_string(&rl1_path).expect("rl1");
    let mut dated = String::new();
    let mut rest = text.as_str();
    for attr in [" at=\"", " completed=\""] {
        let i = rest.find(attr).expect("attribute") + attr.len();
        let j = i + rest[i..].find('"').expect("end");
        dated.push_str(&rest[..i]);
        dated.push_str("2000-01-01T00:00:00Z");
        rest = &rest[j..];
    }
    dated.push_str(rest);
    std::fs::write(&rl1_path, dated).expect("rl1");
    write_tree(
        src.path(),
        &[("b.txt", b"bravo, changed"), ("c.txt", b"charlie")],
    );
    publish_dumps(src.path(), &server.base);
    let cap2 = std::fs::read_to_string(&cap_path).expect("cap");
    let rl2 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    // The Capability List points at the first (older) Resource List.
    std::fs::write(&cap_path, cap2.replace(&rl2, &rl1)).expect("cap");

    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(has_warning(&r, "older than the Resource Dump"), "{r:?}");
    assert_eq!(server.resource_hits(), 0, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_dumps_are_applied_before_the_change_lists() {
    // (A package whose period spans the cursor: `packages_are_chosen_by_the_end_of_their_period`
    // in src/dump.rs; here the cursor and the periods' starts fall within one second.)
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start(src.path()).await;
    // Two changes per Change List: the third change closes the first period.
    publish_rotating(src.path(), &server.base, 2);
    let out = tmp();
    let (dest, dest2) = (out.path().join("d1"), out.path().join("d2"));
    let mut o = options(&server.base, &dest);
    o.prefer_dumps = true;
    o.delete = true;
    let mut o2 = options(&server.base, &dest2);
    o2.delete = true;
    run(&o).await;
    run(&o2).await;

    write_tree(
        src.path(),
        &[("a.txt", b"alpha, changed"), ("d.txt", b"delta")],
    );
    std::fs::remove_file(src.path().join("b.txt")).expect("rm");
    publish_rotating(src.path(), &server.base, 2);
    let cd = std::fs::read_to_string(src.path().join("resourcesync/changedump.xml"))
        .expect("change dump");
    assert!(
        cd.contains(".zip</loc>"),
        "a closed period was dumped: {cd}"
    );

    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.packages >= 1 && r.from_packages >= 1, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
    let with_dumps = server.resource_hits();
    assert_eq!(
        (r.created, r.updated, r.deleted),
        (1, 1, 1),
        "each change counted once: {r:?}"
    );

    // The same changes without --prefer-dumps: every created or updated resource fetched.
    server.reset_hits();
    let r = run(&o2).await;
    assert_eq!((r.created, r.updated, r.deleted, r.packages), (1, 1, 1, 0));
    assert_eq!(server.resource_hits(), 2);
    assert!(with_dumps < 2, "the package saved requests ({with_dumps})");
    assert_eq!(dest_files(&dest2), source_files(src.path()));
}

// ---------------------------------------------------------------------------------------------
// Hostile packages, built by hand.

const T: &str = "2024-01-01T00:00:00Z";

fn cap_doc(b: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:md capability=\"capabilitylist\"/>\n\
         <url><loc>{b}hostile/rl.xml</loc><rs:md capability=\"resourcelist\"/></url>\n\
         <url><loc>{b}hostile/rd.xml</loc><rs:md capability=\"resourcedump\"/></url>\n</urlset>\n"
    )
}

fn rl_doc(b: &str, files: &[(&str, &[u8])]) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:ln rel=\"up\" href=\"{b}hostile/cap.xml\"/>\n\
         <rs:md capability=\"resourcelist\" at=\"{T}\"/>\n"
    );
    for (rel, bytes) in files {
        s.push_str(&format!(
            "<url><loc>{b}{rel}</loc><rs:md length=\"{}\" hash=\"{}\"/></url>\n",
            bytes.len(),
            md5_of(bytes)
        ));
    }
    s.push_str("</urlset>\n");
    s
}

fn rd_doc(b: &str, length: u64, hash: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:ln rel=\"up\" href=\"{b}hostile/cap.xml\"/>\n\
         <rs:md capability=\"resourcedump\" at=\"{T}\"/>\n\
         <url><loc>{b}hostile/p.zip</loc><rs:md type=\"application/zip\" length=\"{length}\" hash=\"{hash}\"/></url>\n</urlset>\n"
    )
}

/// A manifest entry: the resource (relative to the base), its path in the package, and the
/// length and md5 the manifest claims.
struct M<'a> {
    rel: &'a str,
    path: &'a str,
    length: usize,
    md5: String,
}

fn honest<'a>(rel: &'a str, path: &'a str, bytes: &[u8]) -> M<'a> {
    M {
        rel,
        path,
        length: bytes.len(),
        md5: md5_of(bytes),
    }
}

fn manifest_doc(b: &str, entries: &[M<'_>]) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:ln rel=\"up\" href=\"{b}hostile/cap.xml\"/>\n\
         <rs:md capability=\"resourcedump-manifest\" at=\"{T}\"/>\n"
    );
    for m in entries {
        let path = m
            .path
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('"', "&quot;");
        s.push_str(&format!(
            "<url><loc>{b}{}</loc><rs:md length=\"{}\" hash=\"{}\" path=\"{path}\"/></url>\n",
            m.rel, m.length, m.md5
        ));
    }
    s.push_str("</urlset>\n");
    s
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        w.start_file(
            *name,
            SimpleFileOptions::default().compression_method(CompressionMethod::Deflated),
        )
        .expect("start");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish").into_inner()
}

/// Rewrites the uncompressed size of entry `name` (local and central headers) to `size`: headers
/// that lie about how much the entry inflates to.
fn lie_about_size(zip: &mut [u8], name: &str, size: u32) {
    // (signature, offset of the uncompressed size, of the name length, of the name)
    for (sig, size_at, len_at, name_at) in
        [(b"PK\x03\x04", 22, 26, 30), (b"PK\x01\x02", 24, 28, 46)]
    {
        let mut i = 0;
        while i + name_at <= zip.len() {
            if &zip[i..i + 4] == sig {
                let n = usize::from(u16::from_le_bytes([zip[i + len_at], zip[i + len_at + 1]]));
                if zip.get(i + name_at..i + name_at + n) == Some(name.as_bytes()) {
                    zip[i + size_at..i + size_at + 4].copy_from_slice(&size.to_le_bytes());
                }
            }
            i += 1;
        }
    }
}

/// Renames entry `from` to `to` (same length) in the local and central headers.
fn rename_entry(zip: &mut [u8], from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let mut i = 0;
    while i + from.len() <= zip.len() {
        if &zip[i..i + from.len()] == from.as_bytes() {
            zip[i..i + to.len()].copy_from_slice(to.as_bytes());
        }
        i += 1;
    }
}

const A: &[u8] = b"alpha";
const B: &[u8] = b"bravo, the second file";

struct Case {
    name: &'static str,
    /// The ZIP entries besides the manifest, and the manifest's entries.
    package: Vec<u8>,
    /// The Resource Dump's claims about the package: (length delta, md5 override).
    length_delta: i64,
    wrong_hash: bool,
    /// Substring of the expected warning.
    expect: &'static str,
    /// Resources still fetched on their own.
    fetched: u64,
    extra_files: Vec<(&'static str, Vec<u8>)>,
}

fn manifest_zip(b: &str, m: &[M<'_>], entries: &[(&str, &[u8])]) -> Vec<u8> {
    let manifest = manifest_doc(b, m);
    let mut all: Vec<(&str, &[u8])> = entries.to_vec();
    all.push(("manifest.xml", manifest.as_bytes()));
    zip_of(&all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_packages_are_refused_and_nothing_wrong_is_written() {
    // The manifests name resources under the server's base URL, which is only known once the
    // server runs: each case gets its own server and builds its package for it.
    let cases: Vec<(&'static str, &'static str, u64, Build)> = vec![
        ("good package", "", 0, |b| {
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources/a", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("resources/a", A), ("resources/b", B)],
            );
            (z, 0, false, vec![])
        }),
        // Unsafe paths and bombs are refused entry by entry: the refused entry's resource is
        // fetched on its own (the Resource List has it), the others come from the package.
        ("zip slip with dot segments", "dot segment", 1, |b| {
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/../../x", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("../../x", A), ("resources/b", B)],
            );
            (z, 0, false, vec![])
        }),
        ("absolute path", "absolute path", 1, |b| {
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "//etc/x", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("/etc/x", A), ("resources/b", B)],
            );
            (z, 0, false, vec![])
        }),
        ("backslashes", "backslash", 1, |b| {
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources\\..\\..\\x", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("resources\\..\\..\\x", A), ("resources/b", B)],
            );
            (z, 0, false, vec![])
        }),
        // Never read (bitstreams are found by the manifest's paths): said, not refused.
        (
            "entry not in the manifest",
            "not listed in the manifest",
            0,
            |b| {
                let z = manifest_zip(
                    b,
                    &[
                        honest("r/a.txt", "/resources/a", A),
                        honest("r/b.txt", "/resources/b", B),
                    ],
                    &[
                        ("resources/a", A),
                        ("resources/b", B),
                        ("resources/evil", b"evil"),
                    ],
                );
                (z, 0, false, vec![])
            },
        ),
        ("wrong digest in the manifest", "digest", 1, |b| {
            let mut bad = honest("r/b.txt", "/resources/b", B);
            bad.md5 = md5_of(b"not b");
            let z = manifest_zip(
                b,
                &[honest("r/a.txt", "/resources/a", A), bad],
                &[
                    ("resources/a", A),
                    ("resources/b", b"BRAVO, THE SECOND FILE"),
                ],
            );
            (z, 0, false, vec![])
        }),
        (
            "entry longer than its manifest length",
            "longer than",
            1,
            |b| {
                let z = manifest_zip(
                    b,
                    &[
                        honest("r/a.txt", "/resources/a", A),
                        honest("r/b.txt", "/resources/b", B),
                    ],
                    &[("resources/a", A), ("resources/b", &noise(100_000, 3))],
                );
                (z, 0, false, vec![])
            },
        ),
        ("zip bomb with lying headers", "resources/b", 1, |b| {
            let zeros = vec![0u8; 16 << 20];
            let mut z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources/a", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("resources/a", A), ("resources/b", &zeros)],
            );
            // b claims its 22 bytes, and inflates to 16 MiB.
            lie_about_size(&mut z, "resources/b", B.len() as u32);
            (z, 0, false, vec![])
        }),
        ("absurd compression ratio", "ratio", 1, |b| {
            let zeros = vec![0u8; 8 << 20];
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources/a", A),
                    honest("r/b.txt", "/resources/b", B),
                    honest("z.bin", "/resources/z", &zeros),
                ],
                &[
                    ("resources/a", A),
                    ("resources/b", B),
                    ("resources/z", &zeros),
                ],
            );
            (z, 0, false, vec![("z.bin", zeros)])
        }),
        ("package length mismatch", "length", 2, |b| {
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources/a", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("resources/a", A), ("resources/b", B)],
            );
            (z, 1, false, vec![])
        }),
        ("package hash mismatch", "digest", 2, |b| {
            let z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources/a", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[("resources/a", A), ("resources/b", B)],
            );
            (z, 0, true, vec![])
        }),
        ("two entries of one name", "same name", 2, |b| {
            let mut z = manifest_zip(
                b,
                &[
                    honest("r/a.txt", "/resources/a", A),
                    honest("r/b.txt", "/resources/b", B),
                ],
                &[
                    ("resources/a", A),
                    ("resources/b", B),
                    ("resources/c", b"evil!"),
                ],
            );
            rename_entry(&mut z, "resources/c", "resources/a");
            (z, 0, false, vec![])
        }),
        (
            "a manifest of another kind",
            "not a resourcedump-manifest",
            2,
            |b| {
                let manifest = manifest_doc(b, &[honest("r/a.txt", "/resources/a", A)])
                    .replace("resourcedump-manifest", "resourcelist");
                let z = zip_of(&[("resources/a", A), ("manifest.xml", manifest.as_bytes())]);
                (z, 0, false, vec![])
            },
        ),
        ("an invalid manifest", "not valid", 2, |b| {
            // A length that is not a number (Z39.99-2014 §7).
            let manifest = manifest_doc(b, &[honest("r/a.txt", "/resources/a", A)])
                .replace("length=\"5\"", "length=\"five\"");
            let z = zip_of(&[("resources/a", A), ("manifest.xml", manifest.as_bytes())]);
            (z, 0, false, vec![])
        }),
        // What resync 2.0.1 writes: no `at`, no `up` link, paths without a leading slash.
        // Tolerated with a warning: nothing relied on is missing.
        (
            "a manifest as resync writes it",
            "departs from the specification",
            0,
            |b| {
                let manifest = manifest_doc(
                    b,
                    &[
                        honest("r/a.txt", "resources/a", A),
                        honest("r/b.txt", "resources/b", B),
                    ],
                )
                .replace(&format!(" at=\"{T}\""), "")
                .replace(
                    &format!("<rs:ln rel=\"up\" href=\"{b}hostile/cap.xml\"/>"),
                    "",
                );
                let z = zip_of(&[
                    ("manifest.xml", manifest.as_bytes()),
                    ("resources/a", A),
                    ("resources/b", B),
                ]);
                (z, 0, false, vec![])
            },
        ),
        ("not a ZIP", "not a readable ZIP", 2, |_| {
            (b"PK\x03\x04 and then nothing".to_vec(), 0, false, vec![])
        }),
        ("no manifest", "no manifest.xml", 2, |_| {
            (zip_of(&[("resources/a", A)]), 0, false, vec![])
        }),
    ];
    for (name, expect, fetched, build) in cases {
        run_hostile(name, expect, fetched, build).await;
    }
}

type Build = fn(&str) -> (Vec<u8>, i64, bool, Vec<(&'static str, Vec<u8>)>);

/// Starts a server, builds the case's package for its base URL, syncs, and checks the outcome.
async fn run_hostile(name: &'static str, expect: &'static str, fetched: u64, build: Build) {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let (package, length_delta, wrong_hash, extra_files) = build(&server.base);
    run_case_on(
        src,
        server,
        Case {
            name,
            package,
            length_delta,
            wrong_hash,
            expect,
            fetched,
            extra_files,
        },
    )
    .await;
}

async fn run_case_on(src: tempfile::TempDir, server: Server, c: Case) {
    run_case_on_with(src, server, c, Default::default()).await;
}

/// Zip bomb by total size (issue 7): entries that each inflate within the ratio, together past
/// the package's unpacked budget (lowered here to 1 MiB; 16 GiB by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_past_the_unpacked_budget_is_refused() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let (one, two) = (noise(600_000, 1), noise(600_000, 2));
    let package = manifest_zip(
        &server.base,
        &[
            honest("r/a.txt", "/resources/a", A),
            honest("r/b.txt", "/resources/b", B),
            honest("big1.bin", "/resources/big1", &one),
            honest("big2.bin", "/resources/big2", &two),
        ],
        &[
            ("resources/a", A),
            ("resources/b", B),
            ("resources/big1", &one),
            ("resources/big2", &two),
        ],
    );
    let c = Case {
        name: "past the unpacked budget",
        package,
        length_delta: 0,
        wrong_hash: false,
        expect: "more than the 1048576 allowed (a zip bomb?)",
        fetched: 4,
        extra_files: vec![("big1.bin", one.clone()), ("big2.bin", two.clone())],
    };
    let limits = resourcesync_destination::dump::DumpLimits {
        max_unpacked_bytes: 1 << 20,
        ..Default::default()
    };
    run_case_on_with(src, server, c, limits).await;
}

async fn run_case_on_with(
    src: tempfile::TempDir,
    server: Server,
    c: Case,
    limits: resourcesync_destination::dump::DumpLimits,
) {
    let mut files: Vec<(&str, Vec<u8>)> = vec![("r/a.txt", A.to_vec()), ("r/b.txt", B.to_vec())];
    files.extend(c.extra_files.iter().cloned());
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    write_tree(src.path(), &refs);
    let b = server.base.clone();
    let len = (c.package.len() as i64 + c.length_delta) as u64;
    let hash = if c.wrong_hash {
        md5_of(b"something else")
    } else {
        md5_of(&c.package)
    };
    write_tree(
        src.path(),
        &[
            ("hostile/cap.xml", cap_doc(&b).as_bytes()),
            ("hostile/rl.xml", rl_doc(&b, &refs).as_bytes()),
            ("hostile/rd.xml", rd_doc(&b, len, &hash).as_bytes()),
            ("hostile/p.zip", &c.package),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/cap.xml"), &dest);
    o.max_resource_bytes = 1 << 20;
    o.dump_limits = limits;
    let r = run(&o).await;
    let name = c.name;
    eprintln!("{name}: {:?}", r.warnings);
    assert_eq!(r.failed, 0, "{name}: {r:?}");
    if c.expect.is_empty() {
        assert_eq!(r.packages, 1, "{name}: {r:?}");
    } else {
        assert!(
            has_warning(&r, c.expect),
            "{name}: no warning with {:?}: {:#?}",
            c.expect,
            r.warnings
        );
    }
    let mut expected = std::collections::BTreeMap::new();
    for (p, bytes) in &files {
        expected.insert((*p).to_owned(), bytes.clone());
    }
    assert_eq!(dest_files(&dest), expected, "{name}");
    assert_eq!(server.resource_hits(), c.fetched, "{name}: {r:?}");
    let beside: Vec<String> = std::fs::read_dir(out.path())
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["dest"], "{name}: written outside DEST");
    let left = std::fs::read_dir(dest.join(".resourcesync/tmp"))
        .expect("tmp")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("dl-"))
        .count();
    assert_eq!(left, 0, "{name}: temporary files left");
}

/// A package entry that fails its manifest digest in a new directory takes the directories made
/// for it away, unless another entry's copy is in them (Z39.99-2014 §11.2: the manifest's
/// `hash` describes the bitstream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_package_entry_leaves_no_directory_made_for_it() {
    const C: &[u8] = b"charlie";
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let wrong = |rel, path| {
        let mut m = honest(rel, path, B);
        m.md5 = md5_of(b"not b");
        m
    };
    let package = manifest_zip(
        &b,
        &[
            honest("r/a.txt", "/resources/a", A),
            wrong("gone/x/b.txt", "/resources/b1"),
            wrong("kept/y/b.txt", "/resources/b2"),
            honest("kept/y/c.txt", "/resources/c", C),
        ],
        &[
            ("resources/a", A),
            ("resources/b1", B),
            ("resources/b2", B),
            ("resources/c", C),
        ],
    );
    // The two failed entries are listed but not served (404): only the package could have
    // made their directories.
    let listed: Vec<(&str, &[u8])> = vec![
        ("r/a.txt", A),
        ("gone/x/b.txt", B),
        ("kept/y/b.txt", B),
        ("kept/y/c.txt", C),
    ];
    write_tree(
        src.path(),
        &[
            ("r/a.txt", A),
            ("kept/y/c.txt", C),
            ("hostile/cap.xml", cap_doc(&b).as_bytes()),
            ("hostile/rl.xml", rl_doc(&b, &listed).as_bytes()),
            (
                "hostile/rd.xml",
                rd_doc(&b, package.len() as u64, &md5_of(&package)).as_bytes(),
            ),
            ("hostile/p.zip", &package),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/cap.xml"), &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!((r.packages, r.failed), (1, 2), "{r:?}");
    assert!(has_warning(&r, "digest"), "{:#?}", r.warnings);
    let expected: std::collections::BTreeMap<String, Vec<u8>> = [
        ("kept/y/c.txt".to_owned(), C.to_vec()),
        ("r/a.txt".to_owned(), A.to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
    assert_eq!(dest_dirs(&dest), ["kept", "kept/y", "r"]);
    assert_eq!(
        server.resource_hits(),
        2,
        "only the two failed entries fetched"
    );
}

// ---------------------------------------------------------------------------------------------
// Patch links (Z39.99-2014 §14.4).

/// Adds a patch link to the `<url>` of `loc` in the Change List that has it as `updated`.
fn add_patch_link(root: &Path, loc: &str, href: &str, mime: &str) {
    let dir = root.join("resourcesync/changelists");
    let mut done = false;
    for e in std::fs::read_dir(&dir).expect("changelists") {
        let p = e.expect("entry").path();
        let text = std::fs::read_to_string(&p).expect("read");
        if !text.contains("capability=\"changelist\"") {
            continue;
        }
        let needle = format!("<loc>{loc}</loc>");
        // The last occurrence: the latest change of the resource.
        let Some(at) = text.rfind(&needle) else {
            continue;
        };
        let end = at + text[at..].find("</url>").expect("end of url");
        let link = format!(
            "<rs:ln rel=\"http://www.openarchives.org/rs/terms/patch\" href=\"{href}\" type=\"{mime}\"/>"
        );
        let patched = format!("{}{link}{}", &text[..end], &text[end..]);
        std::fs::write(&p, patched).expect("write");
        done = true;
    }
    assert!(done, "no Change List lists {loc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patches_are_applied_and_wrong_ones_fall_back_to_a_full_fetch() {
    let src = tmp();
    let v1 = b"{\n  \"name\": \"resource\",\n  \"n\": 1,\n  \"list\": [\n    1,\n    2\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v1), ("other.txt", b"other")]);
    let server = Server::start(src.path()).await;
    publish_plain(src.path(), &server.base);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    run(&o).await;
    let loc = format!("{}data.json", server.base);

    // 1. A JSON Patch that yields exactly the new version: applied, the resource not fetched.
    let v2 = b"{\n  \"name\": \"resource\",\n  \"n\": 2,\n  \"list\": [\n    1,\n    2,\n    3\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v2)]);
    publish_plain(src.path(), &server.base);
    write_tree(
        src.path(),
        &[(
            "hostile/p1.json",
            br#"[{"op":"replace","path":"/n","value":2},{"op":"add","path":"/list/-","value":3}]"#,
        )],
    );
    let href = format!("{}hostile/p1.json", server.base);
    add_patch_link(src.path(), &loc, &href, "application/json-patch+json");
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.updated, r.patched, r.failed), (1, 1, 0), "{r:?}");
    assert_eq!(server.hits("/data.json"), 0, "patched, not fetched");
    assert_eq!(server.hits("/hostile/p1.json"), 1);
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v2);

    // 2. A patch whose result does not match the published digest: fetched whole.
    let v3 = b"{\n  \"name\": \"resource\",\n  \"n\": 3,\n  \"list\": [\n    1,\n    2,\n    3\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v3)]);
    publish_plain(src.path(), &server.base);
    write_tree(
        src.path(),
        &[(
            "hostile/p2.json",
            br#"[{"op":"replace","path":"/n","value":99}]"#,
        )],
    );
    add_patch_link(
        src.path(),
        &loc,
        &format!("{}hostile/p2.json", server.base),
        "application/json-patch+json",
    );
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.updated, r.patched, r.failed), (1, 0, 0), "{r:?}");
    assert_eq!(server.hits("/data.json"), 1, "fetched whole");
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v3);

    // 3. A patch that does not apply (a failed test operation), and 4. one of a type that is not
    // JSON Patch: fetched whole.
    for (i, (patch, mime)) in [
        (
            br#"[{"op":"test","path":"/n","value":42}]"#.as_slice(),
            "application/json-patch+json",
        ),
        (b"binary diff".as_slice(), "application/x-tiff-diff"),
    ]
    .into_iter()
    .enumerate()
    {
        let v = format!("{{\"n\": {}}}\n", 10 + i);
        write_tree(src.path(), &[("data.json", v.as_bytes())]);
        publish_plain(src.path(), &server.base);
        let name = format!("hostile/p{}.json", 3 + i);
        write_tree(src.path(), &[(name.as_str(), patch)]);
        add_patch_link(src.path(), &loc, &format!("{}{name}", server.base), mime);
        server.reset_hits();
        let r = run(&o).await;
        assert_eq!((r.updated, r.patched, r.failed), (1, 0, 0), "{r:?}");
        assert_eq!(server.hits("/data.json"), 1, "fetched whole");
        assert_eq!(
            std::fs::read(dest.join("data.json")).expect("copy"),
            v.as_bytes()
        );
    }

    // 5. A copy changed by hand is not the version the patch applies to: fetched whole.
    let v5 = b"{\n  \"name\": \"resource\",\n  \"n\": 5\n}\n";
    write_tree(src.path(), &[("data.json", v5)]);
    publish_plain(src.path(), &server.base);
    write_tree(
        src.path(),
        &[(
            "hostile/p5.json",
            br#"[{"op":"add","path":"/name","value":"resource"},{"op":"replace","path":"/n","value":5}]"#,
        )],
    );
    add_patch_link(
        src.path(),
        &loc,
        &format!("{}hostile/p5.json", server.base),
        "application/json-patch+json",
    );
    std::fs::write(dest.join("data.json"), b"{\"n\": 12}\n").expect("tamper");
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.updated, r.patched, r.failed), (1, 0, 0), "{r:?}");
    assert_eq!(
        server.hits("/hostile/p5.json"),
        0,
        "the copy was checked first"
    );
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v5);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// Rewrites the Change Dump package whose manifest lists `loc` as `updated`: its bitstream is
/// replaced by a JSON Patch named by a patch link with a `path` (Z39.99-2014 §14.4), and the
/// Change Dump's `length` and `hash` of the package follow.
fn ship_as_patch(root: &Path, loc: &str, patch: &[u8]) {
    let cd_path = root.join("resourcesync/changedump.xml");
    let mut cd = std::fs::read_to_string(&cd_path).expect("change dump");
    let mut done = false;
    let mut zips: Vec<std::path::PathBuf> = Vec::new();
    let mut stack = vec![root.join("resourcesync")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip") {
                zips.push(p);
            }
        }
    }
    for z in zips {
        let old = std::fs::read(&z).expect("zip");
        let mut a = zip::ZipArchive::new(std::io::Cursor::new(old.clone())).expect("open");
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..a.len() {
            let mut f = a.by_index(i).expect("entry");
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut b).expect("read");
            entries.push((f.name().expect("name").into_owned(), b));
        }
        let Some(mi) = entries.iter().position(|(n, _)| n == "manifest.xml") else {
            continue;
        };
        let manifest = String::from_utf8(entries[mi].1.clone()).expect("utf-8");
        let needle = format!("<loc>{loc}</loc>");
        let Some(at) = manifest.find(&needle) else {
            continue;
        };
        let start = manifest[..at].rfind("<url>").expect("url");
        let end = at + manifest[at..].find("</url>").expect("end");
        let block = &manifest[start..end];
        if !block.contains("change=\"updated\"") {
            continue;
        }
        let path_at = block.find(" path=\"").expect("path") + 7;
        let path_end = path_at + block[path_at..].find('"').expect("quote");
        let bitstream = block[path_at..path_end].trim_start_matches('/').to_owned();
        let link = format!(
            "<rs:ln rel=\"http://www.openarchives.org/rs/terms/patch\" href=\"{loc}.patch\" \
             type=\"application/json-patch+json\" length=\"{}\" hash=\"md5:{}\" path=\"/patches/p1.json\"/>",
            patch.len(),
            md5_of(patch).trim_start_matches("md5:")
        );
        // No path on the entry itself: the patch is all the package carries for it.
        let new_block = format!("{}{}{link}", &block[..path_at - 7], &block[path_end + 1..]);
        let manifest = format!("{}{new_block}{}", &manifest[..start], &manifest[end..]);
        entries.retain(|(n, _)| n != &bitstream && n != "manifest.xml");
        entries.push(("patches/p1.json".into(), patch.to_vec()));
        entries.push(("manifest.xml".into(), manifest.into_bytes()));
        let refs: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let new = zip_of(&refs);
        std::fs::write(&z, &new).expect("write zip");
        let name = z.file_name().expect("name").to_string_lossy().into_owned();
        let (old_len, new_len) = (
            format!("length=\"{}\"", old.len()),
            format!("length=\"{}\"", new.len()),
        );
        let digest = |b: &[u8], alg: HashAlg| {
            MultiHasher::new(&[alg])
                .hash_reader(b)
                .expect("hash")
                .1
                .to_string()
        };
        let at = cd
            .find(&format!("{name}</loc>"))
            .expect("package in the change dump");
        let end = at + cd[at..].find("</url>").expect("end");
        let mut entry = cd[at..end].replace(&old_len, &new_len);
        for alg in [HashAlg::Md5, HashAlg::Sha1, HashAlg::Sha256] {
            entry = entry.replace(&digest(&old, alg.clone()), &digest(&new, alg));
        }
        assert!(
            entry.contains(&new_len),
            "the package's length rewritten: {entry}"
        );
        cd = format!("{}{entry}{}", &cd[..at], &cd[end..]);
        done = true;
    }
    assert!(done, "no Change Dump package updates {loc}");
    std::fs::write(&cd_path, cd).expect("write change dump");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_inside_a_change_dump_package_is_applied_to_the_copy() {
    let src = tmp();
    let v1 = b"{\n  \"n\": 1,\n  \"list\": [\n    1\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v1), ("other.txt", b"other")]);
    let server = Server::start(src.path()).await;
    publish_rotating(src.path(), &server.base, 1);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.prefer_dumps = true;
    run(&o).await;

    let v2 = b"{\n  \"n\": 2,\n  \"list\": [\n    1,\n    2\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v2)]);
    publish_rotating(src.path(), &server.base, 1);
    // A second change closes the period of the first, which gets its package.
    write_tree(src.path(), &[("other.txt", b"other, changed")]);
    publish_rotating(src.path(), &server.base, 1);
    let loc = format!("{}data.json", server.base);
    ship_as_patch(
        src.path(),
        &loc,
        br#"[{"op":"replace","path":"/n","value":2},{"op":"add","path":"/list/-","value":2}]"#,
    );
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.from_packages >= 1, "{r:?}");
    assert!(
        !has_warning(&r, "data.json"),
        "the patch was applied: {:?}",
        r.warnings
    );
    assert_eq!(
        server.hits("/data.json"),
        0,
        "patched from the package, not fetched"
    );
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v2);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}
