//! Unit tests of the scan over inventories other than a directory.

use std::path::Path;

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
