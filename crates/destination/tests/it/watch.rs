//! `sync --watch`: a Destination following a live in-process Source on 127.0.0.1. No sleeps as
//! synchronisation: the test waits for rounds (reported on a channel) with deadlines.

use crate::common;
use crate::live;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use resourcesync_destination::{
    Error, Mode, Quiet, Round, StopHandle, SyncOptions, WatchOptions, WatchReport, watch,
};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Starts a watch in a task; its rounds arrive on the receiver.
fn start(
    o: &SyncOptions,
    interval: Duration,
    stop: &StopHandle,
) -> (
    JoinHandle<resourcesync_destination::Result<WatchReport>>,
    UnboundedReceiver<Round>,
) {
    let (tx, rx) = unbounded_channel();
    let (o, stop) = (o.clone(), stop.clone());
    let task = tokio::spawn(async move {
        let w = WatchOptions {
            interval,
            ..WatchOptions::default()
        };
        watch(&o, &w, Arc::new(Quiet), &stop, |r| {
            let _ = tx.send(r.clone());
        })
        .await
    });
    (task, rx)
}

/// Waits, round after round, until `done` holds; panics at the deadline.
async fn until(rx: &mut UnboundedReceiver<Round>, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(r)) => assert!(r.error.is_none(), "round failed: {r:?}"),
            Ok(None) => panic!("the watch ended while waiting for {what}"),
            Err(_) => panic!("no {what} within 60 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_copy_follows_creates_updates_and_deletes_until_stopped() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("sub/b.txt", b"bravo"),
            ("sub/deeper/c d.txt", b"charlie"),
        ],
    );
    let running = live::live(src.path(), |_| {}).await;
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(running.base_url(), &dest);
    o.delete = true;
    let stop = StopHandle::new();
    let (task, mut rx) = start(&o, Duration::from_millis(50), &stop);

    // The first round is the baseline.
    let first = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("a first round")
        .expect("round");
    let rep = first.report.as_ref().expect("report");
    assert_eq!((rep.mode, rep.created, rep.failed), (Mode::Baseline, 3, 0));
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // Create, update, delete at the Source; the Source publishes them in its Change List.
    write_tree(
        src.path(),
        &[("new/é n.txt", b"delta"), ("a.txt", b"alpha, longer now")],
    );
    std::fs::remove_file(src.path().join("sub/b.txt")).expect("rm");
    running.publisher().batch(false).await.expect("batch");
    until(&mut rx, "the changes at the destination", || {
        dest_files(&dest) == source_files(src.path())
    })
    .await;

    // And again: the watch keeps following.
    write_tree(src.path(), &[("sub/deeper/c d.txt", b"charlie 2")]);
    running.publisher().batch(false).await.expect("batch");
    until(&mut rx, "the second update", || {
        dest_files(&dest) == source_files(src.path())
    })
    .await;

    // Stopped through the handle: the watch ends, and says what it did.
    stop.stop();
    let total = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the watch ends")
        .expect("join")
        .expect("watch");
    assert!(total.rounds >= 3, "{total:?}");
    assert!(!total.interrupted);
    assert_eq!(total.failed_rounds, 0);
    assert_eq!((total.created, total.deleted), (4, 1), "{total:?}");
    assert_eq!(total.updated, 2, "{total:?}");
    // Every round after the first was incremental (§12.1).
    while let Ok(r) = rx.try_recv() {
        assert_eq!(r.report.expect("report").mode, Mode::Incremental);
    }
    running.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_the_wait_between_rounds_and_stop_now_abandons_a_round() {
    // Between rounds: a one-hour interval does not delay the stop.
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let running = live::live(src.path(), |_| {}).await;
    let out = tmp();
    let dest = dest_in(&out);
    let stop = StopHandle::new();
    let (task, mut rx) = start(
        &options(running.base_url(), &dest),
        Duration::from_secs(3600),
        &stop,
    );
    tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("a first round")
        .expect("round");
    stop.stop();
    let total = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the watch ends at once")
        .expect("join")
        .expect("watch");
    assert_eq!(total.rounds, 1);
    running.shutdown().await.expect("shutdown");

    // In a round: resources stall; stop_now abandons the round, and the watch ends.
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("b.txt", b"bravo")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let stalled = server.stall_after(0);
    let out = tmp();
    let dest = dest_in(&out);
    let stop = StopHandle::new();
    let (task, _rx) = start(
        &options(&server.base, &dest),
        Duration::from_millis(10),
        &stop,
    );
    tokio::task::spawn_blocking(move || stalled.recv_timeout(Duration::from_secs(60)))
        .await
        .expect("join")
        .expect("a resource request stalls");
    stop.stop_now();
    let total = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the watch ends at once")
        .expect("join")
        .expect("watch");
    assert!(total.interrupted);
    assert_eq!(total.rounds, 0);
}

#[tokio::test]
async fn a_dry_run_cannot_be_watched() {
    let out = tmp();
    let mut o = options("http://127.0.0.1:9/", &dest_in(&out));
    o.dry_run = true;
    let e = watch(
        &o,
        &WatchOptions::default(),
        Arc::new(Quiet),
        &StopHandle::new(),
        |_| {},
    )
    .await
    .expect_err("refused");
    assert!(matches!(e, Error::Config(_)), "{e}");
}
