//! A fault-injecting HTTP/1.1 proxy on 127.0.0.1:0, for tests.
//!
//! It sits between a Destination and an upstream server (a test Source or `resourcesync serve`):
//! the Destination is pointed at the proxy (publish the Source with the proxy's base URL, so that
//! every `<loc>` goes through it). Keep-alive towards the client is kept; each request is
//! forwarded on a fresh upstream connection as HTTP/1.0 (so the upstream answers with a plain,
//! unchunked body ending at EOF), and the response is re-framed with an exact `Content-Length`.
//!
//! Whether a request is faulted, and how, depends only on the seed, the request's path and how
//! many times that path was requested before (not on the order in which concurrent requests
//! arrive), so a seed reproduces the same faults for the same requests.
//!
//! Faults ([`Kind`]): close the connection without an answer; answer the head and part of the
//! body then reset the connection (RST); answer the full `Content-Length` but only part of the
//! body, then close (FIN); 429, 500 and 503 with and without `Retry-After`; delay the response;
//! hold the response until another concurrent response has completed (reordering).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Close the connection after reading the request, without an answer.
    Drop,
    /// Send the head and half the body, then reset the connection.
    Reset,
    /// Send the head (with the full `Content-Length`) and half the body, then close.
    Truncate,
    /// 429 without `Retry-After`.
    TooMany,
    /// 429 with `Retry-After: 1`.
    TooManyRetryAfter,
    /// 500.
    Internal,
    /// 503 without `Retry-After`.
    Unavailable,
    /// 503 with `Retry-After: 1`.
    UnavailableRetryAfter,
    /// Answer correctly, 10 to 150 ms late.
    Delay,
    /// Answer correctly, once another response has completed (or after 300 ms).
    Reorder,
}

impl Kind {
    /// Every kind, in the order drawn.
    pub const ALL: [Kind; 10] = [
        Kind::Drop,
        Kind::Reset,
        Kind::Truncate,
        Kind::TooMany,
        Kind::TooManyRetryAfter,
        Kind::Internal,
        Kind::Unavailable,
        Kind::UnavailableRetryAfter,
        Kind::Delay,
        Kind::Reorder,
    ];
}

/// What the proxy did.
#[derive(Debug, Default)]
pub struct Stats {
    /// Requests received.
    pub requests: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<Kind, u64>,
    /// Reordered responses that did complete after a later one.
    pub overtaken: u64,
}

#[derive(Debug)]
struct Shared {
    upstream: Mutex<SocketAddr>,
    seed: u64,
    /// Fault rate in millionths.
    rate_ppm: u64,
    seen: Mutex<HashMap<String, u64>>,
    stats: Mutex<Stats>,
    /// Completed responses, for reordering.
    done: tokio::sync::watch::Sender<u64>,
    /// When false, requests pass unharmed (for audits through the proxy).
    enabled: std::sync::atomic::AtomicBool,
}

/// A running proxy.
#[derive(Debug)]
pub struct FaultProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://ADDR/`.
    pub base: String,
    shared: Arc<Shared>,
}

/// SplitMix64: a small, well-mixed hash step (no crate needed for a test's determinism).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash_str(seed: u64, s: &str) -> u64 {
    s.bytes().fold(mix(seed), |h, b| mix(h ^ u64::from(b)))
}

impl FaultProxy {
    /// Starts a proxy in front of `upstream`, faulting `rate` (0.0 to 1.0) of the requests.
    pub async fn start(upstream: SocketAddr, seed: u64, rate: f64) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            seed,
            rate_ppm: (rate.clamp(0.0, 1.0) * 1e6) as u64,
            seen: Mutex::new(HashMap::new()),
            stats: Mutex::new(Stats::default()),
            done: tokio::sync::watch::channel(0).0,
            enabled: std::sync::atomic::AtomicBool::new(true),
        });
        let s = shared.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                tokio::spawn(connection(client, s.clone()));
            }
        });
        FaultProxy {
            addr,
            base: format!("http://{addr}/"),
            shared,
        }
    }

    /// Starts a proxy on a thread and runtime of its own (for tests that run the binary).
    pub fn start_in_thread(upstream: SocketAddr, seed: u64, rate: f64) -> FaultProxy {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().expect("runtime");
            rt.block_on(async move {
                tx.send(FaultProxy::start(upstream, seed, rate).await)
                    .expect("send");
                std::future::pending::<()>().await;
            });
        });
        rx.recv().expect("proxy")
    }

    /// Sends later requests to another upstream (a restarted server).
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *self.shared.upstream.lock().expect("upstream") = upstream;
    }

    /// Turns faults on or off.
    pub fn set_enabled(&self, on: bool) {
        self.shared
            .enabled
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// Requests received and faults injected so far.
    pub fn stats(&self) -> (u64, BTreeMap<Kind, u64>, u64) {
        let s = self.shared.stats.lock().expect("stats");
        (s.requests, s.faults.clone(), s.overtaken)
    }
}

impl Shared {
    /// The fault for the `n`th request of `target` (deterministic by seed).
    fn decide(&self, target: &str) -> (Option<Kind>, u64) {
        let n = {
            let mut g = self.seen.lock().expect("seen");
            let c = g.entry(target.to_owned()).or_default();
            *c += 1;
            *c
        };
        let h = mix(hash_str(self.seed, target) ^ mix(n));
        let on = self.enabled.load(std::sync::atomic::Ordering::SeqCst);
        let mut st = self.stats.lock().expect("stats");
        st.requests += 1;
        if !on || h % 1_000_000 >= self.rate_ppm {
            return (None, h);
        }
        let kind = Kind::ALL[(mix(h) % Kind::ALL.len() as u64) as usize];
        *st.faults.entry(kind).or_default() += 1;
        (Some(kind), h)
    }

    fn completed(&self) {
        self.done.send_modify(|c| *c += 1);
    }
}

/// Reads one request head (up to the blank line) into `buf`; `None` at EOF or on error.
async fn read_head(c: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = buf.drain(..i + 4).collect();
            return Some(head);
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        let mut chunk = [0u8; 8192];
        match c.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The request head to send upstream: HTTP/1.0, `Connection: close`, other headers kept.
fn upstream_head(head: &str) -> (String, String) {
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let method = parts.next().unwrap_or("GET").to_owned();
    let target = parts.next().unwrap_or("/").to_owned();
    let mut out = format!("{method} {target} HTTP/1.0\r\n");
    for l in lines.filter(|l| !l.is_empty()) {
        let name = l.split(':').next().unwrap_or_default().to_ascii_lowercase();
        if name != "connection" && name != "keep-alive" {
            out.push_str(l);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    (target, out)
}

/// Forwards a request; returns the response head (status line and headers, re-framed with
/// `Content-Length`) and the body.
async fn forward(upstream: SocketAddr, head: &str) -> Option<(String, Vec<u8>)> {
    let mut u = TcpStream::connect(upstream).await.ok()?;
    u.write_all(head.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    u.read_to_end(&mut raw).await.ok()?;
    let i = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let body = raw.split_off(i + 4);
    let text = String::from_utf8_lossy(&raw[..i]).into_owned();
    let mut lines = text.split("\r\n");
    let status = lines.next()?.replacen("HTTP/1.0", "HTTP/1.1", 1);
    let mut out = format!("{status}\r\n");
    let chunked = text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked { dechunk(&body)? } else { body };
    for l in lines {
        let name = l.split(':').next().unwrap_or_default().to_ascii_lowercase();
        if !matches!(
            name.as_str(),
            "connection" | "keep-alive" | "content-length" | "transfer-encoding"
        ) {
            out.push_str(l);
            out.push_str("\r\n");
        }
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    Some((out, body))
}

/// A chunked body's data (an upstream should not chunk a response to HTTP/1.0, but may).
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let i = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..i]).ok()?.split(';').next()?.trim();
        let n = usize::from_str_radix(size, 16).ok()?;
        b = &b[i + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..n)?);
        b = b.get(n + 2..)?;
    }
}

fn status(code: u16, reason: &str, retry_after: bool) -> Vec<u8> {
    let ra = if retry_after {
        "Retry-After: 1\r\n"
    } else {
        ""
    };
    let body = "injected fault";
    format!(
        "HTTP/1.1 {code} {reason}\r\n{ra}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn connection(mut client: TcpStream, s: Arc<Shared>) {
    let mut buf = Vec::new();
    while let Some(head) = read_head(&mut client, &mut buf).await {
        let head = String::from_utf8_lossy(&head).into_owned();
        let (target, up) = upstream_head(&head);
        let (fault, h) = s.decide(&target);
        let canned = match fault {
            Some(Kind::Drop) => return,
            Some(Kind::TooMany) => Some(status(429, "Too Many Requests", false)),
            Some(Kind::TooManyRetryAfter) => Some(status(429, "Too Many Requests", true)),
            Some(Kind::Internal) => Some(status(500, "Internal Server Error", false)),
            Some(Kind::Unavailable) => Some(status(503, "Service Unavailable", false)),
            Some(Kind::UnavailableRetryAfter) => Some(status(503, "Service Unavailable", true)),
            _ => None,
        };
        if let Some(bytes) = canned {
            if client.write_all(&bytes).await.is_err() {
                return;
            }
            s.completed();
            continue;
        }
        let upstream = *s.upstream.lock().expect("upstream");
        let Some((rhead, body)) = forward(upstream, &up).await else {
            return;
        };
        match fault {
            Some(Kind::Reset | Kind::Truncate) => {
                let _ = client.write_all(rhead.as_bytes()).await;
                let _ = client.write_all(&body[..body.len() / 2]).await;
                let _ = client.flush().await;
                if fault == Some(Kind::Reset) {
                    let _ = client.set_zero_linger();
                } else {
                    let _ = client.shutdown().await;
                }
                return;
            }
            Some(Kind::Delay) => {
                // A fault, not synchronisation: the response is simply late.
                tokio::time::sleep(Duration::from_millis(10 + h % 141)).await;
            }
            Some(Kind::Reorder) => {
                let mut rx = s.done.subscribe();
                rx.borrow_and_update();
                if tokio::time::timeout(Duration::from_millis(300), rx.changed())
                    .await
                    .is_ok()
                {
                    s.stats.lock().expect("stats").overtaken += 1;
                }
            }
            _ => {}
        }
        if client.write_all(rhead.as_bytes()).await.is_err()
            || client.write_all(&body).await.is_err()
        {
            return;
        }
        s.completed();
    }
}
