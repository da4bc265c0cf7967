//! Fetches handed to other workers ([`crate::share`]), the worker's side: [`SharedFetcher`]
//! does one handed-out fetch as the run would have done it, through the same download,
//! verification and committer. The executor's side is [`crate::fetch::handout`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use resourcesync_store::OffWorker;
use resourcesync_store::{Records, Store};
use tokio::sync::{Notify, Semaphore};

use crate::commit::Committer;
use crate::error::Result;
use crate::fetch::ctx::{Ctx, Memo, RunPorts};
use crate::fetch::exec::run_at;
use crate::filter::UriFilter;
use crate::http::Http;
use crate::job::{Job, Outcome, Reason};
use crate::mapping::UriMapper;
use crate::plan::staging::StagedItem;
use crate::report::Observer;
use crate::share::SharedFetch;

/// The staged item a handed-out fetch stands for (a patch link is not handed out: the
/// resource is fetched whole, as when a patch fails, Z39.99-2014 §14.4).
fn staged(f: &SharedFetch) -> StagedItem {
    StagedItem {
        uri: f.uri.clone(),
        change: f.change.clone(),
        length: f.length,
        hashes: f.hashes.clone(),
        lastmod: f.lastmod,
        ctime: f.ctime,
        duplicates: f.duplicates.clone(),
        path: Some(f.path.to_string()),
        ..StagedItem::default()
    }
}

/// What a worker did with one handed-out fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SharedOutcome {
    /// Fetched, verified, in place and recorded: its length.
    Copied(u64),
    /// The copy in place was current (or adopted by its digest): nothing fetched.
    Unchanged,
    /// It failed, recorded as a pending change (retried by the Source's next run): why.
    Failed(String),
}

/// Does handed-out fetches of one Source, as its run would have: the same download (mirrors
/// first, Z39.99-2014 §14.2), verification (length, every published digest) and committer
/// (the copy in place before its row), into the Source's store and state. A failure is kept as
/// a pending change of the Source.
#[derive(Debug)]
pub struct SharedFetcher {
    ctx: Arc<Ctx>,
    /// Downloads in flight: a fetch holds a slot until its body is verified and queued for
    /// the committer (as in a run, see `Exec`), not while it waits for its batch's commit.
    slots: Arc<Semaphore>,
    /// Fetches started and not yet holding a slot ([`SharedFetcher::before_slot`]).
    before_slot: Arc<AtomicUsize>,
}

/// A fetch counted among those waiting for a download slot from its start
/// ([`SharedFetcher::start`]) until it holds one (or ends without).
#[derive(Debug)]
pub struct SlotTicket {
    count: Arc<AtomicUsize>,
    told: Option<Arc<Notify>>,
}

impl SlotTicket {
    /// `told` is notified when the fetch holds its slot (or ends without): its caller may
    /// start another.
    pub fn telling(mut self, told: Arc<Notify>) -> Self {
        self.told = Some(told);
        self
    }
}

impl Drop for SlotTicket {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::Relaxed);
        if let Some(t) = &self.told {
            t.notify_one();
        }
    }
}

impl SharedFetcher {
    /// A fetcher of the Source `source` (its key) into `store` and `state` with `http`, of
    /// bodies of at most `max_bytes`, `width` downloads at most in flight (more fetches may
    /// run at once: those past their download wait for their commit), each body kept as a
    /// version with `versions` ([`SharedFetch::versions`]; the store must keep versions).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: &str,
        max_bytes: u64,
        versions: bool,
        width: usize,
        store: Arc<dyn Store>,
        state: Arc<dyn Records>,
        http: Http,
        obs: Arc<dyn Observer>,
    ) -> Result<Self> {
        // Unused: every handed-out fetch says its path.
        let mapper = UriMapper::new(source).or_else(|_| UriMapper::new("http://localhost/"))?;
        let (store, state) = (OffWorker::store(store), OffWorker::records(state));
        Ok(SharedFetcher {
            slots: Arc::new(Semaphore::new(width.max(1))),
            before_slot: Arc::new(AtomicUsize::new(0)),
            ctx: Arc::new(Ctx {
                ports: RunPorts {
                    http: Arc::new(http),
                    committer: Committer::start(store.clone(), state.clone(), None, versions)?,
                    store,
                    state,
                    obs,
                    downloads: None,
                },
                mapper,
                key: source.to_owned(),
                delete: false,
                dry_run: false,
                max_resource_bytes: max_bytes,
                versions,
                state_path: format!("the state of {source}").into(),
                filter: UriFilter::default(),
                memo: Memo::default(),
            }),
        })
    }

    /// The Source's key.
    pub fn source(&self) -> &str {
        &self.ctx.key
    }

    /// The largest body it accepts.
    pub fn max_bytes(&self) -> u64 {
        self.ctx.max_resource_bytes
    }

    /// Does one fetch, which must be of this fetcher's Source and body limit (else it fails,
    /// untried).
    pub async fn fetch(&self, f: &SharedFetch) -> SharedOutcome {
        let ticket = self.start();
        self.fetch_started(f, ticket).await
    }

    /// Counts a fetch about to start among those waiting for a download slot, at once (before
    /// its task runs): what [`SharedFetcher::before_slot`] tells its caller, who starts as many
    /// as keep the slots busy. Handed to [`SharedFetcher::fetch_started`].
    pub fn start(&self) -> SlotTicket {
        self.before_slot.fetch_add(1, Ordering::Relaxed);
        SlotTicket {
            count: self.before_slot.clone(),
            told: None,
        }
    }

    /// Fetches started ([`SharedFetcher::start`]) not yet holding a download slot.
    pub fn before_slot(&self) -> usize {
        self.before_slot.load(Ordering::Relaxed)
    }

    /// [`SharedFetcher::fetch`] of a fetch counted by `ticket` until it holds a slot.
    pub async fn fetch_started(&self, f: &SharedFetch, ticket: SlotTicket) -> SharedOutcome {
        if f.source != self.ctx.key || f.max_bytes != self.ctx.max_resource_bytes {
            return SharedOutcome::Failed(format!(
                "{}: a fetch of {} handed to the fetcher of {}",
                f.uri, f.source, self.ctx.key
            ));
        }
        let rel = f.path.clone();
        let item = staged(f);
        let job = Job::fetch(item, Reason::from_flags(f.listed_change, f.new, f.repair));
        let mut permit = match self.slots.clone().acquire_owned().await {
            Ok(p) => Some(p),
            Err(e) => return SharedOutcome::Failed(format!("{}: {e}", f.uri)),
        };
        drop(ticket);
        match run_at(&self.ctx, Box::new(job), rel, &mut permit, None).await {
            Outcome::Created(n)
            | Outcome::Updated(n)
            | Outcome::Repaired(n)
            | Outcome::Patched(n) => SharedOutcome::Copied(n),
            Outcome::Failed(e) => SharedOutcome::Failed(e.error),
            _ => SharedOutcome::Unchanged,
        }
    }

    /// A state write that failed (the fetches after it are not to be trusted: the caller
    /// stops), if one did.
    pub fn state_error(&self) -> Option<String> {
        self.ctx.check_state().err().map(|e| e.to_string())
    }

    /// Commits what is queued and stops the committer (blocks: call from a blocking thread).
    pub fn close(&self) {
        self.ctx.ports.committer.close();
    }
}
