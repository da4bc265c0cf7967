//! Pushed changes (Change Notification 1.0.1 §3) applied through the same path as an
//! incremental sync ([`Applier`], one [`Session`] per payload).

use std::path::PathBuf;
use std::sync::Arc;

use std::time::Instant;

use resourcesync_model::{Change, Entry, W3cDateTime};
use resourcesync_store::OffWorker;
use resourcesync_store::blocking::call;
use resourcesync_store::{RecordWrites, SourceCursor, Store};

use crate::commit::{Budget, Committer};
use crate::error::Result;
use crate::fetch::ctx::{Ctx, Memo, RunPorts};
use crate::fetch::exec::Exec;
use crate::http::Http;
use crate::mapping::UriMapper;
use crate::options::SyncOptions;
use crate::plan::after;
use crate::plan::staging::StagedItem;
use crate::ports::{OpenState, directory_store, state_opener};
use crate::report::SourceInfo;
use crate::report::{Mode, Observer, SyncReport};

/// Applies pushed changes (Change Notification 1.0.1 §3) through the same path as an
/// incremental sync: each change is fetched (or removed), verified against its published length
/// and digest, renamed into place and only then recorded; a change that fails is kept as
/// pending for the next sync. The HTTP client and the store are kept for the whole push
/// session; the state is opened per payload ([`Applier::session`]), because it is locked by
/// one user at a time and a catch-up [`sync()`] needs it in between.
#[derive(Debug)]
pub(crate) struct Applier {
    http: Arc<Http>,
    store: Arc<dyn Store>,
    open_state: OpenState,
    state_path: PathBuf,
    mapper: UriMapper,
    delete: bool,
    max_resource_bytes: u64,
    obs: Arc<dyn Observer>,
    concurrency: usize,
    info: SourceInfo,
    base: String,
    filter: crate::filter::UriFilter,
    quota: Option<crate::options::Quota>,
    /// Every body kept as a version (`--versions`).
    versions: bool,
}

/// The state opened for one payload.
#[derive(Debug)]
pub(crate) struct Session(Arc<Ctx>);

impl Applier {
    /// An applier for the Source a sync found (`info`, mapped under `base`).
    pub(crate) fn open(
        opts: &SyncOptions,
        obs: Arc<dyn Observer>,
        info: SourceInfo,
        base: String,
    ) -> Result<Self> {
        Ok(Applier {
            http: Arc::new(Http::new(opts.http.clone())?),
            store: directory_store(&opts.dest)?,
            open_state: state_opener(opts.state_path()),
            state_path: opts.state_path(),
            mapper: UriMapper::new(&base)?,
            delete: opts.delete,
            max_resource_bytes: opts.max_resource_bytes,
            obs,
            concurrency: opts.concurrency,
            info,
            base,
            filter: opts.filter.clone(),
            quota: opts.quota.clone(),
            versions: opts.versions,
        })
    }

    /// Opens the state (until the session is dropped).
    pub(crate) fn session(&self) -> Result<Session> {
        let state = OffWorker::records(call(|| self.open_state.open())?);
        Ok(Session(Arc::new(Ctx {
            ports: RunPorts {
                http: self.http.clone(),
                store: OffWorker::store(self.store.clone()),
                committer: Committer::start(
                    self.store.clone(),
                    state.clone(),
                    Budget::of(self.quota.as_ref(), state.as_ref(), &self.info.key())?,
                    self.versions,
                )?,
                state,
                obs: self.obs.clone(),
                downloads: None,
            },
            state_path: self.state_path.clone(),
            mapper: self.mapper.clone(),
            key: self.info.key(),
            delete: self.delete,
            dry_run: false,
            max_resource_bytes: self.max_resource_bytes,
            versions: self.versions,
            filter: self.filter.clone(),
            memo: Memo::default(),
        })))
    }

    /// The cursor of the Source: the time up to which every change is applied.
    pub(crate) fn cursor(&self, s: &Session) -> Result<Option<W3cDateTime>> {
        Ok(s.0.ports.state.cursor(&s.0.key)?.and_then(|c| c.cursor))
    }

    /// Moves the cursor forward to `to` (never back).
    pub(crate) fn advance(&self, s: &Session, to: W3cDateTime) -> Result<Option<W3cDateTime>> {
        let row = s.0.ports.state.cursor(&s.0.key)?;
        let new = match row.as_ref().and_then(|c| c.cursor) {
            Some(c) if !after(&to, &c) => c,
            _ => to,
        };
        let c = SourceCursor {
            source: s.0.key.clone(),
            cursor: Some(new),
            synced_at: Some(W3cDateTime::now(false)),
            // The copies were not checked by this: the last check stands.
            checked_at: row.and_then(|c| c.checked_at),
        };
        s.0.ports.state.set_cursor(&c)?;
        Ok(Some(new))
    }

    /// Applies the changes among `entries` (several changes of one URI collapse to the last,
    /// applied in the order of their last occurrence, as in [`incremental`]).
    pub(crate) async fn apply(&self, s: &Session, entries: Vec<Entry>) -> Result<SyncReport> {
        let started = Instant::now();
        let known = |e: &&Entry| {
            matches!(
                e.change(),
                Some(Change::Created | Change::Updated | Change::Deleted)
            )
        };
        let other = entries.iter().filter(|e| !known(e)).count() as u64;
        let items = resourcesync_diff::last_per_key(
            entries.iter().filter(known).map(StagedItem::from_entry),
            |it| it.uri.clone(),
        );
        let mut exec = Exec::new(s.0.clone(), self.concurrency);
        for item in items {
            exec.submit(crate::march::change_job(item)).await?;
        }
        let tally = exec.finish().await;
        // A change neither applied nor recorded as pending: the caller must not move the cursor.
        s.0.check_state()?;
        let mut warnings = Vec::new();
        if other > 0 {
            warnings.push(format!(
                "{other} change(s) of an unknown kind ignored (Change Notification 1.0.1 §3: created, updated, deleted)"
            ));
        }
        Ok(SyncReport {
            source: self.info.clone(),
            base_url: self.base.clone(),
            mode: Mode::Notification,
            dry_run: false,
            created: tally.created,
            updated: tally.updated,
            deleted: tally.deleted,
            extra_deleted: tally.extra_deleted,
            kept: tally.kept,
            unchanged: tally.unchanged,
            filtered: tally.filtered,
            repaired: tally.repaired,
            failed: tally.failed,
            bytes: tally.bytes,
            packages: 0,
            from_packages: 0,
            patched: tally.patched,
            shared: tally.shared,
            seconds: started.elapsed().as_secs_f64(),
            cursor: None,
            failures: tally.failures,
            kept_uris: tally.kept_uris,
            planned: Vec::new(),
            warnings,
            versions: crate::report::VersionsKept::of(s.0.ports.committer.versions_kept()),
        })
    }
}
