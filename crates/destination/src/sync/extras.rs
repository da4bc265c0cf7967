//! `--delete` as rsync means it: after the run, the files under DEST that no resource maps to
//! are removed too (the audit's "extra" files), so that an audit after a `sync --delete` finds
//! none.
//!
//! - The walk is the audit's ([`crate::audit::copies::untracked`]): the store listed in key
//!   order, never through a symbolic link, each key looked up in the state (a row of any
//!   Source names it: a copy, kept). Memory does not grow with the number of files: the keys
//!   to remove are taken [`BATCH`] at a time, and the walk goes on after the last.
//! - Never removed: the Destination's own folder (`DEST/.resourcesync`, which no key names),
//!   a state database given inside DEST (`--state`) and its journals, files the include/exclude
//!   patterns leave out (rsync: excluded files are protected from deletion; [`crate::filter`]),
//!   and the paths of resources that failed or are planned in this run.
//! - A directory emptied by a removal is removed ([`resourcesync_store::Store::delete`]).
//! - A dry run lists them (`delete-extra` actions) and removes nothing.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use resourcesync_store::RelPath;

use crate::audit::copies::{is_state, state_key, untracked};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::filter::UriFilter;
use crate::outcome::Tally;
use crate::report::{Planned, push_capped};

/// Keys taken from the walk before they are removed.
const BATCH: usize = 1000;

/// Removes (or, in a dry run, lists) the files under DEST no resource maps to (see the module
/// docs), counted in `tally.extra_deleted`. `dest` and `state` say where the state database
/// is, to leave it alone when it is inside DEST.
pub(crate) async fn delete_extras(
    ctx: &Arc<Ctx>,
    filter: &UriFilter,
    dest: &Path,
    state: &Path,
    tally: &mut Tally,
    warnings: &mut Vec<String>,
) -> Result<()> {
    ctx.ports.obs.phase("removing files no resource maps to");
    // The state's own files, when given inside DEST.
    let own = state_key(dest, state);
    // Paths of this run that the state does not show yet.
    let mut keep: HashSet<String> = tally
        .failures
        .iter()
        .filter_map(|f| f.path.clone())
        .collect();
    keep.extend(tally.planned.iter().map(|p| p.path.clone()));
    let (c, filter) = (ctx.clone(), filter.clone());
    let found = tokio::task::spawn_blocking(move || -> Result<(u64, Vec<Planned>, Vec<String>)> {
        let mut after: Option<RelPath> = None;
        let (mut n, mut planned, mut errors) = (0u64, Vec::new(), Vec::new());
        loop {
            let mut batch: Vec<RelPath> = Vec::new();
            let mut more = false;
            untracked(
                c.ports.store.as_ref(),
                c.ports.state.as_ref(),
                after.as_ref(),
                &mut |r| {
                    match r {
                        Ok(rel) => {
                            let s = rel.as_str();
                            let protected = keep.contains(s)
                                || is_state(own.as_deref(), s)
                                || filter.leaves_out_path(c.mapper.base(), s);
                            if !protected {
                                batch.push(rel);
                            }
                        }
                        Err(e) => push_capped(&mut errors, e),
                    }
                    if batch.len() >= BATCH {
                        more = true;
                        return Ok(ControlFlow::Break(()));
                    }
                    Ok(ControlFlow::Continue(()))
                },
            )?;
            after = batch.last().cloned();
            for rel in batch {
                if c.dry_run {
                    push_capped(
                        &mut planned,
                        Planned {
                            action: "delete-extra",
                            uri: String::new(),
                            path: rel.to_string(),
                        },
                    );
                    n += 1;
                    continue;
                }
                match c.ports.store.delete(&rel) {
                    Ok(true) => {
                        tracing::info!("{rel}: no resource maps to it: removed (--delete)");
                        n += 1;
                    }
                    Ok(false) => {}
                    Err(e) => push_capped(&mut errors, format!("{rel}: not removed: {e}")),
                }
            }
            if !more {
                return Ok((n, planned, errors));
            }
        }
    })
    .await
    .map_err(|e| Error::Task(e.to_string()))??;
    let (n, planned, errors) = found;
    tally.extra_deleted += n;
    for p in planned {
        push_capped(&mut tally.planned, p);
    }
    for e in errors {
        ctx.ports.obs.warning(&e);
        warnings.push(e);
    }
    Ok(())
}
