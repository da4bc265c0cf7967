//! The wide-area start: a first sync spends few round trips before its downloads run at the
//! window the link needs (docs/wide-area.md).
//!
//! - Discovery from a site root asks for the root and its well-known URI together
//!   (Z39.99-2014 §6.3.2): a root is seldom a ResourceSync document, and the well-known URI is
//!   where its discovery goes next.
//! - The Change List (and its index) of a first baseline is read beside the Resource List, as
//!   soon as the Capability List names it, not after the downloads (crate::sync::ahead; its
//!   conditional reading at the end: `catch_up_ahead.rs`), and asked for again beside the last
//!   downloads, not after them.
//! - The downloads start at the number in flight the round trip measured by the discovery's
//!   answers asks for (`resourcesync_http::adaptive::START_RATE`), not at 32 growing a quarter
//!   per round trip.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use resourcesync_destination::{Quiet, sync};
use resourcesync_testkit::wan::{Wan, WanProxy};

fn files(n: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 10),
                format!("file {i}").into_bytes(),
            )
        })
        .collect()
}

fn write(src: &std::path::Path, n: usize) {
    let files = files(n);
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    write_tree(src, &refs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_root_and_its_well_known_uri_are_asked_for_together() {
    let src = tmp();
    write(src.path(), 3);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    // The root never answers: only a discovery that asks for the well-known URI without
    // waiting for the root's answer reaches it.
    server.fault("/", Fault::Stall);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let run = tokio::spawn(async move { sync(&o, Arc::new(Quiet)).await });
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.hits("/.well-known/resourcesync") == 0 && Instant::now() < deadline {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.abort();
    assert_eq!(server.hits("/"), 1);
    assert_eq!(
        server.hits("/.well-known/resourcesync"),
        1,
        "the well-known URI waited for the root's answer"
    );
}

/// The path the Source serves its (only) Resource List at: `resourcesync/resourcelists/N/`.
fn resource_list_path(src: &std::path::Path) -> String {
    let dir = src.join("resourcesync/resourcelists");
    let snap = std::fs::read_dir(&dir)
        .expect("resource lists")
        .next()
        .expect("a snapshot")
        .expect("entry")
        .file_name();
    let snap = snap.to_str().expect("name");
    format!("/resourcesync/resourcelists/{snap}/resourcelist.xml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_list_is_read_beside_the_resource_list() {
    let src = tmp();
    write(src.path(), 3);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    // The Resource List never answers: only a run that reads the Change List beside it (not
    // after the downloads) reaches the Change List's index.
    let rl = resource_list_path(src.path());
    server.fault(&rl, Fault::Stall);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let run = tokio::spawn(async move { sync(&o, Arc::new(Quiet)).await });
    let index = "/resourcesync/changelist-index.xml";
    let deadline = Instant::now() + Duration::from_secs(30);
    while (server.hits(index) == 0 || server.hits(&rl) == 0) && Instant::now() < deadline {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.abort();
    assert_eq!(server.hits(&rl), 1);
    assert_eq!(server.hits("/resourcesync/changelist.xml"), 1);
    assert_eq!(
        server.hits(index),
        1,
        "the Change List waited for the Resource List"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_list_is_asked_for_again_beside_the_last_downloads() {
    let src = tmp();
    write(src.path(), 3);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    // The last download never answers: only a run that asks for the Change List again for its
    // catch-up without waiting for the last body does so.
    let _stalled = server.stall_after(2);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let run = tokio::spawn(async move { sync(&o, Arc::new(Quiet)).await });
    let (cl, index) = (
        "/resourcesync/changelist.xml",
        "/resourcesync/changelist-index.xml",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while (server.hits(cl) < 2 || server.hits(index) < 2) && Instant::now() < deadline {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    run.abort();
    assert_eq!(
        (server.hits(cl), server.hits(index)),
        (2, 2),
        "read beside the Resource List, then asked for again beside the last download"
    );
    assert_eq!(server.resource_hits(), 3, "every download asked for once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_start_at_the_window_the_round_trip_asks_for() {
    const N: usize = 400;
    let src = tmp();
    write(src.path(), N);
    let server = Server::start(src.path()).await;
    // Each answer held 40 ms at the Source, so that the requests sent together are seen in
    // flight there together.
    *server.shared.resource_delay.lock().expect("delay") = Some(Duration::from_millis(40));
    let proxy = WanProxy::start(server.addr, Wan::rtt(Duration::from_millis(60))).await;
    publish(src.path(), &proxy.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&proxy.base, &dest);
    o.concurrency = 256;
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!((r.created, r.failed), (N as u64, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&dest), source_files(src.path()));
    let arrivals = server.shared.arrivals.lock().expect("arrivals").clone();
    // 60 ms measured before the downloads: 60 ms x 5,000/s = 300, within the ceiling of 256.
    // From 32 growing a quarter per window, the first 200 downloads would never see more than
    // 78 in flight.
    let first = arrivals[..200].iter().copied().max().unwrap_or(0);
    assert!(first >= 128, "the downloads started at {first} in flight");
    assert!(
        arrivals.iter().all(|&n| n <= 256),
        "above the ceiling: {:?}",
        arrivals.iter().max()
    );
}
