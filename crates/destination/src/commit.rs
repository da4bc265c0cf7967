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
//!    ([`RecordWrites::put_resources`]), and only then tells each producer its outcome.
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
//!
//! [`Upload`]: resourcesync_store::Upload
//! [`Upload::finish`]: resourcesync_store::Upload::finish
//! [`RecordWrites::put_resources`]: resourcesync_store::RecordWrites::put_resources

use std::sync::Mutex;
use std::thread::JoinHandle;

use std::sync::Arc;

use resourcesync_store::{Finished, Records, ResourceRecord, Store};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};
use crate::report::Failed;

mod batch;
mod budget;
pub(crate) mod owner;
mod thread;
pub(crate) mod versions;
mod write;
#[cfg(test)]
pub(crate) use batch::commit_batch;
pub(crate) use budget::Budget;
use thread::run;
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
