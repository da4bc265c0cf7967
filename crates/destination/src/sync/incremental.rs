//! Incremental (Z39.99-2014 §12.1, §12.2): the changes after the cursor, collapsed per URI
//! ([`crate::plan::collapse`]), the pending changes of earlier runs first, submitted to the
//! executor in the order of their last occurrence.

use std::sync::Arc;

use resourcesync_model::{Capability, Change, W3cDateTime};

use crate::discover::docs::{DocFetcher, walk};
use crate::error::Result;
use crate::fetch::exec::{Ctx, Exec, Job, JobKind};
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
    incremental_with(ctx, fetcher, exec, cl, cursor, warnings, true, &mut |_| {}).await
}

/// [`incremental`], with the pending changes of earlier runs only with `pending`; `seen` is
/// told the URI of each change submitted (see [`crate::sync::catch_up`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn incremental_with(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    cl: &str,
    cursor: W3cDateTime,
    warnings: &mut Vec<String>,
    pending: bool,
    seen: &mut (dyn FnMut(&str) + Send),
) -> Result<Option<W3cDateTime>> {
    ctx.obs.phase("reading the Change Lists");
    let mut staging = Staging::create(&fetcher.dir)?;
    // Changes that failed last time go first: a later change of the same URI replaces them.
    let mut after: Option<String> = None;
    loop {
        let page = match pending {
            true => ctx.state.pending_page(&ctx.key, after.as_deref(), 1000)?,
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
    let sink = ChangeListSink::new(staging, cursor);
    let (mut sink, info) = walk(fetcher, cl, Capability::ChangeList, sink).await?;
    sink.staging.flush()?;
    warnings.extend(info.warnings);
    if sink.other > 0 {
        warnings.push(format!(
            "{} change(s) of an unknown kind ignored (Z39.99-2014 §12.1 defines created, updated, deleted)",
            sink.other
        ));
    }
    let staging = sink.staging;
    ctx.obs.add_total(staging.count()?);
    ctx.obs.phase("syncing");
    let mut pos = 0i64;
    loop {
        let page = staging.page_by_seq(pos, 1000)?;
        let Some((last, _)) = page.last() else { break };
        pos = *last;
        for (_, item) in page {
            let kind = if item.change == Some(Change::Deleted) {
                JobKind::Delete
            } else {
                JobKind::Fetch {
                    change: true,
                    new: false,
                    repair: false,
                }
            };
            seen(&item.uri);
            exec.submit(Job { item, kind }).await?;
        }
    }
    Ok(sink.last)
}
