//! A large sync's fetches are shared only when sharing can help (issue 36 item 6): a worker
//! alone fetches them itself, as with `limits.share_above` unset; with another worker alive
//! (its heartbeat in the Source's schema), a page goes through the queue, and more only as
//! the others take them; a worker joining mid-sync takes pages queued after it arrives. PostgreSQL state (`scripts/postgres.sh`,
//! `RESOURCESYNC_TEST_POSTGRES`).

use std::path::Path;
use std::time::{Duration, Instant};

use resourcesync_aggregate::status::{Phase, SourceView};
use resourcesync_aggregate::{Aggregator, Options, StateChoice};
use resourcesync_store::PgState;
use resourcesync_testkit::Server;

use crate::service::{config, publish, until};
use crate::share_renew::held_server;

/// The schema of the Source `name` (`agg_NAME`, as the aggregator names it).
fn schema(name: &str) -> String {
    format!("agg_{}", name.replace('-', "_"))
}

/// A worker that watches the Source `name`'s queue, alive for ten minutes but never claiming
/// (as one busy with other Sources would): the Source's coordinator shares its fetches, which
/// its own claimer then does.
pub(crate) fn other_worker_alive(pg: &str, name: &str) {
    let s = schema(name);
    let st = pg_state(pg, name);
    off_runtime(move || st.beat_workers(&[s], "another", Duration::from_secs(600)))
        .expect("heartbeat");
}

/// Runs `f` on a thread of its own: the PostgreSQL client blocks (it runs a runtime of its
/// own, which a test's runtime thread refuses).
pub(crate) fn off_runtime<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f).join().expect("thread")
}

/// The state of the Source `name`.
fn pg_state(pg: &str, name: &str) -> std::sync::Arc<PgState> {
    let (pg, s) = (pg.to_owned(), schema(name));
    std::sync::Arc::new(off_runtime(move || {
        PgState::connect_schema(&pg, &s).expect("connect")
    }))
}

/// How many workers but `me` have a live heartbeat in the Source's state.
fn others(st: &std::sync::Arc<PgState>, me: &str) -> u64 {
    let (st, me) = (st.clone(), me.to_owned());
    off_runtime(move || st.other_workers(&me)).expect("workers")
}

pub(crate) fn start(
    pg: &str,
    store: &Path,
    worker: &str,
    name: &str,
    base: &str,
    extra: &str,
) -> Aggregator {
    let text = format!(
        "[limits]\nlease = \"10s\"\nshare_above = 1\ntimeout = \"120s\"\n\n[[source]]\n\
         name = \"{name}\"\nurl = \"{base}\"\nschedule = \"1h\"\n{extra}"
    );
    Aggregator::start(
        &config(&text),
        Options {
            store: store.to_owned(),
            state: StateChoice::Postgres(pg.to_owned()),
            worker: worker.into(),
            object_store: None,
            republish: None,
        },
    )
    .expect("start")
}

pub(crate) async fn source(n: usize) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..n {
        std::fs::write(dir.path().join(format!("r{i:02}.txt")), format!("r {i}\n")).expect("write");
    }
    let s = Server::start(dir.path()).await;
    publish(dir.path(), &s.base).await;
    (s, dir)
}

pub(crate) fn synced(v: &SourceView, n: u64) -> bool {
    v.phase == Phase::Following && !v.running && v.resources == n && v.last_error.is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_alone_queues_nothing() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let (s, _dir) = source(20).await;
    let name = format!("alone_{:08x}", fastrand::u32(..));
    let store = tempfile::tempdir().expect("store");
    let agg = start(&pg, store.path(), "alone", &name, &s.base, "");
    let v = until(&agg, &name, Duration::from_secs(60), |v| synced(v, 20)).await;
    // Every fetch done by the sync itself: none claimed from the queue.
    assert_eq!((v.shared_copies, v.shared_failures), (0, 0), "{v:#?}");
    agg.drain(Duration::from_secs(30)).await;
    let st = pg_state(&pg, &name);
    assert_eq!(others(&st, "nobody"), 0, "heartbeat left");
}

/// Another worker alive but taking nothing (busy elsewhere): the run's one page (past
/// `share_above`, held until the page is full or the run's fetches end) is queued, and done by
/// the coordinator's own claimer once the sync waits for its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_another_worker_alive_a_page_is_queued_and_the_rest_fetched_while_it_waits() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let (s, _dir) = source(20).await;
    let name = format!("others_{:08x}", fastrand::u32(..));
    other_worker_alive(&pg, &name);
    let store = tempfile::tempdir().expect("store");
    let agg = start(&pg, store.path(), "coordinator", &name, &s.base, "");
    let v = until(&agg, &name, Duration::from_secs(60), |v| synced(v, 20)).await;
    // `share_above = 1`: the page is the run's twenty fetches.
    assert_eq!((v.shared_copies, v.shared_failures), (20, 0), "{v:#?}");
    agg.drain(Duration::from_secs(30)).await;
}

/// Resources besides `slow.txt` in the mid-sync case: more than two pages.
const MANY: usize = 2500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_joining_mid_sync_takes_the_pages_queued_after_it() {
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let dir = tempfile::tempdir().expect("tempdir");
    // `slow.txt` first in the list (before `t…`): its download, held by the test, holds the
    // Source's only download slot while the sync's first page is fetched alone.
    std::fs::write(dir.path().join("slow.txt"), "held ".repeat(4000)).expect("write");
    for i in 0..MANY {
        std::fs::write(dir.path().join(format!("t{i:04}.txt")), format!("t {i}\n")).expect("write");
    }
    let server = held_server(dir.path()).await;
    publish(dir.path(), &server.base).await;
    let name = format!("join_{:08x}", fastrand::u32(..));
    let store = tempfile::tempdir().expect("store");
    let a = start(
        &pg,
        store.path(),
        "first",
        &name,
        &server.base,
        "concurrency = 1\n",
    );
    let end = Instant::now() + Duration::from_secs(60);
    while server.hits("/slow.txt") == 0 {
        assert!(
            Instant::now() < end,
            "the slow resource was never asked for"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let st = pg_state(&pg, &name);
    // The second worker arrives; once its heartbeat is in, the download goes on.
    let b = start(
        &pg,
        store.path(),
        "second",
        &name,
        &server.base,
        "concurrency = 1\n",
    );
    while others(&st, "first") == 0 {
        assert!(
            Instant::now() < end,
            "the second worker's heartbeat never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.release.send_replace(true);
    let total = (MANY + 1) as u64;
    let end = Instant::now() + Duration::from_secs(240);
    while !a.status().get(&name).is_some_and(|v| synced(&v, total)) {
        assert!(
            Instant::now() < end,
            "not synced: {:#?} {:#?}",
            a.status().get(&name),
            b.status().get(&name)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Drained, each worker has counted every fetch it claimed.
    a.drain(Duration::from_secs(30)).await;
    b.drain(Duration::from_secs(30)).await;
    let (va, vb) = (
        a.status().get(&name).expect("a"),
        b.status().get(&name).expect("b"),
    );
    // The first page fetched alone; after the second worker's arrival a page queued (the
    // queue was empty), and the others queued as it keeps up (the rest fetched alone).
    let queued = va.shared_copies + vb.shared_copies;
    assert!(
        vb.shared_copies > 0,
        "the second worker took no part: {va:#?} {vb:#?}"
    );
    assert!(
        queued >= 1000 && queued < total,
        "queued {queued} of {total}: {va:#?} {vb:#?}"
    );
    assert_eq!(server.hits("/slow.txt"), 1);
    for i in (0..MANY).step_by(97) {
        let p = format!("/t{i:04}.txt");
        assert_eq!(server.hits(&p), 1, "{p} fetched {} times", server.hits(&p));
    }
}
