//! A Source followed by push (`schedule = "push"`; Change Notification 1.0.1): our `serve`
//! with its embedded WebSub hub. The aggregator baselines it, a file written at the Source
//! reaches the copy through a notification, and each round is republished: the change shows
//! in the aggregator's own Change List (Z39.99-2014 §12, §14.8).

use std::time::{Duration, Instant};

use resourcesync_model::Capability;
use resourcesync_source::server::{self, HubChoice, ServeOptions};
use resourcesync_source::watch::WatchOptions as SourceWatch;
use resourcesync_source::{Source, SourceConfig};

use crate::republish::{aggregator, document, named};
use crate::service::{hand_written, start_local, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_followed_by_push_is_copied_and_republished() {
    let src = tempfile::tempdir().expect("tempdir");
    std::fs::write(src.path().join("before.txt"), "present at the start\n").expect("write");
    let listener = server::bind("127.0.0.1:0").await.expect("bind");
    let origin = format!("http://{}/", listener.local_addr().expect("addr"));
    let mut cfg = SourceConfig::new(src.path(), &origin);
    server::prepare_config(&mut cfg);
    let source = Source::open(cfg).expect("source");
    let sopts = ServeOptions {
        watch: SourceWatch {
            debounce: Duration::from_millis(20),
            ..SourceWatch::default()
        },
        ..ServeOptions::default()
    };
    let _running = server::start_with(source, listener, sopts, Some(HubChoice::Embedded))
        .await
        .expect("serve");
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"pushed\"\nurl = \"{origin}.well-known/resourcesync\"\nschedule = \"push\"\n"
    );
    let (agg, base) = aggregator(&text, store.path()).await;
    let limit = Duration::from_secs(60);
    let v = until(&agg, "pushed", limit, |v| {
        v.resources == 1 && v.republishes >= 1
    })
    .await;
    assert!(v.republish_error.is_none(), "{v:#?}");
    let first = v.republishes;

    // A file written at the Source: the notification brings it (the Destination's safety-net
    // poll is far off), and the round is republished.
    std::fs::write(src.path().join("pushed.txt"), "arrived by push\n").expect("write");
    let v = until(&agg, "pushed", limit, |v| {
        v.resources == 2 && v.republishes > first
    })
    .await;
    assert!(v.republish_error.is_none(), "{v:#?}");
    assert_eq!(
        std::fs::read(store.path().join("pushed/pushed.txt")).expect("copy"),
        b"arrived by push\n"
    );
    // The republish of the round that applied the notification may still be running (a
    // republish counted above may be an earlier round's): read the Change Lists again after
    // each republish until they list the change, within the limit.
    let end = Instant::now() + limit;
    let mut seen = v.republishes;
    loop {
        let (found, changes) = pushed_change_republished(&base).await;
        if found {
            break;
        }
        assert!(
            Instant::now() < end,
            "the pushed change in the republished Change Lists: {changes:?}"
        );
        seen = until(&agg, "pushed", limit, |v| v.republishes > seen)
            .await
            .republishes;
    }
}

/// Whether the aggregator's republished Change Lists list `pushed.txt`, and the entries of the
/// Change List its Capability List names.
async fn pushed_change_republished(base: &str) -> (bool, Vec<resourcesync_model::Entry>) {
    let (_, caps) = document(&format!("{base}rs/pushed/resourcesync/capabilitylist.xml")).await;
    let (_, changes) = document(&named(&caps, Capability::ChangeList)).await;
    // The index's lists (or the entries of the list itself).
    let mut found = changes.iter().any(|e| e.loc.ends_with("/pushed.txt"));
    for e in changes.iter().filter(|e| e.loc.ends_with(".xml")) {
        let (_, inner) = document(&e.loc).await;
        found |= inner
            .iter()
            .any(|i| i.loc == format!("{base}rs/pushed/pushed.txt"));
    }
    (found, changes)
}

/// A Source configured for push whose Capability List names no hub (Change Notification 1.0.1
/// §5): the aggregator polls its Change Lists instead, and says so once in the log (naming the
/// Source, the interval and what to do), on the page and in the JSON API; its polls are
/// counted as polls, not as syncs nor as notifications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_source_without_a_hub_is_polled_and_says_so() {
    crate::logs::capture();
    let src = hand_written().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"nohub\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"push\"\n",
        src.base
    );
    let agg = start_local(&text, store.path());
    // Its first sync, then polls every 10 s (the Destination's watch interval): two of them.
    let v = until(&agg, "nohub", Duration::from_secs(60), |v| v.polls >= 2).await;
    assert_eq!(v.mode, "push (no hub: polling every 10s)", "{v:#?}");
    assert_eq!(v.schedule, "push");
    assert_eq!((v.syncs, v.notifications), (1, 0), "{v:#?}");
    assert_eq!((v.resources, v.bytes), (2, 22), "{v:#?}");
    let warned = crate::logs::lines_with(&["nohub", "polled every 10s", "hub"]);
    assert_eq!(warned.len(), 1, "one warning: {warned:#?}");
    assert!(
        warned[0].contains("WARN") && warned[0].contains("schedule ="),
        "{}",
        warned[0]
    );

    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;
    let page = reqwest::get(format!("http://{web}/"))
        .await
        .expect("GET /")
        .text()
        .await
        .expect("page");
    assert!(
        page.contains("<td>push (no hub: polling every 10s)</td>"),
        "{page}"
    );
    let one = reqwest::get(format!("http://{web}/sources/nohub"))
        .await
        .expect("GET")
        .text()
        .await
        .expect("page");
    assert!(one.contains("push (no hub: polling every 10s)"), "{one}");
    let api: serde_json::Value = reqwest::get(format!("http://{web}/api/sources/nohub"))
        .await
        .expect("GET")
        .text()
        .await
        .map(|t| serde_json::from_str(&t).expect("json"))
        .expect("body");
    assert_eq!(api["mode"], "push (no hub: polling every 10s)", "{api}");
    assert_eq!(api["notifications"], 0, "{api}");
    let metrics = reqwest::get(format!("http://{web}/metrics"))
        .await
        .expect("GET")
        .text()
        .await
        .expect("metrics");
    assert!(
        metrics.contains("resourcesync_aggregate_push_polling{source=\"nohub\"} 1"),
        "{metrics}"
    );
    agg.drain(Duration::from_secs(5)).await;
}
