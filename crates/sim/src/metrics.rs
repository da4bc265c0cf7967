//! The paper's metrics (§3), computed the same way for both modes.
//!
//! - **Average consistency**: consistency at time t is the fraction of resources whose copy state
//!   is in sync with its lead state; its mean over the measured interval `[0, duration]` is the
//!   time integral divided by the duration. The resources counted at t are those with a lead
//!   state or a copy state (a copy of a deleted resource is out of sync until removed; a created
//!   resource without a copy is out of sync until fetched).
//! - **Average latency**: for each change at the Source at t₀, the time from t₀ until the copy of
//!   that resource is next in sync with its lead state (the paper: "the time it takes to achieve
//!   in sync state at the destination after a resource representation in the source changed").
//!   A change overtaken by a later change of the same resource is in sync when the later one is.
//!   Changes not in sync when the run ends are counted apart (`unsynced_changes`), not averaged.
//! - **Data transfer efficiency**: per synchronization iteration (for push: per notification
//!   and the download it causes), the fraction of "required bytes" in the total bytes
//!   transferred; its mean over the iterations started in the measured interval. Required bytes
//!   are the bodies of resources whose copy differed from the state fetched (each resource once
//!   per iteration); the total adds every document (Source Description, Capability List,
//!   Resource List, Change List Index, Change Lists, notifications) and every other body. HTTP
//!   headers are left out in both modes. An iteration that transfers nothing is not counted.
//!
//! Plus requests and bytes per change (totals of the iterations started in the measured
//! interval, divided by the number of changes in it).

use std::collections::HashMap;

use serde::Serialize;

use crate::config::Config;

/// What one iteration (or one notification) transferred.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    /// Bodies of resources the Destination needed.
    pub required: u64,
    /// Every body: documents, notifications and resources.
    pub total: u64,
    /// Requests made (for push: the notification's delivery counts as one).
    pub requests: u64,
}

/// Follows lead and copy states over time and computes the [`Metrics`].
#[derive(Debug)]
pub struct Tracker {
    duration: f64,
    lead: Vec<Option<u64>>,
    copy: Vec<Option<u64>>,
    /// Sizes of lead states, where a driver records them.
    sizes: HashMap<u64, u64>,
    /// Resources with a lead or a copy state.
    counted: u64,
    /// Of those, how many are out of sync.
    out: u64,
    last_t: f64,
    area: f64,
    /// Change times not yet in sync, by resource.
    pending: HashMap<u64, Vec<f64>>,
    latency_sum: f64,
    latency_n: u64,
    changes: u64,
    efficiency_sum: f64,
    iterations: u64,
    required: u64,
    total: u64,
    requests: u64,
    busy: f64,
    publish_delay: Option<f64>,
}

impl Tracker {
    /// A tracker measuring `[0, duration]`, the Destination consistent at 0 with `initial`
    /// (the paper's incremental synchronization follows "at least one baseline
    /// synchronization": the measured interval starts after it).
    pub fn new(duration: f64, initial: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut t = Tracker {
            duration,
            lead: Vec::new(),
            copy: Vec::new(),
            sizes: HashMap::new(),
            counted: 0,
            out: 0,
            last_t: 0.0,
            area: 0.0,
            pending: HashMap::new(),
            latency_sum: 0.0,
            latency_n: 0,
            changes: 0,
            efficiency_sum: 0.0,
            iterations: 0,
            required: 0,
            total: 0,
            requests: 0,
            busy: 0.0,
            publish_delay: None,
        };
        for (id, token) in initial {
            t.slot(id);
            t.lead[id as usize] = Some(token);
            t.copy[id as usize] = Some(token);
            t.counted += 1;
        }
        t
    }

    fn slot(&mut self, id: u64) {
        let need = id as usize + 1;
        if self.lead.len() < need {
            self.lead.resize(need, None);
            self.copy.resize(need, None);
        }
    }

    /// Integrates consistency up to `t` (clamped to the measured interval).
    fn advance(&mut self, t: f64) {
        let t = t.min(self.duration);
        if t > self.last_t {
            self.area += (t - self.last_t) * self.consistency();
            self.last_t = t;
        }
    }

    /// Consistency now: the fraction of counted resources in sync (1 when there are none).
    pub fn consistency(&self) -> f64 {
        if self.counted == 0 {
            1.0
        } else {
            (self.counted - self.out) as f64 / self.counted as f64
        }
    }

    fn status(&self, id: u64) -> (bool, bool) {
        let l = self.lead.get(id as usize).copied().flatten();
        let c = self.copy.get(id as usize).copied().flatten();
        (l.is_some() || c.is_some(), l == c)
    }

    fn set(&mut self, t: f64, id: u64, lead: bool, token: Option<u64>) {
        self.advance(t);
        self.slot(id);
        let (was_counted, was_in) = self.status(id);
        if lead {
            self.lead[id as usize] = token;
        } else {
            self.copy[id as usize] = token;
        }
        let (is_counted, is_in) = self.status(id);
        if was_counted && !was_in {
            self.out -= 1;
        }
        if was_counted {
            self.counted -= 1;
        }
        if is_counted {
            self.counted += 1;
            if !is_in {
                self.out += 1;
            }
        }
        if is_in {
            if let Some(times) = self.pending.remove(&id) {
                for t0 in times {
                    self.latency_sum += t - t0;
                    self.latency_n += 1;
                }
            }
        }
    }

    /// A change at the Source at `t`: the lead state of `id` becomes `token` (`None`: deleted).
    pub fn lead_changed(&mut self, t: f64, id: u64, token: Option<u64>) {
        // Every change of a workload is in the measured interval (real mode may record the
        // last ones a little after its end).
        self.changes += 1;
        self.pending.entry(id).or_default().push(t);
        self.set(t, id, true, token);
    }

    /// The Destination's copy of `id` is `token` from `t` on (`None`: no copy).
    pub fn copy_changed(&mut self, t: f64, id: u64, token: Option<u64>) {
        if self.copy.get(id as usize).copied().flatten() != token {
            self.set(t, id, false, token);
        }
    }

    /// The lead state of `id` now.
    pub fn lead(&self, id: u64) -> Option<u64> {
        self.lead.get(id as usize).copied().flatten()
    }

    /// Records the size of `id`'s lead state.
    pub fn set_lead_size(&mut self, id: u64, size: u64) {
        self.sizes.insert(id, size);
    }

    /// The size of `id`'s lead state, where recorded.
    pub fn lead_size(&self, id: u64) -> Option<u64> {
        self.sizes.get(&id).copied()
    }

    /// The copy state of `id` now.
    pub fn copy(&self, id: u64) -> Option<u64> {
        self.copy.get(id as usize).copied().flatten()
    }

    /// Whether `id`'s copy is in sync with its lead state now.
    pub fn in_sync(&self, id: u64) -> bool {
        self.status(id).1
    }

    /// One more than the largest id seen.
    pub fn ids(&self) -> u64 {
        self.lead.len() as u64
    }

    /// Changes whose resource is not in sync yet.
    pub fn unsynced(&self) -> u64 {
        self.pending.values().map(|v| v.len() as u64).sum()
    }

    /// An iteration that started at `started` transferred `tr`; counted when it started in the
    /// measured interval.
    pub fn iteration(&mut self, started: f64, tr: Transfer) {
        if started > self.duration {
            return;
        }
        self.required += tr.required;
        self.total += tr.total;
        self.requests += tr.requests;
        if tr.total > 0 {
            self.efficiency_sum += tr.required as f64 / tr.total as f64;
            self.iterations += 1;
        }
    }

    /// A synchronization that started at `started` took `seconds` (counted when it started in
    /// the measured interval).
    pub fn busy(&mut self, started: f64, seconds: f64) {
        if started <= self.duration {
            self.busy += seconds;
        }
    }

    /// The publish delay measured (real mode).
    pub fn measured_publish_delay(&mut self, seconds: f64) {
        self.publish_delay = Some(seconds);
    }

    /// The metrics, the consistency integrated to the end of the measured interval.
    pub fn finish(mut self, cfg: &Config, wall_seconds: f64) -> Metrics {
        self.advance(self.duration);
        let per_change = |x: u64| {
            if self.changes == 0 {
                0.0
            } else {
                x as f64 / self.changes as f64
            }
        };
        Metrics {
            mode: cfg.mode.as_str().into(),
            strategy: cfg.strategy.as_str().into(),
            resources: cfg.resources,
            change_interval: cfg.change_interval,
            change_dist: cfg.change_dist.as_str().into(),
            mix: cfg.mix.to_spec(),
            size: cfg.size.to_spec(),
            sync_interval: cfg.sync_interval,
            duration: cfg.duration,
            seed: cfg.seed,
            request_latency: cfg.network.request_latency,
            bandwidth: cfg.network.bandwidth,
            concurrency: cfg.network.concurrency as u64,
            sync_overhead: cfg.network.sync_overhead,
            publish_delay: self.publish_delay.unwrap_or(cfg.network.publish_delay),
            changes: self.changes,
            iterations: self.iterations,
            avg_consistency: self.area / self.duration,
            avg_latency: if self.latency_n == 0 {
                0.0
            } else {
                self.latency_sum / self.latency_n as f64
            },
            synced_changes: self.latency_n,
            unsynced_changes: self.unsynced(),
            efficiency: if self.iterations == 0 {
                0.0
            } else {
                self.efficiency_sum / self.iterations as f64
            },
            efficiency_overall: if self.total == 0 {
                0.0
            } else {
                self.required as f64 / self.total as f64
            },
            requests: self.requests,
            bytes_total: self.total,
            bytes_required: self.required,
            requests_per_change: per_change(self.requests),
            bytes_per_change: per_change(self.total),
            sync_seconds: self.busy,
            wall_seconds,
        }
    }
}

/// The metrics of one run: one CSV row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// `model` or `real`.
    pub mode: String,
    /// `baseline`, `incremental` or `push`.
    pub strategy: String,
    /// Resources at the start.
    pub resources: u64,
    /// Mean seconds between changes.
    pub change_interval: f64,
    /// `fixed` or `exp`.
    pub change_dist: String,
    /// Weights create,update,delete.
    pub mix: String,
    /// Payload sizes.
    pub size: String,
    /// Seconds between synchronizations.
    pub sync_interval: f64,
    /// Seconds measured.
    pub duration: f64,
    /// Seed.
    pub seed: u64,
    /// Model: seconds per request.
    pub request_latency: f64,
    /// Model: bytes per second.
    pub bandwidth: f64,
    /// Downloads in flight at once.
    pub concurrency: u64,
    /// Model: seconds of Destination work per synchronization.
    pub sync_overhead: f64,
    /// Seconds from a change to its publication by the Source (model: as configured; real:
    /// the mean measured).
    pub publish_delay: f64,
    /// Changes at the Source in the measured interval.
    pub changes: u64,
    /// Iterations (notifications for push) that transferred something.
    pub iterations: u64,
    /// Mean fraction of copies in sync (0 to 1).
    pub avg_consistency: f64,
    /// Mean seconds from a change to its copy in sync.
    pub avg_latency: f64,
    /// Changes whose latency was measured.
    pub synced_changes: u64,
    /// Changes still not in sync at the end of the run.
    pub unsynced_changes: u64,
    /// Mean per-iteration fraction of required bytes in the bytes transferred (the paper's).
    pub efficiency: f64,
    /// All required bytes over all bytes.
    pub efficiency_overall: f64,
    /// Requests.
    pub requests: u64,
    /// Bytes transferred (bodies).
    pub bytes_total: u64,
    /// Required bytes.
    pub bytes_required: u64,
    /// Requests per change.
    pub requests_per_change: f64,
    /// Bytes per change.
    pub bytes_per_change: f64,
    /// Seconds spent synchronizing (sum over the iterations; for push, 0).
    pub sync_seconds: f64,
    /// Seconds the run took (not in the CSV).
    pub wall_seconds: f64,
}

impl Metrics {
    /// The CSV header line.
    pub fn csv_header() -> &'static str {
        "mode,strategy,resources,change_interval,change_dist,mix,size,sync_interval,duration,seed,\
request_latency,bandwidth,concurrency,sync_overhead,publish_delay,changes,iterations,avg_consistency,avg_latency,\
synced_changes,unsynced_changes,efficiency,efficiency_overall,requests,bytes_total,\
bytes_required,requests_per_change,bytes_per_change,sync_seconds"
    }

    /// The CSV line (no field needs quoting except `mix`, which holds commas). The wall-clock
    /// time is left out, so that a model run's line depends on its configuration only.
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},\"{}\",{},{},{},{},{},{},{},{},{:.6},{},{},{:.6},{:.6},{},{},{:.6},{:.6},{},{},{},{:.4},{:.1},{:.3}",
            self.mode,
            self.strategy,
            self.resources,
            self.change_interval,
            self.change_dist,
            self.mix,
            self.size,
            self.sync_interval,
            self.duration,
            self.seed,
            self.request_latency,
            self.bandwidth,
            self.concurrency,
            self.sync_overhead,
            self.publish_delay,
            self.changes,
            self.iterations,
            self.avg_consistency,
            self.avg_latency,
            self.synced_changes,
            self.unsynced_changes,
            self.efficiency,
            self.efficiency_overall,
            self.requests,
            self.bytes_total,
            self.bytes_required,
            self.requests_per_change,
            self.bytes_per_change,
            self.sync_seconds,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    /// Two resources over 10 s. Resource 0 changes at t=2 and its copy follows at t=6; resource
    /// 1 changes at t=4 and t=5 and its copy follows at t=8 (with the state of t=5).
    /// Out of sync: r0 during [2,6) = 4 s, r1 during [4,8) = 4 s, of 2 × 10 resource-seconds:
    /// consistency 1 − 8/20 = 0.6. Latencies: 6−2 = 4, 8−4 = 4, 8−5 = 3: mean 11/3.
    #[test]
    fn hand_worked_updates() {
        let mut t = Tracker::new(10.0, [(0, 1), (1, 2)]);
        t.lead_changed(2.0, 0, Some(3));
        t.lead_changed(4.0, 1, Some(4));
        t.lead_changed(5.0, 1, Some(5));
        t.copy_changed(6.0, 0, Some(3));
        // A stale copy does not end the wait.
        t.copy_changed(7.0, 1, Some(4));
        t.copy_changed(8.0, 1, Some(5));
        let m = t.finish(&Config::default(), 0.0);
        close(m.avg_consistency, 0.6);
        close(m.avg_latency, 11.0 / 3.0);
        assert_eq!((m.changes, m.synced_changes, m.unsynced_changes), (3, 3, 0));
    }

    /// Creates and deletes: one resource at the start; r1 created at t=1 (copy at t=3); r0
    /// deleted at t=2 (copy removed at t=4); over 4 s.
    /// [0,1): 1 counted, in sync → 1. [1,2): r0 ok, r1 missing → 1/2. [2,3): r0 deleted with a
    /// copy (out), r1 missing (out) → 0. [3,4): r0 out, r1 in → 1/2. Mean (1 + .5 + 0 + .5)/4.
    /// Latencies 3−1 = 2, 4−2 = 2.
    #[test]
    fn hand_worked_create_delete() {
        let mut t = Tracker::new(4.0, [(0, 1)]);
        t.lead_changed(1.0, 1, Some(2));
        t.lead_changed(2.0, 0, None);
        t.copy_changed(3.0, 1, Some(2));
        t.copy_changed(4.0, 0, None);
        assert_eq!(t.ids(), 2);
        let m = t.finish(&Config::default(), 0.0);
        close(m.avg_consistency, 0.5);
        close(m.avg_latency, 2.0);
    }

    /// Consistency stops at the duration; a change never synced is counted apart.
    #[test]
    fn end_of_interval_and_unsynced() {
        let mut t = Tracker::new(10.0, [(0, 1), (1, 2)]);
        t.lead_changed(5.0, 0, Some(3));
        t.lead_changed(9.0, 1, Some(4));
        // In sync after the end: latency counted, consistency not changed.
        t.copy_changed(12.0, 0, Some(3));
        let m = t.finish(&Config::default(), 0.0);
        // r0 out during [5,10), r1 during [9,10): 6 of 20 resource-seconds.
        close(m.avg_consistency, 1.0 - 6.0 / 20.0);
        close(m.avg_latency, 7.0);
        assert_eq!((m.synced_changes, m.unsynced_changes), (1, 1));
    }

    /// Efficiency is the mean of per-iteration ratios: (100/400 + 0/100 + 300/300) / 3; an
    /// iteration that moved nothing does not count, nor one started after the interval.
    #[test]
    fn hand_worked_efficiency() {
        let mut t = Tracker::new(10.0, [(0, 1)]);
        t.lead_changed(1.0, 0, Some(2));
        t.lead_changed(2.0, 0, Some(3));
        let it = |required, total, requests| Transfer {
            required,
            total,
            requests,
        };
        t.iteration(1.0, it(100, 400, 3));
        t.iteration(2.0, it(0, 100, 2));
        t.iteration(3.0, it(300, 300, 1));
        t.iteration(4.0, it(0, 0, 0));
        t.iteration(11.0, it(5, 1000, 9));
        let m = t.finish(&Config::default(), 0.0);
        close(m.efficiency, (0.25 + 0.0 + 1.0) / 3.0);
        close(m.efficiency_overall, 400.0 / 800.0);
        assert_eq!((m.iterations, m.requests, m.bytes_total), (3, 6, 800));
        close(m.requests_per_change, 3.0);
        close(m.bytes_per_change, 400.0);
    }
}
