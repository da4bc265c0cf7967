//! The limits on syncs running at once (`limits.concurrency` over every Source,
//! `limits.per_host` against one host) and the order Sources wait for them in.
//!
//! A Source takes its place in the line when it becomes due ([`Gates::line_up`], which does
//! not wait), and is let through in that order as slots free up, skipping only those whose
//! host is busy (a Source waiting for its busy host holds no slot another host could use).
//! At start and on reload the service lines every new Source up in the configuration's order
//! before any of their tasks runs: the first round follows the configuration, whatever order
//! the runtime happens to poll the tasks in (it polls the last spawned first, and a second
//! worker thread steals half of the rest). Putting the largest Sources first in the file
//! makes a first harvest finish sooner (docs/aggregate.md).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use resourcesync_http::Bandwidth;
use tokio::sync::oneshot;

use crate::config::Limits;

/// What the syncs share: the bandwidth limit and the slots of the syncs running at once.
#[derive(Debug)]
pub(crate) struct Gates {
    /// Bytes of bodies per second over every Source (limits.bandwidth).
    pub(crate) bandwidth: Option<Arc<Bandwidth>>,
    line: Arc<Line>,
}

#[derive(Debug)]
struct Line {
    total: usize,
    per_host: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    running: usize,
    /// Syncs running per host (hosts with none are removed).
    hosts: HashMap<String, usize>,
    waiting: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    host: String,
    tx: oneshot::Sender<Slot>,
}

/// A place in the line, taken by [`Gates::line_up`]; [`Place::wait`] waits for its slot.
/// Dropped, it gives the place (or the slot it was given) up. It keeps its line (and so its
/// waiter) alive: a reload that replaces the gates lets the places taken before through.
#[derive(Debug)]
pub(crate) struct Place {
    rx: oneshot::Receiver<Slot>,
    _line: Arc<Line>,
}

/// A running sync's slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    line: Arc<Line>,
    host: String,
}

impl Gates {
    pub(crate) fn new(l: &Limits) -> Self {
        Gates {
            bandwidth: l.bandwidth.map(|b| Arc::new(Bandwidth::new(b))),
            line: Arc::new(Line {
                total: l.concurrency,
                per_host: l.per_host,
                inner: Mutex::new(Inner::default()),
            }),
        }
    }

    /// Takes a place at the end of the line for a sync of the Source at `url`, without
    /// waiting: its slot is given by [`Place::wait`], in the order places were taken.
    pub(crate) fn line_up(&self, url: &str) -> Place {
        let host = url::Url::parse(url)
            .map(|u| resourcesync_http::host_key(&u))
            .unwrap_or_default();
        let (tx, rx) = oneshot::channel();
        let given = {
            let mut g = self.line.lock();
            g.waiting.push_back(Waiter { host, tx });
            self.line.let_through(&mut g)
        };
        // Sent outside the lock: a slot whose Place was dropped meanwhile comes back here.
        Line::give(&self.line, given);
        Place {
            rx,
            _line: self.line.clone(),
        }
    }
}

impl Place {
    /// Waits for this place's slot.
    pub(crate) async fn wait(self) -> Slot {
        // The line (kept alive by this Place) drops a waiter only once its Place is gone, or
        // sends it its slot.
        self.rx.await.expect("the line keeps its waiters")
    }
}

impl Line {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes out of the line, in order, every waiter that a free slot can go to now: those
    /// whose host is below `per_host`, while fewer than `total` run. Places given up are
    /// dropped on the way.
    fn let_through(&self, g: &mut Inner) -> Vec<(oneshot::Sender<Slot>, String)> {
        let mut given = Vec::new();
        let mut i = 0;
        while g.running < self.total && i < g.waiting.len() {
            let w = &g.waiting[i];
            if w.tx.is_closed() {
                g.waiting.remove(i);
                continue;
            }
            let on_host = g.hosts.get(&w.host).copied().unwrap_or(0);
            if on_host >= self.per_host {
                i += 1;
                continue;
            }
            let Some(w) = g.waiting.remove(i) else { break };
            g.running += 1;
            *g.hosts.entry(w.host.clone()).or_default() += 1;
            given.push((w.tx, w.host));
        }
        given
    }

    /// Sends the slots `given` (outside the lock): one whose Place is gone meanwhile is
    /// dropped, which gives it back.
    fn give(line: &Arc<Line>, given: Vec<(oneshot::Sender<Slot>, String)>) {
        for (tx, host) in given {
            let slot = Slot {
                line: line.clone(),
                host,
            };
            // A failed send returns the slot, dropped here: given back to the next in line.
            let _ = tx.send(slot);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let given = {
            let mut g = self.line.lock();
            g.running = g.running.saturating_sub(1);
            if let Some(n) = g.hosts.get_mut(&self.host) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    g.hosts.remove(&self.host);
                }
            }
            self.line.let_through(&mut g)
        };
        Line::give(&self.line, given);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(total: usize, per_host: usize) -> Gates {
        let l = Limits {
            concurrency: total,
            per_host,
            ..Limits::default()
        };
        Gates::new(&l)
    }

    fn given(p: &mut Place) -> Option<Slot> {
        p.rx.try_recv().ok()
    }

    #[test]
    fn places_are_let_through_in_the_order_they_were_taken() {
        let g = gates(2, 2);
        let mut p: Vec<Place> = (0..5)
            .map(|i| g.line_up(&format!("http://h{i}.example/")))
            .collect();
        let a = given(&mut p[0]).expect("first slot");
        let b = given(&mut p[1]).expect("second slot");
        assert!(given(&mut p[2]).is_none(), "only two run at once");
        drop(a);
        let c = given(&mut p[2]).expect("the third in line is next");
        assert!(given(&mut p[3]).is_none());
        drop((b, c));
        assert!(given(&mut p[3]).is_some() && given(&mut p[4]).is_some());
    }

    #[test]
    fn a_busy_host_is_passed_over_and_holds_no_slot() {
        let g = gates(3, 1);
        let mut p = [
            g.line_up("http://a.example/x"),
            g.line_up("http://a.example/y"),
            g.line_up("http://b.example/"),
        ];
        let a = given(&mut p[0]).expect("a runs");
        assert!(given(&mut p[1]).is_none(), "one per host");
        assert!(
            given(&mut p[2]).is_some(),
            "another host goes past the busy one"
        );
        drop(a);
        assert!(
            given(&mut p[1]).is_some(),
            "a's second Source once a's first ends"
        );
    }

    #[test]
    fn a_place_given_up_passes_its_slot_on() {
        let g = gates(1, 1);
        let mut p0 = g.line_up("http://h0.example/");
        let p1 = g.line_up("http://h1.example/");
        let mut p2 = g.line_up("http://h2.example/");
        let a = given(&mut p0).expect("first");
        drop(p1);
        drop(a);
        assert!(given(&mut p2).is_some(), "the place given up is skipped");
        // A slot sent to a Place dropped before reading it comes back with the Place.
        let p3 = g.line_up("http://h3.example/");
        let mut p4 = g.line_up("http://h4.example/");
        drop(given(&mut p2));
        drop(p3);
        let s4 = given(&mut p4).expect("p3's slot went on to p4");
        drop(s4);
        let mut p5 = g.line_up("http://h5.example/");
        assert!(
            given(&mut p5).is_some(),
            "no slot was lost to the dropped places"
        );
    }
}
