//! Repair: the copies on disk checked against what the state records, as `rsync` checks a
//! destination, so that a copy deleted, appended to or edited in place is fetched again by the
//! next `sync` instead of being taken for current until an `audit`.
//!
//! A run checks when a check is due (`crate::sync::check_due`: the last complete check the
//! state records is older than `SyncOptions::check_every`, a day by default, or none is; or
//! `check_now`); between checks a run reads only what changed, and a copy damaged on disk is
//! found by the next check (or `audit`). The time of a check is recorded with the cursor only
//! once it completed: every copy checked and every damaged one fetched again.
//!
//! Every copy the state records for the Source (not those kept after the Source deleted them)
//! is checked, page by page in URI order, in bounded memory:
//!
//! - **quick** (a check): it must be there, a regular file, of the recorded length, with the
//!   modification time the sync gave it (the Source's time: `crate::fetch::mtime`). A copy whose time
//!   differs but whose length is right is hashed: the digest recorded decides (same digest: only
//!   its time is set again; copies written by versions that did not set times are so adopted
//!   once, by one read each).
//! - **checksum** (`sync --checksum`): every copy is also hashed, so that an edit that kept the
//!   length and the time is found.
//!
//! A damaged copy is fetched again at the version the state records (verified against the
//! recorded length and digests), through the same path as any download; the run reports how
//! many were repaired.
//!
//! The check of every copy is proportional to the copies, not to the changes: on an
//! incremental of 100 changes to 10,000 copies it was most of the run's local time.
//! So a run starts it as a [`Scan`] beside the run proper, on a blocking thread, while the
//! changes are read and fetched (on a wide-area link mostly waiting): the scan writes nothing
//! and only notes the URIs of the copies that look damaged, or whose time differs (their
//! digest is not read then). Once the run proper is done, each of those few is checked again
//! as above against its row as it is then (a copy the run replaced meanwhile is what its new
//! row says), which sets times and decides what is fetched again. A scan that notes more than
//! [`MAX_SUSPECTS`] gives up, and every copy is checked after the run, as without a scan.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use resourcesync_store::{RelPath, ResourceRecord};

use crate::error::Result;
use crate::fetch::ctx::Ctx;
use crate::fetch::mtime::copy_time;
use crate::march::Kind;
use crate::options::CheckCopies;
use crate::plan::staging::StagedItem;

/// Rows checked per page (one blocking task each).
const PAGE: usize = 1000;
/// Most URIs a [`Scan`] notes before it gives up (a bound on its memory: beyond, the copies
/// are all checked after the run).
pub(crate) const MAX_SUSPECTS: usize = 10_000;

/// The copies found damaged in one page of rows: their verdicts ([`Kind::Damaged`], why), with
/// what is fetched again (the version the row records).
pub(crate) fn check_page(
    ctx: &Ctx,
    rows: &[ResourceRecord],
    how: CheckCopies,
) -> Vec<(StagedItem, Kind)> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| !r.gone) {
        let Ok(rel) = RelPath::parse(&r.path) else {
            continue;
        };
        if let Some(why) = damage(ctx, r, &rel, how, false) {
            out.push((
                StagedItem {
                    uri: r.uri.clone(),
                    length: r.length,
                    hashes: r.hashes.clone(),
                    lastmod: r.lastmod,
                    path: Some(r.path.clone()),
                    ..StagedItem::default()
                },
                Kind::Damaged(why),
            ));
        }
    }
    out
}

/// Why the copy of `r` is not what the state records, if it is not. With `scan`, nothing is
/// written and a copy whose time differs is answered at once, its digest not read (see
/// [`Scan`]).
fn damage(
    ctx: &Ctx,
    r: &ResourceRecord,
    rel: &RelPath,
    how: CheckCopies,
    scan: bool,
) -> Option<String> {
    let m = match ctx.ports.store.head(rel) {
        Ok(Some(m)) if m.regular => m,
        Ok(_) => return Some("missing".into()),
        Err(e) => return Some(e.to_string()),
    };
    if let Some(l) = r.length.filter(|l| *l != m.length) {
        return Some(format!("{} bytes, not the {l} recorded", m.length));
    }
    let time = copy_time(r.lastmod.as_ref(), r.last_modified.as_deref());
    let time_differs = time.is_some() && m.modified != time;
    if !(time_differs || how == CheckCopies::Checksum) {
        return None;
    }
    if scan && time_differs {
        return Some("modification time differs".into());
    }
    let algs = r.hashes.known_algs();
    if algs.is_empty() {
        // Nothing to compare with: the length is all the state knows.
        return None;
    }
    match ctx.ports.store.hash(rel, &algs) {
        Ok((len, _)) if r.length.is_some_and(|l| l != len) => {
            return Some("length changed while it was read".into());
        }
        Ok((_, hashes)) if r.hashes.agrees_with(&hashes) != Some(true) => {
            return Some("content differs from the recorded digest".into());
        }
        Ok(_) => {}
        Err(e) => return Some(e.to_string()),
    }
    if let Some(t) = time.filter(|_| time_differs) {
        // The content is the one recorded: only its time is set again.
        if let Err(e) = ctx.ports.store.set_modified(rel, t) {
            tracing::warn!("{rel}: setting its modification time: {e}");
        }
    }
    None
}

/// The damaged copies of the next page of the Source's rows after `after` (URI order; checked
/// on the blocking pool), moving `after` on; `None` past the last page.
pub(crate) async fn next_damaged(
    ctx: &Arc<Ctx>,
    how: CheckCopies,
    after: &mut Option<String>,
) -> Result<Option<Vec<(StagedItem, Kind)>>> {
    if how == CheckCopies::Off {
        return Ok(None);
    }
    let page = ctx
        .ports
        .state
        .resources_page(&ctx.key, after.as_deref(), PAGE)?;
    let Some(last) = page.last() else {
        return Ok(None);
    };
    *after = Some(last.uri.clone());
    let c = ctx.clone();
    Ok(Some(
        tokio::task::spawn_blocking(move || check_page(&c, &page, how)).await?,
    ))
}

/// The check of every copy made beside the run proper (see the module documentation): started
/// by [`Scan::start`], its notes taken by [`Scan::suspects`]; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Scan {
    ctx: Arc<Ctx>,
    task: Option<tokio::task::JoinHandle<Result<Option<Vec<String>>>>>,
    stop: Arc<AtomicBool>,
}

impl Scan {
    /// Starts the scan of the Source's copies on a blocking thread.
    pub(crate) fn start(ctx: &Arc<Ctx>, how: CheckCopies) -> Scan {
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (ctx.clone(), stop.clone());
        let task = tokio::task::spawn_blocking(move || scan(&c, how, &s));
        Scan {
            ctx: ctx.clone(),
            task: Some(task),
            stop,
        }
    }

    /// The rows of the copies the scan noted, read again now; `None` when it gave up (or
    /// failed): then every copy is to be checked.
    pub(crate) async fn suspects(mut self) -> Result<Option<Vec<ResourceRecord>>> {
        let Some(task) = self.task.take() else {
            return Ok(None);
        };
        let uris = match task.await? {
            Ok(Some(u)) => u,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::info!("checking the copies beside the run: {e}: checked after it");
                return Ok(None);
            }
        };
        let mut rows = Vec::with_capacity(uris.len());
        for u in uris {
            // Deleted by the run, kept after the Source deleted it, or now another Source's:
            // not a copy to check.
            if let Some(r) = self.ctx.ports.state.resource(&u)? {
                if r.source == self.ctx.key && !r.gone {
                    rows.push(r);
                }
            }
        }
        Ok(Some(rows))
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The scan proper: the URIs of the copies that look damaged, `None` past [`MAX_SUSPECTS`]
/// or when stopped.
fn scan(ctx: &Ctx, how: CheckCopies, stop: &AtomicBool) -> Result<Option<Vec<String>>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let page = ctx
            .ports
            .state
            .resources_page(&ctx.key, after.as_deref(), PAGE)?;
        let Some(last) = page.last() else {
            return Ok(Some(out));
        };
        after = Some(last.uri.clone());
        for r in page.iter().filter(|r| !r.gone) {
            let Ok(rel) = RelPath::parse(&r.path) else {
                continue;
            };
            if damage(ctx, r, &rel, how, true).is_some() {
                if out.len() >= MAX_SUSPECTS {
                    return Ok(None);
                }
                out.push(r.uri.clone());
            }
        }
    }
}
