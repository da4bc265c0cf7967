//! A W3C WebSub hub (WebSub §5, §6, §7) as an axum [`Router`], with its state in SQLite
//! ([`crate::store`]) and a delivery worker.
//!
//! Requests, all `POST` to the hub URL:
//!
//! - `application/x-www-form-urlencoded` with `hub.mode=subscribe|unsubscribe` (WebSub §5.1):
//!   checked (400 with a plain-text reason when a parameter is missing or wrong), then 202; the
//!   hub then validates the request against its policy (allowed topics, subscriptions per topic;
//!   a refusal is a `hub.mode=denied` GET to the callback, §5.2) and verifies intent with a GET
//!   to the callback carrying `hub.challenge` (§5.3): the state changes only when the callback
//!   answers 2xx with the challenge as its body (§5.3.1). Unknown parameters are ignored (§5.1).
//! - `application/x-www-form-urlencoded` with `hub.mode=publish` and `hub.url` or `hub.topic`
//!   (the convention the WebSub §6 note describes): 202, then the hub fetches each topic URL and
//!   distributes what it got, with its `Content-Type` (§7).
//! - Any other content type: a ResourceSync notification (Change Notification 1.0.1 §4.1,
//!   Framework Notification 1.0.1 §4.1): the body is the payload, the `Link` header names the
//!   topic (rel=self) and the hub (rel=hub). Queued durably, then 200.
//!
//! Distribution (WebSub §7): every subscription of the topic whose lease has not ended gets a
//! `POST` of the payload with the topic's `Content-Type`, `Link: <topic>; rel="self", <hub>;
//! rel="hub"` and, when it gave a secret, `X-Hub-Signature: sha256=…` (§7.1). A subscription's
//! deliveries go one at a time in the order published (a ResourceSync Destination then sees its
//! notifications in order, Change Notification §3); 2xx is success, 410 ends the subscription,
//! anything else (3xx included: redirects are not followed, §7) or no answer within
//! [`HubOptions::request_timeout`] is retried with exponential backoff and jitter until the
//! lease ends (§7: the hub MUST keep retrying a failing subscriber until the end of its lease
//! when new content is published).
//!
//! Bounds: form bodies [`HubOptions::max_form_bytes`], payloads [`HubOptions::max_payload_bytes`]
//! (413 past them, from the `Content-Length` before anything is read when it announces more),
//! request bodies being read, across all connections ([`HubOptions::max_body_bytes_in_flight`],
//! 503 past it) and the time to send one ([`HubOptions::body_timeout`], 408), subscriptions per
//! topic and in all, deliveries waiting per subscription (the oldest is dropped past
//! [`HubOptions::max_pending_per_subscription`]) and their payloads' bytes in all (the oldest
//! payloads are dropped past [`HubOptions::max_pending_bytes`]), deliveries in flight
//! ([`HubOptions::concurrency`]) and per callback host ([`HubOptions::max_deliveries_per_host`]),
//! verifications in flight. Topics are matched against [`HubOptions::allowed_topics`] as parsed
//! URLs ([`crate::prefix`]). Requests that can be refused from their head (an embedded hub's
//! publications, a topic not relayed, a body announced too large) are refused before the body
//! is read.

mod delivery;
mod intake;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use resourcesync_http::{Proxy, chain};
use tokio::sync::{Notify, Semaphore, broadcast};
use url::Url;

use crate::prefix::UrlPrefix;
use crate::store::{Store, SubscriptionRow};
use crate::{Error, Result, now_ms, now_secs, random_token};
use intake::text;

/// WebSub §8.2: 10 days is a good default lease.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10 * 24 * 3600);
/// Change Notification 1.0.1 §4.2: a lease should not be shorter than 300 seconds.
pub const MIN_LEASE: Duration = Duration::from_secs(300);
/// Change Notification 1.0.1 §4.2: a lease should not be longer than 2678400 seconds (a month).
pub const MAX_LEASE: Duration = Duration::from_secs(2_678_400);
/// Longest topic or callback URL accepted.
pub const MAX_URL_BYTES: usize = 2048;

/// How the hub behaves.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// The hub's own URL, as subscribers and publishers name it (`Link: rel="hub"`).
    pub public_url: String,
    /// Lease granted when the subscriber asks for none (default 10 days, WebSub §8.2).
    pub lease_default: Duration,
    /// Shortest lease granted (default 300 s).
    pub lease_min: Duration,
    /// Longest lease granted (default 31 days); WebSub §5.3.1: never perpetual.
    pub lease_max: Duration,
    /// Largest subscription or publish form (default 64 KiB).
    pub max_form_bytes: usize,
    /// Largest payload published or fetched (default 16 MiB).
    pub max_payload_bytes: usize,
    /// Subscriptions per topic (default 10,000).
    pub max_subscriptions_per_topic: u64,
    /// Subscriptions in all (default 100,000).
    pub max_subscriptions: u64,
    /// Deliveries waiting per subscription; past it the oldest is dropped (default 1,000).
    pub max_pending_per_subscription: u64,
    /// Deliveries in flight (default 32).
    pub concurrency: usize,
    /// Deliveries in flight to one callback host (default 4; the host as written in the
    /// callback URL, without the port): callbacks that answer slowly take at most this many of
    /// the [`concurrency`](Self::concurrency) slots per host, the others go on serving the
    /// other hosts.
    pub max_deliveries_per_host: usize,
    /// A delivery whose callback has not answered after this long (default 2 s) gives its
    /// [`concurrency`](Self::concurrency) slot back and waits in a slot of its own (at most
    /// [`max_slow_deliveries`](Self::max_slow_deliveries) of them), so that slow callbacks on
    /// any number of hosts cannot hold up the others.
    pub slow_delivery_after: Duration,
    /// Slow deliveries waiting in slots of their own (default 256); past it a slow delivery
    /// keeps its ordinary slot.
    pub max_slow_deliveries: usize,
    /// Bytes of the payloads waiting for delivery, in all (default 1 GiB): past it the oldest
    /// payloads are dropped (with a log line), as if their subscribers had received them; a
    /// payload larger than this is refused (503).
    pub max_pending_bytes: u64,
    /// Bytes of request bodies being read, across all connections (default 64 MiB): a request
    /// that would take more is answered 503 (a `Content-Length` counts in full before anything
    /// is read, a chunked body as it arrives).
    pub max_body_bytes_in_flight: usize,
    /// Time to receive a whole request body (default 30 s), else 408.
    pub body_timeout: Duration,
    /// Verifications and topic fetches in flight (default 32; more are answered 503).
    pub max_background: usize,
    /// Time limit of one verification, delivery or topic fetch (default 10 s).
    pub request_timeout: Duration,
    /// First retry delay of a failed delivery (default 1 s), doubled each time.
    pub retry_initial: Duration,
    /// Longest retry delay (default 1 h).
    pub retry_max: Duration,
    /// Topic URL prefixes accepted (empty: any http(s) topic). Others are denied (WebSub §5.2)
    /// or refused for publishing (403). Compared as parsed URLs, not as strings (see
    /// [`crate::prefix`]): same scheme, host and port, the path under the prefix's path segment
    /// by segment after `.` and `..` (also percent-encoded) are resolved, no user information.
    /// [`Hub::start`] refuses a prefix that is not an http(s) URL.
    pub allowed_topics: Vec<String>,
    /// Whether anyone may publish over HTTP (notification POSTs and `hub.mode=publish`; default
    /// true: WebSub leaves publisher authentication to the hub and this hub has none). A hub
    /// embedded in its publisher's process publishes through [`Hub::publish`] and turns this off
    /// (403), so that no one else can publish to its subscribers.
    pub publish_over_http: bool,
    /// Whether the hub sends requests (verifications, deliveries, topic fetches) to private
    /// addresses: loopback, RFC 1918, link-local and the like (see [`crate::reach`]). Default
    /// false: a hub that strangers can reach must not be made to call into its own network
    /// (server-side request forgery). A hub serving a private network, or tests on loopback,
    /// turn it on. A hub that does not reach private addresses also ignores the proxy
    /// environment variables (`HTTP_PROXY` and the like): a proxy would reach them for it.
    pub private_addresses: bool,
}

impl HubOptions {
    /// Defaults for a hub reachable at `public_url`.
    pub fn new(public_url: impl Into<String>) -> Self {
        HubOptions {
            public_url: public_url.into(),
            lease_default: DEFAULT_LEASE,
            lease_min: MIN_LEASE,
            lease_max: Duration::from_secs(31 * 24 * 3600),
            max_form_bytes: 64 * 1024,
            max_payload_bytes: 16 * 1024 * 1024,
            max_subscriptions_per_topic: 10_000,
            max_subscriptions: 100_000,
            max_pending_per_subscription: 1_000,
            concurrency: 32,
            max_deliveries_per_host: 4,
            slow_delivery_after: Duration::from_secs(1),
            max_slow_deliveries: 256,
            max_pending_bytes: 1 << 30,
            max_body_bytes_in_flight: 64 << 20,
            body_timeout: Duration::from_secs(30),
            max_background: 32,
            request_timeout: Duration::from_secs(10),
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(3600),
            allowed_topics: Vec::new(),
            publish_over_http: true,
            private_addresses: false,
        }
    }

    fn lease_for(&self, asked: Option<u64>) -> u64 {
        let min = self.lease_min.as_secs().max(1);
        let max = self.lease_max.as_secs().max(min);
        asked
            .unwrap_or(self.lease_default.as_secs())
            .clamp(min, max)
    }
}

/// Something the hub did, for logs and tests ([`Hub::events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubEvent {
    /// A subscription was verified and is active (new or renewed).
    Subscribed {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
        /// Lease granted, seconds.
        lease_seconds: u64,
    },
    /// An unsubscription was verified.
    Unsubscribed {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
    },
    /// Verification of intent failed: the state was left unchanged (WebSub §5.1).
    VerificationFailed {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
        /// Why.
        reason: String,
    },
    /// The request was refused by policy and the subscriber told so (WebSub §5.2).
    Denied {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
        /// Why.
        reason: String,
    },
    /// A payload was queued.
    Published {
        /// Topic.
        topic: String,
        /// Subscriptions it goes to.
        subscribers: u64,
    },
    /// A delivery succeeded.
    Delivered {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
        /// Attempts it took.
        attempts: u32,
    },
    /// A delivery failed and will be retried.
    DeliveryFailed {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
        /// Attempts so far.
        attempts: u32,
        /// Why.
        reason: String,
    },
    /// The subscriber answered 410: the subscription was ended (WebSub §7).
    Gone {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
    },
    /// A lease ended.
    Expired {
        /// Topic.
        topic: String,
        /// Callback.
        callback: String,
    },
}

#[derive(Debug)]
struct Inner {
    opts: HubOptions,
    store: Store,
    client: reqwest::Client,
    /// `opts.allowed_topics`, parsed.
    allowed: Vec<UrlPrefix>,
    wake: Notify,
    busy: Mutex<Busy>,
    deliveries: Arc<Semaphore>,
    /// Slots of deliveries gone slow (`opts.max_slow_deliveries`).
    slow: Arc<Semaphore>,
    /// Bytes of request bodies being read (`opts.max_body_bytes_in_flight`).
    body_budget: Arc<Semaphore>,
    background: Arc<Semaphore>,
    events: broadcast::Sender<HubEvent>,
    stop: tokio::sync::watch::Sender<bool>,
}

/// Deliveries in flight: their subscriptions (one at a time each) and how many go to each
/// callback host.
#[derive(Debug, Default)]
struct Busy {
    subs: HashSet<i64>,
    hosts: HashMap<String, usize>,
}

/// A running hub: [`Hub::router`] answers requests, a worker task delivers. Clones share it.
#[derive(Debug, Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

/// The HTTP client of hubs and subscribers: no redirects (WebSub §5.3.1 and §7 count 3xx as
/// failure), bounded time, the proxy of the environment (`HTTP_PROXY` and the others).
pub fn http_client(timeout: Duration) -> Result<reqwest::Client> {
    built(|| client_builder(timeout, &Proxy::FromEnvironment))
}

/// The client `make` sets up ([`resourcesync_http::build`]: on a machine without CA
/// certificates, one that still reaches `http://` callbacks and topics).
fn built(make: impl Fn() -> Result<reqwest::ClientBuilder>) -> Result<reqwest::Client> {
    resourcesync_http::build(|| make().map_err(|e| resourcesync_http::Error::Config(e.to_string())))
        .map_err(|e| Error::Config(e.to_string()))
}

fn client_builder(timeout: Duration, proxy: &Proxy) -> Result<reqwest::ClientBuilder> {
    let ua = concat!("resourcesync-websub/", env!("CARGO_PKG_VERSION"));
    Ok(resourcesync_http::client_builder(ua, 0, proxy)
        .map_err(|e| Error::Config(e.to_string()))?
        .connect_timeout(timeout)
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true))
}

/// An http(s) URL of bounded length, or why not.
pub(crate) fn check_url(what: &str, s: &str) -> std::result::Result<Url, String> {
    if s.is_empty() {
        return Err(format!("{what} is required"));
    }
    if s.len() > MAX_URL_BYTES {
        return Err(format!("{what} is longer than {MAX_URL_BYTES} bytes"));
    }
    let u = Url::parse(s).map_err(|e| format!("{what} is not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none() {
        return Err(format!("{what} must be an http or https URL"));
    }
    // `http://allowed.example@other.example/` names the host `other.example`: user information
    // only serves to make a URL look like another one.
    if crate::prefix::has_user_info(&u) {
        return Err(format!(
            "{what} has user information (user:password@), which this hub does not take"
        ));
    }
    Ok(u)
}

/// A parsed subscription request (WebSub §5.1).
#[derive(Debug)]
struct SubRequest {
    subscribe: bool,
    topic: String,
    callback: String,
    lease: Option<u64>,
    secret: Option<Vec<u8>>,
}

impl Hub {
    /// Opens the state at `path` (created if missing; `None`: in memory) and starts the delivery
    /// worker on the current tokio runtime. Deliveries left pending by an earlier run resume.
    pub fn start(opts: HubOptions, path: Option<&Path>) -> Result<Hub> {
        check_url("the hub URL", &opts.public_url).map_err(Error::Config)?;
        let allowed = opts
            .allowed_topics
            .iter()
            .map(|p| UrlPrefix::parse(p).map_err(|e| Error::Config(format!("allowed topic: {e}"))))
            .collect::<Result<Vec<_>>>()?;
        let store = match path {
            Some(p) => Store::open(p)?,
            None => Store::in_memory()?,
        };
        // A proxy named by HTTP_PROXY, HTTPS_PROXY or ALL_PROXY would resolve and reach the
        // callback or topic for the hub, past the resolver that keeps private addresses out.
        let proxy = if opts.private_addresses {
            Proxy::FromEnvironment
        } else {
            Proxy::None
        };
        let client = built(|| {
            let builder = client_builder(opts.request_timeout, &proxy)?;
            Ok(if opts.private_addresses {
                builder
            } else {
                builder.dns_resolver(Arc::new(crate::reach::PublicResolver))
            })
        })?;
        let (events, _) = broadcast::channel(4096);
        let (stop, _) = tokio::sync::watch::channel(false);
        let inner = Arc::new(Inner {
            deliveries: Arc::new(Semaphore::new(opts.concurrency.max(1))),
            slow: Arc::new(Semaphore::new(opts.max_slow_deliveries)),
            body_budget: Arc::new(Semaphore::new(
                opts.max_body_bytes_in_flight
                    .clamp(1, Semaphore::MAX_PERMITS),
            )),
            allowed,
            background: Arc::new(Semaphore::new(opts.max_background.max(1))),
            opts,
            store,
            client,
            wake: Notify::new(),
            busy: Mutex::new(Busy::default()),
            events,
            stop,
        });
        let hub = Hub { inner };
        tokio::spawn(delivery::worker(hub.inner.clone()));
        Ok(hub)
    }

    /// The options.
    pub fn options(&self) -> &HubOptions {
        &self.inner.opts
    }

    /// Events from now on (a bounded channel: a slow reader misses the oldest).
    pub fn events(&self) -> broadcast::Receiver<HubEvent> {
        self.inner.events.subscribe()
    }

    /// Every subscription with the number of deliveries waiting.
    pub fn subscriptions(&self) -> Result<Vec<SubscriptionRow>> {
        self.inner.store.subscriptions()
    }

    /// Deliveries waiting.
    pub fn pending(&self) -> Result<u64> {
        self.inner.store.pending()
    }

    /// Bytes of the payloads waiting for delivery (bounded by [`HubOptions::max_pending_bytes`]).
    pub fn pending_bytes(&self) -> Result<u64> {
        self.inner.store.pending_bytes()
    }

    /// Stops the delivery worker (deliveries in flight finish; pending ones stay queued).
    pub fn shutdown(&self) {
        let _ = self.inner.stop.send(true);
    }

    /// Queues a payload for the subscribers of `topic` (what a POST of a notification does, for
    /// a hub embedded in the publisher's process). Returns the number of subscriptions.
    pub fn publish(&self, topic: &str, content_type: &str, body: &[u8]) -> Result<u64> {
        self.inner.publish(topic, content_type, body)
    }

    /// The router: every request to it is a request to the hub, but `GET /healthz` (200 `ok`
    /// while the hub runs, for load balancers and service managers).
    pub fn router(&self) -> Router {
        Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok\n" }))
            .fallback(intake::handle)
            .with_state(self.inner.clone())
    }
}

impl Inner {
    fn emit(&self, e: HubEvent) {
        match &e {
            HubEvent::DeliveryFailed { .. }
            | HubEvent::VerificationFailed { .. }
            | HubEvent::Denied { .. } => tracing::info!(?e, "hub"),
            _ => tracing::debug!(?e, "hub"),
        }
        let _ = self.events.send(e);
    }

    /// Whether `topic` is under one of the allowed prefixes (or there are none).
    fn topic_allowed(&self, topic: &Url) -> bool {
        self.allowed.is_empty() || self.allowed.iter().any(|p| p.matches(topic))
    }

    fn publish(&self, topic: &str, content_type: &str, body: &[u8]) -> Result<u64> {
        let q = self.store.enqueue(
            topic,
            content_type,
            body,
            now_ms(),
            crate::store::QueueLimits {
                max_pending: self.opts.max_pending_per_subscription,
                max_bytes: self.opts.max_pending_bytes,
            },
        )?;
        let n = q.subscribers;
        if q.dropped > 0 {
            tracing::warn!(
                topic,
                dropped = q.dropped,
                "subscribers failing for long: their oldest pending deliveries were dropped"
            );
        }
        if q.dropped_payloads > 0 {
            tracing::warn!(
                topic,
                payloads = q.dropped_payloads,
                deliveries = q.dropped_for_bytes,
                max_pending_bytes = self.opts.max_pending_bytes,
                "pending deliveries past the hub's disk budget (--max-pending-bytes): the oldest \
                 payloads were dropped, undelivered to subscribers that had not taken them yet"
            );
        }
        self.wake.notify_one();
        self.emit(HubEvent::Published {
            topic: topic.to_owned(),
            subscribers: n,
        });
        Ok(n)
    }

    fn backoff(&self, attempts: u32) -> Duration {
        let base = self
            .opts
            .retry_initial
            .saturating_mul(1u32 << attempts.min(20))
            .min(self.opts.retry_max);
        // Up to 25 % jitter, so that subscribers failing together do not retry together.
        let jitter = base.mul_f64(fastish_fraction() * 0.25);
        base + jitter
    }
}

/// A number in [0, 1) from the clock's nanoseconds (jitter needs no better).
fn fastish_fraction() -> f64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(n % 1000) / 1000.0
}

/// `url` with `params` appended to its query, keeping what it had (WebSub §5.1.1: the hub MUST
/// preserve the callback's query string and append its parameters).
fn with_params(url: &str, params: &[(&str, &str)]) -> Result<Url> {
    let mut u = Url::parse(url).map_err(|e| Error::BadRequest(format!("{url}: {e}")))?;
    {
        let mut q = u.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    Ok(u)
}

async fn verify_and_apply(hub: &Inner, req: SubRequest) {
    // §5.2: validation against the hub's policy (subscriptions only).
    if req.subscribe {
        if let Some(reason) = policy_refusal(hub, &req) {
            deny(hub, req, reason).await;
            return;
        }
    }
    // §5.3: verification of intent, with a random single-use challenge (§8.2).
    let Ok(challenge) = random_token(20).inspect_err(|e| tracing::error!("hub: {e}")) else {
        return;
    };
    let lease = hub.opts.lease_for(req.lease);
    let started = now_secs();
    if let Err(reason) = verify_intent(hub, &req, &challenge, lease).await {
        // §5.1: when verification fails, the subscription state is left unchanged.
        hub.emit(HubEvent::VerificationFailed {
            topic: req.topic,
            callback: req.callback,
            reason,
        });
        return;
    }
    apply(hub, req, lease, started);
}

/// Why the hub's policy refuses a subscription (§5.2), if it does: a topic it does not relay,
/// or no room for one more subscription.
fn policy_refusal(hub: &Inner, req: &SubRequest) -> Option<String> {
    let allowed = Url::parse(&req.topic).is_ok_and(|u| hub.topic_allowed(&u));
    if !allowed {
        return Some("this hub does not relay that topic".to_owned());
    }
    let cannot_record = |e: Error| {
        tracing::error!("hub: {e}");
        Some("the hub cannot record subscriptions now".to_owned())
    };
    match hub.store.exists(&req.topic, &req.callback) {
        Ok(true) => None,
        Ok(false) => match (hub.store.count_for_topic(&req.topic), hub.store.count()) {
            (Ok(n), _) if n >= hub.opts.max_subscriptions_per_topic => Some(format!(
                "the topic has {n} subscriptions, the most this hub keeps"
            )),
            (_, Ok(n)) if n >= hub.opts.max_subscriptions => {
                Some("the hub has all the subscriptions it keeps".to_owned())
            }
            (Err(e), _) | (_, Err(e)) => cannot_record(e),
            _ => None,
        },
        Err(e) => cannot_record(e),
    }
}

/// Tells the callback its subscription is denied (§5.2), and says so.
async fn deny(hub: &Inner, req: SubRequest, reason: String) {
    if let Ok(u) = with_params(
        &req.callback,
        &[
            ("hub.mode", "denied"),
            ("hub.topic", &req.topic),
            ("hub.reason", &reason),
        ],
    ) {
        let _ = hub.client.get(u).send().await;
    }
    hub.emit(HubEvent::Denied {
        topic: req.topic,
        callback: req.callback,
        reason,
    });
}

/// §5.3: verification of intent with `challenge`; why it failed.
async fn verify_intent(
    hub: &Inner,
    req: &SubRequest,
    challenge: &str,
    lease: u64,
) -> std::result::Result<(), String> {
    let lease_s = lease.to_string();
    let mut params = vec![
        ("hub.mode", mode_of(req)),
        ("hub.topic", req.topic.as_str()),
        ("hub.challenge", challenge),
    ];
    if req.subscribe {
        params.push(("hub.lease_seconds", lease_s.as_str()));
    }
    match with_params(&req.callback, &params) {
        Ok(u) => check_challenge(hub, u, challenge).await,
        Err(e) => Err(e.to_string()),
    }
}

fn mode_of(req: &SubRequest) -> &'static str {
    if req.subscribe {
        "subscribe"
    } else {
        "unsubscribe"
    }
}

/// Records a verified request: a subscription whose lease runs from `started`, when the
/// verification request was made (§5.3), or its removal.
fn apply(hub: &Inner, req: SubRequest, lease: u64, started: i64) {
    let applied = if req.subscribe {
        hub.store
            .upsert(
                &req.topic,
                &req.callback,
                req.secret.as_deref(),
                started.saturating_add(lease as i64),
                started,
            )
            .map(|_| ())
    } else {
        hub.store.remove(&req.topic, &req.callback).map(|_| ())
    };
    match applied {
        Ok(()) if req.subscribe => {
            hub.wake.notify_one();
            hub.emit(HubEvent::Subscribed {
                topic: req.topic,
                callback: req.callback,
                lease_seconds: lease,
            })
        }
        Ok(()) => hub.emit(HubEvent::Unsubscribed {
            topic: req.topic,
            callback: req.callback,
        }),
        Err(e) => tracing::error!("hub: recording a verified {}: {e}", mode_of(&req)),
    }
}

/// §5.3.1: success is a 2xx whose body is the challenge; anything else fails (3xx, 4xx, 5xx,
/// a wrong body, no answer in time).
async fn check_challenge(hub: &Inner, u: Url, challenge: &str) -> std::result::Result<(), String> {
    let mut resp = hub
        .client
        .get(u)
        .send()
        .await
        .map_err(|e| format!("verification request: {}", chain(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("the callback answered {status}"));
    }
    // Read at most a little more than the challenge.
    let cap = challenge.len() + 64;
    let mut got: Vec<u8> = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
    {
        got.extend_from_slice(&chunk);
        if got.len() > cap {
            return Err("the answer is not the challenge".into());
        }
    }
    // Trailing white space (a newline) is tolerated.
    if got.trim_ascii() == challenge.as_bytes() {
        Ok(())
    } else {
        Err("the answer is not the challenge".into())
    }
}

/// WebSub §6 note: `hub.mode=publish`: fetch the topic, distribute its content (§7: with the
/// topic's Content-Type).
async fn fetch_and_publish(hub: &Inner, topic: &str, url: Url) -> Result<()> {
    let http = |m: String| Error::Http {
        url: topic.to_owned(),
        message: m,
    };
    let mut resp = hub
        .client
        .get(url)
        .send()
        .await
        .map_err(|e| http(chain(&e)))?;
    if !resp.status().is_success() {
        return Err(http(format!("answered {}", resp.status())));
    }
    let ct = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream")
        .to_owned();
    let limit = hub.opts.max_payload_bytes;
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(http(format!("larger than {limit} bytes")));
    }
    let mut body = Vec::new();
    // The bytes held count against the same budget as request bodies.
    let mut held = Vec::new();
    while let Some(c) = resp.chunk().await.map_err(|e| http(e.to_string()))? {
        if body.len() + c.len() > limit {
            return Err(http(format!("larger than {limit} bytes")));
        }
        let n = u32::try_from(c.len()).map_err(|_| http(format!("larger than {limit} bytes")))?;
        if n > 0 {
            let permit = tokio::time::timeout(
                hub.opts.request_timeout,
                hub.body_budget.clone().acquire_many_owned(n),
            )
            .await
            .map_err(|_| http("the hub is holding all the bodies it may; try again".into()))?
            .map_err(|e| http(e.to_string()))?;
            held.push(permit);
        }
        body.extend_from_slice(&c);
    }
    hub.publish(topic, &ct, &body)?;
    Ok(())
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        match self {
            Error::BadRequest(m) => text(StatusCode::BAD_REQUEST, m),
            e => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}
