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
use resourcesync_store::{Batch, MemState, Op, Records, ResourceRecord};

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

/// The copies kept in a bucket (`--store s3://…`, Garage of `scripts/s3.sh`): each inventory
/// under a new prefix. The rows' lengths and digests are listed as recorded, without asking
/// the bucket (see `CopiesInventory`): a row whose object is unreadable is not found by a
/// listing, so the backend holds no broken resource for the suite.
struct BucketCopies {
    rows: Copies,
    bucket: Option<resourcesync_store::s3::Bucket>,
    n: u32,
}

impl BucketCopies {
    fn url(&self) -> String {
        let url = crate::server_env("RESOURCESYNC_TEST_S3");
        let prefix = format!("copies-{}-{}", std::process::id(), self.n);
        match url.split_once('?') {
            Some((base, query)) => format!("{}/{prefix}?{query}", base.trim_end_matches('/')),
            None => format!("{}/{prefix}", url.trim_end_matches('/')),
        }
    }
}

impl Harness for BucketCopies {
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
        assert!(broken.is_none(), "asked for a broken copy");
        self.n += 1;
        self.rows.top = tempfile::tempdir().expect("tempdir");
        self.rows.state = MemState::new();
        let url = self.url();
        self.bucket = Some(resourcesync_store::s3::Bucket::open(&url).expect("bucket"));
        for (rel, bytes) in files {
            self.put(rel, bytes);
        }
        let cfg = resourcesync_store::S3Config::parse(&url).expect("config");
        let index = self.rows.top.path().join("index.sqlite");
        let copies = resourcesync_aggregate::republish::Copies::Bucket(Box::new(cfg));
        let inv =
            CopiesInventory::open_at(&self.rows.folder(), &copies, &index, &self.rows.state, KEY)
                .expect("open");
        Box::new(inv)
    }

    fn put(&mut self, rel: &str, bytes: &[u8]) {
        let b = self.bucket.as_ref().expect("built");
        b.put(rel, bytes, "application/octet-stream")
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        self.rows.row(&Copies::record(rel, bytes));
    }

    fn remove(&mut self, rel: &str) {
        let b = self.bucket.as_ref().expect("built");
        b.delete(rel).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let uri = format!("http://127.0.0.1:1/{rel}");
        let mut batch = Batch::new();
        batch.push(Op::RemoveResource(&uri));
        self.rows.state.apply(&batch).expect("row");
    }

    fn can_break(&self) -> bool {
        false
    }
}

#[test]
fn the_copies_inventory_over_a_bucket_passes_the_conformance_suite() {
    let mut h = BucketCopies {
        rows: Copies {
            top: tempfile::tempdir().expect("tempdir"),
            state: MemState::new(),
        },
        bucket: None,
        n: 0,
    };
    conformance::run(&mut h).unwrap_or_else(|e| panic!("{e}"));
}
