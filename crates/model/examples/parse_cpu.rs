//! CPU time of parse+validate and of its quick-xml floor, for `perf stat`.
//!
//! `parse_cpu ours|parse|floor|setup N`: builds the 50,000-entry Resource List of
//! `benches/parse_write.rs`, then reads it N times with the reader and validator (`ours`), with
//! the reader alone (`parse`), with quick-xml alone (`floor`), or not at all (`setup`, to
//! subtract). Per run:
//! `(task-clock(ours N) - task-clock(setup N)) / N`. Build with `cargo build --profile bench
//! -p resourcesync-model --example parse_cpu`.
#![allow(missing_docs)]

use std::hint::black_box;

use resourcesync_model::validate::validate;
use resourcesync_model::{DocumentReader, ReadOptions};

// `entries` is the bench's (its write case), unused here.
#[allow(dead_code)]
#[path = "../benches/support/resourcelist.rs"]
mod resourcelist;
use resourcelist::{document, tokenize};

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().unwrap_or_else(|| "ours".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10);
    let doc = document(50_000);
    for _ in 0..n {
        match what.as_str() {
            "ours" => {
                let r = DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
                let report = validate(r).expect("valid");
                assert_eq!(report.entries, 50_000);
                black_box(report);
            }
            "parse" => {
                let mut r =
                    DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
                let mut n = 0u64;
                while let Some(e) = r.next_entry().expect("entry") {
                    n += e.length().unwrap_or(0);
                }
                black_box(n);
            }
            "floor" => {
                black_box(tokenize(&doc));
            }
            _ => {}
        }
    }
}
