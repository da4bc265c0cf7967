//! End to end over WebSub (Change Notification 1.0.1): a Source with an embedded hub, a
//! Destination following it with `watch_push`. A file written at the Source reaches the copy,
//! verified, through a notification (the safety-net poll is set to an hour); forged, replayed,
//! out-of-order and gap payloads are handled as the module docs of `push` say. Waiting is by
//! polling with a deadline, never by sleeping a fixed time.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use resourcesync_destination::{
    PushOptions, PushStats, Quiet, StopHandle, SyncOptions, WatchOptions, WatchReport,
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

/// A Source served with its embedded hub (a short debounce); the server and its base URL.
async fn start_source(dir: &Path) -> (server::Running, String) {
    let listener = server::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let mut cfg = SourceConfig::new(dir, &base);
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
    (running, base)
}

/// A Destination following `base` into `dest` by push (the safety-net poll an hour away).
struct Follower {
    stop: StopHandle,
    stats: Arc<PushStats>,
    /// Rounds completed.
    rounds: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<resourcesync_destination::Result<WatchReport>>,
}

fn follow(base: &str, dest: &Path) -> Follower {
    let mut opts = SyncOptions::new(base, dest);
    opts.concurrency = 4;
    let popts = PushOptions {
        poll_interval: Duration::from_secs(3600),
        ..PushOptions::default()
    };
    let stop = StopHandle::new();
    let stats = Arc::new(PushStats::default());
    let rounds = Arc::new(AtomicU64::new(0));
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
    Follower {
        stop,
        stats,
        rounds,
        task,
    }
}

/// Posts a notification to a subscriber's callback, signed with `signature` if given.
async fn deliver(
    client: &reqwest::Client,
    callback: &str,
    body: &str,
    signature: Option<String>,
) -> reqwest::StatusCode {
    let mut req = client
        .post(callback)
        .header("content-type", "application/xml");
    if let Some(sig) = signature {
        req = req.header("x-hub-signature", sig);
    }
    req.body(body.to_owned()).send().await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_at_the_source_reaches_the_destination_by_push() {
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    std::fs::write(src_dir.path().join("before.txt"), "present at the start").unwrap();
    let (running, base) = start_source(src_dir.path()).await;
    let hub = running.hub().unwrap().clone();
    let f = follow(&base, dst_dir.path());
    let stats = &f.stats;
    let before = dst_dir.path().join("before.txt");
    until("the baseline", || before.exists()).await;
    until("the subscription", || {
        stats.subscribed.load(Ordering::Relaxed) >= 1
    })
    .await;
    // Round 1 the baseline, round 2 the catch-up after subscribing.
    until("the catch-up after subscribing", || {
        f.rounds.load(Ordering::SeqCst) >= 2
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

    let subs = hub.subscriptions().unwrap();
    let sub = subs
        .iter()
        .find(|s| s.topic.ends_with("change-notification"))
        .unwrap();
    let secret = sub.secret.clone().unwrap();
    let client = resourcesync_websub::hub::http_client(Duration::from_secs(10)).unwrap();
    forged_deliveries_are_rejected(&client, &sub.callback, &base, stats).await;
    a_stale_payload_changes_nothing(&client, &sub.callback, &secret, &base, stats).await;
    assert!(!dst_dir.path().join("old.txt").exists());
    a_gap_catches_up(&client, &sub.callback, &secret, &base, stats).await;
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

    f.stop.stop();
    let total = tokio::time::timeout(DEADLINE, f.task)
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

/// Forged deliveries: no signature, a wrong one. Nothing applied; a delivery to a callback
/// path this process does not hold: 410.
async fn forged_deliveries_are_rejected(
    client: &reqwest::Client,
    callback: &str,
    base: &str,
    stats: &PushStats,
) {
    let forged = payload(
        base,
        "2000-01-01T00:00:00Z",
        "2999-01-01T00:00:00Z",
        "evil.txt",
        "2998-01-01T00:00:00Z",
    );
    let status = deliver(client, callback, &forged, None).await;
    assert!(
        status.is_success(),
        "acknowledged (WebSub §7.1.2) but ignored"
    );
    let wrong = signature::sign(b"not the secret", forged.as_bytes());
    let status = deliver(client, callback, &forged, Some(wrong)).await;
    assert!(status.is_success());
    until("two rejections", || {
        stats.rejected.load(Ordering::Relaxed) == 2
    })
    .await;
    let other = format!("{callback}x");
    let r = client.post(&other).body("x").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 410);
}

/// Replayed / out-of-order: a correctly signed payload older than the cursor changes nothing.
async fn a_stale_payload_changes_nothing(
    client: &reqwest::Client,
    callback: &str,
    secret: &[u8],
    base: &str,
    stats: &PushStats,
) {
    let old = payload(
        base,
        "2001-01-01T00:00:00Z",
        "2001-01-01T00:00:01Z",
        "old.txt",
        "2001-01-01T00:00:01Z",
    );
    let stale_before = stats.stale.load(Ordering::Relaxed);
    let signed = signature::sign(secret, old.as_bytes());
    let status = deliver(client, callback, &old, Some(signed)).await;
    assert!(status.is_success());
    until("the stale payload", || {
        stats.stale.load(Ordering::Relaxed) > stale_before
    })
    .await;
}

/// A gap (from after the cursor): a catch-up from the Change List before anything else.
async fn a_gap_catches_up(
    client: &reqwest::Client,
    callback: &str,
    secret: &[u8],
    base: &str,
    stats: &PushStats,
) {
    let gap = payload(
        base,
        "2999-01-01T00:00:00Z",
        "2999-01-01T00:00:01Z",
        "never.txt",
        "2999-01-01T00:00:01Z",
    );
    let signed = signature::sign(secret, gap.as_bytes());
    let status = deliver(client, callback, &gap, Some(signed)).await;
    assert!(status.is_success());
    until("the gap", || stats.gaps.load(Ordering::Relaxed) >= 1).await;
    until("the catch-up", || {
        stats.catch_ups.load(Ordering::Relaxed) >= 2
    })
    .await;
}
