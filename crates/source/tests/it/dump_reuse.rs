//! A Resource Dump of a new snapshot carries over the previous dump's packages whose every
//! entry is unchanged (Z39.99-2014 §11.1: a package's own `at`/`completed`), and rewrites only
//! the packages of the ranges where a resource was changed, added or removed.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use resourcesync_model::Entry;
use resourcesync_source::Source;
use resourcesync_source::dump::{DumpOptions, resource_dump_package_name};

use crate::dump::{
    assert_all_valid, check_package, config, dump_with, read, rels, resource_dump, url_to_doc,
    write,
};

/// Three files per package.
const OPTS: DumpOptions = DumpOptions {
    max_bytes: 1 << 30,
    max_files: 3,
    // A new Resource Dump for every snapshot: these tests are about what it reuses.
    rebuild_after: 0,
};

/// What tells that a file was not written again: inode, modification time, bytes.
type Stamp = (u64, i64, i64, Vec<u8>);

fn stamp(p: &Path) -> Stamp {
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        std::fs::read(p).expect("read"),
    )
}

/// The packages the Resource Dump lists: their files (package and manifest copy) by package
/// name, checked against the Source (every bitstream byte-identical, every digest right).
fn listed(out: &Path, src: &Path) -> (BTreeMap<String, Entry>, BTreeSet<PathBuf>) {
    let (_, packages) = resource_dump(out);
    let mut by_name = BTreeMap::new();
    let mut resources = BTreeSet::new();
    for p in packages {
        let (_, manifest) = check_package(out, Some(src), &p);
        resources.extend(rels(&manifest));
        let name = url_to_doc(out, &p.loc)
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name")
            .to_owned();
        by_name.insert(name, p);
    }
    assert_all_valid(out);
    (by_name, resources)
}

fn source_files(src: &Path) -> BTreeSet<PathBuf> {
    let mut v = BTreeSet::new();
    for d in ["a", "b", "c", "d"] {
        let Ok(rd) = std::fs::read_dir(src.join(d)) else {
            continue;
        };
        for e in rd.flatten() {
            v.insert(Path::new(d).join(e.file_name()));
        }
    }
    for e in std::fs::read_dir(src).expect("src").flatten() {
        if e.path().is_file() {
            v.insert(PathBuf::from(e.file_name()));
        }
    }
    v
}

/// Nine files in a/, b/ and c/: three packages of three, one per folder.
fn tree(src: &Path) {
    for d in ["a", "b", "c"] {
        for i in 1..=3 {
            write(src, &format!("{d}/{i}.txt"), format!("{d} {i}").repeat(300));
        }
    }
}

fn package_file(s: &Source, snapshot: i64, n: usize) -> PathBuf {
    s.layout()
        .doc_path(&resource_dump_package_name(snapshot, n))
}

#[test]
fn one_change_rewrites_only_the_package_holding_it() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    tree(dir.path());
    let mut s = Source::open(config(dir.path(), out.path())).expect("open");
    s.scan().expect("scan");
    let first = dump_with(&s, OPTS);
    assert_eq!((first.packages, first.reused, first.files), (3, 0, 9));
    let (_, first_at) = dump_times(out.path());
    let stamps: Vec<Stamp> = (1..=3)
        .flat_map(|n| {
            let p = package_file(&s, 1, n);
            let copy = p.with_extension("manifest.xml");
            [stamp(&p), stamp(&copy)]
        })
        .collect();

    write(dir.path(), "b/2.txt", "b 2, changed");
    s.scan().expect("scan");
    let second = dump_with(&s, OPTS);
    assert_eq!(
        (second.packages, second.reused, second.files),
        (1, 2, 3),
        "{second:?}"
    );
    // b/1 and b/3 copied from the previous package of b/ as they were, b/2 from the Source.
    assert_eq!(second.carried, 2, "{second:?}");
    // The packages of a/ and c/ and their manifest copies were not written again.
    for (i, n) in [(0, 1), (2, 3)] {
        let p = package_file(&s, 1, n);
        assert_eq!(stamp(&p), stamps[2 * i], "{}", p.display());
        let copy = p.with_extension("manifest.xml");
        assert_eq!(stamp(&copy), stamps[2 * i + 1], "{}", copy.display());
    }
    // The new dump lists them with the new package of b/, in URI order; the carried-over ones
    // keep their own at (their manifest's, Z39.99-2014 §11.1), the new one has the new
    // snapshot's.
    let (names, resources) = listed(out.path(), dir.path());
    let new_b = "resourcedump-000002-00001.zip";
    assert_eq!(
        names.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "resourcedump-000001-00001.zip",
            "resourcedump-000001-00003.zip",
            new_b
        ]
    );
    let (_, packages) = resource_dump(out.path());
    let order: Vec<&str> = packages
        .iter()
        .map(|p| p.loc.rsplit('/').next().expect("name"))
        .collect();
    assert_eq!(
        order,
        [
            "resourcedump-000001-00001.zip",
            new_b,
            "resourcedump-000001-00003.zip"
        ]
    );
    let (doc_at, _) = dump_times(out.path());
    let at = |name: &str| names[name].md.as_ref().and_then(|m| m.at);
    assert_eq!(at("resourcedump-000001-00001.zip"), Some(first_at));
    assert_eq!(at(new_b), Some(doc_at));
    assert_eq!(resources, source_files(dir.path()));

    // Nothing changed: nothing is written.
    s.scan().expect("scan");
    let third = dump_with(&s, OPTS);
    assert!(third.packages == 0 && third.written.is_empty(), "{third:?}");
    assert_eq!(listed(out.path(), dir.path()).1, source_files(dir.path()));
}

/// The `at` of the Resource Dump document and of its first package.
fn dump_times(
    out: &Path,
) -> (
    resourcesync_model::W3cDateTime,
    resourcesync_model::W3cDateTime,
) {
    let (h, packages) = read(&out.join("resourcesync/resourcedump.xml"));
    let doc = h.md.as_ref().and_then(|m| m.at).expect("at");
    let first = packages[0].md.as_ref().and_then(|m| m.at).expect("at");
    (doc, first)
}

#[test]
fn added_and_deleted_resources_rewrite_their_ranges_only() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    tree(dir.path());
    write(dir.path(), "d/1.txt", "d 1");
    let mut s = Source::open(config(dir.path(), out.path())).expect("open");
    s.scan().expect("scan");
    assert_eq!(dump_with(&s, OPTS).packages, 4);
    let c = stamp(&package_file(&s, 1, 3));

    // Deleted from a/; added before every range; added to b/ (its package now too full: it
    // splits); d/ emptied.
    std::fs::remove_file(dir.path().join("a/2.txt")).expect("rm");
    write(dir.path(), "0.txt", "first of all");
    write(dir.path(), "b/4.txt", "b 4");
    std::fs::remove_file(dir.path().join("d/1.txt")).expect("rm");
    s.scan().expect("scan");
    let second = dump_with(&s, OPTS);
    // New: 0.txt; a/1 and a/3; b/4 (b/1..3 keep their package). Carried over: b/1..3, c/.
    assert_eq!(
        (second.packages, second.reused, second.skipped),
        (3, 2, 0),
        "{second:?}"
    );
    assert_eq!(stamp(&package_file(&s, 1, 3)), c);
    let (names, resources) = listed(out.path(), dir.path());
    assert_eq!(names.len(), 5);
    assert!(names.contains_key("resourcedump-000001-00002.zip"));
    assert!(names.contains_key("resourcedump-000001-00003.zip"));
    assert_eq!(resources, source_files(dir.path()));

    // The dump after that: every package of the first dump not listed any more is removed,
    // the previous dump's stay.
    write(dir.path(), "c/1.txt", "c 1, changed");
    s.scan().expect("scan");
    let third = dump_with(&s, OPTS);
    assert_eq!((third.packages, third.reused), (1, 4), "{third:?}");
    for n in [1, 4] {
        assert!(!package_file(&s, 1, n).exists(), "{n}");
    }
    assert!(package_file(&s, 1, 2).is_file(), "listed again");
    assert!(
        package_file(&s, 1, 3).is_file(),
        "listed by the previous dump"
    );
    assert_eq!(listed(out.path(), dir.path()).1, source_files(dir.path()));
}

/// An entry of the previous package whose bytes no longer match what the state records (here:
/// damaged on disk, same length) is not carried over: the bitstream is copied from the Source.
#[test]
fn a_damaged_entry_of_the_previous_package_is_copied_from_the_source() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    tree(dir.path());
    // Short: stored as it is in the package, so that it can be found and damaged there.
    write(dir.path(), "b/1.txt", "bravo one");
    let mut s = Source::open(config(dir.path(), out.path())).expect("open");
    s.scan().expect("scan");
    assert_eq!(dump_with(&s, OPTS).packages, 3);
    let b = package_file(&s, 1, 2);
    let mut bytes = std::fs::read(&b).expect("read");
    let at = bytes
        .windows(9)
        .position(|w| w == b"bravo one")
        .expect("stored bitstream");
    bytes[at] = b'B';
    std::fs::write(&b, &bytes).expect("damage");

    write(dir.path(), "b/2.txt", "b 2, changed");
    s.scan().expect("scan");
    let second = dump_with(&s, OPTS);
    assert_eq!(
        (second.packages, second.reused, second.files, second.carried),
        (1, 2, 3, 1),
        "{second:?}"
    );
    assert_eq!(listed(out.path(), dir.path()).1, source_files(dir.path()));
}

/// A Resource Dump is kept while the resources changed since its snapshot are at most
/// `rebuild_after` percent of those it holds, each counted once however often it changed; past
/// that, the new snapshot gets its own (Z39.99-2014 §11.1: a dump describes the snapshot of
/// its `at`).
#[test]
fn a_dump_is_kept_until_the_share_changed_since_passes_rebuild_after() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    for i in 0..20 {
        write(dir.path(), &format!("a/{i:02}.txt"), format!("file {i}"));
    }
    let opts = DumpOptions {
        rebuild_after: 10,
        ..DumpOptions::default()
    };
    let mut s = Source::open(config(dir.path(), out.path())).expect("open");
    s.scan().expect("scan");
    let first = dump_with(&s, opts);
    assert_eq!((first.packages, first.behind), (1, None), "{first:?}");
    let doc = out.path().join("resourcesync/resourcedump.xml");
    let text = std::fs::read(&doc).expect("resourcedump.xml");

    // One resource changed twice and one deleted: 2 of 20, 10 %.
    for body in ["changed", "changed again"] {
        write(dir.path(), "a/03.txt", body);
        s.scan().expect("scan");
        let kept = dump_with(&s, opts);
        assert_eq!((kept.packages, kept.behind), (0, Some(1)), "{kept:?}");
    }
    std::fs::remove_file(dir.path().join("a/07.txt")).expect("rm");
    s.scan().expect("scan");
    let kept = dump_with(&s, opts);
    assert_eq!((kept.packages, kept.behind), (0, Some(2)), "{kept:?}");
    assert_eq!(std::fs::read(&doc).expect("resourcedump.xml"), text);

    // A third resource: 15 %, past it.
    write(dir.path(), "a/11.txt", "changed");
    s.scan().expect("scan");
    let new = dump_with(&s, opts);
    assert_eq!((new.packages, new.behind), (1, None), "{new:?}");
    assert_ne!(std::fs::read(&doc).expect("resourcedump.xml"), text);
    let (_, resources) = listed(out.path(), dir.path());
    assert_eq!(resources.len(), 19);
}
