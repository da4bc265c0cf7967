//! The conformance suite of the [`Inventory`] port, for implementers: one set of checks every
//! implementation must pass (as rclone runs one test suite over every backend).
//!
//! Implement [`Harness`] for your backend (make an inventory holding exactly some resources;
//! create, replace and remove one) and call [`run`] from a test:
//!
//! ```ignore
//! #[test]
//! fn my_backend_conforms() {
//!     resourcesync_source::inventory::conformance::run(&mut MyHarness::new());
//! }
//! ```
//!
//! It checks the contract stated in [`crate::inventory`]: the listing's order (strictly
//! increasing path bytes, with names chosen so that a per-directory sort by plain names gets it
//! wrong) and completeness; each record's length, time (as [`Inventory::stat`] gives) and
//! digests (when given, those of the bytes); [`Inventory::open`] and
//! [`Inventory::read_stable`]; a broken entry reported as an `Err` item without ending the
//! listing; that a listing is a stream (taken in part, dropped, interleaved with another); and,
//! when the backend offers one, the [`crate::inventory::ChangeFeed`]. The directory inventory
//! and [`crate::inventory::MemInventory`] run it in their unit tests.
//!
//! The checks panic (they are assertions) with a message naming the resource concerned.

use std::io::Read;
use std::path::{Path, PathBuf};

use resourcesync_model::MultiHasher;

use crate::inventory::{Changed, Inventory, Listed, Skipped};
use crate::uri::path_bytes;

/// What the suite needs of an implementation under test.
pub trait Harness {
    /// An inventory holding exactly `files` (relative `/`-separated path, bytes) and, when
    /// given, one more resource at `broken` that is there but cannot be read (the backend's
    /// own kind of failure: a dangling link, an object that cannot be fetched). The same
    /// harness may be asked several times; each inventory replaces the previous one.
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory>;
    /// Creates or replaces a resource of the inventory built last.
    fn put(&mut self, rel: &str, bytes: &[u8]);
    /// Removes a resource of the inventory built last.
    fn remove(&mut self, rel: &str);
}

/// The resources of the fixture: names whose order as whole paths differs from a sort of
/// each directory's plain names (`a-b` < `a.txt` < `a/`), spaces and non-ASCII, an empty
/// resource, one larger than a read buffer, and a directory of many.
pub fn fixture() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = [
        "a-b.txt",
        "a.txt",
        "a/x.txt",
        "a/y/z.txt",
        "a0",
        "b c.txt",
        "z/deep/er/est.txt",
        "é.txt",
        "日本語/ファイル.txt",
    ]
    .iter()
    .map(|n| (n.to_string(), format!("the bytes of {n}").into_bytes()))
    .collect();
    files.push(("empty".into(), Vec::new()));
    files.push((
        "big.bin".into(),
        (0..600_000u32).map(|i| (i % 251) as u8).collect(),
    ));
    for i in 0..600 {
        let n = format!("many/f{i:04}.txt");
        let b = n.clone().into_bytes();
        files.push((n, b));
    }
    files
}

/// The name of the fixture's broken resource.
pub const BROKEN: &str = "broken.txt";

fn build(h: &mut dyn Harness, files: &[(String, Vec<u8>)]) -> Box<dyn Inventory> {
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    h.build(&refs, Some(BROKEN))
}

/// Runs every check.
pub fn run(h: &mut dyn Harness) {
    let files = fixture();
    let inv = build(h, &files);
    order_and_completeness(&*inv, &files);
    record_fields(&*inv, &files);
    open_and_read(&*inv, &files);
    listing_is_a_stream(&*inv);
    drop(inv);
    change_feed(h);
}

/// Every listed path, in the order given, and the problems reported.
fn collect(
    listing: impl Iterator<Item = std::result::Result<Listed, Skipped>>,
) -> (Vec<Listed>, Vec<Skipped>) {
    let (mut listed, mut skipped) = (Vec::new(), Vec::new());
    for e in listing {
        match e {
            Ok(l) => listed.push(l),
            Err(s) => skipped.push(s),
        }
    }
    (listed, skipped)
}

fn names(listed: &[Listed]) -> Vec<String> {
    listed
        .iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect()
}

/// The listing (both kinds) gives every resource once, in strictly increasing path bytes,
/// and reports the broken one as a problem without ending.
pub fn order_and_completeness(inv: &dyn Inventory, files: &[(String, Vec<u8>)]) {
    let mut want: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    want.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for (what, listing) in [("list", inv.list()), ("list_names", inv.list_names())] {
        let (listed, skipped) = collect(listing.expect(what));
        for w in listed.windows(2) {
            assert!(
                path_bytes(&w[0].rel) < path_bytes(&w[1].rel),
                "{what}: {:?} then {:?}: not in strictly increasing path order",
                w[0].rel,
                w[1].rel
            );
        }
        assert_eq!(names(&listed), want, "{what}: not every resource, once");
        assert!(
            skipped.iter().any(|s| s.path == Path::new(BROKEN)),
            "{what}: the broken resource is not reported: {skipped:?}"
        );
        assert!(
            !listed.iter().any(|l| l.rel == Path::new(BROKEN)),
            "{what}: the broken resource is listed as if readable"
        );
    }
}

/// Each record of [`Inventory::list`] has the resource's length, the time [`Inventory::stat`]
/// gives, and digests (when given) of its bytes; [`Inventory::list_names`] has either those or
/// zeros.
pub fn record_fields(inv: &dyn Inventory, files: &[(String, Vec<u8>)]) {
    let bytes_of = |rel: &Path| {
        files
            .iter()
            .find(|(n, _)| Path::new(n) == rel)
            .map(|(_, b)| b.as_slice())
            .unwrap_or_else(|| panic!("{rel:?} listed but not in the fixture"))
    };
    let (listed, _) = collect(inv.list().expect("list"));
    for l in &listed {
        let b = bytes_of(&l.rel);
        assert_eq!(l.len, b.len() as u64, "{:?}: length", l.rel);
        let (len, mtime) = inv.stat(&l.rel).expect("stat");
        assert_eq!(
            (l.len, l.mtime_ns),
            (len, mtime),
            "{:?}: record vs stat",
            l.rel
        );
        assert!(l.mtime_ns > 0, "{:?}: no modification time", l.rel);
        if !l.hashes.is_empty() {
            let mut h = MultiHasher::new(&l.hashes.known_algs());
            h.update(b);
            assert_eq!(
                l.hashes.agrees_with(&h.finish()),
                Some(true),
                "{:?}: digests not of the bytes",
                l.rel
            );
        }
    }
    let (names, _) = collect(inv.list_names().expect("list_names"));
    for (n, l) in names.iter().zip(&listed) {
        assert!(
            (n.len, n.mtime_ns) == (0, 0) || (n.len, n.mtime_ns) == (l.len, l.mtime_ns),
            "{:?}: list_names gives neither zeros nor the record",
            n.rel
        );
    }
}

/// [`Inventory::open`] and [`Inventory::read_stable`] give each resource's bytes; a missing
/// or broken resource is an error.
pub fn open_and_read(inv: &dyn Inventory, files: &[(String, Vec<u8>)]) {
    let mut buf = Vec::new();
    for (n, b) in files {
        let rel = Path::new(n);
        let mut got = Vec::new();
        inv.open(rel)
            .unwrap_or_else(|e| panic!("{n}: open: {e}"))
            .read_to_end(&mut got)
            .unwrap_or_else(|e| panic!("{n}: read: {e}"));
        assert!(got == *b, "{n}: open gives other bytes");
        let mut fed = Vec::new();
        let stable = inv
            .read_stable(rel, &mut buf, &mut |d| fed.extend_from_slice(d))
            .unwrap_or_else(|e| panic!("{n}: read_stable: {e}"));
        let (len, _) = stable.unwrap_or_else(|| panic!("{n}: read_stable saw a change"));
        assert_eq!(len, b.len() as u64, "{n}: read_stable length");
        assert!(fed == *b, "{n}: read_stable gives other bytes");
    }
    for rel in ["missing.txt", "a/missing", BROKEN] {
        assert!(inv.open(Path::new(rel)).is_err(), "{rel}: opened");
        assert!(
            inv.read_stable(Path::new(rel), &mut buf, &mut |_| {})
                .is_err(),
            "{rel}: read"
        );
    }
}

/// A listing is a stream: taken in part and dropped, it leaves nothing behind (the next
/// listing is whole); two at once, interleaved, each give the same whole listing.
pub fn listing_is_a_stream(inv: &dyn Inventory) {
    let (whole, _) = collect(inv.list().expect("list"));
    let first: Vec<Listed> = inv
        .list()
        .expect("list")
        .filter_map(|e| e.ok())
        .take(3)
        .collect();
    assert_eq!(
        first,
        whole[..3.min(whole.len())],
        "the first entries differ"
    );
    let (again, _) = collect(inv.list().expect("list"));
    assert_eq!(
        names(&again),
        names(&whole),
        "a listing dropped midway left a trace"
    );
    let (mut a, mut b) = (inv.list().expect("list"), inv.list().expect("list"));
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    loop {
        let (x, y) = (a.next(), b.next());
        if x.is_none() && y.is_none() {
            break;
        }
        from_a.extend(x.and_then(|e| e.ok()));
        from_b.extend(y.and_then(|e| e.ok()));
    }
    assert_eq!(names(&from_a), names(&whole), "interleaved listings differ");
    assert_eq!(names(&from_b), names(&whole), "interleaved listings differ");
}

/// When the backend offers a change feed: after a cursor, exactly the resources created,
/// replaced or removed since, each once, in path order, with their state now; nothing after
/// the feed's own cursor; an unknown cursor is an error.
pub fn change_feed(h: &mut dyn Harness) {
    let files: Vec<(String, Vec<u8>)> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| (n.to_string(), n.as_bytes().to_vec()))
        .collect();
    let inv = build(h, &files);
    let Some(feed) = inv.change_feed() else {
        return;
    };
    let start = feed.cursor().expect("cursor");
    let empty = feed.changes_since(&start).expect("changes");
    assert_eq!(empty.changes.count(), 0, "changes after the current cursor");
    h.put("c", b"c, replaced");
    h.put("e", b"e, created");
    h.remove("b");
    h.put("0", b"0, created then removed");
    h.remove("0");
    let got = feed.changes_since(&start).expect("changes");
    let next = got.cursor.clone();
    let changes: Vec<Changed> = got.changes.map(|c| c.expect("change")).collect();
    let rels: Vec<PathBuf> = changes.iter().map(|c| c.rel().to_owned()).collect();
    assert_eq!(rels, ["0", "b", "c", "e"].map(PathBuf::from), "the changes");
    assert_eq!(changes[0], Changed::Gone("0".into()));
    assert_eq!(changes[1], Changed::Gone("b".into()));
    match &changes[2] {
        Changed::Present(l) => assert_eq!(l.len, "c, replaced".len() as u64),
        other => panic!("c: {other:?}"),
    }
    let after = feed.changes_since(&next).expect("changes");
    assert_eq!(after.changes.count(), 0, "changes after the feed's cursor");
    assert!(
        feed.changes_since("not a cursor").is_err(),
        "an unknown cursor taken"
    );
}
