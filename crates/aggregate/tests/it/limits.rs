//! Per-Source include and exclude patterns, and the bandwidth limit shared by every Source
//! (`include`/`exclude` of a `[[source]]`, `limits.bandwidth`).

use crate::service::start_local;
use std::time::{Duration, Instant};

use resourcesync_aggregate::status::Phase;
use resourcesync_testkit::Server;

use crate::service::{publish, until};

/// A directory of `files` published and served.
async fn source(files: &[(&str, Vec<u8>)]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path()).await;
    for (rel, body) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, body).expect("write");
    }
    publish(dir.path(), &server.base).await;
    (server, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_is_copied_through_its_patterns() {
    let (server, _dir) = source(&[
        ("objects/1.jpg", b"one".to_vec()),
        ("objects/2.tif", b"two".to_vec()),
        ("objects/private/3.jpg", b"three".to_vec()),
        ("about.html", b"about".to_vec()),
    ])
    .await;
    let store = tempfile::tempdir().expect("store");
    let agg = start_local(
        &format!(
            r#"
[[source]]
name = "museum"
url = "{b}"
include = ["{b}objects/*"]
exclude = ["*.tif", "*/private/*"]
"#,
            b = server.base
        ),
        store.path(),
    );
    let v = until(&agg, "museum", Duration::from_secs(60), |v| {
        v.phase == Phase::Following
    })
    .await;
    assert_eq!(v.resources, 1, "{v:#?}");
    let copy = store.path().join("museum");
    assert_eq!(
        std::fs::read(copy.join("objects/1.jpg")).expect("copy"),
        b"one"
    );
    for left_out in ["objects/2.tif", "objects/private/3.jpg", "about.html"] {
        assert!(!copy.join(left_out).exists(), "{left_out} copied");
        assert_eq!(
            server.hits(&format!("/{left_out}")),
            0,
            "{left_out} fetched"
        );
    }
}

/// Two Sources of 150 kB each under a limit of 100 kB/s over both: the baselines take at
/// least the 2.9 s that 290 kB (past the 10 kB burst) take at that rate, where each Source
/// alone at the full rate would take half of it and no limit a few milliseconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bandwidth_limit_is_shared_by_every_source() {
    let body = |seed: u8| {
        (0..30_000u32)
            .map(|i| (i as u8) ^ seed)
            .collect::<Vec<u8>>()
    };
    let files: Vec<(String, Vec<u8>)> = (0..5).map(|i| (format!("f{i}.bin"), body(i))).collect();
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(n, b)| (n.as_str(), b.clone())).collect();
    let (a, _da) = source(&files).await;
    let (b, _db) = source(&files).await;
    let store = tempfile::tempdir().expect("store");
    let started = Instant::now();
    let agg = start_local(
        &format!(
            r#"
[limits]
bandwidth = "100kB/s"

[[source]]
name = "a"
url = "{}"

[[source]]
name = "b"
url = "{}"
"#,
            a.base, b.base
        ),
        store.path(),
    );
    for name in ["a", "b"] {
        let v = until(&agg, name, Duration::from_secs(60), |v| {
            v.phase == Phase::Following
        })
        .await;
        assert_eq!(v.resources, 5, "{v:#?}");
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2_900),
        "300 kB arrived in {took:?}: faster than 100 kB/s over both Sources"
    );
    for name in ["a", "b"] {
        for (rel, body) in &files {
            assert_eq!(
                &std::fs::read(store.path().join(name).join(rel)).expect("copy"),
                body
            );
        }
    }
}

/// `limits.concurrency` lets syncs through in the configuration's order: the first round is
/// the order of the `[[source]]` tables (a user puts the largest first to finish a first
/// harvest sooner, docs/aggregate.md), not the order the runtime first polls the followers in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_start_in_the_configurations_order() {
    const N: usize = 12;
    let mut servers = Vec::new();
    for _ in 0..N {
        let s = crate::service::hand_written().await;
        // Each sync lasts at least this: one runs at a time, so each is seen running.
        s.route(
            "/x/one.txt",
            resourcesync_testkit::Reply::ok(b"first resource\n".to_vec())
                .delayed(Duration::from_millis(100)),
        );
        servers.push(s);
    }
    let mut text = String::from("[limits]\nconcurrency = 1\n\n");
    for (i, s) in servers.iter().enumerate() {
        text.push_str(&format!(
            "[[source]]\nname = \"s{i}\"\nurl = \"{}\"\nschedule = \"1h\"\n\n",
            s.base
        ));
    }
    let store = tempfile::tempdir().expect("store");
    let agg = start_local(&text, store.path());
    let end = Instant::now() + Duration::from_secs(60);
    let mut order: Vec<usize> = Vec::new();
    while order.len() < N {
        for i in 0..N {
            let v = agg.status().get(&format!("s{i}")).expect("registered");
            if !order.contains(&i) && (v.running || v.syncs > 0 || v.failures > 0) {
                order.push(i);
            }
        }
        assert!(Instant::now() < end, "started so far: {order:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        order,
        (0..N).collect::<Vec<_>>(),
        "the order syncs started in"
    );
    for i in 0..N {
        let v = agg.status().get(&format!("s{i}")).expect("registered");
        assert!(v.failures == 0, "{v:#?}");
    }
}
