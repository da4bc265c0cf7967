//! Syncing from a Source that offers dumps and no list (Z39.99-2017 §5.2: a Destination may
//! baseline from a Resource Dump alone and follow a Change Dump alone).
//!
//! - **Baseline** (no cursor): every package of the Resource Dump is applied ([`crate::dump`]).
//!   With no Resource List to fetch what a package leaves out, an entry that fails (a refused
//!   `path`, a wrong digest, a zip bomb) is a failure of the run, kept as pending; a package
//!   refused as a whole is a failure too, and the cursor is not set, so that the next run applies
//!   the dump again (copies in place are not extracted again). Once every package is applied,
//!   copies of resources the dump no longer has are deletes (removed with `--delete`), as a
//!   Resource List's baseline diff would find them; the Change Dump is then followed from the
//!   dump's `at` in the same run.
//! - **Incremental** (a cursor): the Change Dump's packages whose period ends after the cursor,
//!   in forward chronological order (§13.1), their entries after the cursor; then the pending
//!   changes of earlier runs that no package dealt with, fetched from their URIs. The cursor
//!   becomes the latest change taken into account; it does not move when a package is refused
//!   (the packages after it wait for it). When the Change Dump's history starts after the
//!   cursor, or there is no Change Dump and the Resource Dump is newer than the cursor, the run
//!   is a baseline diff from the Resource Dump. Without a Change Dump, a Resource Dump no newer
//!   than the cursor leaves only the pending changes to try again.

use std::sync::Arc;

use resourcesync_diff::{Page, pages};
use resourcesync_model::W3cDateTime;

use crate::commit::{Write, not_recorded};
use crate::discover::docs::DocFetcher;
use crate::dump::{DumpLimits, DumpStats, change_dumps, resource_dump};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::fetch::exec::Exec;
use crate::march::{Kind, change_job, job, march};
use crate::plan::after;
use crate::plan::staging::StagedItem;
use crate::report::Mode;
use crate::report::SourceInfo;

/// What a run from dumps did: how it synchronized, the new cursor, and the packages' work.
pub(crate) struct DumpRun {
    pub(crate) mode: Mode,
    pub(crate) cursor: Option<W3cDateTime>,
    pub(crate) stats: DumpStats,
}

/// What the steps of a sync from dumps share: the run's context, the document fetcher, the
/// Source and the limits of its packages.
#[derive(Clone, Copy)]
pub(crate) struct Dumps<'a> {
    pub(crate) ctx: &'a Arc<Ctx>,
    pub(crate) fetcher: &'a DocFetcher,
    pub(crate) info: &'a SourceInfo,
    pub(crate) limits: &'a DumpLimits,
}

/// Runs a sync from dumps alone (see the module docs). `resumed`: the state has a cursor row for
/// this Source (a baseline is then a baseline diff).
pub(crate) async fn sync_from_dumps(
    d: Dumps<'_>,
    exec: &mut Exec,
    cursor: Option<W3cDateTime>,
    resumed: bool,
    w: &mut Vec<String>,
) -> Result<DumpRun> {
    let Dumps {
        ctx, fetcher, info, ..
    } = d;
    if ctx.dry_run {
        return Err(Error::Config(format!(
            "{}: the Source offers dumps and no list, and a dry run fetches no package: run \
             without --dry-run (or `resourcesync explore` to see what it offers)",
            info.capability_list.as_deref().unwrap_or("the Source")
        )));
    }
    let Some(c) = cursor else {
        let rd = need_resource_dump(info)?;
        let mode = if resumed {
            Mode::BaselineDiff
        } else {
            Mode::Baseline
        };
        let (stats, cursor) = baseline(d, exec, rd, w).await?;
        return Ok(DumpRun {
            mode,
            cursor,
            stats,
        });
    };
    if let Some(cd) = &info.change_dump {
        match incremental(d, exec, cd, c, true, w).await {
            Ok((stats, cursor)) => {
                return Ok(DumpRun {
                    mode: Mode::Incremental,
                    cursor: Some(cursor),
                    stats,
                });
            }
            Err(e @ Error::HistoryGap { .. }) => {
                w.push(format!("{e}: baseline diff against the Resource Dump"));
            }
            Err(e) => return Err(e),
        }
    } else {
        // Only a Resource Dump: a snapshot no newer than the cursor has nothing new, but the
        // changes kept as pending are tried again.
        let rd = need_resource_dump(info)?;
        let doc = fetcher.document(rd).await?;
        if doc
            .header
            .md
            .as_ref()
            .and_then(|m| m.at)
            .is_some_and(|at| !after(&at, &c))
        {
            retry_pending(ctx, exec).await?;
            return Ok(DumpRun {
                mode: Mode::Incremental,
                cursor: Some(c),
                stats: DumpStats::default(),
            });
        }
    }
    // No Change Dump to follow, or one whose history starts after the cursor: the Resource Dump
    // again (a newer snapshot, or the same one: copies in place are not extracted again).
    let rd = need_resource_dump(info)?;
    let (stats, at) = baseline(d, exec, rd, w).await?;
    Ok(DumpRun {
        mode: Mode::BaselineDiff,
        cursor: Some(at.filter(|a| after(a, &c)).unwrap_or(c)),
        stats,
    })
}

fn need_resource_dump(info: &SourceInfo) -> Result<&str> {
    info.resource_dump
        .as_deref()
        .ok_or_else(|| Error::BadDocument {
            url: info.capability_list.clone().unwrap_or_default(),
            message:
                "the Source offers no Resource List and no Resource Dump to start a copy from \
                  (Z39.99-2014 §5.2), only a Change Dump: tell the Source's maintainer"
                    .into(),
        })
}

/// Baseline from the Resource Dump, deletes of copies it no longer has, then the Change Dump
/// from its `at`. Returns what the packages did and the new cursor (`None` when a package was
/// refused).
async fn baseline(
    d: Dumps<'_>,
    exec: &mut Exec,
    rd: &str,
    w: &mut Vec<String>,
) -> Result<(DumpStats, Option<W3cDateTime>)> {
    let Dumps {
        ctx,
        fetcher,
        info,
        limits,
    } = d;
    let mut stats = resource_dump(ctx, fetcher, rd, false, limits, w).await?;
    // Z39.99-2014 §11.1: `at` is set once every package is applied.
    let Some(at) = stats.at else {
        return Ok((stats, None));
    };
    let mut cursor = at;
    if let Some(cd) = &info.change_dump {
        match incremental(d, exec, cd, at, false, w).await {
            Ok((more, c)) => {
                add(&mut stats, more);
                cursor = c;
            }
            // The Change Dump starts after the Resource Dump: the changes in between are not
            // known; the next run finds the same gap and applies the next Resource Dump.
            Err(e @ Error::HistoryGap { .. }) => {
                w.push(format!("{e}: the Resource Dump is the baseline"));
            }
            Err(e) => return Err(e),
        }
    }
    // Every package applied: what no package dealt with is not at the Source any more.
    deletes(ctx, exec).await?;
    Ok((stats, Some(cursor)))
}

/// Adds what a Change Dump did after a Resource Dump.
fn add(into: &mut DumpStats, s: DumpStats) {
    into.packages += s.packages;
    into.refused += s.refused;
    into.created += s.created;
    into.updated += s.updated;
    into.deleted += s.deleted;
    into.unchanged += s.unchanged;
    into.failed += s.failed;
    into.run_failed += s.run_failed;
    into.bytes += s.bytes;
    for f in s.failures {
        crate::report::push_capped(&mut into.failures, f);
    }
}

/// The Change Dump's packages after the cursor, then (with `retry`) the pending changes no
/// package dealt with. Returns what the packages did and the new cursor.
async fn incremental(
    d: Dumps<'_>,
    exec: &mut Exec,
    cd: &str,
    cursor: W3cDateTime,
    retry: bool,
    w: &mut Vec<String>,
) -> Result<(DumpStats, W3cDateTime)> {
    let Dumps {
        ctx,
        fetcher,
        limits,
        ..
    } = d;
    let stats = change_dumps(ctx, fetcher, cd, cursor, false, limits, w).await?;
    if retry {
        retry_pending(ctx, exec).await?;
    }
    // A refused package keeps the cursor where it was: the next run applies it, and the ones
    // after it, again (what is in place already is not extracted again).
    let new = match stats.stopped {
        Some(_) => cursor,
        None => stats.last.filter(|l| after(l, &cursor)).unwrap_or(cursor),
    };
    Ok((stats, new))
}

/// Fetches, from their URIs, the changes earlier runs kept as pending that no package dealt with
/// in this run (a package entry that failed is kept as pending for the next run).
async fn retry_pending(ctx: &Arc<Ctx>, exec: &mut Exec) -> Result<()> {
    let mut last: Option<String> = None;
    loop {
        let page = ctx
            .ports
            .state
            .pending_page(&ctx.key, last.as_deref(), 1000)?;
        let Some(l) = page.last() else { break };
        last = Some(l.uri.clone());
        for p in page {
            if ctx.dumped_now(&p.uri) {
                continue;
            }
            ctx.ports.obs.add_total(1);
            let item = StagedItem {
                uri: p.uri,
                change: p.change,
                length: p.length,
                hashes: p.hashes,
                lastmod: p.lastmod,
                duplicates: p.duplicates,
                ..StagedItem::default()
            };
            exec.submit(change_job(item)).await?;
        }
    }
    Ok(())
}

/// After every package of a Resource Dump (and the Change Dump after it) is applied: the copies
/// of resources they do not have (rows of this Source no package dealt with) are deletes,
/// removed with `--delete`, else kept and reported (as a Resource List's baseline diff finds
/// them, Z39.99-2014 §10.1); pending changes of such resources are forgotten.
async fn deletes(ctx: &Arc<Ctx>, exec: &mut Exec) -> Result<()> {
    let mut last: Option<String> = None;
    loop {
        let page = ctx
            .ports
            .state
            .pending_page(&ctx.key, last.as_deref(), 1000)?;
        let Some(l) = page.last() else { break };
        last = Some(l.uri.clone());
        let settled = page
            .into_iter()
            .filter(|p| !ctx.dumped_now(&p.uri))
            .map(|p| Write::Settled {
                source: ctx.key.clone(),
                uri: p.uri,
            })
            .collect();
        ctx.ports
            .committer
            .write(settled)
            .await
            .map_err(not_recorded)?;
    }
    // The march (crate::march) of the rows with the URIs the packages put in place in this
    // run, both in URI order: a row alone is a delete. A placeholder (crate::commit) not put
    // in place by this run is deleted too.
    let rows = pages(|after| {
        let page = ctx.ports.state.resources_page(&ctx.key, after, 1000)?;
        Ok::<_, Error>(Page {
            last: page.last().map(|r| r.uri.clone()),
            items: page
                .into_iter()
                .filter(|r| !r.gone || crate::commit::is_placeholder(r))
                .collect(),
        })
    });
    let dumped = pages(|after| match &ctx.memo.dumped {
        Some(d) => {
            let page = d
                .lock()
                .map_err(|_| Error::Task("staging lock poisoned".into()))?
                .page_by_uri(after, 1000)?;
            Ok::<_, Error>(Page {
                last: page.last().map(|i| i.uri.clone()),
                items: page,
            })
        }
        None => Ok(Page {
            last: None,
            items: Vec::new(),
        }),
    });
    for step in march(rows, dumped) {
        let step = step?;
        // A row with a copy a package put in place is the same; a package's copy without a
        // row is not this walk's.
        if step.row.is_none() || step.published.is_some() {
            continue;
        }
        ctx.ports.obs.add_total(1);
        let item = StagedItem {
            uri: step.uri,
            ..StagedItem::default()
        };
        if let Some(job) = job(&Kind::Delete, item) {
            exec.submit(job).await?;
        }
    }
    Ok(())
}
