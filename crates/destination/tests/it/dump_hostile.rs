//! Hand-built hostile dump packages (Z39.99-2014 §11, §13) served on loopback: every one is
//! refused, and nothing wrong is written under DEST.

use crate::common;
use crate::dump_support;

use common::*;
use dump_support::*;

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
    let cases = [path_cases(), content_cases(), package_cases()].concat();
    for (name, expect, fetched, build) in cases {
        run_hostile(name, expect, fetched, build).await;
    }
}

/// A case: its name, what its warning or error says, the resources then fetched on their own,
/// and how its package is built.
type HostileCase = (&'static str, &'static str, u64, Build);

/// Entry paths: an honest package, then paths that would leave the destination.
fn path_cases() -> Vec<HostileCase> {
    vec![
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
    ]
}

/// Entry contents against the manifest: digests, lengths, bombs.
fn content_cases() -> Vec<HostileCase> {
    vec![
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
    ]
}

/// Whole packages: their length and digest, duplicate names, manifests of another kind or
/// none, not a ZIP.
fn package_cases() -> Vec<HostileCase> {
    vec![
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
    ]
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

/// Zip bomb by total size: entries that each inflate within the ratio, together past
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
