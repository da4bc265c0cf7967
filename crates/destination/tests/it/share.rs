//! A run's fetches handed to other workers through the `Downloads` port: past the
//! port's threshold the run queues them and waits; a worker claims them from the same state's
//! queue and does each through `SharedFetcher` (the same download, checks and committer), the
//! row written with the claim's completion (`Claimed`). Under the threshold, the run fetches
//! them itself as without the port.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::*;
use resourcesync_destination::share::PortFuture;
use resourcesync_destination::{
    Destination, Downloads, Ports, Quiet, SharedFetch, SharedFetcher, SharedOutcome, http::Http,
};
use resourcesync_store::{Claimed, MemState, MemStore, Records, Store, WorkItem, WorkQueue};
use tokio::sync::Notify;

/// The port over a state's own work queue; `queued` counts what it was handed.
#[derive(Debug)]
struct StateQueue {
    state: Arc<MemState>,
    threshold: usize,
    queued: AtomicUsize,
    added: Arc<Notify>,
    done: Arc<Notify>,
    /// No other worker to share with: every page refused (`Downloads::share_now`).
    alone: bool,
}

impl Downloads for StateQueue {
    fn threshold(&self) -> usize {
        self.threshold
    }

    fn queue(
        &self,
        fetches: Vec<SharedFetch>,
    ) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        Box::pin(async move {
            let items: Vec<WorkItem> = fetches.iter().map(SharedFetch::work_item).collect();
            self.queued.fetch_add(items.len(), Ordering::SeqCst);
            self.state.add_work(&items)?;
            self.added.notify_one();
            Ok(())
        })
    }

    fn share_now(&self, _source: &str, _on_the_way: u64) -> PortFuture<'_, bool> {
        let share = !self.alone;
        Box::pin(async move { share })
    }

    fn wait(&self, source: &str) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        let source = source.to_owned();
        Box::pin(async move {
            loop {
                let done = self.done.notified();
                if self.state.work_left(&source)? == 0 {
                    return Ok(());
                }
                done.await;
            }
        })
    }
}

/// A sync of `o` into `store` and `state` with `port` as its Downloads port.
async fn sync_through(
    o: &resourcesync_destination::SyncOptions,
    store: &Arc<MemStore>,
    state: &Arc<MemState>,
    port: Arc<dyn Downloads>,
    scratch: &std::path::Path,
) -> resourcesync_destination::SyncReport {
    let ports = Ports::new(store.clone(), state.clone(), scratch, "(memory)").with_downloads(port);
    let d = Destination::new(&o.url, ports, Http::new(o.http.clone()).expect("client"));
    d.sync(o, Arc::new(Quiet)).await.expect("sync")
}

/// `n` small files in `dirs` folders: their paths and bodies.
fn numbered(n: usize, dirs: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("d{}/f{i:04}.txt", i % dirs),
                format!("file {i}\n").into_bytes(),
            )
        })
        .collect()
}

/// `files` written, served and published: the tree (kept while the server serves it) and the
/// server.
async fn served(files: &[(String, Vec<u8>)]) -> (tempfile::TempDir, Server) {
    let src = tmp();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    (src, server)
}

async fn run_as(
    alone: bool,
    threshold: usize,
    versions: bool,
) -> (resourcesync_destination::SyncReport, usize, usize) {
    let files = numbered(30, 3);
    let (_src, server) = served(&files).await;
    let scratch = tmp();
    let mut o = options(&server.base, &scratch.path().join("unused"));
    o.versions = versions;
    let store = Arc::new(MemStore::new());
    let state = Arc::new(MemState::new());
    let (added, done) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let port = Arc::new(StateQueue {
        state: state.clone(),
        threshold,
        queued: AtomicUsize::new(0),
        alone,
        added: added.clone(),
        done: done.clone(),
    });
    let fetched = Arc::new(AtomicUsize::new(0));
    let w = tokio::spawn(worker(
        state.clone(),
        store.clone(),
        added,
        done,
        fetched.clone(),
    ));
    let r = sync_through(&o, &store, &state, port.clone(), scratch.path()).await;
    w.abort();
    // Every copy in place with its row, whoever fetched it.
    assert_eq!(server.resource_hits(), 30, "each resource fetched once");
    let mut n = 0;
    resourcesync_store::for_each_resource(state.as_ref(), &r.source.key(), |row| {
        let copy = &files
            .iter()
            .find(|(p, _)| *p == row.path)
            .expect("a copy of ours")
            .1;
        assert_eq!(row.length, Some(copy.len() as u64), "{}", row.path);
        // With versions, each copy's body is its first version, whoever fetched it.
        let v = state.versions_of(&row.source, &row.uri, None, 10)?;
        let want = if versions {
            vec![resourcesync_store::version_digest(&row.hashes).expect("sha-256")]
        } else {
            Vec::new()
        };
        assert_eq!(
            v.into_iter().map(|v| v.digest).collect::<Vec<_>>(),
            want,
            "{}",
            row.path
        );
        n += 1;
        Ok(())
    })
    .expect("rows");
    assert_eq!(n, 30, "rows");
    assert_eq!(state.work_left(&r.source.key()).expect("left"), 0);
    (
        r,
        port.queued.load(Ordering::SeqCst),
        fetched.load(Ordering::SeqCst),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_threshold_whose_port_refuses_to_share_fetches_itself() {
    let (r, queued, fetched) = run_as(true, 10, false).await;
    assert_eq!((queued, fetched), (0, 0), "{r:?}");
    assert_eq!((r.shared, r.created, r.failed), (0, 30, 0), "{r:?}");
    assert!(r.cursor.is_some(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_the_threshold_hands_its_fetches_to_the_workers() {
    let (r, queued, fetched) = run_as(false, 10, false).await;
    assert_eq!((queued, fetched), (30, 30), "{r:?}");
    assert_eq!((r.shared, r.created, r.failed), (30, 0, 0), "{r:?}");
    assert!(
        r.cursor.is_some(),
        "the cursor moved once the queue was empty"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_under_the_threshold_fetches_itself() {
    let (r, queued, fetched) = run_as(false, 30, false).await;
    assert_eq!((queued, fetched), (0, 0), "{r:?}");
    assert_eq!((r.shared, r.created, r.failed), (0, 30, 0), "{r:?}");
}

/// `--versions` through shared fetches: the payload says so, and the worker's committer keeps
/// each body as a version (`SharedFetch::versions`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_fetches_keep_their_versions() {
    let (r, queued, fetched) = run_as(false, 10, true).await;
    assert_eq!(
        (queued, fetched, r.shared, r.failed),
        (30, 30, 30, 0),
        "{r:?}"
    );
}

/// A payload as the queue holds it (JSON, the published values as text: a PostgreSQL queue
/// keeps what earlier workers wrote) reads into the typed fields and is written back the same;
/// a path that is not a key of the store refuses the payload, naming the path.
#[test]
fn a_queued_payload_reads_typed_and_is_written_back_the_same() {
    use resourcesync_model::{Change, HashAlg, W3cDateTime};

    let queued = concat!(
        r#"{"source":"http://h/cap.xml","uri":"http://h/sub%20dir/a.txt","path":"sub dir/a.txt","#,
        r#""length":5,"hashes":"md5:2c1743a391305fbf367df8e4f069f9f9 sha-256:"#,
        r#"8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8","#,
        r#""lastmod":"2013-01-02T13:00:00Z","change":"updated","duplicates":[[1,"http://m/a.txt"]],"#,
        r#""listed_change":true,"new":false,"repair":false,"max_bytes":1048576}"#
    );
    let f = SharedFetch::from_payload(queued).expect("an old payload reads");
    assert_eq!(f.path.as_str(), "sub dir/a.txt");
    assert_eq!(f.hashes.0.len(), 2);
    assert_eq!(f.hashes.0[1].alg, HashAlg::Sha256);
    assert_eq!(f.lastmod, W3cDateTime::parse("2013-01-02T13:00:00Z").ok());
    assert_eq!(f.change, Some(Change::Updated));
    assert_eq!(f.to_payload(), queued, "written back as it was");

    let bare = r#"{"source":"s","uri":"u","path":"p","listed_change":false,"new":false,"repair":false,"max_bytes":1}"#;
    let f = SharedFetch::from_payload(bare).expect("a payload without the optional fields");
    assert!(f.hashes.0.is_empty() && f.lastmod.is_none() && f.change.is_none());
    assert_eq!(f.to_payload(), bare);

    let hostile = bare.replace(r#""path":"p""#, r#""path":"../escape""#);
    let e = SharedFetch::from_payload(&hostile).expect_err("a path out of the store");
    assert!(e.to_string().contains("../escape"), "{e}");
}

/// A port that takes every page and fails to queue it.
#[derive(Debug)]
struct Down;

impl Downloads for Down {
    fn threshold(&self) -> usize {
        1
    }
    fn queue(&self, _: Vec<SharedFetch>) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        Box::pin(async {
            Err(resourcesync_destination::Error::Task(
                "the queue is down".into(),
            ))
        })
    }
    fn wait(&self, _: &str) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// A page's insert runs beside the run: its failure still stops the run, whose cursor does
/// not move past fetches that were never queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_could_not_be_queued_fails_the_run() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..30)
        .map(|i| (format!("f{i:02}.txt"), format!("file {i}\n").into_bytes()))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let scratch = tmp();
    let o = options(&server.base, &scratch.path().join("unused"));
    let (store, state) = (Arc::new(MemStore::new()), Arc::new(MemState::new()));
    let ports =
        Ports::new(store, state.clone(), scratch.path(), "(memory)").with_downloads(Arc::new(Down));
    let d = Destination::new(
        &server.base,
        ports,
        Http::new(o.http.clone()).expect("client"),
    );
    match d.sync(&o, Arc::new(Quiet)).await {
        Err(e) => assert!(e.to_string().contains("the queue is down"), "{e}"),
        Ok(r) => panic!("the run succeeded: {r:?}"),
    }
}

/// A worker: claims the items queued (as they come) 64 at a time and does them all at once
/// (as the aggregator's claimer does), counting them in `fetched`, until stopped.
async fn worker(
    state: Arc<MemState>,
    store: Arc<dyn Store>,
    added: Arc<Notify>,
    done: Arc<Notify>,
    fetched: Arc<AtomicUsize>,
) {
    let claimed = Arc::new(Claimed::new(state.clone() as Arc<dyn Records>));
    let mut fetcher: Option<Arc<SharedFetcher>> = None;
    loop {
        let more = added.notified();
        let claims = state
            .claim_work("w", 64, std::time::Duration::from_secs(60))
            .expect("claim");
        if claims.is_empty() {
            more.await;
            continue;
        }
        let mut set = tokio::task::JoinSet::new();
        for c in claims {
            let f = SharedFetch::from_payload(&c.item.payload).expect("payload");
            let x = fetcher
                .get_or_insert_with(|| {
                    Arc::new(
                        SharedFetcher::new(
                            &f.source,
                            f.max_bytes,
                            f.versions,
                            64,
                            store.clone(),
                            claimed.clone() as Arc<dyn Records>,
                            Http::new(Default::default()).expect("client"),
                            Arc::new(Quiet),
                        )
                        .expect("fetcher"),
                    )
                })
                .clone();
            claimed.hold(&f.uri, c);
            let (claimed, fetched) = (claimed.clone(), fetched.clone());
            set.spawn(async move {
                let o = x.fetch(&f).await;
                assert!(matches!(o, SharedOutcome::Copied(_)), "{o:?}");
                assert!(
                    claimed.take(&f.uri).is_none(),
                    "the row completed the claim"
                );
                fetched.fetch_add(1, Ordering::SeqCst);
            });
        }
        while let Some(r) = set.join_next().await {
            r.expect("a fetch");
        }
        done.notify_waiters();
    }
}

/// A port that takes every page and tells, with each question, how many fetches it was told
/// are on their way to it; a page's insert waits until a question has been asked after it.
#[derive(Debug)]
struct Counting {
    inner: StateQueue,
    told: std::sync::Mutex<Vec<u64>>,
    inserts: tokio::sync::Semaphore,
}

impl Downloads for Counting {
    fn threshold(&self) -> usize {
        0
    }

    fn queue(
        &self,
        fetches: Vec<SharedFetch>,
    ) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        Box::pin(async move {
            self.inserts.acquire().await.expect("open").forget();
            self.inner.queue(fetches).await
        })
    }

    fn share_now(&self, _source: &str, on_the_way: u64) -> PortFuture<'_, bool> {
        self.told.lock().expect("told").push(on_the_way);
        self.inserts.add_permits(1);
        Box::pin(async { true })
    }

    fn wait(&self, source: &str) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        self.inner.wait(source)
    }
}

/// The next page's question is asked beside a page's insert, and counts that page as on its
/// way (`Downloads::share_now`): a port that answers by what waits in its queue would
/// otherwise see too little there and take more than its workers can do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_beside_an_insert_counts_the_page_on_its_way() {
    const N: usize = 2 * resourcesync_destination::share::PAGE + 100;
    let (_src, server) = served(&numbered(N, 10)).await;
    let scratch = tmp();
    let o = options(&server.base, &scratch.path().join("unused"));
    let store = Arc::new(MemStore::new());
    let state = Arc::new(MemState::new());
    let (added, done) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let port = Arc::new(Counting {
        inner: StateQueue {
            state: state.clone(),
            threshold: 0,
            queued: AtomicUsize::new(0),
            alone: false,
            added: added.clone(),
            done: done.clone(),
        },
        told: std::sync::Mutex::new(Vec::new()),
        inserts: tokio::sync::Semaphore::new(0),
    });
    let fetched = Arc::new(AtomicUsize::new(0));
    let w = tokio::spawn(worker(state.clone(), store.clone(), added, done, fetched));
    let r = sync_through(&o, &store, &state, port.clone(), scratch.path()).await;
    w.abort();
    let told = port.told.lock().expect("told").clone();
    assert_eq!(
        told.first(),
        Some(&0),
        "the first question: nothing on its way"
    );
    // The first page's insert waited for the next question, which counted its page.
    assert_eq!(
        told.get(1),
        Some(&(resourcesync_destination::share::PAGE as u64)),
        "{told:?}"
    );
    assert_eq!((r.shared + r.created, r.failed), (N as u64, 0), "{r:?}");
    assert_eq!(
        server.resource_hits(),
        N as u64,
        "each resource fetched once"
    );
}
