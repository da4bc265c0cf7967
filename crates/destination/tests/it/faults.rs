//! A baseline and an incremental sync through a fault-injecting proxy: at a
//! 20% fault rate (connections dropped or reset mid-body, truncated bodies, 429/500/503 with and
//! without `Retry-After`, delays, reordering), repeated runs end with `audit` clean, and after
//! every run every file at its final path is a version the Source published.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use common::fault_proxy::{FaultProxy, Kind};
use common::*;
use resourcesync_destination::{AuditOptions, Quiet, SyncOptions, sync};

/// Most runs allowed for one sync to end clean at a 20% fault rate.
const MAX_RUNS: usize = 12;

type Versions = BTreeMap<String, BTreeSet<Vec<u8>>>;

fn content(seed: u64, i: usize, generation: u32) -> Vec<u8> {
    // Sizes from a few bytes to ~40 KB, so that cuts land inside bodies of every size.
    let len = 3 + ((seed as usize ^ (i * 7919)) % 40_000) * (i % 3) / 2;
    let mut v = format!("file {i} generation {generation}\n").into_bytes();
    while v.len() < len {
        v.extend_from_slice(format!("{seed:x}-{i}-{generation} ").as_bytes());
    }
    v
}

fn record(versions: &mut Versions, root: &Path) {
    for (p, b) in source_files(root) {
        versions.entry(p).or_default().insert(b);
    }
}

/// Every file at a final path under DEST is a full version the Source published.
fn no_wrong_file(dest: &Path, versions: &Versions, seed: u64, run: usize) {
    for (p, b) in dest_files(dest) {
        assert!(
            versions.get(&p).is_some_and(|v| v.contains(&b)),
            "seed {seed}, run {run}: {p} ({} bytes) is no version the Source published",
            b.len()
        );
    }
}

/// Syncs until a run ends without error and without failed resources; returns the runs taken.
async fn until_clean(o: &SyncOptions, dest: &Path, versions: &Versions, seed: u64) -> usize {
    for run in 1..=MAX_RUNS {
        let r = sync(o, Arc::new(Quiet)).await;
        no_wrong_file(dest, versions, seed, run);
        match r {
            Ok(r) if r.failed == 0 => return run,
            Ok(r) => eprintln!("run {run}: {} failed, e.g. {:?}", r.failed, r.failures[0]),
            Err(e) => eprintln!("run {run}: {e}"),
        }
    }
    panic!("seed {seed}: not clean after {MAX_RUNS} runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_and_incremental_through_faults_end_with_a_clean_audit() {
    scenario("faults", false).await;
}

/// The same with a Resource Dump for the baseline and Change Dumps applied first
/// (`--prefer-dumps`): packages cut or refused leave their resources to the lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dumps_through_faults_end_with_a_clean_audit() {
    scenario("faults-dumps", true).await;
}

async fn scenario(name: &str, dumps: bool) {
    let seed = seed(name);
    let split = |c: &mut resourcesync_source::SourceConfig| {
        c.publish.split.max_entries = 100;
        c.publish.dumps = dumps;
    };
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| (format!("d{}/f{i}.txt", i % 7), content(seed, i, 0)))
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    let proxy = FaultProxy::start(server.addr, seed, 0.2).await;
    // Every URI goes through the proxy; the Resource List is split into an index of parts.
    publish_with(src.path(), &proxy.base, split);
    let mut versions = Versions::new();
    record(&mut versions, src.path());

    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&proxy.base, &dest);
    o.delete = true;
    o.prefer_dumps = dumps;
    o.http.read_timeout = std::time::Duration::from_secs(2);
    let baseline_runs = until_clean(&o, &dest, &versions, seed).await;
    assert_eq!(dest_files(&dest), source_files(src.path()), "seed {seed}");

    // Updates, creations and deletions at the Source, then incremental runs.
    for i in (0..300).step_by(6) {
        write_tree(
            src.path(),
            &[(&format!("d{}/f{i}.txt", i % 7), &content(seed, i, 1))],
        );
    }
    for i in (3..300).step_by(17) {
        std::fs::remove_file(src.path().join(format!("d{}/f{i}.txt", i % 7))).expect("rm");
    }
    for i in 300..330 {
        write_tree(
            src.path(),
            &[(&format!("new/f{i}.txt"), &content(seed, i, 0))],
        );
    }
    publish_with(src.path(), &proxy.base, split);
    record(&mut versions, src.path());
    let incremental_runs = until_clean(&o, &dest, &versions, seed).await;
    assert_eq!(dest_files(&dest), source_files(src.path()), "seed {seed}");

    // The audit (through the proxy, faults off) finds the copy in sync.
    proxy.set_enabled(false);
    let mut a = AuditOptions::new(&proxy.base, &dest);
    a.http.retries = 0;
    let a = resourcesync_destination::audit(&a, Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(a.in_sync, "seed {seed}: {a:?}");

    let (requests, faults, overtaken) = proxy.stats();
    let total: u64 = faults.values().sum();
    eprintln!(
        "seed {seed}: {requests} requests, {total} faults {faults:?} ({overtaken} reordered responses overtaken); \
         baseline clean after {baseline_runs} run(s), incremental after {incremental_runs}"
    );
    // The fault rate was applied: at least 20% less five standard deviations.
    let floor = requests as f64 * 0.2 - 5.0 * (requests as f64 * 0.16).sqrt();
    assert!(total as f64 >= floor, "seed {seed}: {total} of {requests}");
    // With about ten of each kind expected, requiring every one would fail about one seed in
    // 1,500 by chance; eight of the ten, about one in 10^10.
    let kinds = Kind::ALL.iter().filter(|k| faults.contains_key(k)).count();
    assert!(
        total < 80 || kinds >= 8,
        "seed {seed}: only {kinds} kinds: {faults:?}"
    );
}
