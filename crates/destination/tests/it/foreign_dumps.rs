//! The Destination against a Source that offers dumps and no list (Z39.99-2017 §5.2), written
//! by hand and served by a plain static server: baseline from the Resource Dump, incremental
//! from the Change Dump, audit against the manifests; packages with unsafe entries among safe
//! ones, refused entry by entry; a Capability List with nothing to sync from.

use crate::common;
use crate::hand;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use hand::*;
use resourcesync_destination::{AuditOptions, Error, Mode, SyncOptions, SyncReport, audit, sync};

async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Recorder::default())).await.expect("sync")
}

/// A Source with a Resource Dump and a Change Dump and no list: baseline from the dump,
/// incremental from the Change Dump, audit against the manifests (Z39.99-2017 §5.2). Nothing is
/// served at the resources' URIs: everything comes from the packages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_with_dumps_only_baseline_incremental_and_audit() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    let (a, bb, c) = (
        b"alpha".as_slice(),
        b"bravo".as_slice(),
        b"charlie".as_slice(),
    );
    let p1 = package(
        &cap,
        &format!("capability=\"resourcedump-manifest\" at=\"{T1}\""),
        &[
            (format!("{b}a.txt"), "/resources/a", a, ""),
            (format!("{b}b.txt"), "/resources/b", bb, ""),
            (format!("{b}sub/c.txt"), "/resources/c", c, ""),
        ],
    );
    let rd = dump_doc(
        &cap,
        &format!("capability=\"resourcedump\" at=\"{T1}\""),
        &[(format!("{b}resourcesync/p1.zip"), &p1, "")],
    );
    let no_changes = dump_doc(
        &cap,
        &format!("capability=\"changedump\" from=\"{T1}\""),
        &[],
    );
    write_tree(
        src.path(),
        &[
            (
                "resourcesync/cap.xml",
                capability_list(&[
                    ("resourcedump", format!("{b}resourcesync/rd.xml")),
                    ("changedump", format!("{b}resourcesync/cd.xml")),
                ])
                .as_bytes(),
            ),
            ("resourcesync/rd.xml", rd.as_bytes()),
            ("resourcesync/p1.zip", &p1),
            ("resourcesync/cd.xml", no_changes.as_bytes()),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.delete = true;
    let files = |list: &[(&str, &[u8])]| -> BTreeMap<String, Vec<u8>> {
        list.iter()
            .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
            .collect()
    };
    let audit_now = || async {
        let mut a = AuditOptions::new(&cap, &dest);
        a.http.retries = 0;
        audit(&a, Arc::new(Recorder::default()))
            .await
            .expect("audit")
    };

    // Baseline from the Resource Dump alone.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!((r.created, r.failed, r.packages), (3, 0, 1), "{r:?}");
    assert_eq!(r.cursor.as_deref(), Some(T1), "the dump's at");
    assert_eq!(
        dest_files(&dest),
        files(&[("a.txt", a), ("b.txt", bb), ("sub/c.txt", c)])
    );
    assert_eq!(server.resource_hits(), 0, "nothing fetched on its own");
    let a1 = audit_now().await;
    assert!(a1.in_sync, "{a1:?}");
    assert_eq!((a1.resources, a1.in_sync_count), (3, 3), "{a1:?}");

    // Changes, in a Change Dump package: b updated, d created, a deleted.
    let (b2, d) = (b"bravo, second".as_slice(), b"delta".as_slice());
    let c1 = change_package(&cap, &b, b2, d);
    let cd = dump_doc(
        &cap,
        &format!("capability=\"changedump\" from=\"{T1}\""),
        &[(
            format!("{b}resourcesync/c1.zip"),
            &c1,
            &format!("from=\"{T1}\" until=\"{T2}\""),
        )],
    );
    write_tree(
        src.path(),
        &[
            ("resourcesync/c1.zip", &c1),
            ("resourcesync/cd.xml", cd.as_bytes()),
        ],
    );
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (1, 1, 1, 0),
        "{r:?}"
    );
    assert_eq!(r.cursor.as_deref(), Some("2024-01-01T12:00:00Z"), "{r:?}");
    let now = files(&[("b.txt", b2), ("d.txt", d), ("sub/c.txt", c)]);
    assert_eq!(dest_files(&dest), now);
    assert_eq!(server.resource_hits(), 0);

    // Nothing new.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (0, 0, 0, 0),
        "{r:?}"
    );

    // The audit compiles the Resource Dump's manifests and the Change Dump's after its `at`.
    let a2 = audit_now().await;
    assert!(a2.in_sync, "{a2:?}");
    assert_eq!(a2.resources, 3, "{a2:?}");
    std::fs::write(dest.join("d.txt"), b"DELTA").expect("tamper");
    std::fs::write(dest.join("a.txt"), b"alpha").expect("an extra file");
    let a3 = audit_now().await;
    assert!(!a3.in_sync);
    assert_eq!(
        (a3.different_count, a3.extra_count, a3.missing_count),
        (1, 1, 0),
        "{a3:?}"
    );
}

/// A Change Dump package (Z39.99-2014 §13): b updated, d created, and a deleted, the deletion
/// added to the manifest by hand (a delete has no bitstream, §13.2).
fn change_package(cap: &str, b: &str, b2: &[u8], d: &[u8]) -> Vec<u8> {
    let c1 = package(
        cap,
        &format!("capability=\"changedump-manifest\" from=\"{T1}\" until=\"{T2}\""),
        &[
            (
                format!("{b}b.txt"),
                "/changes/b",
                b2,
                "change=\"updated\" datetime=\"2024-01-01T10:00:00Z\"",
            ),
            (
                format!("{b}d.txt"),
                "/changes/d",
                d,
                "change=\"created\" datetime=\"2024-01-01T11:00:00Z\"",
            ),
        ],
    );
    // A delete has no bitstream (Z39.99-2014 §13.2): added to the manifest by hand.
    {
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(c1)).expect("zip");
        let mut m = String::new();
        std::io::Read::read_to_string(&mut z.by_name("manifest.xml").expect("manifest"), &mut m)
            .expect("read");
        let m = m.replace(
            "</urlset>",
            &format!(
                "<url><loc>{b}a.txt</loc><rs:md change=\"deleted\" datetime=\"2024-01-01T12:00:00Z\"/></url>\n</urlset>"
            ),
        );
        zip_of(&[
            ("changes/b", b2),
            ("changes/d", d),
            ("manifest.xml", m.as_bytes()),
        ])
    }
}

/// A package of a Source that offers only a Resource Dump, holding unsafe entries (a ZIP slip
/// with `..`, an absolute path, backslashes, a zip bomb) among safe ones: each unsafe entry is
/// refused with an error naming the package, the entry and the rule; the safe ones are
/// extracted and verified; nothing is written outside DEST. The refused ones are kept as
/// pending: the next run fetches them from their URIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_package_entries_are_refused_one_by_one_and_the_safe_ones_kept() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    let zeros = vec![0u8; 8 << 20];
    let p1 = package(
        &cap,
        &format!("capability=\"resourcedump-manifest\" at=\"{T1}\""),
        &[
            (format!("{b}r/a.txt"), "/resources/a", b"alpha", ""),
            (format!("{b}r/slip.txt"), "/../../slip", b"slip", ""),
            (format!("{b}r/abs.txt"), "//tmp/abs", b"abs", ""),
            (
                format!("{b}r/bs.txt"),
                "/resources\\..\\..\\bs",
                b"backslash",
                "",
            ),
            (format!("{b}r/z.bin"), "/resources/z", &zeros, ""),
            (format!("{b}sub/b.txt"), "/resources/b", b"bravo", ""),
        ],
    );
    let rd = dump_doc(
        &cap,
        &format!("capability=\"resourcedump\" at=\"{T1}\""),
        &[(format!("{b}resourcesync/p1.zip"), &p1, "")],
    );
    write_tree(
        src.path(),
        &[
            (
                "resourcesync/cap.xml",
                capability_list(&[("resourcedump", format!("{b}resourcesync/rd.xml"))]).as_bytes(),
            ),
            ("resourcesync/rd.xml", rd.as_bytes()),
            ("resourcesync/p1.zip", &p1),
            // One refused resource is served at its URI.
            ("r/slip.txt", b"slip"),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!((r.created, r.failed), (2, 4), "{r:?}");
    let pkg = format!("{b}resourcesync/p1.zip");
    for (loc, rule) in [
        ("r/slip.txt", "dot segment"),
        ("r/abs.txt", "absolute path"),
        ("r/bs.txt", "backslash"),
        ("r/z.bin", "zip bomb"),
    ] {
        let f = r
            .failures
            .iter()
            .find(|f| f.uri == format!("{b}{loc}"))
            .unwrap_or_else(|| panic!("no failure for {loc}: {:#?}", r.failures));
        assert!(
            f.error.contains(&pkg)
                && f.error.contains("manifest.xml line ")
                && f.error.contains(rule),
            "{loc}: {}",
            f.error
        );
    }
    let expected: BTreeMap<String, Vec<u8>> = [
        ("r/a.txt".to_owned(), b"alpha".to_vec()),
        ("sub/b.txt".to_owned(), b"bravo".to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
    let beside: Vec<String> = std::fs::read_dir(out.path())
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["dest"], "written outside DEST");
    assert_eq!(server.resource_hits(), 0);

    // The next run (the same dump) tries the refused ones again, from their URIs.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.failed), (1, 3), "{r:?}");
    assert_eq!(server.hits("/r/slip.txt"), 1);
    assert_eq!(
        std::fs::read(dest.join("r/slip.txt")).expect("fetched"),
        b"slip"
    );
}

/// A Capability List that offers nothing a Destination can sync from: a clear error naming the
/// Capability List and what it offers, before anything is created under DEST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_list_with_nothing_to_sync_from_is_a_clear_error() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    write_tree(
        src.path(),
        &[(
            "resourcesync/cap.xml",
            capability_list(&[
                ("resourcelist-archive", format!("{b}resourcesync/rla.xml")),
                ("changelist-archive", format!("{b}resourcesync/cla.xml")),
            ])
            .as_bytes(),
        )],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let e = sync(&options(&cap, &dest), Arc::new(Recorder::default()))
        .await
        .expect_err("nothing to sync from");
    assert!(matches!(e, Error::BadDocument { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with(&cap), "{msg}");
    assert!(
        msg.contains("offers nothing") && msg.contains("resourcelist-archive, changelist-archive"),
        "{msg}"
    );
    assert!(!dest.exists(), "nothing created under DEST");
    let mut a = AuditOptions::new(&cap, out.path());
    a.http.retries = 0;
    let e = audit(&a, Arc::new(Recorder::default()))
        .await
        .expect_err("nothing to audit against");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&cap) && msg.contains("resourcelist-archive"),
        "{msg}"
    );
}

/// A Source with a Resource Dump alone, which publishes a newer one without a resource: the run
/// is a baseline diff from the dump, and the copy of the resource the dump no longer has is a
/// delete (removed with `--delete`), those it still has are left alone (crate::march).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_resource_dump_without_a_resource_deletes_its_copy() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    let (a, bb, c) = (
        b"alpha".as_slice(),
        b"bravo".as_slice(),
        b"charlie".as_slice(),
    );
    let publish_dump = |at: &str, entries: &[(String, &str, &[u8], &str)]| {
        let p = package(
            &cap,
            &format!("capability=\"resourcedump-manifest\" at=\"{at}\""),
            entries,
        );
        let rd = dump_doc(
            &cap,
            &format!("capability=\"resourcedump\" at=\"{at}\""),
            &[(format!("{b}resourcesync/p.zip"), &p, "")],
        );
        write_tree(
            src.path(),
            &[
                (
                    "resourcesync/cap.xml",
                    capability_list(&[("resourcedump", format!("{b}resourcesync/rd.xml"))])
                        .as_bytes(),
                ),
                ("resourcesync/rd.xml", rd.as_bytes()),
                ("resourcesync/p.zip", &p),
            ],
        );
    };
    let entry = |name: &str, path: &'static str, body: &'static [u8]| {
        (format!("{b}{name}"), path, body, "")
    };
    publish_dump(
        T1,
        &[
            entry("a.txt", "/resources/a", a),
            entry("b.txt", "/resources/b", bb),
            entry("c.txt", "/resources/c", c),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(
        (r.mode, r.created, r.failed),
        (Mode::Baseline, 3, 0),
        "{r:?}"
    );
    assert_eq!(dest_files(&dest).len(), 3);

    publish_dump(
        T2,
        &[
            entry("a.txt", "/resources/a", a),
            entry("b.txt", "/resources/b", bb),
        ],
    );
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    assert_eq!((r.deleted, r.failed), (1, 0), "{r:?}");
    let left: Vec<(String, Vec<u8>)> = dest_files(&dest).into_iter().collect();
    assert_eq!(
        left,
        [
            ("a.txt".to_owned(), a.to_vec()),
            ("b.txt".to_owned(), bb.to_vec())
        ]
    );
}
