//! Push: keep a destination following a Source through Change Notifications over WebSub
//! (Change Notification 1.0.1 §4.2, §4.3; `sync --watch --push`).
//!
//! 1. A first [`sync()`] (baseline, or incremental from the cursor) finds the Capability List,
//!    whose `change-notification` entry names the topic and the hub (§5). The topic URI is asked
//!    for its `Link` headers (WebSub §4): its rel=self is the topic to subscribe to (§5.1) and
//!    its rel=hub the hub, else the Capability List's values are used.
//! 2. A callback server listens (`--callback-listen`, published as `--callback-url`) on an
//!    unguessable path (WebSub §5.1.1, §8.2) and the destination subscribes with a random
//!    `hub.secret` (§8.2), following a hub's 307/308 (§5.1.2). The verification GET is answered
//!    with the challenge only for the topic and mode it asked for, else 404 (§5.3.1).
//! 3. Once subscribed, a catch-up sync reads the Change List from the cursor (changes made
//!    between the first sync and the subscription), then payloads are applied one at a time in
//!    the order received:
//!    - a delivery whose `X-Hub-Signature` is missing or wrong is ignored (§7.1.2, §8.3; it is
//!      acknowledged with 202, as §7.1.2 allows, so that signatures cannot be probed);
//!    - a payload that is not a valid `change-notification` document is ignored and triggers a
//!      catch-up, since it may have stood for changes;
//!    - a payload whose `from` is after the cursor (a gap: a payload lost or not yet arrived)
//!      triggers a catch-up from the Change List first;
//!    - entries at or before the cursor are skipped (a replay, or a payload the catch-up
//!      covered); the rest are applied through the same fetch-verify-rename path as an
//!      incremental sync, and the cursor moves to the payload's `until` (never into the
//!      future: see `safe_until`).
//! 4. The subscription is renewed when three quarters of the granted lease have passed (§4.2:
//!    before it expires). When no notification has arrived for [`PushOptions::poll_interval`], a
//!    catch-up sync runs anyway (notifications may have stopped: a hub down, a lease lost).
//! 5. On stop, the destination unsubscribes (best effort). Deliveries for an earlier callback
//!    path (an earlier run) are answered 410, which ends those subscriptions at the hub (§7).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use resourcesync_model::{Capability, DocumentReader, Entry, ReadOptions, W3cDateTime};
use resourcesync_websub::subscriber::{self, Subscription, VerificationRequest};
use serde::Serialize;
use tokio::sync::{mpsc, watch as channel};

use crate::error::{Error, Result};
use crate::options::SyncOptions;
use crate::report::NotificationChannel;
use crate::report::{Observer, SyncReport};
use crate::sync::{Applier, sync};
use crate::watch::{Round, StopHandle, WatchOptions, WatchReport};

mod topic;
use topic::{channel_within_reach, push_client};

/// How to receive pushed notifications.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Where the callback server listens (default `127.0.0.1:0`).
    pub callback_listen: String,
    /// The callback's base URL as the hub reaches it (default `http://LISTEN/`, port bound).
    pub callback_url: Option<String>,
    /// Lease asked for (default: the hub's).
    pub lease_seconds: Option<u64>,
    /// Catch up from the Change List when no notification arrived for this long (default 60 s).
    pub poll_interval: Duration,
    /// Payloads received and not yet applied; past it, deliveries get 503 and the hub retries
    /// (default 256).
    pub max_queue: usize,
    /// Largest payload accepted (default 16 MiB; 413 past it).
    pub max_payload_bytes: usize,
    /// How long to wait for the hub's verification of intent (default 30 s).
    pub verify_timeout: Duration,
    /// A callback connection that makes no progress for this long is closed (default 60 s): idle
    /// keep-alive connections and stalled requests cannot pile up.
    pub idle_timeout: Duration,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions {
            callback_listen: "127.0.0.1:0".into(),
            callback_url: None,
            lease_seconds: None,
            poll_interval: Duration::from_secs(60),
            max_queue: 256,
            max_payload_bytes: 16 << 20,
            verify_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Counters of a push session.
#[derive(Debug, Default, Serialize)]
pub struct PushStats {
    /// Deliveries received with a valid signature.
    pub received: AtomicU64,
    /// Deliveries ignored: signature missing or wrong.
    pub rejected: AtomicU64,
    /// Payloads applied.
    pub applied: AtomicU64,
    /// Payloads (or their entries) already covered by the cursor: replays, out of order.
    pub stale: AtomicU64,
    /// Gaps seen (a payload's `from` after the cursor).
    pub gaps: AtomicU64,
    /// Catch-up syncs from the Change List.
    pub catch_ups: AtomicU64,
    /// Payloads that were not valid change notifications.
    pub invalid: AtomicU64,
    /// Subscriptions verified (first and renewals).
    pub subscribed: AtomicU64,
    /// Why the session polls the Change Lists instead of following pushes, once it found it
    /// has no channel to follow: no hub advertised (Change Notification 1.0.1 §5), or one out
    /// of reach. Its polls are then the rounds of [`WatchOptions::interval`].
    #[serde(skip)]
    pub polling_instead: std::sync::OnceLock<String>,
    /// The address the callback server listens on, once bound (a proxy in front of it, as the
    /// simulator runs one, learns it here instead of choosing a port that may be taken).
    #[serde(skip)]
    pub callback_addr: std::sync::OnceLock<std::net::SocketAddr>,
}

/// What the callback server shares with the push loop.
#[derive(Debug)]
struct Shared {
    /// The unguessable path segment.
    token: String,
    secret: String,
    topic: String,
    /// `true` while the subscription is wanted (false once unsubscribing).
    want: std::sync::atomic::AtomicBool,
    /// The lease granted by the last verification.
    lease: channel::Sender<Option<u64>>,
    /// Told when the hub verified the unsubscription.
    unsubscribed: tokio::sync::Notify,
    tx: mpsc::Sender<Bytes>,
    max_payload: usize,
    stats: Arc<PushStats>,
}

fn plain(status: StatusCode, msg: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{msg}\n"),
    )
        .into_response()
}

async fn callback(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let ours = path.rsplit('/').next() == Some(s.token.as_str());
    let (parts, body) = req.into_parts();
    if parts.method == Method::GET {
        // WebSub §5.3.1: agree only to what was asked, on our path.
        let Some(v) = VerificationRequest::parse(&query) else {
            return plain(StatusCode::NOT_FOUND, "not a hub request");
        };
        if !ours {
            return plain(StatusCode::NOT_FOUND, "no such subscription");
        }
        if v.mode == "denied" {
            tracing::warn!(topic = %v.topic, reason = ?v.reason, "the hub denied the subscription");
            let _ = s.lease.send(None);
        }
        let wanted = s.want.load(Ordering::SeqCst);
        let agree = v.topic == s.topic
            && ((v.mode == "subscribe" && wanted) || (v.mode == "unsubscribe" && !wanted));
        let (status, text) = v.answer(agree);
        if agree && v.mode == "unsubscribe" {
            s.unsubscribed.notify_one();
        }
        if agree && v.mode == "subscribe" {
            s.stats.subscribed.fetch_add(1, Ordering::Relaxed);
            let _ = s.lease.send(Some(v.lease_seconds.unwrap_or(0)));
        }
        return (status, text).into_response();
    }
    if parts.method != Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "GET or POST");
    }
    if !ours {
        // WebSub §7: 410 ends a subscription this process does not hold (an earlier run's).
        return plain(StatusCode::GONE, "no such subscription");
    }
    let Ok(body) = axum::body::to_bytes(Body::new(body), s.max_payload).await else {
        return plain(StatusCode::PAYLOAD_TOO_LARGE, "payload too large");
    };
    let sig = parts
        .headers
        .get(resourcesync_websub::signature::HEADER)
        .and_then(|v| v.to_str().ok());
    if let Err(e) = resourcesync_websub::signature::verify(s.secret.as_bytes(), sig, &body) {
        // §7.1.2: ignored as invalid; acknowledged so that signatures cannot be probed.
        s.stats.rejected.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("delivery ignored: {e}");
        return plain(StatusCode::ACCEPTED, "ignored");
    }
    s.stats.received.fetch_add(1, Ordering::Relaxed);
    match s.tx.try_send(body) {
        Ok(()) => plain(StatusCode::ACCEPTED, "received"),
        Err(_) => plain(StatusCode::SERVICE_UNAVAILABLE, "busy: retry later"),
    }
}

/// A payload read: its interval and entries.
struct Payload {
    from: Option<W3cDateTime>,
    until: Option<W3cDateTime>,
    entries: Vec<Entry>,
}

/// Reads a change notification payload (Change Notification 1.0.1 §3): a `<urlset>` with
/// `capability="change-notification"`, `from` and `until`. Anything else is refused.
fn read_payload(body: &[u8], max: usize) -> std::result::Result<Payload, String> {
    let opts = ReadOptions {
        max_document_bytes: max as u64,
        // As the lists' (crate::discover::docs): one form of each URI.
        iris_as_uris: true,
        ..ReadOptions::named("change notification")
    };
    let mut r = DocumentReader::new(body, opts).map_err(|e| e.to_string())?;
    let md = r.header().md.clone().ok_or("no <rs:md>")?;
    if !matches!(
        md.capability,
        Some(Capability::ChangeNotification | Capability::ChangeListNotification)
    ) {
        return Err(format!(
            "capability {:?}, not change-notification",
            md.capability.map(|c| c.as_str().to_owned())
        ));
    }
    if md.from.is_none() || md.until.is_none() {
        return Err("from and until are mandatory (Change Notification §3)".into());
    }
    let mut entries = Vec::new();
    while let Some(e) = r.next_entry().map_err(|e| e.to_string())? {
        entries.push(e);
    }
    if r.findings().error_count() > 0 {
        return Err(format!(
            "{} error(s) in the payload",
            r.findings().error_count()
        ));
    }
    Ok(Payload {
        from: md.from,
        until: md.until,
        entries,
    })
}

fn is_after(t: &W3cDateTime, c: &W3cDateTime) -> bool {
    t.cmp_instant(c) == std::cmp::Ordering::Greater
}

/// Where the cursor may move after a payload: its `until` (Change Notification §3: every change
/// up to then is in it or an earlier one), unless that is in the future, which no genuine
/// payload claims; then only to its newest entry that is not in the future, or nowhere. (A
/// cursor moved past the present would skip changes still to come.)
fn safe_until(p: &Payload) -> Option<W3cDateTime> {
    let now = W3cDateTime::now(true);
    match p.until {
        Some(u) if !is_after(&u, &now) => Some(u),
        _ => p
            .entries
            .iter()
            .filter_map(|e| e.change_time().copied())
            .filter(|t| !is_after(t, &now))
            .max_by(|a, b| a.cmp_instant(b)),
    }
}

/// Adds the outcome of a round (a sync, or a payload applied) to the totals; the round to
/// report.
fn record(
    total: &mut WatchReport,
    n: &mut u64,
    r: std::result::Result<SyncReport, String>,
) -> Round {
    *n += 1;
    match r {
        Ok(rep) => {
            total.rounds += 1;
            total.created += rep.created;
            total.updated += rep.updated;
            total.deleted += rep.deleted;
            total.kept += rep.kept;
            total.failed += rep.failed;
            total.bytes += rep.bytes;
            if rep.cursor.is_some() {
                total.cursor.clone_from(&rep.cursor);
            }
            Round {
                round: *n,
                started: W3cDateTime::now(false),
                report: Some(rep),
                error: None,
            }
        }
        Err(e) => {
            total.failed_rounds += 1;
            Round {
                round: *n,
                started: W3cDateTime::now(false),
                report: None,
                error: Some(e),
            }
        }
    }
}

/// The callback server (WebSub §5.3, §7), listening; stopped by [`Callback::stop`].
struct Callback {
    shared: Arc<Shared>,
    /// The callback URL given to the hub.
    url: String,
    secret: String,
    /// The lease of the last verification.
    lease: channel::Receiver<Option<u64>>,
    /// The payloads delivered.
    payloads: mpsc::Receiver<Bytes>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl Callback {
    /// Binds the callback server and starts serving.
    async fn start(popts: &PushOptions, stats: &Arc<PushStats>, topic: &str) -> Result<Callback> {
        let listener = tokio::net::TcpListener::bind(&popts.callback_listen)
            .await
            .map_err(|e| Error::io(format!("listening on {}", popts.callback_listen), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("callback listener", e))?;
        let _ = stats.callback_addr.set(addr);
        let listener =
            resourcesync_websub::listener::IdleListener::new(listener, popts.idle_timeout);
        let mut cb_base = popts
            .callback_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}/"));
        if !cb_base.ends_with('/') {
            cb_base.push('/');
        }
        let rand =
            |n| resourcesync_websub::random_token(n).map_err(|e| Error::Config(e.to_string()));
        let token = rand(16)?;
        let secret = rand(32)?;
        let url = format!("{cb_base}{token}");
        let (lease_tx, lease) = channel::channel::<Option<u64>>(None);
        let (tx, payloads) = mpsc::channel::<Bytes>(popts.max_queue.max(1));
        let shared = Arc::new(Shared {
            token,
            secret: secret.clone(),
            topic: topic.to_owned(),
            want: std::sync::atomic::AtomicBool::new(true),
            lease: lease_tx,
            unsubscribed: tokio::sync::Notify::new(),
            tx,
            max_payload: popts.max_payload_bytes,
            stats: stats.clone(),
        });
        let router = Router::new().fallback(callback).with_state(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            // HTTP/1.1 only (a callback has no use for HTTP/2, whose streams a client could pin).
            resourcesync_websub::server::serve_http1(listener, router, async {
                let _ = stopped.await;
            })
            .await;
        });
        Ok(Callback {
            shared,
            url,
            secret,
            lease,
            payloads,
            stop,
            server,
        })
    }

    /// Unsubscribes, best effort, bounded; then stops the server.
    async fn stop(self, client: &reqwest::Client, sub: Option<&Subscription>) {
        self.shared.want.store(false, Ordering::SeqCst);
        if let Some(s) = sub {
            // The hub verifies the unsubscription with a GET to the callback: keep answering
            // until it came (bounded).
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                if subscriber::unsubscribe(client, s).await.is_ok() {
                    self.shared.unsubscribed.notified().await;
                }
            })
            .await;
        }
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), self.server).await;
    }
}

/// The Source's Change Notification channel, when it advertises one within reach, and the
/// client to subscribe with; otherwise `None`, and `stats` says why the Source is polled.
async fn usable_channel(
    o: &SyncOptions,
    channel: Option<NotificationChannel>,
    obs: &dyn Observer,
    stats: &PushStats,
) -> Result<Option<(NotificationChannel, reqwest::Client)>> {
    let Some(c) = channel else {
        let _ = stats.polling_instead.set(
            "the Source advertises no hub (no change-notification channel in its Capability \
             List, Change Notification 1.0.1 §5)"
                .into(),
        );
        obs.warning("the Source advertises no change-notification channel (Change Notification 1.0.1 §5): polling its Change Lists instead");
        return Ok(None);
    };
    let client = push_client(o)?;
    let reachable = channel_within_reach(o, &client, c, obs).await;
    if reachable.is_none() {
        let _ = stats.polling_instead.set(
            "the Source's notification channel is out of reach (its topic or hub is on a host \
             this Source may not use)"
                .into(),
        );
    }
    Ok(reachable.map(|c| (c, client)))
}

/// Syncs, subscribes to the Source's Change Notification channel, and applies what is pushed
/// until stopped (see the module docs). `on_round` is called after every sync and every
/// payload applied. Returns the totals; `stats` (if given) is updated as it goes.
pub async fn watch_push<F>(
    opts: &SyncOptions,
    wopts: &WatchOptions,
    popts: &PushOptions,
    obs: Arc<dyn Observer>,
    stop: &StopHandle,
    stats: Option<Arc<PushStats>>,
    mut on_round: F,
) -> Result<WatchReport>
where
    F: FnMut(&Round),
{
    if opts.dry_run {
        return Err(Error::Config(
            "--push applies changes: drop --dry-run".into(),
        ));
    }
    let started = Instant::now();
    let stats = stats.unwrap_or_default();
    let mut total = WatchReport::default();
    let mut n = 0u64;
    let mut o = opts.clone();

    // 1. First sync: the copy, and the channel.
    let Some(first) = first_sync(&mut o, &obs, stop).await? else {
        total.interrupted = true;
        return Ok(total);
    };
    let info = first.source.clone();
    let base = first.base_url.clone();
    let channel = info.change_notification.clone();
    let round = record(&mut total, &mut n, Ok(first));
    on_round(&round);
    let channel = usable_channel(&o, channel, obs.as_ref(), &stats).await?;
    let Some((NotificationChannel { topic, hub }, client)) = channel else {
        let rest = poll_instead(&o, wopts, obs, stop, on_round).await?;
        add_polled(&mut total, &rest);
        total.seconds = started.elapsed().as_secs_f64();
        return Ok(total);
    };
    let applier = Applier::open(&o, obs.clone(), info, base)?;

    // 2. The callback server.
    let mut cb = Callback::start(popts, &stats, &topic).await?;

    // Subscribes and waits for the verification; the lease granted, if verified.
    let subscribe = |hub: String| {
        subscribe_to(
            client.clone(),
            hub,
            topic.clone(),
            cb.url.clone(),
            cb.secret.clone(),
            popts.lease_seconds,
        )
    };
    let (mut sub, mut renew_at) = subscribe_first(
        subscribe(hub.clone()),
        &mut cb.lease,
        popts,
        obs.as_ref(),
        &hub,
        &topic,
    )
    .await;

    // 3. Catch up what changed before the subscription, then follow the pushes.
    let catch_up = |o: &SyncOptions, obs: Arc<dyn Observer>, stats: Arc<PushStats>| {
        let o = o.clone();
        async move {
            stats.catch_ups.fetch_add(1, Ordering::Relaxed);
            crate::task::on_worker(async move { sync(&o, obs).await })
                .await
                .map_err(|e| e.to_string())
        }
    };
    let r = catch_up(&o, obs.clone(), stats.clone()).await;
    let round = record(&mut total, &mut n, r);
    on_round(&round);
    let mut last_activity = tokio::time::Instant::now();
    loop {
        if stop.is_stopped() || wopts.max_rounds.is_some_and(|m| n >= m) {
            break;
        }
        let poll_at = last_activity + popts.poll_interval;
        tokio::select! {
            biased;
            () = stop.reached_stop() => break,
            Some(body) = cb.payloads.recv() => {
                last_activity = tokio::time::Instant::now();
                let rounds = apply_payload(&applier, &o, obs.clone(), &stats, &body, popts.max_payload_bytes, catch_up).await;
                for r in rounds {
                    let round = record(&mut total, &mut n, r);
                    on_round(&round);
                }
            }
            r = cb.lease.changed() => {
                if r.is_ok() {
                    if let Some(l) = *cb.lease.borrow_and_update() {
                        renew_at = Some(renewal(l));
                    }
                }
            }
            () = sleep_until_opt(renew_at) => {
                let hub_now = sub.as_ref().map_or(hub.clone(), |s| s.hub.clone());
                renew_at = Some(renew(subscribe(hub_now), &mut sub, obs.as_ref()).await);
            }
            () = tokio::time::sleep_until(poll_at) => {
                last_activity = tokio::time::Instant::now();
                let r = catch_up(&o, obs.clone(), stats.clone()).await;
                let round = record(&mut total, &mut n, r);
                on_round(&round);
            }
        }
    }

    // 4. Unsubscribe, best effort, bounded.
    cb.stop(&client, sub.as_ref()).await;
    total.seconds = started.elapsed().as_secs_f64();
    Ok(total)
}

/// The first subscription and its verification (bounded by `popts.verify_timeout`): the
/// subscription, and when to renew it (none when not verified: the Change List is polled).
async fn subscribe_first(
    subscribing: impl std::future::Future<Output = resourcesync_websub::Result<Subscription>>,
    lease: &mut channel::Receiver<Option<u64>>,
    popts: &PushOptions,
    obs: &dyn Observer,
    hub: &str,
    topic: &str,
) -> (Option<Subscription>, Option<tokio::time::Instant>) {
    let _ = lease.borrow_and_update();
    match subscribing.await {
        Ok(s) => {
            let verified = tokio::time::timeout(popts.verify_timeout, lease.changed()).await;
            let granted = *lease.borrow_and_update();
            let mut renew_at = None;
            match (verified, granted) {
                (Ok(Ok(())), Some(l)) => {
                    renew_at = Some(renewal(l));
                    tracing::info!(hub = %s.hub, topic = %topic, lease = l, "subscribed");
                }
                _ => obs.warning(&format!(
                    "the hub {} did not verify the subscription: catching up from the Change List every {:?}",
                    s.hub, popts.poll_interval
                )),
            }
            (Some(s), renew_at)
        }
        Err(e) => {
            obs.warning(&format!(
                "subscribing at {hub}: {e}: catching up from the Change List every {:?}",
                popts.poll_interval
            ));
            (None, None)
        }
    }
}

/// Sends a subscription request for `topic` to `hub` (WebSub §5.1).
async fn subscribe_to(
    client: reqwest::Client,
    hub: String,
    topic: String,
    callback_url: String,
    secret: String,
    lease_seconds: Option<u64>,
) -> resourcesync_websub::Result<Subscription> {
    subscriber::subscribe(
        &client,
        &hub,
        &topic,
        &callback_url,
        Some(&secret),
        lease_seconds,
    )
    .await
}

/// Renews the subscription (WebSub §5.1: a new request before the lease ends); returns when to
/// try again if the verification does not arrive (in a minute).
async fn renew(
    subscribing: impl std::future::Future<Output = resourcesync_websub::Result<Subscription>>,
    sub: &mut Option<Subscription>,
    obs: &dyn Observer,
) -> tokio::time::Instant {
    match subscribing.await {
        Ok(s) => *sub = Some(s),
        Err(e) => obs.warning(&format!("renewing the subscription: {e}")),
    }
    tokio::time::Instant::now() + Duration::from_secs(60)
}

/// The first sync, unless stopped during it (`None`); the next ones sync the Capability List
/// it found, with the base URL it used.
async fn first_sync(
    o: &mut SyncOptions,
    obs: &Arc<dyn Observer>,
    stop: &StopHandle,
) -> Result<Option<SyncReport>> {
    let first = tokio::select! {
        r = crate::task::on_worker({
            let (o, obs) = (o.clone(), obs.clone());
            async move { sync(&o, obs).await }
        }) => r?,
        () = stop.reached_now() => return Ok(None),
    };
    if let Some(cl) = &first.source.capability_list {
        o.url.clone_from(cl);
    }
    o.base_url = Some(first.base_url.clone());
    Ok(Some(first))
}

/// Without a channel to follow (none advertised, or out of reach): the Change Lists polled,
/// as `watch` does, until stopped.
async fn poll_instead<F>(
    o: &SyncOptions,
    wopts: &WatchOptions,
    obs: Arc<dyn Observer>,
    stop: &StopHandle,
    on_round: F,
) -> Result<WatchReport>
where
    F: FnMut(&Round),
{
    let mut wo = *wopts;
    wo.max_rounds = None;
    crate::watch::watch(o, &wo, obs, stop, on_round).await
}

/// Adds the rounds of a watch that polled instead of following pushes.
fn add_polled(total: &mut WatchReport, rest: &WatchReport) {
    total.rounds += rest.rounds;
    total.created += rest.created;
    total.updated += rest.updated;
    total.deleted += rest.deleted;
    total.failed += rest.failed;
}

/// When to renew a lease of `l` seconds: after three quarters of it.
fn renewal(l: u64) -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(l.max(4) * 3 / 4)
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Applies one verified delivery; returns the rounds it made (catch-up and/or application).
async fn apply_payload<C, Fut>(
    applier: &Applier,
    o: &SyncOptions,
    obs: Arc<dyn Observer>,
    stats: &Arc<PushStats>,
    body: &[u8],
    max: usize,
    catch_up: C,
) -> Vec<std::result::Result<SyncReport, String>>
where
    C: Fn(&SyncOptions, Arc<dyn Observer>, Arc<PushStats>) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<SyncReport, String>>,
{
    let mut rounds = Vec::new();
    let p = match read_payload(body, max) {
        Ok(p) => p,
        Err(e) => {
            stats.invalid.fetch_add(1, Ordering::Relaxed);
            obs.warning(&format!(
                "a delivery that is not a change notification ({e}): catching up"
            ));
            rounds.push(catch_up(o, obs, stats.clone()).await);
            return rounds;
        }
    };
    let session = match applier.session() {
        Ok(s) => s,
        Err(e) => return vec![Err(e.to_string())],
    };
    let cursor = match applier.cursor(&session) {
        Ok(c) => c,
        Err(e) => return vec![Err(e.to_string())],
    };
    // A gap: changes between the cursor and this payload's `from` were not seen.
    let gap = match (&p.from, &cursor) {
        (Some(f), Some(c)) => is_after(f, c),
        _ => cursor.is_none(),
    };
    let mut cursor = cursor;
    tracing::debug!(from = ?p.from, until = ?p.until, cursor = ?cursor, gap, "change notification");
    let mut session = Some(session);
    if gap {
        stats.gaps.fetch_add(1, Ordering::Relaxed);
        // The catch-up needs the state.
        session = None;
        let r = catch_up(o, obs.clone(), stats.clone()).await;
        let ok = r.is_ok();
        rounds.push(r);
        if !ok {
            return rounds;
        }
    }
    let session = match session {
        Some(s) => s,
        None => match applier.session() {
            Ok(s) => {
                cursor = applier.cursor(&s).ok().flatten();
                s
            }
            Err(e) => {
                rounds.push(Err(e.to_string()));
                return rounds;
            }
        },
    };
    let target = safe_until(&p);
    let fresh: Vec<Entry> = p
        .entries
        .into_iter()
        .filter(|e| match (e.change_time(), &cursor) {
            (Some(t), Some(c)) => is_after(t, c),
            _ => true,
        })
        .collect();
    if fresh.is_empty() {
        stats.stale.fetch_add(1, Ordering::Relaxed);
        if let Some(u) = target {
            let _ = applier.advance(&session, u);
        }
        return rounds;
    }
    match applier.apply(&session, fresh).await {
        Ok(mut rep) => {
            stats.applied.fetch_add(1, Ordering::Relaxed);
            if let Some(u) = target {
                match applier.advance(&session, u) {
                    Ok(c) => rep.cursor = c.map(|c| c.to_string()),
                    Err(e) => {
                        return {
                            rounds.push(Err(e.to_string()));
                            rounds
                        };
                    }
                }
            }
            rounds.push(Ok(rep));
        }
        Err(e) => rounds.push(Err(e.to_string())),
    }
    rounds
}
