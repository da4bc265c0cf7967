//! The shared download work of several Sources at once: a worker's claimer works
//! on every Source whose queue has items, not one Source after another, so that one slow
//! download of a Source never holds back the queue of another. One worker, a PostgreSQL state
//! (`scripts/postgres.sh`, `RESOURCESYNC_TEST_POSTGRES`): Source `slow`'s queue waits on one
//! body the test holds; Source `quick`, added meanwhile, is copied all the same.

use std::time::{Duration, Instant};

use resourcesync_aggregate::status::Phase;
use resourcesync_aggregate::{Aggregator, Options, StateChoice};
use resourcesync_testkit::Server;

use crate::service::{config, publish};
use crate::share_renew::held_server;

fn text(slow: (&str, &str), quick: Option<(&str, &str)>) -> String {
    let mut t = "[limits]\nlease = \"10s\"\nshare_above = 1\ntimeout = \"120s\"\n\
                 backoff_max = \"1s\"\n"
        .to_owned();
    for (name, url) in std::iter::once(slow).chain(quick) {
        t.push_str(&format!(
            "\n[[source]]\nname = \"{name}\"\nurl = \"{url}\"\nschedule = \"1s\"\nconcurrency = 2\n"
        ));
    }
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_queue_does_not_hold_back_another_sources() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    // `slow`: a few resources and one whose body is held.
    let slow_dir = tempfile::tempdir().expect("tempdir");
    for i in 0..3 {
        std::fs::write(
            slow_dir.path().join(format!("s{i}.txt")),
            format!("slow {i}\n"),
        )
        .expect("write");
    }
    std::fs::write(slow_dir.path().join("slow.txt"), "held ".repeat(4000)).expect("write");
    let slow = held_server(slow_dir.path()).await;
    publish(slow_dir.path(), &slow.base).await;
    // `quick`: resources served at once.
    let quick_dir = tempfile::tempdir().expect("tempdir");
    let quick = Server::start(quick_dir.path()).await;
    for i in 0..5 {
        std::fs::write(
            quick_dir.path().join(format!("q{i}.txt")),
            format!("quick {i}\n"),
        )
        .expect("write");
    }
    publish(quick_dir.path(), &quick.base).await;

    // Schemas of this run only (`agg_NAME`).
    let run = format!("{:08x}", fastrand::u32(..));
    let (slow_name, quick_name) = (format!("slow_{run}"), format!("quick_{run}"));
    let store = tempfile::tempdir().expect("store");
    // Another worker alive, busy elsewhere: both Sources' fetches are queued (a worker alone
    // does them itself), for this worker's claimer.
    crate::share_alone::other_worker_alive(&pg, &slow_name);
    crate::share_alone::other_worker_alive(&pg, &quick_name);
    let agg = Aggregator::start(
        &config(&text((&slow_name, &slow.base), None)),
        Options {
            store: store.path().to_owned(),
            state: StateChoice::Postgres(pg),
            worker: "sources".into(),
            object_store: None,
            republish: None,
        },
    )
    .expect("start");

    // The slow download has begun: `slow`'s queue is being worked on, and will not empty
    // until the body is released.
    let end = Instant::now() + Duration::from_secs(60);
    while slow.hits("/slow.txt") == 0 {
        assert!(
            Instant::now() < end,
            "the slow resource was never asked for"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // `quick` is added: its sync queues its fetches, which this worker's claimer must take
    // while `slow`'s queue still waits.
    agg.reload(&config(&text(
        (&slow_name, &slow.base),
        Some((&quick_name, &quick.base)),
    )))
    .expect("reload");
    let quick_done = |agg: &Aggregator| {
        agg.status().get(&quick_name).is_some_and(|v| {
            v.phase == Phase::Following && v.resources == 5 && v.last_error.is_none()
        })
    };
    let end = Instant::now() + Duration::from_secs(30);
    while !quick_done(&agg) {
        assert!(
            Instant::now() < end,
            "`quick` was not copied while `slow` waited: {:#?}",
            agg.status().get(&quick_name)
        );
        assert_eq!(slow.hits("/slow.txt"), 1, "fetched again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        agg.status().get(&slow_name).is_some_and(|v| v.running),
        "`slow` ended before its body was released"
    );

    // Released, `slow` completes too.
    slow.release.send_replace(true);
    let end = Instant::now() + Duration::from_secs(60);
    while !agg.status().get(&slow_name).is_some_and(|v| {
        v.phase == Phase::Following && !v.running && v.resources == 4 && v.last_error.is_none()
    }) {
        assert!(
            Instant::now() < end,
            "`slow` not synced: {:#?}",
            agg.status().get(&slow_name)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    agg.drain(Duration::from_secs(30)).await;
    assert_eq!(slow.hits("/slow.txt"), 1);
}
