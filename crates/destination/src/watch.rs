//! Watch: keep a destination following a Source (`sync --watch`).
//!
//! The first round is an ordinary [`sync()`](crate::sync()): a baseline, or an incremental run
//! when the state has a cursor. Then, every [`WatchOptions::interval`], a round polls the Source's
//! Change Lists and applies what is new through the same incremental path (Z39.99-2014 §12.1,
//! §12.2: the Change List Index is read, closed lists ending at or before the cursor are skipped,
//! the open list is read from the cursor on). This is the pull model of §5.2 ("Destination
//! periodically polls the Change List"); Change Notification pushes over WebSub are another
//! matter.
//!
//! After the first round, rounds start at the Capability List found then (one request instead of
//! the whole discovery) and keep the base URL found then, so that every round maps resources to
//! the same paths; a round that fails (the Source is down) is reported, and the next one starts
//! from the URL given again.
//!
//! Stopping: [`StopHandle::stop`] ends the watch after the round in progress (or at once when
//! between rounds); [`StopHandle::stop_now`] abandons the round in progress. Either way the
//! state stays consistent: a copy is recorded only after its file is in place, and the cursor moves
//! only when a round completes, so the next run applies whatever an abandoned round did not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::watch as channel;

use resourcesync_model::{Capability, Entry, W3cDateTime};

use crate::discover::discover;
use crate::discover::docs::{DocFetcher, ListSink, walk};
use crate::error::{Error, Result};
use crate::http::{Http, HttpOptions};
use crate::options::{DEFAULT_MAX_DOCUMENT_BYTES, SyncOptions};
use crate::report::{Observer, SyncReport, push_capped};
use crate::sync::sync;

/// Default time between two rounds: 10 seconds.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// How to watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchOptions {
    /// Time from the end of a round to the start of the next one.
    pub interval: Duration,
    /// Stop after this many rounds (`None`: until stopped).
    pub max_rounds: Option<u64>,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            interval: DEFAULT_INTERVAL,
            max_rounds: None,
        }
    }
}

const RUNNING: u8 = 0;
const STOP: u8 = 1;
const STOP_NOW: u8 = 2;

/// Stops a [`watch`] from another task (a signal handler, a test). Clones share the same state.
#[derive(Debug, Clone)]
pub struct StopHandle {
    tx: Arc<channel::Sender<u8>>,
}

impl Default for StopHandle {
    fn default() -> Self {
        StopHandle::new()
    }
}

impl StopHandle {
    /// A handle that has not been used.
    pub fn new() -> Self {
        StopHandle {
            tx: Arc::new(channel::channel(RUNNING).0),
        }
    }

    fn raise(&self, level: u8) {
        self.tx.send_if_modified(|v| {
            let raise = *v < level;
            if raise {
                *v = level;
            }
            raise
        });
    }

    /// Ends the watch after the round in progress.
    pub fn stop(&self) {
        self.raise(STOP);
    }

    /// Ends the watch now, abandoning the round in progress (its completed work is kept).
    pub fn stop_now(&self) {
        self.raise(STOP_NOW);
    }

    /// Whether [`stop`](Self::stop) or [`stop_now`](Self::stop_now) was called.
    pub fn is_stopped(&self) -> bool {
        *self.tx.borrow() != RUNNING
    }

    /// Waits until [`stop`](Self::stop) (or [`stop_now`](Self::stop_now)) is called.
    pub(crate) async fn reached_stop(&self) {
        self.reached(STOP).await
    }

    /// Waits until [`stop_now`](Self::stop_now) is called.
    pub(crate) async fn reached_now(&self) {
        self.reached(STOP_NOW).await
    }

    /// Waits until the level is reached (never returns otherwise).
    async fn reached(&self, level: u8) {
        let mut rx = self.tx.subscribe();
        if rx.wait_for(|v| *v >= level).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// One round of a watch.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Its number, from 1.
    pub round: u64,
    /// When it started.
    pub started: W3cDateTime,
    /// What the sync did, when it completed.
    pub report: Option<SyncReport>,
    /// Why it failed, when it did (the watch goes on).
    pub error: Option<String>,
}

impl Round {
    /// Whether anything was created, updated, deleted, kept after a delete, or failed.
    pub fn changed(&self) -> bool {
        self.error.is_some()
            || self
                .report
                .as_ref()
                .is_some_and(|r| r.created + r.updated + r.deleted + r.kept + r.failed > 0)
    }
}

/// What a watch did, over all rounds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WatchReport {
    /// Rounds that completed.
    pub rounds: u64,
    /// Rounds that failed.
    pub failed_rounds: u64,
    /// Copies created.
    pub created: u64,
    /// Copies updated.
    pub updated: u64,
    /// Copies removed.
    pub deleted: u64,
    /// Deleted at the Source, copy kept.
    pub kept: u64,
    /// Resources that failed (counted once per round).
    pub failed: u64,
    /// Bytes received for resources.
    pub bytes: u64,
    /// A round was abandoned by [`StopHandle::stop_now`].
    pub interrupted: bool,
    /// Seconds taken.
    pub seconds: f64,
    /// The cursor after the last completed round.
    pub cursor: Option<String>,
}

/// Syncs, then keeps following the Source until stopped (see the module docs). `on_round` is
/// called after each round. An error of the first round is returned (nothing was synced yet: the
/// options are likely wrong); later failures are reported in their [`Round`].
pub async fn watch<F>(
    opts: &SyncOptions,
    wopts: &WatchOptions,
    obs: Arc<dyn Observer>,
    stop: &StopHandle,
    mut on_round: F,
) -> Result<WatchReport>
where
    F: FnMut(&Round),
{
    if opts.dry_run {
        return Err(Error::Config(
            "a dry run moves no cursor, so watching it would repeat the same plan: drop --dry-run or --watch".into(),
        ));
    }
    let started = Instant::now();
    let mut total = WatchReport::default();
    let mut o = opts.clone();
    let mut n = 0u64;
    loop {
        if stop.is_stopped() || wopts.max_rounds.is_some_and(|m| n >= m) {
            break;
        }
        n += 1;
        let round_start = W3cDateTime::now(false);
        let outcome = tokio::select! {
            r = crate::task::on_worker({
                let (o, obs) = (o.clone(), obs.clone());
                async move { sync(&o, obs).await }
            }) => Some(r),
            () = stop.reached(STOP_NOW) => None,
        };
        let round = match outcome {
            None => {
                total.interrupted = true;
                break;
            }
            Some(Ok(report)) => {
                // A check asked for is made by the first round; later rounds check the copies
                // when the schedule says (SyncOptions::check_every).
                o.check_now = false;
                total.rounds += 1;
                total.created += report.created;
                total.updated += report.updated;
                total.deleted += report.deleted;
                total.kept += report.kept;
                total.failed += report.failed;
                total.bytes += report.bytes;
                total.cursor.clone_from(&report.cursor);
                // Later rounds: straight to the Capability List (§6.2), same mapping.
                if let Some(cl) = &report.source.capability_list {
                    o.url.clone_from(cl);
                }
                if o.base_url.is_none() {
                    o.base_url = Some(report.base_url.clone());
                }
                Round {
                    round: n,
                    started: round_start,
                    report: Some(report),
                    error: None,
                }
            }
            Some(Err(e)) if total.rounds == 0 => return Err(e),
            Some(Err(e)) => {
                total.failed_rounds += 1;
                o.url.clone_from(&opts.url);
                Round {
                    round: n,
                    started: round_start,
                    report: None,
                    error: Some(e.to_string()),
                }
            }
        };
        on_round(&round);
        if wopts.max_rounds.is_some_and(|m| n >= m) {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(wopts.interval) => {}
            () = stop.reached(STOP) => break,
        }
    }
    total.seconds = started.elapsed().as_secs_f64();
    Ok(total)
}

/// A change a Source's Change List records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeSeen {
    /// The resource.
    pub uri: String,
    /// `created`, `updated`, `deleted` (or another value, as written).
    pub change: String,
    /// When (the 1.1 `datetime`, else `<lastmod>`).
    pub time: Option<W3cDateTime>,
}

struct ChangesAfter {
    since: Option<W3cDateTime>,
    seen: Vec<ChangeSeen>,
}

impl ChangesAfter {
    fn is_new(&self, t: Option<&W3cDateTime>) -> bool {
        match (&self.since, t) {
            (Some(s), Some(t)) => t.cmp_instant(s) == std::cmp::Ordering::Greater,
            _ => true,
        }
    }
}

impl ListSink for ChangesAfter {
    fn want_child(&mut self, e: &Entry) -> bool {
        // §12.2: a closed Change List ending at or before `since` has nothing newer.
        self.is_new(e.md.as_ref().and_then(|m| m.until.as_ref()))
    }

    fn entry(&mut self, e: Entry) -> Result<()> {
        if self.is_new(e.change_time()) {
            let change = e
                .change()
                .map(|c| c.as_str().to_owned())
                .unwrap_or_default();
            let time = e.change_time().copied();
            push_capped(
                &mut self.seen,
                ChangeSeen {
                    uri: e.loc,
                    change,
                    time,
                },
            );
        }
        Ok(())
    }
}

/// The changes the Source's Change Lists record after `since` (all when `None`), in the order
/// listed, at most [`MAX_LISTED`](crate::report::MAX_LISTED): what the next round of a watch would apply. Discovery starts at
/// `url` (§6.3); the Change List Index and its lists are read as an incremental sync reads them
/// (§12.1, §12.2). A Source without a Change List has none.
pub async fn changes_since(
    url: &str,
    http: &HttpOptions,
    since: Option<&W3cDateTime>,
) -> Result<Vec<ChangeSeen>> {
    let http = Arc::new(Http::new(http.clone())?);
    let scratch =
        tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?;
    let f = DocFetcher::new(http, scratch.path(), DEFAULT_MAX_DOCUMENT_BYTES);
    let info = discover(&f, url, None).await?;
    let Some(cl) = info.change_list else {
        return Ok(Vec::new());
    };
    let sink = ChangesAfter {
        since: since.copied(),
        seen: Vec::new(),
    };
    let (sink, _) = walk(&f, &cl, Capability::ChangeList, sink).await?;
    Ok(sink.seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_levels_only_rise() {
        let s = StopHandle::new();
        assert!(!s.is_stopped());
        s.stop_now();
        s.stop();
        assert!(s.is_stopped());
        // Both levels are reached once the higher one was raised.
        s.clone().reached(STOP).await;
        s.reached(STOP_NOW).await;
    }
}
