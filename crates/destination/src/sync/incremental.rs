//! Incremental (Z39.99-2014 §12.1, §12.2): the changes after the cursor, collapsed per URI
//! ([`crate::plan::collapse`]), the pending changes of earlier runs first, submitted to the
//! executor in the order of their last occurrence.

use std::sync::Arc;

use resourcesync_model::{Capability, W3cDateTime};

use crate::discover::docs::{DocFetcher, WalkInfo, walk_with};
use crate::discover::known::{ListMemo, Validated};
use crate::error::Result;
use crate::fetch::ctx::Ctx;
use crate::fetch::exec::Exec;
use crate::march::change_job;
use crate::plan::collapse::ChangeListSink;
use crate::plan::staging::{StagedItem, Staging};

/// Incremental: returns the time of the last change seen.
pub(super) async fn incremental(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    cl: &str,
    cursor: W3cDateTime,
    warnings: &mut Vec<String>,
) -> Result<Option<W3cDateTime>> {
    incremental_with(
        ctx,
        fetcher,
        exec,
        cl,
        cursor,
        warnings,
        Reading {
            pending: true,
            only: None,
            seen: &mut |_| {},
        },
    )
    .await
}

/// Which changes an incremental applies ([`incremental_with`]).
pub(crate) struct Reading<'a> {
    /// The pending changes of earlier runs too (first).
    pub(crate) pending: bool,
    /// Only the changes of these URIs, when given (a history that does not reach back to the
    /// cursor then being no error: `ChangeListSink::only`).
    pub(crate) only: Option<std::collections::HashSet<String>>,
    /// Told the URI of each change submitted (see [`crate::sync::catch_up`]).
    pub(crate) seen: &'a mut (dyn FnMut(&str) + Send),
}

/// [`incremental`], of the changes `reading` says.
pub(crate) async fn incremental_with(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    cl: &str,
    cursor: W3cDateTime,
    warnings: &mut Vec<String>,
    reading: Reading<'_>,
) -> Result<Option<W3cDateTime>> {
    let Reading {
        pending,
        only,
        seen,
    } = reading;
    ctx.ports.obs.phase("reading the Change Lists");
    let mut staging = Staging::create(&fetcher.dir)?;
    // Changes that failed last time go first: a later change of the same URI replaces them.
    let mut after: Option<String> = None;
    loop {
        let page = match pending {
            true => ctx
                .ports
                .state
                .pending_page(&ctx.key, after.as_deref(), 1000)?,
            false => Vec::new(),
        };
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        for p in page {
            staging.upsert(&StagedItem {
                uri: p.uri,
                change: p.change,
                length: p.length,
                hashes: p.hashes,
                lastmod: p.lastmod,
                ctime: None,
                duplicates: p.duplicates,
                path: None,
                patch: None,
            })?;
        }
    }
    let mut sink = ChangeListSink::new(staging, cursor);
    sink.only = only;
    // The first walk of a run that started from remembered documents (crate::discover::known).
    let pre = ctx
        .memo
        .lists
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .prefetched
        .take();
    let mut sink = match pre {
        // Nothing changed since the last run read the lists.
        Some(p) if p.top.is_none() => sink,
        Some(p) => {
            // The open list of an index known unchanged: its history was checked then.
            sink.continued = p.no_index_link;
            let (sink, info) = walk_with(fetcher, cl, Capability::ChangeList, sink, p).await?;
            remember(&ctx.memo.lists, &info);
            warnings.extend(info.warnings);
            sink
        }
        None => {
            let (sink, info) =
                walk_with(fetcher, cl, Capability::ChangeList, sink, <_>::default()).await?;
            remember(&ctx.memo.lists, &info);
            warnings.extend(info.warnings);
            sink
        }
    };
    sink.staging.flush()?;
    if sink.other > 0 {
        warnings.push(format!(
            "{} change(s) of an unknown kind ignored (Z39.99-2014 §12.1 defines created, updated, deleted)",
            sink.other
        ));
    }
    let staging = sink.staging;
    ctx.ports.obs.add_total(staging.count()?);
    ctx.ports.obs.phase("syncing");
    let mut pos = 0i64;
    loop {
        let page = staging.page_by_seq(pos, 1000)?;
        let Some((last, _)) = page.last() else { break };
        pos = *last;
        for (_, item) in page {
            seen(&item.uri);
            exec.submit(change_job(item)).await?;
        }
    }
    Ok(sink.last)
}

/// Keeps what a walk read, for the next run: its top document (unless it read the open list
/// alone, the top being unchanged) and the open list, with their validators.
fn remember(lists: &std::sync::Mutex<ListMemo>, info: &WalkInfo) {
    let mut m = lists.lock().unwrap_or_else(|p| p.into_inner());
    let v = |url: &str, old: Option<&Validated>| Validated {
        url: url.to_owned(),
        validators: info.validators.get(url).cloned().or_else(|| {
            old.filter(|o| o.url == url)
                .and_then(|o| o.validators.clone())
        }),
    };
    let top_is_open = m.open.as_ref().is_some_and(|o| o.url == info.top_url);
    if top_is_open && info.last_part.is_none() {
        m.open = Some(v(&info.top_url, None));
        return;
    }
    m.top = Some(v(&info.top_url, None));
    m.open = info.last_part.as_deref().map(|u| v(u, m.open.as_ref()));
}
