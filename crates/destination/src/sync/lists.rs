//! The run proper of a sync, once its context is open: the dumps and the lists read and their
//! jobs run ([`Lists::run`]), then the catch-up after a baseline, the copies checked, and the
//! files no resource maps to removed.

use std::sync::Arc;

use resourcesync_model::W3cDateTime;
use tokio_util::task::AbortOnDropHandle;

use super::ahead::Ahead;
use super::baseline::{after_dump, baseline, baseline_with, stage_list};
use super::incremental::incremental;
use super::{RunPlan, catch_up, delete_gone, extras, need_rl, repair};
use crate::discover::docs::DocFetcher;
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::fetch::exec::Exec;
use crate::fetch::repair::Scan;
use crate::options::SyncOptions;
use crate::outcome::Tally;
use crate::plan::after;
use crate::report::{Mode, SourceInfo};

/// What the steps of a run's lists share.
#[derive(Clone, Copy)]
pub(super) struct Lists<'a> {
    pub(super) ctx: &'a Arc<Ctx>,
    pub(super) fetcher: &'a DocFetcher,
    pub(super) opts: &'a SyncOptions,
    pub(super) info: &'a SourceInfo,
    pub(super) plan: &'a RunPlan,
}

impl Lists<'_> {
    /// The run proper: its mode, the new cursor and its counts, the warnings added to
    /// `warnings` (and told to the observer). Every copy is in place and recorded, and the
    /// committer closed, when it returns.
    pub(super) async fn run(
        &self,
        warnings: &mut Vec<String>,
    ) -> Result<(Mode, Option<W3cDateTime>, Tally, bool)> {
        let Lists { ctx, opts, .. } = *self;
        // The copies checked beside the run proper (crate::fetch::repair::Scan) when a check
        // is due (super::check_due).
        let scan = self.plan.check.then(|| Scan::start(ctx, opts.check_copies));
        // rsync's --delete: DEST walked beside the run for the files no resource maps to
        // (crate::sync::extras), removed after it.
        let early = (opts.delete && opts.delete_extra)
            .then(|| extras::Early::start(ctx, &opts.filter, &opts.dest, &opts.state_path()));
        let earlier = delete_gone(ctx, opts).await?;
        // A first baseline's catch-up: its Change List read beside the baseline
        // (crate::sync::ahead).
        let mut ahead = match (self.plan.cursor, &self.info.change_list) {
            (None, Some(cl)) if self.catches_up() => Some(Ahead::start(self.fetcher, cl)),
            _ => None,
        };
        let mut exec = Exec::new(ctx.clone(), opts.concurrency);
        let mut w = Vec::new();
        let mut from_dumps = Tally::default();
        let (mode, new_cursor) = self
            .lists(&mut exec, &mut from_dumps, &mut w, &mut ahead)
            .await?;
        self.warn(w, warnings);
        // Every download is under way: the Change List asked for again now (unless a baseline
        // from a dump asked already), beside the last downloads and while the last copies are
        // made durable (one round trip, instead of two after them).
        let ahead = ahead.filter(|_| is_full(mode) && new_cursor.is_some());
        let (mut tally, current) = tokio::join!(exec.finish(), async {
            match ahead {
                Some(a) => a.current(self.fetcher).await,
                None => None,
            }
        });
        if current.is_some() {
            ctx.memo
                .lists
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .prefetched = current;
        }
        let mut w = Vec::new();
        let (new_cursor, checked) = self
            .after_lists(mode, new_cursor, scan, &mut tally, &mut w)
            .await?;
        w.retain(|m| !warnings.contains(m));
        self.warn(w, warnings);
        // Every copy downloaded is in place and recorded before the cursor moves.
        ctx.ports.committer.close();
        // A change neither applied nor recorded as pending keeps the cursor where it is.
        ctx.check_state()?;
        tally.merge(earlier);
        tally.merge(from_dumps);
        // rsync's --delete: the files no resource maps to go too (crate::sync::extras).
        if opts.delete && opts.delete_extra {
            let mut w = Vec::new();
            extras::delete_extras(
                ctx,
                &opts.filter,
                &opts.dest,
                &opts.state_path(),
                early,
                &mut tally,
                &mut w,
            )
            .await?;
            warnings.extend(w);
        }
        Ok((mode, new_cursor, tally, checked))
    }

    /// Tells the observer of `w` and adds them to `warnings`.
    fn warn(&self, w: Vec<String>, warnings: &mut Vec<String>) {
        for m in &w {
            self.ctx.ports.obs.warning(m);
        }
        warnings.extend(w);
    }

    /// After the lists' jobs: the catch-up after a baseline, the copies checked (`scan`), and
    /// what is worth a warning; the new cursor, and whether every copy was checked.
    async fn after_lists(
        &self,
        mode: Mode,
        new_cursor: Option<W3cDateTime>,
        scan: Option<Scan>,
        tally: &mut Tally,
        w: &mut Vec<String>,
    ) -> Result<(Option<W3cDateTime>, bool)> {
        let Lists {
            ctx,
            fetcher,
            opts,
            info,
            ..
        } = *self;
        let full = is_full(mode);
        // Z39.99-2014 §5.2, §12.1: after a baseline, the changes since the list's `at` in the
        // same run; a resource that changed while the baseline ran is fetched again
        // (crate::sync::catch_up).
        let baseline_at = new_cursor.filter(|_| full && self.catches_up());
        let new_cursor = match (baseline_at, &info.change_list) {
            (Some(at), Some(cl)) => {
                Some(catch_up::catch_up(ctx, fetcher, opts.concurrency, cl, at, tally, w).await?)
            }
            _ => new_cursor,
        };
        let mut checked = false;
        if let Some(scan) = scan {
            let (t, complete) = repair(ctx, opts, scan).await?;
            tally.merge(t);
            checked = complete;
        }
        if baseline_at.is_some() {
            catch_up::explain_stale(tally, baseline_at.as_ref(), info.change_list.is_some());
        }
        // A run that went through every resource: a pattern that matched none is most likely
        // a typo (crate::filter).
        if full {
            w.extend(ctx.filter.unmatched_warnings());
        }
        Ok((new_cursor, checked))
    }

    /// Whether a baseline of this run catches up from the Change Lists after it (when it sets
    /// a cursor).
    fn catches_up(&self) -> bool {
        !self.opts.dry_run && !self.plan.dumps_only && self.opts.catch_up
    }

    /// The run proper, from the dumps and the lists: returns its mode and the new cursor.
    /// `ahead`: the catch-up's Change List read beside a first baseline.
    async fn lists(
        &self,
        exec: &mut Exec,
        from_dumps: &mut Tally,
        w: &mut Vec<String>,
        ahead: &mut Option<Ahead>,
    ) -> Result<(Mode, Option<W3cDateTime>)> {
        let Lists {
            ctx,
            fetcher,
            opts,
            info,
            plan,
        } = *self;
        let cursor = plan.cursor;
        // Z39.99-2014 §13: Change Dump packages first; the Change Lists then find their changes
        // applied (see crate::dump).
        if let (Some(c), Some(cd)) = (cursor, &plan.change_dump) {
            let d =
                crate::dump::change_dumps(ctx, fetcher, cd, c, true, &opts.dump_limits, w).await?;
            from_dumps.add_dumps(&d);
        }
        Ok(match (cursor, &info.change_list) {
            _ if plan.dumps_only => {
                let d = crate::dump::only::Dumps {
                    ctx,
                    fetcher,
                    info,
                    limits: &opts.dump_limits,
                };
                let run =
                    crate::dump::only::sync_from_dumps(d, exec, cursor, plan.prior, w).await?;
                from_dumps.add_dumps(&run.stats);
                (run.mode, run.cursor.or(cursor))
            }
            (Some(c), Some(cl)) => match incremental(ctx, fetcher, exec, cl, c, w).await {
                Ok(last) => (
                    Mode::Incremental,
                    Some(last.filter(|l| after(l, &c)).unwrap_or(c)),
                ),
                Err(e @ (Error::HistoryGap { .. } | Error::ChangesOutOfOrder { .. })) => {
                    // Said once, with the other warnings of the run.
                    w.push(format!("{e}: baseline diff against the Resource List"));
                    let rl = need_rl(
                        opts,
                        info,
                        format!(
                            "to diff the copy against, and its Change Lists do not reach back to the \
                         cursor: to start over, sync into a new directory (or remove {})",
                            ctx.state_path.display()
                        ),
                    )?;
                    let at = baseline(ctx, fetcher, exec, &rl, w).await?;
                    (
                        Mode::BaselineDiff,
                        Some(at.filter(|a| after(a, &c)).unwrap_or(c)),
                    )
                }
                Err(e) => return Err(e),
            },
            _ => {
                let mode = if plan.prior {
                    Mode::BaselineDiff
                } else {
                    Mode::Baseline
                };
                let at = self.full_baseline(exec, from_dumps, w, ahead).await?;
                (mode, at.or(cursor))
            }
        })
    }

    /// A baseline (or baseline diff): Z39.99-2014 §11: the dump first; then the Resource List,
    /// unless it is older than the dump (see crate::dump). Returns the new cursor, if any.
    async fn full_baseline(
        &self,
        exec: &mut Exec,
        from_dumps: &mut Tally,
        w: &mut Vec<String>,
        ahead: &mut Option<Ahead>,
    ) -> Result<Option<W3cDateTime>> {
        let Lists {
            ctx,
            fetcher,
            opts,
            info,
            plan,
        } = *self;
        let mut dump_at = None;
        let mut staged = None;
        if let Some(rd) = &plan.resource_dump {
            // The Resource List is read while the packages are applied: the two meet only in the
            // diff, once the dump is in place.
            let reading = info
                .resource_list
                .clone()
                .map(|rl| AbortOnDropHandle::new(tokio::spawn(stage_list(fetcher.clone(), rl))));
            let lists = info.resource_list.is_some();
            // The catch-up's Change List asked for again as the packages are
            // (crate::sync::ahead, 2): the bodies they hold are as old as the dump.
            if let Some(a) = ahead.as_mut() {
                a.ask_now(fetcher);
            }
            let d =
                crate::dump::resource_dump(ctx, fetcher, rd, lists, &opts.dump_limits, w).await?;
            from_dumps.add_dumps(&d);
            dump_at = d.at;
            if let Some(mut r) = reading {
                staged = Some((&mut r).await.map_err(Error::from).and_then(|s| s));
            }
        }
        Ok(match dump_at {
            Some(d) => after_dump(ctx, fetcher, exec, info, d, w, staged).await?,
            // Without a Resource List, a Resource Dump whose packages were all refused leaves
            // nothing more to do: its failures say why, the next run tries again.
            None if plan.resource_dump.is_some() && info.resource_list.is_none() => None,
            None => {
                let rl = need_rl(
                    opts,
                    info,
                    if opts.dry_run {
                        "for a dry run to plan from (a dry run fetches no dump package): run \
                     without --dry-run"
                            .into()
                    } else {
                        "to start a copy from: tell the Source's maintainer".into()
                    },
                )?;
                baseline_with(ctx, fetcher, exec, &rl, w, None, staged).await?
            }
        })
    }
}

/// Whether a run of `mode` went through every resource of the Resource List.
fn is_full(mode: Mode) -> bool {
    matches!(mode, Mode::Baseline | Mode::BaselineDiff)
}
