//! The delivery worker (WebSub §7): due deliveries are started one at a time per subscription,
//! at most [`HubOptions::concurrency`](super::HubOptions::concurrency) in all and at most
//! [`HubOptions::max_deliveries_per_host`](super::HubOptions::max_deliveries_per_host) per
//! callback host, so that callbacks that answer slowly (or never, until the time limit) hold at
//! most their host's share and every other host's deliveries go on. A delivery still
//! unanswered after [`HubOptions::slow_delivery_after`](super::HubOptions::slow_delivery_after)
//! gives its slot back and waits in one of the slow slots, so that slow callbacks on many hosts
//! (host names cost an attacker little) cannot take every slot either.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{StatusCode, header};
use url::Url;

use super::{HubEvent, Inner, chain};
use crate::store::Due;
use crate::{link, now_ms, now_secs, signature};

/// The host a callback's deliveries are counted under: its host as parsed (lower-case), without
/// the port (ports on one host cost an attacker nothing).
fn host_key(callback: &str) -> String {
    Url::parse(callback)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default()
}

/// What is in flight now: the subscriptions and the count per host.
fn snapshot(hub: &Inner) -> (HashSet<i64>, HashMap<String, usize>) {
    hub.busy
        .lock()
        .map(|b| (b.subs.clone(), b.hosts.clone()))
        .unwrap_or_default()
}

/// A filter for [`crate::store::Store::due`]: not a subscription in flight, not a host at its
/// cap (counting those taken by this filter).
fn admits(hub: &Inner) -> impl FnMut(i64, &str) -> bool {
    let (subs, mut hosts) = snapshot(hub);
    let cap = hub.opts.max_deliveries_per_host.max(1);
    move |sub, callback| {
        if subs.contains(&sub) {
            return false;
        }
        let n = hosts.entry(host_key(callback)).or_insert(0);
        if *n >= cap {
            return false;
        }
        *n += 1;
        true
    }
}

/// The delivery loop: starts the due deliveries (one per subscription at a time, a bounded
/// number per callback host), sleeps until the next is due or something is queued or
/// finished, sweeps expired leases.
pub(super) async fn worker(hub: Arc<Inner>) {
    let mut stop = hub.stop.subscribe();
    let mut last_sweep = 0i64;
    loop {
        if *stop.borrow() {
            break;
        }
        let now = now_secs();
        if now != last_sweep {
            last_sweep = now;
            match hub.store.expire(now) {
                Ok(gone) => {
                    for (topic, callback) in gone {
                        hub.emit(HubEvent::Expired { topic, callback });
                    }
                }
                Err(e) => tracing::error!("hub: expiring leases: {e}"),
            }
        }
        // Only this loop takes delivery permits: those free now stay free until it does.
        let free = hub.deliveries.available_permits();
        let due = match hub.store.due(now_ms(), free, admits(&hub)) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("hub: reading the queue: {e}");
                Vec::new()
            }
        };
        for d in due {
            let Ok(permit) = hub.deliveries.clone().try_acquire_owned() else {
                break;
            };
            if let Ok(mut b) = hub.busy.lock() {
                b.subs.insert(d.sub_id);
                *b.hosts.entry(host_key(&d.callback)).or_insert(0) += 1;
            }
            let h = hub.clone();
            tokio::spawn(async move {
                deliver(&h, d, permit).await;
                h.wake.notify_one();
            });
        }
        let next = hub.store.next_due(admits(&hub)).ok().flatten();
        // At most a second between sweeps of expired leases.
        let wait_ms = next.map(|t| (t - now_ms()).clamp(0, 1000)).unwrap_or(1000);
        if wait_ms == 0 && next.is_some() {
            // Due now but every permit may be taken: wait for a delivery to finish.
            tokio::select! {
                () = hub.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop.changed() => break,
            }
            continue;
        }
        tokio::select! {
            () = hub.wake.notified() => {}
            () = tokio::time::sleep(Duration::from_millis(wait_ms as u64)) => {}
            _ = stop.changed() => break,
        }
    }
}

/// Sends a delivery holding `permit` (a delivery slot); past
/// [`HubOptions::slow_delivery_after`](super::HubOptions::slow_delivery_after) without an
/// answer, the slot is given back for a slow one, when one is free.
async fn send(
    hub: &Inner,
    req: reqwest::RequestBuilder,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> reqwest::Result<reqwest::Response> {
    let sending = req.send();
    tokio::pin!(sending);
    let mut _held = permit;
    tokio::select! {
        r = &mut sending => return r,
        () = tokio::time::sleep(hub.opts.slow_delivery_after) => {}
    }
    if let Ok(slow) = hub.slow.clone().try_acquire_owned() {
        // The ordinary slot goes back to the others now.
        _held = slow;
        hub.wake.notify_one();
    }
    sending.await
}

/// One content distribution request (WebSub §7, §7.1).
async fn deliver(hub: &Inner, mut d: Due, permit: tokio::sync::OwnedSemaphorePermit) {
    let links = link::notification_links(&d.topic, &hub.opts.public_url, None);
    let mut req = hub
        .client
        .post(&d.callback)
        .header(header::CONTENT_TYPE, d.content_type.as_str())
        .header(header::LINK, links);
    if let Some(secret) = &d.secret {
        req = req.header(signature::HEADER, signature::sign(secret, &d.body));
    }
    // A callback subscribed while private addresses were allowed (an earlier run): an address
    // literal does not go through the resolver that keeps them out.
    let refused = if hub.opts.private_addresses {
        None
    } else {
        Url::parse(&d.callback)
            .ok()
            .and_then(|u| crate::reach::check_public_url("the callback", &u).err())
    };
    let attempts = d.attempts + 1;
    let outcome = match refused {
        Some(why) => Err(Some(why)),
        None => match send(hub, req.body(std::mem::take(&mut d.body)), permit).await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) if r.status() == StatusCode::GONE => Err(None),
            Ok(r) => Err(Some(format!("the callback answered {}", r.status()))),
            Err(e) if e.is_timeout() => Err(Some("no answer in time".to_owned())),
            Err(e) => Err(Some(chain(&e))),
        },
    };
    let recorded = match outcome {
        Ok(()) => hub.store.delivered(d.id).map(|()| {
            hub.emit(HubEvent::Delivered {
                topic: d.topic.clone(),
                callback: d.callback.clone(),
                attempts,
            })
        }),
        // §7: 410 Gone: the subscription was deleted by the subscriber.
        Err(None) => hub.store.remove_id(d.sub_id).map(|()| {
            hub.emit(HubEvent::Gone {
                topic: d.topic.clone(),
                callback: d.callback.clone(),
            })
        }),
        Err(Some(reason)) => {
            let next = now_ms() + hub.backoff(d.attempts).as_millis() as i64;
            hub.store.failed(d.id, next).map(|()| {
                hub.emit(HubEvent::DeliveryFailed {
                    topic: d.topic.clone(),
                    callback: d.callback.clone(),
                    attempts,
                    reason,
                })
            })
        }
    };
    if let Err(e) = recorded {
        tracing::error!("hub: recording a delivery: {e}");
    }
    if let Ok(mut b) = hub.busy.lock() {
        b.subs.remove(&d.sub_id);
        let key = host_key(&d.callback);
        if let Some(n) = b.hosts.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                b.hosts.remove(&key);
            }
        }
    }
}
