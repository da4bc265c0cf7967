//! Group commit: copies are put in place and recorded in batches.
//!
//! Downloads run concurrently; each one streams its body into a temporary file and verifies its
//! length and every published digest there ([`Store::verify`]). The verified files then go to
//! one committer thread, which takes whatever has arrived (at most [`MAX_BATCH`]) and, for the
//! whole batch:
//!
//! 1. makes the bodies durable ([`Store::sync`]: one `syncfs` of the file system on Linux,
//!    elsewhere each file was `fsync`ed by `verify`);
//! 2. renames each into place ([`Store::place`]);
//! 3. makes the renames durable ([`Store::sync`] again: `syncfs`, or each directory `fsync`ed);
//! 4. records every copy of the batch in the state in one transaction
//!    ([`StateStore::put_resources`]), and only then tells each download its outcome.
//!
//! So the guarantees of a commit one file at a time hold (Z39.99-2014 §5.2; DEVELOPERS.md
//! "Durable"): no file at its final path is ever partial or unverified, and no row is written
//! before its file is in place and synced. A run killed at any moment loses at most the batch in
//! flight: its temporary files are removed by the next run, and files it renamed but did not
//! record are adopted by their digest without being fetched again. While a batch is being synced
//! the next one fills, so the cost of a sync is shared by as many files as arrive meanwhile.

use std::sync::Mutex;
use std::thread::JoinHandle;

use resourcesync_store::{FsStore, RelPath, ResourceRecord, StateStore, Store, Verified};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Error, Result};

/// Most copies committed together.
pub(crate) const MAX_BATCH: usize = 2048;

/// One verified copy waiting to be put in place and recorded.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The verified body.
    pub(crate) body: Verified,
    /// Where it goes.
    pub(crate) rel: RelPath,
    /// Its row (length and digests are taken from the body).
    pub(crate) row: ResourceRecord,
}

/// What happened to one copy of a batch: its length, or why it failed.
pub(crate) type Done = std::result::Result<u64, String>;

/// Which test crash points ([`crate::crashpoint`]) a batch passes: downloads or dump packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Downloaded resources (`after-rename`).
    Download,
    /// Entries of dump packages (`package-renamed`).
    Package,
}

/// Puts a batch in place and records it (steps 1 to 4 of the module documentation); one outcome
/// per copy, in order.
pub(crate) fn commit_batch(
    store: &dyn Store,
    state: &dyn StateStore,
    batch: Vec<Pending>,
    origin: Origin,
) -> Vec<Done> {
    let renamed = match origin {
        Origin::Download => "after-rename",
        Origin::Package => "package-renamed",
    };
    let n = batch.len();
    let fail_all = |e: &dyn std::fmt::Display| (0..n).map(|_| Err(e.to_string())).collect();
    if let Err(e) = store.sync(&[]) {
        return fail_all(&e);
    }
    let mut out: Vec<Done> = Vec::with_capacity(n);
    let mut rows: Vec<ResourceRecord> = Vec::with_capacity(n);
    let mut placed: Vec<RelPath> = Vec::with_capacity(n);
    let mut slots: Vec<usize> = Vec::with_capacity(n);
    for p in batch {
        let Pending { body, rel, mut row } = p;
        match store.place(body, &rel) {
            Ok(c) => {
                crate::crashpoint::point(renamed);
                row.length = Some(c.length);
                row.hashes = c.hashes;
                slots.push(out.len());
                out.push(Ok(c.length));
                rows.push(row);
                placed.push(rel);
            }
            Err(e) => out.push(Err(e.to_string())),
        }
    }
    if rows.is_empty() {
        return out;
    }
    // The rows only once the files are durably in place; a failure here leaves files without
    // rows, which the next run adopts by their digest.
    let recorded = store
        .sync(&placed)
        .map_err(|e| e.to_string())
        .and_then(|()| state.put_resources(&rows).map_err(|e| e.to_string()));
    match recorded {
        Ok(()) => {
            // The rows and the removal of their pending changes are one transaction.
            for _ in &rows {
                crate::crashpoint::point("state");
            }
        }
        Err(e) => {
            for i in slots {
                out[i] = Err(e.clone());
            }
        }
    }
    out
}

type Job = (Pending, oneshot::Sender<Done>);

/// What a queued copy came to, once its batch is committed.
#[derive(Debug)]
pub(crate) struct Receipt(oneshot::Receiver<Done>);

impl Receipt {
    /// Waits for the batch.
    pub(crate) async fn done(self) -> Done {
        self.0
            .await
            .unwrap_or_else(|_| Err("the commit thread has stopped".into()))
    }
}

/// The committer thread and the queue that feeds it.
#[derive(Debug)]
pub(crate) struct Committer {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Committer {
    /// Starts the committer thread for a store and a state.
    pub(crate) fn start(
        store: std::sync::Arc<FsStore>,
        state: std::sync::Arc<dyn StateStore>,
    ) -> Result<Self> {
        let (tx, mut rx) = mpsc::channel::<Job>(MAX_BATCH * 2);
        let thread = std::thread::Builder::new()
            .name("resourcesync-commit".into())
            .spawn(move || {
                while let Some(first) = rx.blocking_recv() {
                    let mut jobs = vec![first];
                    while jobs.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(j) => jobs.push(j),
                            Err(_) => break,
                        }
                    }
                    let (batch, replies): (Vec<Pending>, Vec<oneshot::Sender<Done>>) =
                        jobs.into_iter().unzip();
                    let done =
                        commit_batch(store.as_ref(), state.as_ref(), batch, Origin::Download);
                    for (reply, d) in replies.into_iter().zip(done) {
                        let _ = reply.send(d);
                    }
                }
            })
            .map_err(|e| Error::io("starting the commit thread", e))?;
        Ok(Committer {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues a verified copy (waiting while the queue is full); the receiver resolves once it
    /// is in place and recorded (or failed).
    pub(crate) async fn enqueue(&self, p: Pending) -> std::result::Result<Receipt, String> {
        let tx = self.tx.lock().ok().and_then(|g| g.clone());
        let Some(tx) = tx else {
            return Err("the run is ending: not committed".into());
        };
        let (reply, rx) = oneshot::channel();
        if tx.send((p, reply)).await.is_err() {
            return Err("the commit thread has stopped".into());
        }
        Ok(Receipt(rx))
    }

    /// Commits what is queued and stops the thread.
    pub(crate) fn close(&self) {
        if let Ok(mut g) = self.tx.lock() {
            g.take();
        }
        let t = self.thread.lock().ok().and_then(|mut g| g.take());
        if let Some(t) = t {
            let _ = t.join();
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resourcesync_store::{Expect, SqliteState};

    fn verified(store: &FsStore, body: &[u8]) -> Verified {
        let mut t = store
            .create_temp(Expect {
                length: Some(body.len() as u64),
                max_bytes: 1 << 20,
                ..Expect::default()
            })
            .expect("temp");
        t.write(body).expect("write");
        store.verify(t).expect("verify")
    }

    fn pending(store: &FsStore, uri: &str, path: &str, body: &[u8]) -> Pending {
        Pending {
            body: verified(store, body),
            rel: RelPath::parse(path).expect("rel"),
            row: ResourceRecord {
                uri: uri.into(),
                source: "cap".into(),
                path: path.into(),
                ..ResourceRecord::default()
            },
        }
    }

    #[test]
    fn a_batch_is_placed_then_recorded_and_a_bad_copy_fails_alone() {
        let d = tempfile::tempdir().expect("tmp");
        let store = FsStore::open(d.path()).expect("store");
        let state = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
        std::fs::create_dir(d.path().join("taken")).expect("dir");
        let batch = vec![
            pending(&store, "http://h/a", "x/a.txt", b"aaa"),
            // A directory is where this file goes: it fails, the others do not.
            pending(&store, "http://h/t", "taken", b"t"),
            pending(&store, "http://h/b", "x/y/b.txt", b"bb"),
        ];
        let done = commit_batch(&store, &state, batch, Origin::Download);
        assert_eq!(done[0], Ok(3));
        assert!(
            done[1].as_ref().is_err_and(|e| e.contains("directory")),
            "{done:?}"
        );
        assert_eq!(done[2], Ok(2));
        assert_eq!(std::fs::read(d.path().join("x/y/b.txt")).expect("b"), b"bb");
        let row = state.resource("http://h/a").expect("get").expect("row");
        assert_eq!(row.length, Some(3));
        assert!(
            !row.hashes.is_empty(),
            "the digest computed while writing is kept"
        );
        assert!(state.resource("http://h/t").expect("get").is_none());
        assert_eq!(
            store.clean_tmp().expect("clean"),
            0,
            "no temporary file left"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_committer_answers_every_copy_and_stops_when_closed() {
        let d = tempfile::tempdir().expect("tmp");
        let store = std::sync::Arc::new(FsStore::open(d.path()).expect("store"));
        let state: std::sync::Arc<dyn StateStore> =
            std::sync::Arc::new(SqliteState::open(&d.path().join("s.sqlite")).expect("state"));
        let c = Committer::start(store.clone(), state.clone()).expect("start");
        let mut receipts = Vec::new();
        for i in 0..50 {
            let p = pending(&store, &format!("http://h/{i}"), &format!("d/{i}"), b"x");
            receipts.push(c.enqueue(p).await.expect("queued"));
        }
        for r in receipts {
            assert_eq!(r.done().await, Ok(1));
        }
        c.close();
        let p = pending(&store, "http://h/late", "late", b"x");
        assert!(c.enqueue(p).await.is_err(), "closed");
        assert_eq!(
            state.resources_page("cap", None, 100).expect("rows").len(),
            50
        );
    }
}
