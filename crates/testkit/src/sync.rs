//! Fixtures of the sync tests (feature `sync`): publish a Source tree with `resourcesync-source`,
//! compare a Destination's copy with it, options for `resourcesync-destination` with small
//! timeouts, a replayable seed, and the identity every sync report keeps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Writes files (relative path → content) under `root`.
pub fn write_tree(root: &Path, files: &[(&str, &[u8])]) {
    for (rel, content) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, content).expect("write");
    }
}

/// Scans and publishes `root` as a Source at `base` (documents written into `root`), splitting
/// the Resource List past `max_entries`.
pub fn publish(root: &Path, base: &str, max_entries: Option<usize>) {
    publish_with(root, base, |cfg| {
        if let Some(n) = max_entries {
            cfg.publish.split.max_entries = n;
        }
    });
}

/// Scans and publishes `root` with dumps, closing each Change List after `max_entries` changes
/// (so that each closed period has its Change Dump package).
pub fn publish_rotating(root: &Path, base: &str, max_entries: u64) {
    publish_with(root, base, |c| {
        c.publish.dumps = true;
        c.scan.rotation.max_entries = max_entries;
    })
}

/// Scans and publishes `root` with a configuration adjusted by `f`.
pub fn publish_with(
    root: &Path,
    base: &str,
    f: impl FnOnce(&mut resourcesync_source::SourceConfig),
) {
    let mut cfg = resourcesync_source::SourceConfig::new(root, base);
    f(&mut cfg);
    let mut s = resourcesync_source::Source::open(cfg).expect("source");
    s.scan().expect("scan");
    s.publish().expect("publish");
}

/// The resource files of a Source tree (documents and state left out).
pub fn source_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    crate::tree::files(
        root,
        &[
            "resourcesync",
            ".well-known",
            ".resourcesync",
            "hostile",
            "robots.txt",
            "index.html",
        ],
    )
}

/// The copies under a destination (its own folder left out).
pub fn dest_files(dest: &Path) -> BTreeMap<String, Vec<u8>> {
    crate::tree::files(dest, &[".resourcesync"])
}

/// The directories under a destination (relative, sorted; its own folder left out).
pub fn dest_dirs(dest: &Path) -> Vec<String> {
    crate::tree::dirs(dest, &[".resourcesync"])
}

/// Options for tests: small timeouts and backoff.
pub fn options(url: &str, dest: &Path) -> resourcesync_destination::SyncOptions {
    let mut o = resourcesync_destination::SyncOptions::new(url, dest);
    o.concurrency = 4;
    o.http.backoff_base = std::time::Duration::from_millis(5);
    o.http.backoff_max = std::time::Duration::from_millis(50);
    o.http.retries = 2;
    o.http.read_timeout = std::time::Duration::from_secs(5);
    o
}

/// A temporary directory, removed when dropped.
pub fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The destination folder of a test: `dest` under `t`.
pub fn dest_in(t: &tempfile::TempDir) -> PathBuf {
    t.path().join("dest")
}

/// The seed of a randomized test: `RESOURCESYNC_TEST_SEED` when set, else drawn from the
/// clock. Printed (stderr is shown when a test fails) so that a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("RESOURCESYNC_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(7)
        });
    eprintln!("{test}: seed {s} (replay with RESOURCESYNC_TEST_SEED={s})");
    s
}

/// The identity every report keeps: each resource the run went through is counted once, as
/// created, updated, unchanged, failed or filtered.
#[track_caller]
pub fn adds_up(r: &resourcesync_destination::SyncReport, resources: u64) {
    assert_eq!(
        r.accounted(),
        resources,
        "created {} + updated {} + unchanged {} + failed {} + filtered {} is not the Source's \
         {resources} resources: {r:?}",
        r.created,
        r.updated,
        r.unchanged,
        r.failed,
        r.filtered
    );
}
