//! Real mode: our Source server and our Destination over loopback HTTP, in real time.
//!
//! The Source is `resourcesync-source`'s server over a temporary directory of the workload's
//! resources; each change of the [`Workload`] is written (atomically) at its time and published
//! at once (one scan and publish batch; the Resource List is regenerated on every batch, so that
//! baseline sees it current). The Destination is `resourcesync-destination`'s [`sync`](resourcesync_destination::sync()), run every
//! `sync_interval`:
//!
//! - **incremental**: the ordinary run after the first, from the Change Lists after the cursor.
//! - **baseline**: the cursor is cleared before each run, so that the Destination diffs its state
//!   against the Resource List (its "baseline diff", Z39.99-2014 §10).
//! - **push**: the Source runs with its embedded WebSub hub (`serve --hub embedded`) and the
//!   Destination is `resourcesync-destination`'s push follower ([`watch_push`], as `sync --watch
//!   --push` runs it): a first sync, a subscription, then each change notification applied as
//!   it arrives (see `drive_push`). The hub delivers through a second counting proxy in front
//!   of the follower's callback: each delivery counts as one request and its payload's body
//!   bytes, as a document would.
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

use resourcesync_destination::{
    Destination, HttpOptions, Ports, PushOptions, PushStats, Quiet, Round, StopHandle, SyncOptions,
    WatchOptions, http::Http, sync, watch_push,
};
use resourcesync_source::server::{self, ServeOptions};
use resourcesync_source::watch::WatchOptions as SourceWatchOptions;
use resourcesync_source::{Source, SourceConfig};
use resourcesync_store::{RecordWrites, SourceCursor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::clock::{Clock, WallClock};
use crate::config::{Config, Strategy};
use crate::error::{Error, Result};
use crate::metrics::{Metrics, Tracker, Transfer};
use crate::model::DRAIN_SYNCS;
use crate::workload::{ChangeKind, ResState, Workload, content, id_of_path, resource_path};

mod push;
mod wire;

use push::drive_push;
use wire::proxy;

/// Most resources a real run takes (every file is written and read back after each run).
pub const MAX_REAL_RESOURCES: u64 = 20_000;

/// A copy whose content is not the current lead state's.
const STALE: u64 = u64::MAX;

/// Runs `cfg` over loopback HTTP in real time.
pub fn run(cfg: &Config) -> Result<Metrics> {
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
    /// Changes written but not yet published (see [`Unpublished`]).
    unpublished: Mutex<Unpublished>,
    /// Push: notifications published and delivered, not yet accounted to a round.
    push: Mutex<PushMeter>,
    /// Push: the publish batches whose notification has not reached the Destination yet,
    /// oldest first: when each started and the resources of its changes.
    in_batch: Mutex<VecDeque<(f64, HashSet<u64>)>>,
}

/// Changes written but not yet published (resource, time); the sum and count of publish delays.
type Unpublished = (Vec<(u64, f64)>, f64, u64);

/// What push adds to the [`Meter`]: the deliveries of the hub to the Destination's callback.
#[derive(Debug, Default)]
struct PushMeter {
    /// When the oldest notification not yet accounted to a round reached the Destination's
    /// callback, on the run's clock.
    published: Option<f64>,
    /// Deliveries (content distribution requests, WebSub §7) and their body bytes.
    deliveries: u64,
    bytes: u64,
}

impl Shared {
    /// A notification of `length` bytes reached the Destination's callback: the batch that
    /// published the resources it names (Change Notification 1.0.1 §3: one `<loc>` per change)
    /// took from its start until now.
    fn delivered(&self, length: u64, body: &[u8]) {
        let Some(now) = lock(&self.clock).map(|c| c.now()) else {
            return;
        };
        let text = String::from_utf8_lossy(body);
        let named: HashSet<u64> = text
            .split("<loc>")
            .skip(1)
            .filter_map(|loc| {
                let url = loc.split("</loc>").next().unwrap_or("");
                id_of_path(url.rsplit('/').next().unwrap_or(""))
            })
            .collect();
        // The oldest batch with a change it names is the one it comes from; older ones had
        // nothing new (their changes went out with an earlier batch, which scanned them).
        let start = {
            let mut b = lock(&self.in_batch);
            match b.iter().position(|(_, ids)| !ids.is_disjoint(&named)) {
                Some(k) => {
                    b.drain(..k);
                    b.pop_front().map(|(s, _)| s)
                }
                None => None,
            }
        };
        if let Some(s) = start {
            self.published([s], now);
        }
        let mut p = lock(&self.push);
        p.deliveries += 1;
        p.bytes += length;
        p.published.get_or_insert(now);
    }

    /// The changes made at `times` are published (at `now`).
    fn published(&self, times: impl IntoIterator<Item = f64>, now: f64) {
        let mut u = lock(&self.unpublished);
        for t in times {
            u.1 += now - t;
            u.2 += 1;
        }
    }

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
        watch: SourceWatchOptions {
            // Changes are published by the driver as it makes them, not found by watching.
            use_watcher: false,
            rescan_interval: Duration::from_secs(86_400),
            resourcelist_interval: Duration::ZERO,
            ..SourceWatchOptions::default()
        },
        ..ServeOptions::default()
    };
    let hub = (cfg.strategy == Strategy::Push).then_some(server::HubChoice::Embedded);
    let running = server::start_with(source, back, opts, hub).await?;
    let shared = Arc::new(Shared {
        tracker: Mutex::new(Tracker::new(
            cfg.duration,
            w.initial.iter().map(|s| (s.id, s.token)),
        )),
        meter: Mutex::new(Meter::default()),
        clock: Mutex::new(None),
        unpublished: Mutex::new((Vec::new(), 0.0, 0)),
        push: Mutex::new(PushMeter::default()),
        in_batch: Mutex::new(VecDeque::new()),
    });
    {
        let mut tr = lock(&shared.tracker);
        for s in &w.initial {
            tr.set_lead_size(s.id, s.size);
        }
    }
    let proxy = tokio::spawn(proxy(front, back_addr, shared.clone()));
    let result = drive(Drive {
        cfg,
        w: &w,
        running: &running,
        shared: &shared,
        src: &src,
        dst: &dst,
        tmp: &tmp,
    })
    .await;
    proxy.abort();
    // The aborted proxy is gone once awaited; its connection tasks are cancelled as the
    // runtime gets to them, so they may still hold `shared` for a moment: the tracker is
    // taken out of it rather than unwrapped (a late response finds an empty one).
    let _ = proxy.await;
    let stopped = running.shutdown().await;
    result?;
    stopped?;
    let tracker = std::mem::replace(
        &mut *lock(&shared.tracker),
        Tracker::new(cfg.duration, std::iter::empty()),
    );
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

/// What a real run drives: its configuration and workload, the running Source, what is
/// measured, and its folders (the Source's, the Destination's, scratch).
#[derive(Clone, Copy)]
struct Drive<'a> {
    cfg: &'a Config,
    w: &'a Workload,
    running: &'a server::Running,
    shared: &'a Arc<Shared>,
    src: &'a Path,
    dst: &'a Path,
    tmp: &'a Path,
}

async fn drive(d: Drive<'_>) -> Result<()> {
    let Drive {
        cfg,
        w,
        running,
        shared,
        src,
        dst,
        tmp,
    } = d;
    let mut sopts = SyncOptions::new(running.source_description_url(), dst);
    sopts.delete = true;
    sopts.use_dumps = false;
    // The model measures the protocol: the Destination's own check of its copies on disk
    // (crate::repair of the destination) is no part of it.
    sopts.check_copies = resourcesync_destination::options::CheckCopies::Off;
    // The paper's baseline strategy reads the Resource List only (no catch-up from the Change
    // Lists after it, which is the incremental strategy's work).
    sopts.catch_up = cfg.strategy != Strategy::Baseline;
    sopts.concurrency = cfg.network.concurrency;
    sopts.http = HttpOptions {
        retries: 1,
        backoff_base: Duration::from_millis(20),
        ..HttpOptions::default()
    };
    if cfg.strategy == Strategy::Push {
        return drive_push(d, sopts).await;
    }
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
    let (changes, publishing) = spawn_source(w, running, shared, src, tmp, clock, false);
    let mut k = 1u64;
    let mut drained = 0u32;
    // One Destination for the run, on the directory's ports: a baseline run starts from its
    // state with the cursor cleared.
    let dest = Destination::new(
        sopts.url.clone(),
        Ports::directory(&sopts.dest, &sopts.state_path())?,
        Http::new(sopts.http.clone()).map_err(resourcesync_destination::Error::from)?,
    );
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
                dest.ports().state.set_cursor(&SourceCursor {
                    source: key.clone(),
                    cursor: None,
                    synced_at: None,
                    checked_at: None,
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
            dest.sync(&sopts, Arc::new(Quiet)).await?;
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
    finish(shared, changes, publishing, outcome).await
}

type Task = tokio::task::JoinHandle<Result<()>>;

/// Starts the Source's side of the run: the workload's changes, each written at its time, and
/// the publisher (see [`drive`]).
fn spawn_source(
    w: &Workload,
    running: &server::Running,
    shared: &Arc<Shared>,
    src: &Path,
    tmp: &Path,
    clock: WallClock,
    notified: bool,
) -> (Task, Task) {
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
                if notified {
                    // Published when its notification reaches the Destination (see
                    // `drive_push`).
                    let ids = batch.iter().map(|&(id, _)| id).collect();
                    lock(&shared.in_batch).push_back((clock.now(), ids));
                }
                publisher.batch(false).await?;
                if !notified {
                    shared.published(batch.iter().map(|&(_, t)| t), clock.now());
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
                        lock(&shared.unpublished).0.push((c.state.id, now));
                    } else {
                        write_atomic(&src, &tmp, &c.state).await?;
                        let now = clock.now();
                        let mut tr = lock(&shared.tracker);
                        tr.lead_changed(now, c.state.id, Some(c.state.token));
                        tr.set_lead_size(c.state.id, c.state.size);
                        drop(tr);
                        lock(&shared.unpublished).0.push((c.state.id, now));
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
    (changes, publishing)
}

/// Waits for the Source's tasks and records the publish delay measured.
async fn finish(
    shared: &Arc<Shared>,
    changes: Task,
    publishing: Task,
    outcome: Result<()>,
) -> Result<()> {
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
