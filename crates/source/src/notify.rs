//! Change Notification and Framework Notification over WebSub (Change Notification 1.0.1,
//! Framework Notification 1.0.1): after every batch of detected changes, the Source posts the
//! new changes to its hub as `change-notification` payloads, and a `framework-notification` when
//! a capability document changed.
//!
//! Channels (Change Notification §2, §5; Framework Notification §2, §5): one topic of each kind
//! for the Source's one set of resources, `BASE/resourcesync/change-notification` and
//! `BASE/resourcesync/framework-notification`, advertised in the Capability List with
//! `<rs:ln rel="hub">`. Each topic URI answers HEAD/GET with 200, `application/xml`, `Link`
//! rel=self and rel=hub, and the most recent payload (§4.1).
//!
//! Payloads (Change Notification §3): entries in forward chronological order (the change log's
//! order) with `change`, `datetime` and, where known, `hash`, `length`, `type`; `from` is the
//! previous payload's `until`, `until` the datetime of the last change included, so consecutive
//! payloads cover consecutive, non-overlapping intervals. A large batch is split into several
//! `<urlset>` payloads of at most [`MAX_ENTRIES`] entries (§3), never between two changes with
//! the same datetime (one scan records all its changes at one datetime; a split there would
//! give a payload whose interval is a single instant, which a Destination could take for a
//! replay). What was sent is recorded in the state (`notify:seq`, `notify:until`) only once the
//! hub accepted it: a hub that is down gets everything since on the next batch.
//!
//! Submission (§4.1): to an embedded hub directly; to another hub by a POST of the payload with
//! `Content-Type: application/xml` and `Link` rel=self, rel=hub (and rel=resourcesync to the
//! Capability List); a hub that refuses that with a 4xx gets `hub.mode=publish&hub.url=TOPIC`
//! instead (the WebSub §6 note; `hub.topic` too, which some hubs read), and fetches the topic,
//! which serves the newest payload.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use resourcesync_model::{
    Capability, Change, DocumentWriter, Entry, Header, Link, Metadata, Root, W3cDateTime,
};
use resourcesync_websub::Hub;

pub use crate::publish::channels::{CHANGE_TOPIC, Channels, FRAMEWORK_TOPIC};

use crate::error::{Error, Result};
use crate::publish::PublishReport;
use crate::publish::change_entry;
use crate::publish::layout::{Layout, write_file};
use crate::source::Source;
use crate::state::{State, now_us};

/// The Source a notifier reads its changes from, shared with the scans (the server's
/// publisher holds it).
pub type Shared = std::sync::Arc<Mutex<Source>>;

fn lock(s: &Shared) -> Result<std::sync::MutexGuard<'_, Source>> {
    s.lock()
        .map_err(|_| Error::Task("a scan panicked while holding the Source".into()))
}

/// Most entries in one change notification payload.
pub const MAX_ENTRIES: usize = 1000;

/// The media type of payloads and topics (Change Notification §4.1).
pub const XML: &str = "application/xml";

/// The embedded hub's name under the documents folder.
pub const HUB_PATH: &str = "hub";

/// Where the newest payload of a topic is kept (served at the topic URI).
pub fn latest_payload_path(layout: &Layout, topic_name: &str) -> PathBuf {
    layout.doc_path(&format!("notifications/{topic_name}.xml"))
}

/// Where payloads go.
#[derive(Debug, Clone)]
pub enum HubTarget {
    /// A hub in this process.
    Embedded(Hub),
    /// A hub elsewhere, reached over HTTP.
    Remote(reqwest::Client),
}

/// Sends the notifications of a Source.
#[derive(Debug)]
pub struct Notifier {
    channels: Channels,
    target: HubTarget,
    layout: Layout,
    /// Digest of each capability document as last seen (for Framework Notifications).
    docs: Mutex<Option<HashMap<PathBuf, u64>>>,
    /// One batch's notifications at a time, so that payloads go out in order and once.
    sending: tokio::sync::Mutex<()>,
    /// What a remote hub accepts: not known yet, payloads, or only `hub.mode=publish` forms.
    hub_mode: AtomicU8,
}

/// One change notification payload to send.
#[derive(Debug, Clone)]
pub struct Payload {
    /// The document.
    pub body: Vec<u8>,
    /// The last change sequence number it covers.
    pub last_seq: i64,
    /// Its `until`.
    pub until: W3cDateTime,
    /// Entries.
    pub entries: usize,
}

fn dt_now() -> W3cDateTime {
    W3cDateTime::from_timestamp(now_us())
}

fn meta_dt(state: &State, key: &str) -> Result<Option<W3cDateTime>> {
    Ok(state.meta(key)?.and_then(|s| W3cDateTime::parse(&s).ok()))
}

/// Starts notifying with the changes recorded from now on, unless notifications were sent
/// before (then the next payload covers everything since the last one sent). The first
/// payload's `from` is as early as is true: the last change recorded, else the start of the
/// change history (the first snapshot's `at`, where the first Change List opens), else now
/// (to the whole second, as the first snapshot's `at` will be). A Destination whose cursor is
/// the baseline Resource List's `at` then sees no gap before the first payload.
pub fn init_cursor(state: &State) -> Result<()> {
    if state.meta("notify:until")?.is_none() {
        let seq = state.last_seq()?;
        let from = match state.changes_after(seq - 1, 1)?.pop() {
            Some(last) => last.datetime,
            None => match state.periods()?.first() {
                Some(p) => p.from,
                None => {
                    let now = now_us();
                    W3cDateTime::from_timestamp(
                        jiff::Timestamp::from_second(now.as_second()).unwrap_or(now),
                    )
                }
            },
        };
        state.set_meta("notify:seq", &seq.to_string())?;
        state.set_meta("notify:until", &from.to_string())?;
    }
    Ok(())
}

/// The change notification payloads for everything recorded since the last one sent (see the
/// module docs), or none.
pub fn pending_payloads(state: &State, layout: &Layout) -> Result<Vec<Payload>> {
    let mut seq: i64 = state
        .meta("notify:seq")?
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut from = meta_dt(state, "notify:until")?.unwrap_or_else(dt_now);
    let mut out = Vec::new();
    loop {
        // Enough to cut at a datetime boundary near MAX_ENTRIES.
        let mut changes = state.changes_after(seq, MAX_ENTRIES * 4)?;
        if changes.is_empty() {
            break;
        }
        let full = changes.len() == MAX_ENTRIES * 4;
        if changes.len() > MAX_ENTRIES {
            // Cut after MAX_ENTRIES, moved forward to the end of that datetime's run.
            let mut cut = MAX_ENTRIES;
            let at = changes[cut - 1].datetime;
            while cut < changes.len() && changes[cut].datetime == at {
                cut += 1;
            }
            if cut == changes.len() && full {
                // A run longer than what was read: read on (rare: one huge scan).
                let more = state.changes_after(changes[changes.len() - 1].seq, usize::MAX >> 1)?;
                changes.extend(more.into_iter().take_while(|c| c.datetime == at));
                cut = changes.len();
            }
            changes.truncate(cut);
        }
        let Some(last) = changes.last() else { break };
        // `until` never before `from` (a clock stepped back).
        let until = if last.datetime.cmp_instant(&from) == std::cmp::Ordering::Less {
            from
        } else {
            last.datetime
        };
        let mut md = Metadata::with_capability(Capability::ChangeNotification);
        md.from = Some(from);
        md.until = Some(until);
        let mut header = Header::new(Root::UrlSet, md);
        header
            .links
            .push(Link::new("up", layout.doc_url("capabilitylist.xml")));
        let mut w = DocumentWriter::new(Vec::new(), "change notification", &header)?;
        for c in &changes {
            let mut e = change_entry(c);
            if c.change == Change::Deleted {
                e.lastmod = None;
            }
            w.write_entry(&e)?;
        }
        let body = w.finish()?;
        seq = last.seq;
        out.push(Payload {
            body,
            last_seq: seq,
            until,
            entries: changes.len(),
        });
        from = until;
        if out.len() >= 64 {
            // Bounded memory per batch; the rest goes with the next batch.
            break;
        }
    }
    Ok(out)
}

/// Which capability documents a published file is: (URL, capability, index URL).
fn doc_kind(
    layout: &Layout,
    path: &std::path::Path,
) -> Option<(String, Capability, Option<String>)> {
    if path == layout.well_known_path() {
        return Some((layout.well_known_url(), Capability::Description, None));
    }
    let rel = path.strip_prefix(layout.docs_dir()).ok()?;
    let name = rel.to_str()?.replace('\\', "/");
    let url = layout.doc_url(&name);
    if name == "capabilitylist.xml" {
        return Some((url, Capability::CapabilityList, None));
    }
    if name == crate::publish::CHANGE_LIST {
        // What the Capability List names as its Change List: notified while it is the open
        // Change List itself, not when it is the index (Framework Notification §2).
        if is_index(path) {
            return None;
        }
        return Some((
            url,
            Capability::ChangeList,
            Some(layout.doc_url(crate::publish::CHANGE_LIST_INDEX)),
        ));
    }
    if name.starts_with("changelists/") && name.ends_with(".xml") {
        return Some((
            url,
            Capability::ChangeList,
            Some(layout.doc_url(crate::publish::CHANGE_LIST_INDEX)),
        ));
    }
    if name.starts_with("resourcelists/") && name.ends_with("/resourcelist.xml") {
        return Some((url, Capability::ResourceList, None));
    }
    if name == "resourcedump.xml" {
        return Some((url, Capability::ResourceDump, None));
    }
    if name == "changedump.xml" {
        return Some((url, Capability::ChangeDump, None));
    }
    // Indexes (Framework Notification §2: never notified), archives, the page: not notified.
    None
}

/// Whether a published document is a Sitemap index (`<sitemapindex>` root), by its first bytes:
/// our writer puts the root element right after the XML declaration.
fn is_index(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(512);
    let _ = std::fs::File::open(path).and_then(|f| f.take(512).read_to_end(&mut head));
    head.windows(13).any(|w| w == b"<sitemapindex")
}

fn digest(path: &std::path::Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

impl Notifier {
    /// A notifier for the Source published at `layout`.
    pub fn new(channels: Channels, target: HubTarget, layout: Layout) -> Self {
        Notifier {
            channels,
            target,
            layout,
            docs: Mutex::new(None),
            sending: tokio::sync::Mutex::new(()),
            hub_mode: AtomicU8::new(MODE_UNKNOWN),
        }
    }

    /// The channels.
    pub fn channels(&self) -> &Channels {
        &self.channels
    }

    /// Sends what a batch produced: change notifications for new changes, then a framework
    /// notification for capability documents whose content changed. Failures are logged; the
    /// changes not sent go with the next batch.
    pub async fn after_batch(&self, source: &Shared, published: Option<&PublishReport>) {
        let _one = self.sending.lock().await;
        if let Err(e) = self.send_changes(source).await {
            tracing::warn!("change notification: {e}; retried with the next batch");
        }
        if let Some(p) = published {
            if let Err(e) = self.send_framework(&p.written).await {
                tracing::warn!("framework notification: {e}");
            }
        }
    }

    async fn send_changes(&self, source: &Shared) -> Result<()> {
        let (p, layout) = (source.clone(), self.layout.clone());
        let payloads = tokio::task::spawn_blocking(move || {
            let src = lock(&p)?;
            pending_payloads(src.state(), &layout)
        })
        .await
        .map_err(|e| Error::Task(e.to_string()))??;
        for pl in payloads {
            let path = latest_payload_path(&self.layout, CHANGE_TOPIC);
            let body = pl.body.clone();
            tokio::task::spawn_blocking(move || write_file(&path, &body))
                .await
                .map_err(|e| Error::Task(e.to_string()))??;
            self.submit(&self.channels.change_topic, pl.body).await?;
            let p = source.clone();
            tokio::task::spawn_blocking(move || -> Result<()> {
                let src = lock(&p)?;
                src.state()
                    .set_meta("notify:seq", &pl.last_seq.to_string())?;
                src.state().set_meta("notify:until", &pl.until.to_string())
            })
            .await
            .map_err(|e| Error::Task(e.to_string()))??;
            tracing::debug!(entries = pl.entries, until = %pl.until, "change notification sent");
        }
        Ok(())
    }

    async fn send_framework(&self, written: &[PathBuf]) -> Result<()> {
        let changed: Vec<(String, Capability, Option<String>, bool)> = {
            let mut g = self
                .docs
                .lock()
                .map_err(|_| Error::Task("notifier lock poisoned".into()))?;
            let first = g.is_none();
            let seen = g.get_or_insert_with(HashMap::new);
            let mut out = Vec::new();
            for p in written {
                let Some((url, cap, index)) = doc_kind(&self.layout, p) else {
                    continue;
                };
                let Some(d) = digest(p) else { continue };
                let before = seen.insert(p.clone(), d);
                // The first batch only learns what exists.
                if !first && before != Some(d) {
                    out.push((url, cap, index, before.is_none()));
                }
            }
            out
        };
        if changed.is_empty() {
            return Ok(());
        }
        // Framework Notification §3.
        let now = dt_now();
        let mut header = Header::new(
            Root::UrlSet,
            Metadata::with_capability(Capability::FrameworkNotification),
        );
        header
            .links
            .push(Link::new("up", self.layout.doc_url("capabilitylist.xml")));
        let mut w = DocumentWriter::new(Vec::new(), "framework notification", &header)?;
        for (url, cap, index, created) in changed {
            let mut e = Entry::new(url);
            let md = e.md_mut();
            md.change = Some(if created {
                Change::Created
            } else {
                Change::Updated
            });
            md.capability = Some(cap);
            md.datetime = Some(now);
            if let Some(i) = index {
                e.links.push(Link::new("index", i));
            }
            w.write_entry(&e)?;
        }
        let body = w.finish()?;
        let path = latest_payload_path(&self.layout, FRAMEWORK_TOPIC);
        let b = body.clone();
        tokio::task::spawn_blocking(move || write_file(&path, &b))
            .await
            .map_err(|e| Error::Task(e.to_string()))??;
        self.submit(&self.channels.framework_topic, body).await
    }

    /// Change Notification §4.1: submits a payload for `topic`.
    async fn submit(&self, topic: &str, body: Vec<u8>) -> Result<()> {
        match &self.target {
            HubTarget::Embedded(hub) => hub
                .publish(topic, XML, &body)
                .map(|_| ())
                .map_err(|e| Error::Task(format!("hub: {e}"))),
            HubTarget::Remote(client) => {
                // The one retry policy (crates/http): four attempts, from 200 ms, a
                // `Retry-After` honoured.
                let policy = resourcesync_http::HttpOptions {
                    retries: 3,
                    backoff_base: Duration::from_millis(200),
                    ..resourcesync_http::HttpOptions::default()
                };
                resourcesync_http::with_retries_until(&policy, None, || {
                    self.submit_once(client, topic, &body)
                })
                .await
                .map_err(|e| Error::Task(format!("hub: {e}")))
            }
        }
    }

    /// One attempt at a notification: the payload, or the form once the hub refused payloads
    /// (a generic hub: WebSub §6 note, it fetches the topic; remembered, so later
    /// notifications go straight to the form). A 429 or 5xx answer and a failed connection are
    /// transient ([`resourcesync_http::Retry`]).
    async fn submit_once(
        &self,
        client: &reqwest::Client,
        topic: &str,
        body: &[u8],
    ) -> std::result::Result<(), resourcesync_http::Error> {
        let mode = self.hub_mode.load(Ordering::Relaxed);
        let mut r = if mode == MODE_FORM {
            self.post_form(client, topic).await
        } else {
            self.post_payload(client, topic, body, mode == MODE_UNKNOWN)
                .await
        };
        if let Ok(refused) = &r
            && refused.status().is_client_error()
            && mode != MODE_FORM
        {
            self.hub_mode.store(MODE_FORM, Ordering::Relaxed);
            tracing::info!(
                hub = %self.channels.hub,
                status = %refused.status(),
                "the hub refuses notification payloads: publishing with hub.mode=publish"
            );
            r = self.post_form(client, topic).await;
        }
        let hub = &self.channels.hub;
        match r {
            Ok(ok) if ok.status().is_success() => {
                let _ = self.hub_mode.compare_exchange(
                    MODE_UNKNOWN,
                    MODE_XML,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                Ok(())
            }
            Ok(answer) => Err(resourcesync_http::Error::Status {
                url: hub.clone(),
                status: answer.status().as_u16(),
                retry_after: answer
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(resourcesync_http::parse_retry_after),
            }),
            Err(e) => Err(resourcesync_http::Error::Transport {
                url: hub.clone(),
                message: resourcesync_http::chain(&e),
                transient: true,
            }),
        }
    }

    /// Change Notification §4.1: the payload, `Content-Type: application/xml`, `Link` rel=self
    /// and rel=hub (and rel=resourcesync). While the hub's answer is unknown, the connection is
    /// closed after it: a hub that refuses the payload without reading it could otherwise see
    /// its unread bytes as the start of the next request.
    async fn post_payload(
        &self,
        client: &reqwest::Client,
        topic: &str,
        body: &[u8],
        probe: bool,
    ) -> reqwest::Result<reqwest::Response> {
        let links = resourcesync_websub::link::notification_links(
            topic,
            &self.channels.hub,
            Some(&self.layout.doc_url("capabilitylist.xml")),
        );
        let mut req = client
            .post(&self.channels.hub)
            .header("content-type", XML)
            .header("link", links);
        if probe {
            req = req.header("connection", "close");
        }
        req.body(body.to_vec()).send().await
    }

    /// WebSub §6 note: `hub.mode=publish` with `hub.url` (and `hub.topic`, which some hubs read
    /// instead); the hub fetches the topic, which serves the newest payload.
    async fn post_form(
        &self,
        client: &reqwest::Client,
        topic: &str,
    ) -> reqwest::Result<reqwest::Response> {
        let form = format!(
            "hub.mode=publish&hub.url={t}&hub.topic={t}",
            t = url_encode(topic)
        );
        client
            .post(&self.channels.hub)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
    }
}

const MODE_UNKNOWN: u8 = 0;
const MODE_XML: u8 = 1;
const MODE_FORM: u8 = 2;

fn url_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}
