//! The schedule of copy checks (`SyncOptions::check_every`, `check_now`; `fetch/repair.rs`):
//! between checks an incremental reads no row of the state per resource and leaves a copy
//! damaged on disk as it is (the trade-off `docs/usage.md` states); a check that is due or asked
//! for finds and repairs it; the time of the last check is recorded only once a check has
//! completed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::*;
use resourcesync_destination::{Destination, Mode, Ports, Quiet, SyncOptions, SyncReport};
use resourcesync_store::{
    Batch, FsStore, KnownDocument, PendingChange, Records, RelPath, ResourceRecord, SourceCursor,
    SqliteState, VersionRecord,
};

/// Records that count the rows of resources they return (`resource`, `resources_page`,
/// `gone_page`): what a run reads per resource.
#[derive(Debug)]
struct Counting {
    inner: SqliteState,
    rows: AtomicU64,
}

impl Counting {
    fn add(&self, n: usize) {
        self.rows.fetch_add(n as u64, Ordering::Relaxed);
    }
    fn take(&self) -> u64 {
        self.rows.swap(0, Ordering::Relaxed)
    }
}

impl Records for Counting {
    fn in_place(&self) -> bool {
        true
    }
    fn resource(&self, uri: &str) -> resourcesync_store::Result<Option<ResourceRecord>> {
        let r = self.inner.resource(uri)?;
        self.add(usize::from(r.is_some()));
        Ok(r)
    }
    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> resourcesync_store::Result<Vec<ResourceRecord>> {
        let p = self.inner.resources_page(source, after, limit)?;
        self.add(p.len());
        Ok(p)
    }
    fn gone_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> resourcesync_store::Result<Vec<ResourceRecord>> {
        let p = self.inner.gone_page(source, after, limit)?;
        self.add(p.len());
        Ok(p)
    }
    fn has_path(&self, path: &RelPath) -> resourcesync_store::Result<bool> {
        self.inner.has_path(path)
    }
    fn path_owner(&self, path: &RelPath) -> resourcesync_store::Result<Option<String>> {
        self.inner.path_owner(path)
    }
    fn recorded_totals(&self) -> resourcesync_store::Result<(u64, u64)> {
        self.inner.recorded_totals()
    }
    fn cursor(&self, source: &str) -> resourcesync_store::Result<Option<SourceCursor>> {
        self.inner.cursor(source)
    }
    fn documents(&self, start: &str) -> resourcesync_store::Result<Vec<KnownDocument>> {
        self.inner.documents(start)
    }
    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> resourcesync_store::Result<Vec<PendingChange>> {
        self.inner.pending_page(source, after, limit)
    }
    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> resourcesync_store::Result<Vec<VersionRecord>> {
        self.inner.versions_page(source, after, limit)
    }
    fn digest_referenced(&self, digest: &str) -> resourcesync_store::Result<bool> {
        self.inner.digest_referenced(digest)
    }
    fn apply(&self, batch: &Batch<'_>) -> resourcesync_store::Result<()> {
        self.inner.apply(batch)
    }
}

struct Setup {
    src: tempfile::TempDir,
    _out: tempfile::TempDir,
    dest: std::path::PathBuf,
    _server: Server,
    state: Arc<Counting>,
    d: Destination,
    o: SyncOptions,
}

impl Setup {
    /// A Source of `n` files, synced once (a baseline) into a directory whose state counts
    /// the rows it returns.
    async fn baseline(n: usize) -> Setup {
        let src = tmp();
        let files: Vec<(String, Vec<u8>)> = (0..n)
            .map(|i| {
                (
                    format!("d{}/f{i:03}.txt", i % 4),
                    format!("file {i}").into_bytes(),
                )
            })
            .collect();
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        write_tree(src.path(), &refs);
        let server = Server::start(src.path()).await;
        publish(src.path(), &server.base, None);
        let out = tmp();
        let dest = dest_in(&out);
        std::fs::create_dir_all(&dest).expect("dest");
        let mut o = options(&server.base, &dest);
        o.delete = true;
        let state = Arc::new(Counting {
            inner: SqliteState::open(&out.path().join("state.sqlite")).expect("state"),
            rows: AtomicU64::new(0),
        });
        let store = Arc::new(FsStore::open(&dest).expect("store"));
        let scratch = out.path().join("scratch");
        std::fs::create_dir_all(&scratch).expect("scratch");
        let ports = Ports::new(store, state.clone(), scratch, "(counting)");
        let d = Destination::new(
            &server.base,
            ports,
            resourcesync_destination::http::Http::new(o.http.clone()).expect("client"),
        );
        let s = Setup {
            src,
            _out: out,
            dest,
            _server: server,
            state,
            d,
            o,
        };
        let r = s.run(&s.o).await;
        assert_eq!((r.mode, r.created, r.failed), (Mode::Baseline, n as u64, 0));
        s
    }

    async fn run(&self, o: &SyncOptions) -> SyncReport {
        self.d.sync(o, Arc::new(Quiet)).await.expect("sync")
    }

    /// When the state says every copy was last checked.
    fn checked_at(&self, r: &SyncReport) -> Option<resourcesync_model::W3cDateTime> {
        self.state
            .cursor(&r.source.key())
            .expect("cursor")
            .expect("a cursor")
            .checked_at
    }
}

/// With nothing changed, an incremental (with --delete) reads no row of a resource from the
/// state: the check of every copy is not due (a first baseline counts as one), and the copies
/// kept after a delete are found by an index of those alone. A check asked for reads them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_with_nothing_changed_reads_no_row_per_resource() {
    let s = Setup::baseline(40).await;
    s.state.take();
    for _ in 0..2 {
        let r = s.run(&s.o).await;
        assert_eq!(r.mode, Mode::Incremental);
        assert_eq!((r.created, r.updated, r.repaired, r.failed), (0, 0, 0, 0));
        assert_eq!(
            s.state.take(),
            0,
            "rows read by an incremental with nothing changed"
        );
    }
    let mut now = s.o.clone();
    now.check_now = true;
    let r = s.run(&now).await;
    assert_eq!((r.repaired, r.failed), (0, 0));
    assert!(s.state.take() >= 40, "a check reads every row");
}

/// A copy damaged on disk: left as it is while the check is not due (the documented
/// trade-off), repaired when asked for (`--check`) and when the schedule says it is due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_copy_is_repaired_when_the_check_is_due_or_asked_for() {
    let s = Setup::baseline(8).await;
    let victim = s.dest.join("d1/f001.txt");
    std::fs::remove_file(&victim).expect("rm");
    std::fs::write(s.dest.join("d2/f002.txt"), b"short").expect("damage");

    // Not due: the baseline checked every copy (it wrote them) less than a day ago.
    let r = s.run(&s.o).await;
    assert_eq!((r.mode, r.repaired, r.failed), (Mode::Incremental, 0, 0));
    assert!(!victim.exists(), "repaired although no check was due");

    // Asked for.
    let mut now = s.o.clone();
    now.check_now = true;
    let r = s.run(&now).await;
    assert_eq!((r.repaired, r.failed), (2, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&s.dest), source_files(s.src.path()));

    // Due: an interval that has passed since the last check.
    std::fs::remove_file(&victim).expect("rm");
    let mut due = s.o.clone();
    due.check_every = Some(Duration::ZERO);
    let r = s.run(&due).await;
    assert_eq!((r.repaired, r.failed), (1, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&s.dest), source_files(s.src.path()));

    // Never scheduled: only when asked for.
    std::fs::remove_file(&victim).expect("rm");
    let mut never = s.o.clone();
    never.check_every = None;
    let r = s.run(&never).await;
    assert_eq!(r.repaired, 0);
    assert!(!victim.exists());
}

/// The time of the last check is recorded only once a check has completed: a check whose
/// repair failed (the Source no longer serves the copy's version) leaves it where it was, so the
/// check stays due; the next complete one moves it on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_check_is_recorded_only_once_a_check_completed() {
    let s = Setup::baseline(6).await;
    let r = s.run(&s.o).await;
    assert!(
        s.checked_at(&r).is_some(),
        "a first baseline records a check"
    );
    // An old check on record (the cursor as it was).
    let long_ago = resourcesync_model::W3cDateTime::parse("2000-01-01T00:00:00Z").expect("time");
    let mut row = s
        .state
        .cursor(&r.source.key())
        .expect("cursor")
        .expect("a cursor");
    row.checked_at = Some(long_ago);
    resourcesync_store::RecordWrites::set_cursor(s.state.as_ref(), &row).expect("set");

    std::fs::remove_file(s.dest.join("d3/f003.txt")).expect("rm");
    let held = s.src.path().join("d3/f003.txt");
    let body = std::fs::read(&held).expect("read");
    std::fs::remove_file(&held).expect("rm at the Source");
    let mut now = s.o.clone();
    now.check_every = None;
    now.check_now = true;
    let r = s.run(&now).await;
    assert_eq!((r.repaired, r.failed), (0, 1), "the repair fails: {r:?}");
    assert_eq!(
        s.checked_at(&r),
        Some(long_ago),
        "a check that did not complete is not recorded"
    );

    std::fs::write(&held, body).expect("back at the Source");
    let r = s.run(&now).await;
    assert_eq!(r.failed, 0, "{:?}", r.failures);
    assert_eq!(dest_files(&s.dest), source_files(s.src.path()));
    let later = s.checked_at(&r).expect("recorded");
    assert!(later.cmp_instant(&long_ago).is_gt(), "{later}");
    // A run that checks nothing leaves it.
    let r = s.run(&s.o).await;
    assert_eq!(s.checked_at(&r), Some(later));
}
