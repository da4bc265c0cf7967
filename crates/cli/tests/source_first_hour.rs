//! What a new user of `publish`, `serve` and `hub` trips over in the first hour (issues "The
//! first hour" and "Conformance"), each run through the binary as a user would.

#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    c.stdin(Stdio::null());
    c
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// How many times `needle` occurs in `hay`.
fn times(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

// --- Each cause said once (first-hour issue, item 6) ---

/// `serve` and `hub` on a port another program holds: the address once, the cause once, and
/// what to do (before: "Address already in use (os error 98): Address already in use (os error
/// 98)", and the hub said the address twice as well).
#[test]
fn a_busy_port_is_named_once_with_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = holder.local_addr().expect("addr").to_string();
    let hub_state = dir.path().join("hub.sqlite");
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).expect("mkdir");
    for args in [
        vec!["serve", p(&served), "--listen", &addr],
        vec!["hub", "--listen", &addr, "--state", p(&hub_state)],
    ] {
        let o = bin().args(&args).output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(times(&err, &addr), 1, "{args:?}: the address once: {err}");
        assert_eq!(
            times(&err, "Address already in use"),
            1,
            "{args:?}: the cause once: {err}"
        );
        assert!(err.contains("choose another --listen"), "{args:?}: {err}");
    }
    drop(holder);
}

/// `--listen nonsense`: the cause once, and the form expected (before: "invalid socket address:
/// invalid socket address").
#[test]
fn a_listen_address_that_is_no_address_says_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub_state = dir.path().join("hub.sqlite");
    for args in [
        vec!["serve", p(dir.path()), "--listen", "nonsense"],
        vec!["hub", "--listen", "nonsense", "--state", p(&hub_state)],
    ] {
        let o = bin().args(&args).output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(times(&err, "invalid socket address"), 1, "{args:?}: {err}");
        assert_eq!(times(&err, "nonsense"), 1, "{args:?}: {err}");
        assert!(err.contains("HOST:PORT"), "{args:?}: {err}");
    }
}

/// A state database that cannot be opened (a folder where the file should be): the SQLite
/// error once, for the Source's state and the hub's.
#[test]
fn an_unopenable_state_database_says_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("state-is-a-folder");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).expect("mkdir");
    for args in [
        vec![
            "publish",
            p(&served),
            "--base-url",
            "http://example.org/",
            "--state",
            p(&folder),
        ],
        vec!["hub", "--listen", "127.0.0.1:0", "--state", p(&folder)],
    ] {
        let o = bin().args(&args).output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            times(&err, "unable to open database file"),
            1,
            "{args:?}: {err}"
        );
    }
}

// --- Helpers for a served Source ---

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A `resourcesync serve` running, with what it printed.
struct Served {
    child: Child,
    /// The Source Description's URL, from the "serving DIR at URL" line.
    description: String,
    /// `HOST:PORT` it answers at.
    addr: String,
    /// The base URL (the Source Description's, without `.well-known/resourcesync`).
    base: String,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until its standard error says `what` (its reader may lag behind standard output).
    fn said(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let said = self.stderr();
            if said.contains(what) {
                return said;
            }
            assert!(Instant::now() < deadline, "never said {what:?}: {said}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, and a clean exit.
    fn stop(mut self) -> String {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill");
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "serve still running after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status:?}: {}", self.stderr());
        self.stderr()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `resourcesync serve DIR ARGS`; `Err(stderr)` when it exits before serving.
fn try_serve(dir: &Path, args: &[&str]) -> Result<Served, (Option<i32>, String)> {
    let mut child = bin()
        .args(["serve", p(dir)])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn serve");
    let stdout = child.stdout.take().expect("stdout");
    let stderr_pipe = child.stderr.take().expect("stderr");
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
            if let Ok(mut s) = sink.lock() {
                s.push_str(&line);
                s.push('\n');
            }
        }
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => {
                let prefix = format!("serving {} at ", dir.display());
                let Some(url) = line.strip_prefix(&prefix) else {
                    continue;
                };
                let description = url.to_owned();
                let rest = url.strip_prefix("http://").expect("http URL");
                let addr = rest[..rest.find('/').expect("path")].to_owned();
                let base = url
                    .strip_suffix(".well-known/resourcesync")
                    .expect("at the well-known URI")
                    .to_owned();
                return Ok(Served {
                    child,
                    description,
                    addr,
                    base,
                    stderr,
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                assert!(Instant::now() < deadline, "serve did not start");
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Standard output closed without the line: it exited. What it said, once its
                // standard error has been read to the end.
                let st = child.wait().expect("wait");
                let _ = reader.join();
                let said = stderr.lock().map(|s| s.clone()).unwrap_or_default();
                return Err((st.code(), said));
            }
        }
    }
}

fn serve(dir: &Path, args: &[&str]) -> Served {
    try_serve(dir, args).unwrap_or_else(|(code, err)| panic!("serve exited {code:?}: {err}"))
}

/// A port free a moment ago (for a --base-url that names the port --listen will bind).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port()
}

/// `GET url` over HTTP/1.0 (no chunking, no compression): status and body.
fn get(url: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (addr, path) = rest.split_at(rest.find('/').expect("path"));
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{url}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{url}: no status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Every `<loc>` and `href` value of a document.
fn urls_in(doc: &str) -> Vec<String> {
    let mut v = Vec::new();
    for (open, close) in [("<loc>", "</loc>"), ("href=\"", "\"")] {
        let mut rest = doc;
        while let Some(i) = rest.find(open) {
            rest = &rest[i + open.len()..];
            let Some(j) = rest.find(close) else { break };
            v.push(rest[..j].replace("&amp;", "&"));
            rest = &rest[j..];
        }
    }
    v
}

/// Fetches the Source Description at `base` and every document it leads to (through the
/// Capability List, indexes, archives: every URL under `BASE/resourcesync/` any of them names,
/// the page for people included). Every one must answer 200. Returns the documents' URLs and
/// every resource URL they name.
fn fetch_every_document(base: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let docs = format!("{base}resourcesync/");
    let mut todo = vec![format!("{base}.well-known/resourcesync")];
    let mut seen = BTreeSet::new();
    let mut resources = BTreeSet::new();
    while let Some(url) = todo.pop() {
        if !seen.insert(url.clone()) {
            continue;
        }
        let (status, body) = get(&url);
        assert_eq!(status, 200, "{url} is named but answers {status}");
        if url.ends_with(".html") {
            continue;
        }
        for u in urls_in(&body) {
            if u.starts_with(&docs) || u.ends_with("/.well-known/resourcesync") {
                todo.push(u);
            } else {
                resources.insert(u);
            }
        }
    }
    (seen, resources)
}

/// The (path under `base`, change) of every entry of every Change List the Source at `base`
/// serves, in order.
fn served_history(base: &str) -> Vec<(String, String)> {
    let (status, index) = get(&format!("{base}resourcesync/changelist.xml"));
    assert_eq!(status, 200);
    let mut all = Vec::new();
    for cl in urls_in(&index)
        .into_iter()
        .filter(|u| u.contains("/changelists/"))
    {
        let (status, body) = get(&cl);
        assert_eq!(status, 200, "{cl}");
        for entry in body.split("<url>").skip(1) {
            let loc = urls_in(entry).into_iter().next().expect("loc");
            let change = entry
                .split("change=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .expect("change")
                .to_owned();
            let rel = loc
                .strip_prefix(base)
                .unwrap_or_else(|| panic!("{loc} is not under {base}"))
                .to_owned();
            all.push((rel, change));
        }
    }
    all
}

/// Waits until the Source's Change Lists list `change` of `rel`.
fn wait_for_change(base: &str, rel: &str, change: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = (rel.to_owned(), change.to_owned());
    while !served_history(base).contains(&want) {
        assert!(Instant::now() < deadline, "{change} {rel} never listed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `resourcesync ARGS`: exit code and both streams.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let o = bin().args(args).output().expect("run");
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The files under `root` (not its state folder) and their bytes.
fn files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut m = std::collections::BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = e.path();
            let rel = path.strip_prefix(root).expect("under").to_string_lossy();
            if rel.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                todo.push(path);
            } else {
                m.insert(rel.into_owned(), std::fs::read(&path).expect("read"));
            }
        }
    }
    m
}

/// A Destination follows: `sync URL DEST --delete` exits 0, and `audit` finds it in sync with
/// `src`'s files.
fn follow(description: &str, dest: &Path, src: &Path) -> String {
    let (code, out) = run(&["sync", description, p(dest), "--delete"]);
    assert_eq!(code, Some(0), "sync: {out}");
    let (acode, aout) = run(&["audit", description, p(dest)]);
    assert_eq!(acode, Some(0), "audit: {aout}");
    assert_eq!(files(dest), files(src), "{out}");
    out
}

// --- A Source that moves (first-hour issue, item 7) ---

/// `serve DIR --listen 127.0.0.1:0` three times (before: every run after the first failed, "the
/// state … was published under http://127.0.0.1:PORT1/, not …PORT2/"), then under a new base
/// URL with `--move`, with a Destination following throughout: each run serves every document
/// under its own URLs, carries the Change List history over (Z39.99-2014 §12.1: the same
/// changes, under the new URIs), and `sync` + `audit` through the new URL leave the copy in
/// sync.
#[test]
fn a_source_served_on_port_0_follows_its_address_and_moves_with_move() {
    let work = tempfile::tempdir().expect("tempdir");
    let src = work.path().join("src");
    let dest = work.path().join("dest");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("a.txt"), "alpha\n").expect("write");
    std::fs::write(src.join("b.txt"), "beta\n").expect("write");

    // Run 1: a baseline, then a change the Destination gets from the Change List.
    let s1 = serve(&src, &["--listen", "127.0.0.1:0"]);
    follow(&s1.description, &dest, &src);
    std::fs::write(src.join("c.txt"), "gamma\n").expect("write");
    wait_for_change(&s1.base, "c.txt", "created");
    let out = follow(&s1.description, &dest, &src);
    assert!(out.contains("incremental"), "{out}");
    let base1 = s1.base.clone();
    let port1 = s1.addr.clone();
    s1.stop();

    // Changed while nobody serves it; run 2 on another port (the first one held meanwhile, so
    // that it cannot be picked again).
    std::fs::write(src.join("a.txt"), "alpha, edited while down\n").expect("write");
    let holder = std::net::TcpListener::bind(&port1).expect("hold the first port");
    let s2 = serve(&src, &["--listen", "127.0.0.1:0"]);
    drop(holder);
    assert_ne!(s2.base, base1);
    s2.said(&format!("moved the Source from {base1} to {}", s2.base));
    let (docs, resources) = fetch_every_document(&s2.base);
    assert!(docs.len() >= 8, "{docs:?}");
    assert!(
        resources.iter().all(|u| u.starts_with(&s2.base)),
        "{resources:?}"
    );
    let history = served_history(&s2.base);
    assert!(
        history.contains(&("c.txt".into(), "created".into())),
        "{history:?}"
    );
    assert!(
        history.contains(&("a.txt".into(), "updated".into())),
        "{history:?}"
    );
    follow(&s2.description, &dest, &src);
    std::fs::remove_file(src.join("b.txt")).expect("rm");
    wait_for_change(&s2.base, "b.txt", "deleted");
    let out = follow(&s2.description, &dest, &src);
    assert!(out.contains("incremental"), "{out}");
    let base2 = s2.base.clone();
    s2.stop();

    // Run 3 under a URL somebody chose: not without --move (the error says how), then moved.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let base3 = format!("http://127.0.0.1:{port}/moved/");
    let (code, err) = try_serve(&src, &["--listen", &listen, "--base-url", &base3])
        .map(|_| ())
        .expect_err("a given URL does not take the Source over by itself");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--move"), "{err}");
    assert_eq!(
        times(&err, &base2),
        2,
        "the old URL, and --base-url OLD: {err}"
    );
    let s3 = serve(&src, &["--listen", &listen, "--base-url", &base3, "--move"]);
    assert_eq!(s3.base, base3);
    s3.said(&format!("moved the Source from {base2} to {base3}"));
    let (docs, resources) = fetch_every_document(&base3);
    assert!(docs.len() >= 8, "{docs:?}");
    assert!(
        resources.iter().all(|u| u.starts_with(&base3)),
        "{resources:?}"
    );
    let history = served_history(&base3);
    for want in [
        ("c.txt", "created"),
        ("a.txt", "updated"),
        ("b.txt", "deleted"),
    ] {
        assert!(
            history.contains(&(want.0.into(), want.1.into())),
            "{want:?} carried over: {history:?}"
        );
    }
    follow(&s3.description, &dest, &src);
    std::fs::write(src.join("d.txt"), "delta\n").expect("write");
    wait_for_change(&base3, "d.txt", "created");
    let out = follow(&s3.description, &dest, &src);
    assert!(out.contains("incremental"), "{out}");
    s3.stop();
}

// --- `publish`, then `serve`, on one directory (conformance issue, item 4) ---

/// Every document reachable from the Source Description in `out` (published at `base`) is a
/// file there: what a web server serving `out` at `base` would answer.
fn every_document_is_in(out: &Path, base: &str) -> usize {
    let docs = format!("{base}resourcesync/");
    let mut todo = vec![format!("{base}.well-known/resourcesync")];
    let mut seen = BTreeSet::new();
    while let Some(url) = todo.pop() {
        if !seen.insert(url.clone()) {
            continue;
        }
        let path = out.join(url.strip_prefix(base).expect("under base"));
        let body = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{url} is named but {}: {e}", path.display()));
        if url.ends_with(".html") {
            continue;
        }
        todo.extend(urls_in(&body).into_iter().filter(|u| u.starts_with(&docs)));
    }
    seen.len()
}

/// `publish` (into DIR or `--out OUT`, with the default state or `--state S`) and `serve` (with
/// the default state or `--state S`) on one directory, every pair, in both orders: `publish`
/// twice, `serve` (every document its Capability List names, recursively through indexes and
/// archives, answers 200), `publish` again (every document in its output directory), `serve`
/// again (all 200). Before: a `serve` sharing the state of a `publish --out OUT` advertised a
/// Resource List it did not have (404), and closed Change Lists too.
#[test]
fn every_document_a_capability_list_names_is_served_after_publish() {
    for publish_out in [false, true] {
        for publish_state in [false, true] {
            for serve_state in [false, true] {
                let what = format!(
                    "publish{}{}, serve{}",
                    if publish_out { " --out OUT" } else { "" },
                    if publish_state { " --state S" } else { "" },
                    if serve_state { " --state S" } else { "" },
                );
                let work = tempfile::tempdir().expect("tempdir");
                let dir = work.path().join("dir");
                let out = work.path().join("out");
                let state = work.path().join("state").join("s.sqlite");
                std::fs::create_dir_all(&dir).expect("mkdir");
                std::fs::write(dir.join("a.txt"), "alpha\n").expect("write");
                let port = free_port();
                let base = format!("http://127.0.0.1:{port}/");
                let listen = format!("127.0.0.1:{port}");
                // A Change List per change: closed ones, and archives with entries.
                let common = ["--changelist-max-entries", "1"];
                let publish = |n: &str| {
                    std::fs::write(dir.join(format!("{n}.txt")), n).expect("write");
                    let mut args = vec!["publish", p(&dir), "--base-url", &base];
                    args.extend(common);
                    if publish_out {
                        args.extend(["--out", p(&out)]);
                    }
                    if publish_state {
                        args.extend(["--state", p(&state)]);
                    }
                    let (code, said) = run(&args);
                    assert_eq!(code, Some(0), "{what}: {said}");
                    every_document_is_in(if publish_out { &out } else { &dir }, &base)
                };
                let serve_and_fetch = |n: &str| {
                    std::fs::write(dir.join(format!("{n}.txt")), n).expect("write");
                    let mut args = vec!["--listen", &listen];
                    args.extend(common);
                    if serve_state {
                        args.extend(["--state", p(&state)]);
                    }
                    let s = serve(&dir, &args);
                    assert_eq!(s.base, base, "{what}");
                    let (docs, _) = fetch_every_document(&base);
                    s.stop();
                    docs.len()
                };
                publish("b");
                publish("c");
                let served = serve_and_fetch("d");
                assert!(served >= 8, "{what}: {served} documents");
                publish("e");
                serve_and_fetch("f");
            }
        }
    }
}

// --- Small things (first-hour issue, item 8) ---

/// Every command takes the global `-q` and `-v` (before: `publish`, `serve`, `audit` and the
/// others refused them, and `sync -v` demanded `--watch`).
#[test]
fn every_command_takes_quiet_and_verbose() {
    let commands = [
        "demo", "validate", "inspect", "publish", "serve", "sync", "audit", "explore", "simulate",
        "hub",
    ];
    for c in commands {
        for flag in ["-q", "-v", "--quiet", "--verbose"] {
            let (code, out) = run(&[c, flag, "--help"]);
            assert_eq!(code, Some(0), "{c} {flag}: {out}");
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out) = run(&[
        "publish",
        "-q",
        "-v",
        p(dir.path()),
        "--base-url",
        "http://x/",
    ]);
    assert_eq!(code, Some(2), "-q and -v together: {out}");
    assert!(out.contains("cannot be used with"), "{out}");
}

/// What `-q` and `-v` do, command by command, run for real: `publish -q` says nothing,
/// `publish -v` lists what it wrote, `sync -v` without `--watch` syncs, `audit -q` audits,
/// `serve -q` logs no change, `serve -v` logs its debug lines.
#[test]
fn quiet_and_verbose_mean_something_for_each_command() {
    let work = tempfile::tempdir().expect("tempdir");
    let src = work.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("a.txt"), "alpha\n").expect("write");
    let static_dir = work.path().join("static");
    std::fs::create_dir_all(&static_dir).expect("mkdir");
    std::fs::write(static_dir.join("a.txt"), "alpha\n").expect("write");

    let o = bin()
        .args([
            "-q",
            "publish",
            p(&static_dir),
            "--base-url",
            "http://x.example/",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty() && o.stderr.is_empty(), "{o:?}");
    std::fs::write(static_dir.join("b.txt"), "beta\n").expect("write");
    let (code, out) = run(&[
        "publish",
        "-v",
        p(&static_dir),
        "--base-url",
        "http://x.example/",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("  ") && l.ends_with("capabilitylist.xml")),
        "every document written, one a line: {out}"
    );

    let s = serve(&src, &["-v", "--listen", "127.0.0.1:0"]);
    s.said("DEBUG");
    s.said("first scan and publish");
    let dest = work.path().join("dest");
    let (code, out) = run(&["sync", "-v", &s.description, p(&dest)]);
    assert_eq!(code, Some(0), "sync -v without --watch: {out}");
    let (code, out) = run(&["audit", "-q", &s.description, p(&dest)]);
    assert_eq!(code, Some(0), "audit -q: {out}");
    s.stop();

    let s = serve(&src, &["-q", "--listen", "127.0.0.1:0"]);
    std::fs::write(src.join("c.txt"), "gamma\n").expect("write");
    wait_for_change(&s.base, "c.txt", "created");
    let said = s.stop();
    assert!(
        !said.contains("INFO") && !said.contains("changes published"),
        "serve -q logs warnings and errors only: {said}"
    );
}

/// Sizes in binary units and counts with the right noun in the text of `publish`, `serve` and
/// `hub` (before: "1 resources (…; 1 files read, 6 bytes)", "1 part(s)", "0 subscription(s), 0
/// delivery(ies)"); exact bytes stay in `--json`.
#[test]
fn publish_serve_and_hub_say_sizes_in_units_and_counts_in_words() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("dir");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("big.bin"), vec![7u8; 3 << 19]).expect("write");
    let (code, out) = run(&["publish", p(&dir), "--base-url", "http://x.example/"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with("1 resource, 1.5 MiB (baseline"),
        "units and the singular: {out}"
    );
    assert!(out.contains("1 file read, 1.5 MiB)"), "{out}");
    assert!(
        out.contains("Resource List in 1 part, 1 Change List;"),
        "{out}"
    );
    assert!(!out.contains("(s)") && !out.contains(" bytes"), "{out}");
    std::fs::write(dir.join("small.txt"), "abc").expect("write");
    let (code, out) = run(&[
        "publish",
        p(&dir),
        "--base-url",
        "http://x.example/",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["bytes"].as_u64(), Some((3 << 19) + 3), "{v}");
    assert_eq!(v["bytes_hashed"].as_u64(), Some(3), "{v}");

    let serve_dir = work.path().join("served");
    std::fs::create_dir_all(&serve_dir).expect("mkdir");
    std::fs::write(serve_dir.join("a.txt"), vec![b'a'; 2048]).expect("write");
    let mut child = bin()
        .args(["serve", p(&serve_dir), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let second = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.starts_with("serving "), "{first}");
    assert_eq!(
        second,
        "1 resource, 2.0 KiB (first scan: 1 file read, 2.0 KiB)"
    );

    let state = work.path().join("hub.sqlite");
    let mut child = bin()
        .args(["hub", "--listen", "127.0.0.1:0", "--state", p(&state)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hub");
    let line = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.contains("(0 subscriptions, 0 deliveries pending;"),
        "{line}"
    );
}

/// Progress of a long scan: drawn on a terminal once the work has taken its delay (two
/// seconds; `RESOURCESYNC_PROGRESS_AFTER_MS` shortens it here), never in a pipe, never with
/// `-q`, and not for work that ends before the delay. The terminal is `script`'s (util-linux).
#[test]
fn long_scans_show_progress_on_a_terminal_and_nothing_in_pipes() {
    let has_script = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_script {
        eprintln!("no `script` command (util-linux): no terminal to test progress on");
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    let fresh = |name: &str| {
        let d = work.path().join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        for i in 0..50 {
            std::fs::write(d.join(format!("f{i}.txt")), format!("file {i}\n")).expect("write");
        }
        d
    };
    // `publish DIR` on a terminal (`script` runs it under a pseudo-terminal and copies what
    // it draws to its own standard output).
    let on_terminal = |dir: &Path, flags: &str, after_ms: Option<&str>| -> String {
        let cmd = format!(
            "'{}' {flags} publish '{}' --base-url http://x.example/",
            env!("CARGO_BIN_EXE_resourcesync"),
            p(dir)
        );
        let mut c = Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null());
        c.env_remove("RESOURCESYNC_PROGRESS_AFTER_MS");
        if let Some(ms) = after_ms {
            c.env("RESOURCESYNC_PROGRESS_AFTER_MS", ms);
        }
        let o = c.output().expect("script");
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let shown = on_terminal(&fresh("a"), "", Some("0"));
    assert!(shown.contains("publish "), "progress drawn: {shown:?}");
    assert!(shown.contains("\x1b[2K"), "and cleared: {shown:?}");
    assert!(
        shown.contains("50 resources"),
        "then the summary: {shown:?}"
    );
    let quiet = on_terminal(&fresh("b"), "-q", Some("0"));
    assert!(quiet.is_empty(), "-q draws nothing: {quiet:?}");
    // Quick work within the two seconds: nothing drawn.
    let quick = on_terminal(&fresh("c"), "", None);
    assert!(!quick.contains("\x1b[2K"), "{quick:?}");
    assert!(quick.starts_with("50 resources"), "{quick:?}");
    // A pipe: nothing but the summary, whatever the delay.
    let o = bin()
        .args(["publish", p(&fresh("d")), "--base-url", "http://x.example/"])
        .env("RESOURCESYNC_PROGRESS_AFTER_MS", "0")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains('\x1b'));
}
