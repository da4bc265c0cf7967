//! What every follower shares: the options (where copies and state go), the limits and the
//! gates that enforce them, the status, and the ports of one sync ([`Shared::ports`]: where a
//! Source's store and state are opened, fenced by a lease when the state is shared).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use resourcesync_destination::Ports;
use resourcesync_http::Bandwidth;
use resourcesync_store::{
    Fenced, FsStore, Leases, PgState, Records, S3Config, S3Store, SqliteState, Store,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{Limits, SourceSpec};
use crate::error::{Error, Result};
use crate::gate::Gates;
use crate::republish::{Copies, Republish};
use crate::status::Status;

/// Where the state of every Source is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateChoice {
    /// SQLite inside each Source's folder (`STORE/NAME/.resourcesync/state.sqlite`), as
    /// `resourcesync sync` keeps it: the default.
    PerSource,
    /// SQLite in this directory, one database per Source (`DIR/NAME.sqlite`).
    Directory(PathBuf),
    /// PostgreSQL at this URL, one schema per Source (`agg_NAME`, `-` as `_`).
    Postgres(String),
}

/// Where the service keeps what it copies.
#[derive(Debug, Clone)]
pub struct Options {
    /// The store: one folder per Source, named as the Source (with `object_store`, the
    /// folders hold only what is local: the scratch space and, by default, the state).
    pub store: PathBuf,
    /// The copies in an S3-compatible bucket instead
    /// (`s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R`): each Source's under
    /// `PREFIX/NAME/`.
    pub object_store: Option<String>,
    /// The state.
    pub state: StateChoice,
    /// This worker's name among those sharing a PostgreSQL state (leases name it); see
    /// [`worker_name`].
    pub worker: String,
    /// Where the copies are republished as Sources (see [`crate::republish`]), if they are
    /// (`--serve`).
    pub republish: Option<Republish>,
}

/// A worker name unique enough among processes sharing a state: host, process, random.
pub fn worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    format!("{host}:{}:{:04x}", std::process::id(), fastrand::u16(..))
}

/// The ports of one sync, or why there is none now.
pub(crate) enum Opened {
    /// Ready: the ports, and the lease they are fenced by (PostgreSQL state).
    Ready(Ports, Option<Arc<Fenced>>),
    /// Another worker holds the Source.
    Elsewhere,
    /// A worker (this one before a restart, or another) completed a sync of the Source less
    /// than its interval ago (PostgreSQL state): due again in this long.
    Fresh(std::time::Duration),
}

/// Where this worker's claimer stands ([`crate::work::claimer`]): a coordinator shares a page
/// of its fetches only while its own claimer claims (it is one of the workers that do the
/// queue, and the one that takes over the claims of a worker that died).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claiming {
    /// Not connected to the state yet.
    Starting,
    /// Watching the queues.
    Watching,
    /// Stopped for good: the state's schema is newer than this program knows (its error
    /// logged once); this worker shares nothing until it is upgraded.
    Refused,
}

/// The Sources' queues this worker's claimer leaves to the other workers: those of the Sources
/// whose sync in this worker still fetches (it fetches what it does not queue at its own
/// pace; claiming its own pages would add the queue's cost to the same process's work), until
/// the sync waits for its queue ([`crate::queue::Queue`]).
#[derive(Debug, Default)]
pub(crate) struct OwnQueues {
    fetching: Mutex<HashSet<String>>,
    /// Told when a schema is no longer left to the others: the claimer looks at once.
    pub(crate) changed: tokio::sync::Notify,
}

impl OwnQueues {
    fn set(&self) -> MutexGuard<'_, HashSet<String>> {
        self.fetching.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sync of the Source of `schema` fetches in this worker.
    pub(crate) fn fetching(&self, schema: &str) {
        self.set().insert(schema.to_owned());
    }

    /// It waits for its queue (or ended): this worker's claimer takes part again.
    pub(crate) fn waiting(&self, schema: &str) {
        if self.set().remove(schema) {
            self.changed.notify_one();
        }
    }

    /// Whether the queue of `schema` is left to the others now.
    pub(crate) fn left_to_others(&self, schema: &str) -> bool {
        self.set().contains(schema)
    }
}

/// What every follower shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The queues this worker's claimer leaves to the others for now.
    pub(crate) own: Arc<OwnQueues>,
    /// Where this worker's claimer stands: set by it, read by the coordinators' queues.
    pub(crate) claiming: tokio::sync::watch::Sender<Claiming>,
    pub(crate) status: Status,
    pub(crate) opts: Options,
    pub(crate) limits: RwLock<Limits>,
    pub(crate) gates: RwLock<Arc<Gates>>,
    /// The Sources followed now (the claimer watches their queues, crate::work).
    pub(crate) sources: RwLock<Vec<SourceSpec>>,
    /// Republishes running at once: one per core (see [`Shared::republish_slot`]).
    pub(crate) republishes: Arc<Semaphore>,
}

impl Shared {
    /// The Sources followed now.
    pub(crate) fn sources(&self) -> Vec<SourceSpec> {
        self.sources
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Where the copies are republished, if they are.
    pub(crate) fn republish(&self) -> Option<&Republish> {
        self.opts.republish.as_ref()
    }

    /// Waits for a slot to republish a Source in. A republish reads and hashes the copies
    /// with a thread per core, after its Source's sync and outside the sync gates: without
    /// this slot, Sources that finish their syncs together (many small ones) would republish
    /// together, each with its own threads, buffers and SQLite caches: the aggregator's memory
    /// would grow with the number of Sources that finish at once.
    pub(crate) async fn republish_slot(&self) -> OwnedSemaphorePermit {
        // Never closed: acquiring fails only on a closed semaphore.
        self.republishes
            .clone()
            .acquire_owned()
            .await
            .expect("open semaphore")
    }

    /// The folder of the Source `name`.
    pub(crate) fn folder(&self, name: &str) -> PathBuf {
        self.opts.store.join(name)
    }

    /// The SQLite state of the Source `name` (none with PostgreSQL).
    pub(crate) fn sqlite_state(&self, name: &str) -> Option<PathBuf> {
        match &self.opts.state {
            StateChoice::PerSource => Some(resourcesync_destination::options::default_state_path(
                &self.folder(name),
            )),
            StateChoice::Directory(d) => Some(d.join(format!("{name}.sqlite"))),
            StateChoice::Postgres(_) => None,
        }
    }

    /// The bandwidth limit every Source's client shares, if there is one.
    pub(crate) fn bandwidth(&self) -> Option<Arc<Bandwidth>> {
        self.gates
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .bandwidth
            .clone()
    }

    /// Takes a place in the line of syncs for the Source at `url` ([`crate::gate`]), without
    /// waiting.
    pub(crate) fn line_up(&self, url: &str) -> crate::gate::Place {
        self.gates
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .line_up(url)
    }

    /// The ports of the Source `name` for one sync: its folder as the store, its state. With
    /// PostgreSQL, the state is fenced by this worker's lease on the Source, taken here; and
    /// with `every` (its schedule's interval), a Source any worker completed a sync of less
    /// than that ago is left until it is due ([`Opened::Fresh`]): the workers share one
    /// schedule, rather than each syncing every Source in turn.
    pub(crate) async fn ports(
        self: &Arc<Self>,
        name: &str,
        every: Option<std::time::Duration>,
    ) -> Result<Opened> {
        let me = self.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || me.ports_blocking(&name, every))
            .await
            .map_err(|e| Error::Serve {
                addr: String::new(),
                cause: format!("opening the ports: {e}"),
            })?
    }

    /// Where the copies of the Source `name` are: its folder, or its prefix in the bucket
    /// (`PREFIX/NAME/`).
    pub(crate) fn copies(&self, name: &str) -> Result<Copies> {
        Ok(match &self.opts.object_store {
            None => Copies::Folder,
            Some(url) => {
                let cfg = S3Config::parse(url)?;
                let prefix = format!("{}{name}/", cfg.prefix);
                Copies::Bucket(Box::new(cfg.with_prefix(&prefix)?))
            }
        })
    }

    /// The store of the Source `name`'s copies, and its scratch directory (local, made). With
    /// `clean`, what an interrupted sync left is removed: only by the worker holding the
    /// Source's lease (a worker fetching from its shared queue opens it without: the holder's
    /// downloads may be under way).
    pub(crate) fn store_of(&self, name: &str, clean: bool) -> Result<(Arc<dyn Store>, PathBuf)> {
        let folder = self.folder(name);
        let scratch = folder.join(resourcesync_store::STATE_DIR).join("tmp");
        // Owner-only, as FsStore::open makes it (the state is beside it).
        std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        resourcesync_fsmode::private_dir_all(&scratch).map_err(|e| Error::io(&scratch, e))?;
        let store: Arc<dyn Store> = match self.copies(name)? {
            Copies::Folder => {
                let s = FsStore::open(&folder)?;
                if clean {
                    s.clean_tmp()?;
                }
                Arc::new(s)
            }
            Copies::Bucket(cfg) => {
                let s = S3Store::with_config(*cfg)?.with_scratch(&scratch);
                // Multipart uploads a killed worker left (older than an hour) are aborted.
                if clean {
                    s.features().clean_interrupted()?;
                }
                Arc::new(s)
            }
        };
        Ok((store, scratch))
    }

    fn ports_blocking(&self, name: &str, every: Option<std::time::Duration>) -> Result<Opened> {
        let folder = self.folder(name);
        let StateChoice::Postgres(url) = &self.opts.state else {
            let db = self
                .sqlite_state(name)
                .unwrap_or_else(|| resourcesync_destination::options::default_state_path(&folder));
            if let Some(parent) = db.parent() {
                // The state's folder is owner-only (SqliteState::open makes it so too).
                resourcesync_fsmode::private_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            if self.opts.object_store.is_none() {
                return Ok(Opened::Ready(
                    Ports::directory_waiting(&folder, &db, STATE_WAIT)?,
                    None,
                ));
            }
            let (store, scratch) = self.store_of(name, true)?;
            let state = SqliteState::open_waiting(&db, STATE_WAIT)?;
            return Ok(Opened::Ready(
                Ports::new(store, Arc::new(state) as Arc<dyn Records>, scratch, db),
                None,
            ));
        };
        // Connected for this sync only: its connections close when the sync ends, so that the
        // server sees at most `limits.concurrency` × the pool's size of them, however many
        // Sources there are (one pool kept per Source ran out of the server's connections).
        let pg = Arc::new(PgState::connect_schema(url, &schema_of(name))?);
        let ttl = self.limits().lease;
        let Some(lease) = pg.lease_source(name, &self.opts.worker, ttl)? else {
            // Another worker syncs it: this one's heartbeat in the Source's schema at once
            // (the claimer's renews it), so that the coordinator shares its next page even
            // when the schema was made after the claimer's last heartbeat (crate::work).
            if self.limits().share_above.is_some() {
                let schema = [schema_of(name)];
                if let Err(e) = pg.beat_workers(&schema, &self.opts.worker, ttl) {
                    tracing::warn!(source = %name, "renewing this worker's heartbeat: {e}");
                }
            }
            return Ok(Opened::Elsewhere);
        };
        // Asked once the lease is held: no sync of it runs elsewhere now, so the time read is
        // that of the last one completed.
        if let Some(every) = every
            && let Some(last) = pg.last_synced()?
        {
            let age = jiff::Timestamp::now().duration_since(last.timestamp());
            let age = std::time::Duration::try_from(age).unwrap_or_default();
            if age < every {
                if let Err(e) = pg.release_source(&lease) {
                    tracing::warn!(source = %name, "releasing its lease: {e}");
                }
                return Ok(Opened::Fresh(every - age));
            }
        }
        let fenced = Arc::new(Fenced::new(pg.clone(), lease));
        let (store, scratch) = self.store_of(name, true)?;
        let mut ports = Ports::new(
            store,
            fenced.clone() as Arc<dyn Records>,
            scratch,
            format!("PostgreSQL schema {}", schema_of(name)),
        );
        // With `limits.share_above`, a large sync's fetches go to the Source's queue, for every
        // worker (crate::work).
        if let Some(above) = self.limits().share_above {
            let q = crate::queue::Queue::new(pg.clone(), above).alone_unless_others(
                pg,
                &self.opts.worker,
                self.claiming.subscribe(),
                self.own.clone(),
            );
            ports = ports.with_downloads(Arc::new(q));
        }
        Ok(Opened::Ready(ports, Some(fenced)))
    }
}

/// The PostgreSQL schema of the Source `name`.
pub fn schema_of(name: &str) -> String {
    format!("agg_{}", name.replace('-', "_"))
}

/// How long a reader of a push Source's SQLite state (its republish, its count) waits while the
/// push round that asked for it still holds the state: the rounds and the readers take turns.
pub(crate) const STATE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
