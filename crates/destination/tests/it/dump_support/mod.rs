//! What `dump.rs` and `dump_hostile.rs` share: a sync run, digests, incompressible bytes,
//! warnings, ZIP packages and two bodies.

use std::io::Write;
use std::sync::Arc;

use resourcesync_destination::{Quiet, SyncOptions, SyncReport, sync};
use resourcesync_model::{HashAlg, MultiHasher};
use zip::CompressionMethod;
use zip::write::SimpleFileOptions;

pub(crate) async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

pub(crate) fn md5_of(b: &[u8]) -> String {
    let (_, h) = MultiHasher::new(&[HashAlg::Md5])
        .hash_reader(b)
        .expect("hash");
    h.to_string()
}

/// Deterministic incompressible bytes.
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

pub(crate) fn has_warning(r: &SyncReport, what: &str) -> bool {
    r.warnings.iter().any(|w| w.contains(what))
}

pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        w.start_file(
            *name,
            SimpleFileOptions::default().compression_method(CompressionMethod::Deflated),
        )
        .expect("start");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish").into_inner()
}

pub(crate) const A: &[u8] = b"alpha";
pub(crate) const B: &[u8] = b"bravo, the second file";
