//! The [`DocSink`] contract, checked for every implementation, and publishing to memory.

use super::*;
use crate::inventory::MemInventory;
use crate::publish::{PublishOptions, publish_to};
use crate::scan::{ScanOptions, scan};
use crate::state::State;

/// What every sink must do: put whole, read back what was put, list in order under a prefix,
/// delete one and a folder, and leave nothing for a writer dropped uncommitted.
fn contract(sink: &dyn DocSink, read: &dyn Fn(&str) -> Option<Vec<u8>>) {
    sink.put("resourcesync/b.xml", b"b").expect("put");
    sink.put("resourcesync/a/1.xml", b"one").expect("put");
    sink.put("resourcesync/a/2.xml", b"two").expect("put");
    sink.put(".well-known/resourcesync", b"sd").expect("put");
    sink.put("resourcesync/b.xml", b"b again").expect("replace");
    assert_eq!(read("resourcesync/b.xml").as_deref(), Some(&b"b again"[..]));
    assert!(sink.exists("resourcesync/a/1.xml").expect("exists"));
    assert!(!sink.exists("resourcesync/a/3.xml").expect("exists"));
    assert_eq!(
        sink.list("resourcesync/").expect("list"),
        [
            "resourcesync/a/1.xml",
            "resourcesync/a/2.xml",
            "resourcesync/b.xml"
        ]
    );
    assert_eq!(
        sink.list("resourcesync/a/").expect("list"),
        ["resourcesync/a/1.xml", "resourcesync/a/2.xml"]
    );
    let mut w = sink.create("resourcesync/c.xml").expect("create");
    w.write_all(b"half").expect("write");
    drop(w);
    assert!(
        !sink.exists("resourcesync/c.xml").expect("exists"),
        "uncommitted is seen"
    );
    let mut w = sink.create("resourcesync/c.xml").expect("create");
    w.write_all(b"whole").expect("write");
    assert!(
        !sink.exists("resourcesync/c.xml").expect("exists"),
        "seen before commit"
    );
    w.commit().expect("commit");
    assert_eq!(read("resourcesync/c.xml").as_deref(), Some(&b"whole"[..]));
    sink.delete("resourcesync/b.xml").expect("delete");
    sink.delete("resourcesync/never.xml")
        .expect("delete of nothing");
    sink.delete_prefix("resourcesync/a/")
        .expect("delete folder");
    assert_eq!(
        sink.list("resourcesync/").expect("list"),
        ["resourcesync/c.xml"]
    );
    assert!(sink.exists(".well-known/resourcesync").expect("exists"));
}

#[test]
fn the_directory_sink_keeps_the_contract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sink = DirSink::new(dir.path());
    contract(&sink, &|k| std::fs::read(dir.path().join(k)).ok());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("resourcesync"))
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn the_memory_sink_keeps_the_contract() {
    let sink = MemSink::new();
    let reader = sink.clone();
    contract(&sink, &|k| reader.get(k).map(|b| b.to_vec()));
}

/// One publishing path: the documents published to memory are those published to a
/// directory, key for key and byte for byte, split Resource List included.
#[test]
fn publishing_to_memory_writes_what_publishing_to_a_directory_writes() {
    let inv = MemInventory::new();
    for i in 0..25 {
        inv.put(
            format!("d{}/f{i:02}.txt", i % 3),
            format!("file {i}").as_bytes(),
        );
    }
    let state_dir = tempfile::tempdir().expect("tempdir");
    let mut state = State::open(&state_dir.path().join("s.sqlite")).expect("state");
    let base = "http://127.0.0.1:1/";
    scan(&inv, &mut state, base, &ScanOptions::default()).expect("scan");
    inv.put("d0/f00.txt", b"changed");
    inv.remove("d1/f01.txt");
    scan(&inv, &mut state, base, &ScanOptions::default()).expect("scan");
    let mut opts = PublishOptions::default();
    opts.split.max_entries = 10;
    let out = tempfile::tempdir().expect("tempdir");
    let layout = Layout::new(out.path(), base);
    let dir = DirSink::new(out.path());
    let mem = MemSink::new();
    // The Resource List rendered by the scan is taken by the first publish: the second reads
    // the state. Both must give the same documents.
    let to_mem = publish_to(&mem, &layout, &state, &opts).expect("publish to memory");
    let to_dir = publish_to(&dir, &layout, &state, &opts).expect("publish to a directory");
    assert_eq!(to_mem.resource_list_parts, 3);
    assert_eq!(to_dir.resource_list_parts, 3);
    let keys = mem.keys();
    assert_eq!(dir.list("").expect("list"), keys);
    assert!(keys.contains(&"resourcesync/capabilitylist.xml".to_owned()));
    assert!(keys.contains(&".well-known/resourcesync".to_owned()));
    for k in &keys {
        let on_disk = std::fs::read(out.path().join(k)).expect("read");
        assert!(
            mem.get(k).as_deref() == Some(&on_disk[..]),
            "{k} differs between memory and directory"
        );
    }
}
