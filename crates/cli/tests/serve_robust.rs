//! `resourcesync serve` against hostile and heavy clients (issue 7 item 4): a load of keep-alive
//! clients for 30 s with every answer checked (0 errors); traversal in every spelling; huge
//! request heads (431 or a clean close, and the server still answers); 10,000 idle connections
//! with the server's memory growth measured; the state directory never reachable. Linux only
//! (the server's memory is read from /proc).
//!
//! The load generator is written here in Rust rather than driving `wrk`: nothing to install in
//! CI (so the test cannot be skipped for a missing tool), and every response's status and body
//! are checked against the file served, which `wrk` does not do. `bench/serve-vs-nginx.sh`
//! remains the throughput benchmark. [`Server`] and [`load`] take any command and paths, so that
//! `resourcesync hub` can be put under the same load with a few lines.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// A server process; killed when dropped.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    /// Runs `resourcesync ARGS... --listen 127.0.0.1:0` and waits for its first line, "... at
    /// URL" or "... at URL (...)".
    fn start(args: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
        cmd.args(args).stderr(Stdio::null());
        Server::spawn(cmd)
    }

    /// [`Server::start`] with a command of the caller's (working directory, environment,
    /// standard error).
    fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a first line");
        // "... at URL" (serve) or "... at URL (details)" (hub).
        let url = line
            .split(" at http")
            .nth(1)
            .map(|u| format!("http{}", u.split_whitespace().next().unwrap_or("")))
            .expect("a URL after \" at \"");
        let rest = url.strip_prefix("http://").expect("http URL");
        let addr = rest[..rest.find('/').unwrap_or(rest.len())].to_owned();
        Server { child, addr }
    }

    /// Resident memory in KiB.
    fn rss_kib(&self) -> u64 {
        let s =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("status");
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn served_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..50 {
        let body = format!("resource {i}\n").repeat(1 + i * 40);
        std::fs::create_dir_all(dir.path().join(format!("d{}", i % 5))).expect("mkdir");
        std::fs::write(dir.path().join(format!("d{}/r{i}.txt", i % 5)), body).expect("write");
    }
    dir
}

/// Reads one response: (status, headers lower-cased, body). `None` when the connection closed
/// or failed before a whole response.
fn read_response<R: BufRead>(r: &mut R) -> Option<(u16, BTreeMap<String, String>, Vec<u8>)> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let status = line.split(' ').nth(1)?.parse().ok()?;
    let mut headers = BTreeMap::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            let n = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        let n: usize = headers.get("content-length")?.parse().ok()?;
        body.resize(n, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some((status, headers, body))
}

fn get(addr: &str, target: &str) -> Option<(u16, Vec<u8>)> {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (&s).write_all(
        format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let (status, _, body) = read_response(&mut BufReader::new(&s))?;
    Some((status, body))
}

/// Sends one request on a new connection: (status, body).
fn exchange(addr: &str, q: &Req) -> Option<(u16, Vec<u8>)> {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (&s).write_all(&q.bytes(addr)).ok()?;
    let (status, _, body) = read_response(&mut BufReader::new(&s))?;
    Some((status, body))
}

/// What a load run saw.
#[derive(Debug, Default)]
struct Load {
    requests: u64,
    errors: u64,
    first_error: Option<String>,
}

/// One request of a load: what to send and what must come back.
#[derive(Debug, Clone)]
struct Req {
    method: &'static str,
    target: String,
    /// Extra header lines, each ending in CRLF.
    headers: String,
    body: Vec<u8>,
    status: u16,
    /// The body that must come back, when checked.
    want: Option<Vec<u8>>,
}

impl Req {
    /// A GET that must answer 200 (with `want` as its body when given).
    fn get(target: impl Into<String>, want: Option<Vec<u8>>) -> Req {
        Req {
            method: "GET",
            target: target.into(),
            headers: String::new(),
            body: Vec::new(),
            status: 200,
            want,
        }
    }

    fn bytes(&self, addr: &str) -> Vec<u8> {
        let mut out = format!(
            "{} {} HTTP/1.1\r\nHost: {addr}\r\n{}",
            self.method, self.target, self.headers
        );
        if !self.body.is_empty() || self.method == "POST" {
            out.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

/// `clients` keep-alive connections sending `reqs` round-robin for `secs`; each answer must
/// have the expected status (and body, when given). Reconnects only when the server closes.
fn load(addr: &str, reqs: &[Req], clients: usize, secs: u64) -> Load {
    let reqs = Arc::new(reqs.to_vec());
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for c in 0..clients {
        let (reqs, stop, requests, addr) = (
            reqs.clone(),
            stop.clone(),
            requests.clone(),
            addr.to_owned(),
        );
        handles.push(std::thread::spawn(move || -> (u64, Option<String>) {
            let mut errors = 0u64;
            let mut first = None;
            let mut i = c * 7;
            'outer: while !stop.load(Ordering::Relaxed) {
                let s = TcpStream::connect(&addr).expect("connect");
                s.set_read_timeout(Some(Duration::from_secs(30)))
                    .expect("timeout");
                let mut r = BufReader::new(&s);
                while !stop.load(Ordering::Relaxed) {
                    let q = &reqs[i % reqs.len()];
                    let t = &q.target;
                    i += 1;
                    if let Err(e) = (&s).write_all(&q.bytes(&addr)) {
                        errors += 1;
                        first.get_or_insert(format!("{t}: write: {e}"));
                        continue 'outer;
                    }
                    requests.fetch_add(1, Ordering::Relaxed);
                    match read_response(&mut r) {
                        Some((st, h, body)) if st == q.status => {
                            if q.want.as_ref().is_some_and(|w| *w != body) {
                                errors += 1;
                                first.get_or_insert(format!("{t}: wrong body"));
                            }
                            if h.get("connection")
                                .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                            {
                                continue 'outer;
                            }
                        }
                        Some((st, _, body)) => {
                            errors += 1;
                            first.get_or_insert(format!(
                                "{} {t}: HTTP {st}: {}",
                                q.method,
                                String::from_utf8_lossy(&body)
                            ));
                        }
                        None => {
                            errors += 1;
                            first.get_or_insert(format!("{t}: connection failed"));
                            continue 'outer;
                        }
                    }
                }
            }
            (errors, first)
        }));
    }
    // The duration is the load being applied, not a wait for an event.
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let mut out = Load::default();
    for h in handles {
        let (e, f) = h.join().expect("client");
        out.errors += e;
        if out.first_error.is_none() {
            out.first_error = f;
        }
    }
    out.requests = requests.load(Ordering::Relaxed);
    out
}

fn serve(dir: &Path) -> Server {
    Server::start(&["serve", dir.to_str().expect("utf-8"), "--no-watch"])
}

#[test]
fn serve_under_load_for_30_s_answers_every_request() {
    let secs = std::env::var("RESOURCESYNC_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let dir = served_dir();
    let server = serve(dir.path());
    let mut targets: Vec<Req> = (0..50)
        .map(|i| {
            let p = format!("d{}/r{i}.txt", i % 5);
            let body = std::fs::read(dir.path().join(&p)).expect("read");
            Req::get(format!("/{p}"), Some(body))
        })
        .collect();
    for doc in [
        "/.well-known/resourcesync",
        "/resourcesync/capabilitylist.xml",
        "/robots.txt",
        "/",
    ] {
        targets.push(Req::get(doc, None));
    }
    let started = Instant::now();
    let l = load(&server.addr, &targets, 8, secs);
    let rate = l.requests as f64 / started.elapsed().as_secs_f64();
    eprintln!(
        "serve: {} requests in {secs} s ({rate:.0}/s), {} errors",
        l.requests, l.errors
    );
    assert_eq!(l.errors, 0, "first error: {:?}", l.first_error);
    assert!(l.requests > 1000, "{l:?}");
}

#[test]
fn traversal_and_the_state_directory_are_never_served() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("served");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("ok.txt"), "ok").expect("write");
    std::fs::write(parent.path().join("secret.txt"), "TOPSECRET").expect("write");
    std::os::unix::fs::symlink(parent.path().join("secret.txt"), dir.join("link.txt"))
        .expect("symlink");
    let server = serve(&dir);
    assert_eq!(get(&server.addr, "/ok.txt"), Some((200, b"ok".to_vec())));
    let attacks = [
        "/../secret.txt",
        "/served/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/..%2fsecret.txt",
        "/..%5csecret.txt",
        "/..\\secret.txt",
        "/ok.txt%00.html",
        "//secret.txt",
        "/link.txt",
        "/.resourcesync/state.sqlite",
        "/%2eresourcesync/state.sqlite",
        "/.resourcesync/www/resourcesync/capabilitylist.xml",
        "/.resourcesync",
        "/.resourcesync/",
        "../secret.txt",
        "http://127.0.0.1/../secret.txt",
        "*",
    ];
    for a in attacks {
        let r = get(&server.addr, a);
        eprintln!("{a}: {:?}", r.as_ref().map(|(s, _)| s));
        if let Some((status, body)) = r {
            assert!(matches!(status, 400 | 404), "{a}: HTTP {status}");
            let text = String::from_utf8_lossy(&body);
            assert!(
                !text.contains("TOPSECRET") && !text.contains("SQLite format"),
                "{a}: {text}"
            );
        }
    }
    assert!(
        dir.join(".resourcesync/state.sqlite").is_file(),
        "the state exists"
    );
    assert_eq!(get(&server.addr, "/ok.txt"), Some((200, b"ok".to_vec())));
}

#[test]
fn huge_request_heads_get_431_or_a_clean_close() {
    let dir = served_dir();
    let server = serve(dir.path());
    huge_heads(&server, "/d0/r0.txt");
}

/// Huge request heads to `server` get 431 (or 414, 400) or a clean close, and `probe` still
/// answers 200 after them.
fn huge_heads(server: &Server, probe: &str) {
    let one_big = format!("X-Big: {}\r\n", "a".repeat(1 << 20));
    let many: String = (0..10_000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let long_target = format!("/{}", "a".repeat(1 << 20));
    for (name, head) in [
        (
            "a 1 MiB header",
            format!("GET {probe} HTTP/1.1\r\nHost: x\r\n{one_big}\r\n"),
        ),
        (
            "10,000 headers",
            format!("GET {probe} HTTP/1.1\r\nHost: x\r\n{many}\r\n"),
        ),
        (
            "a 1 MiB target",
            format!("GET {long_target} HTTP/1.1\r\nHost: x\r\n\r\n"),
        ),
    ] {
        let s = TcpStream::connect(&server.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        // The server may close while the head is still being sent.
        let _ = (&s).write_all(head.as_bytes());
        let r = read_response(&mut BufReader::new(&s));
        eprintln!("{name}: {:?}", r.as_ref().map(|(st, _, _)| st));
        if let Some((status, _, _)) = r {
            assert!(matches!(status, 431 | 414 | 400), "{name}: HTTP {status}");
        }
    }
    let (status, _) = get(&server.addr, probe).expect("still serving");
    assert_eq!(status, 200);
}

/// Idle connections held by [`idle_connections`].
const IDLE: usize = 10_000;

/// Raises this process's open-file limit (inherited by the server it starts) to `n`.
fn raise_nofile(n: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let cur = getrlimit(Resource::Nofile);
    let want = Some(cur.maximum.map_or(n, |m| m.min(n)));
    if cur.current < want {
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: want,
                maximum: cur.maximum,
            },
        )
        .expect("setrlimit");
    }
    let now = getrlimit(Resource::Nofile).current;
    assert!(
        now.is_none_or(|c| c >= n),
        "RLIMIT_NOFILE is {now:?}, below {n}: raise the hard limit (ulimit -Hn) for this test"
    );
}

#[test]
fn ten_thousand_idle_connections_keep_memory_bounded() {
    // Before the server starts: it inherits the limit.
    raise_nofile(IDLE as u64 + 1_000);
    let dir = served_dir();
    let server = serve(dir.path());
    idle_connections("serve", &server, "/d0/r0.txt");
}

/// 10,000 idle connections to `server`, half of them with an unfinished request head: `probe`
/// is answered 200 while they are held and after, and the server's memory grows by less than
/// 64 KiB per connection.
fn idle_connections(label: &str, server: &Server, probe: &str) {
    // Warm up: the documents are generated, the runtime's threads started.
    assert_eq!(get(&server.addr, probe).map(|r| r.0), Some(200));
    let before = server.rss_kib();
    let t0 = Instant::now();
    let mut idle = Vec::with_capacity(IDLE);
    for k in 0..IDLE {
        idle.push(TcpStream::connect(&server.addr).expect("connect"));
        // The accept queue is first in, first out: an answered request on a new connection
        // means every connection before it was accepted. Batches below the listen backlog
        // (1,024) keep the kernel from dropping handshakes (and retrying them a second later).
        if k % 500 == 499 {
            assert_eq!(get(&server.addr, probe).map(|r| r.0), Some(200));
        }
    }
    eprintln!("{label}: connected in {:?}", t0.elapsed());
    // Half of them send an unfinished request head and stop.
    for s in idle.iter_mut().step_by(2) {
        s.write_all(format!("GET {probe} HTTP/1.1\r\nHost: x\r\n").as_bytes())
            .expect("partial head");
    }
    // Served while they are held: the accept loop took them all.
    let (status, _) = get(&server.addr, probe).expect("served under idle load");
    assert_eq!(status, 200);
    let after = server.rss_kib();
    let per = (after.saturating_sub(before) * 1024) / IDLE as u64;
    eprintln!(
        "{label}: RSS {before} KiB -> {after} KiB with {IDLE} idle connections ({per} bytes each)"
    );
    assert!(per < 64 * 1024, "{per} bytes per idle connection");
    drop(idle);
    let (status, _) = get(&server.addr, probe).expect("served after");
    assert_eq!(status, 200);
}

// ---------------------------------------------------------------------------------------------
// `resourcesync hub` (issue 7 item 4, WebSub hub side).

fn hub(state: &Path) -> Server {
    Server::start(&["hub", "--state", state.to_str().expect("utf-8")])
}

/// Percent-encodes everything but unreserved characters (a form value).
fn form_value(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A form POST to the hub.
fn form(params: &[(&str, &str)], status: u16) -> Req {
    let body: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", form_value(v)))
        .collect();
    Req {
        method: "POST",
        target: "/".into(),
        headers: "Content-Type: application/x-www-form-urlencoded\r\n".into(),
        body: body.join("&").into_bytes(),
        status,
        want: None,
    }
}

/// A ResourceSync notification POST (Change Notification 1.0.1 §4.1).
fn notification(hub: &str, topic: &str, body: &[u8], status: u16) -> Req {
    Req {
        method: "POST",
        target: "/".into(),
        headers: format!(
            "Content-Type: application/xml\r\nLink: <{topic}>; rel=\"self\", <http://{hub}/>; rel=\"hub\"\r\n"
        ),
        body: body.to_vec(),
        status,
        want: None,
    }
}

const PAYLOAD: &[u8] = br#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="change-notification" from="2026-01-01T00:00:00Z" until="2026-01-01T00:00:01Z"/>
  <url><loc>http://example.org/a.txt</loc><rs:md change="updated" datetime="2026-01-01T00:00:01Z"/></url>
</urlset>
"#;

const SECRET: &str = "a-shared-secret";

/// What the test's subscriber saw.
#[derive(Debug, Default)]
struct Seen {
    verifications: AtomicU64,
    denials: AtomicU64,
    deliveries: AtomicU64,
    bad_signatures: AtomicU64,
}

/// A request read: (method, target, headers lower-cased, body).
type Request = (String, String, BTreeMap<String, String>, Vec<u8>);

/// Reads one request.
fn read_request<R: BufRead>(r: &mut R) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut it = line.split(' ');
    let method = it.next()?.to_owned();
    let target = it.next()?.to_owned();
    let mut headers = BTreeMap::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let n: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; n];
    r.read_exact(&mut body).ok()?;
    Some((method, target, headers, body))
}

/// The test's WebSub subscriber on loopback (a thread per connection, keep-alive): answers
/// verification of intent with the challenge (WebSub §5.3.1), denials with 200, and deliveries
/// with 200 when their `X-Hub-Signature` is right (§7.1.2), 403 otherwise.
fn subscriber() -> (String, Arc<Seen>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let seen = s2.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(&conn);
                while let Some((method, target, headers, body)) = read_request(&mut r) {
                    let query = target.split_once('?').map_or("", |(_, q)| q);
                    let param = |name: &str| {
                        query.split('&').find_map(|kv| {
                            kv.strip_prefix(name)
                                .and_then(|v| v.strip_prefix('='))
                                .map(str::to_owned)
                        })
                    };
                    let (status, answer) = if method == "GET" {
                        if let Some(c) = param("hub.challenge") {
                            seen.verifications.fetch_add(1, Ordering::Relaxed);
                            (200, c)
                        } else {
                            if param("hub.mode").as_deref() == Some("denied") {
                                seen.denials.fetch_add(1, Ordering::Relaxed);
                            }
                            (200, String::new())
                        }
                    } else if resourcesync_websub::signature::verify(
                        SECRET.as_bytes(),
                        headers.get("x-hub-signature").map(String::as_str),
                        &body,
                    )
                    .is_ok()
                    {
                        seen.deliveries.fetch_add(1, Ordering::Relaxed);
                        (200, String::new())
                    } else {
                        seen.bad_signatures.fetch_add(1, Ordering::Relaxed);
                        (403, String::new())
                    };
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if (&conn).write_all(resp.as_bytes()).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// A realistic mix for the hub: subscriptions (renewed again and again) and unsubscriptions
/// whose verification the test's subscriber answers, notifications published the ResourceSync
/// way to topics with subscribers (each fanned out to signed deliveries), and GETs of paths
/// the hub does not have (it answers every GET with its description).
fn hub_mix(hub: &str, sub: &str) -> Vec<Req> {
    let mut reqs = Vec::new();
    for k in 0..16 {
        let topic = format!("http://{sub}/topic{}", k % 4);
        let callback = format!("http://{sub}/cb{k}?client=x&k={k}");
        reqs.push(form(
            &[
                ("hub.mode", "subscribe"),
                ("hub.topic", &topic),
                ("hub.callback", &callback),
                ("hub.secret", SECRET),
                ("hub.lease_seconds", "600"),
                ("unknown.parameter", "ignored"),
            ],
            202,
        ));
        let churn = format!("http://{sub}/churn{k}");
        for mode in ["subscribe", "unsubscribe"] {
            reqs.push(form(
                &[
                    ("hub.mode", mode),
                    ("hub.topic", &format!("http://{sub}/quiet")),
                    ("hub.callback", &churn),
                ],
                202,
            ));
        }
        for _ in 0..10 {
            reqs.push(notification(hub, &topic, PAYLOAD, 200));
        }
        for path in ["/", "/unknown", "/resourcesync-hub.sqlite", "/hub?x=1"] {
            reqs.push(Req::get(path, None));
        }
        reqs.push(Req {
            method: "PUT",
            status: 405,
            ..Req::get("/", None)
        });
    }
    reqs
}

#[test]
fn hub_under_load_for_30_s_answers_every_request() {
    let secs = std::env::var("RESOURCESYNC_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    let (sub, seen) = subscriber();
    let reqs = hub_mix(&server.addr, &sub);
    let before = server.rss_kib();
    let started = Instant::now();
    let l = load(&server.addr, &reqs, 8, secs);
    let rate = l.requests as f64 / started.elapsed().as_secs_f64();
    let after = server.rss_kib();
    eprintln!(
        "hub: {} requests in {secs} s ({rate:.0}/s), {} errors; subscriber: {} verifications, \
         {} denials, {} signed deliveries, {} bad signatures; RSS {before} -> {after} KiB",
        l.requests,
        l.errors,
        seen.verifications.load(Ordering::Relaxed),
        seen.denials.load(Ordering::Relaxed),
        seen.deliveries.load(Ordering::Relaxed),
        seen.bad_signatures.load(Ordering::Relaxed),
    );
    assert_eq!(l.errors, 0, "first error: {:?}", l.first_error);
    assert!(l.requests > 1000, "{l:?}");
    assert!(seen.verifications.load(Ordering::Relaxed) > 0);
    assert!(seen.deliveries.load(Ordering::Relaxed) > 0);
    assert_eq!(seen.bad_signatures.load(Ordering::Relaxed), 0);
    assert_eq!(seen.denials.load(Ordering::Relaxed), 0);
}

#[test]
fn hub_huge_request_heads_get_431_or_a_clean_close() {
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    huge_heads(&server, "/");
}

#[test]
fn hub_ten_thousand_idle_connections_keep_memory_bounded() {
    raise_nofile(IDLE as u64 + 1_000);
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    idle_connections("hub", &server, "/");
}

/// Sends `req` (its body possibly huge, written by another thread while the answer is read)
/// and returns the status, or `None` for a close without an answer.
fn send_big(addr: &str, head: String, body: Vec<u8>) -> Option<u16> {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let w = s.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        // The hub may answer and close before the body is all sent.
        let _ = (&w).write_all(head.as_bytes());
        let _ = (&w).write_all(&body);
    });
    let r = read_response(&mut BufReader::new(&s)).map(|(st, _, _)| st);
    let _ = s.shutdown(std::net::Shutdown::Both);
    writer.join().expect("writer");
    r
}

#[test]
fn hub_refuses_oversized_bodies_with_413() {
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    let addr = server.addr.clone();
    let link = format!(
        "Link: <http://127.0.0.1:9/topic>; rel=\"self\", <http://{addr}/>; rel=\"hub\"\r\n"
    );
    // Past the defaults: forms 64 KiB, payloads 16 MiB (HubOptions::new).
    let form_body = format!("hub.mode=subscribe&x={}", "a".repeat(64 * 1024));
    let cases = [
        (
            "a 64 KiB form",
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
                form_body.len()
            ),
            form_body.clone().into_bytes(),
        ),
        (
            "a chunked 64 KiB form",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned(),
            format!("{:x}\r\n{form_body}\r\n0\r\n\r\n", form_body.len()).into_bytes(),
        ),
        (
            "a 16 MiB payload",
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\n{link}Content-Length: {}\r\n\r\n",
                16 * 1024 * 1024 + 1
            ),
            vec![b' '; 16 * 1024 * 1024 + 1],
        ),
        (
            "a chunked 16 MiB payload",
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\n{link}Transfer-Encoding: chunked\r\n\r\n"
            ),
            {
                let chunk = format!("{:x}\r\n{}\r\n", 1 << 20, " ".repeat(1 << 20));
                let mut b = chunk.repeat(17).into_bytes();
                b.extend_from_slice(b"0\r\n\r\n");
                b
            },
        ),
    ];
    for (name, head, body) in cases {
        let status = send_big(&addr, head, body);
        eprintln!("{name}: {status:?}");
        assert_eq!(status, Some(413), "{name}");
    }
    // Just under the limits: accepted.
    let q = notification(&addr, "http://127.0.0.1:9/topic", &vec![b' '; 1 << 20], 200);
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(200));
    let (status, _) = get(&addr, "/").expect("still serving");
    assert_eq!(status, 200);
}

#[test]
fn the_hub_state_is_never_reachable_over_http() {
    let parent = tempfile::tempdir().expect("tempdir");
    let db = parent.path().join("hub.sqlite");
    let server = hub(&db);
    let addr = server.addr.clone();
    assert!(db.is_file(), "the state exists");
    let abs = db.to_str().expect("utf-8").to_owned();
    let file_url = format!("file://{abs}");
    let attacks = [
        "/hub.sqlite".to_owned(),
        "/../hub.sqlite".to_owned(),
        "/%2e%2e/hub.sqlite".to_owned(),
        "/..%2fhub.sqlite".to_owned(),
        abs.clone(),
        format!("/..{abs}"),
        "/resourcesync-hub.sqlite".to_owned(),
        "/.resourcesync/hub.sqlite".to_owned(),
        file_url.clone(),
        "*".to_owned(),
    ];
    for a in &attacks {
        let r = get(&addr, a);
        eprintln!("GET {a}: {:?}", r.as_ref().map(|(s, _)| s));
        if let Some((status, body)) = r {
            assert!(matches!(status, 200 | 400 | 404), "{a}: HTTP {status}");
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("SQLite format"), "{a}: {text}");
        }
    }
    // Nor by asking the hub to fetch it, or to deliver to it: only http(s) URLs are taken.
    let (sub, seen) = subscriber();
    let reqs = [
        form(&[("hub.mode", "publish"), ("hub.url", &file_url)], 400),
        form(&[("hub.mode", "publish"), ("hub.topic", &file_url)], 400),
        notification(&addr, &file_url, PAYLOAD, 400),
        form(
            &[
                ("hub.mode", "subscribe"),
                ("hub.topic", &file_url),
                ("hub.callback", &format!("http://{sub}/cb")),
            ],
            400,
        ),
        form(
            &[
                ("hub.mode", "subscribe"),
                ("hub.topic", &format!("http://{sub}/topic")),
                ("hub.callback", &file_url),
            ],
            400,
        ),
    ];
    for q in &reqs {
        let r = exchange(&addr, q).map(|r| r.0);
        assert_eq!(r, Some(q.status), "{}", String::from_utf8_lossy(&q.body));
    }
    assert_eq!(seen.verifications.load(Ordering::Relaxed), 0);

    // The hub embedded in `serve` keeps its state beside the Source's, which is not served.
    let dir = parent.path().join("served");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("ok.txt"), "ok").expect("write");
    let served = Server::start(&[
        "serve",
        dir.to_str().expect("utf-8"),
        "--no-watch",
        "--hub",
        "embedded",
    ]);
    assert!(
        dir.join(".resourcesync/hub.sqlite").is_file(),
        "the embedded hub's state exists"
    );
    for a in [
        "/.resourcesync/hub.sqlite",
        "/%2eresourcesync/hub.sqlite",
        "/resourcesync/hub/../../.resourcesync/hub.sqlite",
        "/resourcesync/hub/%2e%2e/%2e%2e/.resourcesync/hub.sqlite",
        "/resourcesync/hub/hub.sqlite",
        "/resourcesync/hub.sqlite",
    ] {
        let r = get(&served.addr, a);
        eprintln!(
            "serve --hub embedded, GET {a}: {:?}",
            r.as_ref().map(|(s, _)| s)
        );
        if let Some((status, body)) = r {
            assert!(matches!(status, 200 | 400 | 404), "{a}: HTTP {status}");
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("SQLite format"), "{a}: {text}");
        }
    }
    assert_eq!(get(&served.addr, "/ok.txt"), Some((200, b"ok".to_vec())));
}

/// `serve d --hub embedded --state d/state.sqlite` (relative paths, as a user types them):
/// the databases sit among the resources. None of them (nor their companions, nor the
/// documents) is ever listed or served, and the writes the hub makes to its database after each
/// notification are not changes: the watcher does not take them for ones, and periodic rescans
/// record nothing (security issue, item 1: an idle Source used to notify about 30 times a
/// second, and its Resource List listed `hub.sqlite*`, which anyone could download with every
/// subscriber's secret).
#[test]
fn the_sources_own_files_are_never_published_nor_served() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("d");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("a.txt"), "a").expect("write");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    cmd.current_dir(parent.path())
        .args([
            "serve",
            "d",
            "--hub",
            "embedded",
            "--state",
            "d/state.sqlite",
        ])
        .args(["--rescan-interval", "1"])
        .env("RUST_LOG", "resourcesync_source=debug")
        .stderr(Stdio::piped());
    let mut server = Server::spawn(cmd);
    let (tx, log) = mpsc::channel::<String>();
    let stderr = server.child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = server.addr.clone();
    let base = format!("http://{addr}/");

    // A subscriber to the change topic: every notification is then written to the hub's
    // database, in the published directory.
    let (sub, seen) = subscriber();
    let q = Req {
        target: "/resourcesync/hub".into(),
        ..form(
            &[
                ("hub.mode", "subscribe"),
                (
                    "hub.topic",
                    &format!("{base}resourcesync/change-notification"),
                ),
                ("hub.callback", &format!("http://{sub}/cb")),
                ("hub.secret", SECRET),
            ],
            202,
        )
    };
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(202));
    until("the verification", || {
        seen.verifications.load(Ordering::Relaxed) == 1
    });
    std::fs::write(dir.join("new.txt"), "new").expect("write");
    until("the notification", || {
        seen.deliveries.load(Ordering::Relaxed) == 1
    });

    // Three periodic rescans after it: none records a change, nothing else is notified.
    let mut published = Vec::new();
    let mut rescans = 0;
    let end = Instant::now() + Duration::from_secs(60);
    while rescans < 3 {
        let left = end.saturating_duration_since(Instant::now());
        let line = log.recv_timeout(left).expect("three periodic rescans");
        if line.contains("periodic rescan") {
            rescans += 1;
        }
        if line.contains("changes published") {
            published.push(line);
        }
    }
    eprintln!(
        "serve --hub embedded --state d/state.sqlite: {} batches published changes and {} \
         notifications were delivered by the third periodic rescan after one write",
        published.len(),
        seen.deliveries.load(Ordering::Relaxed)
    );
    assert_eq!(published.len(), 1, "changes published: {published:#?}");
    assert_eq!(seen.deliveries.load(Ordering::Relaxed), 1);
    assert_eq!(seen.bad_signatures.load(Ordering::Relaxed), 0);

    // Neither listed nor served.
    for f in [
        "hub.sqlite",
        "hub.sqlite-wal",
        "state.sqlite",
        "state.sqlite-wal",
    ] {
        assert!(dir.join(f).is_file(), "{f} is in the directory");
    }
    for f in [
        "hub.sqlite",
        "hub.sqlite-wal",
        "hub.sqlite-shm",
        "hub.sqlite-journal",
        "state.sqlite",
        "state.sqlite-wal",
        "state.sqlite-shm",
        "state.sqlite-journal",
        "state-www/resourcesync/capabilitylist.xml",
        "state-www/.well-known/resourcesync",
    ] {
        let (status, body) = get(&addr, &format!("/{f}")).expect("an answer");
        assert_eq!(status, 404, "{f}");
        assert!(
            !String::from_utf8_lossy(&body).contains("SQLite format"),
            "{f}"
        );
    }
    let locs = |path: &str| -> Vec<String> {
        let (status, body) = get(&addr, path).expect("a document");
        assert_eq!(status, 200, "{path}");
        let body = String::from_utf8_lossy(&body).into_owned();
        body.split("<loc>")
            .skip(1)
            .filter_map(|s| s.split("</loc>").next())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(locs(&resource_list_path(&addr)), [format!("{base}a.txt")]);
    assert_eq!(
        locs("/resourcesync/changelists/00001.xml"),
        [format!("{base}new.txt")]
    );
}

/// Polls `f` until it holds (30 s at most): waiting for the hub's asynchronous work.
fn until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_embedded_hub_relays_only_its_sources_topics_and_takes_no_publications() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ok.txt"), "ok").expect("write");
    let served = Server::start(&[
        "serve",
        dir.path().to_str().expect("utf-8"),
        "--no-watch",
        "--hub",
        "embedded",
    ]);
    let addr = served.addr.clone();
    let hub_path = "/resourcesync/hub";
    let own_topic = format!("http://{addr}/resourcesync/change-notification");
    let (sub, seen) = subscriber();
    let at_hub = |mut q: Req| {
        q.target = hub_path.to_owned();
        q
    };
    // Anyone could otherwise push forged notifications, signed by the hub with each
    // subscriber's own secret, or make the hub fetch any URL and deliver it to its subscribers.
    for q in [
        notification(&addr, &own_topic, PAYLOAD, 403),
        form(&[("hub.mode", "publish"), ("hub.url", &own_topic)], 403),
        form(
            &[
                ("hub.mode", "publish"),
                ("hub.url", &format!("http://{sub}/x")),
            ],
            403,
        ),
    ] {
        let q = at_hub(q);
        let r = exchange(&addr, &q);
        assert_eq!(
            r.as_ref().map(|r| r.0),
            Some(q.status),
            "{}: {:?}",
            String::from_utf8_lossy(&q.body),
            r.map(|r| String::from_utf8_lossy(&r.1).into_owned())
        );
    }
    // A subscription to another topic is denied (WebSub §5.2), never verified.
    let q = at_hub(form(
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", &format!("http://{sub}/elsewhere")),
            ("hub.callback", &format!("http://{sub}/cb")),
        ],
        202,
    ));
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(202));
    until("the denial", || seen.denials.load(Ordering::Relaxed) == 1);
    // Its own topic is subscribed to as before.
    let q = at_hub(form(
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", &own_topic),
            ("hub.callback", &format!("http://{sub}/cb")),
        ],
        202,
    ));
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(202));
    until("the verification", || {
        seen.verifications.load(Ordering::Relaxed) == 1
    });
    assert_eq!(seen.denials.load(Ordering::Relaxed), 1);
}

/// A burst of 600 connections while `server` accepts none (it is stopped with SIGSTOP): the
/// kernel completes each handshake only while the listen backlog has room, so with a backlog
/// below 600 a connection is never answered (its SYN is dropped).
fn burst_fits_the_backlog(server: &Server) {
    use rustix::process::{Pid, Signal, kill_process};
    let pid = Pid::from_child(&server.child);
    kill_process(pid, Signal::STOP).expect("SIGSTOP");
    let addr: std::net::SocketAddr = server.addr.parse().expect("addr");
    let mut held = Vec::new();
    let mut refused = None;
    for k in 0..600 {
        // 3 s: the first SYN and its retransmission after 1 s, both dropped when full.
        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
            Ok(s) => held.push(s),
            Err(e) => {
                refused = Some((k, e));
                break;
            }
        }
    }
    kill_process(pid, Signal::CONT).expect("SIGCONT");
    assert!(refused.is_none(), "connection not answered: {refused:?}");
    drop(held);
    assert_eq!(get(&server.addr, "/").map(|r| r.0), Some(200));
}

#[test]
fn the_hub_listens_with_the_backlog_of_serve() {
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    burst_fits_the_backlog(&server);
}

#[test]
fn the_hub_closes_idle_and_stalled_connections() {
    let state = tempfile::tempdir().expect("tempdir");
    let db = state.path().join("hub.sqlite");
    let server = Server::start(&[
        "hub",
        "--state",
        db.to_str().expect("utf-8"),
        "--idle-timeout",
        "1",
    ]);
    for (name, sent) in [
        ("idle", &b""[..]),
        ("a stalled request head", &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Ty"[..]),
        (
            "a stalled body",
            &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nhub.mode="[..],
        ),
    ] {
        let s = TcpStream::connect(&server.addr).expect("connect");
        // The guard: without the idle timeout, the read below waits for it and fails.
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        (&s).write_all(sent).expect("write");
        let mut rest = Vec::new();
        let r = std::io::Read::read_to_end(&mut &s, &mut rest);
        eprintln!("{name}: {r:?}, {} bytes", rest.len());
        assert!(
            match &r {
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            },
            "{name}: not closed: {r:?}"
        );
    }
    assert_eq!(get(&server.addr, "/").map(|r| r.0), Some(200));
}

/// `hub --private-addresses`: `deny` refuses a loopback callback at once (400, nothing sent);
/// `auto` on a loopback hub accepts it for verification (202).
#[test]
fn the_hub_reaches_private_addresses_only_when_allowed() {
    let state = tempfile::tempdir().expect("tempdir");
    let subscribe = |server: &Server| {
        let body = format!(
            "hub.mode=subscribe&hub.topic={}&hub.callback={}",
            form_value("http://example.org/t"),
            form_value("http://127.0.0.1:9/cb")
        );
        let q = Req {
            method: "POST",
            target: "/".into(),
            headers: "Content-Type: application/x-www-form-urlencoded\r\n".into(),
            body: body.into_bytes(),
            status: 0,
            want: None,
        };
        exchange(&server.addr, &q).expect("an answer")
    };
    let deny = Server::start(&[
        "hub",
        "--state",
        state.path().join("deny.sqlite").to_str().expect("utf-8"),
        "--private-addresses",
        "deny",
    ]);
    let (status, body) = subscribe(&deny);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("private address 127.0.0.1"), "{body}");
    let auto = hub(&state.path().join("auto.sqlite"));
    let (status, body) = subscribe(&auto);
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
}

// ---------------------------------------------------------------------------------------------
// HTTP/2 (h2c) clients that never read (security issue, item 3).

/// Files in [`h2_served_dir`]: enough for a Resource List of about 240 KiB, the largest
/// document size the server used to read whole per request.
const H2_FILES: usize = 1300;

/// A directory whose Resource List is about 240 KiB, and a 64 KiB resource (the largest one
/// read whole per request).
fn h2_served_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..H2_FILES {
        let d = dir.path().join(format!("d{}", i % 10));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(
            d.join(format!("resource-{i:05}.txt")),
            format!("resource {i}\n"),
        )
        .expect("write");
    }
    let big: Vec<u8> = (0..64 * 1024).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), big).expect("write");
    dir
}

/// The path of the Resource List named by the Capability List.
fn resource_list_path(addr: &str) -> String {
    let (status, cl) = get(addr, "/resourcesync/capabilitylist.xml").expect("capability list");
    assert_eq!(status, 200);
    let cl = String::from_utf8_lossy(&cl).into_owned();
    let url = cl
        .split("<loc>")
        .skip(1)
        .filter_map(|s| s.split("</loc>").next())
        .find(|u| u.contains("/resourcelists/"))
        .expect("a Resource List in the Capability List")
        .to_owned();
    let rest = url.strip_prefix("http://").expect("http URL");
    rest[rest.find('/').expect("a path")..].to_owned()
}

/// One GET over an HTTP/2 connection that reads everything (a well-behaved client): (status,
/// body).
async fn h2_get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("h2c handshake");
    tokio::spawn(conn);
    let mut send = send.ready().await.expect("ready");
    let req = axum::http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .expect("request");
    let (resp, _) = send.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("data");
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (status, out)
}

/// Eight h2c connections that advertise a zero flow-control window (SETTINGS_INITIAL_WINDOW_SIZE
/// 0) and open 200 streams each, asking for the largest document (plain and gzip) and the
/// largest resource read whole, and never read a byte of the bodies: the server holds every
/// response it has started. Its memory must grow by at most 100 MB, and a normal client (HTTP/1.1
/// and HTTP/2) is served meanwhile.
#[test]
fn http2_clients_that_never_read_cannot_pin_memory() {
    const CONNECTIONS: usize = 8;
    const STREAMS: usize = 200;
    let dir = h2_served_dir();
    let server = serve(dir.path());
    let addr = server.addr.clone();
    let doc = resource_list_path(&addr);
    let (status, doc_body) = get(&addr, &doc).expect("the Resource List");
    assert_eq!(status, 200);
    assert!(
        (200 * 1024..256 * 1024).contains(&doc_body.len()),
        "the Resource List is {} bytes: adjust H2_FILES",
        doc_body.len()
    );
    let big = std::fs::read(dir.path().join("big.bin")).expect("read");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        // Warm up: the runtime's threads started, the document read once over HTTP/2.
        assert_eq!(h2_get(&addr, &doc).await, (200, doc_body.clone()));
        let before = server.rss_kib();
        let heads: Vec<Arc<AtomicU64>> = (0..CONNECTIONS)
            .map(|_| Arc::new(AtomicU64::new(0)))
            .collect();
        let held = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (mut senders, mut conns, mut tasks) = (Vec::new(), Vec::new(), Vec::new());
        for c in 0..CONNECTIONS {
            let tcp = tokio::net::TcpStream::connect(&addr)
                .await
                .expect("connect");
            let (send, conn) = h2::client::Builder::new()
                .initial_window_size(0)
                .handshake::<_, axum::body::Bytes>(tcp)
                .await
                .expect("h2c handshake");
            conns.push(tokio::spawn(conn));
            for _ in 0..STREAMS {
                let (send, heads, held, addr) =
                    (send.clone(), heads[c].clone(), held.clone(), addr.clone());
                // Two connections ask for the document with gzip (more streams than the
                // server has compressors), three without, three for the resource.
                let (path, gzip) = match c {
                    0 | 1 => (doc.clone(), true),
                    2..=4 => (doc.clone(), false),
                    _ => ("/big.bin".to_owned(), false),
                };
                tasks.push(tokio::spawn(async move {
                    // Streams past the server's limit wait here for one to end (none does).
                    let Ok(mut send) = send.ready().await else {
                        return;
                    };
                    let mut req = axum::http::Request::get(format!("http://{addr}{path}"));
                    if gzip {
                        req = req.header("accept-encoding", "gzip");
                    }
                    let Ok((resp, _)) = send.send_request(req.body(()).expect("request"), true)
                    else {
                        return;
                    };
                    if let Ok(resp) = resp.await {
                        heads.fetch_add(1, Ordering::Relaxed);
                        // Held, never read.
                        held.lock().expect("lock").push(resp);
                    }
                }));
            }
            senders.push(send);
        }
        // Every stream the server lets each connection open has its response head.
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let done = senders.iter().zip(&heads).all(|(s, h)| {
                let n = h.load(Ordering::Relaxed) as usize;
                n > 0 && n == STREAMS.min(s.current_max_send_streams())
            });
            if done {
                break;
            }
            assert!(
                Instant::now() < end,
                "response heads: {:?} (server limits: {:?})",
                heads
                    .iter()
                    .map(|h| h.load(Ordering::Relaxed))
                    .collect::<Vec<_>>(),
                senders
                    .iter()
                    .map(|s| s.current_max_send_streams())
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let streams: u64 = heads.iter().map(|h| h.load(Ordering::Relaxed)).sum();
        let during = server.rss_kib();
        let grown = during.saturating_sub(before);
        eprintln!(
            "serve: RSS {before} KiB -> {during} KiB (+{grown} KiB) with {CONNECTIONS} h2c \
             connections at a zero window holding {streams} responses"
        );
        assert!(
            grown <= 100 * 1024,
            "{grown} KiB more with {streams} responses held"
        );
        // A normal client is served meanwhile, over HTTP/1.1 and over HTTP/2.
        let a = addr.clone();
        let d = doc.clone();
        let h1 = tokio::task::spawn_blocking(move || get(&a, &d))
            .await
            .expect("join");
        assert_eq!(h1, Some((200, doc_body.clone())));
        assert_eq!(h2_get(&addr, "/big.bin").await, (200, big));
        // The compressors are held by responses that are not read: a document asked for with
        // gzip comes whole meanwhile (uncompressed when none is free; whether one is free
        // depends on how far the hostile responses got, so either form is accepted).
        let gzip_get = {
            let (a, d) = (addr.clone(), doc.clone());
            move || {
                let q = Req {
                    headers: "Accept-Encoding: gzip\r\nConnection: close\r\n".into(),
                    ..Req::get(d.clone(), None)
                };
                let s = TcpStream::connect(&a).expect("connect");
                s.set_read_timeout(Some(Duration::from_secs(30)))
                    .expect("timeout");
                (&s).write_all(&q.bytes(&a)).expect("send");
                read_response(&mut BufReader::new(&s)).expect("a response")
            }
        };
        let g = gzip_get.clone();
        let (status, headers, body) = tokio::task::spawn_blocking(g).await.expect("join");
        assert_eq!(status, 200);
        let body = match headers.get("content-encoding").map(String::as_str) {
            None => body,
            Some("gzip") => {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut out)
                    .expect("gzip");
                out
            }
            Some(other) => panic!("content-encoding {other}"),
        };
        assert!(body == doc_body, "the whole document");
        // The hostile connections gone, the server gives their compressors back.
        tasks.iter().for_each(|t| t.abort());
        conns.iter().for_each(|c| c.abort());
        held.lock().expect("lock").clear();
        drop(senders);
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let g = gzip_get.clone();
            let (status, headers, _) = tokio::task::spawn_blocking(g).await.expect("join");
            assert_eq!(status, 200);
            if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
                break;
            }
            assert!(Instant::now() < end, "gzip never came back");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
