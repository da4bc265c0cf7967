//! Catching up after a baseline (Z39.99-2014 §5.2, §12.1: a Destination baselines from the
//! Resource List, then follows the Change Lists from the list's `at`).
//!
//! A Resource List describes its resources as they were at its `at`. A Source whose resources
//! change while a baseline runs (or right before: a list written before an edit, served after
//! it) then serves a body newer than its listing: longer or shorter than the published length,
//! another digest, or a 404 for a resource deleted since. The Source is right; the copy is just
//! newer than the list. So, in the same run, once the baseline's downloads have ended:
//!
//! 1. The Change Lists are read from the Resource List's `at` (pending changes of earlier runs
//!    left aside: the baseline has just tried them), and their changes applied as an
//!    incremental run applies them: each resource fetched again at its listed new version, or
//!    removed. A failure of the baseline whose resource a later change names is replaced by the
//!    outcome of that change.
//! 2. While failures remain and the last reading found new changes, the Change Lists are read
//!    again at once from the last change seen (a resource that changed again during the first
//!    round).
//! 3. While failures that look like a list older than the resource remain (HTTP 404 or 410, a
//!    length or digest other than the published one: [`FailureKind::Gone`],
//!    [`FailureKind::Changed`]) and the last reading listed nothing new, the Source may not have
//!    listed their changes yet (a busy Source writes its Change List a little after the change):
//!    the Change Lists are read again after a short wait ([`FIRST_WAIT`], doubling), the waits
//!    adding up to at most [`MAX_WAIT`]. A change then listed is applied as in 1.
//!
//! At most [`MAX_READINGS`] readings in all. Only the failures still unexplained then are
//! failures of the run.
//!
//! The cursor becomes the last change seen. A Change List that does not reach back to the list's
//! `at` (its `from` is later, or it has none) is left to the next run, which finds the gap and
//! says it; only the changes it lists of the resources that failed as in 3 are applied (read
//! again at once, then as in 3), the cursor staying where it is. One that cannot be read is a
//! warning. A failure that remains and looks like a list older than the
//! resource (a length or digest other than the published one, HTTP 404 or 410) says so.
//!
//! Failure counts are exact while the failures listed in the report are all of them (up to
//! [`crate::report::MAX_LISTED`]); past that, a failure not listed that a change then fixes is
//! still counted.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use resourcesync_model::W3cDateTime;

use crate::commit::{Write, not_recorded};
use crate::discover::docs::DocFetcher;
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::fetch::exec::Exec;
use crate::outcome::Tally;
use crate::plan::after;
use crate::report::FailureKind;
use crate::sync::{Reading, incremental_with};

/// Most readings of the Change Lists after a baseline (the first and five more).
pub const MAX_READINGS: usize = 6;
/// Most time spent waiting, in all, for a Source to list the changes of resources that look
/// newer than the Resource List (see the module docs, 3).
pub const MAX_WAIT: Duration = Duration::from_secs(5);
/// The first wait before the Change Lists are read again for such resources; each next wait is
/// twice as long, the last one shortened to stay within [`MAX_WAIT`].
pub const FIRST_WAIT: Duration = Duration::from_millis(200);

/// Catches up from the Change List `cl` after a baseline from a Resource List of `at` (see the
/// module docs), updating the baseline's `tally`. Returns the new cursor.
pub(crate) async fn catch_up(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    concurrency: usize,
    cl: &str,
    at: W3cDateTime,
    tally: &mut Tally,
    warnings: &mut Vec<String>,
) -> Result<W3cDateTime> {
    let mut cursor = at;
    let mut waited = Duration::ZERO;
    let mut wait = FIRST_WAIT;
    // After a reading refused for a history that does not reach back to the cursor: only the
    // changes of the stale failures are applied from then on, and the cursor stays.
    let mut gap = false;
    for round in 0..MAX_READINGS {
        // The failures so far, which a newer listing may explain.
        let wrong: HashSet<String> = tally.failures.iter().map(|f| f.uri.clone()).collect();
        if round > 0 && wrong.is_empty() {
            break;
        }
        let mut exec = Exec::new(ctx.clone(), concurrency);
        exec.counted_already(counted_by_baseline(ctx, wrong.clone()));
        let mut retried: HashSet<String> = HashSet::new();
        let mut seen = |uri: &str| {
            if wrong.contains(uri) {
                retried.insert(uri.to_owned());
            }
        };
        let mut w = Vec::new();
        let only = gap.then(|| stale_uris(tally));
        let reading = Reading {
            pending: false,
            only,
            seen: &mut seen,
        };
        let read = incremental_with(ctx, fetcher, &mut exec, cl, cursor, &mut w, reading).await;
        let more = exec.finish().await;
        for m in w {
            if !warnings.contains(&m) {
                warnings.push(m);
            }
        }
        let last = match read {
            Ok(last) => last,
            // What the lists say of the resources that look newer than their listing is true
            // all the same: read again at once for them alone.
            Err(Error::HistoryGap { .. }) if !gap && stale(tally) => {
                tally.merge(more);
                gap = true;
                continue;
            }
            // The next run finds the gap (or the disorder), says it and diffs.
            Err(Error::HistoryGap { .. } | Error::ChangesOutOfOrder { .. }) => {
                tally.merge(more);
                break;
            }
            Err(
                e @ (Error::Http(_)
                | Error::Document { .. }
                | Error::BadDocument { .. }
                | Error::IndexTooDeep { .. }),
            ) => {
                warnings.push(format!(
                    "{e}: the changes since the Resource List ({at}) are not caught up in this \
                     run; the next sync applies them"
                ));
                tally.merge(more);
                break;
            }
            Err(e) => return Err(e),
        };
        // A failure a later change named: replaced by that change's outcome. One that is fine
        // now keeps no pending change (a copy found current leaves the row of its failure).
        tally.failed = tally.failed.saturating_sub(retried.len() as u64);
        tally.failures.retain(|f| !retried.contains(&f.uri));
        let still: HashSet<&str> = more.failures.iter().map(|f| f.uri.as_str()).collect();
        let settled = retried
            .iter()
            .filter(|u| !still.contains(u.as_str()))
            .map(|u| Write::Settled {
                source: ctx.key.clone(),
                uri: u.clone(),
            })
            .collect();
        ctx.ports
            .committer
            .write(settled)
            .await
            .map_err(not_recorded)?;
        tally.merge(more);
        // Past a gap the cursor stays: the next run finds the gap, says it and diffs.
        let last = last.filter(|_| !gap);
        match last.filter(|l| after(l, &cursor)) {
            Some(l) => cursor = l,
            // Nothing newer listed: the Source may list the changes of resources newer than
            // their listing in a moment; nothing else would change by reading again now.
            None if round + 1 < MAX_READINGS && waited < MAX_WAIT && stale(tally) => {
                let w = wait.min(MAX_WAIT - waited);
                tokio::time::sleep(w).await;
                waited += w;
                wait *= 2;
            }
            None => break,
        }
    }
    Ok(cursor)
}

/// Whether a failure remains that a change the Source has not listed yet would explain.
fn stale(tally: &Tally) -> bool {
    tally.failures.iter().any(is_stale)
}

/// The URIs of the failures [`stale`] looks for.
fn stale_uris(tally: &Tally) -> HashSet<String> {
    let f = tally.failures.iter().filter(|f| is_stale(f));
    f.map(|f| f.uri.clone()).collect()
}

fn is_stale(f: &crate::report::Failure) -> bool {
    matches!(f.kind, FailureKind::Gone | FailureKind::Changed)
}

/// Whether the baseline (or an earlier round) counted a resource already: its copy is
/// recorded, or the patterns leave it out; not one whose failure a change now replaces (the
/// failure is taken back, the change's outcome counts). A change of it then adds no count
/// (each resource once in a report: `SyncReport::accounted`).
fn counted_by_baseline(ctx: &Arc<Ctx>, wrong: HashSet<String>) -> crate::fetch::exec::Counted {
    let c = ctx.clone();
    Arc::new(move |uri: &str| {
        if wrong.contains(uri) {
            return false;
        }
        let left_out = c
            .mapper
            .map(uri)
            .is_ok_and(|p| c.filter.leaves_out_path(c.mapper.base(), p.as_str()));
        left_out || matches!(c.ports.state.resource(uri), Ok(Some(r)) if !r.gone)
    })
}

/// Says, on each failure of a baseline that looks like a list older than the resource (see
/// [`FailureKind`]), that this is what it most likely is, and what happens next.
pub(crate) fn explain_stale(tally: &mut Tally, at: Option<&W3cDateTime>, change_lists: bool) {
    let list = match at {
        Some(at) => format!("the Resource List of {at}"),
        None => "the Resource List".to_owned(),
    };
    let next = if change_lists {
        "no change of it is listed yet in the Change Lists: the next sync catches up from them"
    } else {
        "the Source offers no Change List to catch up from: the next sync reads the Resource \
         List again"
    };
    for f in &mut tally.failures {
        let what = match f.kind {
            FailureKind::Changed => "changed after",
            FailureKind::Gone => "deleted (or moved) after",
            FailureKind::Other | FailureKind::Store => continue,
        };
        f.error.push_str(&format!(
            " (the resource was most likely {what} {list} was written, and {next})"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds [`explain_stale`] looks at come from the errors of the store and the client,
    /// by their variants, not their messages.
    #[test]
    fn stale_bodies_are_recognised_by_the_errors_of_the_store_and_the_client() {
        use resourcesync_store::Error as S;
        let too_long = S::TooLong {
            limit: 7,
            what: "published length",
        };
        let length = S::LengthMismatch {
            expected: 7,
            actual: 5,
        };
        let digest = S::DigestMismatch {
            alg: resourcesync_model::HashAlg::Md5,
            expected: "a".into(),
            actual: "b".into(),
        };
        let status = |status| {
            Error::Http(resourcesync_http::Error::Status {
                url: "http://h/a".into(),
                status,
                retry_after: None,
            })
        };
        for e in [too_long, length, digest] {
            assert_eq!(Error::Store(e).failure_kind(), FailureKind::Changed);
        }
        for s in [404, 410] {
            assert_eq!(status(s).failure_kind(), FailureKind::Gone);
        }
        assert_eq!(status(500).failure_kind(), FailureKind::Other);
        assert_eq!(status(500).category(), resourcesync_model::Category::Retry);
        assert_eq!(status(404).category(), resourcesync_model::Category::Skip);
        let full = S::Io {
            path: "x".into(),
            cause: std::io::Error::from_raw_os_error(28),
        };
        assert_eq!(
            Error::Store(full).category(),
            resourcesync_model::Category::Stop
        );
    }
}
