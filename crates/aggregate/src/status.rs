//! What each Source is doing, for the page, the JSON API and the metrics: one entry per
//! Source, updated by its follower (see [`crate::follow`]), read as a snapshot.
//!
//! Everything here is bounded: one entry per configured Source, and at most [`RECENT`] recent
//! events each.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use jiff::Timestamp;
use resourcesync_destination::{Mode, SyncReport};
use serde::Serialize;

use crate::config::{Schedule, SourceSpec};

/// Recent events kept per Source.
pub const RECENT: usize = 50;

/// Where a Source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Never synced yet: its first sync (a baseline, Z39.99-2014 §10) is due or running.
    Baselining,
    /// Synced at least once; followed incrementally (Change Lists, §12) or by push.
    Following,
    /// Its last sync failed; it is tried again after a back-off.
    Failing,
    /// Another worker sharing the state holds it (PostgreSQL state): this one tries again at
    /// the next interval, and takes it over if that worker stops renewing its hold.
    Elsewhere,
}

/// One thing that happened to a Source.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// When (RFC 3339).
    pub at: String,
    /// `sync`, `poll`, `push`, `failure`, `elsewhere`, `republish` or `republish failure`.
    pub kind: &'static str,
    /// What happened, in a line.
    pub summary: String,
}

#[derive(Debug, Clone)]
struct Entry {
    spec: SourceSpec,
    synced_once: bool,
    running: bool,
    last_start: Option<Timestamp>,
    last_success: Option<Timestamp>,
    next: Option<Timestamp>,
    failing_since: Option<Timestamp>,
    consecutive_failures: u32,
    syncs: u64,
    polls: u64,
    notifications: u64,
    failures: u64,
    resources: u64,
    bytes: u64,
    versions: Option<(u64, u64)>,
    fetched: u64,
    polling: Option<String>,
    last_error: Option<String>,
    recent: VecDeque<Event>,
    elsewhere: bool,
    republishes: u64,
    republish_error: Option<String>,
    shared_copies: u64,
    shared_failures: u64,
}

/// A Source's status as shown (the page, `/api/sources`).
#[derive(Debug, Clone, Serialize)]
pub struct SourceView {
    /// Its name.
    pub name: String,
    /// Where discovery starts.
    pub url: String,
    /// `5m`, `push`, …: as configured.
    pub schedule: String,
    /// How it is followed in fact: `every 5m`, `push`, or `push (no hub: polling every 10s)`
    /// for a Source configured for push that advertises no hub (its Change Lists are polled).
    pub mode: String,
    /// Where it is.
    pub phase: Phase,
    /// A sync is running now.
    pub running: bool,
    /// When its last sync started (RFC 3339).
    pub last_sync: Option<String>,
    /// When its last successful sync started.
    pub last_success: Option<String>,
    /// When its next sync is due (none for push, or while one runs).
    pub next_sync: Option<String>,
    /// Since when it fails, when it does.
    pub failing_since: Option<String>,
    /// Failed syncs in a row.
    pub consecutive_failures: u32,
    /// Syncs completed: every sync of an interval Source; the first sync of a push Source and
    /// its catch-ups from the Change Lists. A push Source's polls (no hub) are not counted here.
    pub syncs: u64,
    /// Polls of the Change Lists of a push Source that has no hub (see `mode`), completed.
    pub polls: u64,
    /// Change notifications applied (push, Change Notification 1.0.1).
    pub notifications: u64,
    /// Syncs failed.
    pub failures: u64,
    /// Copies, as its state records them (kept ones included): read from the state when the
    /// service starts and after each sync, so a restart shows what is on disk.
    pub resources: u64,
    /// Bytes of those copies, as the state records their lengths.
    pub bytes: u64,
    /// Versions its state keeps (`versions = true`: every body each copy had, the current
    /// one included; see [`crate::memento`]), as read after its last sync; `None` for a Source
    /// that keeps none, or before its first sync here.
    pub versions: Option<u64>,
    /// Bytes of those versions (the sum of their lengths: a body kept once for several
    /// versions counts for each).
    pub version_bytes: Option<u64>,
    /// Bytes fetched from the Source by this process since it started.
    pub fetched_bytes: u64,
    /// How far the copies may lag behind the Source: seconds since its last successful sync
    /// started (none before one).
    pub lag_seconds: Option<f64>,
    /// The last error, while it is failing.
    pub last_error: Option<String>,
    /// Recent events, newest first.
    pub recent: Vec<Event>,
    /// Publishes of its copies as a Source (see [`crate::republish`]) completed.
    pub republishes: u64,
    /// The error of its last publish, when that failed.
    pub republish_error: Option<String>,
    /// Copies this worker fetched from the Source's shared queue (PostgreSQL state:
    /// a large sync's fetches are shared by every worker, whichever coordinates it).
    pub shared_copies: u64,
    /// Fetches from the Source's shared queue that failed here (kept as pending changes).
    pub shared_failures: u64,
}

/// Every Source's status.
#[derive(Debug, Default)]
pub struct Status {
    entries: Mutex<BTreeMap<String, Entry>>,
}

fn rfc3339(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// `5m`, `1h30m`, `push`.
pub fn schedule_text(s: Schedule) -> String {
    match s {
        Schedule::Push => "push".into(),
        Schedule::Every(d) => {
            let (h, m, s) = (d.as_secs() / 3600, d.as_secs() / 60 % 60, d.as_secs() % 60);
            let mut out = String::new();
            for (n, u) in [(h, "h"), (m, "m"), (s, "s")] {
                if n > 0 {
                    out.push_str(&format!("{n}{u}"));
                }
            }
            if out.is_empty() {
                out.push_str("0s");
            }
            out
        }
    }
}

impl Status {
    fn with<R>(&self, name: &str, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        g.get_mut(name).map(f)
    }

    /// A Source is followed (again, with `spec`, after a reload): its counters are kept when
    /// it was there already.
    pub fn register(&self, spec: &SourceSpec) {
        let mut g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match g.get_mut(&spec.name) {
            Some(e) => e.spec = spec.clone(),
            None => {
                g.insert(
                    spec.name.clone(),
                    Entry {
                        spec: spec.clone(),
                        synced_once: false,
                        running: false,
                        last_start: None,
                        last_success: None,
                        next: None,
                        failing_since: None,
                        consecutive_failures: 0,
                        syncs: 0,
                        polls: 0,
                        notifications: 0,
                        failures: 0,
                        resources: 0,
                        bytes: 0,
                        versions: None,
                        fetched: 0,
                        polling: None,
                        last_error: None,
                        recent: VecDeque::new(),
                        elsewhere: false,
                        republishes: 0,
                        republish_error: None,
                        shared_copies: 0,
                        shared_failures: 0,
                    },
                );
            }
        }
    }

    /// This worker did fetches from the Source's shared queue: `copies` copied (or found
    /// current), `failures` failed.
    pub fn shared_fetches(&self, name: &str, copies: u64, failures: u64) {
        self.with(name, |e| {
            e.shared_copies += copies;
            e.shared_failures += failures;
        });
    }

    /// A Source is no longer followed.
    pub fn remove(&self, name: &str) {
        let mut g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        g.remove(name);
    }

    /// Its next sync is due at `at`.
    pub fn scheduled(&self, name: &str, at: Option<Timestamp>) {
        self.with(name, |e| e.next = at);
    }

    /// Another worker holds the Source for now, or synced it less than its interval ago (`why`).
    pub fn elsewhere(&self, name: &str, why: &str) {
        self.with(name, |e| {
            e.running = false;
            if !e.elsewhere {
                push(&mut e.recent, "elsewhere", why.into());
            }
            e.elsewhere = true;
        });
    }

    /// A sync started.
    pub fn started(&self, name: &str) {
        self.with(name, |e| {
            e.elsewhere = false;
            e.running = true;
            e.next = None;
            e.last_start = Some(Timestamp::now());
        });
    }

    /// What the state records of the Source: `resources` rows, `bytes` of copies.
    pub fn recorded(&self, name: &str, resources: u64, bytes: u64) {
        self.with(name, |e| {
            e.resources = resources;
            e.bytes = bytes;
        });
    }

    /// The versions the state of the Source keeps, and their bytes (see
    /// [`SourceView::versions`]).
    pub fn versions(&self, name: &str, versions: u64, bytes: u64) {
        self.with(name, |e| e.versions = Some((versions, bytes)));
    }

    /// What the state records of the Source when its follower started: shown unless a sync
    /// recorded newer figures meanwhile.
    pub fn recorded_at_start(&self, name: &str, resources: u64, bytes: u64) {
        self.with(name, |e| {
            if !e.synced_once {
                e.resources = resources;
                e.bytes = bytes;
            }
        });
    }

    /// A Source configured for push is polled instead, every `every`, for `why` (no hub).
    pub fn polling_instead(&self, name: &str, every: std::time::Duration, why: &str) {
        self.with(name, |e| {
            let mode = format!(
                "push (no hub: polling every {})",
                schedule_text(Schedule::Every(every))
            );
            if e.polling.as_deref() != Some(mode.as_str()) {
                push(&mut e.recent, "poll", format!("{mode}: {why}"));
            }
            e.polling = Some(mode);
        });
    }

    /// A sync completed with `r`; `recorded` is what its state records now (rows, bytes),
    /// when known (else the rows are estimated from the reports, the bytes kept).
    pub fn succeeded(&self, name: &str, r: &SyncReport, recorded: Option<(u64, u64)>) {
        self.round(name, r, recorded, false);
    }

    /// A poll of a push Source without a hub completed with `r` (see [`Status::succeeded`]):
    /// counted in `polls`, and among the recent events only when it changed something.
    pub fn polled(&self, name: &str, r: &SyncReport, recorded: Option<(u64, u64)>) {
        self.round(name, r, recorded, true);
    }

    fn round(&self, name: &str, r: &SyncReport, recorded: Option<(u64, u64)>, poll: bool) {
        self.with(name, |e| {
            e.running = false;
            e.synced_once = true;
            let kind = match (poll, r.mode) {
                (_, Mode::Notification) => {
                    e.notifications += 1;
                    "push"
                }
                (true, _) => {
                    e.polls += 1;
                    "poll"
                }
                (false, _) => {
                    e.syncs += 1;
                    "sync"
                }
            };
            e.fetched = e.fetched.saturating_add(r.bytes);
            match recorded {
                Some((n, b)) => (e.resources, e.bytes) = (n, b),
                None => {
                    e.resources = match r.mode {
                        // Z39.99-2014 §10: a baseline (or a diff against the Resource List)
                        // sees every resource.
                        Mode::Baseline | Mode::BaselineDiff => {
                            r.created + r.updated + r.unchanged + r.kept + r.repaired
                        }
                        _ => (e.resources + r.created).saturating_sub(r.deleted),
                    }
                }
            }
            e.last_success = e.last_start;
            e.failing_since = None;
            e.consecutive_failures = 0;
            e.last_error = None;
            let changed = r.created + r.updated + r.deleted + r.kept + r.failed > 0;
            if poll && !changed {
                return;
            }
            let mode = match r.mode {
                Mode::Baseline => "baseline",
                Mode::Incremental => "incremental",
                Mode::BaselineDiff => "baseline diff",
                Mode::Notification => "notification",
            };
            let mut summary = format!(
                "{mode}: {} created, {} updated, {} deleted, {} unchanged, {} bytes",
                r.created, r.updated, r.deleted, r.unchanged, r.bytes
            );
            if r.failed > 0 {
                summary.push_str(&format!(", {} failed", r.failed));
                // The first one's reason: what the operator may act on (a host to allow).
                if let Some(f) = r.failures.first() {
                    summary.push_str(&format!(" (first: {})", f.error));
                }
            }
            if r.shared > 0 {
                summary.push_str(&format!(", {} fetches shared by the workers", r.shared));
            }
            push(&mut e.recent, kind, summary);
        });
    }

    /// Its copies were published as a Source (see [`crate::republish`]), or that failed.
    pub fn republished(
        &self,
        name: &str,
        r: std::result::Result<crate::republish::Published, String>,
    ) {
        self.with(name, |e| match r {
            Ok(p) => {
                e.republishes += 1;
                e.republish_error = None;
                let mut summary = format!(
                    "republished: {} resources, {} changes",
                    p.resources, p.changes
                );
                if p.skipped > 0 {
                    summary.push_str(&format!(", {} not republished", p.skipped));
                }
                push(&mut e.recent, "republish", summary);
            }
            Err(err) => {
                let err = resourcesync_model::redact::text(&err).into_owned();
                tracing::warn!(source = %name, "republishing failed: {err}");
                push(&mut e.recent, "republish failure", err.clone());
                e.republish_error = Some(err);
            }
        });
    }

    /// A sync failed with `error`.
    pub fn failed(&self, name: &str, error: &str) {
        self.with(name, |e| {
            e.running = false;
            e.failures += 1;
            e.consecutive_failures = e.consecutive_failures.saturating_add(1);
            e.failing_since.get_or_insert_with(Timestamp::now);
            // Errors of deeper layers carry URLs (the Source's, with its query): shown here.
            let error = resourcesync_model::redact::text(error).into_owned();
            e.last_error = Some(error.clone());
            push(&mut e.recent, "failure", error);
        });
    }

    /// Failed syncs in a row of `name`.
    pub fn consecutive_failures(&self, name: &str) -> u32 {
        self.with(name, |e| e.consecutive_failures).unwrap_or(0)
    }

    /// Every Source, by name.
    pub fn snapshot(&self) -> Vec<SourceView> {
        let now = Timestamp::now();
        let g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        g.values().map(|e| view(e, now)).collect()
    }

    /// One Source.
    pub fn get(&self, name: &str) -> Option<SourceView> {
        let now = Timestamp::now();
        let g = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        g.get(name).map(|e| view(e, now))
    }
}

fn push(recent: &mut VecDeque<Event>, kind: &'static str, summary: String) {
    if recent.len() == RECENT {
        recent.pop_back();
    }
    recent.push_front(Event {
        at: rfc3339(Timestamp::now()),
        kind,
        summary,
    });
}

fn view(e: &Entry, now: Timestamp) -> SourceView {
    let phase = if e.failing_since.is_some() {
        Phase::Failing
    } else if e.elsewhere {
        Phase::Elsewhere
    } else if e.synced_once {
        Phase::Following
    } else {
        Phase::Baselining
    };
    SourceView {
        name: e.spec.name.clone(),
        url: resourcesync_model::redact::url(&e.spec.url).into_owned(),
        schedule: schedule_text(e.spec.schedule),
        mode: match (&e.polling, e.spec.schedule) {
            (Some(m), _) => m.clone(),
            (None, Schedule::Push) => "push".into(),
            (None, s) => format!("every {}", schedule_text(s)),
        },
        phase,
        running: e.running,
        last_sync: e.last_start.map(rfc3339),
        last_success: e.last_success.map(rfc3339),
        next_sync: e.next.map(rfc3339),
        failing_since: e.failing_since.map(rfc3339),
        consecutive_failures: e.consecutive_failures,
        syncs: e.syncs,
        polls: e.polls,
        notifications: e.notifications,
        failures: e.failures,
        resources: e.resources,
        bytes: e.bytes,
        versions: e.versions.map(|(n, _)| n),
        version_bytes: e.versions.map(|(_, b)| b),
        fetched_bytes: e.fetched,
        lag_seconds: e
            .last_success
            .map(|t| now.duration_since(t).as_secs_f64().max(0.0)),
        last_error: e.last_error.clone(),
        recent: e.recent.iter().cloned().collect(),
        republishes: e.republishes,
        republish_error: e.republish_error.clone(),
        shared_copies: e.shared_copies,
        shared_failures: e.shared_failures,
    }
}
