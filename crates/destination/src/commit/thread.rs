//! The committer thread's loop: it takes the jobs that have arrived (gathering more while
//! copies flow), and records the batch before while the next one is put in place (the
//! pipeline of [`crate::commit`]).

use std::sync::Mutex;

use resourcesync_store::{Records, Store};
use tokio::sync::mpsc;

use super::batch::{Placed, announce, place_batch, record};
use super::{
    Budget, COMMIT_THREAD, Done, FLOW_GAP, GATHER, GATHER_FOR, GATHER_POLL, Job, MAX_BATCH,
    MIN_WAITED, Reply, versions,
};
use crate::report::Failed;

/// The jobs of a batch and how many copies they hold.
struct Taken {
    jobs: Vec<Job>,
    copies: usize,
}

impl Taken {
    /// Adds a job; whether its producer announces more.
    fn push(&mut self, j: Job) -> bool {
        let more = j.more;
        self.copies += j.items.len() + j.writes.len();
        self.jobs.push(j);
        more
    }
}

/// The committer thread's loop (see the module documentation).
pub(super) fn run(
    store: &dyn Store,
    state: &dyn Records,
    mut budget: Option<Budget>,
    keeper: Option<&versions::Keeper>,
    mut rx: mpsc::Receiver<Job>,
) {
    // The batch renamed but not yet recorded, and who waits for it.
    let mut prev: Option<(Placed, Vec<(Reply, usize)>)> = None;
    let mut closed = false;
    // Whether the last job received announced more chunks.
    let mut more = false;
    // The copies of the last batch taken, and when.
    let mut last_taken: Option<(usize, std::time::Instant)> = None;
    loop {
        let mut taken = Taken {
            jobs: Vec::new(),
            copies: 0,
        };
        if prev.is_none() {
            if closed {
                break;
            }
            match rx.blocking_recv() {
                Some(j) => more = taken.push(j),
                None => break,
            }
        }
        let mut gathering: Option<std::time::Instant> = None;
        // Copies flow: the batch before held more than one and was taken moments ago.
        let flowing = last_taken.is_some_and(|(n, at)| n >= 2 && at.elapsed() < FLOW_GAP);
        while !closed && taken.copies < MAX_BATCH {
            let next = if more && taken.copies < MIN_WAITED {
                // A producer in full flow: its next chunk comes without waiting on anything.
                rx.blocking_recv()
                    .ok_or(mpsc::error::TryRecvError::Disconnected)
            } else {
                rx.try_recv()
            };
            match next {
                Ok(j) => more = taken.push(j),
                Err(mpsc::error::TryRecvError::Empty) => {
                    let waited = gathering
                        .get_or_insert_with(std::time::Instant::now)
                        .elapsed();
                    if !flowing
                        || taken.copies == 0
                        || taken.copies >= GATHER
                        || waited >= GATHER_FOR
                    {
                        break;
                    }
                    // Looked at again shortly: no runtime timer (this thread may outlive the
                    // runtime when a run is stopped), and a few wake-ups per window at most.
                    std::thread::sleep(GATHER_POLL);
                }
                Err(mpsc::error::TryRecvError::Disconnected) => closed = true,
            }
        }
        let no_jobs = taken.jobs.is_empty();
        if !no_jobs {
            last_taken = Some((taken.copies, std::time::Instant::now()));
        }
        let mut batch = Vec::with_capacity(taken.copies);
        let mut replies = Vec::with_capacity(taken.jobs.len());
        let mut writes = Vec::new();
        for j in taken.jobs {
            if j.writes.is_empty() {
                replies.push((j.reply, j.items.len()));
                batch.extend(j.items);
            } else {
                writes.push((j.writes, j.reply));
            }
        }
        // No copy at a path another URI has (crate::commit::owner): checked before anything of this
        // batch is recorded or put in place, against the state, the batch before (placed, its
        // rows not yet recorded) and the copies before it in this one.
        let gate = if batch.is_empty() {
            crate::commit::owner::Gate::default()
        } else {
            let unrecorded = prev.as_ref().map_or(&[][..], |(p, _)| p.rows.as_slice());
            crate::commit::owner::gate(state, &batch, unrecorded)
        };
        // The placeholders of this batch first (step 0), then one sync: the renames of the
        // batch before and the bodies of this one (verified, so written, before they were
        // queued).
        let admitted = batch.iter().zip(&gate.refused).filter(|(_, r)| r.is_none());
        let announced = announce(state, admitted.map(|(p, _)| p));
        let synced = store.sync().map_err(Failed::from);
        let before = prev.take();
        if no_jobs {
            if let Some((p, replies)) = before {
                answer(record(state, keeper, p, synced), replies);
            }
            continue;
        }
        // The batch before is recorded (its renames are synced now) while this one is renamed
        // into place: neither waits for the other, and each copy's order is kept.
        let has_before = before.is_some();
        let before = Mutex::new(before);
        let record_before = || {
            let taken = before.lock().map(|mut b| b.take()).unwrap_or(None);
            if let Some((p, r)) = taken {
                answer(record(state, keeper, p, synced.clone()), r);
            }
        };
        std::thread::scope(|s| {
            // On a thread of the committer's name (the run's state writes are all on one), or,
            // when none can be started, here after this batch is placed.
            let recorded = has_before
                .then(|| {
                    std::thread::Builder::new()
                        .name(COMMIT_THREAD.into())
                        .spawn_scoped(s, record_before)
                        .ok()
                })
                .flatten();
            match synced.clone().and(announced) {
                Ok(()) => {
                    let mut p = place_batch(store, state, &mut budget, keeper, batch, gate);
                    if let Some(k) = keeper {
                        p.new_versions = p.versions.len();
                        p.versions.extend(k.keep_rows(store, &writes));
                    }
                    p.writes = writes;
                    prev = Some((p, replies));
                }
                Err(e) => {
                    for (_, reply) in writes {
                        reply.send(vec![Err(e.clone())]);
                    }
                    answer(batch.iter().map(|_| Err(e.clone())).collect(), replies)
                }
            }
            match recorded {
                // A panic while recording: every copy of that batch waits for its answer in
                // vain and is reported "the commit thread has stopped"; carry on with this one.
                Some(h) => {
                    let _ = h.join();
                }
                None => record_before(),
            }
        });
    }
}

/// Sends each job its outcomes (the batch's, in job order).
fn answer(done: Vec<Done>, replies: Vec<(Reply, usize)>) {
    let mut it = done.into_iter();
    for (reply, n) in replies {
        reply.send(it.by_ref().take(n).collect());
    }
}
