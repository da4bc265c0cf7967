//! The streaming scan: the previous snapshot, read a page at a time, merged
//! with the listing as it comes, files hashed in batches. Checked against a reference computed
//! the simple way (two whole maps compared), over more entries than one page of the snapshot
//! and one batch of files, with names whose order as bytes differs from their order as path
//! components; the documents against those written from the state; a crash between batches.

use std::collections::BTreeMap;
use std::path::Path;

use resourcesync_model::Change;
use resourcesync_source::inventory::{DirInventory, Inventory, Listing, MemInventory};
use resourcesync_source::layout::Layout;
use resourcesync_source::publish::sink::{DirSink, DocSink, MemSink};
use resourcesync_source::publish::{PublishOptions, publish_to};
use resourcesync_source::scan::{ScanOptions, ScanReport, scan};
use resourcesync_source::state::State;
use resourcesync_source::{Error, Result};

const BASE: &str = "http://127.0.0.1:1/";

/// Names whose order as bytes (`a-b` < `a.b` < `a/b` < `a0`) is not their order as path
/// components (`a` < `a-b` < `a.b` < `a0`, with `a/b` inside `a`), on both sides of a page
/// of the snapshot (4096 rows) and of many batches (64 files).
fn tricky_names() -> Vec<String> {
    let mut v = vec![
        "a-b".to_owned(),
        "a.b".into(),
        "a/b".into(),
        "a/b-c".into(),
        "a/b.c".into(),
        "a/b/c".into(),
        "a0".into(),
        "a b".into(),
        "é/x".into(),
        "e/x".into(),
    ];
    for i in 0..7000 {
        v.push(format!("d{}/f{i:05}.txt", i % 7));
        if i % 500 == 0 {
            v.push(format!("d{}-{i}/g.txt", i % 7));
            v.push(format!("d{}.{i}/g.txt", i % 7));
        }
    }
    v
}

/// The changes one scan must find between two states of a tree (path → content), the simple
/// way: created and updated in path order (as bytes), then deleted in path order.
fn reference(
    old: &BTreeMap<Vec<u8>, Vec<u8>>,
    new: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> Vec<(Vec<u8>, Change)> {
    let mut out = Vec::new();
    for (k, v) in new {
        match old.get(k) {
            None => out.push((k.clone(), Change::Created)),
            Some(o) if o != v => out.push((k.clone(), Change::Updated)),
            Some(_) => {}
        }
    }
    for k in old.keys() {
        if !new.contains_key(k) {
            out.push((k.clone(), Change::Deleted));
        }
    }
    out
}

/// The changes a scan recorded (those after `seq`), as (path, change) in recording order.
fn recorded(state: &State, seq: i64) -> Vec<(Vec<u8>, Change)> {
    state
        .changes_after(seq, usize::MAX >> 1)
        .expect("changes")
        .into_iter()
        .map(|c| {
            let rest = c.uri.strip_prefix(BASE).expect("under the base");
            let path = resourcesync_source::uri::decode_path(rest).expect("path");
            (path.as_os_str().as_encoded_bytes().to_vec(), c.change)
        })
        .collect()
}

/// Checks one scan against the reference: its counts, the changes recorded and their order,
/// and the new snapshot, row for row.
fn check(
    state: &State,
    report: &ScanReport,
    seq: i64,
    old: &BTreeMap<Vec<u8>, Vec<u8>>,
    new: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    let want = reference(old, new);
    let count = |c: Change| want.iter().filter(|(_, x)| *x == c).count() as u64;
    if report.baseline {
        assert!(
            recorded(state, seq).is_empty(),
            "a baseline records no change"
        );
    } else {
        assert_eq!(
            (report.created, report.updated, report.deleted),
            (
                count(Change::Created),
                count(Change::Updated),
                count(Change::Deleted)
            ),
            "{report:?}"
        );
        assert_eq!(
            recorded(state, seq),
            want,
            "the changes or their order differ"
        );
    }
    assert_eq!(report.resources, new.len() as u64);
    let rows = state.resources_by_path().expect("rows");
    let got: Vec<(&[u8], u64)> = rows.iter().map(|r| (&r.path[..], r.length)).collect();
    let want: Vec<(&[u8], u64)> = new.iter().map(|(k, v)| (&k[..], v.len() as u64)).collect();
    assert_eq!(got, want, "the snapshot differs from the tree");
}

/// A small deterministic generator (no dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Rounds of random creations, updates, deletions and rewrites with the same bytes (read
/// again, not a change), scanned from a memory inventory: every round as the reference says.
#[test]
fn the_streamed_merge_finds_what_comparing_whole_maps_finds() {
    let dir = tempfile::tempdir().expect("dir");
    let mut state = State::open(&dir.path().join("s.sqlite")).expect("state");
    let inv = MemInventory::new();
    let names = tricky_names();
    let mut tree: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = Rng(7);
    for n in names.iter().filter(|_| rng.next() % 3 != 0) {
        inv.put(n, n.as_bytes());
        tree.insert(n.as_bytes().to_vec(), n.as_bytes().to_vec());
    }
    let opts = ScanOptions::default();
    for round in 0..5 {
        let old = tree.clone();
        if round > 0 {
            for n in &names {
                let k = n.as_bytes().to_vec();
                match (rng.next() % 10, tree.contains_key(&k)) {
                    (0, true) => {
                        inv.remove(n);
                        tree.remove(&k);
                    }
                    (1, _) => {
                        let v = format!("{n} {round}").into_bytes();
                        inv.put(n, &v);
                        tree.insert(k, v);
                    }
                    // The same bytes, a new time.
                    (2, true) => inv.put(n, &tree[&k]),
                    _ => {}
                }
            }
        }
        let seq = state.last_seq().expect("seq");
        let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
        assert_eq!(r.baseline, round == 0);
        check(&state, &r, seq, &old, &tree);
    }
}

/// The same over a directory, whose listing puts a directory's name with a `/` after it: the
/// names that sort differently as bytes and as components, created, changed and removed.
#[test]
fn a_directory_scan_merges_names_that_sort_differently_as_bytes() {
    let root = tempfile::tempdir().expect("root");
    let sd = tempfile::tempdir().expect("state dir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    let inv = DirInventory::new(root.path(), Vec::new(), false, Vec::new()).expect("inventory");
    let mut tree: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let write = |tree: &mut BTreeMap<Vec<u8>, Vec<u8>>, n: &str, v: &str| {
        let p = root.path().join(n);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, v).expect("write");
        tree.insert(n.as_bytes().to_vec(), v.as_bytes().to_vec());
    };
    let names = [
        "a-b", "a.b", "a/b", "a/b-c", "a/b.c", "a/c/d", "a0", "b/a-b", "b/a.b", "b/a/b",
    ];
    for n in names {
        write(&mut tree, n, n);
    }
    let opts = ScanOptions {
        threads: 3,
        ..ScanOptions::default()
    };
    let seq = state.last_seq().expect("seq");
    let r = scan(&inv, &mut state, BASE, &opts).expect("baseline");
    check(&state, &r, seq, &BTreeMap::new(), &tree);

    let old = tree.clone();
    write(&mut tree, "a/b", "a/b changed");
    write(&mut tree, "a.b", "a.b changed too");
    write(&mut tree, "a/b.d", "new");
    write(&mut tree, "a-c", "new");
    for gone in ["a-b", "a/c/d", "b/a.b"] {
        std::fs::remove_file(root.path().join(gone)).expect("rm");
        tree.remove(gone.as_bytes());
    }
    let seq = state.last_seq().expect("seq");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    check(&state, &r, seq, &old, &tree);
    assert_eq!(
        recorded(&state, seq)
            .iter()
            .map(|(p, c)| format!("{} {}", String::from_utf8_lossy(p), c.as_str()))
            .collect::<Vec<_>>(),
        [
            "a-c created",
            "a.b updated",
            "a/b updated",
            "a/b.d created",
            "a-b deleted",
            "a/c/d deleted",
            "b/a.b deleted",
        ]
    );
}

/// Every document of `sink`, by key.
fn documents(sink: &dyn DocSink, mem: Option<&MemSink>, out: &Path) -> BTreeMap<String, Vec<u8>> {
    sink.list("")
        .expect("list")
        .into_iter()
        .map(|k| {
            let k = k.as_str().to_owned();
            let bytes = match mem {
                Some(m) => m.get(&k).expect("in memory").to_vec(),
                None => std::fs::read(out.join(&k)).expect("read"),
            };
            (k, bytes)
        })
        .collect()
}

/// A publish over many batches writes, byte for byte, what a publish from the state writes
/// (the Resource List split in parts, the Change Lists): after a baseline (entries rendered
/// along with the scan), after a scan where everything changed (rendered too) and after one
/// where most is unchanged (read from the state).
#[test]
fn documents_written_along_the_scan_are_those_written_from_the_state() {
    let inv = MemInventory::new();
    let names = tricky_names();
    for n in &names {
        inv.put(n, n.as_bytes());
    }
    let sd = tempfile::tempdir().expect("state dir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    let mut opts = PublishOptions::default();
    opts.split.max_entries = 1000;
    let rounds: [&dyn Fn(&MemInventory); 3] = [
        &|_| {},
        &|inv| {
            for n in &names {
                inv.put(n, format!("{n}, all changed").as_bytes());
            }
        },
        &|inv| {
            for n in names.iter().step_by(97) {
                inv.put(n, b"some changed");
            }
            inv.remove("a/b");
        },
    ];
    for (round, change) in rounds.iter().enumerate() {
        change(&inv);
        let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
        assert_eq!(r.resources as usize, names.len() - usize::from(round == 2));
        let out = tempfile::tempdir().expect("out");
        let layout = Layout::new(out.path(), BASE);
        let dir = DirSink::new(out.path());
        // The first publish after a scan takes what it rendered (if it did); the second
        // reads the state.
        let first = publish_to(&dir, &layout, &state, &opts).expect("publish");
        assert!(first.resource_list_parts > 5, "{first:?}");
        let mem = MemSink::new();
        publish_to(&mem, &layout, &state, &opts).expect("publish from the state");
        let (a, b) = (
            documents(&dir, None, out.path()),
            documents(&mem, Some(&mem), out.path()),
        );
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (k, v) in &a {
            assert!(&b[k] == v, "round {round}: {k} differs");
        }
    }
}

/// An inventory listing two entries far apart in swapped order: the scan finds it after many
/// batches were recorded in its transaction, stops, and records nothing.
#[derive(Debug)]
struct SwappedLate(MemInventory);

impl Inventory for SwappedLate {
    fn list(&self) -> Result<Listing<'_>> {
        let mut all: Vec<_> = self.0.list()?.collect();
        let n = all.len();
        all.swap(n - 10, n - 2000);
        Ok(Box::new(all.into_iter()))
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.0.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.0.stat(rel)
    }
}

#[test]
fn a_listing_found_out_of_order_after_many_batches_records_nothing() {
    let sd = tempfile::tempdir().expect("state dir");
    let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
    let inv = MemInventory::new();
    for n in tricky_names() {
        inv.put(&n, n.as_bytes());
    }
    scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("baseline");
    let before = state.resources_by_path().expect("rows");
    let seq = state.last_seq().expect("seq");
    for n in tricky_names().iter().step_by(3) {
        inv.put(n, b"changed");
    }
    let e = scan(
        &SwappedLate(inv.clone()),
        &mut state,
        BASE,
        &ScanOptions::default(),
    )
    .expect_err("out of order");
    assert!(matches!(e, Error::Inventory(_)), "{e}");
    assert_eq!(state.last_seq().expect("seq"), seq, "a change was recorded");
    assert_eq!(state.resources_by_path().expect("rows"), before);
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    assert_eq!(
        (r.updated, r.created, r.deleted),
        (tricky_names().len().div_ceil(3) as u64, 0, 0)
    );
}

/// The variables the crash test's child reads.
const CHILD_TREE: &str = "SCAN_STREAM_CHILD_TREE";
const CHILD_STATE: &str = "SCAN_STREAM_CHILD_STATE";

/// Run by the crash test in a child process (does nothing otherwise): scans the tree it is
/// given into the state it is given, with the crash hook set to stop it between batches.
#[test]
fn crash_child() {
    let (Some(tree), Some(db)) = (std::env::var_os(CHILD_TREE), std::env::var_os(CHILD_STATE))
    else {
        return;
    };
    let mut state = State::open(Path::new(&db)).expect("state");
    let inv = DirInventory::new(Path::new(&tree), Vec::new(), false, Vec::new()).expect("inv");
    let _ = scan(&inv, &mut state, BASE, &ScanOptions::default());
    unreachable!("the crash hook stops the scan");
}

/// A scan killed between batches (rows of several batches written in its transaction, not
/// committed) leaves the previous state, and the next scan finds every change.
#[test]
fn a_scan_killed_between_batches_leaves_a_state_the_next_scan_recovers_from() {
    let root = tempfile::tempdir().expect("root");
    let sd = tempfile::tempdir().expect("state dir");
    let db = sd.path().join("s.sqlite");
    let mut tree: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let write = |tree: &mut BTreeMap<Vec<u8>, Vec<u8>>, n: &str, v: &str| {
        let p = root.path().join(n);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, v).expect("write");
        tree.insert(n.as_bytes().to_vec(), v.as_bytes().to_vec());
    };
    for i in 0..1200 {
        write(
            &mut tree,
            &format!("d{}/f{i:04}", i % 5),
            &format!("file {i}"),
        );
    }
    let inv = DirInventory::new(root.path(), Vec::new(), false, Vec::new()).expect("inv");
    {
        let mut state = State::open(&db).expect("state");
        scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("baseline");
    }
    let old = tree.clone();
    for i in (0..1200).step_by(3) {
        write(
            &mut tree,
            &format!("d{}/f{i:04}", i % 5),
            &format!("file {i}, longer now"),
        );
    }
    for i in (1..1200).step_by(7) {
        let n = format!("d{}/f{i:04}", i % 5);
        std::fs::remove_file(root.path().join(&n)).expect("rm");
        tree.remove(n.as_bytes());
    }
    for i in 0..300 {
        write(&mut tree, &format!("n{}/g{i:04}", i % 3), "new");
    }
    let before = {
        let state = State::open(&db).expect("state");
        (
            state.resources_by_path().expect("rows"),
            state.last_seq().expect("seq"),
            state.snapshots().expect("snapshots").len(),
        )
    };
    let status = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "scan_stream::crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_TREE, root.path())
        .env(CHILD_STATE, &db)
        .env("RESOURCESYNC_TEST_CRASH_AT", "scan-batch:5")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("child");
    assert!(!status.success(), "the child was to crash");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(6),
            "not stopped by the hook: {status:?}"
        );
    }
    let mut state = State::open(&db).expect("state after the crash");
    let after = (
        state.resources_by_path().expect("rows"),
        state.last_seq().expect("seq"),
        state.snapshots().expect("snapshots").len(),
    );
    assert!(
        after == before,
        "the crash left a partial scan in the state"
    );
    let seq = state.last_seq().expect("seq");
    let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    check(&state, &r, seq, &old, &tree);
    let out = tempfile::tempdir().expect("out");
    let layout = Layout::new(out.path(), BASE);
    publish_to(
        &DirSink::new(out.path()),
        &layout,
        &state,
        &PublishOptions::default(),
    )
    .expect("publish");
}

#[test]
fn names_serve_answers_itself_are_skipped_from_a_directory_and_from_memory() {
    let top = tempfile::tempdir().expect("tempdir");
    let root = top.path().join("d");
    std::fs::create_dir_all(root.join(".well-known")).expect("mkdir");
    for f in [
        "a.txt",
        "healthz",
        "robots.txt",
        "a\\b",
        ".well-known/resourcesync",
    ] {
        std::fs::write(root.join(f), "mine").expect("write");
    }
    let dir = DirInventory::new(&root, Vec::new(), true, Vec::new()).expect("inventory");
    let mem = MemInventory::new();
    for f in [
        "a.txt",
        "healthz",
        "resourcesync/hub",
        ".resourcesync/state.sqlite",
    ] {
        mem.put(f, b"mine");
    }
    for (inv, left_out) in [
        (
            &dir as &dyn Inventory,
            &["healthz", "robots.txt", "a\\b", ".well-known/resourcesync"][..],
        ),
        (
            &mem,
            &["healthz", "resourcesync/hub", ".resourcesync/state.sqlite"][..],
        ),
    ] {
        let sd = tempfile::tempdir().expect("state");
        let mut state = State::open(&sd.path().join("s.sqlite")).expect("state");
        let r = scan(
            inv,
            &mut state,
            "http://example.org/",
            &ScanOptions::default(),
        )
        .expect("scan");
        assert_eq!(r.resources, 1, "{r:?}");
        let mut skipped: Vec<String> = r
            .skipped
            .iter()
            .map(|s| s.path.to_string_lossy().into_owned())
            .collect();
        skipped.sort();
        let mut want: Vec<String> = left_out.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(skipped, want, "{:?}", r.skipped);
        assert!(r.skipped.iter().all(|s| s.reason.contains("not published")));
    }
}
