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
    HttpOptions, PushOptions, PushStats, Quiet, Round, StopHandle, SyncOptions, WatchOptions, sync,
    watch_push,
};
use resourcesync_source::server::{self, ServeOptions};
use resourcesync_source::watch::WatchOptions as SourceWatchOptions;
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
    // The model measures the protocol: the Destination's own check of its copies on disk
    // (crate::repair of the destination) is no part of it.
    sopts.check_copies = resourcesync_destination::repair::CheckCopies::Off;
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
        return drive_push(cfg, w, running, shared, src, dst, tmp, sopts).await;
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
    finish(shared, changes, publishing, outcome).await
}

/// The push strategy: the Destination's push follower ([`watch_push`], as `sync --watch
/// --push` runs it) subscribed at the Source's embedded hub, the hub delivering through a second
/// counting proxy in front of the follower's callback.
///
/// Each round the follower reports (a payload applied, or a catch-up sync) is one iteration: it
/// transferred the deliveries received since the last round (one request and the payload's
/// body bytes each; HTTP headers left out, as for every response) and what the Destination
/// fetched through the Source's proxy meanwhile; its `sync_seconds` start when the oldest of
/// those deliveries reached the callback: the follower's own work on a payload is what model
/// mode takes as `sync_overhead` for push. The publish delay measured is a publish batch's time,
/// from its start to the delivery of its notification (scan, Change List, the hub's queue and
/// its POST): model mode publishes push changes in batches of that length, a change made
/// while one runs waiting for the next, as the publisher here does.
#[allow(clippy::too_many_arguments)]
async fn drive_push(
    cfg: &Config,
    w: &Workload,
    running: &server::Running,
    shared: &Arc<Shared>,
    src: &Path,
    dst: &Path,
    tmp: &Path,
    sopts: SyncOptions,
) -> Result<()> {
    if running.hub().is_none() {
        return Err(Error::Run("the Source runs without its hub".into()));
    }
    // The follower binds its callback server on a port of its choosing and tells it through its
    // stats; the delivery proxy forwards there (no delivery can come before the follower has
    // subscribed, so before it has bound).
    let push_stats = Arc::new(PushStats::default());
    let front = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::io("binding the delivery proxy", e))?;
    let front_addr = front
        .local_addr()
        .map_err(|e| Error::io("delivery proxy address", e))?;
    let deliveries = tokio::spawn(delivery_proxy(front, push_stats.clone(), shared.clone()));
    let popts = PushOptions {
        callback_listen: "127.0.0.1:0".into(),
        callback_url: Some(format!("http://{front_addr}/")),
        // No catch-up polls in the measured interval: every change comes by notification.
        poll_interval: Duration::from_secs(3600),
        ..PushOptions::default()
    };
    let stop = StopHandle::new();
    // Told once the follower is subscribed and caught up (its second round), then after
    // every round.
    let ready = Arc::new(tokio::sync::Notify::new());
    let progress = Arc::new(tokio::sync::Notify::new());
    // The first error reading the copies, reported at the end.
    let failed: Arc<Mutex<Option<Error>>> = Arc::default();
    let on_round = {
        let (shared, dst, ready, progress, failed) = (
            shared.clone(),
            dst.to_path_buf(),
            ready.clone(),
            progress.clone(),
            failed.clone(),
        );
        let mut rounds = 0u64;
        move |_: &Round| {
            rounds += 1;
            let Some(clock) = *lock(&shared.clock) else {
                if rounds == 2 {
                    ready.notify_one();
                }
                return;
            };
            let t = clock.now();
            let (mut transfer, arrived) = {
                let mut m = lock(&shared.meter);
                // Each resource is required once per iteration.
                m.fetched.clear();
                (
                    std::mem::take(&mut m.transfer),
                    std::mem::take(&mut m.arrived),
                )
            };
            let p = std::mem::take(&mut *lock(&shared.push));
            transfer.requests += p.deliveries;
            transfer.total += p.bytes;
            let started = p.published.unwrap_or(t).min(t);
            if let Err(e) = observe(&shared, &dst, t, &arrived) {
                lock(&failed).get_or_insert(e);
            }
            // Busy until the copies are in place (the last body's arrival, as the copy's time
            // in sync is taken; a removal at the round's end), as model mode counts it.
            let end = arrived
                .values()
                .copied()
                .fold(None, |m: Option<f64>, a| Some(m.map_or(a, |m| m.max(a))));
            {
                let mut tr = lock(&shared.tracker);
                tr.iteration(started, transfer);
                tr.busy(started, end.unwrap_or(t).max(started) - started);
            }
            progress.notify_one();
        }
    };
    let mut follower = {
        let (stop, sopts) = (stop.clone(), sopts.clone());
        tokio::spawn(async move {
            watch_push(
                &sopts,
                &WatchOptions::default(),
                &popts,
                Arc::new(Quiet),
                &stop,
                Some(push_stats),
                on_round,
            )
            .await
        })
    };
    // Subscribed and caught up, or the follower ended (an error).
    tokio::select! {
        () = ready.notified() => {}
        r = &mut follower => {
            deliveries.abort();
            return match r {
                Ok(Ok(_)) => Err(Error::Run("the push follower stopped before it was subscribed".into())),
                Ok(Err(e)) => Err(e.into()),
                Err(e) => Err(Error::Run(format!("the push follower failed: {e}"))),
            };
        }
    }
    observe(shared, dst, 0.0, &HashMap::new())?;
    {
        let tr = lock(&shared.tracker);
        if (0..tr.ids()).any(|id| !tr.in_sync(id)) {
            stop.stop();
            return Err(Error::Run(
                "the push follower's first sync did not copy every resource".into(),
            ));
        }
    }
    let clock = WallClock::start();
    {
        let mut m = lock(&shared.meter);
        *m = Meter {
            active: true,
            ..Meter::default()
        };
    }
    *lock(&shared.clock) = Some(clock);
    let (changes, publishing) = spawn_source(w, running, shared, src, tmp, clock, true);
    let outcome: Result<()> = async {
        // Every change made, then applied (or a bound: what is still out of sync is counted
        // apart as unsynced, as the polling strategies count it after their last drain).
        tokio::time::sleep_until(clock.instant_of(cfg.duration).into()).await;
        let bound = tokio::time::Instant::now()
            + Duration::from_secs_f64((cfg.sync_interval * f64::from(DRAIN_SYNCS)).max(5.0));
        while !changes.is_finished() || lock(&shared.tracker).unsynced() > 0 {
            if follower.is_finished() {
                break;
            }
            if tokio::time::timeout_at(bound, progress.notified())
                .await
                .is_err()
            {
                break;
            }
        }
        Ok(())
    }
    .await;
    stop.stop();
    let followed = follower.await;
    deliveries.abort();
    let r = finish(shared, changes, publishing, outcome).await;
    if let Some(e) = lock(&failed).take() {
        return Err(e);
    }
    match followed {
        Ok(Ok(_)) => r,
        Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(Error::Run(format!("the push follower failed: {e}"))),
    }
}

/// The proxy in front of the push follower's callback: counts each POST (a content
/// distribution request of the hub, WebSub §7) and its body bytes, for the next round.
async fn delivery_proxy(listener: TcpListener, upstream: Arc<PushStats>, shared: Arc<Shared>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = shared.clone();
        let Some(&upstream) = upstream.callback_addr.get() else {
            // Not subscribed yet, so not a delivery of the hub's: refused.
            continue;
        };
        conns.spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let up = async move {
                let mut parser = RequestParser {
                    keep: true,
                    ..RequestParser::default()
                };
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    for (method, _, length, body) in parser.feed_with_bodies(&buf[..n]) {
                        if method == "POST" {
                            shared.delivered(length, &body);
                        }
                    }
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = sw.shutdown().await;
            };
            let down = async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
                let _ = cw.shutdown().await;
            };
            tokio::join!(up, down);
        });
        while conns.try_join_next().is_some() {}
    }
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
    /// Body bytes of the current request still to skip, and its length.
    skip: u64,
    length: u64,
    /// The request whose body is being skipped, with its body.
    pending: Option<(String, String, Vec<u8>)>,
    /// Keep bodies (up to [`MAX_KEPT_BODY`] bytes each), else only count them.
    keep: bool,
}

/// Most bytes of a request body the delivery proxy keeps (the follower's own limit).
const MAX_KEPT_BODY: u64 = 16 << 20;

impl RequestParser {
    /// `(method, path)` of each request head.
    fn feed(&mut self, data: &[u8]) -> Vec<(String, String)> {
        self.feed_with_bodies(data)
            .into_iter()
            .map(|(m, p, _, _)| (m, p))
            .collect()
    }

    /// `(method, path, body length, body kept)` of each complete request (bodies framed by
    /// Content-Length, as the subscriber's forms and the hub's deliveries are).
    fn feed_with_bodies(&mut self, data: &[u8]) -> Vec<(String, String, u64, Vec<u8>)> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            if self.skip > 0 {
                let k = self.skip.min(self.buf.len() as u64);
                let bytes = self.buf.drain(..k as usize);
                if let Some(p) = &mut self.pending {
                    if self.keep && (p.2.len() as u64) < MAX_KEPT_BODY {
                        p.2.extend(bytes);
                    }
                }
                self.skip -= k;
                if self.skip > 0 {
                    break;
                }
            }
            if let Some((m, p, body)) = self.pending.take() {
                out.push((m, p, self.length, body));
            }
            let Some(end) = find(&self.buf, b"\r\n\r\n") else {
                break;
            };
            let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            self.buf.drain(..end + 4);
            let mut lines = head.lines();
            let mut words = lines.next().unwrap_or("").split(' ');
            let method = words.next().unwrap_or("").to_owned();
            let target = words.next().unwrap_or("");
            let path = target.split(['?', '#']).next().unwrap_or("").to_owned();
            let length = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            self.skip = length;
            self.length = length;
            self.pending = Some((method, path, Vec::new()));
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
        // Request bodies (a subscription form, a delivery) are framed by Content-Length and
        // kept when asked for.
        let mut rp = RequestParser {
            keep: true,
            ..RequestParser::default()
        };
        let mut heads = Vec::new();
        for b in b"POST /cb HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /x HTTP/1.1\r\n\r\n" {
            heads.extend(rp.feed_with_bodies(std::slice::from_ref(b)));
        }
        assert_eq!(
            heads,
            [
                ("POST".into(), "/cb".into(), 5, b"hello".to_vec()),
                ("GET".into(), "/x".into(), 0, Vec::new())
            ]
        );
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
