//! `resourcesync sync`, run as a user would, through the fault-injecting proxy
//! in front of a real `resourcesync serve`: at a 20% fault rate, repeated runs reach a copy
//! that `resourcesync audit` finds in sync, first a baseline, then (after the Source changed and
//! `serve` was restarted) an incremental sync; after every run, every file at its final path is
//! a version the Source published.

#![cfg(target_os = "linux")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use resourcesync_testkit::FaultProxy;
use resourcesync_testkit::sync::*;

const MAX_RUNS: usize = 12;

type Versions = BTreeMap<String, BTreeSet<Vec<u8>>>;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
}

/// `resourcesync serve DIR` naming `base` in its documents; killed when dropped.
struct Serve(Child, SocketAddr);

impl Serve {
    fn start(dir: &Path, base: &str) -> Serve {
        let mut child = bin()
            .args(["serve", dir.to_str().expect("utf-8"), "--no-watch"])
            .args(["--listen", "127.0.0.1:0", "--base-url", base])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).expect("serving");
        // "serving DIR at URL (listening on ADDR)" or "... at URL": the listening address is
        // read from the process's socket instead of parsing prose.
        let addr = listening_addr(child.id()).unwrap_or_else(|| panic!("no socket: {line}"));
        Serve(child, addr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The 127.0.0.1 port a process listens on, from /proc (its socket inodes in /proc/net/tcp).
fn listening_addr(pid: u32) -> Option<SocketAddr> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_owned)
        })
        .collect();
    let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
    tcp.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // local_address, st (0A: LISTEN), inode
        if f.get(3) == Some(&"0A") && inodes.contains(*f.get(9)?) {
            let port = u16::from_str_radix(f.get(1)?.split(':').nth(1)?, 16).ok()?;
            Some(SocketAddr::from(([127, 0, 0, 1], port)))
        } else {
            None
        }
    })
}

fn record(versions: &mut Versions, root: &Path) {
    for (p, b) in source_files(root) {
        versions.entry(p).or_default().insert(b);
    }
}

fn sync(url: &str, dest: &Path) -> Output {
    bin()
        .args(["sync", url, dest.to_str().expect("utf-8")])
        .args(["--json", "--delete", "--retries", "3", "--timeout", "5"])
        .output()
        .expect("sync")
}

/// Runs `sync` until a run exits 0 with nothing failed; returns the runs taken.
fn until_clean(url: &str, dest: &Path, versions: &Versions, seed: u64) -> usize {
    for run in 1..=MAX_RUNS {
        let o = sync(url, dest);
        for (p, b) in dest_files(dest) {
            assert!(
                versions.get(&p).is_some_and(|v| v.contains(&b)),
                "seed {seed}, run {run}: {p} is no version the Source published"
            );
        }
        let v: Option<serde_json::Value> = serde_json::from_slice(&o.stdout).ok();
        if o.status.success() && v.as_ref().is_some_and(|v| v["failed"] == 0) {
            return run;
        }
        eprintln!(
            "run {run}: exit {:?}, failed {:?}: {}",
            o.status.code(),
            v.as_ref().map(|v| v["failed"].clone()),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    panic!("seed {seed}: not clean after {MAX_RUNS} runs");
}

fn content(i: usize, generation: u32) -> Vec<u8> {
    format!("resource {i}, generation {generation}\n")
        .repeat(1 + (i * 37) % 400)
        .into_bytes()
}

#[test]
fn sync_through_faults_in_front_of_serve_ends_with_a_clean_audit() {
    let seed = seed("faults-serve");
    let src = tmp();
    for i in 0..80 {
        write_tree(
            src.path(),
            &[(&format!("d{}/r{i}.txt", i % 4), &content(i, 0))],
        );
    }
    let mut versions = Versions::new();
    record(&mut versions, src.path());
    // The documents must name the proxy: it starts first, its upstream set once serve runs.
    let proxy = FaultProxy::start_in_thread(SocketAddr::from(([127, 0, 0, 1], 1)), seed, 0.2);
    let serve = Serve::start(src.path(), &proxy.base);
    proxy.set_upstream(serve.1);
    let out = tmp();
    let dest = dest_in(&out);
    let baseline = until_clean(&proxy.base, &dest, &versions, seed);
    assert_eq!(dest_files(&dest), source_files(src.path()), "seed {seed}");

    // The Source changes while serve is down; restarted, it publishes a Change List.
    drop(serve);
    for i in (0..80).step_by(5) {
        write_tree(
            src.path(),
            &[(&format!("d{}/r{i}.txt", i % 4), &content(i, 1))],
        );
    }
    for i in (2..80).step_by(9) {
        std::fs::remove_file(src.path().join(format!("d{}/r{i}.txt", i % 4))).expect("rm");
    }
    write_tree(src.path(), &[("new/n.txt", b"new")]);
    record(&mut versions, src.path());
    let serve = Serve::start(src.path(), &proxy.base);
    proxy.set_upstream(serve.1);
    let incremental = until_clean(&proxy.base, &dest, &versions, seed);
    assert_eq!(dest_files(&dest), source_files(src.path()), "seed {seed}");

    proxy.set_enabled(false);
    let a = bin()
        .args(["audit", &proxy.base, dest.to_str().expect("utf-8")])
        .output()
        .expect("audit");
    assert!(
        a.status.success(),
        "seed {seed}: {}",
        String::from_utf8_lossy(&a.stdout)
    );
    let (requests, faults, overtaken) = proxy.stats();
    eprintln!(
        "seed {seed}: {requests} requests, {} faults {faults:?} ({overtaken} overtaken); \
         baseline clean after {baseline} run(s), incremental after {incremental}",
        faults.values().sum::<u64>()
    );
    drop(serve);
}
