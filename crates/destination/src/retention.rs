//! Retention of kept versions (issue 37 item 5; `docs/history.md`): keep all (the default),
//! the last N of each resource, or those current within a duration; pruning removes the
//! others.
//!
//! Order of writes, so that a crash at any point leaves a consistent state: the version rows
//! first (`Op::RemoveVersion`, a batch per page, one transaction each), then each body no row
//! names any more ([`resourcesync_store::Records::digest_referenced`]). A crash between leaves
//! at worst bodies no row names, never a row naming a missing body; every prune ends with a
//! sweep of the kept bodies ([`resourcesync_store::VersionBodies::versions_after`]) removing
//! those no row names, which finishes what a stopped prune left.
//!
//! A resource's last version is never removed (the current one, or the last before a delete):
//! its number stays taken, so a TimeMap (which reads the rows) never lists a removed version
//! and never sees a number given twice. Memory is flat in the number of resources: the
//! versions are read a page at a time, keeping at most N of one resource.
//!
//! Pruning runs while nothing else writes the Source's versions (at the end of its sync, in
//! the aggregator after that Source's sync): a body kept by a run whose row is not yet
//! recorded would look unreferenced to the sweep.

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use resourcesync_model::W3cDateTime;
use resourcesync_store::{Batch, Op, VersionRecord};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::ports::Ports;

/// Versions read, and rows removed in one transaction, at a time.
const PAGE: usize = 1000;

/// Which versions are kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Retention {
    /// Every version (the default).
    #[default]
    All,
    /// The last N versions of each resource (at least 1).
    Last(u64),
    /// The versions current within this duration before the prune (and each resource's last).
    For(Duration),
}

impl Retention {
    /// Whether anything is ever pruned.
    pub fn prunes(&self) -> bool {
        !matches!(self, Retention::All)
    }
}

/// A duration as people write it, the one parser of every interval and retention a user gives
/// (`--check-every`, `--keep-versions-for`, the aggregator's schedules and leases): jiff's
/// friendly format (`30s`, `5m`, `1h30m`, `2 hours`, `30d`, `1w`), days taken as 24 hours and
/// weeks as 7 of them; `None` for anything else (months, years), negative or zero.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let span: jiff::Span = s.trim().parse().ok()?;
    let d = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .ok()?;
    Duration::try_from(d).ok().filter(|d| !d.is_zero())
}

/// What a prune removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Version rows removed.
    pub versions: u64,
    /// Bodies removed (no row named them any more).
    pub bodies: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Prunes the versions of `source` kept in `ports` by `retention`, at `now` (this
/// Destination's clock; see the module docs). Blocks.
pub fn prune(
    ports: &Ports,
    source: &str,
    retention: Retention,
    now: &W3cDateTime,
) -> Result<Pruned> {
    let mut out = Pruned::default();
    if !retention.prunes() {
        return Ok(out);
    }
    if let Retention::Last(0) = retention {
        return Err(Error::Config(
            "keep_versions must be at least 1 (the current version is always kept)".into(),
        ));
    }
    let features = ports.store.features();
    let bodies = features.versions.ok_or_else(|| {
        Error::Config("the store of these copies keeps no versions: nothing to prune".into())
    })?;
    // The cutoff of a duration, in milliseconds since the epoch.
    let cutoff = match retention {
        Retention::For(d) => Some(
            now.timestamp()
                .as_millisecond()
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        ),
        _ => None,
    };
    // Whether `v`, with `from_last` versions of its resource after it, is removed.
    let removed = |v: &VersionRecord, from_last: usize| match retention {
        Retention::All => false,
        Retention::Last(n) => from_last as u64 >= n,
        Retention::For(_) => v
            .until
            .as_ref()
            .zip(cutoff)
            .is_some_and(|(u, c)| u.timestamp().as_millisecond() <= c),
    };
    let keep_n = match retention {
        Retention::Last(n) => usize::try_from(n).unwrap_or(usize::MAX),
        _ => 1,
    };
    let mut doomed: Vec<VersionRecord> = Vec::new();
    let flush = |doomed: &mut Vec<VersionRecord>, out: &mut Pruned| -> Result<()> {
        if doomed.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::new();
        for v in doomed.iter() {
            batch.push(Op::RemoveVersion(&v.source, &v.uri, v.seq));
        }
        ports.state.apply(&batch)?;
        out.versions += doomed.len() as u64;
        crate::crashpoint::point("versions-unrecorded");
        let digests: BTreeSet<&str> = doomed.iter().map(|v| v.digest.as_str()).collect();
        for d in digests {
            remove_body(ports, bodies, d, out)?;
        }
        doomed.clear();
        Ok(())
    };
    // One resource's versions not yet judged: the last `keep_n` seen (a version judged is
    // one with at least `keep_n` after it, or with one after it for a duration).
    let mut window: VecDeque<VersionRecord> = VecDeque::new();
    let mut after: Option<(String, u64)> = None;
    loop {
        let page = ports.state.versions_page(
            source,
            after.as_ref().map(|(u, s)| (u.as_str(), *s)),
            PAGE,
        )?;
        let Some(last) = page.last() else { break };
        after = Some((last.uri.clone(), last.seq));
        for v in page {
            if window.front().is_some_and(|w| w.uri != v.uri) {
                // The window's resource ended: its last `keep_n` stay.
                window.clear();
            }
            window.push_back(v);
            if window.len() > keep_n
                && let Some(old) = window.pop_front()
                && removed(&old, keep_n)
            {
                doomed.push(old);
            }
        }
        if doomed.len() >= PAGE {
            flush(&mut doomed, &mut out)?;
        }
    }
    flush(&mut doomed, &mut out)?;
    sweep(ports, bodies, &mut out)?;
    Ok(out)
}

/// Removes the body `digest` unless a row names it.
fn remove_body(
    ports: &Ports,
    bodies: &dyn resourcesync_store::VersionBodies,
    digest: &str,
    out: &mut Pruned,
) -> Result<()> {
    if ports.state.digest_referenced(digest)? {
        return Ok(());
    }
    let len = bodies.version_length(digest)?.unwrap_or(0);
    if bodies.remove_version(digest)? {
        out.bodies += 1;
        out.bytes += len;
    }
    Ok(())
}

/// Removes every kept body no row names (what a prune stopped between its rows and its
/// bodies left), reading them a page at a time.
fn sweep(
    ports: &Ports,
    bodies: &dyn resourcesync_store::VersionBodies,
    out: &mut Pruned,
) -> Result<()> {
    let mut after: Option<String> = None;
    loop {
        let page = bodies.versions_after(after.as_deref(), PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.clone());
        for d in &page {
            remove_body(ports, bodies, d, out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_of_retention() {
        let d = |s| parse_duration(s).map(|d| d.as_secs());
        assert_eq!(d("30d"), Some(30 * 86_400));
        assert_eq!(d("12h"), Some(12 * 3600));
        assert_eq!(d("1w2d"), Some(9 * 86_400));
        assert_eq!(d(" 90s "), Some(90));
        assert_eq!(d("1h30m"), Some(5400));
        assert_eq!(d("2 hours"), Some(7200));
        assert_eq!(d("7 days"), Some(7 * 86_400));
        for bad in [
            "",
            "0d",
            "30",
            "d",
            "-1d",
            "1y",
            "1mo",
            "soon",
            "99999999999999999999w",
        ] {
            assert_eq!(d(bad), None, "{bad}");
        }
    }
}
