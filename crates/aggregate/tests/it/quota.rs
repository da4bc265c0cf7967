//! The bytes one Source may keep in the store every Source shares (`max_bytes` of a
//! `[[source]]`, `limits.max_bytes_per_source`): a Source past it fails with a message naming
//! it, the bytes and the key to raise, no copy past the budget is put in place, and the other
//! Sources go on.

use crate::service::start_local;
use std::path::Path;
use std::time::Duration;

use resourcesync_aggregate::status::Phase;
use resourcesync_testkit::Server;

use crate::service::{publish, until};

/// A directory of `n` files of `size` bytes, published and served.
async fn source(n: usize, size: usize) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path()).await;
    for i in 0..n {
        std::fs::write(
            dir.path().join(format!("r{i}.bin")),
            vec![b'a' + i as u8; size],
        )
        .expect("write");
    }
    publish(dir.path(), &server.base).await;
    (server, dir)
}

/// The bytes of the copies under `folder` (its state directory left out).
fn copied(folder: &Path) -> (usize, u64) {
    let mut n = (0, 0);
    for e in std::fs::read_dir(folder).expect("folder").flatten() {
        let m = e.metadata().expect("metadata");
        if m.is_file() && e.file_name().to_string_lossy().starts_with('r') {
            n.0 += 1;
            n.1 += m.len();
        }
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_past_its_bytes_fails_alone() {
    let (big, _big_dir) = source(4, 600).await;
    let (fine, _fine_dir) = source(4, 600).await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[limits]\nmax_bytes_per_source = \"10kB\"\n\n\
         [[source]]\nname = \"big\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1h\"\n\
         max_bytes = \"1000\"\n\n\
         [[source]]\nname = \"fine\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1h\"\n",
        big.base, fine.base
    );
    let agg = start_local(&text, store.path());
    let limit = Duration::from_secs(60);
    let v = until(&agg, "big", limit, |v| v.phase == Phase::Failing).await;
    let e = v.last_error.clone().unwrap_or_default();
    for said in ["quota", "1000 bytes", "\"big\"", "max_bytes"] {
        assert!(e.contains(said), "{said:?} not in {e}");
    }
    // One copy of 600 bytes fits in 1,000; a second would not, and is not put in place.
    assert_eq!(copied(&store.path().join("big")), (1, 600));
    // The other Source, under the default of [limits], is copied whole.
    until(&agg, "fine", limit, |v| {
        v.phase == Phase::Following && v.resources == 4
    })
    .await;
    assert_eq!(copied(&store.path().join("fine")), (4, 2400));
    agg.drain(Duration::from_secs(5)).await;
}

#[test]
fn a_size_that_does_not_parse_names_its_line() {
    let text = "[[source]]\nname = \"a\"\nurl = \"https://h.example/\"\nmax_bytes = \"8Mbit\"\n";
    let e = resourcesync_aggregate::Config::parse(text, Path::new("agg.toml"))
        .expect_err("refused")
        .to_string();
    assert!(
        e.starts_with("agg.toml:4:") && e.contains("max_bytes"),
        "{e}"
    );
    let ok = resourcesync_aggregate::Config::parse(
        "[limits]\nmax_bytes_per_source = \"2TB\"\n",
        Path::new("agg.toml"),
    )
    .expect("parses");
    assert_eq!(ok.limits.max_bytes_per_source, 2_000_000_000_000);
}
