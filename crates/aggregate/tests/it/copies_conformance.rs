//! The inventory conformance suite for the aggregator's copies inventory (`CopiesInventory`,
//! the copies of a Source republished as a Source, Z39.99-2014 §14.8), over a folder: the
//! harness writes each resource's copy into the folder and the Destination's row of it into a
//! state (`MemState`), and opens the inventory anew; a removal deletes the copy and its row.
//! The broken resource is a row whose copy is a directory (a copy that is no file).

use std::path::PathBuf;

use resourcesync_aggregate::republish::CopiesInventory;
use resourcesync_model::{HashAlg, MultiHasher};
use resourcesync_source::inventory::Inventory;
use resourcesync_source::inventory::conformance::{self, Harness};
use resourcesync_store::{Batch, MemState, Op, ResourceRecord, StateStore};

/// The Source's key in the state (its Capability List URL).
const KEY: &str = "http://127.0.0.1:1/capabilitylist.xml";

struct Copies {
    top: tempfile::TempDir,
    state: MemState,
}

impl Copies {
    fn folder(&self) -> PathBuf {
        self.top.path().join("copies")
    }

    fn record(path: &str, bytes: &[u8]) -> ResourceRecord {
        let mut h = MultiHasher::new(&[HashAlg::Md5, HashAlg::Sha256]);
        h.update(bytes);
        ResourceRecord {
            uri: format!("http://127.0.0.1:1/{path}"),
            source: KEY.to_owned(),
            path: path.to_owned(),
            length: Some(bytes.len() as u64),
            hashes: h.finish(),
            ..ResourceRecord::default()
        }
    }

    fn row(&self, r: &ResourceRecord) {
        let mut b = Batch::new();
        b.push(Op::PutResource(r));
        self.state.apply(&b).expect("row");
    }
}

impl Harness for Copies {
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
        self.top = tempfile::tempdir().expect("tempdir");
        self.state = MemState::new();
        for (rel, bytes) in files {
            self.put(rel, bytes);
        }
        if let Some(b) = broken {
            std::fs::create_dir_all(self.folder().join(b)).expect("mkdir");
            self.row(&Self::record(b, b""));
        }
        let index = self.top.path().join("index.sqlite");
        let inv = CopiesInventory::open(&self.folder(), &index, &self.state, KEY).expect("open");
        Box::new(inv)
    }

    fn put(&mut self, rel: &str, bytes: &[u8]) {
        let p = self.folder().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, bytes).expect("write");
        self.row(&Self::record(rel, bytes));
    }

    fn remove(&mut self, rel: &str) {
        std::fs::remove_file(self.folder().join(rel)).expect("remove");
        let uri = format!("http://127.0.0.1:1/{rel}");
        let mut b = Batch::new();
        b.push(Op::RemoveResource(&uri));
        self.state.apply(&b).expect("row");
    }
}

#[test]
fn the_copies_inventory_passes_the_conformance_suite() {
    let mut h = Copies {
        top: tempfile::tempdir().expect("tempdir"),
        state: MemState::new(),
    };
    conformance::run(&mut h).unwrap_or_else(|e| panic!("{e}"));
}
