//! Two `resourcesync aggregate` processes sharing a PostgreSQL state (the server of
//! scripts/postgres.sh, RESOURCESYNC_TEST_POSTGRES) and one store: each Source is synced by
//! one worker at a time (a lease per Source, every write fenced by it), so that in the steady
//! state no resource is fetched twice; a worker killed with SIGKILL in the middle of a sync
//! has its Source taken over by the other after its lease, and the copies end whole.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use resourcesync_testkit::{Fault, Server};

use crate::aggregate::{following, signal, until};
use crate::serve::Reaped;

pub(crate) fn postgres() -> String {
    match std::env::var("RESOURCESYNC_TEST_POSTGRES") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "RESOURCESYNC_TEST_POSTGRES is not set: run the tests with scripts/test.sh, which \
             starts a PostgreSQL server (scripts/postgres.sh)"
        ),
    }
}

/// A directory of `n` files published by our Source and served as files.
pub(crate) fn source(n: usize) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in_thread(dir.path());
    for i in 0..n {
        std::fs::write(
            dir.path().join(format!("f{i:03}.txt")),
            format!("file {i}\n"),
        )
        .expect("write");
    }
    publish(dir.path(), &server.base);
    (server, dir)
}

fn publish(dir: &Path, base: &str) {
    let mut s =
        resourcesync_source::Source::open(resourcesync_source::SourceConfig::new(dir, base))
            .expect("open");
    s.scan().expect("scan");
    s.publish().expect("publish");
}

/// A worker: `aggregate` over `cfg`, the shared store and state; its page address.
pub(crate) fn worker(cfg: &Path, store: &Path, name: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["aggregate", "--config", cfg.to_str().expect("path")])
        .args(["--store", store.to_str().expect("path")])
        .args(["--state", &postgres(), "--worker", name])
        .args(["--serve", "127.0.0.1:0", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("start line");
    let v: serde_json::Value = serde_json::from_str(&line).expect("JSON start line");
    let addr = v["serve"]
        .as_str()
        .and_then(|u| u.strip_prefix("http://"))
        .and_then(|u| u.strip_suffix('/'))
        .expect("address")
        .to_owned();
    (child, addr)
}

/// Whether every Source of `names` is followed by one of the workers (the other holding it
/// or having followed it too), with `n` resources each.
fn all_followed(a: &serde_json::Value, b: &serde_json::Value, names: &[String], n: u64) -> bool {
    names
        .iter()
        .all(|s| following(a, s, n) || following(b, s, n))
}

pub(crate) fn api(addr: &str) -> serde_json::Value {
    until(addr, "the API answers", |_| true)
}

fn syncs(v: &serde_json::Value) -> u64 {
    v.as_array()
        .map(|a| a.iter().filter_map(|s| s["syncs"].as_u64()).sum())
        .unwrap_or(0)
}

#[cfg(unix)]
#[test]
fn two_workers_share_the_sources_and_take_over_from_a_dead_one() {
    // Names (and so PostgreSQL schemas) of this run only.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let run = format!("w{:x}{:x}", std::process::id(), nanos);
    let sources: Vec<(Server, tempfile::TempDir)> = (0..4).map(|_| source(10)).collect();
    let names: Vec<String> = (0..4).map(|i| format!("{run}-{i}")).collect();
    let work = tempfile::tempdir().expect("work");
    let (cfg, store) = (
        work.path().join("aggregate.toml"),
        work.path().join("copies"),
    );
    let mut text = String::from("[limits]\nlease = \"3s\"\n\n");
    for (name, (s, _)) in names.iter().zip(&sources) {
        text.push_str(&format!(
            "[[source]]\nname = \"{name}\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\ndelete = true\n\n",
            s.base
        ));
    }
    std::fs::write(&cfg, &text).expect("config");
    let (a, a_addr) = worker(&cfg, &store, "a");
    let (b, b_addr) = worker(&cfg, &store, "b");
    let (mut a, mut b) = (Reaped(a), Reaped(b));

    // Baseline: every Source by one worker or the other, each resource fetched once in all.
    let end = Instant::now() + Duration::from_secs(120);
    while !all_followed(&api(&a_addr), &api(&b_addr), &names, 10) {
        assert!(
            Instant::now() < end,
            "not every Source was baselined:\n{}\n{}",
            api(&a_addr),
            api(&b_addr)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let fetched: u64 = sources.iter().map(|(s, _)| s.resource_hits()).sum();
    assert_eq!(
        fetched, 40,
        "each resource fetched once across the two workers"
    );
    steady_state_fetches_nothing(&sources, &a_addr, &b_addr);
    let (s0, d0) = &sources[0];
    one_change_is_fetched_once(s0, d0.path(), &store.join(&names[0]));

    // A worker killed with SIGKILL mid-sync: a new Source whose resources are slow, so that
    // whoever takes it first is still fetching when killed.
    let (slow, slow_dir) = source(6);
    for i in 0..6 {
        slow.fault(
            &format!("/f{i:03}.txt"),
            Fault::Delay(Duration::from_millis(700)),
        );
    }
    let slow_name = format!("{run}-slow");
    text.push_str(&format!(
        "[[source]]\nname = \"{slow_name}\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\nconcurrency = 1\n\n",
        slow.base
    ));
    std::fs::write(&cfg, &text).expect("config");
    signal(&a, "-HUP");
    signal(&b, "-HUP");
    // Wait until one of them is syncing it, then kill that one.
    let end = Instant::now() + Duration::from_secs(60);
    let running_in = |addr: &str| {
        api(addr).as_array().is_some_and(|s| {
            s.iter()
                .any(|x| x["name"] == slow_name.as_str() && x["running"] == true)
        })
    };
    let (victim, survivor) = loop {
        if running_in(&a_addr) && slow.resource_hits() > 0 {
            break (&mut a.0, b_addr.clone());
        }
        if running_in(&b_addr) && slow.resource_hits() > 0 {
            break (&mut b.0, a_addr.clone());
        }
        assert!(Instant::now() < end, "nobody took the slow Source");
        std::thread::sleep(Duration::from_millis(20));
    };
    signal(victim, "-KILL");
    let _ = victim.wait();
    // The survivor takes it over once the lease (3 s) runs out, and completes it.
    until(&survivor, "the slow Source taken over", |v| {
        following(v, &slow_name, 6)
    });
    for i in 0..6 {
        let p = format!("f{i:03}.txt");
        assert_eq!(
            std::fs::read(store.join(&slow_name).join(&p)).expect("copy"),
            std::fs::read(slow_dir.path().join(&p)).expect("original"),
            "{p}"
        );
    }
    // Nothing half-written was left visible beside the copies.
    let names_in: Vec<String> = std::fs::read_dir(store.join(&slow_name))
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names_in.len(), 6, "{names_in:?}");
}

/// Steady state: rounds go on (by either worker, from the shared cursor), nothing fetched;
/// both workers take part.
fn steady_state_fetches_nothing(
    sources: &[(Server, tempfile::TempDir)],
    a_addr: &str,
    b_addr: &str,
) {
    let (va, vb) = (api(a_addr), api(b_addr));
    for (s, _) in sources {
        s.reset_hits();
    }
    let before = syncs(&va) + syncs(&vb);
    let end = Instant::now() + Duration::from_secs(60);
    while syncs(&api(a_addr)) + syncs(&api(b_addr)) < before + 8 {
        assert!(Instant::now() < end, "no further rounds");
        std::thread::sleep(Duration::from_millis(100));
    }
    let fetched: u64 = sources.iter().map(|(s, _)| s.resource_hits()).sum();
    assert_eq!(fetched, 0, "a resource fetched again in the steady state");
    // Both take part: a lease is given up after each sync, and the next round goes to
    // whichever worker asks first.
    let end = Instant::now() + Duration::from_secs(60);
    while !(syncs(&api(a_addr)) > 0 && syncs(&api(b_addr)) > 0) {
        assert!(Instant::now() < end, "one worker never synced a Source");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One change at the Source served by `s` from `dir`: fetched once, by whichever worker syncs
/// next, into `copies` (the Source's folder in the store).
fn one_change_is_fetched_once(s: &Server, dir: &Path, copies: &Path) {
    std::fs::write(dir.join("f005.txt"), "changed\n").expect("write");
    publish(dir, &s.base);
    let copy = copies.join("f005.txt");
    let end = Instant::now() + Duration::from_secs(60);
    while std::fs::read(&copy).ok().as_deref() != Some(b"changed\n".as_slice()) {
        assert!(Instant::now() < end, "the change did not arrive");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.hits("/f005.txt"), 1);
}
