//! One commit path (DEVELOPERS.md "Durable"; Z39.99-2014 §5.2): every row and pending change a
//! run writes goes through the committer, in the transaction of a batch, never as a write of
//! its own beside it. A state that notes which thread each write comes from finds any side
//! write: the committer's threads are named `resourcesync-commit`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;
use resourcesync_destination::{Destination, Mode, Ports, Quiet, http::Http};
use resourcesync_store::{
    Batch, BatchGuard, Guarded, MemState, MemStore, Op, Records, RelPath, Store,
};

/// The name the committer gives its threads.
const COMMIT_THREAD: &str = "resourcesync-commit";

/// A state in memory that notes every write of a row or pending change made outside the
/// committer, and counts transactions: a guard of its batches, the reads passed through.
type Watched = Guarded<Watch>;

#[derive(Debug, Default)]
struct Watch {
    /// Side writes: the thread and the operations.
    strays: Mutex<Vec<String>>,
    /// Transactions applied.
    applied: AtomicU64,
}

impl Watch {
    fn strays(&self) -> Vec<String> {
        self.strays.lock().expect("lock").clone()
    }
}

impl BatchGuard for Watch {
    fn apply(&self, inner: &dyn Records, batch: &Batch<'_>) -> resourcesync_store::Result<()> {
        self.applied.fetch_add(1, Ordering::SeqCst);
        let rows = batch.ops().iter().any(|op| {
            matches!(
                op,
                Op::PutResource(_)
                    | Op::RemoveResource(_)
                    | Op::SetGone(..)
                    | Op::PutPending(_)
                    | Op::RemovePending(..)
            )
        });
        let thread = std::thread::current().name().map(str::to_owned);
        if rows && thread.as_deref() != Some(COMMIT_THREAD) {
            self.strays
                .lock()
                .expect("lock")
                .push(format!("{thread:?}: {:?}", batch.ops()));
        }
        inner.apply(batch)
    }
}

/// Puts `body` at `key` in `store`, as another program would have.
fn put(store: &MemStore, key: &str, body: &[u8]) {
    store
        .put(
            &RelPath::parse(key).expect("key"),
            resourcesync_store::Expect {
                max_bytes: 1 << 20,
                ..Default::default()
            },
            &mut &body[..],
        )
        .expect("put");
}

/// Every kind of state write a run makes: copies created and adopted by their digest (a
/// baseline into a store that has some of them), a failure kept as pending, copies updated,
/// deleted (`--delete`) and kept after their Source deleted them, a pending change settled.
/// Not one of them is written beside the committer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_and_pending_change_of_a_run_is_written_by_the_committer() {
    const N: usize = 40;
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..N)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 4),
                format!("body {i}").into_bytes(),
            )
        })
        .collect();
    let tree: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &tree);
    write_tree(src.path(), &[("missing.txt", b"served no more")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    // Listed, then gone from the server: fails, kept as pending.
    std::fs::remove_file(src.path().join("missing.txt")).expect("rm");

    let store = Arc::new(MemStore::new());
    // A quarter of the copies are there already (adopted by their digest, not fetched).
    for (p, b) in files.iter().step_by(4) {
        put(&store, p, b);
    }
    let state = Arc::new(Watched::with(Arc::new(MemState::new()), Watch::default()));
    let scratch = tmp();
    let ports = Ports::new(store.clone(), state.clone(), scratch.path(), "(watched)");
    let unused = tmp();
    let mut o = options(&server.base, &unused.path().join("never"));
    o.delete = true;
    let d = Destination::new(
        &server.base,
        ports,
        Http::new(o.http.clone()).expect("client"),
    );

    let r = d.sync(&o, Arc::new(Quiet)).await.expect("baseline");
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!(r.failed, 1, "{r:?}");
    assert_eq!(r.created, (N - N / 4) as u64, "{r:?}");
    let baseline = state.guard().applied.load(Ordering::SeqCst);
    assert_eq!(state.guard().strays(), Vec::<String>::new(), "baseline");
    let adopted = state
        .inner()
        .resource(&format!("{}d0/f0.txt", server.base))
        .expect("state")
        .expect("an adopted copy has its row");
    assert_eq!(adopted.length, Some(6));

    // An incremental: updates, deletes with --delete, then one without (kept); the missing
    // resource served again (its pending change settled by its copy).
    write_tree(
        src.path(),
        &[
            ("d1/f1.txt", b"changed 1"),
            ("d2/f2.txt", b"changed 2"),
            ("missing.txt", b"back"),
        ],
    );
    std::fs::remove_file(src.path().join("d3/f3.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("incremental");
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.updated, r.deleted, r.failed), (2, 1, 0), "{r:?}");
    std::fs::remove_file(src.path().join("d3/f7.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    o.delete = false;
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("kept");
    assert_eq!((r.kept, r.failed), (1, 0), "{r:?}");
    assert!(
        state
            .inner()
            .pending_page(&r.source.key(), None, 10)
            .expect("pending")
            .is_empty()
    );
    assert_eq!(state.guard().strays(), Vec::<String>::new(), "incremental");
    eprintln!(
        "transactions: baseline of {N} copies {baseline}, all runs {}",
        state.guard().applied.load(Ordering::SeqCst)
    );
}
