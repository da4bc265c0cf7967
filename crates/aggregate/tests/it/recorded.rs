//! Counts after a restart: a Source's resources and bytes come from what its state records,
//! not from the memory of the process that synced it. Two services in sequence over the same
//! store (and the per-Source SQLite states in it); the second starts with the Source gone, so
//! none of its syncs succeeds, and shows what the first copied anyway.

use crate::service::start_local;
use std::sync::Arc;
use std::time::Duration;

use resourcesync_aggregate::Aggregator;
use resourcesync_aggregate::status::Phase;

use resourcesync_testkit::Reply;

use crate::service::{hand_written, until};

async fn api(agg: &Arc<Aggregator>) -> serde_json::Value {
    let web = resourcesync_testkit::serve(resourcesync_aggregate::web::router(agg.clone())).await;
    reqwest::get(format!("http://{web}/api/sources"))
        .await
        .expect("GET")
        .text()
        .await
        .map(|t| serde_json::from_str(&t).expect("json"))
        .expect("body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_bytes_survive_a_restart() {
    let src = hand_written().await;
    let store = tempfile::tempdir().expect("store");
    // One Source by interval, one by push (it has no hub: polled); both copy the two resources
    // (15 + 7 bytes).
    let text = format!(
        "[[source]]\nname = \"interval\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"1h\"\n\n\
         [[source]]\nname = \"pushed\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"push\"\n",
        b = src.base
    );
    let limit = Duration::from_secs(60);
    let first = start_local(&text, store.path());
    for name in ["interval", "pushed"] {
        let v = until(&first, name, limit, |v| {
            v.phase == Phase::Following && v.resources == 2 && v.bytes == 22
        })
        .await;
        assert_eq!(v.fetched_bytes, 22, "{v:#?}");
    }
    let before = api(&first).await;
    first.drain(Duration::from_secs(5)).await;
    drop(first);
    // The Source is gone (404 for every document): the second service's syncs fail; the
    // counts it shows are the state's.
    for path in ["/.well-known/resourcesync", "/caps.xml", "/list.xml"] {
        src.route(path, Reply::status(404));
    }

    let second = start_local(&text, store.path());
    for name in ["interval", "pushed"] {
        let v = until(&second, name, limit, |v| v.resources == 2 && v.bytes == 22).await;
        assert!(v.last_success.is_none(), "no sync succeeded: {v:#?}");
        assert_eq!((v.syncs, v.fetched_bytes), (0, 0), "{v:#?}");
    }
    let after = api(&second).await;
    for i in 0..2 {
        for key in ["name", "resources", "bytes"] {
            assert_eq!(before[i][key], after[i][key], "{key}: {before} / {after}");
        }
    }
    second.drain(Duration::from_secs(5)).await;
}
