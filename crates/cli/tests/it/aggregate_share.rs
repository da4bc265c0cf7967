//! Two `resourcesync aggregate` processes sharing a PostgreSQL state (scripts/postgres.sh,
//! RESOURCESYNC_TEST_POSTGRES) and one store share the download work of ONE large Source:
//! the worker holding its lease queues pages of its fetches as the other takes them, and
//! fetches the rest itself (issue 36 item 6), each resource fetched once; a worker killed with SIGKILL mid-run loses nothing, the other
//! finishing its work after its claims expire.

use std::path::Path;
use std::time::{Duration, Instant};

use resourcesync_testkit::{Fault, Server};

use crate::aggregate::{following, signal};
use crate::aggregate_workers::{api, postgres, source, worker};
use crate::serve::{Reaped, http_get};

/// Resources of the Source: above the `limits.share_above` the workers are given (500).
const N: usize = 2000;

/// Names (and so PostgreSQL schemas) of this run only.
fn run_name(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("s{:x}{:x}-{what}", std::process::id(), nanos)
}

/// Each resource answered 10 ms late, as over a wide-area link: the fetches take long
/// enough for both workers to find them queued.
fn wide_area(s: &Server) {
    for i in 0..N {
        s.fault(
            &format!("/f{i:03}.txt"),
            Fault::Delay(Duration::from_millis(10)),
        );
    }
}

fn config(cfg: &Path, name: &str, s: &Server, lease: &str) {
    std::fs::write(
        cfg,
        format!(
            "[limits]\nlease = \"{lease}\"\nshare_above = 500\n\n[[source]]\nname = \"{name}\"\n\
             url = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\nconcurrency = 4\n",
            s.base
        ),
    )
    .expect("config");
}

/// The copies this worker fetched from the Source's shared queue.
fn shared_copies(v: &serde_json::Value, name: &str) -> u64 {
    v.as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .and_then(|s| s["shared_copies"].as_u64())
        .unwrap_or(0)
}

/// The most fetches a sync of this worker queued, if it synced the Source: its events'
/// summaries ("…, Q fetches shared by the workers"; none queued without).
fn queued_by_sync(v: &serde_json::Value, name: &str) -> Option<u64> {
    let source = v.as_array()?.iter().find(|s| s["name"] == name)?;
    source["recent"]
        .as_array()?
        .iter()
        .filter_map(|e| e["summary"].as_str())
        .filter(|s| s.contains(" created, "))
        .map(
            |summary| match summary.split_once(" fetches shared by the workers") {
                Some((head, _)) => head
                    .rsplit(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
                None => 0,
            },
        )
        .max()
}

fn running(v: &serde_json::Value, name: &str) -> bool {
    v.as_array()
        .is_some_and(|a| a.iter().any(|s| s["name"] == name && s["running"] == true))
}

/// Polls both workers until `f` holds on their APIs (at most `secs`).
fn until_both(
    a: &str,
    b: &str,
    secs: u64,
    what: &str,
    f: impl Fn(&serde_json::Value, &serde_json::Value) -> bool,
) -> (serde_json::Value, serde_json::Value) {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        let (va, vb) = (api(a), api(b));
        if f(&va, &vb) {
            return (va, vb);
        }
        assert!(Instant::now() < end, "{what}:\n{va}\n{vb}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every copy is the original's bytes; nothing else is visible beside them.
fn copies_correct(store: &Path, name: &str, dir: &Path) {
    for i in 0..N {
        let p = format!("f{i:03}.txt");
        assert_eq!(
            std::fs::read(store.join(name).join(&p)).unwrap_or_default(),
            std::fs::read(dir.join(&p)).expect("original"),
            "{p}"
        );
    }
    let visible = std::fs::read_dir(store.join(name))
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(visible, N, "files beside the copies");
}

#[cfg(unix)]
#[test]
fn two_workers_share_the_fetches_of_one_large_source() {
    let (server, dir) = source(N);
    wide_area(&server);
    let name = run_name("big");
    let work = tempfile::tempdir().expect("work");
    let (cfg, store) = (
        work.path().join("aggregate.toml"),
        work.path().join("copies"),
    );
    config(&cfg, &name, &server, "10s");
    let (a, a_addr) = worker(&cfg, &store, "a");
    let (b, b_addr) = worker(&cfg, &store, "b");
    let (_a, _b) = (Reaped(a), Reaped(b));

    // The baseline: synced by one worker, its fetches done by both.
    until_both(
        &a_addr,
        &b_addr,
        120,
        "the Source was not baselined",
        |a, b| following(a, &name, N as u64) || following(b, &name, N as u64),
    );
    // What the coordinator queued (the rest it fetched itself), every item counted by the
    // worker that did it.
    let (va, vb) = until_both(&a_addr, &b_addr, 30, "no sync summary", |a, b| {
        queued_by_sync(a, &name)
            .or(queued_by_sync(b, &name))
            .is_some()
    });
    // (A later round, by either, queues nothing: the baseline's is the larger.)
    let (qa, qb) = (queued_by_sync(&va, &name), queued_by_sync(&vb, &name));
    let a_coordinates = qa > qb;
    let queued = qa.max(qb).unwrap_or(0);
    assert!(
        queued > 0 && queued <= N as u64,
        "queued {queued}:\n{va}\n{vb}"
    );
    let (va, vb) = until_both(&a_addr, &b_addr, 30, "fetches uncounted", |a, b| {
        shared_copies(a, &name) + shared_copies(b, &name) >= queued
    });
    let (ca, cb) = (shared_copies(&va, &name), shared_copies(&vb, &name));
    let other = if a_coordinates { cb } else { ca };
    assert!(other > 0, "the other worker did no fetch: a {ca}, b {cb}");
    assert_eq!(ca + cb, queued, "a {ca} + b {cb}");
    // The same counts for operators, in each worker's metrics.
    for (addr, count) in [(&a_addr, ca), (&b_addr, cb)] {
        let (status, m) = http_get(addr, "/metrics");
        assert_eq!(status, 200, "{m}");
        let line =
            format!("resourcesync_aggregate_shared_copies_total{{source=\"{name}\"}} {count}\n");
        assert!(m.contains(&line), "no `{}` in:\n{m}", line.trim_end());
    }
    for i in 0..N {
        let p = format!("/f{i:03}.txt");
        assert_eq!(server.hits(&p), 1, "{p} fetched {} times", server.hits(&p));
    }
    copies_correct(&store, &name, dir.path());

    // Steady state: further rounds (every second) fetch nothing again.
    let syncs = |v: &serde_json::Value| {
        v.as_array()
            .map(|a| a.iter().filter_map(|s| s["syncs"].as_u64()).sum::<u64>())
            .unwrap_or(0)
    };
    let before = syncs(&va) + syncs(&vb);
    until_both(&a_addr, &b_addr, 60, "no further rounds", |a, b| {
        syncs(a) + syncs(b) >= before + 3
    });
    assert_eq!(server.resource_hits(), N as u64, "fetched again");
    drop_schema(&name);
}

fn drop_schema(name: &str) {
    if let Ok(mut db) = postgres::Client::connect(&postgres(), postgres::NoTls) {
        let schema = format!("agg_{}", name.replace('-', "_"));
        let _ = db.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    }
}

#[cfg(unix)]
#[test]
fn a_worker_killed_mid_run_loses_no_shared_fetch() {
    let (server, dir) = source(N);
    wide_area(&server);
    let name = run_name("kill");
    let work = tempfile::tempdir().expect("work");
    let (cfg, store) = (
        work.path().join("aggregate.toml"),
        work.path().join("copies"),
    );
    config(&cfg, &name, &server, "3s");
    let (a, a_addr) = worker(&cfg, &store, "a");
    let (b, b_addr) = worker(&cfg, &store, "b");
    let (mut a, mut b) = (Reaped(a), Reaped(b));

    // Fetches are done through the queue (the helper has done some of its claims; the
    // coordinator fetches its own pages beside it, and claims too once its sync waits), the
    // sync still running: the worker holding the Source (its coordinator) is killed.
    let (va, _) = until_both(
        &a_addr,
        &b_addr,
        120,
        "nothing fetched through the queue",
        |a, b| {
            shared_copies(a, &name) + shared_copies(b, &name) > 0
                && (running(a, &name) || running(b, &name))
        },
    );
    let (victim, survivor) = if running(&va, &name) {
        (&mut a.0, b_addr.clone())
    } else {
        (&mut b.0, a_addr.clone())
    };
    signal(victim, "-KILL");
    let _ = victim.wait();
    let fetched_before = server.resource_hits();
    assert!(
        fetched_before < N as u64,
        "the run ended before the kill ({fetched_before} fetched)"
    );

    // The survivor takes the Source over after its lease (3 s), its claims after theirs, and
    // completes the sync.
    let end = Instant::now() + Duration::from_secs(120);
    while !following(&api(&survivor), &name, N as u64) {
        assert!(Instant::now() < end, "not taken over:\n{}", api(&survivor));
        std::thread::sleep(Duration::from_millis(100));
    }
    copies_correct(&store, &name, dir.path());

    // Every row's copy is there at its recorded length; no work item nor pending change left.
    let mut db = postgres::Client::connect(&postgres(), postgres::NoTls).expect("connect");
    let schema = format!("agg_{}", name.replace('-', "_"));
    let rows = db
        .query(
            &format!("SELECT path, length FROM \"{schema}\".resources"),
            &[],
        )
        .expect("rows");
    assert_eq!(rows.len(), N, "rows");
    for r in &rows {
        let (path, length): (String, Option<i64>) = (r.get(0), r.get(1));
        let on_disk = std::fs::metadata(store.join(&name).join(&path))
            .map(|m| m.len())
            .unwrap_or(u64::MAX);
        assert_eq!(
            Some(on_disk),
            length.and_then(|l| u64::try_from(l).ok()),
            "{path}"
        );
    }
    for table in ["work", "pending"] {
        let n: i64 = db
            .query_one(&format!("SELECT COUNT(*) FROM \"{schema}\".{table}"), &[])
            .expect("count")
            .get(0);
        assert_eq!(n, 0, "left in {table}");
    }
    drop(db);
    drop_schema(&name);
}
