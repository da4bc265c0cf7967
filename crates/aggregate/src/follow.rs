//! Following one Source: its loop of syncs (an interval) or its push session, each sync
//! through the Destination engine on the ports the service gives it. A Source's failure stays
//! its own: it is recorded in its status and the Source backs off; nothing it does waits for
//! another Source, except for the shared limits (syncs at once, per host).

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use resourcesync_destination::http::Http;
use resourcesync_destination::options::Quota;
use resourcesync_destination::{
    Destination, HttpOptions, PushOptions, PushStats, Quiet, Round, StopHandle, SyncOptions,
    SyncReport, WatchOptions, watch_push,
};
use resourcesync_http::{HostRule, Reach};
use resourcesync_store::Records;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::config::{Schedule, SourceSpec};
use crate::gate::Place;
use crate::shared::{Opened, Shared};

/// The first wait after a failure; doubled for each failure in a row, up to the limit.
pub const BACKOFF_BASE: Duration = Duration::from_secs(15);

/// How long to wait after `failures` failed syncs in a row (at least one): doubling from
/// [`BACKOFF_BASE`], at most `max`, with ±20% jitter so that Sources failing together (one
/// host down) do not all come back at once.
pub fn backoff(failures: u32, max: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    let d = BACKOFF_BASE.saturating_mul(1u32 << exp).min(max);
    d.mul_f64(0.8 + 0.4 * fastrand::f64())
}

/// The HTTP options of every request made for `spec`: the sync's own and those of the work
/// queue ([`crate::work`]) alike.
pub(crate) fn http_options(spec: &SourceSpec, shared: &Shared) -> HttpOptions {
    HttpOptions {
        token: spec.token.clone(),
        rate: spec.rate,
        // One limit over every Source (limits.bandwidth).
        bandwidth: shared.bandwidth(),
        reach: Some(reach(spec)),
        ..HttpOptions::default()
    }
}

/// Where requests for `spec` may go: the origin of its `url` and of its `set` (named by the
/// operator), and its `allow_hosts` (see [`crate::config`]). A service that republishes what
/// it fetches must not fetch, for a Source, what its own network holds.
pub fn reach(spec: &SourceSpec) -> Reach {
    let own = [Some(&spec.url), spec.set.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|u| url::Url::parse(u).ok())
        .filter_map(|u| HostRule::origin(&u));
    let rules = own.chain(spec.allow_hosts.iter().cloned()).collect();
    Reach::new(rules, &format!("Source {:?}", spec.name), "allow_hosts")
}

pub(crate) fn sync_options(spec: &SourceSpec, shared: &Shared) -> SyncOptions {
    let mut opts = SyncOptions::new(spec.url.clone(), shared.folder(&spec.name));
    opts.set.clone_from(&spec.set);
    opts.delete = spec.delete;
    opts.versions = spec.versions;
    opts.keep_versions = spec.keep_versions;
    opts.concurrency = spec.concurrency;
    opts.http = http_options(spec, shared);
    opts.filter = spec.filter();
    opts.deadline = Some(shared.limits().timeout);
    opts.state = shared.sqlite_state(&spec.name);
    // One hostile Source cannot fill the store the others share.
    let (bytes, key) = match spec.max_bytes {
        Some(b) => (b, "its `max_bytes`"),
        None => (
            shared.limits().max_bytes_per_source,
            "`max_bytes` in its [[source]] table (or limits.max_bytes_per_source, for every \
             Source)",
        ),
    };
    opts.quota = Some(Quota {
        bytes,
        hint: format!(
            "to let the Source {:?} keep more, raise {key} in the configuration, or remove \
             copies it no longer needs",
            spec.name
        ),
    });
    opts
}

/// Follows `spec` until `cancel` (a sync running then is finished first: the service's drain
/// decides how long it may take). `first` is the place in the line of syncs its first sync
/// takes, if the service took one for it ([`crate::gate`]).
pub(crate) async fn follow(
    spec: SourceSpec,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    first: Option<Place>,
) {
    // What its state records, shown before its first sync (after a restart, above all).
    crate::recorded::load(&spec, &shared);
    match spec.schedule {
        Schedule::Every(interval) => every(&spec, interval, &shared, &cancel, first).await,
        Schedule::Push => push(&spec, &shared, &cancel).await,
    }
}

async fn every(
    spec: &SourceSpec,
    interval: Duration,
    shared: &Arc<Shared>,
    cancel: &CancellationToken,
    mut first: Option<Place>,
) {
    let status = &shared.status;
    loop {
        status.scheduled(&spec.name, Some(Timestamp::now()));
        let place = first.take().unwrap_or_else(|| shared.line_up(&spec.url));
        let slot = tokio::select! {
            () = cancel.cancelled() => return,
            s = place.wait() => s,
        };
        status.started(&spec.name);
        let r = once(spec, shared, interval).await;
        drop(slot);
        let wait = match r {
            Ok(Outcome::Synced(report, state)) => {
                // The copies the state records now (one query), not a sum of the reports.
                let recorded = crate::recorded::totals(state.clone()).await;
                status.succeeded(&spec.name, &report, recorded);
                if spec.versions {
                    let key = report.source.key();
                    if let Some((n, b)) = crate::recorded::versions(state.clone(), key).await {
                        status.versions(&spec.name, n, b);
                    }
                }
                // Right after the sync, in this follower: never while its copies are written.
                republish(spec, shared, &report.source.key(), state).await;
                interval
            }
            Ok(Outcome::Elsewhere) => {
                status.elsewhere(&spec.name, "another worker holds this Source");
                interval
            }
            Ok(Outcome::Fresh(due)) => {
                status.elsewhere(&spec.name, "synced less than its interval ago");
                due
            }
            Err(e) => {
                tracing::warn!(
                    source = %spec.name,
                    "sync failed: {}",
                    resourcesync_model::redact::text(&e)
                );
                status.failed(&spec.name, &e);
                backoff(
                    status.consecutive_failures(&spec.name),
                    shared.limits().backoff_max,
                )
            }
        };
        let next = Timestamp::now()
            .checked_add(jiff::SignedDuration::try_from(wait).unwrap_or_default())
            .ok();
        status.scheduled(&spec.name, next);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// What one round of a Source came to.
enum Outcome {
    /// Synced: the report, and the state it was recorded in (read by the republish).
    Synced(Box<SyncReport>, Arc<dyn Records>),
    Elsewhere,
    /// Synced less than its interval ago (by another worker, or before a restart): due in
    /// this long.
    Fresh(Duration),
}

/// Publishes the copies of `spec` as a Source (see [`crate::republish`]) after a sync of the
/// Source `key` (its Capability List) recorded in `state`, when the aggregator republishes, on
/// a blocking thread. A failure is logged and kept in the Source's status; the copies and the
/// sync's result stand.
async fn republish(spec: &SourceSpec, shared: &Shared, key: &str, state: Arc<dyn Records>) {
    let Some(at) = shared.republish().cloned() else {
        return;
    };
    let (name, folder, key) = (spec.name.clone(), shared.folder(&spec.name), key.to_owned());
    let versions = spec.versions;
    let copies = match shared.copies(&name) {
        Ok(c) => c,
        Err(e) => return shared.status.republished(&name, Err(e.to_string())),
    };
    let slot = shared.republish_slot().await;
    let r = tokio::task::spawn_blocking(move || {
        let r = crate::republish::publish(&at, &name, &folder, &copies, &*state, &key, versions);
        drop(slot);
        r
    })
    .await;
    let r = match r {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the republish task failed: {e}")),
    };
    shared.status.republished(&spec.name, r);
}

/// One sync of `spec`, on its ports, within the time limit; with a shared state, under this
/// worker's lease on the Source, renewed while the sync runs and given up after.
async fn once(
    spec: &SourceSpec,
    shared: &Arc<Shared>,
    interval: Duration,
) -> Result<Outcome, String> {
    let opts = sync_options(spec, shared);
    let limits = shared.limits();
    let opened = shared
        .ports(&spec.name, Some(interval))
        .await
        .map_err(|e| e.to_string())?;
    let (ports, lease) = match opened {
        Opened::Ready(p, l) => (p, l),
        Opened::Elsewhere => return Ok(Outcome::Elsewhere),
        Opened::Fresh(due) => return Ok(Outcome::Fresh(due)),
    };
    let renewer = lease.clone().map(|l| {
        let ttl = limits.lease;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 3).await;
                let l = l.clone();
                match tokio::task::spawn_blocking(move || l.renew(ttl)).await {
                    Ok(Ok(true)) => {}
                    // Lost: the sync's next write fails (fenced), which ends it.
                    _ => return,
                }
            }
        })
    });
    let state = ports.state.clone();
    let http = Http::new(opts.http.clone()).map_err(|e| e.to_string());
    let r = match http {
        Ok(http) => {
            let dest = Destination::new(spec.url.clone(), ports, http);
            match tokio::time::timeout(limits.timeout, dest.sync(&opts, Arc::new(Quiet))).await {
                Ok(r) => r
                    .map(|r| Outcome::Synced(Box::new(r), state))
                    .map_err(|e| e.to_string()),
                Err(_) => Err(format!(
                    "timed out after {} (limits.timeout)",
                    crate::status::schedule_text(Schedule::Every(limits.timeout))
                )),
            }
        }
        Err(e) => Err(e),
    };
    if let Some(t) = renewer {
        t.abort();
    }
    if let Some(l) = lease {
        let _ = tokio::task::spawn_blocking(move || l.release()).await;
    }
    r
}

/// Push (Change Notification 1.0.1): the Destination's push follower, which syncs first, then
/// applies each notification and catches up from the Change Lists; each of its rounds is
/// recorded. A session that ends with an error is started again after a back-off.
async fn push(spec: &SourceSpec, shared: &Arc<Shared>, cancel: &CancellationToken) {
    let status = &shared.status;
    // Each round that applied something asks for a republish; a task of this follower does
    // them one at a time, rounds that come meanwhile coalescing into the next one.
    let (dirty, republisher) = push_republisher(spec, shared);
    let _republisher = republisher.map(AbortOnDropHandle::new);
    // After each round, what the state records is read again (by a task: not in the round).
    let (recount, counter) = crate::recorded::counter(spec, shared);
    let _counter = AbortOnDropHandle::new(counter);
    let wopts = WatchOptions::default();
    let mut warned = false;
    loop {
        let stats = Arc::new(PushStats::default());
        let stop = StopHandle::new();
        let stopper = {
            let (stop, cancel) = (stop.clone(), cancel.clone());
            tokio::spawn(async move {
                cancel.cancelled().await;
                stop.stop();
            })
        };
        status.started(&spec.name);
        let opts = sync_options(spec, shared);
        let name = spec.name.clone();
        let on_round = |r: &Round| match (&r.report, &r.error) {
            (Some(rep), _) => {
                // Without a hub, the rounds after the first are polls (Change Notification
                // 1.0.1 §5 names none to subscribe to): said once, and not counted as syncs.
                match stats.polling_instead.get() {
                    Some(why) => {
                        if !warned {
                            warned = true;
                            tracing::warn!(
                                source = %name,
                                "Source {name:?} is configured for push (schedule = \"push\") but \
                                 {why}: it is polled every {} instead. Ask the Source to advertise a \
                                 WebSub hub (<rs:ln rel=\"hub\"> in its Capability List), or set \
                                 an interval schedule for it (schedule = \"10m\")",
                                crate::status::schedule_text(Schedule::Every(wopts.interval)),
                            );
                        }
                        status.polling_instead(&name, wopts.interval, why);
                        status.polled(&name, rep, None);
                    }
                    _ => status.succeeded(&name, rep, None),
                }
                status.started(&name);
                recount.send_replace(());
                dirty.send_replace(Some(rep.source.key()));
            }
            (None, Some(e)) => {
                status.failed(&name, e);
                status.started(&name);
            }
            (None, None) => {}
        };
        let r = watch_push(
            &opts,
            &wopts,
            &PushOptions::default(),
            Arc::new(Quiet),
            &stop,
            Some(stats.clone()),
            on_round,
        )
        .await;
        stopper.abort();
        if cancel.is_cancelled() {
            return;
        }
        let e = match r {
            Ok(_) => "the push session ended".to_owned(),
            Err(e) => e.to_string(),
        };
        status.failed(&spec.name, &e);
        let wait = backoff(
            status.consecutive_failures(&spec.name),
            shared.limits().backoff_max,
        );
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The republisher of a Source followed by push: the sender of the Source's key after each
/// round, and the task that republishes (none when the aggregator does not republish).
fn push_republisher(
    spec: &SourceSpec,
    shared: &Arc<Shared>,
) -> (
    tokio::sync::watch::Sender<Option<String>>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let (tx, mut rx) = tokio::sync::watch::channel(None::<String>);
    let Some(path) = shared
        .republish()
        .and_then(|_| shared.sqlite_state(&spec.name))
    else {
        return (tx, None);
    };
    let (spec, shared) = (spec.clone(), shared.clone());
    let task = tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let Some(key) = rx.borrow_and_update().clone() else {
                continue;
            };
            let p = path.clone();
            // The push round that asked for it may still hold the state for a moment.
            let state = match tokio::task::spawn_blocking(move || {
                resourcesync_store::SqliteState::open_waiting(&p, crate::shared::STATE_WAIT)
            })
            .await
            {
                Ok(Ok(s)) => Arc::new(s) as Arc<dyn Records>,
                Ok(Err(e)) => {
                    shared.status.republished(&spec.name, Err(e.to_string()));
                    continue;
                }
                Err(e) => {
                    shared.status.republished(&spec.name, Err(e.to_string()));
                    continue;
                }
            };
            republish(&spec, &shared, &key, state).await;
        }
    });
    (tx, Some(task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_limit() {
        let max = Duration::from_secs(3600);
        for (n, base) in [(1u32, 15.0), (2, 30.0), (3, 60.0)] {
            let d = backoff(n, max).as_secs_f64();
            assert!((base * 0.8..=base * 1.2).contains(&d), "{n}: {d}");
        }
        assert!(backoff(40, max) <= max.mul_f64(1.2));
        assert!(backoff(40, Duration::from_secs(60)) <= Duration::from_secs(72));
    }
}
