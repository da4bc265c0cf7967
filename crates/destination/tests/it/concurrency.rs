//! Adaptive concurrency per host: the number of downloads in flight starts at 32 (or where
//! the round trip measured says, tests/it/round_trips.rs), grows while the Source keeps up, and falls when it answers 503 (RFC 9110 §15.6.4).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use resourcesync_destination::{Quiet, sync};

fn tree(n: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 10),
                format!("file {i}").into_bytes(),
            )
        })
        .collect()
}

async fn source(n: usize) -> (tempfile::TempDir, Server) {
    let src = tmp();
    let files = tree(n);
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    (src, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_answers_503_above_n_in_flight_brings_the_number_down() {
    const N: usize = 4;
    let (src, server) = source(300).await;
    *server.shared.max_in_flight.lock().expect("limit") = Some(N);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.concurrency = 256;
    o.http.retries = 8;
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!((r.created, r.failed), (300, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&dest), source_files(src.path()));
    let arrivals = server.shared.arrivals.lock().expect("arrivals").clone();
    // AIMD probes: a limit that a latency cut brought under N grows back up to the level held
    // after the last 503, and one probe above N draws a 503 that halves it again. So the second
    // half may see a request or two above N, never the crowd a fixed 256 would send.
    let half = &arrivals[arrivals.len() / 2..];
    let peak = half.iter().copied().max().unwrap_or(0);
    let over = half.iter().filter(|&&n| n > N).count();
    assert!(
        peak <= 2 * N && over * 20 <= half.len(),
        "peak {peak}, {over} of {} above {N} in flight in the second half: {half:?}",
        half.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_keeps_up_lets_the_number_grow_from_where_it_started() {
    let (src, server) = source(1200).await;
    *server.shared.resource_delay.lock().expect("delay") = Some(Duration::from_millis(20));
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    // A ceiling far above where it starts: on loopback that is 32, or more when the discovery's
    // answers were slow (a loaded machine: the round trip measured sets the start,
    // tests/it/round_trips.rs).
    o.concurrency = 1024;
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!((r.created, r.failed), (1200, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&dest), source_files(src.path()));
    let arrivals = server.shared.arrivals.lock().expect("arrivals").clone();
    let first = arrivals[..32].iter().copied().max().unwrap_or(0);
    let peak = arrivals.iter().copied().max().unwrap_or(0);
    assert!(first >= 16, "started below 32: {first}");
    assert!(peak > first * 5 / 4, "never grew: from {first} to {peak}");
}
