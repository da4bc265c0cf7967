//! Live change detection for a served Source: a file-system watcher on the directory, debounced,
//! plus a periodic full rescan as a safety net (watchers drop events: queue overflows, network
//! file systems, too many directories for the kernel's watch limit).
//!
//! Every batch is one [`Source::scan`] followed by a publish, run on the blocking thread pool and
//! serialized by the Source's mutex. Change Lists (Z39.99-2014 §12.1) and the Capability List
//! (§9) are republished after every batch that changed something, so a change is listed in the
//! open Change List shortly after the write (debounce plus scan time). The Resource List (§10)
//! costs a walk over every resource; it is regenerated at startup and then at most once per
//! [`WatchOptions::resourcelist_interval`]: meanwhile the Capability List keeps pointing at the
//! newest *published* Resource List, which is still a complete inventory as of its `at`, and the
//! Change Lists carry everything since.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};
use crate::inventory::own::OwnPaths;
use crate::publish::PublishReport;
use crate::scan::ScanReport;
use crate::serve::served::ServedIndex;
use crate::source::Source;

/// How a served Source notices changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    /// Quiet time after the last file-system event before a batch runs (default 200 ms).
    pub debounce: Duration,
    /// Longest wait from the first event of a batch to its scan, so that continuous writes do
    /// not postpone publishing forever (default 1 s).
    pub max_delay: Duration,
    /// Full rescan interval, whatever the watcher reports (default 60 s).
    pub rescan_interval: Duration,
    /// Shortest interval between two regenerations of the Resource List (default 60 s).
    pub resourcelist_interval: Duration,
    /// Whether to use a file-system watcher at all (default true); without it, changes are
    /// found by the periodic rescan only.
    pub use_watcher: bool,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            debounce: Duration::from_millis(200),
            max_delay: Duration::from_secs(1),
            rescan_interval: Duration::from_secs(60),
            resourcelist_interval: Duration::from_secs(60),
            use_watcher: true,
        }
    }
}

/// What one batch did.
#[derive(Debug, Clone, Default)]
pub struct BatchReport {
    /// The scan.
    pub scan: ScanReport,
    /// The publish, when anything was published.
    pub publish: Option<PublishReport>,
    /// Whether the Resource List was (re)considered, i.e. a full publish ran.
    pub full: bool,
}

#[derive(Debug, Default)]
struct Schedule {
    /// When the last full publish ran.
    last_full: Option<Instant>,
    /// Whether a snapshot newer than the published Resource List exists.
    deferred: bool,
}

/// Scans and publishes a shared [`Source`], one batch at a time.
#[derive(Debug, Clone)]
pub struct Publisher {
    source: Arc<Mutex<Source>>,
    schedule: Arc<Mutex<Schedule>>,
    resourcelist_interval: Duration,
    /// What the server answers requests from: lookups in the state, their cache emptied
    /// after every batch that changed the recorded resources.
    served: Arc<ServedIndex>,
    notifier: Option<Arc<crate::notify::Notifier>>,
}

fn poisoned<T>(_: T) -> Error {
    Error::Task("a scan panicked while holding the Source".into())
}

impl Publisher {
    /// A publisher of `source`, regenerating its Resource List at most once per
    /// `resourcelist_interval`.
    pub fn new(source: Source, resourcelist_interval: Duration) -> Self {
        let served = Arc::new(ServedIndex::new(source.state_path()));
        Publisher {
            source: Arc::new(Mutex::new(source)),
            schedule: Arc::new(Mutex::new(Schedule::default())),
            resourcelist_interval,
            served,
            notifier: None,
        }
    }

    /// The recorded resources as the server serves them.
    pub(crate) fn served(&self) -> &ServedIndex {
        &self.served
    }

    /// Sends Change and Framework Notifications after every batch (see [`crate::notify`]).
    pub fn with_notifier(mut self, n: crate::notify::Notifier) -> Self {
        self.notifier = Some(Arc::new(n));
        self
    }

    /// The notifier, when notifications are sent.
    pub fn notifier(&self) -> Option<&crate::notify::Notifier> {
        self.notifier.as_deref()
    }

    /// Locks the Source (blocking while a batch runs).
    pub fn lock(&self) -> Result<MutexGuard<'_, Source>> {
        self.source.lock().map_err(poisoned)
    }

    /// When the deferred Resource List is due, if one is deferred.
    pub fn resource_list_due(&self) -> Option<Instant> {
        let s = self.schedule.lock().ok()?;
        match (s.deferred, s.last_full) {
            (true, Some(t)) => Some(t + self.resourcelist_interval),
            (true, None) => Some(Instant::now()),
            _ => None,
        }
    }

    /// Runs one batch on the current thread: scan, then publish what changed. `force_full`
    /// publishes every document, the Resource List included.
    pub fn batch_blocking(&self, force_full: bool) -> Result<BatchReport> {
        let mut src = self.lock()?;
        let periods_before = src.state().periods()?;
        let scan = src.scan()?;
        // Re-hashed files keep their content but not their recorded time: forget those too.
        // (The scan has committed: lookups from now on read its snapshot.)
        if scan.changed() || scan.hashed > 0 || scan.new_snapshot() {
            self.served.invalidate();
        }
        // A period closed by age or size changes the Change Lists even without new changes.
        let rotated = src.state().periods()? != periods_before;
        let now = Instant::now();
        let mut sched = self.schedule.lock().map_err(poisoned)?;
        let interval_over = sched
            .last_full
            .is_none_or(|t| now.duration_since(t) >= self.resourcelist_interval);
        let full = force_full || (interval_over && (sched.deferred || scan.new_snapshot()));
        let publish = if full {
            let r = src.publish()?;
            sched.last_full = Some(now);
            sched.deferred = false;
            Some(r)
        } else if scan.new_snapshot() || rotated {
            let r = src.publish_changes()?;
            // The scan recorded a new snapshot whose Resource List is not written yet.
            sched.deferred |= scan.new_snapshot();
            Some(r)
        } else {
            None
        };
        Ok(BatchReport {
            scan,
            publish,
            full,
        })
    }

    /// Runs one batch on the blocking thread pool (see [`Publisher::batch_blocking`]), then
    /// sends its notifications, if any (in order: batches are sequential).
    pub async fn batch(&self, force_full: bool) -> Result<BatchReport> {
        let me = self.clone();
        let report = tokio::task::spawn_blocking(move || me.batch_blocking(force_full))
            .await
            .map_err(|e| Error::Task(format!("scan task: {e}")))??;
        if let Some(n) = &self.notifier {
            n.after_batch(&self.source, report.publish.as_ref()).await;
        }
        Ok(report)
    }
}

/// Which file-system events can change the inventory: not reads (`Access`, which our own
/// hashing and serving cause), not our own writes (documents, state), not dotfiles unless they
/// are published.
#[derive(Debug, Clone)]
struct EventFilter {
    root: PathBuf,
    own: OwnPaths,
    include_hidden: bool,
}

impl EventFilter {
    /// The filter for `src`'s watched directory, canonical; `None` for an inventory with no
    /// directory to watch ([`crate::inventory::Inventory::watch_root`]).
    fn of(src: &Source) -> Result<Option<Self>> {
        let Some(root) = src.inventory().watch_root() else {
            return Ok(None);
        };
        let root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        Ok(Some(EventFilter {
            own: src.own_paths().clone(),
            root,
            include_hidden: src.config().include_hidden,
        }))
    }

    fn relevant(&self, ev: &notify::Event) -> bool {
        if matches!(ev.kind, EventKind::Access(_)) {
            return false;
        }
        if ev.need_rescan() || ev.paths.is_empty() {
            return true;
        }
        ev.paths.iter().any(|p| self.path_relevant(p))
    }

    fn path_relevant(&self, p: &Path) -> bool {
        if self.own.contains(p) {
            return false;
        }
        let Ok(rel) = p.strip_prefix(&self.root) else {
            return false;
        };
        self.include_hidden
            || !rel
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn run_batch(publisher: &Publisher, why: &str) {
    match publisher.batch(false).await {
        Ok(r) => {
            for s in &r.scan.skipped {
                tracing::warn!(path = %s.path.display(), reason = %s.reason, "skipped");
            }
            if r.scan.changed() {
                tracing::info!(
                    created = r.scan.created,
                    updated = r.scan.updated,
                    deleted = r.scan.deleted,
                    resources = r.scan.resources,
                    resource_list = r.full,
                    "{why}: changes published"
                );
            } else {
                tracing::debug!("{why}: no change");
            }
        }
        Err(e) => tracing::warn!("{why}: scan or publish failed: {e}"),
    }
}

/// Starts watching: returns the future that runs batches until `cancel` is cancelled. The
/// watcher is set up before this returns, so writes made after it returns are seen. When the
/// watcher cannot be set up (e.g. the kernel's watch limit), a warning is logged and changes are
/// found by the periodic rescan only.
pub fn watch(
    publisher: Publisher,
    opts: WatchOptions,
    cancel: CancellationToken,
) -> Result<impl Future<Output = ()> + Send + 'static> {
    // An inventory with no directory to watch has its changes found by the periodic rescan
    // (through its change feed, when it has one).
    let filter = EventFilter::of(&*publisher.lock()?)?.filter(|_| opts.use_watcher);
    // A one-slot channel coalesces bursts of events into one wake-up.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
    let watcher = if let Some(filter) = filter {
        let root = filter.root.clone();
        let handler = move |res: notify::Result<notify::Event>| match res {
            Ok(ev) => {
                if filter.relevant(&ev) {
                    let _ = tx.try_send(());
                }
            }
            Err(e) => {
                tracing::warn!("file watcher: {e}; rescanning");
                let _ = tx.try_send(());
            }
        };
        match notify::recommended_watcher(handler) {
            Ok(mut w) => match w.watch(&root, RecursiveMode::Recursive) {
                Ok(()) => Some(w),
                Err(e) => {
                    tracing::warn!(
                        "cannot watch {}: {e}; relying on the periodic rescan",
                        root.display()
                    );
                    None
                }
            },
            Err(e) => {
                tracing::warn!("no file watcher: {e}; relying on the periodic rescan");
                None
            }
        }
    } else {
        None
    };
    Ok(async move {
        // Kept alive for as long as the loop runs.
        let _watcher = watcher;
        let rescan = opts.rescan_interval.max(Duration::from_millis(10));
        let mut tick = tokio::time::interval_at(Instant::now() + rescan, rescan);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut first: Option<Instant> = None;
        let mut last: Option<Instant> = None;
        // After a failed deferred publish, wait before trying again (no busy loop).
        let mut retry_at = Instant::now();
        loop {
            let debounce_at = match (first, last) {
                (Some(f), Some(l)) => Some((l + opts.debounce).min(f + opts.max_delay)),
                _ => None,
            };
            let rl_at = publisher.resource_list_due().map(|t| t.max(retry_at));
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                Some(()) = rx.recv() => {
                    let now = Instant::now();
                    first.get_or_insert(now);
                    last = Some(now);
                }
                () = sleep_until_opt(debounce_at) => {
                    first = None;
                    last = None;
                    run_batch(&publisher, "change").await;
                }
                _ = tick.tick() => {
                    first = None;
                    last = None;
                    run_batch(&publisher, "periodic rescan").await;
                }
                () = sleep_until_opt(rl_at) => {
                    run_batch(&publisher, "deferred Resource List").await;
                    retry_at = Instant::now() + opts.debounce.max(Duration::from_secs(1));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SourceConfig;

    fn modified(p: PathBuf) -> notify::Event {
        notify::Event::new(EventKind::Modify(notify::event::ModifyKind::Any)).add_path(p)
    }

    /// What the Source writes is not a change, wherever the state is: with `--state
    /// DIR/state.sqlite`, the databases and their companions sit beside the resources (an idle
    /// Source whose hub writes its database after every notification would otherwise notify
    /// again and again).
    #[test]
    fn the_sources_own_writes_are_not_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let mut cfg = SourceConfig::new(&root, "http://127.0.0.1:1/");
        cfg.state = Some(root.join("state.sqlite"));
        crate::serve::prepare_config(&mut cfg);
        let src = Source::open(cfg).expect("open");
        let filter = EventFilter::of(&src).expect("filter").expect("a directory");
        for own in [
            "state.sqlite",
            "state.sqlite-wal",
            "state.sqlite-shm",
            "state.sqlite-journal",
            "hub.sqlite",
            "hub.sqlite-wal",
            "hub.sqlite-shm",
            "hub.sqlite-journal",
            "state-www/resourcesync/changelists/00001.xml",
            "state-www/resourcesync/.tmp-abc123",
        ] {
            assert!(!filter.relevant(&modified(root.join(own))), "{own}");
        }
        for theirs in [
            "a.txt",
            "sub/hub.sqlite",
            "state.sqlite.bak",
            "hub.sqlite.txt",
        ] {
            assert!(filter.relevant(&modified(root.join(theirs))), "{theirs}");
        }
    }
}
