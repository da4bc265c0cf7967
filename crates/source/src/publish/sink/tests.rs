//! The [`DocSink`] contract, checked for every implementation, and publishing to memory.

use super::*;
use crate::inventory::MemInventory;
use crate::publish::sink::conformance;
use crate::publish::{PublishOptions, publish_to};
use crate::scan::{ScanOptions, scan};
use crate::state::State;

/// Directory sinks, each in a new directory.
struct Dirs(Option<tempfile::TempDir>);

impl conformance::Harness for Dirs {
    fn sink(&mut self) -> Box<dyn DocSink> {
        let dir = tempfile::tempdir().expect("tempdir");
        let sink = DirSink::new(dir.path());
        self.0 = Some(dir);
        Box::new(sink)
    }

    fn read(&self, key: &str) -> Option<Vec<u8>> {
        std::fs::read(self.0.as_ref()?.path().join(key)).ok()
    }
}

#[test]
fn the_directory_sink_keeps_the_contract() {
    let mut h = Dirs(None);
    conformance::run(&mut h).unwrap_or_else(|e| panic!("{e}"));
    // The sink made last (its last check deletes documents): no temporary file left.
    let dir = h.0.expect("a sink made");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("resourcesync"))
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().starts_with(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// Memory sinks.
struct Mems(MemSink);

impl conformance::Harness for Mems {
    fn sink(&mut self) -> Box<dyn DocSink> {
        self.0 = MemSink::new();
        Box::new(self.0.clone())
    }

    fn read(&self, key: &str) -> Option<Vec<u8>> {
        self.0.get(key).map(|b| b.to_vec())
    }
}

#[test]
fn the_memory_sink_keeps_the_contract() {
    conformance::run(&mut Mems(MemSink::new())).unwrap_or_else(|e| panic!("{e}"));
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
    let listed: Vec<String> = dir
        .list("")
        .expect("list")
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    assert_eq!(listed, keys);
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

#[test]
fn a_name_among_the_documents_that_is_no_key_is_named_not_listed() {
    let out = tempfile::tempdir().expect("tempdir");
    let sink = DirSink::new(out.path());
    let key = RelPath::parse("resourcesync/a.xml").expect("key");
    sink.put(&key, b"a").expect("put");
    // Put there by something else: a backslash, which no key holds.
    std::fs::write(out.path().join("resourcesync").join("b\\c.xml"), b"b").expect("write");
    let e = sink.list("resourcesync/").expect_err("listed").to_string();
    assert!(e.contains("resourcesync/b\\c.xml"), "{e}");
    assert!(
        e.contains("no document's key") && e.contains("remove it"),
        "{e}"
    );
    // A folder is still removed whole, what is in it or not.
    sink.delete_prefix("resourcesync/").expect("delete");
    assert!(!out.path().join("resourcesync").exists());
}

#[test]
fn a_document_key_is_a_relative_path_and_a_folder_a_prefix() {
    let layout = Layout::new("/out", "https://example.org/");
    assert_eq!(
        layout
            .doc_key("resourcelists/000001/resourcelist.xml")
            .expect("key"),
        "resourcesync/resourcelists/000001/resourcelist.xml"
    );
    assert_eq!(
        layout.well_known_key().expect("key"),
        ".well-known/resourcesync"
    );
    for bad in ["resourcelists/", "../x.xml", "", "a//b.xml"] {
        assert!(layout.doc_key(bad).is_err(), "{bad:?} made a key");
    }
    assert_eq!(
        layout.doc_prefix("resourcelists/"),
        "resourcesync/resourcelists/"
    );
}
