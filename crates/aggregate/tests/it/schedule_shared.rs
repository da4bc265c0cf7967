//! Workers sharing a PostgreSQL state share one schedule (docs/aggregate.md, "Several
//! workers"): a worker that takes the lease of a Source another worker synced less than its
//! interval ago leaves it until it is due, instead of syncing it once more. PostgreSQL from
//! `scripts/postgres.sh` (`RESOURCESYNC_TEST_POSTGRES`: failing without it).

use std::time::Duration;

use resourcesync_aggregate::status::Phase;
use resourcesync_aggregate::{Aggregator, Options, StateChoice};
use resourcesync_testkit::Server;

use crate::service::{config, publish, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_another_worker_just_synced_is_left_until_due() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("r{i}.txt")), format!("body {i}\n")).expect("write");
    }
    let server = Server::start(dir.path()).await;
    publish(dir.path(), &server.base).await;
    let name = format!("sched_{:08x}", fastrand::u32(..));
    let text = format!(
        "[[source]]\nname = \"{name}\"\nurl = \"{}\"\nschedule = \"1h\"\n",
        server.base
    );
    let store = tempfile::tempdir().expect("store");
    let start = |worker: &str| {
        Aggregator::start(
            &config(&text),
            Options {
                store: store.path().to_owned(),
                state: StateChoice::Postgres(pg.clone()),
                worker: worker.into(),
                object_store: None,
                republish: None,
            },
        )
        .expect("start")
    };
    let first = start("first");
    until(&first, &name, Duration::from_secs(60), |v| v.syncs == 1).await;
    let looked = server.hits("/.well-known/resourcesync");

    // Started after that sync: the lease is free, the Source is not due for an hour.
    let second = start("second");
    let v = until(&second, &name, Duration::from_secs(60), |v| {
        v.phase == Phase::Elsewhere
    })
    .await;
    assert_eq!(v.syncs, 0, "{v:#?}");
    assert!(
        v.recent
            .iter()
            .any(|e| e.kind == "elsewhere" && e.summary.contains("less than its interval")),
        "{v:#?}"
    );
    assert_eq!(
        server.hits("/.well-known/resourcesync"),
        looked,
        "the Source looked at again"
    );
    assert_eq!(first.status().get(&name).expect("first").syncs, 1);
    first.drain(Duration::from_secs(5)).await;
    second.drain(Duration::from_secs(5)).await;
}
