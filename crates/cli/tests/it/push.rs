//! End to end over WebSub (Change Notification 1.0.1): a Source with an embedded hub, a
//! Destination following it with `watch_push`. A file written at the Source reaches the copy,
//! verified, through a notification (the safety-net poll is set to an hour); forged, replayed,
//! out-of-order and gap payloads are handled as the module docs of `push` say. Waiting is by
//! polling with a deadline, never by sleeping a fixed time.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use resourcesync_destination::{
    PushOptions, PushStats, Quiet, StopHandle, SyncOptions, WatchOptions,
};
use resourcesync_source::server::{self, HubChoice, ServeOptions};
use resourcesync_source::watch::WatchOptions as SourceWatch;
use resourcesync_source::{Source, SourceConfig};
use resourcesync_websub::signature;

const DEADLINE: Duration = Duration::from_secs(30);

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + DEADLINE;
    while !f() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn payload(base: &str, from: &str, until: &str, loc: &str, dt: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
<rs:md capability="change-notification" from="{from}" until="{until}"/>
<url><loc>{base}{loc}</loc><rs:md change="created" datetime="{dt}" length="4"/></url>
</urlset>"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_at_the_source_reaches_the_destination_by_push() {
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    std::fs::write(src_dir.path().join("before.txt"), "present at the start").unwrap();
    let listener = server::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let mut cfg = SourceConfig::new(src_dir.path(), &base);
    server::prepare_config(&mut cfg);
    let source = Source::open(cfg).unwrap();
    let sopts = ServeOptions {
        watch: SourceWatch {
            debounce: Duration::from_millis(20),
            ..SourceWatch::default()
        },
        ..ServeOptions::default()
    };
    let running = server::start_with(source, listener, sopts, Some(HubChoice::Embedded))
        .await
        .unwrap();
    let hub = running.hub().unwrap().clone();

    let mut opts = SyncOptions::new(base.clone(), dst_dir.path());
    opts.concurrency = 4;
    let popts = PushOptions {
        poll_interval: Duration::from_secs(3600),
        ..PushOptions::default()
    };
    let stop = StopHandle::new();
    let stats = Arc::new(PushStats::default());
    let rounds = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let task = {
        let (stop, stats, rounds) = (stop.clone(), stats.clone(), rounds.clone());
        tokio::spawn(async move {
            resourcesync_destination::watch_push(
                &opts,
                &WatchOptions::default(),
                &popts,
                Arc::new(Quiet),
                &stop,
                Some(stats),
                |_| {
                    rounds.fetch_add(1, Ordering::SeqCst);
                },
            )
            .await
        })
    };
    let before = dst_dir.path().join("before.txt");
    until("the baseline", || before.exists()).await;
    until("the subscription", || {
        stats.subscribed.load(Ordering::Relaxed) >= 1
    })
    .await;
    // Round 1 the baseline, round 2 the catch-up after subscribing.
    until("the catch-up after subscribing", || {
        rounds.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert_eq!(stats.catch_ups.load(Ordering::Relaxed), 1);

    // A write at the Source: detected by the watcher, pushed, applied.
    std::fs::write(src_dir.path().join("new.txt"), "pushed content").unwrap();
    let new = dst_dir.path().join("new.txt");
    until("the pushed copy", || {
        std::fs::read(&new).ok().as_deref() == Some(b"pushed content".as_slice())
    })
    .await;
    until("the notification applied", || {
        stats.applied.load(Ordering::Relaxed) >= 1
    })
    .await;
    assert_eq!(
        stats.catch_ups.load(Ordering::Relaxed),
        1,
        "no poll was needed"
    );

    // Forged deliveries: no signature, a wrong one. Nothing applied.
    let subs = hub.subscriptions().unwrap();
    let sub = subs
        .iter()
        .find(|s| s.topic.ends_with("change-notification"))
        .unwrap();
    let secret = sub.secret.clone().unwrap();
    let client = resourcesync_websub::hub::http_client(Duration::from_secs(10)).unwrap();
    let forged = payload(
        &base,
        "2000-01-01T00:00:00Z",
        "2999-01-01T00:00:00Z",
        "evil.txt",
        "2998-01-01T00:00:00Z",
    );
    let r = client
        .post(&sub.callback)
        .header("content-type", "application/xml")
        .body(forged.clone())
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success(),
        "acknowledged (WebSub §7.1.2) but ignored"
    );
    let r = client
        .post(&sub.callback)
        .header("content-type", "application/xml")
        .header(
            "x-hub-signature",
            signature::sign(b"not the secret", forged.as_bytes()),
        )
        .body(forged.clone())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    until("two rejections", || {
        stats.rejected.load(Ordering::Relaxed) == 2
    })
    .await;
    // A delivery to a callback path this process does not hold: 410.
    let other = format!("{}x", sub.callback);
    let r = client.post(&other).body("x").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 410);

    // Replayed / out-of-order: a correctly signed payload older than the cursor changes nothing.
    let old = payload(
        &base,
        "2001-01-01T00:00:00Z",
        "2001-01-01T00:00:01Z",
        "old.txt",
        "2001-01-01T00:00:01Z",
    );
    let stale_before = stats.stale.load(Ordering::Relaxed);
    let r = client
        .post(&sub.callback)
        .header("content-type", "application/xml")
        .header("x-hub-signature", signature::sign(&secret, old.as_bytes()))
        .body(old)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    until("the stale payload", || {
        stats.stale.load(Ordering::Relaxed) > stale_before
    })
    .await;
    assert!(!dst_dir.path().join("old.txt").exists());

    // A gap (from after the cursor): a catch-up from the Change List before anything else.
    let gap = payload(
        &base,
        "2999-01-01T00:00:00Z",
        "2999-01-01T00:00:01Z",
        "never.txt",
        "2999-01-01T00:00:01Z",
    );
    let r = client
        .post(&sub.callback)
        .header("content-type", "application/xml")
        .header("x-hub-signature", signature::sign(&secret, gap.as_bytes()))
        .body(gap)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    until("the gap", || stats.gaps.load(Ordering::Relaxed) >= 1).await;
    until("the catch-up", || {
        stats.catch_ups.load(Ordering::Relaxed) >= 2
    })
    .await;
    // Its entry names a resource the Source does not have: the fetch fails, nothing written.
    assert!(!dst_dir.path().join("never.txt").exists());
    assert!(!dst_dir.path().join("evil.txt").exists());

    // Pushes still work after all that (the gap payload's future `until` did not move the
    // cursor past the present).
    let applied = stats.applied.load(Ordering::Relaxed);
    std::fs::write(src_dir.path().join("new.txt"), "pushed content, updated").unwrap();
    until("the pushed update", || {
        std::fs::read(&new).ok().as_deref() == Some(b"pushed content, updated".as_slice())
    })
    .await;
    until("the update applied from its notification", || {
        stats.applied.load(Ordering::Relaxed) > applied
    })
    .await;

    stop.stop();
    let total = tokio::time::timeout(DEADLINE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(total.created >= 2);
    // The destination unsubscribed on the way out.
    until("the unsubscription", || {
        hub.subscriptions()
            .unwrap()
            .iter()
            .all(|s| !s.topic.ends_with("change-notification"))
    })
    .await;
    running.shutdown().await.unwrap();
}
