//! `--delete` as rsync means it: after the run, the files under DEST that no resource maps to
//! are removed too (the audit's "extra" files), so that an audit after a `sync --delete` finds
//! none.
//!
//! - The walk is the audit's ([`crate::audit::copies::untracked`]): the store's keys listed in
//!   key order, never through a symbolic link, looked up in the state a batch at a time (a row
//!   of any Source names it: a copy, kept). It runs beside the run ([`Early`]), while the run
//!   waits on the network, and what it found is looked up again after the run (a copy the run
//!   put there is recorded by then): a file that appears under DEST while the run runs is
//!   left for the next. Past [`MAX_EARLY`] files found, or on an error, the walk is done after
//!   the run instead, where memory does not grow with the number of files: the keys to remove
//!   are taken [`BATCH`] at a time, and the walk goes on after the last.
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
use std::sync::atomic::{AtomicBool, Ordering};

use resourcesync_store::RelPath;

use crate::audit::copies::{is_state, state_key, untracked};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::filter::UriFilter;
use crate::outcome::Tally;
use crate::report::{Planned, push_capped};

/// Keys taken from the walk before they are removed.
const BATCH: usize = 1000;
/// Most files the walk beside the run keeps for after it ([`Early`]): past it, the walk is
/// done again after the run, as without it.
const MAX_EARLY: usize = 10_000;

/// The walk of DEST beside the run: the files no row names when it looks, found while the
/// run waits on the network (a wide-area incremental's round trips hide the walk), kept for
/// [`delete_extras`], which looks each up again once the run has ended (a copy the run put
/// there is recorded by then) and removes only those still named by no row. A run that
/// ends first waits for the walk; a walk that finds more than [`MAX_EARLY`] files or meets
/// an error leaves it all to the walk after the run.
pub(crate) struct Early {
    task: Option<tokio::task::JoinHandle<Option<Vec<RelPath>>>>,
    stop: Arc<AtomicBool>,
}

impl Early {
    /// Starts the walk on a blocking thread (see [`delete_extras`] for `dest` and `state`).
    pub(crate) fn start(ctx: &Arc<Ctx>, filter: &UriFilter, dest: &Path, state: &Path) -> Early {
        let stop = Arc::new(AtomicBool::new(false));
        let (c, filter, stopped) = (ctx.clone(), filter.clone(), stop.clone());
        let own = state_key(dest, state);
        let task = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            let mut ok = true;
            let walked = untracked(
                c.ports.store.as_ref(),
                c.ports.state.as_ref(),
                None,
                &mut |r| {
                    let keep_going = match r {
                        Ok(rel) if found.len() < MAX_EARLY && !stopped.load(Ordering::Relaxed) => {
                            let key = rel.as_str();
                            if !is_state(own.as_deref(), key)
                                && !filter.leaves_out_path(c.mapper.base(), key)
                            {
                                found.push(rel);
                            }
                            true
                        }
                        _ => false,
                    };
                    if keep_going {
                        Ok(ControlFlow::Continue(()))
                    } else {
                        ok = false;
                        Ok(ControlFlow::Break(()))
                    }
                },
            );
            (walked.is_ok() && ok && !stopped.load(Ordering::Relaxed)).then_some(found)
        });
        Early {
            task: Some(task),
            stop,
        }
    }

    /// What the walk found, once it has ended; `None` when it gave up.
    async fn found(mut self) -> Option<Vec<RelPath>> {
        self.task.take()?.await.ok().flatten()
    }
}

impl Drop for Early {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Removes (or, in a dry run, lists) the files under DEST no resource maps to (see the module
/// docs), counted in `tally.extra_deleted`. `dest` and `state` say where the state database
/// is, to leave it alone when it is inside DEST; `early`, the walk done beside the run, if any.
pub(crate) async fn delete_extras(
    ctx: &Arc<Ctx>,
    filter: &UriFilter,
    dest: &Path,
    state: &Path,
    early: Option<Early>,
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
    let early = match early {
        Some(e) => e.found().await,
        None => None,
    };
    let (c, filter) = (ctx.clone(), filter.clone());
    let found = tokio::task::spawn_blocking(move || -> Result<(u64, Vec<Planned>, Vec<String>)> {
        let (mut n, mut planned, mut errors) = (0u64, Vec::new(), Vec::new());
        if let Some(early) = early {
            // Looked up again: a row recorded since the walk (a copy the run put there) keeps it.
            for chunk in early.chunks(BATCH) {
                let keys: Vec<&RelPath> = chunk.iter().collect();
                let known = c.ports.state.has_paths(&keys)?;
                let batch = chunk
                    .iter()
                    .zip(known)
                    .filter(|(rel, known)| !known && !keep.contains(rel.as_str()))
                    .map(|(rel, _)| rel.clone());
                remove(&c, batch, &mut n, &mut planned, &mut errors);
            }
            return Ok((n, planned, errors));
        }
        let mut after: Option<RelPath> = None;
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
            remove(&c, batch.into_iter(), &mut n, &mut planned, &mut errors);
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

/// Removes (or, in a dry run, lists) each file of `batch`, counted in `n`.
fn remove(
    c: &Ctx,
    batch: impl Iterator<Item = RelPath>,
    n: &mut u64,
    planned: &mut Vec<Planned>,
    errors: &mut Vec<String>,
) {
    for rel in batch {
        if c.dry_run {
            push_capped(
                planned,
                Planned {
                    action: "delete-extra",
                    uri: String::new(),
                    path: rel.to_string(),
                },
            );
            *n += 1;
            continue;
        }
        match c.ports.store.delete(&rel) {
            Ok(true) => {
                tracing::info!("{rel}: no resource maps to it: removed (--delete)");
                *n += 1;
            }
            Ok(false) => {}
            Err(e) => push_capped(errors, format!("{rel}: not removed: {e}")),
        }
    }
}
