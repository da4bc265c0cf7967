//! Helpers for the tests of `publish`, `serve` and `hub` run through the binary: a served
//! Source, plain HTTP GETs, every document a Source names, its Change Lists' history.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A `resourcesync serve` running, with what it printed.
pub(crate) struct Served {
    pub(crate) child: Child,
    /// The Source Description's URL, from the "serving DIR at URL" line.
    pub(crate) description: String,
    /// `HOST:PORT` it answers at.
    pub(crate) addr: String,
    /// The base URL (the Source Description's, without `.well-known/resourcesync`).
    pub(crate) base: String,
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Served {
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until its standard error says `what` (its reader may lag behind standard output).
    pub(crate) fn said(&self, what: &str) -> String {
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
    pub(crate) fn stop(mut self) -> String {
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
pub(crate) fn try_serve(dir: &Path, args: &[&str]) -> Result<Served, (Option<i32>, String)> {
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

pub(crate) fn serve(dir: &Path, args: &[&str]) -> Served {
    try_serve(dir, args).unwrap_or_else(|(code, err)| panic!("serve exited {code:?}: {err}"))
}

/// A port free a moment ago (for a --base-url that names the port --listen will bind).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port()
}

/// `GET url` over HTTP/1.0 (no chunking, no compression): status and body.
pub(crate) fn get(url: &str) -> (u16, String) {
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
pub(crate) fn urls_in(doc: &str) -> Vec<String> {
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
pub(crate) fn fetch_every_document(base: &str) -> (BTreeSet<String>, BTreeSet<String>) {
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
pub(crate) fn served_history(base: &str) -> Vec<(String, String)> {
    let (status, index) = get(&format!("{base}resourcesync/changelist-index.xml"));
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
pub(crate) fn wait_for_change(base: &str, rel: &str, change: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = (rel.to_owned(), change.to_owned());
    while !served_history(base).contains(&want) {
        assert!(Instant::now() < deadline, "{change} {rel} never listed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `resourcesync ARGS`: exit code and both streams.
pub(crate) fn run(args: &[&str]) -> (Option<i32>, String) {
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

/// The files under `root` (not its state folder, nor other top-level dot entries) and their
/// bytes.
pub(crate) fn files(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    resourcesync_testkit::tree::files_where(root, |rel| !rel.starts_with('.'))
}

/// A Destination follows: `sync URL DEST --delete` exits 0, and `audit` finds it in sync with
/// `src`'s files.
pub(crate) fn follow(description: &str, dest: &Path, src: &Path) -> String {
    let (code, out) = run(&["sync", description, p(dest), "--delete"]);
    assert_eq!(code, Some(0), "sync: {out}");
    let (acode, aout) = run(&["audit", description, p(dest)]);
    assert_eq!(acode, Some(0), "audit: {aout}");
    assert_eq!(files(dest), files(src), "{out}");
    out
}

pub(crate) fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    c.stdin(Stdio::null());
    c
}

pub(crate) fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// How many times `needle` occurs in `hay`.
pub(crate) fn times(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Every document reachable from the Source Description in `out` (published at `base`) is a
/// file there: what a web server serving `out` at `base` would answer.
pub(crate) fn every_document_is_in(out: &Path, base: &str) -> usize {
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
