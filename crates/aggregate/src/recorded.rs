//! What a Source's state records (its copies and their bytes), for its status: read when its
//! follower starts (a restarted service shows what is on disk before any sync) and after each
//! sync, never summed from this process's reports.
//!
//! Each Source has a state of its own (a SQLite file, or a PostgreSQL schema), so the totals
//! of that state ([`Records::recorded_totals`]) are the Source's, whatever key its rows are
//! recorded under.

use std::sync::Arc;

use resourcesync_store::{MAX_VERSIONS_PAGE, PgState, Records, SqliteState};
use tokio::sync::{Semaphore, watch};

use crate::config::SourceSpec;
use crate::shared::{Shared, StateChoice, schema_of};

/// States read at once when followers start: 1,800 Sources do not open 1,800 databases (or
/// PostgreSQL connections) together.
static LOADS: Semaphore = Semaphore::const_new(2);

/// Rows and bytes recorded in `state`, read on a blocking thread; `None` if that fails (the
/// status keeps what it had).
pub(crate) async fn totals(state: Arc<dyn Records>) -> Option<(u64, u64)> {
    tokio::task::spawn_blocking(move || state.recorded_totals())
        .await
        .ok()
        .and_then(std::result::Result::ok)
}

/// The versions `state` keeps of the Source `key`, and the sum of their lengths: read a page
/// at a time on a blocking thread (memory does not grow with them; the time does, once per
/// sync of a Source that keeps versions); `None` if that fails.
pub(crate) async fn versions(state: Arc<dyn Records>, key: String) -> Option<(u64, u64)> {
    tokio::task::spawn_blocking(move || {
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut after: Option<(String, u64)> = None;
        loop {
            let page = state.versions_page(
                &key,
                after.as_ref().map(|(u, s)| (u.as_str(), *s)),
                MAX_VERSIONS_PAGE,
            )?;
            for v in &page {
                n += 1;
                bytes = bytes.saturating_add(v.length);
            }
            match page.last() {
                Some(v) if page.len() == MAX_VERSIONS_PAGE => after = Some((v.uri.clone(), v.seq)),
                _ => return Ok::<_, resourcesync_store::Error>((n, bytes)),
            }
        }
    })
    .await
    .ok()
    .and_then(std::result::Result::ok)
}

/// Rows and bytes the state of `spec` records, if it has one (none before its first sync).
fn read(spec: &SourceSpec, shared: &Shared) -> Option<(u64, u64)> {
    let r = match (&shared.opts.state, shared.sqlite_state(&spec.name)) {
        // Never created here either: a schema not made yet (or not migrated) is shown by the
        // Source's next sync.
        (StateChoice::Postgres(url), _) => {
            match PgState::connect_existing(url, &schema_of(&spec.name)) {
                Ok(Some(s)) => s.recorded_totals(),
                Ok(None) => return None,
                Err(e) => Err(e),
            }
        }
        // Never created here: a Source not synced yet has no copies.
        (_, Some(path)) if path.is_file() => {
            // Read only: a count never holds the state past its read, nor creates or migrates
            // it (a sync that has just created the file would find it taken).
            match SqliteState::open_read_only_waiting(&path, crate::shared::STATE_WAIT) {
                Ok(Some(s)) => s.recorded_totals(),
                Ok(None) => return None,
                Err(e) => Err(e),
            }
        }
        _ => return None,
    };
    match r {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::warn!(
                source = %spec.name,
                "reading what its state records, to show it: {e} (its next sync shows it)"
            );
            None
        }
    }
}

/// Reads what the state of `spec` records, in a task of its own (its first sync need not
/// wait), into the status unless a sync got there first.
pub(crate) fn load(spec: &SourceSpec, shared: &Arc<Shared>) {
    let (spec, shared) = (spec.clone(), shared.clone());
    tokio::spawn(async move {
        // Never closed.
        let Ok(_permit) = LOADS.acquire().await else {
            return;
        };
        let sh = shared.clone();
        let name = spec.name.clone();
        let r = tokio::task::spawn_blocking(move || read(&spec, &sh))
            .await
            .ok()
            .flatten();
        if let Some((n, b)) = r {
            shared.status.recorded_at_start(&name, n, b);
        }
    });
}

/// A task that reads what the state of `spec` (a push Source: SQLite) records each time it is
/// signalled, into the status; signals that come meanwhile coalesce into one read.
pub(crate) fn counter(
    spec: &SourceSpec,
    shared: &Arc<Shared>,
) -> (watch::Sender<()>, tokio::task::JoinHandle<()>) {
    let (tx, mut rx) = watch::channel(());
    let (spec, shared) = (spec.clone(), shared.clone());
    let task = tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            rx.borrow_and_update();
            let (s, sh) = (spec.clone(), shared.clone());
            let r = tokio::task::spawn_blocking(move || read(&s, &sh))
                .await
                .ok()
                .flatten();
            if let Some((n, b)) = r {
                shared.status.recorded(&spec.name, n, b);
            }
        }
    });
    (tx, task)
}
