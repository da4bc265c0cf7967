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
//! (413 past them), subscriptions per topic and in all, deliveries waiting per subscription
//! (the oldest is dropped past [`HubOptions::max_pending_per_subscription`]), deliveries in
//! flight ([`HubOptions::concurrency`]), verifications in flight.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{Notify, Semaphore, broadcast};
use url::Url;

use crate::store::{Due, Store, SubscriptionRow};
use crate::{Error, Result, link, now_ms, now_secs, random_token, signature};

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
    /// Verifications and topic fetches in flight (default 32; more are answered 503).
    pub max_background: usize,
    /// Time limit of one verification, delivery or topic fetch (default 10 s).
    pub request_timeout: Duration,
    /// First retry delay of a failed delivery (default 1 s), doubled each time.
    pub retry_initial: Duration,
    /// Longest retry delay (default 1 h).
    pub retry_max: Duration,
    /// Topic URL prefixes accepted (empty: any http(s) topic). Others are denied (WebSub §5.2)
    /// or refused for publishing (403).
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
    /// turn it on.
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

    fn topic_allowed(&self, topic: &str) -> bool {
        self.allowed_topics.is_empty() || self.allowed_topics.iter().any(|p| topic.starts_with(p))
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
    wake: Notify,
    busy: Mutex<HashSet<i64>>,
    deliveries: Arc<Semaphore>,
    background: Arc<Semaphore>,
    events: broadcast::Sender<HubEvent>,
    stop: tokio::sync::watch::Sender<bool>,
}

/// A running hub: [`Hub::router`] answers requests, a worker task delivers. Clones share it.
#[derive(Debug, Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

static TLS: std::sync::Once = std::sync::Once::new();

/// The HTTP client of hubs and subscribers: no redirects (WebSub §5.3.1 and §7 count 3xx as
/// failure), bounded time.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client> {
    client_builder(timeout)
        .build()
        .map_err(|e| Error::Config(format!("building the HTTP client: {e}")))
}

fn client_builder(timeout: Duration) -> reqwest::ClientBuilder {
    TLS.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
        .user_agent(concat!("resourcesync-websub/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
}

/// An error with its causes (reqwest's own message leaves out why a connection failed).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s
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
    Ok(u)
}

fn text(status: StatusCode, msg: impl Into<String>) -> Response {
    let mut r = Response::new(Body::from(format!("{}\n", msg.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Reads a body up to `limit` bytes (413 past it).
async fn read_body(body: Body, limit: usize) -> std::result::Result<Bytes, Response> {
    axum::body::to_bytes(body, limit).await.map_err(|_| {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than {limit} bytes"),
        )
    })
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
        let store = match path {
            Some(p) => Store::open(p)?,
            None => Store::in_memory()?,
        };
        let mut builder = client_builder(opts.request_timeout);
        if !opts.private_addresses {
            builder = builder.dns_resolver(Arc::new(crate::reach::PublicResolver));
        }
        let client = builder
            .build()
            .map_err(|e| Error::Config(format!("building the HTTP client: {e}")))?;
        let (events, _) = broadcast::channel(4096);
        let (stop, _) = tokio::sync::watch::channel(false);
        let inner = Arc::new(Inner {
            deliveries: Arc::new(Semaphore::new(opts.concurrency.max(1))),
            background: Arc::new(Semaphore::new(opts.max_background.max(1))),
            opts,
            store,
            client,
            wake: Notify::new(),
            busy: Mutex::new(HashSet::new()),
            events,
            stop,
        });
        let hub = Hub { inner };
        tokio::spawn(worker(hub.inner.clone()));
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

    /// Stops the delivery worker (deliveries in flight finish; pending ones stay queued).
    pub fn shutdown(&self) {
        let _ = self.inner.stop.send(true);
    }

    /// Queues a payload for the subscribers of `topic` (what a POST of a notification does, for
    /// a hub embedded in the publisher's process). Returns the number of subscriptions.
    pub fn publish(&self, topic: &str, content_type: &str, body: &[u8]) -> Result<u64> {
        self.inner.publish(topic, content_type, body)
    }

    /// The router: every request to it is a request to the hub.
    pub fn router(&self) -> Router {
        Router::new()
            .fallback(handle)
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

    fn publish(&self, topic: &str, content_type: &str, body: &[u8]) -> Result<u64> {
        let (n, dropped) = self.store.enqueue(
            topic,
            content_type,
            body,
            now_ms(),
            self.opts.max_pending_per_subscription,
        )?;
        if dropped > 0 {
            tracing::warn!(
                topic,
                dropped,
                "subscribers failing for long: their oldest pending deliveries were dropped"
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

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

async fn handle(State(hub): State<Arc<Inner>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    if parts.method == Method::GET || parts.method == Method::HEAD {
        return text(
            StatusCode::OK,
            "This is a WebSub hub (https://www.w3.org/TR/websub/): POST subscription requests and notifications here.",
        );
    }
    if parts.method != Method::POST {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "POST only");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD, POST"));
        return r;
    }
    let ct = header_str(&parts.headers, header::CONTENT_TYPE).to_ascii_lowercase();
    if ct.starts_with("application/x-www-form-urlencoded") {
        let body = match read_body(body, hub.opts.max_form_bytes).await {
            Ok(b) => b,
            Err(r) => return r,
        };
        return form_request(hub, &body).await;
    }
    let body = match read_body(body, hub.opts.max_payload_bytes).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    resourcesync_publish(hub, &parts.headers, &ct, &body)
}

fn publishing_refused() -> Response {
    text(
        StatusCode::FORBIDDEN,
        "this hub takes no publications over HTTP (it is embedded in its publisher)",
    )
}

/// Change Notification 1.0.1 §4.1: the payload with `Link` rel=self (topic) and rel=hub.
fn resourcesync_publish(hub: Arc<Inner>, headers: &HeaderMap, ct: &str, body: &[u8]) -> Response {
    if !hub.opts.publish_over_http {
        return publishing_refused();
    }
    let links: Vec<&str> = headers
        .get_all(header::LINK)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let Some(topic) = link::first(links.iter().copied(), "self") else {
        return text(
            StatusCode::BAD_REQUEST,
            "a notification needs a Link header with rel=\"self\" naming the topic (Change Notification 1.0.1 §4.1), or use a form with hub.mode",
        );
    };
    if link::first(links.iter().copied(), "hub").is_none() {
        return text(
            StatusCode::BAD_REQUEST,
            "a notification needs a Link header with rel=\"hub\" (Change Notification 1.0.1 §4.1)",
        );
    }
    if let Err(e) = check_url("the topic (rel=self)", &topic) {
        return text(StatusCode::BAD_REQUEST, e);
    }
    if !hub.opts.topic_allowed(&topic) {
        return text(StatusCode::FORBIDDEN, "this hub does not relay that topic");
    }
    if ct.is_empty() {
        return text(
            StatusCode::BAD_REQUEST,
            "a notification needs a Content-Type (application/xml for ResourceSync)",
        );
    }
    match hub.publish(&topic, ct, body) {
        // Change Notification 1.0.1 §4.1: 200 when the submission was successful.
        Ok(n) => text(StatusCode::OK, format!("queued for {n} subscriber(s)")),
        Err(e) => {
            tracing::error!("hub: queueing a notification: {e}");
            text(
                StatusCode::SERVICE_UNAVAILABLE,
                "cannot queue the notification now",
            )
        }
    }
}

async fn form_request(hub: Arc<Inner>, body: &[u8]) -> Response {
    let mut mode = None;
    let mut topic = None;
    let mut callback = None;
    let mut lease = None;
    let mut secret = None;
    let mut urls: Vec<String> = Vec::new();
    // WebSub §5.1: parameters not understood are ignored; §5.1.1: percent-decoded.
    for (k, v) in url::form_urlencoded::parse(body) {
        match k.as_ref() {
            "hub.mode" => mode = Some(v.into_owned()),
            "hub.topic" => {
                urls.push(v.to_string());
                topic = Some(v.into_owned());
            }
            "hub.url" | "hub.url[]" => urls.push(v.into_owned()),
            "hub.callback" => callback = Some(v.into_owned()),
            "hub.lease_seconds" => lease = Some(v.into_owned()),
            "hub.secret" => secret = Some(v.into_owned()),
            _ => {}
        }
    }
    match mode.as_deref() {
        Some(m @ ("subscribe" | "unsubscribe")) => {
            let subscribe = m == "subscribe";
            let topic = topic.unwrap_or_default();
            let callback = callback.unwrap_or_default();
            if let Err(e) = check_url("hub.topic", &topic) {
                return text(StatusCode::BAD_REQUEST, e);
            }
            match check_url("hub.callback", &callback) {
                Err(e) => return text(StatusCode::BAD_REQUEST, e),
                // Refused at once, not denied: a denial is a request to the callback.
                Ok(u) if !hub.opts.private_addresses => {
                    if let Err(e) = crate::reach::check_public_url("hub.callback", &u) {
                        return text(StatusCode::BAD_REQUEST, e);
                    }
                }
                Ok(_) => {}
            }
            // §5.1: ignored for unsubscription requests.
            let lease = match (subscribe, lease) {
                (true, Some(l)) => match l.trim().parse::<u64>() {
                    Ok(n) if n > 0 => Some(n),
                    _ => {
                        return text(
                            StatusCode::BAD_REQUEST,
                            "hub.lease_seconds must be a positive integer",
                        );
                    }
                },
                _ => None,
            };
            let secret = match secret {
                Some(s) if s.len() > signature::MAX_SECRET_BYTES => {
                    return text(
                        StatusCode::BAD_REQUEST,
                        "hub.secret must be less than 200 bytes (WebSub §5.1)",
                    );
                }
                Some(s) if subscribe && !s.is_empty() => Some(s.into_bytes()),
                _ => None,
            };
            let Ok(permit) = hub.background.clone().try_acquire_owned() else {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "too many verifications in progress; try again shortly",
                );
            };
            let req = SubRequest {
                subscribe,
                topic,
                callback,
                lease,
                secret,
            };
            // §5.1.2: the response does not depend on validation or verification, which
            // follow it.
            tokio::spawn(async move {
                verify_and_apply(&hub, req).await;
                drop(permit);
            });
            text(
                StatusCode::ACCEPTED,
                "accepted: verification of intent follows",
            )
        }
        Some("publish") => {
            if !hub.opts.publish_over_http {
                return publishing_refused();
            }
            urls.sort();
            urls.dedup();
            if urls.is_empty() {
                return text(
                    StatusCode::BAD_REQUEST,
                    "hub.url (or hub.topic) is required",
                );
            }
            if urls.len() > 100 {
                return text(StatusCode::BAD_REQUEST, "at most 100 topics per request");
            }
            for u in &urls {
                match check_url("hub.url", u) {
                    Err(e) => return text(StatusCode::BAD_REQUEST, e),
                    Ok(parsed) if !hub.opts.private_addresses => {
                        if let Err(e) = crate::reach::check_public_url("hub.url", &parsed) {
                            return text(StatusCode::BAD_REQUEST, e);
                        }
                    }
                    Ok(_) => {}
                }
                if !hub.opts.topic_allowed(u) {
                    return text(
                        StatusCode::FORBIDDEN,
                        format!("this hub does not relay {u}"),
                    );
                }
            }
            let Ok(permit) = hub.background.clone().try_acquire_owned() else {
                return text(StatusCode::SERVICE_UNAVAILABLE, "busy; try again shortly");
            };
            tokio::spawn(async move {
                for u in urls {
                    if let Err(e) = fetch_and_publish(&hub, &u).await {
                        tracing::warn!("hub: publish of {u}: {e}");
                    }
                }
                drop(permit);
            });
            text(
                StatusCode::ACCEPTED,
                "accepted: the topic will be fetched and distributed",
            )
        }
        Some(other) => text(
            StatusCode::BAD_REQUEST,
            format!("hub.mode {other:?} is not subscribe, unsubscribe or publish"),
        ),
        None => text(StatusCode::BAD_REQUEST, "hub.mode is required"),
    }
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
    let mode = if req.subscribe {
        "subscribe"
    } else {
        "unsubscribe"
    };
    // §5.2: validation against the hub's policy (subscriptions only).
    if req.subscribe {
        let refusal = if !hub.opts.topic_allowed(&req.topic) {
            Some("this hub does not relay that topic".to_owned())
        } else {
            match hub.store.exists(&req.topic, &req.callback) {
                Ok(true) => None,
                Ok(false) => match (hub.store.count_for_topic(&req.topic), hub.store.count()) {
                    (Ok(n), _) if n >= hub.opts.max_subscriptions_per_topic => Some(format!(
                        "the topic has {n} subscriptions, the most this hub keeps"
                    )),
                    (_, Ok(n)) if n >= hub.opts.max_subscriptions => {
                        Some("the hub has all the subscriptions it keeps".to_owned())
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        tracing::error!("hub: {e}");
                        Some("the hub cannot record subscriptions now".to_owned())
                    }
                    _ => None,
                },
                Err(e) => {
                    tracing::error!("hub: {e}");
                    Some("the hub cannot record subscriptions now".to_owned())
                }
            }
        };
        if let Some(reason) = refusal {
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
            return;
        }
    }
    // §5.3: verification of intent, with a random single-use challenge (§8.2).
    let challenge = match random_token(20) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("hub: {e}");
            return;
        }
    };
    let lease = hub.opts.lease_for(req.lease);
    let lease_s = lease.to_string();
    let mut params = vec![
        ("hub.mode", mode),
        ("hub.topic", req.topic.as_str()),
        ("hub.challenge", challenge.as_str()),
    ];
    if req.subscribe {
        params.push(("hub.lease_seconds", lease_s.as_str()));
    }
    let started = now_secs();
    let outcome = match with_params(&req.callback, &params) {
        Ok(u) => check_challenge(hub, u, &challenge).await,
        Err(e) => Err(e.to_string()),
    };
    if let Err(reason) = outcome {
        // §5.1: when verification fails, the subscription state is left unchanged.
        hub.emit(HubEvent::VerificationFailed {
            topic: req.topic,
            callback: req.callback,
            reason,
        });
        return;
    }
    let applied = if req.subscribe {
        // §5.3: the lease is measured from the time the verification request was made.
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
        Err(e) => tracing::error!("hub: recording a verified {mode}: {e}"),
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
async fn fetch_and_publish(hub: &Inner, topic: &str) -> Result<()> {
    let http = |m: String| Error::Http {
        url: topic.to_owned(),
        message: m,
    };
    let mut resp = hub
        .client
        .get(topic)
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
    while let Some(c) = resp.chunk().await.map_err(|e| http(e.to_string()))? {
        if body.len() + c.len() > limit {
            return Err(http(format!("larger than {limit} bytes")));
        }
        body.extend_from_slice(&c);
    }
    hub.publish(topic, &ct, &body)?;
    Ok(())
}

fn busy_list(hub: &Inner) -> Vec<i64> {
    hub.busy
        .lock()
        .map(|b| b.iter().copied().collect())
        .unwrap_or_default()
}

/// The delivery loop: starts the due deliveries (one per subscription at a time), sleeps until
/// the next is due or something is queued, sweeps expired leases.
async fn worker(hub: Arc<Inner>) {
    let mut stop = hub.stop.subscribe();
    let mut last_sweep = 0i64;
    loop {
        if *stop.borrow() {
            break;
        }
        let now = now_secs();
        if now != last_sweep {
            last_sweep = now;
            match hub.store.expire(now) {
                Ok(gone) => {
                    for (topic, callback) in gone {
                        hub.emit(HubEvent::Expired { topic, callback });
                    }
                }
                Err(e) => tracing::error!("hub: expiring leases: {e}"),
            }
        }
        let busy = busy_list(&hub);
        let due = match hub.store.due(now_ms(), &busy, hub.opts.concurrency.max(1)) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("hub: reading the queue: {e}");
                Vec::new()
            }
        };
        for d in due {
            let permit = tokio::select! {
                p = hub.deliveries.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
                _ = stop.changed() => return,
            };
            if let Ok(mut b) = hub.busy.lock() {
                b.insert(d.sub_id);
            }
            let h = hub.clone();
            tokio::spawn(async move {
                deliver(&h, d).await;
                drop(permit);
                h.wake.notify_one();
            });
        }
        let busy = busy_list(&hub);
        let next = hub.store.next_due(&busy).ok().flatten();
        // At most a second between sweeps of expired leases.
        let wait_ms = next.map(|t| (t - now_ms()).clamp(0, 1000)).unwrap_or(1000);
        if wait_ms == 0 && next.is_some() {
            // Due now but every permit may be taken: wait for a delivery to finish.
            tokio::select! {
                () = hub.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop.changed() => break,
            }
            continue;
        }
        tokio::select! {
            () = hub.wake.notified() => {}
            () = tokio::time::sleep(Duration::from_millis(wait_ms as u64)) => {}
            _ = stop.changed() => break,
        }
    }
}

/// One content distribution request (WebSub §7, §7.1).
async fn deliver(hub: &Inner, d: Due) {
    let links = link::notification_links(&d.topic, &hub.opts.public_url, None);
    let mut req = hub
        .client
        .post(&d.callback)
        .header(header::CONTENT_TYPE, d.content_type.as_str())
        .header(header::LINK, links);
    if let Some(secret) = &d.secret {
        req = req.header(signature::HEADER, signature::sign(secret, &d.body));
    }
    // A callback subscribed while private addresses were allowed (an earlier run): an address
    // literal does not go through the resolver that keeps them out.
    let refused = if hub.opts.private_addresses {
        None
    } else {
        Url::parse(&d.callback)
            .ok()
            .and_then(|u| crate::reach::check_public_url("the callback", &u).err())
    };
    let attempts = d.attempts + 1;
    let outcome = match refused {
        Some(why) => Err(Some(why)),
        None => match req.body(d.body.clone()).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) if r.status() == StatusCode::GONE => Err(None),
            Ok(r) => Err(Some(format!("the callback answered {}", r.status()))),
            Err(e) if e.is_timeout() => Err(Some("no answer in time".to_owned())),
            Err(e) => Err(Some(chain(&e))),
        },
    };
    let recorded = match outcome {
        Ok(()) => hub.store.delivered(d.id).map(|()| {
            hub.emit(HubEvent::Delivered {
                topic: d.topic.clone(),
                callback: d.callback.clone(),
                attempts,
            })
        }),
        // §7: 410 Gone: the subscription was deleted by the subscriber.
        Err(None) => hub.store.remove_id(d.sub_id).map(|()| {
            hub.emit(HubEvent::Gone {
                topic: d.topic.clone(),
                callback: d.callback.clone(),
            })
        }),
        Err(Some(reason)) => {
            let next = now_ms() + hub.backoff(d.attempts).as_millis() as i64;
            hub.store.failed(d.id, next).map(|()| {
                hub.emit(HubEvent::DeliveryFailed {
                    topic: d.topic.clone(),
                    callback: d.callback.clone(),
                    attempts,
                    reason,
                })
            })
        }
    };
    if let Err(e) = recorded {
        tracing::error!("hub: recording a delivery: {e}");
    }
    if let Ok(mut b) = hub.busy.lock() {
        b.remove(&d.sub_id);
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        match self {
            Error::BadRequest(m) => text(StatusCode::BAD_REQUEST, m),
            e => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}
