//! Group commit: copies are put in place and recorded in batches.
//!
//! Downloads run concurrently; each one streams its body into an [`Upload`] of the store and
//! verifies its length and every published digest there ([`Upload::finish`]); dump packages do
//! the same for each bitstream they hold. The verified bodies then go to one committer thread,
//! which takes whatever has arrived (at most [`MAX_BATCH`] copies; while copies flow, a small
//! batch waits a few milliseconds for more: [`GATHER`]) and, for the whole batch:
//!
//! 0. records, in one transaction, a placeholder row ([`placeholder`]) for each copy the state
//!    has no row of yet, so that a file put in place and never recorded is still the
//!    Destination's: a later run adopts it if the Source still lists it and removes it (with
//!    `--delete`) if the Source deleted it, instead of leaving it behind unknown;
//! 1. makes the bodies durable ([`Store::sync`]: for a directory one `syncfs` of the file
//!    system on Linux, elsewhere each file was `fsync`ed by `finish`);
//! 2. puts each in place ([`Store::place`]: for a directory a rename, each directory checked
//!    once per batch), those within the Source's budget of bytes when it has one ([`Budget`],
//!    `SyncOptions::quota`): a copy past it is not put in place and stops the run;
//! 3. makes that durable ([`Store::sync`] again: `syncfs`, or each directory `fsync`ed);
//! 4. records every copy of the batch in the state in one transaction
//!    ([`Records::put_resources`]), and only then tells each producer its outcome.
//!
//! While copies keep arriving, step 3 of one batch is step 1 of the next: a single sync makes
//! the renames of the batch before and the bodies of the next one durable, then the batch
//! before is recorded (on a second thread) while the next one is renamed. The order per copy
//! is unchanged (placeholder → body synced → renamed → rename synced → row), with one sync
//! per batch instead of two; when nothing is waiting, the batch is synced and recorded at
//! once.
//!
//! So the guarantees of a commit one file at a time hold (Z39.99-2014 §5.2; DEVELOPERS.md
//! "Durable"): no file at its final path is ever partial or unverified, and no row is written
//! before its file is in place and synced. A run killed at any moment loses at most the batches
//! in flight: their temporary files are removed by the next run, and files renamed but not
//! recorded are adopted by their digest without being fetched again. While a batch is being
//! synced the next one fills, so the cost of a sync is shared by as many files as arrive
//! meanwhile.
//!
//! The other state writes of a run (a copy adopted by its digest or found current, a copy
//! deleted or kept, a change settled or kept as pending: [`Write`]) go to the same thread
//! ([`Committer::write`]) and are recorded in the transaction of the batch they join, so that
//! every row and pending change of a run is written here, never beside it.

use std::sync::Mutex;
use std::thread::JoinHandle;

use std::sync::Arc;

use resourcesync_store::{Batch, Finished, Op, Records, ResourceRecord, Store, VersionRecord};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::report::Failed;

mod budget;
pub(crate) mod owner;
pub(crate) mod versions;
mod write;
pub(crate) use budget::Budget;
pub(crate) use write::{Write, not_recorded};

/// The name of the committer's threads: every row and pending change of a run is written on
/// one of them.
pub(crate) const COMMIT_THREAD: &str = "resourcesync-commit";

/// Most copies committed together.
pub(crate) const MAX_BATCH: usize = 4096;
/// Copies a batch waits for while its producer announces more (see [`Producer`]): past this,
/// it takes what has arrived. The first batch starts early; later ones hold what arrived while
/// the one before was committed.
const MIN_WAITED: usize = 1024;
/// While copies flow (the batch before held at least two and was taken within [`FLOW_GAP`]),
/// a batch that found fewer than this waiting waits up to [`GATHER_FOR`] for more: on a fast
/// link the committer otherwise keeps up with small batches, and each batch costs two
/// transactions and a `syncfs` however few copies it holds (docs/performance.md, "The loopback
/// baseline"). A lone copy (a notification, the first of a run) never waits.
const GATHER: usize = 256;
/// See [`GATHER`].
const GATHER_FOR: std::time::Duration = std::time::Duration::from_millis(5);
/// How often a gathering batch looks for more (see [`GATHER`]).
const GATHER_POLL: std::time::Duration = std::time::Duration::from_micros(250);
/// Copies flow while batches follow each other within this (see [`GATHER`]).
const FLOW_GAP: std::time::Duration = std::time::Duration::from_millis(100);

/// One verified copy waiting to be put in place and recorded.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The verified body, and the key it goes to.
    pub(crate) body: Finished,
    /// Its row (length and digests are taken from the body).
    pub(crate) row: ResourceRecord,
    /// Which test crash point its rename passes.
    pub(crate) origin: Origin,
    /// The state has no row of it (as far as its producer knows): a placeholder is recorded
    /// before it is put in place (step 0 of the module documentation).
    pub(crate) fresh: bool,
    /// The Source's time for this body, kept with its version (`--versions`): the change's
    /// `datetime` for a Change List entry (Z39.99-2014 §12.1), else the entry's `<lastmod>`.
    pub(crate) datetime: Option<resourcesync_model::W3cDateTime>,
}

/// The placeholder row of a copy about to be put in place where the state has no row of it:
/// marked gone, with no length and no digest (a row of a copy kept after a delete always has
/// its length), so that nothing takes it for a current copy: the baseline diff fetches its
/// resource again (adopting the file if it has the published digest) or deletes it, a Change
/// List's delete finds a row to act on, and the committed row replaces it.
pub(crate) fn placeholder(row: &ResourceRecord) -> ResourceRecord {
    ResourceRecord {
        uri: row.uri.clone(),
        source: row.source.clone(),
        path: row.path.clone(),
        length: None,
        hashes: Default::default(),
        lastmod: None,
        etag: None,
        last_modified: None,
        gone: true,
    }
}

/// Whether a row is a [`placeholder`]: a copy a killed run may have put in place, not
/// recorded.
pub(crate) fn is_placeholder(r: &ResourceRecord) -> bool {
    r.gone && r.length.is_none() && r.hashes.is_empty()
}

/// Step 0: the placeholders of the fresh copies of a batch, in one transaction.
fn announce<'a>(
    state: &dyn Records,
    batch: impl Iterator<Item = &'a Pending>,
) -> std::result::Result<(), Failed> {
    let rows: Vec<ResourceRecord> = batch
        .filter(|p| p.fresh)
        .map(|p| placeholder(&p.row))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    // Not `put_resources`: a pending change stays until its copy is recorded (a run killed
    // now retries it).
    let mut b = Batch::new();
    for r in &rows {
        b.push(Op::PutResource(r));
    }
    state.apply(&b).map_err(Failed::from)
}

/// A copy put in place and recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Put {
    /// Its length.
    pub(crate) length: u64,
    /// Whether it replaced a file at its path.
    pub(crate) replaced: bool,
}

impl Put {
    /// The outcome of a [`Write`] recorded (no copy put in place).
    const WRITTEN: Put = Put {
        length: 0,
        replaced: false,
    };
}

/// What happened to one copy of a batch, or why it failed.
pub(crate) type Done = std::result::Result<Put, Failed>;

/// Which test crash points ([`crate::crashpoint`]) a copy passes: downloads or dump packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Downloaded resources (`after-rename`).
    Download,
    /// Entries of dump packages (`package-renamed`).
    Package,
}

/// A batch renamed into place (step 2), waiting for the sync of its renames and its rows.
#[derive(Debug)]
struct Placed {
    /// One outcome per copy, in order (failures final, successes until recorded).
    out: Vec<Done>,
    /// The rows of the copies placed, and their index in `out`.
    rows: Vec<ResourceRecord>,
    slots: Vec<usize>,
    /// The URIs of the fresh copies not put in place: their placeholders go with the rows.
    unplaced: Vec<String>,
    /// The rows of other Sources whose paths copies of this batch took over
    /// ([`crate::commit::owner::Gate::taken_over`]): removed with the rows.
    taken_over: Vec<String>,
    /// The writes with no copy to put in place that joined this batch, and who waits for
    /// each job of them: recorded with the rows.
    writes: Vec<(Vec<Write>, Reply)>,
    /// The versions of the copies placed (`--versions`), their bodies kept, then those of
    /// the copies in place the writes record: recorded with the rows.
    versions: Vec<VersionRecord>,
    /// How many of `versions` are of copies placed (each a new version: counted).
    new_versions: usize,
}

/// Step 2: puts each copy of the batch in place ([`Store::place`]), but those the gate refused
/// (`refused`, in order: see [`crate::commit::owner::gate`]) and those past its Source's `budget`,
/// which fail with their reason, their bodies discarded.
fn place_batch(
    store: &dyn Store,
    state: &dyn Records,
    budget: &mut Option<Budget>,
    keeper: Option<&versions::Keeper>,
    batch: Vec<Pending>,
    gate: crate::commit::owner::Gate,
) -> Placed {
    let n = batch.len();
    let mut p = Placed {
        out: Vec::with_capacity(n),
        rows: Vec::with_capacity(n),
        slots: Vec::with_capacity(n),
        unplaced: Vec::new(),
        taken_over: Vec::new(),
        writes: Vec::new(),
        versions: Vec::new(),
        new_versions: 0,
    };
    let mut bodies = Vec::with_capacity(n);
    let mut rest = Vec::with_capacity(n);
    // The outcome of each copy refused, by its place in the batch, with the URI whose
    // placeholder goes (a fresh copy announced but not put in place).
    let mut refusals: Vec<(usize, Failed, Option<String>)> = Vec::new();
    let mut refused = gate.refused.into_iter();
    let mut taken_over = gate.taken_over.into_iter();
    for (
        i,
        Pending {
            body,
            row,
            origin,
            fresh,
            datetime,
        },
    ) in batch.into_iter().enumerate()
    {
        let over = taken_over.next().flatten();
        // Refused by the gate: never announced, so no placeholder to remove.
        if let Some(Some(f)) = refused.next() {
            refusals.push((i, f, None));
            continue;
        }
        let past_budget = budget
            .as_mut()
            .and_then(|b| b.take(state, &row, body.committed().length));
        if let Some(f) = past_budget {
            // Not put in place (its temporary body goes with it).
            refusals.push((i, f, fresh.then_some(row.uri)));
            continue;
        }
        bodies.push(body);
        rest.push((row, origin, fresh, over, datetime));
    }
    let mut refusals = refusals.into_iter().peekable();
    let mut refuse_due = |p: &mut Placed| {
        while let Some((_, f, unplaced)) = refusals.next_if(|(i, _, _)| *i == p.out.len()) {
            p.unplaced.extend(unplaced);
            p.out.push(Err(f));
        }
    };
    let placed = store.place(bodies);
    // A store that answers for fewer bodies than it was given: the others failed.
    let missing = rest.len().saturating_sub(placed.len());
    let placed = placed.into_iter().chain((0..missing).map(|_| {
        Err(resourcesync_store::Error::Conflict {
            path: "(batch)".into(),
            reason: "the store gave no outcome for this copy",
        })
    }));
    for (r, (mut row, origin, fresh, over, datetime)) in placed.zip(rest) {
        refuse_due(&mut p);
        match r {
            Ok(c) => {
                crate::crashpoint::point(match origin {
                    Origin::Download => "after-rename",
                    Origin::Package => "package-renamed",
                });
                row.length = Some(c.committed.length);
                row.hashes = c.committed.hashes;
                // Its body kept as a version before anything records it (`--versions`): a
                // copy whose body cannot be kept fails, unrecorded, and is fetched again.
                if let Some(k) = keeper {
                    match k.keep(store, &row, datetime.or(row.lastmod)) {
                        Ok(v) => p.versions.push(v),
                        Err(f) => {
                            if fresh {
                                p.unplaced.push(row.uri);
                            }
                            p.out.push(Err(f));
                            continue;
                        }
                    }
                }
                p.slots.push(p.out.len());
                p.taken_over.extend(over);
                p.out.push(Ok(Put {
                    length: c.committed.length,
                    replaced: c.replaced,
                }));
                p.rows.push(row);
            }
            // The store's error as it is: its category (a bucket over its quota stops the
            // run, a dropped connection is retried) must reach the run.
            Err(e) => {
                if fresh {
                    p.unplaced.push(row.uri);
                }
                p.out.push(Err(Failed::from(e)))
            }
        }
    }
    refuse_due(&mut p);
    p
}

/// Step 4, once the renames are synced (`synced`): records the rows, and the writes that
/// joined the batch (each job of them answered here), in one transaction; the outcome of every
/// copy.
fn record(
    state: &dyn Records,
    keeper: Option<&versions::Keeper>,
    p: Placed,
    synced: std::result::Result<(), Failed>,
) -> Vec<Done> {
    let Placed {
        mut out,
        rows,
        slots,
        unplaced,
        taken_over,
        writes,
        mut versions,
        new_versions,
    } = p;
    if rows.is_empty() && unplaced.is_empty() && writes.is_empty() {
        return out;
    }
    let mut batch = Batch::new();
    for uri in &taken_over {
        batch.push(Op::RemoveResource(uri));
    }
    for r in &rows {
        batch.put_resource(r);
    }
    for uri in &unplaced {
        batch.push(Op::RemoveResource(uri));
    }
    for w in writes.iter().flat_map(|(w, _)| w) {
        w.add_to(&mut batch);
    }
    // The versions of the copies, first seen now; the ends of those their Source deleted.
    versions::stamped(&mut versions);
    let ends: Vec<_> = match keeper {
        Some(_) => writes
            .iter()
            .flat_map(|(w, _)| w)
            .filter_map(Write::version_end)
            .collect(),
        None => Vec::new(),
    };
    versions::add_to(&mut batch, &versions, &ends);
    // The rows only once the files are durably in place; a failure here leaves files with
    // their placeholders, which the next run adopts by their digest or deletes.
    let done = synced.and_then(|()| state.apply(&batch).map_err(Failed::from));
    match &done {
        Ok(()) => {
            if let Some(k) = keeper {
                k.recorded(new_versions);
            }
            // The rows and the removal of their pending changes are one transaction.
            for _ in &rows {
                crate::crashpoint::point("state");
            }
        }
        Err(e) => {
            for i in slots {
                out[i] = Err(e.clone());
            }
        }
    }
    drop(batch);
    for (_, reply) in writes {
        reply.send(vec![done.clone().map(|()| Put::WRITTEN)]);
    }
    out
}

/// Puts a batch in place and records it (steps 1 to 4 of the module documentation); one outcome
/// per copy, in order.
#[cfg(test)]
pub(crate) fn commit_batch(
    store: &dyn Store,
    state: &dyn Records,
    batch: Vec<Pending>,
) -> Vec<Done> {
    let gate = crate::commit::owner::gate(state, &batch, &[]);
    let admitted = batch.iter().zip(&gate.refused).filter(|(_, r)| r.is_none());
    if let Err(e) = announce(state, admitted.map(|(p, _)| p)).and_then(|()| Ok(store.sync()?)) {
        return batch.iter().map(|_| Err(e.clone())).collect();
    }
    let p = place_batch(store, state, &mut None, None, batch, gate);
    let synced = store.sync().map_err(Failed::from);
    record(state, None, p, synced)
}

/// Where the outcomes of a job go.
#[derive(Debug)]
enum Reply {
    /// One copy, awaited by a download task.
    One(oneshot::Sender<Done>),
    /// A chunk of copies of a dump package: its tag and their outcomes, in order.
    Many(u64, std::sync::mpsc::Sender<(u64, Vec<Done>)>),
    /// Nobody (the end of a [`Producer`]'s chunks).
    None,
}

impl Reply {
    fn send(self, done: Vec<Done>) {
        match self {
            Reply::One(tx) => {
                let d = done
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Err(Failed::other("no outcome")));
                let _ = tx.send(d);
            }
            Reply::Many(tag, tx) => {
                let _ = tx.send((tag, done));
            }
            Reply::None => {}
        }
    }
}

#[derive(Debug)]
struct Job {
    items: Vec<Pending>,
    /// Writes with no copy (a job holds copies or writes, not both): recorded together, with
    /// one outcome.
    writes: Vec<Write>,
    reply: Reply,
    /// More chunks of the same producer follow at once: the batch waits for them (up to
    /// [`MIN_WAITED`] copies) rather than paying a sync for a few.
    more: bool,
}

/// What a queued copy came to, once its batch is committed.
#[derive(Debug)]
pub(crate) struct Receipt(oneshot::Receiver<Done>);

impl Receipt {
    /// Waits for the batch.
    pub(crate) async fn done(self) -> Done {
        self.0
            .await
            .unwrap_or_else(|_| Err(Failed::other("the commit thread has stopped")))
    }
}

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
fn run(
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

/// The committer thread and the queue that feeds it.
#[derive(Debug)]
pub(crate) struct Committer {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Versions kept (`--versions`), and what was kept.
    keeper: Option<Arc<versions::Keeper>>,
}

impl Committer {
    /// Starts the committer thread for a store and a state; the copies it puts in place kept
    /// within `budget`, when given, and every body kept as a version with `versions`
    /// ([`versions`]: the store must keep versions).
    pub(crate) fn start(
        store: Arc<dyn Store>,
        state: Arc<dyn Records>,
        budget: Option<Budget>,
        versions: bool,
    ) -> Result<Self> {
        let keeper = match versions {
            true => Some(Arc::new(versions::Keeper::for_store(store.as_ref())?)),
            false => None,
        };
        let (tx, rx) = mpsc::channel::<Job>(MAX_BATCH * 2);
        let k = keeper.clone();
        let thread = std::thread::Builder::new()
            .name(COMMIT_THREAD.into())
            .spawn(move || run(store.as_ref(), state.as_ref(), budget, k.as_deref(), rx))
            .map_err(|e| Error::io("starting the commit thread", e))?;
        Ok(Committer {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            keeper,
        })
    }

    /// What the versions kept so far come to (`--versions`): (versions recorded, bodies
    /// stored anew, their bytes); `None` without versions.
    pub(crate) fn versions_kept(&self) -> Option<(u64, u64, u64)> {
        self.keeper.as_ref().map(|k| k.tally.get())
    }

    fn sender(&self) -> std::result::Result<mpsc::Sender<Job>, String> {
        self.tx
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .ok_or_else(|| "the run is ending: not committed".into())
    }

    /// Queues a verified copy (waiting while the queue is full); the receiver resolves once it
    /// is in place and recorded (or failed).
    pub(crate) async fn enqueue(&self, p: Pending) -> std::result::Result<Receipt, String> {
        let tx = self.sender()?;
        let (reply, rx) = oneshot::channel();
        let job = Job {
            items: vec![p],
            writes: Vec::new(),
            reply: Reply::One(reply),
            more: false,
        };
        if tx.send(job).await.is_err() {
            return Err("the commit thread has stopped".into());
        }
        Ok(Receipt(rx))
    }

    /// Records writes with no copy to put in place, in the transaction of the batch they join;
    /// waits until they are recorded (or failed, all of them).
    pub(crate) async fn write(&self, writes: Vec<Write>) -> std::result::Result<(), Failed> {
        if writes.is_empty() {
            return Ok(());
        }
        let (job, rx) = Self::write_job(writes);
        let tx = self.sender().map_err(Failed::other)?;
        if tx.send(job).await.is_err() {
            return Err(Failed::other("the commit thread has stopped"));
        }
        Receipt(rx).done().await.map(|_| ())
    }

    /// [`Committer::write`] from a blocking thread (a dump package's).
    pub(crate) fn write_blocking(&self, writes: Vec<Write>) -> std::result::Result<(), Failed> {
        if writes.is_empty() {
            return Ok(());
        }
        let (job, rx) = Self::write_job(writes);
        let tx = self.sender().map_err(Failed::other)?;
        if tx.blocking_send(job).is_err() {
            return Err(Failed::other("the commit thread has stopped"));
        }
        rx.blocking_recv()
            .unwrap_or_else(|_| Err(Failed::other("the commit thread has stopped")))
            .map(|_| ())
    }

    fn write_job(writes: Vec<Write>) -> (Job, oneshot::Receiver<Done>) {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            items: Vec::new(),
            writes,
            reply: Reply::One(reply),
            more: false,
        };
        (job, rx)
    }

    /// A producer of chunks of copies, for a blocking thread (a dump package): outcomes go to
    /// `reply`. [`Committer::close`] waits until every producer is dropped.
    pub(crate) fn producer(
        &self,
        reply: std::sync::mpsc::Sender<(u64, Vec<Done>)>,
    ) -> std::result::Result<Producer, String> {
        Ok(Producer {
            tx: self.sender()?,
            reply,
            more: false,
        })
    }

    /// Commits what is queued and stops the thread.
    pub(crate) fn close(&self) {
        if let Ok(mut g) = self.tx.lock() {
            g.take();
        }
        let t = self.thread.lock().ok().and_then(|mut g| g.take());
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

/// Hands chunks of verified copies to the committer from a blocking thread; see
/// [`Committer::producer`]. While the producer says more chunks follow, the committer waits
/// for them to fill its batch (to [`MIN_WAITED`] copies); dropped, it says no more follow.
#[derive(Debug)]
pub(crate) struct Producer {
    tx: mpsc::Sender<Job>,
    reply: std::sync::mpsc::Sender<(u64, Vec<Done>)>,
    /// Whether the last chunk announced more.
    more: bool,
}

impl Producer {
    /// Queues a chunk (waiting while the queue is full); `(tag, outcomes in order)` is sent to
    /// the producer's `reply` once its batch is committed. `more`: another chunk follows at
    /// once (one must then follow, or the producer be dropped). On `Err` nothing was queued.
    pub(crate) fn send(
        &mut self,
        items: Vec<Pending>,
        tag: u64,
        more: bool,
    ) -> std::result::Result<(), String> {
        let job = Job {
            items,
            writes: Vec::new(),
            reply: Reply::Many(tag, self.reply.clone()),
            more,
        };
        self.more = more;
        self.tx
            .blocking_send(job)
            .map_err(|_| "the commit thread has stopped".to_owned())
    }
}

impl Producer {
    /// Tells the committer that no chunk follows now (when the last one said more).
    pub(crate) fn end(&mut self) -> std::result::Result<(), String> {
        if !self.more {
            return Ok(());
        }
        self.more = false;
        self.tx
            .blocking_send(Job {
                items: Vec::new(),
                writes: Vec::new(),
                reply: Reply::None,
                more: false,
            })
            .map_err(|_| "the commit thread has stopped".to_owned())
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if self.more {
            // Without blocking (this may run anywhere): a full queue holds jobs to go on with.
            let _ = self.tx.try_send(Job {
                items: Vec::new(),
                writes: Vec::new(),
                reply: Reply::None,
                more: false,
            });
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests;
