//! The streaming part of a scan (see [`super::scan`]): the listing (or the change feed)
//! merged with the previous snapshot as both come, the files to read sent to the hashing
//! threads in batches, a bounded number in flight, their rows recorded in path order as the
//! batches come back.

use std::cell::RefCell;
use std::sync::atomic::Ordering;

use resourcesync_diff::{Merged, merge_by};

use super::feed::{Changes, FeedSteps, Plan};
use super::hash::{Hashers, Job};
use super::{
    BATCH, BATCHES_PER_THREAD, KnownPages, LISTING_CHUNKS_AHEAD, Recording, ScanOptions,
    ScanProgress, Wanted, hashers_gone, key, stream_listing,
};
use crate::error::{Error, Result};
use crate::inventory::{Inventory, Listed, Skipped};
use crate::state::{KnownRow, Recorder, via_text};

/// What the streaming part of a scan works with.
pub(super) struct Walk<'a, 'r, 'c> {
    pub(super) inv: &'a dyn Inventory,
    pub(super) base: &'a str,
    pub(super) opts: &'a ScanOptions,
    pub(super) rec: &'r Recorder<'c>,
    /// Whether the state holds a previous snapshot to merge with.
    pub(super) has_resources: bool,
    pub(super) wanted: &'a Wanted<'a>,
}

/// The merged steps: a known row not listed, a listed file not known, or both.
type Steps<'s> = Box<dyn Iterator<Item = Merged<KnownRow, Listed>> + 's>;

impl Walk<'_, '_, '_> {
    /// Runs the plan's steps through the hashing threads into `r`; the problems the listing
    /// or the feed reported. Whatever happens, the threads stop before it returns.
    pub(super) fn run(&self, plan: Plan<'_>, r: &mut Recording<'_, '_>) -> Result<Vec<Skipped>> {
        let threads = self.opts.threads.max(1);
        std::thread::scope(|s| -> Result<Vec<Skipped>> {
            // The listing streams on a thread of its own, a bounded number of chunks ahead.
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Listed>>(LISTING_CHUNKS_AHEAD);
            let (lister, changes) = match plan {
                Plan::List(listing) => (Some(s.spawn(move || stream_listing(listing, &tx))), None),
                Plan::Feed(changes) => (None, Some(changes)),
            };
            let mut hashers = Hashers::start(s, self.inv, self.base, &self.opts.algs, threads);
            let known_error = RefCell::new(None);
            let feed_skipped = RefCell::new(Vec::new());
            let steps = self.steps(changes, rx, &known_error, &feed_skipped);
            let feeder = Feeder {
                hashers: &mut hashers,
                in_flight: 0,
                limit: threads * BATCHES_PER_THREAD,
                batch: Vec::with_capacity(BATCH),
                progress: self.opts.progress.as_deref(),
            };
            let merged = self.merge(steps, feeder, r, &known_error);
            // Whatever happened, the threads stop: the hashers once their queue is closed, the
            // lister once its receiver is gone (dropped with the merge).
            hashers.close();
            drop(hashers);
            let mut skipped = match lister {
                Some(l) => l
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?,
                None => Vec::new(),
            };
            merged?;
            skipped.append(&mut feed_skipped.into_inner());
            Ok(skipped)
        })
    }

    /// The steps: the listing merged with the previous snapshot (read a page at a time), or
    /// the feed's changes each looked up in it.
    fn steps<'s>(
        &'s self,
        changes: Option<Changes<'s>>,
        listed: std::sync::mpsc::Receiver<Vec<Listed>>,
        error: &'s RefCell<Option<Error>>,
        feed_skipped: &'s RefCell<Vec<Skipped>>,
    ) -> Steps<'s> {
        match changes {
            None => {
                let known = KnownPages {
                    rec: self.rec,
                    page: Vec::new(),
                    last: None,
                    done: !self.has_resources,
                    error,
                };
                let listed = listed.into_iter().flatten();
                Box::new(merge_by(known, listed, |k, l| {
                    k.path.as_slice().cmp(key(&l.rel).as_ref())
                }))
            }
            Some(changes) => Box::new(FeedSteps {
                rec: self.rec,
                changes,
                last: None,
                skipped: feed_skipped,
                error,
            }),
        }
    }

    /// Takes each step: a deletion queued, a file kept, or one sent to be read; then waits
    /// for every batch out.
    fn merge(
        &self,
        steps: Steps<'_>,
        mut feeder: Feeder<'_>,
        r: &mut Recording<'_, '_>,
        known_error: &RefCell<Option<Error>>,
    ) -> Result<()> {
        for step in steps {
            match step {
                Merged::Left(k) => r.gone(&k)?,
                Merged::Right(l) => feeder.push(self.wanted.job(l, None), r)?,
                Merged::Both(k, l) if unchanged(&k, &l, self.wanted.mask) => r.keep(&k),
                Merged::Both(k, l) => feeder.push(self.wanted.job(l, Some(k.length)), r)?,
            }
            if known_error.borrow().is_some() {
                break;
            }
        }
        if let Some(e) = known_error.borrow_mut().take() {
            return Err(e);
        }
        feeder.finish(r)
    }
}

/// Whether a known row and the listed file are the same resource state: same size, time and
/// provenance link (one that changed, or came or went, is a new row), every digest wanted
/// recorded.
fn unchanged(k: &KnownRow, l: &Listed, want: u8) -> bool {
    let same_via = match (&k.via, &l.via) {
        (None, None) => true,
        (Some(k), Some(l)) => *k == via_text(l),
        _ => false,
    };
    k.length == l.len && k.mtime_ns == l.mtime_ns && k.algs & want == want && same_via
}

/// Files to read, sent to the hashing threads a batch at a time; while `limit` batches are
/// out, those done are recorded before another is sent.
struct Feeder<'h> {
    hashers: &'h mut Hashers,
    in_flight: usize,
    limit: usize,
    batch: Vec<Job>,
    progress: Option<&'h ScanProgress>,
}

impl Feeder<'_> {
    fn push(&mut self, job: Job, r: &mut Recording<'_, '_>) -> Result<()> {
        self.batch.push(job);
        if self.batch.len() == BATCH {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            self.send(batch, r)?;
        }
        Ok(())
    }

    fn send(&mut self, batch: Vec<Job>, r: &mut Recording<'_, '_>) -> Result<()> {
        if let Some(p) = self.progress {
            p.to_read.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        self.hashers.send(batch, r.rendering);
        self.in_flight += 1;
        while self.in_flight >= self.limit {
            let chunk = self.hashers.recv().ok_or_else(hashers_gone)?;
            self.in_flight -= 1;
            r.accept(chunk)?;
        }
        Ok(())
    }

    /// The last batch sent, the listing done: every batch out recorded.
    fn finish(mut self, r: &mut Recording<'_, '_>) -> Result<()> {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.send(batch, r)?;
        }
        if let Some(p) = self.progress {
            p.listed.store(true, Ordering::Relaxed);
        }
        self.hashers.close();
        for _ in 0..self.in_flight {
            let chunk = self.hashers.recv().ok_or_else(hashers_gone)?;
            r.accept(chunk)?;
        }
        Ok(())
    }
}
