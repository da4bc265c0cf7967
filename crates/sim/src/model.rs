//! Model mode: the run as discrete events in virtual time.
//!
//! The Source is the [`Workload`]'s history; the Destination holds copies and plans each
//! synchronization with the project's diff engine, exactly as `resourcesync-destination` does:
//!
//! - **baseline** (Z39.99-2014 §10): discovery (Source Description, Capability List), the
//!   Resource List as of its request, then [`diff_sorted`] of the copies against it:
//!   creates and updates fetched, deletes removed.
//! - **incremental** (§12): discovery, the Change List Index and every Change List not closed
//!   before the cursor (each whole, as our Source publishes them: one per period, rotated by
//!   [`crate::Rotation`]); the entries after the cursor collapse to the last change of each URI,
//!   a delete removes the copy, other changes are fetched when [`needs_update`] says the copy
//!   differs. The cursor moves to the time the lists were requested.
//! - **push** (Change Notification 1.0.1): each change is delivered as a notification of one
//!   entry after the request latency plus its transfer time, and handled after `sync_overhead`
//!   (the Destination's own work per notification; in real mode measured, with the hub's
//!   queueing); a delete removes the copy then, another change is fetched when
//!   [`needs_update`] says the copy differs. The time from publication to the copy in place is
//!   the push strategy's `sync_seconds`.
//!
//! A change appears in the Source's documents (and is notified) `publish_delay` after it is
//! made. A synchronization spends `sync_overhead` on the Destination's own work, half before
//! discovery and half between the list and the downloads; a document or resource takes
//! `request_latency + bytes / bandwidth`; the documents of an
//! iteration are fetched one after the other, the resources with `concurrency` downloads in
//! flight (push downloads are not limited). A download gets the resource's state when it
//! completes (a resource deleted meanwhile is a 404 and stays for the next iteration).
//! Synchronizations start every `sync_interval`; one due while another runs starts when it
//! ends. After the measured interval, up to three more synchronizations run while changes are
//! still not in sync, so that their latency is measured.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::time::Instant;

use resourcesync_diff::{Action, Item, diff_sorted, needs_update};
use resourcesync_model::{Digest, HashAlg, Hashes};

use crate::clock::{Clock, VirtualClock};
use crate::config::{Config, Strategy};
use crate::docsize::DocSizes;
use crate::error::Result;
use crate::metrics::{Metrics, Tracker, Transfer};
use crate::workload::{ChangeEvent, ChangeKind, ResState, Workload, resource_path};

/// Synchronizations after the measured interval, at most, while changes are not in sync.
pub const DRAIN_SYNCS: u32 = 3;

/// Runs `cfg` in virtual time.
pub fn run(cfg: &Config) -> Result<Metrics> {
    let started = Instant::now();
    let workload = Workload::generate(cfg);
    let sizes = DocSizes::measure()?;
    let mut sim = Sim::new(cfg, &workload, sizes);
    sim.run();
    Ok(sim.tracker.finish(cfg, started.elapsed().as_secs_f64()))
}

/// The diff engine's view of a resource state: its length and an md5 standing for its content
/// (distinct states have distinct tokens, hence distinct digests).
pub fn item(s: &ResState) -> Item {
    Item {
        uri: resource_path(s.id),
        length: Some(s.size),
        lastmod: None,
        hashes: Hashes(vec![Digest {
            alg: HashAlg::Md5,
            value: format!("{:032x}", s.token),
        }]),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Change(usize),
    Published(usize),
    Tick(u64),
    ListRequested,
    ListArrived,
    FetchDone(u64),
    /// Push: the Source's batch `b` is published and its notification sent.
    BatchPublished(usize),
    Notified(usize),
    PushFetched {
        batch: usize,
        id: u64,
    },
}

/// Push: one publish batch of the Source, its notification and the downloads it causes.
#[derive(Debug, Default)]
struct PushBatch {
    changes: Vec<usize>,
    /// The notification's body bytes.
    bytes: u64,
    /// When the notification was sent (the batch's end).
    sent: f64,
    transfer: Transfer,
    outstanding: usize,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    t: f64,
    /// Changes first at equal times, so that a list made at t includes a change at t.
    prio: u8,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Queued {
    fn cmp(&self, o: &Self) -> Ordering {
        self.t
            .total_cmp(&o.t)
            .then(self.prio.cmp(&o.prio))
            .then(self.seq.cmp(&o.seq))
    }
}

/// One Change List of the Source.
#[derive(Debug, Clone, Copy)]
struct Period {
    opened: f64,
    until: Option<f64>,
    count: u64,
    bytes: u64,
}

#[derive(Debug, Default)]
struct Iteration {
    started: f64,
    transfer: Transfer,
    outstanding: usize,
    fetched: HashSet<u64>,
    /// Baseline: the Resource List as of the start.
    snapshot: Vec<Item>,
    /// Incremental: the changes after the cursor, last per URI, in order of last occurrence.
    changes: Vec<usize>,
}

struct Sim<'a> {
    cfg: &'a Config,
    sizes: DocSizes,
    clock: VirtualClock,
    queue: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    changes: &'a [ChangeEvent],
    lead: BTreeMap<u64, ResState>,
    /// The lead states as the Source's documents list them (`publish_delay` behind).
    listed: BTreeMap<u64, ResState>,
    copy: BTreeMap<u64, ResState>,
    tracker: Tracker,
    periods: Vec<Period>,
    /// Changes recorded so far: the change, its period, the time it was recorded.
    log: Vec<(usize, usize, f64)>,
    cursor: f64,
    iter: Option<Iteration>,
    tick_waiting: bool,
    drained: u32,
    /// Push: the Source's publish batches; whether one is running; changes waiting for the next.
    batches: Vec<PushBatch>,
    publishing: bool,
    waiting: Vec<usize>,
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a Config, w: &'a Workload, sizes: DocSizes) -> Self {
        let lead: BTreeMap<u64, ResState> = w.initial.iter().map(|s| (s.id, *s)).collect();
        // Our Source's first scan is the baseline and records no change (Z39.99-2017 §5.1,
        // §12.1): the first Change List opens empty at 0.
        Sim {
            cfg,
            sizes,
            clock: VirtualClock::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            changes: &w.changes,
            copy: lead.clone(),
            listed: lead.clone(),
            tracker: Tracker::new(cfg.duration, w.initial.iter().map(|s| (s.id, s.token))),
            lead,
            periods: vec![Period {
                opened: 0.0,
                until: None,
                count: 0,
                bytes: 0,
            }],
            log: Vec::new(),
            cursor: 0.0,
            iter: None,
            tick_waiting: false,
            drained: 0,
            batches: Vec::new(),
            publishing: false,
            waiting: Vec::new(),
        }
    }

    /// Records a change of `entry` bytes at `t` in the open Change List, rotating it first when
    /// it is full or too old (as resourcesync_source::state does). Returns the period.
    fn record(&mut self, t: f64, entry: u64) -> usize {
        let rot = self.cfg.rotation;
        let open = self.periods.len() - 1;
        let p = self.periods[open];
        if p.count >= rot.max_entries || t - p.opened >= rot.max_age_secs as f64 {
            let last = self.log.last().map_or(p.opened, |&(_, _, at)| at);
            self.periods[open].until = Some(last);
            self.periods.push(Period {
                opened: t,
                until: None,
                count: 0,
                bytes: 0,
            });
        }
        let open = self.periods.len() - 1;
        self.periods[open].count += 1;
        self.periods[open].bytes += entry;
        open
    }

    fn at(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        let prio = u8::from(!matches!(ev, Ev::Change(_) | Ev::Published(_)));
        self.queue.push(Reverse(Queued {
            t,
            prio,
            seq: self.seq,
            ev,
        }));
    }

    fn run(&mut self) {
        for i in 0..self.changes.len() {
            self.at(self.changes[i].t, Ev::Change(i));
        }
        if self.cfg.strategy != Strategy::Push {
            self.at(self.cfg.sync_interval, Ev::Tick(1));
        }
        while let Some(Reverse(q)) = self.queue.pop() {
            self.clock.advance_to(q.t);
            match q.ev {
                Ev::Change(i) => self.change(i),
                Ev::Published(i) => self.published(i),
                Ev::Tick(k) => self.tick(k),
                Ev::ListRequested => self.list_requested(),
                Ev::ListArrived => self.list_arrived(),
                Ev::FetchDone(id) => self.fetch_done(id),
                Ev::BatchPublished(b) => self.batch_published(b),
                Ev::Notified(b) => self.notified(b),
                Ev::PushFetched { batch, id } => self.push_fetched(batch, id),
            }
        }
    }

    fn now(&self) -> f64 {
        self.clock.now()
    }

    fn entry_bytes(&self, kind: ChangeKind) -> u64 {
        match kind {
            ChangeKind::Delete => self.sizes.change_list_delete_entry,
            _ => self.sizes.change_list_entry,
        }
    }

    fn change(&mut self, i: usize) {
        let c = self.changes[i];
        let t = self.now();
        if c.kind == ChangeKind::Delete {
            self.lead.remove(&c.state.id);
            self.tracker.lead_changed(t, c.state.id, None);
        } else {
            self.lead.insert(c.state.id, c.state);
            self.tracker
                .lead_changed(t, c.state.id, Some(c.state.token));
        }
        if self.cfg.strategy == Strategy::Push {
            if self.publishing {
                self.waiting.push(i);
            } else {
                self.start_batch(vec![i]);
            }
        } else {
            self.at(t + self.cfg.network.publish_delay, Ev::Published(i));
        }
    }

    /// Push: the Source starts a publish batch of `changes`; it takes `publish_delay`, and
    /// changes made meanwhile wait for the next batch (as the real Source's publisher).
    fn start_batch(&mut self, changes: Vec<usize>) {
        self.publishing = true;
        let b = self.batches.len();
        self.batches.push(PushBatch {
            changes,
            ..PushBatch::default()
        });
        self.at(
            self.now() + self.cfg.network.publish_delay,
            Ev::BatchPublished(b),
        );
    }

    /// Push: a batch is published: its changes are recorded, one notification with an entry
    /// for each goes out, and the next batch starts if changes wait.
    fn batch_published(&mut self, b: usize) {
        let t = self.now();
        let changes = std::mem::take(&mut self.batches[b].changes);
        let mut bytes = self.sizes.notification_header;
        for &i in &changes {
            self.published(i);
            bytes += self.entry_bytes(self.changes[i].kind);
        }
        // The delivery, then the Destination's own work on it (`sync_overhead`: in real mode
        // measured on the push follower) before it acts.
        let at = t + self.cfg.network.transfer(bytes) + self.cfg.network.sync_overhead;
        let batch = &mut self.batches[b];
        batch.changes = changes;
        batch.bytes = bytes;
        batch.sent = t;
        self.at(at, Ev::Notified(b));
        let next = std::mem::take(&mut self.waiting);
        if next.is_empty() {
            self.publishing = false;
        } else {
            self.start_batch(next);
        }
    }

    /// The Source's scan finds the change: it is recorded in the open Change List, the Resource
    /// List shows it, a notification goes out.
    fn published(&mut self, i: usize) {
        let c = self.changes[i];
        let t = self.now();
        if c.kind == ChangeKind::Delete {
            self.listed.remove(&c.state.id);
        } else {
            self.listed.insert(c.state.id, c.state);
        }
        let entry = self.entry_bytes(c.kind);
        let open = self.record(t, entry);
        self.log.push((i, open, t));
    }

    fn tick(&mut self, k: u64) {
        let t = self.now();
        let next = (k + 1) as f64 * self.cfg.sync_interval;
        if t > self.cfg.duration {
            if self.tracker.unsynced() == 0 {
                return;
            }
            self.drained += 1;
        }
        if next <= self.cfg.duration || self.drained < DRAIN_SYNCS {
            self.at(next, Ev::Tick(k + 1));
        }
        if self.iter.is_some() {
            self.tick_waiting = true;
        } else {
            self.start_iteration();
        }
    }

    /// A synchronization starts: the Destination's own work, then discovery (Source
    /// Description, Capability List), then the list is requested.
    fn start_iteration(&mut self) {
        let s = self.now();
        let net = self.cfg.network;
        let mut it = Iteration {
            started: s,
            ..Iteration::default()
        };
        // Half the Destination's own work before discovery (opening its state), half between
        // the list and the downloads (staging and planning), as measured on our Destination.
        let mut t = s + net.sync_overhead / 2.0;
        for d in [self.sizes.source_description, self.sizes.capability_list] {
            t += net.transfer(d);
            it.transfer.total += d;
            it.transfer.requests += 1;
        }
        self.iter = Some(it);
        self.at(t, Ev::ListRequested);
    }

    /// The Source answers with its list as it is now: the Resource List, or the Change List
    /// Index and the Change Lists not closed before the cursor.
    fn list_requested(&mut self) {
        let s = self.now();
        let net = self.cfg.network;
        let Some(mut it) = self.iter.take() else {
            return;
        };
        let mut docs = Vec::new();
        match self.cfg.strategy {
            Strategy::Baseline => {
                docs.push(self.sizes.resource_list(self.listed.len() as u64));
                it.snapshot = self.listed.values().map(item).collect();
            }
            Strategy::Incremental => {
                docs.push(
                    self.sizes.change_list_index_header
                        + self.periods.len() as u64 * self.sizes.change_list_index_entry,
                );
                for p in &self.periods {
                    // Closed lists ending at or before the cursor are skipped.
                    if p.until.is_none_or(|u| u > self.cursor) {
                        docs.push(self.sizes.change_list_header + p.bytes);
                    }
                }
                // Changes after the cursor, the last of each URI, in order of last occurrence.
                let first = self.log.partition_point(|&(_, _, at)| at <= self.cursor);
                it.changes = resourcesync_diff::last_per_key(
                    self.log[first..].iter().map(|&(j, _, _)| j),
                    |&j| self.changes[j].state.id,
                );
                self.cursor = s;
            }
            Strategy::Push => return,
        }
        let mut t = s;
        for d in &docs {
            t += net.transfer(*d);
            it.transfer.total += d;
            it.transfer.requests += 1;
        }
        self.iter = Some(it);
        self.at(t, Ev::ListArrived);
    }

    fn list_arrived(&mut self) {
        let t = self.now() + self.cfg.network.sync_overhead / 2.0;
        let Some(mut it) = self.iter.take() else {
            return;
        };
        let mut fetch: Vec<(u64, u64)> = Vec::new();
        match self.cfg.strategy {
            Strategy::Baseline => {
                let copies: Vec<Item> = self.copy.values().map(item).collect();
                let snapshot = std::mem::take(&mut it.snapshot);
                for a in diff_sorted(copies, snapshot) {
                    match a {
                        Action::Create(o) | Action::Update { original: o, .. } => {
                            if let Some(id) = crate::workload::id_of_path(&o.uri) {
                                fetch.push((id, o.length.unwrap_or(0)));
                            }
                        }
                        Action::Delete(c) => {
                            if let Some(id) = crate::workload::id_of_path(&c.uri) {
                                self.copy.remove(&id);
                                self.tracker.copy_changed(t, id, None);
                            }
                        }
                        Action::Same(_) => {}
                    }
                }
            }
            Strategy::Incremental => {
                for &j in &it.changes {
                    let c = self.changes[j];
                    let id = c.state.id;
                    if c.kind == ChangeKind::Delete {
                        if self.copy.remove(&id).is_some() {
                            self.tracker.copy_changed(t, id, None);
                        }
                        continue;
                    }
                    let differs = self
                        .copy
                        .get(&id)
                        .is_none_or(|cp| needs_update(&item(cp), &item(&c.state)).is_some());
                    if differs {
                        fetch.push((id, c.state.size));
                    }
                }
            }
            Strategy::Push => {}
        }
        // `concurrency` downloads in flight: each starts when a slot frees.
        let net = self.cfg.network;
        let mut slots: BinaryHeap<Reverse<Ordered>> =
            (0..net.concurrency).map(|_| Reverse(Ordered(t))).collect();
        for (id, size) in fetch {
            let Some(Reverse(Ordered(free))) = slots.pop() else {
                break;
            };
            let done = free + net.transfer(size);
            slots.push(Reverse(Ordered(done)));
            it.outstanding += 1;
            self.at(done, Ev::FetchDone(id));
        }
        self.iter = Some(it);
        self.maybe_end();
    }

    fn fetch_done(&mut self, id: u64) {
        let t = self.now();
        let lead = self.lead.get(&id).copied();
        let Some(it) = self.iter.as_mut() else {
            return;
        };
        it.outstanding = it.outstanding.saturating_sub(1);
        it.transfer.requests += 1;
        if let Some(st) = lead {
            it.transfer.total += st.size;
            let needed = self.copy.get(&id).map(|c| c.token) != Some(st.token);
            if needed && it.fetched.insert(id) {
                it.transfer.required += st.size;
            }
            self.copy.insert(id, st);
            self.tracker.copy_changed(t, id, Some(st.token));
        }
        self.maybe_end();
    }

    fn maybe_end(&mut self) {
        if self.iter.as_ref().is_some_and(|it| it.outstanding == 0) {
            if let Some(it) = self.iter.take() {
                let busy = self.now() - it.started;
                self.tracker.iteration(it.started, it.transfer);
                self.tracker.busy(it.started, busy);
            }
            if std::mem::take(&mut self.tick_waiting) {
                self.start_iteration();
            }
        }
    }

    /// Push: a notification arrives: for each resource it names (its last entry), a delete
    /// removes the copy, another change is fetched when [`needs_update`] says the copy differs.
    fn notified(&mut self, b: usize) {
        let t = self.now();
        let changes = self.batches[b].changes.clone();
        let transfer = Transfer {
            required: 0,
            total: self.batches[b].bytes,
            requests: 1,
        };
        let mut last: Vec<usize> = Vec::new();
        for &i in changes.iter().rev() {
            let id = self.changes[i].state.id;
            if !last.iter().any(|&j| self.changes[j].state.id == id) {
                last.push(i);
            }
        }
        let mut outstanding = 0;
        for &i in last.iter().rev() {
            let c = self.changes[i];
            let id = c.state.id;
            if c.kind == ChangeKind::Delete {
                if self.copy.remove(&id).is_some() {
                    self.tracker.copy_changed(t, id, None);
                }
                continue;
            }
            let differs = self
                .copy
                .get(&id)
                .is_none_or(|cp| needs_update(&item(cp), &item(&c.state)).is_some());
            if differs {
                let size = self.lead.get(&id).map_or(0, |s| s.size);
                outstanding += 1;
                self.at(
                    t + self.cfg.network.transfer(size),
                    Ev::PushFetched { batch: b, id },
                );
            }
        }
        let batch = &mut self.batches[b];
        batch.transfer = transfer;
        batch.outstanding = outstanding;
        if outstanding == 0 {
            self.end_push_iteration(b);
        }
    }

    fn push_fetched(&mut self, b: usize, id: u64) {
        let t = self.now();
        let mut tr = self.batches[b].transfer;
        tr.requests += 1;
        if let Some(st) = self.lead.get(&id).copied() {
            tr.total += st.size;
            if self.copy.get(&id).map(|c| c.token) != Some(st.token) {
                tr.required += st.size;
            }
            self.copy.insert(id, st);
            self.tracker.copy_changed(t, id, Some(st.token));
        }
        let batch = &mut self.batches[b];
        batch.transfer = tr;
        batch.outstanding -= 1;
        if batch.outstanding == 0 {
            self.end_push_iteration(b);
        }
    }

    /// Push: the notification and its downloads are done: one iteration, started by the
    /// batch's first change, busy from the notification's sending.
    fn end_push_iteration(&mut self, b: usize) {
        let t = self.now();
        let batch = &self.batches[b];
        let first = batch.changes.first().map_or(t, |&i| self.changes[i].t);
        let (tr, sent) = (batch.transfer, batch.sent);
        self.tracker.iteration(first, tr);
        self.tracker.busy(first, t - sent);
    }
}

/// An `f64` ordered totally, for the download slots.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ordered(f64);
impl Eq for Ordered {}
impl PartialOrd for Ordered {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ordered {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[cfg(test)]
mod tests;
