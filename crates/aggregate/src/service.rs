//! The service: one follower task per Source (see [`crate::follow`]), the limits they share,
//! reload (Sources added, removed or changed without a restart) and drain.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use resourcesync_store::S3Config;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Schedule, SourceSpec};
use crate::error::{Error, Result};
use crate::gate::{Gates, Place};
use crate::republish::Republish;
use crate::shared::Shared;
use crate::status::Status;

pub use crate::shared::{Options, StateChoice, schema_of, worker_name};

/// Runs the follower of `spec` until `cancel`; a follower that panics (a bug) is recorded as
/// a failure of its Source, which is started again after a back-off, instead of staying
/// "syncing" forever on the page.
async fn supervise(
    spec: SourceSpec,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    mut first: Option<Place>,
) {
    loop {
        let run = tokio::spawn(crate::follow::follow(
            spec.clone(),
            shared.clone(),
            cancel.clone(),
            first.take(),
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
    /// The claimer of the Sources' shared fetches (PostgreSQL state, see [`crate::work`]).
    claimer: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("store", &self.shared.opts.store)
            .finish_non_exhaustive()
    }
}

fn check(config: &Config, opts: &Options) -> Result<()> {
    if opts.object_store.is_some() {
        if let Some(s) = config.sources.iter().find(|s| s.schedule == Schedule::Push) {
            return Err(Error::Config {
                file: PathBuf::from("--store"),
                line: None,
                message: format!(
                    "source {:?} is followed by push, which keeps its copies in a directory: use a \
                     directory store, or an interval schedule with an s3:// store",
                    s.name
                ),
            });
        }
        S3Config::parse(opts.object_store.as_deref().unwrap_or_default())?;
    }
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
            claiming: tokio::sync::watch::Sender::new(crate::shared::Claiming::Starting),
            own: Arc::default(),
            status: Status::default(),
            gates: RwLock::new(Arc::new(Gates::new(&config.limits))),
            limits: RwLock::new(config.limits.clone()),
            sources: RwLock::new(Vec::new()),
            republishes: Arc::new(Semaphore::new(
                std::thread::available_parallelism().map_or(1, usize::from),
            )),
            opts,
        });
        let claimer = matches!(shared.opts.state, StateChoice::Postgres(_)).then(|| {
            let cancel = CancellationToken::new();
            let h = tokio::spawn(crate::work::claimer(shared.clone(), cancel.clone()));
            (cancel, h)
        });
        let a = Aggregator {
            shared,
            tasks: Mutex::new(HashMap::new()),
            claimer: Mutex::new(claimer),
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

    /// What the followers share (the archives of [`crate::memento`] read through it).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The versions of `uri` the state of the Source `name` keeps (`versions = true`), up to
    /// `limit` after version `after`, recorded under `key` (by default its row's; see
    /// [`crate::history`]); `None` for a Source not followed, without a state, or without a
    /// row of `uri` when no key is given. Blocks: call it where blocking is allowed.
    pub fn versions(
        &self,
        name: &str,
        uri: &str,
        key: Option<&str>,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Option<crate::history::Versions>> {
        if !self.shared.sources().iter().any(|s| s.name == name) {
            return Ok(None);
        }
        crate::history::versions(&self.shared, name, uri, key, after, limit)
            .map_err(|e| Error::Store(Box::new(e)))
    }

    /// Where the copies of the Source `name` are.
    pub fn copies(&self, name: &str) -> Result<crate::republish::Copies> {
        self.shared.copies(name)
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
        config.sources.clone_into(
            &mut self
                .shared
                .sources
                .write()
                .unwrap_or_else(|p| p.into_inner()),
        );
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
            // A new Source's first sync takes its place in the line here, in the
            // configuration's order (crate::gate); a changed one takes its own once the old
            // follower has ended (it would hold a slot while waiting for it otherwise).
            let first = (previous.is_none() && spec.schedule != Schedule::Push)
                .then(|| self.shared.line_up(&spec.url));
            let handle = tokio::spawn(async move {
                // One follower per Source at a time: a changed one waits for the old to end.
                if let Some(p) = previous {
                    let _ = p.await;
                }
                supervise(s, sh, c, first).await;
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
        let claimer = self
            .claimer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((c, _)) = &claimer {
            c.cancel();
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
        // Its fetches in flight end (their claims released or completed), or are stopped.
        if let Some((_, mut h)) = claimer {
            if tokio::time::timeout_at(deadline, &mut h).await.is_err() {
                h.abort();
                let _ = h.await;
            }
        }
    }
}
