//! Unit tests of the scan over inventories other than a directory.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::*;
use crate::inventory::{Listing, MemInventory};

fn state() -> (tempfile::TempDir, State) {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = State::open(&dir.path().join("state.sqlite")).expect("state");
    (dir, state)
}

const BASE: &str = "http://127.0.0.1:1/";

/// A Source over memory: the baseline, then a change of each kind, found by the one merge.
#[test]
fn a_scan_of_a_memory_inventory_records_each_kind_of_change() {
    let (_d, mut state) = state();
    let inv = MemInventory::new();
    for n in ["a.txt", "b.txt", "c/d.txt"] {
        inv.put(n, n.as_bytes());
    }
    let opts = ScanOptions::default();
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert!(r.baseline);
    assert_eq!((r.resources, r.hashed), (3, 3));
    inv.put("b.txt", b"b, changed");
    inv.remove("c/d.txt");
    inv.put("c.txt", b"new");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.resources),
        (1, 1, 1, 3),
        "{r:?}"
    );
    assert_eq!(r.hashed, 2, "only what changed is read again");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert!(!r.changed() && r.hashed == 0, "{r:?}");
}

/// An inventory giving one entry out of order: the scan stops with an error and records
/// nothing (merged, every file after it would look deleted).
#[derive(Debug)]
struct Shuffled(MemInventory);

impl Inventory for Shuffled {
    fn list(&self) -> Result<Listing<'_>> {
        let mut all: Vec<_> = self.0.list()?.collect();
        let last = all.pop().expect("one");
        all.insert(0, last);
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
fn a_listing_out_of_order_records_nothing() {
    let (_d, mut state) = state();
    let mem = MemInventory::new();
    for n in ["a", "b", "c", "z"] {
        mem.put(n, n.as_bytes());
    }
    let opts = ScanOptions::default();
    scan(&mem, &mut state, BASE, &opts).expect("baseline");
    let seq = state.last_seq().expect("seq");
    mem.put("b", b"b, changed");
    let e = scan(&Shuffled(mem.clone()), &mut state, BASE, &opts).expect_err("out of order");
    assert!(matches!(e, Error::Inventory(_)), "{e}");
    assert_eq!(state.last_seq().expect("seq"), seq, "a change was recorded");
    assert_eq!(state.resource_count().expect("count"), 4);
    let r = scan(&mem, &mut state, BASE, &opts).expect("scan in order");
    assert_eq!((r.updated, r.deleted), (1, 0), "{r:?}");
}

/// What a listing of [`Counted`] does to the inventory after its first entry.
type Hook = Box<dyn Fn(&MemInventory) + Send + Sync>;

/// A memory inventory that counts its full listings, lists through a hook (to change the
/// inventory while a listing runs), and may claim its listed digests are to be trusted.
#[derive(Default)]
struct Counted {
    mem: MemInventory,
    lists: std::sync::atomic::AtomicUsize,
    during_list: Option<Hook>,
    trusted: bool,
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted").finish_non_exhaustive()
    }
}

impl Inventory for Counted {
    fn list(&self) -> Result<Listing<'_>> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        let mut listing = self.mem.list()?;
        let first = listing.next();
        if let Some(f) = &self.during_list {
            f(&self.mem);
        }
        Ok(Box::new(first.into_iter().chain(listing)))
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.mem.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.mem.stat(rel)
    }
    fn change_feed(&self) -> Option<&dyn crate::inventory::ChangeFeed> {
        self.mem.change_feed()
    }
    fn listed_digests_trusted(&self) -> bool {
        self.trusted
    }
}

impl Counted {
    fn lists(&self) -> usize {
        self.lists.load(Ordering::SeqCst)
    }
}

/// (uri relative to the base, change) of every change recorded after `seq`.
fn changes_after(state: &State, seq: i64) -> Vec<(String, Change)> {
    state
        .changes_after(seq, 1000)
        .expect("changes")
        .into_iter()
        .map(|c| (c.uri.trim_start_matches(BASE).to_owned(), c.change))
        .collect()
}

/// After the baseline (a listing, which records the feed's cursor), a scan applies the
/// feed's changes without listing: creations, updates and a deletion are recorded as a
/// listing would record them, and the counts of the snapshot stay whole.
#[test]
fn a_scan_with_a_recorded_cursor_applies_the_feed_without_listing() {
    let (_d, mut state) = state();
    let inv = Counted::default();
    for n in ["a.txt", "b.txt", "c/d.txt", "e.txt"] {
        inv.mem.put(n, n.as_bytes());
    }
    let opts = ScanOptions::default();
    let r = scan(&inv, &mut state, BASE, &opts).expect("baseline");
    assert!(r.baseline && !r.from_feed);
    assert_eq!(inv.lists(), 1);
    let cursor = state.meta(CURSOR_KEY).expect("meta");
    assert_eq!(
        cursor.as_deref(),
        Some("4"),
        "the feed's cursor is recorded"
    );
    let seq = state.last_seq().expect("seq");

    inv.mem.put("b.txt", b"b, changed");
    inv.mem.remove("c/d.txt");
    inv.mem.put("c.txt", b"new");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert_eq!(inv.lists(), 1, "the feed's scan listed everything");
    assert!(r.from_feed, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.resources, r.hashed),
        (1, 1, 1, 4, 2),
        "{r:?}"
    );
    assert_eq!(
        r.bytes,
        ["a.txt", "e.txt"]
            .iter()
            .map(|n| n.len() as u64)
            .sum::<u64>()
            + 10
            + 3
    );
    assert_eq!(
        changes_after(&state, seq),
        [
            ("b.txt".to_owned(), Change::Updated),
            ("c.txt".to_owned(), Change::Created),
            ("c/d.txt".to_owned(), Change::Deleted),
        ]
    );
    assert!(state.resource_by_path(b"c/d.txt").expect("row").is_none());
    assert_eq!(state.resource_count().expect("count"), 4);
    let (_, _, _, count) = state.last_snapshot().expect("snap").expect("one");
    assert_eq!(
        count, 4,
        "the snapshot counts every resource, not the changes"
    );
    assert_eq!(state.meta(CURSOR_KEY).expect("meta").as_deref(), Some("7"));

    // Nothing changed: nothing recorded, nothing listed.
    let seq = state.last_seq().expect("seq");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert!(r.from_feed && !r.changed(), "{r:?}");
    assert_eq!((inv.lists(), state.last_seq().expect("seq")), (1, seq));
}

/// A cursor the feed refuses (not its own, or expired): the scan lists everything, finds the
/// changes by comparing, and records the feed's cursor of now.
#[test]
fn a_refused_cursor_falls_back_to_a_full_listing() {
    let (_d, mut state) = state();
    let inv = Counted::default();
    for n in ["a", "b"] {
        inv.mem.put(n, n.as_bytes());
    }
    let opts = ScanOptions::default();
    scan(&inv, &mut state, BASE, &opts).expect("baseline");
    state.set_meta(CURSOR_KEY, "not a cursor").expect("meta");
    inv.mem.remove("a");
    inv.mem.put("c", b"c");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert!(!r.from_feed, "{r:?}");
    assert_eq!(inv.lists(), 2, "no full listing after a refused cursor");
    assert_eq!((r.created, r.deleted, r.resources), (1, 1, 2), "{r:?}");
    assert_eq!(state.meta(CURSOR_KEY).expect("meta").as_deref(), Some("4"));
    // The cursor recorded then works.
    inv.mem.put("d", b"d");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert!(r.from_feed && r.created == 1, "{r:?}");
    assert_eq!(inv.lists(), 2);
}

/// The cursor recorded with a full listing is taken before it: a change the listing missed
/// (made behind its position while it ran) is given by the next feed.
#[test]
fn a_change_during_a_full_listing_is_given_by_the_next_feed() {
    let (_d, mut state) = state();
    let inv = Counted {
        during_list: Some(Box::new(|m: &MemInventory| m.put("0-behind", b"late"))),
        ..Counted::default()
    };
    for n in ["a", "b"] {
        inv.mem.put(n, n.as_bytes());
    }
    let opts = ScanOptions::default();
    let r = scan(&inv, &mut state, BASE, &opts).expect("baseline");
    assert_eq!(r.resources, 2, "the listing saw the write behind it: {r:?}");
    let seq = state.last_seq().expect("seq");
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert!(r.from_feed, "{r:?}");
    assert_eq!(
        changes_after(&state, seq),
        [("0-behind".to_owned(), Change::Created)]
    );
}

/// `full` lists everything though a cursor is recorded, and records the cursor again.
#[test]
fn a_full_scan_lists_despite_a_cursor() {
    let (_d, mut state) = state();
    let inv = Counted::default();
    inv.mem.put("a", b"a");
    let opts = ScanOptions::default();
    scan(&inv, &mut state, BASE, &opts).expect("baseline");
    inv.mem.put("b", b"b");
    let full = ScanOptions {
        full: true,
        ..ScanOptions::default()
    };
    let r = scan(&inv, &mut state, BASE, &full).expect("scan");
    assert!(!r.from_feed && r.created == 1, "{r:?}");
    assert_eq!(inv.lists(), 2);
    assert_eq!(state.meta(CURSOR_KEY).expect("meta").as_deref(), Some("2"));
}

/// An inventory without a feed removes a cursor left in the state by one that had it (the
/// feed could not be trusted after changes it did not see).
#[test]
fn a_scan_without_a_feed_forgets_a_recorded_cursor() {
    let (_d, mut state) = state();
    let inv = Counted::default();
    inv.mem.put("a", b"a");
    scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("baseline");
    assert!(state.meta(CURSOR_KEY).expect("meta").is_some());
    scan(
        &Shuffled(inv.mem.clone()),
        &mut state,
        BASE,
        &ScanOptions::default(),
    )
    .expect("one entry: in order");
    assert_eq!(state.meta(CURSOR_KEY).expect("meta"), None);
}

/// A feed giving its changes out of path order: the scan stops, recording nothing.
#[derive(Debug)]
struct Reversed(Counted);

impl crate::inventory::ChangeFeed for Reversed {
    fn cursor(&self) -> Result<String> {
        self.0.mem.cursor()
    }
    fn changes_since(&self, cursor: &str) -> Result<crate::inventory::Feed<'_>> {
        let f = self.0.mem.changes_since(cursor)?;
        let mut all: Vec<_> = f.changes.collect();
        all.reverse();
        Ok(crate::inventory::Feed {
            changes: Box::new(all.into_iter()),
            cursor: f.cursor,
        })
    }
}

impl Inventory for Reversed {
    fn list(&self) -> Result<Listing<'_>> {
        self.0.list()
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.0.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.0.stat(rel)
    }
    fn change_feed(&self) -> Option<&dyn crate::inventory::ChangeFeed> {
        Some(self)
    }
}

/// A scan that fails records nothing, the cursor included: the next one asks the feed from
/// the same place and gets the same changes.
#[test]
fn a_failed_feed_scan_keeps_the_cursor() {
    use crate::inventory::ChangeFeed as _;
    let (_d, mut state) = state();
    let inv = Reversed(Counted::default());
    inv.0.mem.put("a", b"a");
    let opts = ScanOptions::default();
    scan(&inv, &mut state, BASE, &opts).expect("baseline");
    let before = state.meta(CURSOR_KEY).expect("meta");
    let seq = state.last_seq().expect("seq");
    inv.0.mem.put("b", b"b");
    inv.0.mem.put("c", b"c");
    let e = scan(&inv, &mut state, BASE, &opts).expect_err("out of order");
    assert!(matches!(e, Error::Inventory(_)), "{e}");
    assert_eq!(state.meta(CURSOR_KEY).expect("meta"), before);
    assert_eq!(state.last_seq().expect("seq"), seq);
    assert_eq!(state.resource_count().expect("count"), 1);
    // The same cursor, in order, gives both changes.
    let r = scan(&inv.0, &mut state, BASE, &opts).expect("scan");
    assert!(r.from_feed && r.created == 2, "{r:?}");
    assert_eq!(inv.cursor().expect("cursor"), "3");
}

/// An inventory whose listing claims digests other than its bytes', trusted or not.
#[derive(Debug)]
struct Claims {
    mem: MemInventory,
    trusted: bool,
}

/// The MD5 the listing of [`Claims`] claims.
const CLAIMED: &str = "00112233445566778899aabbccddeeff";

impl Inventory for Claims {
    fn list(&self) -> Result<Listing<'_>> {
        Ok(Box::new(self.mem.list()?.map(|e| {
            e.map(|mut l| {
                l.hashes = resourcesync_model::Hashes::from_known(Some(CLAIMED.into()), None, None);
                l
            })
        })))
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.mem.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.mem.stat(rel)
    }
    fn listed_digests_trusted(&self) -> bool {
        self.trusted
    }
}

/// With listed digests trusted, a record carrying every digest asked for is recorded as
/// listed, its bytes not read (the digest recorded is the listing's, here not the bytes');
/// a record missing one is read and hashed; untrusted, the bytes are always read.
#[test]
fn trusted_listed_digests_are_recorded_without_reading() {
    for trusted in [false, true] {
        let (_d, mut state) = state();
        let inv = Claims {
            mem: MemInventory::new(),
            trusted,
        };
        inv.mem.put("a", b"a");
        let r = scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
        let row = state.resource_by_path(b"a").expect("row").expect("a");
        let want = if trusted {
            CLAIMED
        } else {
            "0cc175b9c0f1b6a831c399e269772661"
        };
        assert_eq!(
            row.hashes.value_of(&HashAlg::Md5).as_deref(),
            Some(want),
            "trusted: {trusted}"
        );
        assert_eq!((r.resources, r.bytes), (1, 1));
        let both = ScanOptions {
            algs: vec![HashAlg::Md5, HashAlg::Sha256],
            ..ScanOptions::default()
        };
        inv.mem.put("a", b"b");
        scan(&inv, &mut state, BASE, &both).expect("scan");
        let row = state.resource_by_path(b"a").expect("row").expect("a");
        assert!(
            row.hashes.value_of(&HashAlg::Sha256).is_some(),
            "not read though the listing lacks sha-256"
        );
        assert_eq!(
            row.hashes.value_of(&HashAlg::Md5).as_deref(),
            Some("92eb5ffee6ae2fec3ad71c777531578f"),
            "read: the digests are the bytes'"
        );
    }
}

/// A listing that breaks off after its first entry (a lost connection).
#[derive(Debug)]
struct Breaks(MemInventory);

impl Inventory for Breaks {
    fn list(&self) -> Result<Listing<'_>> {
        let first = self.0.list()?.next();
        Ok(Box::new(first.into_iter().chain(std::iter::once(Err(
            Skipped::listing_broke("connection lost"),
        )))))
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        self.0.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.0.stat(rel)
    }
}

/// A listing that breaks off stops the scan, recording nothing: the resources it did not
/// reach are not taken for deleted.
#[test]
fn a_listing_that_breaks_off_records_nothing() {
    let (_d, mut state) = state();
    let mem = MemInventory::new();
    for n in ["a", "b", "c"] {
        mem.put(n, n.as_bytes());
    }
    scan(&mem, &mut state, BASE, &ScanOptions::default()).expect("baseline");
    let seq = state.last_seq().expect("seq");
    let e = scan(&Breaks(mem), &mut state, BASE, &ScanOptions::default()).expect_err("broke");
    assert!(matches!(e, Error::Inventory(_)), "{e}");
    assert_eq!(state.last_seq().expect("seq"), seq, "deletions recorded");
    assert_eq!(state.resource_count().expect("count"), 3);
}

/// 2023-11-14T22:13:20.120456789Z: a modification time finer than a millisecond.
const SUB_SECOND_NS: i128 = 1_700_000_000_120_456_789;

/// `<lastmod>` carries the fraction of the file's time, to the microsecond (Z39.99-2014 §7:
/// W3C Datetime with fractional seconds), trimmed of trailing zeros; a whole second has none.
#[test]
fn lastmod_keeps_the_fraction_of_the_time_to_the_microsecond() {
    let (_d, mut state) = state();
    let inv = MemInventory::new();
    inv.put_at("a.txt", b"alpha", SUB_SECOND_NS);
    inv.put_at("b.txt", b"bravo", 1_700_000_000_500_000_000);
    inv.put_at("c.txt", b"charlie", 1_700_000_000_000_000_000);
    scan(&inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    let lastmods: Vec<String> = state
        .resources_by_path()
        .expect("rows")
        .iter()
        .map(|r| r.lastmod.to_string())
        .collect();
    assert_eq!(
        lastmods,
        [
            "2023-11-14T22:13:20.120456Z",
            "2023-11-14T22:13:20.5Z",
            "2023-11-14T22:13:20Z"
        ]
    );
}

/// A state recorded by a version that published whole seconds: the next scan keeps its files
/// (same size and time: not read, not recorded as updated, no Change List entry for them) and
/// reads their rows with the fraction, so the next Resource List carries it.
#[test]
fn whole_second_rows_of_an_earlier_version_are_not_changes() {
    let (d, mut state) = state();
    let inv = MemInventory::new();
    inv.put_at("a.txt", b"alpha", SUB_SECOND_NS);
    inv.put_at("b.txt", b"bravo", SUB_SECOND_NS + 1_000_000_000);
    let opts = ScanOptions::default();
    scan(&inv, &mut state, BASE, &opts).expect("baseline");
    // What the earlier version recorded: the whole seconds of the time.
    let conn = rusqlite::Connection::open(d.path().join("state.sqlite")).expect("open");
    let n = conn
        .execute(
            "UPDATE resources SET lastmod = CASE path
               WHEN CAST('a.txt' AS BLOB) THEN '2023-11-14T22:13:20Z'
               ELSE '2023-11-14T22:13:21Z' END",
            [],
        )
        .expect("downgrade");
    assert_eq!(n, 2);
    drop(conn);
    let seq = state.last_seq().expect("seq");

    inv.put_at("c.txt", b"new", SUB_SECOND_NS);
    let r = scan(&inv, &mut state, BASE, &opts).expect("scan");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.hashed),
        (1, 0, 0, 1),
        "{r:?}"
    );
    let changes = state.changes_after(seq, 10).expect("changes");
    let uris: Vec<&str> = changes.iter().map(|c| c.uri.as_str()).collect();
    assert_eq!(uris, [format!("{BASE}c.txt")]);
    let lastmods: Vec<String> = state
        .resources_by_path()
        .expect("rows")
        .iter()
        .map(|r| r.lastmod.to_string())
        .collect();
    assert_eq!(
        lastmods,
        [
            "2023-11-14T22:13:20.120456Z",
            "2023-11-14T22:13:21.120456Z",
            "2023-11-14T22:13:20.120456Z"
        ]
    );
}
