//! What the tests of `serve_robust.rs` and `hub_under_load.rs` share: a server process
//! started on a free port, a load generator that checks every answer, huge request heads, idle
//! connections with the server's memory measured, WebSub forms and a subscriber that records
//! what it is sent, and polling for a condition.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// A server process; killed when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

impl Server {
    /// Runs `resourcesync ARGS... --listen 127.0.0.1:0` and waits for its first line, "... at
    /// URL" or "... at URL (...)".
    pub(crate) fn start(args: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
        cmd.args(args).stderr(Stdio::null());
        Server::spawn(cmd)
    }

    /// [`Server::start`] with a command of the caller's (working directory, environment,
    /// standard error).
    pub(crate) fn spawn(mut cmd: Command) -> Server {
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
    pub(crate) fn rss_kib(&self) -> u64 {
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

pub(crate) fn served_dir() -> tempfile::TempDir {
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
pub(crate) fn read_response<R: BufRead>(
    r: &mut R,
) -> Option<(u16, BTreeMap<String, String>, Vec<u8>)> {
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

pub(crate) fn get(addr: &str, target: &str) -> Option<(u16, Vec<u8>)> {
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
pub(crate) fn exchange(addr: &str, q: &Req) -> Option<(u16, Vec<u8>)> {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (&s).write_all(&q.bytes(addr)).ok()?;
    let (status, _, body) = read_response(&mut BufReader::new(&s))?;
    Some((status, body))
}

/// What a load run saw.
#[derive(Debug, Default)]
pub(crate) struct Load {
    pub(crate) requests: u64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

/// One request of a load: what to send and what must come back.
#[derive(Debug, Clone)]
pub(crate) struct Req {
    pub(crate) method: &'static str,
    pub(crate) target: String,
    /// Extra header lines, each ending in CRLF.
    pub(crate) headers: String,
    pub(crate) body: Vec<u8>,
    pub(crate) status: u16,
    /// The body that must come back, when checked.
    pub(crate) want: Option<Vec<u8>>,
}

impl Req {
    /// A GET that must answer 200 (with `want` as its body when given).
    pub(crate) fn get(target: impl Into<String>, want: Option<Vec<u8>>) -> Req {
        Req {
            method: "GET",
            target: target.into(),
            headers: String::new(),
            body: Vec::new(),
            status: 200,
            want,
        }
    }

    pub(crate) fn bytes(&self, addr: &str) -> Vec<u8> {
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
pub(crate) fn load(addr: &str, reqs: &[Req], clients: usize, secs: u64) -> Load {
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

pub(crate) fn serve(dir: &Path) -> Server {
    Server::start(&["serve", dir.to_str().expect("utf-8"), "--no-watch"])
}

/// Huge request heads to `server` get 431 (or 414, 400) or a clean close, and `probe` still
/// answers 200 after them.
pub(crate) fn huge_heads(server: &Server, probe: &str) {
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
pub(crate) const IDLE: usize = 10_000;

/// Raises this process's open-file limit (inherited by the server it starts) to `n`.
pub(crate) fn raise_nofile(n: u64) {
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

/// 10,000 idle connections to `server`, half of them with an unfinished request head: `probe`
/// is answered 200 while they are held and after, and the server's memory grows by less than
/// 64 KiB per connection.
pub(crate) fn idle_connections(label: &str, server: &Server, probe: &str) {
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

/// Percent-encodes everything but unreserved characters (a form value).
pub(crate) fn form_value(v: &str) -> String {
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
pub(crate) fn form(params: &[(&str, &str)], status: u16) -> Req {
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
pub(crate) fn notification(hub: &str, topic: &str, body: &[u8], status: u16) -> Req {
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

pub(crate) const PAYLOAD: &[u8] = br#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="change-notification" from="2026-01-01T00:00:00Z" until="2026-01-01T00:00:01Z"/>
  <url><loc>http://example.org/a.txt</loc><rs:md change="updated" datetime="2026-01-01T00:00:01Z"/></url>
</urlset>
"#;

pub(crate) const SECRET: &str = "a-shared-secret";

/// What the test's subscriber saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) verifications: AtomicU64,
    pub(crate) denials: AtomicU64,
    pub(crate) deliveries: AtomicU64,
    pub(crate) bad_signatures: AtomicU64,
}

/// A request read: (method, target, headers lower-cased, body).
pub(crate) type Request = (String, String, BTreeMap<String, String>, Vec<u8>);

/// Reads one request.
pub(crate) fn read_request<R: BufRead>(r: &mut R) -> Option<Request> {
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
pub(crate) fn subscriber() -> (String, Arc<Seen>) {
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

/// Polls `f` until it holds (30 s at most): waiting for the hub's asynchronous work.
pub(crate) fn until(what: &str, f: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
