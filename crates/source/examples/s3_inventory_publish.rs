//! The bench behind `bench/s3-inventory-publish.sh`: N objects of 1 KiB put under a fresh
//! prefix of an S3-compatible bucket, and the same bytes as files of a directory, each
//! published once (scan into a new state, then every document), timed. Kinds: `directory`
//! (documents to a directory); `s3` (md5 from the ETags: no object read; documents to a
//! directory); `s3-etag-ignore` (every object read and hashed, as files are); `s3-to-s3` (as
//! `s3`, the documents into the bucket, `publish --out s3://…`).
//!
//! Usage: `s3_inventory_publish S3_URL N WORKDIR` (S3_URL as scripts/s3.sh prints it); prints
//! one line per kind: `KIND RESOURCES SECONDS RESOURCES_PER_SECOND`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use resourcesync_source::inventory::{DirInventory, Inventory, S3Inventory};
use resourcesync_source::layout::Layout;
use resourcesync_source::publish::sink::{BucketSink, DirSink, DocSink};
use resourcesync_source::publish::{PublishOptions, publish_to};
use resourcesync_source::scan::{ScanOptions, scan};
use resourcesync_source::state::State;

const BASE: &str = "http://example.org/";

fn publish(kind: &str, inv: &dyn Inventory, sink: &dyn DocSink, out: PathBuf, work: &Path, n: u64) {
    let dir = work.join(kind);
    std::fs::create_dir_all(&dir).expect("dir");
    let start = Instant::now();
    let mut state = State::open(&dir.join("state.sqlite")).expect("state");
    let r = scan(inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    let layout = Layout::new(out, BASE);
    publish_to(sink, &layout, &state, &PublishOptions::default()).expect("publish");
    state.settle().expect("settle");
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r.resources, n, "{kind}: {r:?}");
    println!("{kind} {} {secs:.2} {:.0}", r.resources, n as f64 / secs);
}

/// The URL of the bucket under `prefix`, with `extra` parameters.
fn at(url: &str, prefix: &str, extra: &str) -> String {
    let (head, query) = url.split_once('?').unwrap_or((url, ""));
    let q: Vec<&str> = query
        .split('&')
        .chain(extra.split('&'))
        .filter(|p| !p.is_empty())
        .collect();
    format!("{}/{prefix}?{}", head.trim_end_matches('/'), q.join("&"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, n, work] = &args[..] else {
        eprintln!("usage: s3_inventory_publish S3_URL N WORKDIR");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("N");
    let work = Path::new(work);
    let prefix = format!("bench-{}", std::process::id());
    let inv = S3Inventory::from_spec(&at(url, &prefix, "")).expect("inventory");
    let tree = work.join("tree");
    let paths: Vec<(String, Vec<u8>)> = (1..=n)
        .map(|i| {
            let p = format!("d{}/f{i:07}.txt", i % 100);
            let b: Vec<u8> = format!("{i:016x}").bytes().cycle().take(1024).collect();
            (p, b)
        })
        .collect();
    let load = Instant::now();
    std::thread::scope(|s| {
        for chunk in paths.chunks(paths.len().div_ceil(16).max(1)) {
            let (inv, tree) = (&inv, &tree);
            s.spawn(move || {
                for (p, b) in chunk {
                    inv.bucket().put(p, b, "text/plain").expect("put");
                    let f = tree.join(p);
                    if let Some(d) = f.parent() {
                        std::fs::create_dir_all(d).expect("mkdir");
                    }
                    std::fs::write(f, b).expect("write");
                }
            });
        }
    });
    eprintln!(
        "loaded {n} objects and files in {:.1} s",
        load.elapsed().as_secs_f64()
    );
    let dir = DirInventory::new(&tree, Vec::new(), false, Vec::new()).expect("dir");
    let out = |k: &str| work.join(k).join("out");
    publish(
        "directory",
        &dir,
        &DirSink::new(out("directory")),
        out("directory"),
        work,
        n,
    );
    publish("s3", &inv, &DirSink::new(out("s3")), out("s3"), work, n);
    let ignoring = S3Inventory::from_spec(&at(url, &prefix, "etag=ignore")).expect("inventory");
    let o = out("s3-etag-ignore");
    publish("s3-etag-ignore", &ignoring, &DirSink::new(&o), o, work, n);
    let docs = format!("{prefix}-docs");
    let sink = BucketSink::open(&at(url, &docs, "")).expect("sink");
    let loc = PathBuf::from(sink.location());
    publish("s3-to-s3", &inv, &sink, loc, work, n);
    // Leave the bucket as found.
    let mut names = Vec::new();
    inv.bucket()
        .list("", None, &mut |o| {
            names.push(o.name);
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .expect("list");
    std::thread::scope(|s| {
        for chunk in names.chunks(names.len().div_ceil(16).max(1)) {
            let inv = &inv;
            s.spawn(move || chunk.iter().for_each(|k| drop(inv.bucket().delete(k))));
        }
    });
    let _ = sink.delete_prefix("");
}
