//! Interoperability: our Destination (`resourcesync sync` / `audit`, the built binary) against
//! the Python reference Source, `resync-simulator` 1.1.0 (pinned in the peers venv by
//! `scripts/python-peers.sh`), on 127.0.0.1 only.
//!
//! The simulator runs under `scripts/resync-simulator-local.py`, which binds 127.0.0.1 (the stock
//! simulator binds every interface and has no option against it), reports readiness and the end
//! of the simulation on stdout, holds the first change until told `go`, keeps serving once
//! `max_events` changes are made, and serialises changes with responses (the stock one races: see
//! the wrapper's docs). Its configuration (the
//! wheel ships none) is written to a temporary directory. The process is killed when the test
//! ends, panics included ([`Simulator`]'s `Drop`), and ends by itself when its stdin closes.
//!
//! Scenario, for Change Lists of ResourceSync 1.1 (`datetime`) and 1.0 (`lastmod`):
//! 1. baseline before any change: exit 0, the copy equals the Resource List;
//! 2. before the first change the simulator's `/changelist.xml` answers 500 (its known bug): a
//!    sync or audit then fails with exit 2 naming the Change List, rather than taking it as "no
//!    changes";
//! 3. `go`; once the Change List has changes, `sync --delete` while the Source is changing: a
//!    baseline diff, since the simulator's Change List starts (`from`) at its first change, after
//!    our cursor; a resource that changes between the Resource List and its fetch is fetched
//!    again at the version the Change List then lists (the run catches up from the list's `at`):
//!    exit 0, no failure; and so does a first baseline into another directory, made while the
//!    Source changes;
//! 4. once the simulator has stopped changing: `sync --delete` is incremental (the history now
//!    reaches back to the cursor), exit 0, and `audit` reports in sync; the copy is checked
//!    independently too: exactly the resources of the final Resource List, each with the
//!    simulator's payload (its id repeated to the length, padded with `x`); so is the copy of the
//!    baseline made during the changes, after an incremental sync.
//!
//! Under load ([`simulator_baselines_while_changing_on_a_loaded_machine`]): five first baselines
//! beside two busy loops, from a simulator that keeps about a second of history, each exit 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Seed of the simulator's `random`. Its first change is an update, so the Change List has a
/// `from` (the simulator takes `from` from the first change's `lastmod`, which a 1.1 delete does
/// not have; a Change List without `from` cannot be shown to reach back to any cursor, and every
/// sync would be a baseline diff).
const SEED: &str = "3";
/// Changes the simulator makes, one every CHANGE_DELAY seconds, after `go`.
const MAX_EVENTS: u32 = 60;
const CHANGE_DELAY: f64 = 0.05;
const RESOURCES: usize = 100;
/// Generous: two cores shared with other builds.
const DEADLINE: Duration = Duration::from_secs(120);

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The peers venv: $RESOURCESYNC_PEERS_VENV (set by scripts/test.sh), else <workspace>/.venv-peers.
fn venv() -> PathBuf {
    let v = std::env::var_os("RESOURCESYNC_PEERS_VENV")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".venv-peers"));
    let py = v.join("bin/python");
    let sim = v.join("bin/resync-simulator");
    assert!(
        py.is_file() && sim.is_file(),
        "the Python reference peers are not installed ({} or {} missing): run scripts/python-peers.sh \
         (or scripts/test.sh, which runs it and sets RESOURCESYNC_PEERS_VENV)",
        py.display(),
        sim.display()
    );
    v
}

/// A running simulator; killed (and reaped) on drop, panics included.
struct Simulator {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: PathBuf,
    base: String,
}

impl Drop for Simulator {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Simulator {
    fn start(dir: &Path, spec_version: &str) -> Simulator {
        Simulator::start_with(dir, spec_version, MAX_EVENTS, 1000)
    }

    /// [`Simulator::start`], making `max_events` changes after `go` and keeping the last
    /// `max_changes` of them in its Change List.
    fn start_with(dir: &Path, spec_version: &str, max_events: u32, max_changes: u32) -> Simulator {
        let venv = venv();
        let config = dir.join("simulator.yaml");
        std::fs::write(
            &config,
            format!(
                "source:
  name: resync-simulator (resourcesync interop test)
  number_of_resources: {RESOURCES}
  change_delay: {CHANGE_DELAY}
  event_types: [create, update, delete]
  average_payload: 100
  max_events: {max_events}
  stats_interval: 20
resource_list_builder:
  class: DynamicResourceListBuilder
  uri_path: resourcelist.xml
changememory:
  class: DynamicChangeList
  uri_path: changelist.xml
  max_changes: {max_changes}
"
            ),
        )
        .expect("write the simulator config");
        let logging = dir.join("logging.yaml");
        std::fs::write(
            &logging,
            "version: 1
formatters:
  plain:
    format: '%(asctime)s %(name)s %(levelname)s %(message)s'
handlers:
  stderr:
    class: logging.StreamHandler
    formatter: plain
    stream: ext://sys.stderr
root:
  level: INFO
  handlers: [stderr]
",
        )
        .expect("write the logging config");
        let stderr = dir.join("simulator.log");
        let mut child = Command::new(venv.join("bin/python"))
            .arg(workspace().join("scripts/resync-simulator-local.py"))
            .args(["--wait-for-go", "--seed", SEED, "--"])
            .arg("--config-file")
            .arg(&config)
            .arg("--log-config")
            .arg(&logging)
            .args(["--spec-version", spec_version])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("simulator log file"))
            .spawn()
            .expect("start resync-simulator");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("simulator stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut sim = Simulator {
            child,
            stdin,
            lines,
            stderr,
            base: String::new(),
        };
        let ready = sim.wait_line("READY ");
        sim.base = ready["READY ".len()..].trim().to_owned();
        assert!(
            sim.base.starts_with("http://127.0.0.1:"),
            "not on loopback: {ready}"
        );
        sim
    }

    fn log(&self) -> String {
        let s = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = s.lines().rev().take(40).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// The next stdout line starting with `prefix` (earlier lines are skipped).
    fn wait_line(&mut self, prefix: &str) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!(
                    "no {prefix:?} line from the simulator within {DEADLINE:?}; its log:\n{}",
                    self.log()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "the simulator exited ({:?}) before printing {prefix:?}; its log:\n{}",
                    self.child.try_wait(),
                    self.log()
                ),
            }
        }
    }

    fn go(&mut self) {
        let stdin = self.stdin.as_mut().expect("simulator stdin");
        stdin.write_all(b"go\n").expect("tell the simulator go");
        stdin.flush().expect("flush");
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// GET over HTTP/1.0 with std only: (status, body).
fn get(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut s = TcpStream::connect(host).unwrap_or_else(|e| panic!("connect {host}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read response");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line from {url}: {head}"));
    (status, body.to_owned())
}

/// (loc, length) of every `<url>` of a Resource List as the simulator writes it.
fn list_entries(xml: &str) -> Vec<(String, usize)> {
    xml.split("<url>")
        .skip(1)
        .map(|u| {
            let loc = u
                .split_once("<loc>")
                .and_then(|(_, r)| r.split_once("</loc>"))
                .map(|(l, _)| l.to_owned())
                .unwrap_or_else(|| panic!("no <loc> in {u}"));
            let length = u
                .split_once("length=\"")
                .and_then(|(_, r)| r.split_once('"'))
                .and_then(|(n, _)| n.parse().ok())
                .unwrap_or_else(|| panic!("no length in {u}"));
            (loc, length)
        })
        .collect()
}

/// What the simulator serves for resource `id` of `length` bytes (simulator/source.py
/// `resource_payload`): the id repeated, then `x` up to the length.
fn payload(id: &str, length: usize) -> Vec<u8> {
    let mut p = id.repeat(length / id.len()).into_bytes();
    p.resize(length, b'x');
    p
}

/// Every file under `dir` but the state directory, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    resourcesync_testkit::tree::files(dir, &[".resourcesync"])
        .into_keys()
        .collect()
}

/// The copy is exactly the simulator's current Resource List: same paths, right bytes.
fn assert_copy_matches(sim: &Simulator, dest: &Path) {
    let (status, xml) = get(&sim.url("/resourcelist.xml"));
    assert_eq!(status, 200, "{xml}");
    let entries = list_entries(&xml);
    let prefix = sim.url("/resources/");
    let mut want: Vec<String> = Vec::new();
    for (loc, length) in &entries {
        let id = loc
            .strip_prefix(&prefix)
            .unwrap_or_else(|| panic!("unexpected URI {loc}"));
        let rel = format!("resources/{id}");
        let got = std::fs::read(dest.join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(
            got == payload(id, *length),
            "{rel}: {} bytes, not the simulator's payload of {length} bytes",
            got.len()
        );
        want.push(rel);
    }
    want.sort();
    assert_eq!(files(dest), want, "files under DEST vs the Resource List");
}

fn resourcesync(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        // A safety net: no run may hang the test.
        .args(["--max-time", "300"])
        .output()
        .expect("run resourcesync")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// A UTC W3C datetime (`...:SS[.f]Z`, as the simulator and our cursor write them) as a string
/// that orders like the instant: the fraction padded to 9 digits.
fn instant(t: &str) -> String {
    let t = t
        .strip_suffix('Z')
        .unwrap_or_else(|| panic!("not UTC: {t}"));
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    format!("{secs}.{frac:0<9}")
}

/// Polls until the simulator's Change List answers 200 with at least one change.
fn wait_for_changes(sim: &Simulator) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        let (status, body) = get(&sim.url("/changelist.xml"));
        if status == 200 && body.contains("<url>") {
            return body;
        }
        assert!(
            Instant::now() < end,
            "no change in the simulator's Change List within {DEADLINE:?} (last: HTTP {status}); log:\n{}",
            sim.log()
        );
        std::thread::sleep(Duration::from_millis(20)); // poll interval, not synchronisation
    }
}

fn scenario(spec_version: &str) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut sim = Simulator::start(tmp.path(), spec_version);
    let url = sim.url("/");
    let dest = tmp.path().join("dest");

    // 1. Baseline, before any change.
    let o = resourcesync(&["sync", &url, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "baseline: {}", text(&o));
    let v = json(&o);
    assert_eq!(v["mode"], "baseline", "{v}");
    assert_eq!(v["created"], RESOURCES, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["base_url"], url.as_str(), "{v}");
    let cursor0 = v["cursor"].as_str().expect("a cursor").to_owned();
    assert_copy_matches(&sim, &dest);

    // 2. The simulator's known bug: a 500 for the Change List until the first change.
    a_500_change_list_is_an_error(&sim, &url, &dest);

    // 3. Changes start; sync while the Source is changing.
    sim.go();
    let cl = wait_for_changes(&sim);
    // Premise of the mode asserted below: the Change List starts at its first change, after our
    // cursor (the Resource List's `at` at the baseline).
    let from = cl
        .split_once(" from=\"")
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(f, _)| f.to_owned())
        .unwrap_or_else(|| panic!("premise: a Change List with `from` (seed {SEED}): {cl}"));
    assert!(
        instant(&from) > instant(&cursor0),
        "from {from}, cursor {cursor0}"
    );
    let o = resourcesync(&["sync", &url, p(&dest), "--delete", "--json"]);
    let v = json(&o);
    // A resource that changes between the Resource List and its fetch is fetched again at the
    // version the Change List then lists (the run catches up from the list's `at`): exit 0.
    assert_eq!(
        o.status.code(),
        Some(0),
        "sync during changes: {}",
        text(&o)
    );
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["mode"], "baseline-diff", "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("after the cursor"))),
        "the reason for the baseline diff: {v}"
    );
    let fresh = tmp.path().join("fresh");
    a_baseline_during_changes(&url, &fresh);

    // 4. The Source stops changing: incremental sync, then a clean audit.
    let finished = sim.wait_line("FINISHED ");
    assert!(
        finished.contains(&format!("events={MAX_EVENTS} ")),
        "{finished}"
    );
    let o = resourcesync(&["sync", &url, p(&dest), "--delete", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "sync after the changes: {}",
        text(&o)
    );
    let v = json(&o);
    assert_eq!(v["mode"], "incremental", "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["kept"], 0, "{v}");
    eprintln!(
        "spec {spec_version}: incremental: {} created, {} updated, {} deleted",
        v["created"], v["updated"], v["deleted"]
    );

    let o = resourcesync(&["audit", &url, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "audit: {}", text(&o));
    let a = json(&o);
    assert_eq!(a["in_sync"], true, "{a}");
    assert_eq!(a["missing_count"], 0, "{a}");
    assert_eq!(a["extra_count"], 0, "{a}");
    assert_eq!(a["different_count"], 0, "{a}");
    assert_copy_matches(&sim, &dest);
    // The copy made by a baseline during the changes, caught up since: the same.
    let o = resourcesync(&["sync", &url, p(&fresh), "--delete", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["mode"], "incremental", "{}", text(&o));
    assert_copy_matches(&sim, &fresh);
    let (_, xml) = get(&sim.url("/resourcelist.xml"));
    assert_eq!(
        a["resources"].as_u64(),
        Some(list_entries(&xml).len() as u64),
        "{a}"
    );

    nothing_new(&url, &dest);
}

/// The simulator's known bug: no Change List until the first change (simulator/http.py
/// DynamicChangeListHandler: `change_list.resources[0]` of an empty list). Taken as an error
/// (exit 2, the document named), never as "nothing changed".
fn a_500_change_list_is_an_error(sim: &Simulator, url: &str, dest: &Path) {
    let (status, body) = get(&sim.url("/changelist.xml"));
    assert_eq!(
        status, 500,
        "premise: the Change List is a 500 before any change: {body}"
    );
    assert!(body.contains("IndexError"), "{body}");
    for cmd in ["sync", "audit"] {
        let o = resourcesync(&[cmd, url, p(dest), "--retries", "0"]);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{cmd} on a 500 Change List: {}",
            text(&o)
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("changelist.xml") && err.contains("500"),
            "{cmd}: {}",
            text(&o)
        );
    }
}

/// A first baseline while the Source changes (into `fresh`): a body newer than its listing is
/// fetched again at the version the Change List lists (exit 0); the cursor is the last change
/// caught up, which step 4 checks by syncing this copy too.
fn a_baseline_during_changes(url: &str, fresh: &Path) {
    let o = resourcesync(&["sync", url, p(fresh), "--delete", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "a baseline during changes: {}",
        text(&o)
    );
    let v = json(&o);
    assert_eq!(v["mode"], "baseline", "{v}");
    assert_eq!(v["failed"], 0, "{v}");
}

/// Nothing new: an incremental run that changes nothing.
fn nothing_new(url: &str, dest: &Path) {
    let o = resourcesync(&["sync", url, p(dest), "--delete", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["mode"], "incremental", "{v}");
    for k in ["created", "updated", "deleted", "failed"] {
        assert_eq!(v[k], 0, "{k}: {v}");
    }
}

#[test]
fn simulator_spec_1_1() {
    scenario("1.1");
}

#[test]
fn simulator_spec_1_0() {
    scenario("1.0");
}

/// Busy loops beside a run: threads spinning until dropped (a panic of the test included), so
/// that a run is tried on a loaded machine, not only a quiet one.
struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(n: usize) -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) + 1);
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Changes the simulator makes in the test under load: enough for it to go on changing for the
/// whole test (one every CHANGE_DELAY seconds, slower under load).
const LOADED_EVENTS: u32 = 1000;
/// Changes its Change List keeps in the test under load: about a second of history, as a busy
/// Source keeps a short one. Its `from` is then often after a Resource List's `at`, or absent
/// (its oldest change kept a 1.1 deletion, which has no `lastmod`).
const LOADED_HISTORY: u32 = 20;
/// Baselines taken, one after the other, in the test under load.
const LOADED_BASELINES: usize = 5;

/// First baselines from a Source changing every 0.05 s with a short history, on a loaded
/// machine (two busy loops beside them): a resource a baseline finds deleted (HTTP 404) or
/// changed after the Resource List is caught up from what the Change List lists of it, read
/// again while it lists nothing yet (bounded; `catch_up::MAX_READINGS`), and even when its
/// history does not reach back to the list's `at`: exit 0, no failure, each time.
#[test]
fn simulator_baselines_while_changing_on_a_loaded_machine() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut sim = Simulator::start_with(tmp.path(), "1.1", LOADED_EVENTS, LOADED_HISTORY);
    let url = sim.url("/");
    sim.go();
    wait_for_changes(&sim);
    let runs: Vec<(PathBuf, Output)> = {
        let _busy = Busy::start(2);
        (0..LOADED_BASELINES)
            .map(|i| {
                let dest = tmp.path().join(format!("dest{i}"));
                let o = resourcesync(&["sync", &url, p(&dest), "--delete", "--json"]);
                (dest, o)
            })
            .collect()
    };
    // Premise: the Source was still changing when the last run ended.
    let finished = sim.lines.try_iter().any(|l| l.starts_with("FINISHED "));
    assert!(
        !finished,
        "the simulator stopped changing before the runs ended"
    );
    // Every run that did not end well, with its output (all of them, to count).
    let bad: Vec<String> = runs
        .iter()
        .enumerate()
        .filter(|(_, (dest, o))| {
            o.status.code() != Some(0) || {
                let v = json(o);
                v["mode"] != "baseline" || v["failed"] != 0 || files(dest).is_empty()
            }
        })
        .map(|(i, (_, o))| format!("baseline {i}: {}", text(o)))
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {LOADED_BASELINES} baselines beside two busy loops did not end well (exit 0, no \
         failure):\n{}",
        bad.len(),
        bad.join("\n")
    );
}
