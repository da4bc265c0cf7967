//! Helpers shared by the model's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use resourcesync_model::{DocumentReader, Entry, Header, Position, ReadOptions};

/// Tests that allocate a lot (tens of MB) or measure the process's peak RSS hold this lock, one
/// at a time, so that the peak RSS one of them measures is its own: every module of this test
/// binary runs in one process.
static HEAVY: Mutex<()> = Mutex::new(());

/// Takes [`HEAVY`] (also after a test holding it failed).
pub fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The spec fixtures folder.
pub fn spec_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec")
}

/// One row of `INDEX.tsv`.
#[derive(Debug, Clone)]
pub struct Fixture {
    pub file: String,
    pub source: String,
    pub kind: String,
    pub root: String,
    pub expect: String,
    pub note: String,
}

/// Every row of `INDEX.tsv`.
pub fn fixtures() -> Vec<Fixture> {
    let text = std::fs::read_to_string(spec_dir().join("INDEX.tsv")).expect("INDEX.tsv");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let g = |i: usize| c.get(i).copied().unwrap_or("").to_owned();
            Fixture {
                file: g(0),
                source: g(1),
                kind: g(2),
                root: g(3),
                expect: g(4),
                note: g(5),
            }
        })
        .collect()
}

/// Reads a whole document from bytes: header and entries with positions cleared.
pub fn read_all(name: &str, bytes: &[u8]) -> (Header, Vec<Entry>) {
    let mut r = DocumentReader::new(bytes, ReadOptions::named(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let header = r.header().clone();
    let mut entries = Vec::new();
    while let Some(mut e) = r.next_entry().unwrap_or_else(|e| panic!("{name}: {e}")) {
        e.position = Position::default();
        entries.push(e);
    }
    (header, entries)
}
