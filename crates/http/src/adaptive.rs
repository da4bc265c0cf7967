//! Adaptive concurrency per host: how many requests may be in flight to one host,
//! grown while throughput grows and the host answers without 429/503 or rising latency, cut on
//! them, within a ceiling the user sets. An AIMD controller (additive increase, multiplicative
//! decrease, as TCP's congestion control): small enough to own, and the crates that do this
//! (tower's load shedding, governor's rate limits) limit rates or shed load rather than adapt a
//! number in flight to what a remote server answers.
//!
//! - Start at [`START`] in flight, or the ceiling when lower; until the first window closes,
//!   the limit is raised to what the shortest round trip measured so far says: the requests a
//!   Source answering [`START_RATE`] per second has in flight over that round trip (Little's
//!   law: in flight = rate × round trip), within the ceiling. The first answers (the discovery's
//!   documents) measure it, so that the downloads after them start at the window the link needs
//!   rather than growing to it a quarter per round trip (a 50 ms round trip starts at the default
//!   ceiling, loopback at [`START`]).
//! - Each window of `limit` responses: when none was a 429/503, the mean latency is at most
//!   twice the best window's, and throughput did not fall, the limit grows by a quarter (at
//!   least one), up to the ceiling; rising latency cuts it by a quarter.
//! - A 429 or 503 (RFC 6585 §4; RFC 9110 §15.6.4) halves it, once per round of requests (not
//!   once per response of the same round), pauses new requests for its `Retry-After` (RFC 9110
//!   §10.2.3), and keeps the limit from growing past that level for [`HOLD`].
//!
//! Every request counts, whatever the protocol: an HTTP/2 stream takes a slot as an HTTP/1.1
//! request does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Requests in flight per host at first (and the least the round trip's window starts at).
pub const START: usize = 32;
/// The answers per second a Source is assumed to give when the window is set from the first
/// round trips measured ([`HostLimit`]): a static file server answers small files well beyond it,
/// and one that cannot answers slower (rising latency) or 503, which cut the limit as always.
pub const START_RATE: f64 = 5_000.0;
/// The default ceiling of requests in flight per host.
pub const DEFAULT_CEILING: usize = 256;
/// How long a limit that drew a 429/503 stays the most the controller grows to.
pub const HOLD: Duration = Duration::from_secs(60);
/// The longest pause a `Retry-After` imposes on new requests.
const MAX_PAUSE: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Ctl {
    limit: usize,
    ceiling: usize,
    in_flight: usize,
    peak: usize,
    /// Grows at each cut: a 429/503 to a request sent before the last cut does not cut again.
    epoch: u64,
    /// The most the limit grows to until the instant given.
    held: Option<(usize, Instant)>,
    paused_until: Option<Instant>,
    window_n: usize,
    window_latency: Duration,
    window_start: Instant,
    best_latency: Option<Duration>,
    last_throughput: f64,
    congested: bool,
    /// The shortest latency answered before the first window closed (see [`START_RATE`]).
    first_rtt: Option<Duration>,
}

/// The controller of one host.
#[derive(Debug)]
pub struct HostLimit {
    ctl: Mutex<Ctl>,
    notify: Notify,
}

/// A request slot: released when dropped.
#[derive(Debug)]
pub struct Slot {
    host: Arc<HostLimit>,
    at: Instant,
    epoch: u64,
    done: bool,
}

impl HostLimit {
    /// A controller with this ceiling (at least 1).
    pub fn new(ceiling: usize) -> Arc<Self> {
        let ceiling = ceiling.max(1);
        Arc::new(HostLimit {
            ctl: Mutex::new(Ctl {
                limit: START.min(ceiling),
                ceiling,
                in_flight: 0,
                peak: 0,
                epoch: 0,
                held: None,
                paused_until: None,
                window_n: 0,
                window_latency: Duration::ZERO,
                window_start: Instant::now(),
                best_latency: None,
                last_throughput: 0.0,
                congested: false,
                first_rtt: None,
            }),
            notify: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ctl> {
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current limit.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    /// The most requests in flight at once so far.
    pub fn peak(&self) -> usize {
        self.lock().peak
    }

    /// Waits for a slot.
    pub async fn acquire(self: &Arc<Self>) -> Slot {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pause = {
                let mut c = self.lock();
                let now = Instant::now();
                match c.paused_until.filter(|p| *p > now) {
                    Some(p) => Some(p),
                    None if c.in_flight < c.limit => {
                        c.in_flight += 1;
                        c.peak = c.peak.max(c.in_flight);
                        if c.in_flight < c.limit {
                            // Room for more: the next waiter goes too (wake-ups are one by one).
                            self.notify.notify_one();
                        }
                        return Slot {
                            host: self.clone(),
                            at: now,
                            epoch: c.epoch,
                            done: false,
                        };
                    }
                    None => None,
                }
            };
            match pause {
                Some(p) => tokio::time::sleep_until(p).await,
                None => notified.await,
            }
        }
    }

    /// A 429 or 503 to the request of `slot`: the limit halves (once per round: not again for
    /// the requests sent before this cut), new requests wait `retry_after`.
    fn congestion(&self, slot_epoch: u64, retry_after: Option<Duration>) {
        let mut c = self.lock();
        let now = Instant::now();
        if let Some(r) = retry_after.filter(|r| !r.is_zero()) {
            let until = now + r.min(MAX_PAUSE);
            c.paused_until = Some(c.paused_until.map_or(until, |p| p.max(until)));
        }
        c.congested = true;
        if slot_epoch != c.epoch {
            return;
        }
        c.limit = (c.limit / 2).max(1);
        c.held = Some((c.limit, now + HOLD));
        c.epoch += 1;
        c.window_n = 0;
        c.window_latency = Duration::ZERO;
        c.window_start = now;
    }

    /// A response (not a 429/503) came `latency` after its request was sent.
    fn answered(&self, latency: Duration) {
        let mut c = self.lock();
        c.window_n += 1;
        c.window_latency += latency;
        if c.best_latency.is_none() && c.held.is_none() && !c.congested {
            // No window closed yet: the window the round trip asks for (see START_RATE).
            let rtt = c.first_rtt.map_or(latency, |r| r.min(latency));
            c.first_rtt = Some(rtt);
            // The shortest so far: a first answer's latency also holds the connection's set-up.
            let wanted = window_for(rtt, c.ceiling);
            if wanted != c.limit {
                let grew = wanted > c.limit;
                c.limit = wanted;
                if grew {
                    drop(c);
                    self.notify.notify_waiters();
                    return;
                }
            }
        }
        if c.window_n < c.limit {
            return;
        }
        let now = Instant::now();
        let n = u32::try_from(c.window_n).unwrap_or(u32::MAX).max(1);
        let mean = c.window_latency / n;
        let secs = now.duration_since(c.window_start).as_secs_f64().max(1e-6);
        let throughput = c.window_n as f64 / secs;
        let best = *c.best_latency.get_or_insert(mean);
        if mean < best {
            c.best_latency = Some(mean);
        }
        let cap = match c.held {
            Some((l, until)) if until > now => l,
            _ => c.ceiling,
        };
        if mean > best * 2 && mean > Duration::from_millis(5) {
            // Rising latency: the host (or the path to it) queues.
            c.limit = (c.limit * 3 / 4).max(1);
        } else if !c.congested && throughput >= c.last_throughput * 0.9 && c.limit < cap {
            c.limit = (c.limit + (c.limit / 4).max(1)).min(cap);
        }
        c.last_throughput = throughput;
        c.congested = false;
        c.window_n = 0;
        c.window_latency = Duration::ZERO;
        c.window_start = now;
        drop(c);
        self.notify.notify_waiters();
    }
}

/// The requests in flight that keep a Source answering [`START_RATE`] per second busy over a
/// round trip of `rtt` (Little's law), at least [`START`] and at most `ceiling`.
fn window_for(rtt: Duration, ceiling: usize) -> usize {
    let n = (rtt.as_secs_f64() * START_RATE).ceil();
    let n = if n.is_finite() && n < ceiling as f64 {
        n as usize
    } else {
        ceiling
    };
    n.max(START).min(ceiling)
}

impl Slot {
    /// The request of this slot was answered (not with a 429/503): its latency counts.
    pub fn answered(&mut self) {
        if !self.done {
            self.done = true;
            self.host.answered(self.at.elapsed());
        }
    }

    /// The request of this slot was answered 429 or 503 (see [`HostLimit`]).
    pub fn congestion(&mut self, retry_after: Option<Duration>) {
        if !self.done {
            self.done = true;
            self.host.congestion(self.epoch, retry_after);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.host.lock();
        c.in_flight = c.in_flight.saturating_sub(1);
        drop(c);
        // One slot freed: one waiter woken (waking all of them, up to the ceiling, for each
        // answer costs more than the requests on loopback). A limit that grows wakes them all.
        self.host.notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn congestion_halves_once_per_round_and_windows_grow() {
        let h = HostLimit::new(256);
        let mut slots: Vec<Slot> = futures_collect(&h, 32).await;
        assert_eq!(h.peak(), 32);
        // Every request of the round answers 503: one cut.
        for s in &mut slots {
            s.congestion(None);
        }
        assert_eq!(h.limit(), 16);
        drop(slots);
        // A request sent after the cut draws a 503: cut again.
        let mut s = h.acquire().await;
        s.congestion(None);
        assert_eq!(h.limit(), 8);
        drop(s);
        // Held there: windows without congestion do not grow past it.
        for _ in 0..64 {
            let mut s = h.acquire().await;
            s.answered();
        }
        assert_eq!(h.limit(), 8);
        // A fresh host grows from the start.
        let g = HostLimit::new(256);
        for _ in 0..(32 * 3) {
            let mut s = g.acquire().await;
            s.answered();
        }
        assert!(g.limit() > START, "{}", g.limit());
        assert_eq!(HostLimit::new(4).limit(), 4);
    }

    #[tokio::test]
    async fn the_first_round_trips_set_the_starting_window() {
        // Z39.99 says nothing of it; RFC 9110 neither: see START_RATE.
        assert_eq!(window_for(Duration::from_micros(200), 256), START);
        assert_eq!(window_for(Duration::from_millis(20), 256), 100);
        assert_eq!(window_for(Duration::from_millis(54), 256), 256);
        assert_eq!(window_for(Duration::from_millis(54), 8), 8);
        let h = HostLimit::new(256);
        // A first answer after 30 ms (connection set-up included), then 20 ms: the shortest.
        tokio::time::pause();
        let mut a = h.acquire().await;
        tokio::time::advance(Duration::from_millis(30)).await;
        a.answered();
        drop(a);
        assert_eq!(h.limit(), 150);
        let mut b = h.acquire().await;
        tokio::time::advance(Duration::from_millis(20)).await;
        b.answered();
        drop(b);
        assert_eq!(h.limit(), 100);
        // Once a window has closed, only the controller's rules move it.
        let mut held: Vec<Slot> = futures_collect(&h, 100).await;
        tokio::time::advance(Duration::from_millis(20)).await;
        for s in &mut held {
            s.answered();
        }
        drop(held);
        let after_window = h.limit();
        assert_eq!(after_window, 125, "grew by a quarter");
        let mut c = h.acquire().await;
        tokio::time::advance(Duration::from_millis(1)).await;
        c.answered();
        assert_eq!(
            h.limit(),
            after_window,
            "a short answer later does not reset it"
        );
        // A 503 before any window closed keeps the start where it is.
        let g = HostLimit::new(256);
        let mut d = g.acquire().await;
        d.congestion(None);
        let mut e = g.acquire().await;
        tokio::time::advance(Duration::from_millis(54)).await;
        e.answered();
        assert_eq!(g.limit(), START / 2);
    }

    async fn futures_collect(h: &Arc<HostLimit>, n: usize) -> Vec<Slot> {
        let mut v = Vec::new();
        for _ in 0..n {
            v.push(h.acquire().await);
        }
        v
    }
}
