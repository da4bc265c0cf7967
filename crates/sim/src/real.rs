//! Real mode: our Source server and our Destination over loopback HTTP, in real time.
//!
//! The Source is `resourcesync-source`'s server over a temporary directory of the workload's
//! resources; each change of the [`Workload`] is written (atomically) at its time and published
//! at once (one scan and publish batch; the Resource List is regenerated on every batch, so that
//! baseline sees it current). The Destination is `resourcesync-destination`'s [`sync`], run every
//! `sync_interval`:
//!
//! - **incremental**: the ordinary run after the first, from the Change Lists after the cursor.
//! - **baseline**: the cursor is cleared before each run, so that the Destination diffs its state
//!   against the Resource List (its "baseline diff", Z39.99-2014 §10).
//! - **push**: not yet available (see [`run`]).
//!
//! Between them a proxy counts what travels: each response's body bytes and each request,
//! documents and resources apart, so that the metrics rest on what went over the wire and not
//! on the Destination's own report. After each run the Destination's files are read and
//! compared with the lead states: that is the copy state the [`Tracker`] follows. The
//! network settings of model mode do not apply (loopback is what it is).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use resourcesync_destination::{HttpOptions, Quiet, SyncOptions, sync};
use resourcesync_source::server::{self, ServeOptions};
use resourcesync_source::watch::WatchOptions;
use resourcesync_source::{Source, SourceConfig};
use resourcesync_store::{SourceCursor, SqliteState, StateStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::clock::{Clock, WallClock};
use crate::config::{Config, Strategy};
use crate::error::{Error, Result};
use crate::metrics::{Metrics, Tracker, Transfer};
use crate::model::DRAIN_SYNCS;
use crate::workload::{ChangeKind, ResState, Workload, content, id_of_path, resource_path};

/// Most resources a real run takes (every file is written and read back after each run).
pub const MAX_REAL_RESOURCES: u64 = 20_000;

/// A copy whose content is not the current lead state's.
const STALE: u64 = u64::MAX;

/// Runs `cfg` over loopback HTTP in real time.
///
/// `--strategy push` is refused for now: pushing needs our WebSub hub and the Source's Change
/// Notifications (issue 5), which are not there yet. The push strategy plugs in here as a third
/// driver beside the polling one: subscribe the Destination's callback to the Source's topic,
/// let each notification start a sync of its entries, and feed the proxy's counts and the copy
/// states to the same [`Tracker`].
pub fn run(cfg: &Config) -> Result<Metrics> {
    if cfg.strategy == Strategy::Push {
        return Err(Error::Unsupported(
            "--strategy push --mode real is not yet available: it needs the WebSub hub and the \
             Source's Change Notifications (issue 5); use --mode model for push"
                .into(),
        ));
    }
    if cfg.resources > MAX_REAL_RESOURCES {
        return Err(Error::Config(format!(
            "--mode real takes at most {MAX_REAL_RESOURCES} resources; use --mode model"
        )));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("starting the runtime", e))?;
    rt.block_on(run_async(cfg))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock is a bug of this module; the data is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the proxy counts for the current iteration.
#[derive(Debug, Default)]
struct Meter {
    active: bool,
    transfer: Transfer,
    fetched: HashSet<u64>,
    /// When each resource's body was received (last time), for the copy's time in sync.
    arrived: HashMap<u64, f64>,
}

struct Shared {
    tracker: Mutex<Tracker>,
    meter: Mutex<Meter>,
    clock: Mutex<Option<WallClock>>,
    /// Times of changes written but not yet published; the sum and count of publish delays.
    unpublished: Mutex<(Vec<f64>, f64, u64)>,
}

impl Shared {
    /// One response went through the proxy.
    fn response(&self, path: &str, status: u16, body: u64) {
        let id = id_of_path(path.trim_start_matches('/')).filter(|_| status == 200);
        // Required: a resource whose copy (as last seen) is not its lead state (tracker first,
        // then meter: the one lock order of this module).
        let needed = id.is_some_and(|id| !lock(&self.tracker).in_sync(id));
        let mut m = lock(&self.meter);
        if !m.active {
            return;
        }
        m.transfer.requests += 1;
        m.transfer.total += body;
        if let Some(id) = id {
            if needed && m.fetched.insert(id) {
                m.transfer.required += body;
            }
            if let Some(c) = *lock(&self.clock) {
                m.arrived.insert(id, c.now());
            }
        }
    }
}

async fn write_atomic(dir: &Path, tmp: &Path, s: &ResState) -> Result<()> {
    let name = resource_path(s.id);
    let t = tmp.join(&name);
    tokio::fs::write(&t, content(s))
        .await
        .map_err(|e| Error::io(format!("writing {}", t.display()), e))?;
    tokio::fs::rename(&t, dir.join(&name))
        .await
        .map_err(|e| Error::io(format!("renaming into {}", dir.display()), e))
}

async fn run_async(cfg: &Config) -> Result<Metrics> {
    let wall = Instant::now();
    let w = Workload::generate(cfg);
    let root = tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?;
    let (src, dst, tmp) = (
        root.path().join("source"),
        root.path().join("destination"),
        root.path().join("tmp"),
    );
    for d in [&src, &dst, &tmp] {
        std::fs::create_dir_all(d)
            .map_err(|e| Error::io(format!("creating {}", d.display()), e))?;
    }
    for s in &w.initial {
        write_atomic(&src, &tmp, s).await?;
    }
    // The proxy's port is the one published: every URL the Destination follows goes through it.
    let front = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::io("binding the proxy", e))?;
    let front_addr = front
        .local_addr()
        .map_err(|e| Error::io("proxy address", e))?;
    let back = server::bind("127.0.0.1:0").await?;
    let back_addr = back
        .local_addr()
        .map_err(|e| Error::io("server address", e))?;
    let base = format!("http://{front_addr}/");
    let mut scfg = SourceConfig::new(&src, &base);
    server::prepare_config(&mut scfg);
    let source = tokio::task::spawn_blocking(move || Source::open(scfg))
        .await
        .map_err(|e| Error::Run(format!("opening the Source: {e}")))??;
    let opts = ServeOptions {
        watch: WatchOptions {
            // Changes are published by the driver as it makes them, not found by watching.
            use_watcher: false,
            rescan_interval: Duration::from_secs(86_400),
            resourcelist_interval: Duration::ZERO,
            ..WatchOptions::default()
        },
        ..ServeOptions::default()
    };
    let running = server::start(source, back, opts).await?;
    let shared = Arc::new(Shared {
        tracker: Mutex::new(Tracker::new(
            cfg.duration,
            w.initial.iter().map(|s| (s.id, s.token)),
        )),
        meter: Mutex::new(Meter::default()),
        clock: Mutex::new(None),
        unpublished: Mutex::new((Vec::new(), 0.0, 0)),
    });
    {
        let mut tr = lock(&shared.tracker);
        for s in &w.initial {
            tr.set_lead_size(s.id, s.size);
        }
    }
    let proxy = tokio::spawn(proxy(front, back_addr, shared.clone()));
    let result = drive(cfg, &w, &running, &shared, &src, &dst, &tmp).await;
    proxy.abort();
    let stopped = running.shutdown().await;
    result?;
    stopped?;
    let tracker = Arc::try_unwrap(shared)
        .map_err(|_| Error::Run("the proxy still holds the tracker".into()))?
        .tracker
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    Ok(tracker.finish(cfg, wall.elapsed().as_secs_f64()))
}

/// Reads every copy and tells the tracker what it holds: a copy whose body came through the
/// proxy in this run since `t` is placed at the time it arrived (the Destination verifies and
/// renames it right after), any other change of the copy (a removal) at `t`.
fn observe(shared: &Shared, dst: &Path, t: f64, arrived: &HashMap<u64, f64>) -> Result<()> {
    let mut tr = lock(&shared.tracker);
    for id in 0..tr.ids() {
        let path = dst.join(resource_path(id));
        let copy = match std::fs::read(&path) {
            Ok(bytes) => {
                let lead = tr.lead(id);
                let same = lead.is_some_and(|token| {
                    // The lead's content is regenerated from its token and size; the size is
                    // the copy's length when they agree, so compare lengths first.
                    let s = ResState {
                        id,
                        token,
                        size: bytes.len() as u64,
                    };
                    content(&s) == bytes && lead_size_matches(tr.lead_size(id), &bytes)
                });
                Some(if same { lead.unwrap_or(STALE) } else { STALE })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let at = arrived.get(&id).copied().filter(|a| *a <= t).unwrap_or(t);
        tr.copy_changed(at, id, copy);
    }
    Ok(())
}

fn lead_size_matches(size: Option<u64>, bytes: &[u8]) -> bool {
    size.is_none_or(|s| s == bytes.len() as u64)
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    cfg: &Config,
    w: &Workload,
    running: &server::Running,
    shared: &Arc<Shared>,
    src: &Path,
    dst: &Path,
    tmp: &Path,
) -> Result<()> {
    let mut sopts = SyncOptions::new(running.source_description_url(), dst);
    sopts.delete = true;
    sopts.use_dumps = false;
    sopts.concurrency = cfg.network.concurrency;
    sopts.http = HttpOptions {
        retries: 1,
        backoff_base: Duration::from_millis(20),
        ..HttpOptions::default()
    };
    // The first baseline, before the measured interval.
    let first = sync(&sopts, Arc::new(Quiet)).await?;
    let key = first.source.key();
    observe(shared, dst, 0.0, &HashMap::new())?;
    {
        let tr = lock(&shared.tracker);
        if (0..tr.ids()).any(|id| !tr.in_sync(id)) {
            return Err(Error::Run(
                "the first baseline did not copy every resource".into(),
            ));
        }
    }
    let clock = WallClock::start();
    *lock(&shared.clock) = Some(clock);
    // The Source's changes, each written at its time; a publisher task beside it scans and
    // publishes as soon as something was written (changes written while a batch runs go into
    // the next), so that a slow batch does not delay the changes themselves.
    let written = Arc::new(tokio::sync::Notify::new());
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publishing = {
        let (publisher, written, finished, shared) = (
            running.publisher().clone(),
            written.clone(),
            finished.clone(),
            shared.clone(),
        );
        tokio::spawn(async move {
            loop {
                written.notified().await;
                let last = finished.load(std::sync::atomic::Ordering::SeqCst);
                let batch = std::mem::take(&mut lock(&shared.unpublished).0);
                publisher.batch(false).await?;
                let now = clock.now();
                let mut u = lock(&shared.unpublished);
                for t in batch {
                    u.1 += now - t;
                    u.2 += 1;
                }
                if last {
                    return Ok::<(), Error>(());
                }
            }
        })
    };
    let changes = {
        let (shared, src, tmp, written, finished) = (
            shared.clone(),
            src.to_path_buf(),
            tmp.to_path_buf(),
            written.clone(),
            finished.clone(),
        );
        let list = w.changes.clone();
        tokio::spawn(async move {
            let made = async {
                for c in list {
                    tokio::time::sleep_until(clock.instant_of(c.t).into()).await;
                    if c.kind == ChangeKind::Delete {
                        let p = src.join(resource_path(c.state.id));
                        tokio::fs::remove_file(&p)
                            .await
                            .map_err(|e| Error::io(format!("removing {}", p.display()), e))?;
                        let now = clock.now();
                        lock(&shared.tracker).lead_changed(now, c.state.id, None);
                        lock(&shared.unpublished).0.push(now);
                    } else {
                        write_atomic(&src, &tmp, &c.state).await?;
                        let now = clock.now();
                        let mut tr = lock(&shared.tracker);
                        tr.lead_changed(now, c.state.id, Some(c.state.token));
                        tr.set_lead_size(c.state.id, c.state.size);
                        drop(tr);
                        lock(&shared.unpublished).0.push(now);
                    }
                    written.notify_one();
                }
                Ok::<(), Error>(())
            }
            .await;
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            written.notify_one();
            made
        })
    };
    let mut k = 1u64;
    let mut drained = 0u32;
    let state_path = sopts.state_path();
    let outcome: Result<()> = async {
        loop {
            let due = k as f64 * cfg.sync_interval;
            k += 1;
            if due > cfg.duration {
                // The changes are all made by now; wait for the last to be published.
                if !changes.is_finished() {
                    tokio::time::sleep_until(clock.instant_of(cfg.duration).into()).await;
                }
                if lock(&shared.tracker).unsynced() == 0 || drained >= DRAIN_SYNCS {
                    break;
                }
                drained += 1;
            }
            // A run due while the previous one ran starts at once.
            tokio::time::sleep_until(clock.instant_of(due).into()).await;
            if cfg.strategy == Strategy::Baseline {
                let st = SqliteState::open(&state_path)?;
                st.set_cursor(&SourceCursor {
                    source: key.clone(),
                    cursor: None,
                    synced_at: None,
                })?;
            }
            let started = clock.now();
            {
                let mut m = lock(&shared.meter);
                *m = Meter {
                    active: true,
                    ..Meter::default()
                };
            }
            sync(&sopts, Arc::new(Quiet)).await?;
            let t = clock.now();
            let (transfer, arrived) = {
                let mut m = lock(&shared.meter);
                m.active = false;
                (m.transfer, std::mem::take(&mut m.arrived))
            };
            observe(shared, dst, t, &arrived)?;
            {
                let mut tr = lock(&shared.tracker);
                tr.iteration(due.min(started), transfer);
                tr.busy(due.min(started), t - started);
            }
        }
        Ok(())
    }
    .await;
    let made = changes.await;
    let published = publishing.await;
    {
        let u = lock(&shared.unpublished);
        if u.2 > 0 {
            let mean = u.1 / u.2 as f64;
            lock(&shared.tracker).measured_publish_delay(mean);
        }
    }
    outcome?;
    let task = |e: tokio::task::JoinError| Error::Run(format!("a Source task failed: {e}"));
    made.map_err(task)??;
    published.map_err(task)?
}

// ---------------------------------------------------------------------------------------------
// The counting proxy. Written here rather than taken from a crate: what is needed is a byte
// count of each HTTP/1.1 response body with the request it answers, which a general proxy
// does not report; the framing rules are RFC 9112 §6 (Content-Length, chunked, until close).

async fn proxy(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors or the like: back off instead of spinning.
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let shared = shared.clone();
        conns.spawn(async move {
            if let Ok(server) = TcpStream::connect(upstream).await {
                relay(client, server, shared).await;
            }
        });
        while conns.try_join_next().is_some() {}
    }
}

async fn relay(client: TcpStream, server: TcpStream, shared: Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let requests: Arc<Mutex<VecDeque<(String, String)>>> = Arc::default();
    let reqs = requests.clone();
    let up = async move {
        let mut parser = RequestParser::default();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for r in parser.feed(&buf[..n]) {
                lock(&reqs).push_back(r);
            }
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = sw.shutdown().await;
    };
    let down = async move {
        let mut parser = ResponseParser::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for (status, body) in parser.feed(&buf[..n], &requests) {
                shared.response(&status.1, status.0, body);
            }
            if cw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        if let Some((status, body)) = parser.eof() {
            shared.response(&status.1, status.0, body);
        }
        let _ = cw.shutdown().await;
    };
    tokio::join!(up, down);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Splits the client's bytes into request heads (the Destination sends GET and HEAD only,
/// without bodies) and yields `(method, path)` of each.
#[derive(Debug, Default)]
struct RequestParser {
    buf: Vec<u8>,
}

impl RequestParser {
    fn feed(&mut self, data: &[u8]) -> Vec<(String, String)> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(end) = find(&self.buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            self.buf.drain(..end + 4);
            let mut words = head.lines().next().unwrap_or("").split(' ');
            let method = words.next().unwrap_or("").to_owned();
            let target = words.next().unwrap_or("");
            let path = target.split(['?', '#']).next().unwrap_or("").to_owned();
            out.push((method, path));
        }
        out
    }
}

#[derive(Debug, Default)]
enum Framing {
    #[default]
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailer,
    UntilClose,
}

/// Frames the server's responses and yields `((status, path), body bytes)` of each.
#[derive(Debug, Default)]
struct ResponseParser {
    buf: Vec<u8>,
    state: Framing,
    current: Option<(u16, String)>,
    body: u64,
}

type Done = ((u16, String), u64);

impl ResponseParser {
    fn complete(&mut self, out: &mut Vec<Done>) {
        if let Some(c) = self.current.take() {
            out.push((c, self.body));
        }
        self.body = 0;
        self.state = Framing::Head;
    }

    fn feed(&mut self, data: &[u8], requests: &Mutex<VecDeque<(String, String)>>) -> Vec<Done> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            match self.state {
                Framing::Head => {
                    let Some(end) = find(&self.buf, b"\r\n\r\n") else {
                        break;
                    };
                    let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                    self.buf.drain(..end + 4);
                    let mut lines = head.lines();
                    let status: u16 = lines
                        .next()
                        .and_then(|l| l.split(' ').nth(1))
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    if (100..200).contains(&status) {
                        continue;
                    }
                    let (mut length, mut chunked) = (None, false);
                    for l in lines {
                        let Some((name, value)) = l.split_once(':') else {
                            continue;
                        };
                        let (name, value) = (name.trim(), value.trim());
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.parse::<u64>().ok();
                        } else if name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = value.to_ascii_lowercase().contains("chunked");
                        }
                    }
                    let (method, path) = lock(requests).pop_front().unwrap_or_default();
                    self.current = Some((status, path));
                    self.body = 0;
                    if method == "HEAD" || status == 204 || status == 304 {
                        self.complete(&mut out);
                    } else if chunked {
                        self.state = Framing::ChunkSize;
                    } else if let Some(n) = length {
                        self.state = Framing::Length(n);
                        if n == 0 {
                            self.complete(&mut out);
                        }
                    } else {
                        self.state = Framing::UntilClose;
                    }
                }
                Framing::Length(left) | Framing::ChunkData(left) => {
                    let k = left.min(self.buf.len() as u64);
                    self.buf.drain(..k as usize);
                    self.body += k;
                    let rest = left - k;
                    let chunk = matches!(self.state, Framing::ChunkData(_));
                    match (rest, chunk) {
                        (0, false) => self.complete(&mut out),
                        (0, true) => self.state = Framing::ChunkEnd,
                        (r, false) => {
                            self.state = Framing::Length(r);
                            break;
                        }
                        (r, true) => {
                            self.state = Framing::ChunkData(r);
                            break;
                        }
                    }
                }
                Framing::ChunkSize => {
                    let Some(end) = find(&self.buf, b"\r\n") else {
                        break;
                    };
                    let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                    self.buf.drain(..end + 2);
                    let hex = line.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(hex, 16).unwrap_or(0);
                    self.state = if size == 0 {
                        Framing::Trailer
                    } else {
                        Framing::ChunkData(size)
                    };
                }
                Framing::ChunkEnd => {
                    if self.buf.len() < 2 {
                        break;
                    }
                    self.buf.drain(..2);
                    self.state = Framing::ChunkSize;
                }
                Framing::Trailer => {
                    let Some(end) = find(&self.buf, b"\r\n") else {
                        break;
                    };
                    self.buf.drain(..end + 2);
                    if end == 0 {
                        self.complete(&mut out);
                    }
                }
                Framing::UntilClose => {
                    self.body += self.buf.len() as u64;
                    self.buf.clear();
                    break;
                }
            }
        }
        out
    }

    fn eof(&mut self) -> Option<Done> {
        match self.state {
            Framing::UntilClose => {
                let mut out = Vec::new();
                self.complete(&mut out);
                out.pop()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_length_chunked_and_head_responses() {
        let reqs = Mutex::new(VecDeque::new());
        let mut rp = RequestParser::default();
        for r in rp.feed(
            b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\nHEAD /b HTTP/1.1\r\n\r\nGET /c HTTP/1.1\r\n",
        ) {
            lock(&reqs).push_back(r);
        }
        for r in rp.feed(b"\r\n") {
            lock(&reqs).push_back(r);
        }
        assert_eq!(lock(&reqs).len(), 3);
        let mut p = ResponseParser::default();
        let stream: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n";
        // Fed a byte at a time, as the worst split of reads.
        let mut got = Vec::new();
        for b in stream {
            got.extend(p.feed(std::slice::from_ref(b), &reqs));
        }
        assert_eq!(
            got,
            [
                ((200, "/a".to_owned()), 5),
                ((200, "/b".to_owned()), 0),
                ((200, "/c".to_owned()), 7)
            ]
        );
    }
}
