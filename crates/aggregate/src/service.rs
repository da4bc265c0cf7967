//! The service: one follower task per Source (see [`crate::follow`]), the limits they share,
//! reload (Sources added, removed or changed without a restart) and drain.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use resourcesync_destination::Ports;
use resourcesync_store::{Fenced, FsStore, PgState, StateStore, Store};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Limits, Schedule, SourceSpec};
use crate::error::{Error, Result};
use crate::republish::Republish;
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
    /// The store: one folder per Source, named as the Source.
    pub store: PathBuf,
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
}

/// Syncs running at once: over every Source, and per host.
#[derive(Debug)]
struct Gates {
    total: Arc<Semaphore>,
    per_host: usize,
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Gates {
    fn new(l: &Limits) -> Self {
        Gates {
            total: Arc::new(Semaphore::new(l.concurrency)),
            per_host: l.per_host,
            hosts: Mutex::new(HashMap::new()),
        }
    }

    fn host(&self, url: &str) -> Arc<Semaphore> {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| format!("{h}:{}", u.port_or_known_default().unwrap_or(0)))
            })
            .unwrap_or_default();
        let mut g = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(host)
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_host)))
            .clone()
    }
}

/// What every follower shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) status: Status,
    opts: Options,
    limits: RwLock<Limits>,
    gates: RwLock<Arc<Gates>>,
    /// One PostgreSQL state per Source (its schema), connected once.
    pg: Mutex<HashMap<String, Arc<PgState>>>,
}

impl Shared {
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

    /// Waits for a slot against the host of `url`, then for one of all (so that a Source
    /// waiting for its busy host holds no slot another host could use).
    pub(crate) async fn gates(&self, url: &str) -> (OwnedSemaphorePermit, OwnedSemaphorePermit) {
        let gates = self.gates.read().unwrap_or_else(|p| p.into_inner()).clone();
        let host = gates.host(url);
        // The semaphores are never closed: acquiring fails only on a closed one.
        let h = host.acquire_owned().await.expect("open semaphore");
        let t = gates
            .total
            .clone()
            .acquire_owned()
            .await
            .expect("open semaphore");
        (h, t)
    }

    /// The ports of the Source `name` for one sync: its folder as the store, its state. With
    /// PostgreSQL, the state is fenced by this worker's lease on the Source, taken here.
    pub(crate) async fn ports(self: &Arc<Self>, name: &str) -> Result<Opened> {
        let me = self.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || me.ports_blocking(&name))
            .await
            .map_err(|e| Error::Serve {
                addr: String::new(),
                cause: format!("opening the ports: {e}"),
            })?
    }

    fn ports_blocking(&self, name: &str) -> Result<Opened> {
        let folder = self.folder(name);
        let StateChoice::Postgres(url) = &self.opts.state else {
            let db = self
                .sqlite_state(name)
                .unwrap_or_else(|| resourcesync_destination::options::default_state_path(&folder));
            if let Some(parent) = db.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            return Ok(Opened::Ready(Ports::directory(&folder, &db)?, None));
        };
        let pg = {
            let cached = self
                .pg
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(name)
                .cloned();
            match cached {
                Some(pg) => pg,
                None => {
                    let pg = Arc::new(PgState::connect_schema(url, &schema_of(name))?);
                    self.pg
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(name.to_owned(), pg.clone());
                    pg
                }
            }
        };
        let ttl = self.limits().lease;
        let Some(lease) = pg.lease_source(name, &self.opts.worker, ttl)? else {
            return Ok(Opened::Elsewhere);
        };
        let fenced = Arc::new(Fenced::new(pg, lease));
        let store = FsStore::open(&folder)?;
        store.clean_tmp()?;
        let scratch = folder.join(resourcesync_store::STATE_DIR).join("tmp");
        std::fs::create_dir_all(&scratch).map_err(|e| Error::io(&scratch, e))?;
        Ok(Opened::Ready(
            Ports::new(
                Arc::new(store) as Arc<dyn Store>,
                fenced.clone() as Arc<dyn StateStore>,
                scratch,
                format!("PostgreSQL schema {}", schema_of(name)),
            ),
            Some(fenced),
        ))
    }
}

/// Runs the follower of `spec` until `cancel`; a follower that panics (a bug) is recorded as
/// a failure of its Source, which is started again after a back-off, instead of staying
/// "syncing" forever on the page.
async fn supervise(spec: SourceSpec, shared: Arc<Shared>, cancel: CancellationToken) {
    loop {
        let run = tokio::spawn(crate::follow::follow(
            spec.clone(),
            shared.clone(),
            cancel.clone(),
        ));
        let Err(e) = run.await else {
            return;
        };
        if !e.is_panic() || cancel.is_cancelled() {
            return;
        }
        let msg = e
            .into_panic()
            .downcast::<String>()
            .map(|m| *m)
            .or_else(|p| p.downcast::<&str>().map(|m| (*m).to_owned()))
            .unwrap_or_else(|_| "unknown".into());
        tracing::error!(source = %spec.name, "the follower failed: {msg}");
        shared.status.failed(
            &spec.name,
            &format!("internal error (please report it): {msg}"),
        );
        let wait = crate::follow::backoff(
            shared.status.consecutive_failures(&spec.name),
            shared.limits().backoff_max,
        );
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The PostgreSQL schema of the Source `name`.
pub fn schema_of(name: &str) -> String {
    format!("agg_{}", name.replace('-', "_"))
}

struct Task {
    spec: SourceSpec,
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

/// The aggregator service (see the crate's documentation). Runs on the Tokio runtime it is
/// started in.
pub struct Aggregator {
    shared: Arc<Shared>,
    tasks: Mutex<HashMap<String, Task>>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("store", &self.shared.opts.store)
            .finish_non_exhaustive()
    }
}

fn check(config: &Config, opts: &Options) -> Result<()> {
    if let StateChoice::Postgres(_) = opts.state {
        if let Some(s) = config.sources.iter().find(|s| s.schedule == Schedule::Push) {
            return Err(Error::Config {
                file: PathBuf::from("--state"),
                line: None,
                message: format!(
                    "source {:?} is followed by push, which keeps its state in its folder: use the \
                     default state, or an interval schedule with --state postgres://",
                    s.name
                ),
            });
        }
    }
    Ok(())
}

impl Aggregator {
    /// Starts following every Source of `config` (in the current Tokio runtime).
    pub fn start(config: &Config, opts: Options) -> Result<Aggregator> {
        check(config, &opts)?;
        std::fs::create_dir_all(&opts.store).map_err(|e| Error::io(&opts.store, e))?;
        let shared = Arc::new(Shared {
            status: Status::default(),
            gates: RwLock::new(Arc::new(Gates::new(&config.limits))),
            limits: RwLock::new(config.limits.clone()),
            opts,
            pg: Mutex::new(HashMap::new()),
        });
        let a = Aggregator {
            shared,
            tasks: Mutex::new(HashMap::new()),
        };
        a.apply(config);
        Ok(a)
    }

    /// The status of every Source.
    pub fn status(&self) -> &Status {
        &self.shared.status
    }

    /// The store's folder.
    pub fn store(&self) -> &Path {
        &self.shared.opts.store
    }

    /// Where the copies are republished, if they are.
    pub fn republish(&self) -> Option<&Republish> {
        self.shared.republish()
    }

    /// Follows `config` from now on: Sources added are started, removed ones stopped (after
    /// their running sync), changed ones started again with their new settings once their
    /// running sync ends; the limits apply to syncs started from now on.
    pub fn reload(&self, config: &Config) -> Result<()> {
        check(config, &self.shared.opts)?;
        *self
            .shared
            .limits
            .write()
            .unwrap_or_else(|p| p.into_inner()) = config.limits.clone();
        *self.shared.gates.write().unwrap_or_else(|p| p.into_inner()) =
            Arc::new(Gates::new(&config.limits));
        self.apply(config);
        Ok(())
    }

    fn apply(&self, config: &Config) {
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let wanted: HashMap<&str, &SourceSpec> = config
            .sources
            .iter()
            .map(|s| (s.name.as_str(), s))
            .collect();
        let names: Vec<String> = tasks.keys().cloned().collect();
        for name in names {
            if !wanted.contains_key(name.as_str()) {
                if let Some(t) = tasks.remove(&name) {
                    t.cancel.cancel();
                    tracing::info!(source = %name, "no longer followed");
                }
                self.shared.status.remove(&name);
            }
        }
        for spec in &config.sources {
            let previous = match tasks.get(&spec.name) {
                Some(t) if t.spec == *spec => continue,
                Some(_) => tasks.remove(&spec.name).map(|t| {
                    t.cancel.cancel();
                    t.handle
                }),
                None => None,
            };
            self.shared.status.register(spec);
            let cancel = CancellationToken::new();
            let (s, sh, c) = (spec.clone(), self.shared.clone(), cancel.clone());
            let handle = tokio::spawn(async move {
                // One follower per Source at a time: a changed one waits for the old to end.
                if let Some(p) = previous {
                    let _ = p.await;
                }
                supervise(s, sh, c).await;
            });
            tasks.insert(
                spec.name.clone(),
                Task {
                    spec: spec.clone(),
                    cancel,
                    handle,
                },
            );
        }
    }

    /// Stops: no sync starts from now on; the running ones are given `grace` to finish, then
    /// stopped where they are (every store keeps its copies whole at any point, and the state
    /// records only what is in place, so the next start resumes from there).
    pub async fn drain(&self, grace: Duration) {
        let tasks: Vec<Task> = {
            let mut g = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
            g.drain().map(|(_, t)| t).collect()
        };
        for t in &tasks {
            t.cancel.cancel();
        }
        let deadline = tokio::time::Instant::now() + grace;
        for t in tasks {
            let mut h = t.handle;
            if tokio::time::timeout_at(deadline, &mut h).await.is_err() {
                tracing::warn!(source = %t.spec.name, "still syncing after the grace period: stopped");
                h.abort();
                let _ = h.await;
            }
        }
    }
}
