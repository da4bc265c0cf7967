//! Download work shared per resource between the workers sharing a PostgreSQL state.
//!
//! A Source is synced by the worker holding its lease (the coordinator, see
//! [`crate::follow`]): it discovers, reads the lists, diffs. When its sync has more fetches
//! than `limits.share_above`, it does not fetch them itself: the Destination engine hands them
//! to its `Queue` (the engine's `Downloads` port, [`crate::queue`]), which adds them as work items to the
//! Source's own schema (key: the Source and the URI, so that a resource is never queued
//! twice), then waits until none is left (woken by the completions: `WorkQueue::wait_drained`,
//! PostgreSQL's `LISTEN`/`NOTIFY`, no polling); the sync then goes
//! on as without sharing (deletes, cursor). Small syncs, and SQLite state, fetch as before.
//! So does a coordinator alone: it asks before each page of 1,000 fetches whether another
//! worker watching the Source is alive (`PgState::other_workers`: the heartbeats every
//! claimer renews in the schemas of its Sources, `PgState::beat_workers`, every third of
//! `limits.lease`, for a lease, and at once when a coordinator alone asks for workers,
//! `WORKER_WANTED`) and whether fewer than two pages per other worker wait for a claim in the
//! queue; if not, it fetches the page itself (the queue's PostgreSQL work would buy nothing, or
//! the others have as much as they keep up with), and asks again a page later (the question
//! asked ahead, so that the run never stops for it). A drain that emptied its queue waits
//! [`LINGER`] for the next page, its connection and clients kept. While its sync fetches, this
//! worker's claimer leaves the Source's queue to the others (`OwnQueues`), and takes part
//! from the sync's wait. A claimer that meets a schema newer than it knows says so once and
//! stops (`Claiming::Refused`): its coordinators then share nothing.
//!
//! The queue is the coordinator's side ([`crate::queue`]). Every worker, the coordinator
//! included, runs one [`claimer`]: it asks, in one query over
//! the Sources' schemas, which queues hold items to claim, drains several at once (up to
//! `limits.concurrency`; one Source's slow download never holds back another's queue), and
//! claims their items (`SELECT … FOR
//! UPDATE SKIP LOCKED`: two workers never hold one), a few times its downloads in flight for
//! that Source (its `concurrency`), and starts fetches while fewer than that wait for a download
//! slot: downloads go on while copies wait for their commit (up to [`MAX_HELD`] of them). Each fetch is the engine's own (`SharedFetcher`: the download, its length
//! and digests checked, the copy put in the Source's store by the committer); the row is then
//! written by a batch that also completes the claim (`Claimed`): one transaction, which fails
//! if the claim expired and was taken over, so that a stalled worker never writes over the
//! one that took its work. While its claims are held (waiting for a download slot, or
//! downloading), the worker renews them every third of `limits.lease`, all in one statement
//! (`Records::renew_work`), as the Source's lease is renewed during a sync
//! ([`crate::follow`]): a download longer than the lease is not taken over by another worker
//! and fetched twice. A claim is renewed until completed or released; one that a renewal finds
//! lost (it expired during a stall, and may have been taken over) is not renewed again, and its
//! completion is refused as above. A worker killed stops renewing: its claims expire.
//! A failure is recorded as a pending change of the Source (retried by
//! its next sync), in the same way; an item claimed [`MAX_ATTEMPTS`] times without completing
//! (its workers died with it) is recorded so without being tried again.
//!
//! Durability as in a single worker's sync: a copy is in place before its row; a worker
//! killed at any point loses at most its in-flight work, whose claims expire after
//! `limits.lease` and are taken by another worker; the coordinator waits for them, and if it
//! dies too, the next holder of the Source's lease resumes from the state (rows written stay,
//! copies in place without a row are adopted by their digests).
//!
//! Why a queue per Source, in the Source's schema, rather than one for all: the completion of
//! an item and the row of its copy must be one transaction, and the rows are in the Source's
//! schema. A worker therefore watches many queues: told when work is added to any (a
//! connection listening on the queues' channel), and besides one query per look over all of them
//! (`PgState::schemas_with_work`), on one connection, and a connection per Source only
//! while it fetches from that Source. The claimer takes no sync slot (`limits.concurrency`,
//! `per_host`): the coordinator holds its Source's slot while the fetches run, and a claimer
//! waiting for that slot would wait for itself; the bandwidth limit and each Source's `rate`
//! and `concurrency` apply as to a sync.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use resourcesync_destination::http::Http;
use resourcesync_destination::{Quiet, SharedFetch, SharedFetcher, SharedOutcome, SlotTicket};
use resourcesync_store::{
    Batch, Claim, Claimed, Op, PendingChange, PgState, Records, WORKER_WANTED, WorkQueue,
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::SourceSpec;
use crate::queue::{POLL_MAX, POLL_MIN, blocking};
use crate::shared::{Claiming, Shared, StateChoice, schema_of};

/// The most fetches one worker runs for one Source (downloading, or past their download and
/// waiting for their commit): bounds its memory (a fetch waiting for its commit holds a few
/// hundred bytes). What it takes from the others is bounded apart (see [`Drain`]).
pub const MAX_HELD: usize = 4096;

/// Claims of one item after which it is given up (recorded as a pending change, untried):
/// the workers that claimed it died or stalled each time.
pub const MAX_ATTEMPTS: u32 = 3;

/// Every worker's side: claims and does the fetches of every Source's queue until `cancel`
/// (see the module's documentation). Only with a PostgreSQL state, and while
/// `limits.share_above` is set. The queues of several Sources are drained at once (up to
/// `limits.concurrency` of them), each as its Source's `concurrency` allows, so that one
/// Source's slow download never holds back another's queue; while some drain, the others are
/// looked for as when none does.
pub(crate) async fn claimer(shared: Arc<Shared>, cancel: CancellationToken) {
    let StateChoice::Postgres(url) = shared.opts.state.clone() else {
        return;
    };
    let mut board: Option<Arc<PgState>> = None;
    let mut pause = POLL_MIN;
    // Told when work is added to any queue (PostgreSQL's `NOTIFY`, by a thread listening on
    // a connection of its own): a claimer looks at once rather than at its next pause.
    let added = Arc::new(tokio::sync::Notify::new());
    // The same, by schema, for the drains lingering on their queue ([`LINGER`]).
    let (added_to, _) = tokio::sync::broadcast::channel::<String>(256);
    // Told when a coordinator alone asks for workers (`WORKER_WANTED`): the heartbeat is
    // renewed now (in a schema made since the last one, above all), at most once a second.
    let wanted = Arc::new(tokio::sync::Notify::new());
    let mut last_beat: Option<tokio::time::Instant> = None;
    let mut listening: Option<tokio::task::JoinHandle<()>> = None;
    // The queues being drained: by task, the schema.
    let mut draining: JoinSet<Drained> = JoinSet::new();
    let mut active: HashMap<tokio::task::Id, String> = HashMap::new();
    // The queues of a schema newer than this program knows: never drained (said once).
    let mut refused: HashSet<String> = HashSet::new();
    // This worker's heartbeat in the queues it watches (`PgState::beat_workers`): renewed
    // every third of `limits.lease`, for a lease; a coordinator shares a page of its fetches
    // only while another worker's is unexpired (`crate::queue::Queue::share_now`).
    let mut next_beat = tokio::time::Instant::now();
    let mut beaten: Vec<String> = Vec::new();
    while !cancel.is_cancelled() {
        // Sharing off (`limits.share_above` unset, the default): no query at all, only a look
        // at the configuration now and then (a SIGHUP may turn it on).
        if shared.limits().share_above.is_none() {
            board = None;
            pause = POLL_MAX;
        } else {
            let specs: Vec<SourceSpec> = shared.sources();
            let schemas: Vec<String> = specs.iter().map(|s| schema_of(&s.name)).collect();
            let found = match board.clone() {
                Some(b) => {
                    if tokio::time::Instant::now() >= next_beat {
                        let lease = shared.limits().lease;
                        next_beat = tokio::time::Instant::now() + lease / 3;
                        let (b, s, w) = (b.clone(), schemas.clone(), shared.opts.worker.clone());
                        if let Err(e) = blocking(move || b.beat_workers(&s, &w, lease)).await {
                            tracing::warn!("renewing this worker's heartbeat: {e}");
                        }
                        beaten.clone_from(&schemas);
                        last_beat = Some(tokio::time::Instant::now());
                    }
                    let s = schemas.clone();
                    blocking(move || b.schemas_with_work(&s)).await
                }
                None => {
                    let u = url.clone();
                    match blocking(move || PgState::connect(&u)).await {
                        // A schema newer than this program knows stays so until this program
                        // is upgraded: said once, and this worker stops taking part (its
                        // coordinators fetch alone, `crate::queue::Queue::share_now`) rather
                        // than asking again and again.
                        Err(resourcesync_destination::Error::Store(
                            e @ resourcesync_store::Error::NewerSchema { .. },
                        )) => {
                            tracing::error!(
                                "not sharing fetches with the other workers: {e}; until then \
                                 this worker fetches its own Sources' resources itself"
                            );
                            shared.claiming.send_replace(Claiming::Refused);
                            break;
                        }
                        Ok(b) => {
                            let b = Arc::new(b);
                            shared.claiming.send_replace(Claiming::Watching);
                            if listening.as_ref().is_none_or(|h| h.is_finished()) {
                                let (b, a, c) = (b.clone(), added.clone(), cancel.clone());
                                let (to, w) = (added_to.clone(), wanted.clone());
                                listening = Some(tokio::task::spawn_blocking(move || {
                                    listen(&b, &a, &to, &w, &c);
                                }));
                            }
                            board = Some(b);
                            continue;
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match found {
                Ok(with) => {
                    let width = shared.limits().concurrency.max(1);
                    for schema in with {
                        if active.len() >= width {
                            break;
                        }
                        if active.values().any(|s| *s == schema)
                            || refused.contains(&schema)
                            || shared.own.left_to_others(&schema)
                        {
                            continue;
                        }
                        let Some(spec) = specs.iter().find(|s| schema_of(&s.name) == schema) else {
                            continue;
                        };
                        let (sh, spec, u, c) =
                            (shared.clone(), spec.clone(), url.clone(), cancel.clone());
                        let more = added_to.subscribe();
                        let h =
                            draining.spawn(async move { drain(&sh, &spec, &u, more, &c).await });
                        active.insert(h.id(), schema);
                    }
                }
                Err(e) => {
                    tracing::warn!("looking for shared work: {e}");
                    board = None;
                    pause = POLL_MAX;
                }
            }
        }
        // The next look: when a queue is drained (at once), or after the pause.
        tokio::select! {
            () = cancel.cancelled() => break,
            Some(done) = draining.join_next_with_id(), if !draining.is_empty() => {
                let (id, drained) = match done {
                    Ok((id, d)) => (id, d),
                    Err(e) => {
                        tracing::error!("a shared queue's drain failed: {e}");
                        (e.id(), Drained::Failed)
                    }
                };
                let schema = active.remove(&id);
                if drained == Drained::Refused {
                    refused.extend(schema);
                }
                let ok = drained == Drained::Done;
                // A queue it could not work on (its state or store unreachable): not again
                // at once.
                pause = if ok { POLL_MIN } else { POLL_MAX };
                if ok {
                    continue;
                }
            }
            () = added.notified() => {
                pause = POLL_MIN;
                continue;
            }
            () = wanted.notified() => {
                let now = tokio::time::Instant::now();
                if last_beat.is_none_or(|t| now.duration_since(t) >= WANTED_EVERY) {
                    next_beat = now;
                }
                continue;
            }
            () = shared.own.changed.notified() => {
                pause = POLL_MIN;
                continue;
            }
            () = tokio::time::sleep_until(next_beat), if board.is_some() => continue,
            () = tokio::time::sleep(pause) => {}
        }
        // While the listener runs, a look now and then is only for claims that expired (no
        // statement tells of them): every third of a claim's time to live at most.
        let max = if listening.as_ref().is_some_and(|h| !h.is_finished()) {
            (shared.limits().lease / 3).clamp(POLL_MAX, POLL_MAX * 10)
        } else {
            POLL_MAX
        };
        pause = (pause * 2).min(max);
    }
    // Cancelled: each drain gives back what it had not started and ends its fetches in flight.
    while draining.join_next().await.is_some() {}
    // Gone: the coordinators see it at once rather than when its heartbeat expires.
    if let Some(b) = board.filter(|_| !beaten.is_empty()) {
        let w = shared.opts.worker.clone();
        if let Err(e) =
            blocking(move || b.beat_workers(&beaten, &w, std::time::Duration::ZERO)).await
        {
            tracing::debug!("removing this worker's heartbeat: {e}");
        }
    }
    // The listener ends once the claimer's reference to `added` is gone (at once when
    // cancelled; within a slice when the claimer stopped on its own).
    drop(added);
    if let Some(h) = listening {
        let _ = h.await;
    }
}

/// How long the listener waits for a notification before it looks at `cancel` again.
const LISTEN_SLICE: std::time::Duration = std::time::Duration::from_millis(500);

/// Listens on the queues' channel until `cancel`, or until the claimer is gone (it holds the
/// other reference to `added`: a runtime shutting down drops the claimer without cancelling,
/// and waits for this blocking task), waking the claimer (`added`) when work is added to any
/// queue, and the drains of that queue (`added_to`, by schema); ends on a failure (logged),
/// the claimer then looks at its pauses, and starts a listener again when it connects again.
fn listen(
    board: &PgState,
    added: &Arc<tokio::sync::Notify>,
    added_to: &tokio::sync::broadcast::Sender<String>,
    wanted: &tokio::sync::Notify,
    cancel: &CancellationToken,
) {
    let mut l = match board.work_listener() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("listening for shared work: {e}");
            return;
        }
    };
    while !cancel.is_cancelled() && Arc::strong_count(added) > 1 {
        match l.wait(LISTEN_SLICE) {
            Ok(said) => {
                if said.iter().any(|(_, what)| what == WORKER_WANTED) {
                    wanted.notify_one();
                }
                let mut any = false;
                for (schema, _) in said.into_iter().filter(|(_, what)| what == "insert") {
                    any = true;
                    // None listening: no drain lingers.
                    let _ = added_to.send(schema);
                }
                if any {
                    added.notify_one();
                }
            }
            Err(e) => {
                tracing::warn!("listening for shared work: {e}");
                return;
            }
        }
    }
}

/// The least time between two heartbeats renewed because a coordinator asked for workers.
const WANTED_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a drained queue's drain waits for more work before it ends (see [`linger`]).
pub(crate) const LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits up to [`LINGER`] for work added to `schema`'s queue (told by the listener): whether
/// some was (or some may have been: notices missed), rather than the time up or `cancel`. A
/// coordinator queues its pages one after the other: a drain that waits for the next keeps
/// its connection and its clients instead of opening them again for each.
async fn linger(
    more: &mut tokio::sync::broadcast::Receiver<String>,
    schema: &str,
    cancel: &CancellationToken,
) -> bool {
    let until = tokio::time::Instant::now() + LINGER;
    loop {
        tokio::select! {
            () = cancel.cancelled() => return false,
            () = tokio::time::sleep_until(until) => return false,
            got = more.recv() => match got {
                Ok(s) if s == schema => return true,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return false,
            },
        }
    }
}

/// What one claimed item came to.
struct Done {
    copied: bool,
    failed: bool,
}

/// How a drain of one Source's queue ended ([`drain`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    /// Nothing left to claim (or cancelled).
    Done,
    /// Its state or store could not be reached: tried again at a later look.
    Failed,
    /// Its schema is newer than this program knows: never tried again by this worker.
    Refused,
}

/// Why a drain stopped early.
enum DrainError {
    /// The Source's schema is newer than this program knows.
    Newer(String),
    /// Anything else.
    Other(String),
}

impl From<String> for DrainError {
    fn from(e: String) -> Self {
        DrainError::Other(e)
    }
}

/// Claims and does the fetches of the Source `spec` until its queue has nothing to claim (or
/// `cancel`). A failure to reach its state or store is logged: the items stay queued, for this
/// worker's next look or another's; a schema newer than this program knows is said once, the
/// queue left to the workers that know it.
async fn drain(
    shared: &Arc<Shared>,
    spec: &SourceSpec,
    url: &str,
    more: tokio::sync::broadcast::Receiver<String>,
    cancel: &CancellationToken,
) -> Drained {
    match drain_or_fail(shared, spec, url, more, cancel).await {
        Ok(()) => Drained::Done,
        Err(DrainError::Newer(e)) => {
            tracing::error!(source = %spec.name, "not fetching from the shared queue: {e}");
            Drained::Refused
        }
        Err(DrainError::Other(e)) => {
            tracing::warn!(source = %spec.name, "fetching from the shared queue: {e}");
            Drained::Failed
        }
    }
}

async fn drain_or_fail(
    shared: &Arc<Shared>,
    spec: &SourceSpec,
    url: &str,
    mut more: tokio::sync::broadcast::Receiver<String>,
    cancel: &CancellationToken,
) -> std::result::Result<(), DrainError> {
    let mut d = Drain::open(shared, spec, url).await?;
    let schema = schema_of(&spec.name);
    tracing::debug!(source = %spec.name, "draining the shared queue");
    let every = (d.ttl / 3).max(std::time::Duration::from_millis(10));
    let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // Claimed ahead of the downloads, a batch at a time, so that a download ending
        // starts the next at once (see `Drain`).
        if !d.exhausted
            && d.outcome.is_ok()
            && !cancel.is_cancelled()
            && d.waiting.len() < d.width
            && d.running.len() < MAX_HELD
        {
            d.claim_more(shared, spec).await;
        }
        if cancel.is_cancelled() || d.outcome.is_err() {
            // Not started: back to the queue at once, for another worker.
            let back: Vec<Claim> = d.waiting.drain(..).map(|(c, _)| c).collect();
            let st = d.pg.clone();
            let _ = blocking(move || st.release(&back)).await;
        }
        d.start_waiting()?;
        // Every third of the claims' time to live, the claims held (waiting or downloading)
        // are renewed, so that a download longer than `limits.lease` is not taken over.
        let joined = tokio::select! {
            j = d.running.join_next() => j,
            _ = renew.tick(), if !d.running.is_empty() || !d.waiting.is_empty() => {
                d.renew().await;
                continue;
            }
            () = d.slot_taken.notified(), if !d.waiting.is_empty() || !d.exhausted => continue,
        };
        match joined {
            // Counted as they end, for the page and the API.
            Some(Ok(done)) => {
                shared.status.shared_fetches(
                    &spec.name,
                    u64::from(done.copied),
                    u64::from(done.failed),
                );
                // A queue found empty may be filled again while fetches run (the coordinator
                // queues a page at a time): claimed again, rather than the drain ending after
                // its last fetch and starting again (a gap per page).
                if d.outcome.is_ok() {
                    d.exhausted = false;
                }
            }
            Some(Err(e)) => {
                shared.status.shared_fetches(&spec.name, 0, 1);
                tracing::error!(source = %spec.name, "a shared fetch failed: {e}");
            }
            None if d.waiting.is_empty()
                && (d.exhausted || d.outcome.is_err() || cancel.is_cancelled()) =>
            {
                // Drained: kept open a while for the coordinator's next page (its connection
                // and its clients ready), unless stopping.
                if d.outcome.is_err()
                    || cancel.is_cancelled()
                    || !linger(&mut more, &schema, cancel).await
                {
                    break;
                }
                tracing::debug!(source = %spec.name, "more shared work: claiming again");
                d.exhausted = false;
            }
            None => {}
        }
        if let Some(e) = d.fetchers.values().find_map(|f| f.state_error()) {
            d.outcome = Err(e);
        }
    }
    tracing::debug!(source = %spec.name, "the shared queue drained");
    for f in d.fetchers.into_values() {
        let _ = tokio::task::spawn_blocking(move || f.close()).await;
    }
    Ok(d.outcome?)
}

/// One Source's queue being drained: its state and store, the claims waiting and the fetches
/// running, one fetcher per Source URL and size cap.
struct Drain {
    pg: Arc<dyn WorkQueue>,
    claimed: Arc<Claimed>,
    store: Arc<dyn resourcesync_store::Store>,
    http_opts: resourcesync_destination::http::HttpOptions,
    worker: String,
    ttl: std::time::Duration,
    /// Downloads in flight (the Source's `concurrency`).
    width: usize,
    /// Told when a fetch started takes its download slot: another may start.
    slot_taken: Arc<tokio::sync::Notify>,
    fetchers: HashMap<(String, u64, bool), Arc<SharedFetcher>>,
    waiting: VecDeque<(Claim, SharedFetch)>,
    running: JoinSet<Done>,
    /// Nothing more to claim (or claiming failed).
    exhausted: bool,
    outcome: std::result::Result<(), String>,
    /// Claims found lost on a renewal (expired, perhaps taken over): not renewed again, their
    /// completion refused.
    lost: HashSet<(String, u64)>,
}

impl Drain {
    /// Connects to the Source's schema and opens its store.
    async fn open(
        shared: &Arc<Shared>,
        spec: &SourceSpec,
        url: &str,
    ) -> std::result::Result<Drain, DrainError> {
        let (u, schema) = (url.to_owned(), schema_of(&spec.name));
        let pg = blocking(move || PgState::connect_schema(&u, &schema))
            .await
            .map_err(|e| match e {
                resourcesync_destination::Error::Store(
                    e @ resourcesync_store::Error::NewerSchema { .. },
                ) => DrainError::Newer(e.to_string()),
                e => DrainError::Other(e.to_string()),
            })?;
        let pg = Arc::new(pg);
        let claimed = Arc::new(Claimed::new(pg.clone()));
        let (sh, name) = (shared.clone(), spec.name.clone());
        let (store, _) = tokio::task::spawn_blocking(move || sh.store_of(&name, false))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        // Downloads in flight: the Source's `concurrency`, as in a sync. Fetches past their
        // download wait for their commit without holding a download slot, so that more of
        // them run at once (and more are claimed ahead) than download.
        let width = spec.concurrency.max(1);
        Ok(Drain {
            pg,
            claimed,
            store,
            http_opts: crate::follow::http_options(spec, shared),
            worker: shared.opts.worker.clone(),
            ttl: shared.limits().lease,
            width,
            slot_taken: Arc::new(tokio::sync::Notify::new()),
            fetchers: HashMap::new(),
            waiting: VecDeque::new(),
            running: JoinSet::new(),
            exhausted: false,
            outcome: Ok(()),
            lost: HashSet::new(),
        })
    }

    /// Claims up to twice `width` items; those given up already are counted as failed.
    async fn claim_more(&mut self, shared: &Shared, spec: &SourceSpec) {
        let n = self.width.saturating_mul(2);
        let (st, w, ttl) = (self.pg.clone(), self.worker.clone(), self.ttl);
        match blocking(move || st.claim_work(&w, n, ttl)).await {
            Ok(got) if got.is_empty() => self.exhausted = true,
            Ok(got) => {
                for c in got {
                    match given_up(&self.claimed, &self.pg, c).await {
                        Ok(Some((c, f))) => self.waiting.push_back((c, f)),
                        Ok(None) => shared.status.shared_fetches(&spec.name, 0, 1),
                        Err(e) => {
                            self.outcome = Err(e);
                            self.exhausted = true;
                        }
                    }
                }
            }
            Err(e) => {
                self.outcome = Err(e.to_string());
                self.exhausted = true;
            }
        }
    }

    /// Starts claims waiting while their fetcher has fewer than `width` fetches waiting for a
    /// download slot (and fewer than [`MAX_HELD`] run): the slots stay busy, and the fetches
    /// past their download wait for their commit without holding back the next downloads.
    fn start_waiting(&mut self) -> std::result::Result<(), String> {
        while self.running.len() < MAX_HELD {
            let Some((claim, f)) = self.waiting.pop_front() else {
                break;
            };
            let fetcher = self.fetcher_for(&f)?;
            if fetcher.before_slot() >= self.width {
                self.waiting.push_front((claim, f));
                break;
            }
            self.claimed.hold(&f.uri, claim);
            let ticket = fetcher.start().telling(self.slot_taken.clone());
            let (claimed, st) = (self.claimed.clone(), self.pg.clone());
            self.running
                .spawn(fetch_one(fetcher, f, ticket, claimed, st));
        }
        Ok(())
    }

    /// The fetcher of `f`'s Source URL and size cap, made the first time.
    fn fetcher_for(&mut self, f: &SharedFetch) -> std::result::Result<Arc<SharedFetcher>, String> {
        let key = (f.source.clone(), f.max_bytes, f.versions);
        if let Some(x) = self.fetchers.get(&key) {
            return Ok(x.clone());
        }
        let http = Http::new(self.http_opts.clone()).map_err(|e| e.to_string())?;
        let x = Arc::new(
            SharedFetcher::new(
                &f.source,
                f.max_bytes,
                f.versions,
                self.width,
                self.store.clone(),
                self.claimed.clone() as Arc<dyn Records>,
                http,
                Arc::new(Quiet),
            )
            .map_err(|e| e.to_string())?,
        );
        self.fetchers.insert(key, x.clone());
        Ok(x)
    }

    /// Renews the claims held, waiting or downloading, but those found lost.
    async fn renew(&mut self) {
        let mut held: Vec<Claim> = self.claimed.held();
        held.extend(self.waiting.iter().map(|(c, _)| c.clone()));
        held.retain(|c| !self.lost.contains(&(c.item.key.clone(), c.token)));
        renew_claims(&self.pg, held, self.ttl, &mut self.lost).await;
    }
}

/// One claimed fetch; when nothing was written (the copy was current, or its failure could
/// not be recorded), the claim is settled here.
async fn fetch_one(
    fetcher: Arc<SharedFetcher>,
    f: SharedFetch,
    ticket: SlotTicket,
    claimed: Arc<Claimed>,
    st: Arc<dyn WorkQueue>,
) -> Done {
    let o = fetcher.fetch_started(&f, ticket).await;
    if let Some(c) = claimed.take(&f.uri) {
        let failed = matches!(o, SharedOutcome::Failed(_));
        let _ = blocking(move || {
            if failed {
                st.release(&[c])
            } else {
                st.complete(&[c])
            }
        })
        .await;
    }
    Done {
        copied: !matches!(o, SharedOutcome::Failed(_)),
        failed: matches!(o, SharedOutcome::Failed(_)),
    }
}

/// Renews `held` for `ttl` in one go; those not renewed (lost: expired, and perhaps taken over
/// by another worker) join `lost`. A failure to reach the state is logged: the claims may
/// lapse, as they would without renewal.
async fn renew_claims(
    pg: &Arc<dyn WorkQueue>,
    held: Vec<Claim>,
    ttl: std::time::Duration,
    lost: &mut HashSet<(String, u64)>,
) {
    if held.is_empty() {
        return;
    }
    let st = pg.clone();
    let asked = held.clone();
    match blocking(move || st.renew_work(&asked, ttl)).await {
        Ok(renewed) => {
            let kept: HashSet<(&str, u64)> = renewed
                .iter()
                .map(|c| (c.item.key.as_str(), c.token))
                .collect();
            for c in held {
                if !kept.contains(&(c.item.key.as_str(), c.token)) {
                    tracing::debug!(item = %c.item.key, "a claim was lost or settled before its renewal");
                    lost.insert((c.item.key, c.token));
                }
            }
        }
        Err(e) => tracing::warn!("renewing claims of shared work: {e}"),
    }
}

/// The claim and its fetch, unless the item is given up: its payload unreadable (completed,
/// dropped), or claimed [`MAX_ATTEMPTS`] times already (recorded as a pending change of its
/// Source together with the claim's completion: retried by the Source's next sync).
async fn given_up(
    claimed: &Arc<Claimed>,
    queue: &Arc<dyn WorkQueue>,
    c: Claim,
) -> std::result::Result<Option<(Claim, SharedFetch)>, String> {
    let f = match SharedFetch::from_payload(&c.item.payload) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("a shared fetch dropped: {e}");
            let st = queue.clone();
            blocking(move || st.complete(&[c]))
                .await
                .map_err(|e| e.to_string())?;
            return Ok(None);
        }
    };
    if c.attempts <= MAX_ATTEMPTS {
        return Ok(Some((c, f)));
    }
    let p = PendingChange {
        source: f.source.clone(),
        uri: f.uri.clone(),
        change: f
            .change
            .clone()
            .or(Some(resourcesync_model::Change::Updated)),
        length: f.length,
        hashes: f.hashes.clone(),
        lastmod: f.lastmod,
        duplicates: f.duplicates.clone(),
        error: format!(
            "given up after {} claims by workers that did not complete it",
            c.attempts - 1
        ),
    };
    let st = claimed.inner().clone();
    blocking(move || {
        let mut b = Batch::new();
        b.push(Op::PutPending(&p)).push(Op::CompleteWork(&c));
        st.apply(&b)
    })
    .await
    .map_err(|e| e.to_string())?;
    Ok(None)
}
