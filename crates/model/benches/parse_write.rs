//! Parse+validate and write of a 50,000-entry Resource List with md5 and sha-256 digests.
//!
//! `cargo bench -p resourcesync-model --bench parse_write`; throughput is reported in bytes of
//! document per second. `bench/parse-vs-resync.sh` compares with the Python reference.
//!
//! The floor: quick-xml alone tokenizing the same document (every event read, nothing
//! built). After criterion's figures a line prints parse+validate over that floor, best of 11
//! alternating runs each, against the goal (<= 2.5x); reported, not enforced.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use resourcesync_model::validate::validate;
use resourcesync_model::{DocumentReader, DocumentWriter, ReadOptions};

#[path = "support/resourcelist.rs"]
mod resourcelist;
use resourcelist::{document, entries, tokenize};

fn bench(c: &mut Criterion) {
    let doc = document(50_000);
    let mut g = c.benchmark_group("resourcelist-50k");
    g.throughput(Throughput::Bytes(doc.len() as u64));
    g.sample_size(20);
    g.bench_function("parse+validate", |b| {
        b.iter(|| {
            let r = DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
            let report = validate(r).expect("valid");
            assert_eq!(report.entries, 50_000);
            black_box(report)
        })
    });
    g.bench_function("quick-xml tokenize (floor)", |b| {
        b.iter(|| black_box(tokenize(&doc)))
    });
    g.bench_function("parse", |b| {
        b.iter(|| {
            let mut r = DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
            let mut n = 0u64;
            while let Some(e) = r.next_entry().expect("entry") {
                n += e.length().unwrap_or(0);
            }
            black_box(n)
        })
    });
    let list = entries(50_000);
    let header = {
        let r = DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
        r.header().clone()
    };
    g.bench_function("write", |b| {
        b.iter(|| {
            let mut w = DocumentWriter::new(Vec::with_capacity(doc.len()), "bench", &header)
                .expect("header");
            for e in &list {
                w.write_entry(e).expect("entry");
            }
            black_box(w.finish().expect("finish").len())
        })
    });
    g.finish();
}

/// parse+validate over the quick-xml floor, printed against the goal: the best of 11 runs of
/// each, the two alternating (floor, ours, floor, ...) so that a change of load on a shared
/// machine reaches both alike.
fn floor_ratio(_: &mut Criterion) {
    let doc = document(50_000);
    let time = |f: &dyn Fn()| {
        let t = std::time::Instant::now();
        f();
        t.elapsed().as_secs_f64()
    };
    let (mut floor, mut ours) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..11 {
        floor = floor.min(time(&|| {
            black_box(tokenize(&doc));
        }));
        ours = ours.min(time(&|| {
            let r = DocumentReader::new(&doc[..], ReadOptions::named("bench")).expect("header");
            black_box(validate(r).expect("valid"));
        }));
    }
    let x = ours / floor;
    println!(
        "resourcelist-50k: parse+validate {:.1} ms, quick-xml tokenize {:.1} ms: {x:.2}x the floor (goal <= 2.5x: {})",
        ours * 1e3,
        floor * 1e3,
        if x <= 2.5 { "ok" } else { "MISS" }
    );
}

criterion_group!(benches, bench, floor_ratio);
criterion_main!(benches);
