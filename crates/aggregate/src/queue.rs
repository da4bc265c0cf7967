//! The coordinator's side of the shared download work (see [`crate::work`]): the
//! Destination engine's `Downloads` port over a Source's PostgreSQL state. A sync with more
//! fetches than its threshold queues them here, as work items of the Source's schema (key: the
//! Source and the URI), and waits until none is left: woken by the completions of every worker
//! (PostgreSQL's `LISTEN`/`NOTIFY`, [`WorkQueue::wait_drained`]), without polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use resourcesync_destination::share::{PAGE, PortFuture};
use resourcesync_destination::{Downloads, SharedFetch};
use resourcesync_store::{PgState, WorkItem, WorkQueue};
use tokio::sync::watch;

use crate::shared::{Claiming, OwnQueues};

/// The shortest and longest waits of a claimer between two looks for queues with work to
/// claim (doubling while none is found), when it hears of no work added ([`crate::work`]).
pub(crate) const POLL_MIN: Duration = Duration::from_millis(20);
pub(crate) const POLL_MAX: Duration = Duration::from_secs(1);

/// The longest a coordinator waits for its claimer's first look at the state before its first
/// shared page (the claimer connects as the aggregator starts, long before a sync has a page
/// to share); past it, the page is fetched here.
const CLAIMER_START: Duration = Duration::from_secs(10);

/// The longest one blocking call of the coordinator's wait lasts (it is called again until the
/// queue is drained): a blocking thread is not held for ever by one call.
const WAIT_AT_MOST: Duration = Duration::from_secs(60);

/// Pages per other live worker kept waiting for a claim while the coordinator fetches its own:
/// with one, a helper that keeps up ran out between two questions (one a page); with two, it
/// has a page in hand while the next is decided, and gets two pages for the coordinator's one
/// when it ran out. More would leave more to the end, when the coordinator waits for them.
const WAITING_PAGES: u64 = 2;

/// Runs a blocking call of the state on a blocking thread.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> resourcesync_store::Result<T> + Send + 'static,
) -> resourcesync_destination::Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => Ok(r?),
        Err(e) => Err(resourcesync_destination::Error::Task(e.to_string())),
    }
}

/// The coordinator's side: the engine's `Downloads` port over the Source's PostgreSQL state.
#[derive(Debug)]
pub(crate) struct Queue {
    state: Arc<dyn WorkQueue>,
    threshold: usize,
    /// The Source's state, this worker's name and where its claimer stands: asked before
    /// each page whether this worker claims and another worker watching the Source is alive
    /// ([`PgState::other_workers`]); without, every page is shared.
    workers: Option<(Arc<PgState>, String, watch::Receiver<Claiming>)>,
    /// While the sync fetches, this worker's claimer leaves the queue to the others (see
    /// [`OwnQueues`]); from its wait, or its end, it takes part again.
    own: Option<(Arc<OwnQueues>, String)>,
    /// Whether [`Downloads::share_now`] waited for the claimer's start already.
    started: AtomicBool,
}

impl Drop for Queue {
    fn drop(&mut self) {
        if let Some((own, schema)) = &self.own {
            own.waiting(schema);
        }
    }
}

impl Queue {
    pub(crate) fn new(state: Arc<dyn WorkQueue>, threshold: usize) -> Self {
        Queue {
            state,
            threshold,
            workers: None,
            own: None,
            started: AtomicBool::new(false),
        }
    }

    /// The same queue, sharing a page only while this worker's claimer claims (`claiming`)
    /// and a worker other than `worker` watches the Source's queue (its heartbeat in `state`,
    /// renewed by its claimer: [`crate::work`]).
    pub(crate) fn alone_unless_others(
        mut self,
        state: Arc<PgState>,
        worker: &str,
        claiming: watch::Receiver<Claiming>,
        own: Arc<OwnQueues>,
    ) -> Self {
        let schema = state.schema().to_owned();
        own.fetching(&schema);
        self.own = Some((own, schema));
        self.workers = Some((state, worker.to_owned(), claiming));
        self
    }
}

impl Downloads for Queue {
    fn threshold(&self) -> usize {
        self.threshold
    }

    fn queue(
        &self,
        fetches: Vec<SharedFetch>,
    ) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        let state = self.state.clone();
        Box::pin(async move {
            let items: Vec<WorkItem> = fetches.iter().map(SharedFetch::work_item).collect();
            blocking(move || state.add_work(&items)).await?;
            Ok(())
        })
    }

    fn share_now(&self, source: &str, on_the_way: u64) -> PortFuture<'_, bool> {
        let Some((state, me, mut claiming)) = self.workers.clone() else {
            return Box::pin(async { true });
        };
        let source = source.to_owned();
        Box::pin(async move {
            // This worker's claimer must claim too: one stopped (a state of a newer schema)
            // would leave the pages queued here to the others alone, and a claim of one that
            // died to no one.
            // Waited for once per sync: a claimer that cannot reach the state does not hold
            // back every page.
            let now = if self.started.swap(true, Ordering::Relaxed) {
                *claiming.borrow()
            } else {
                tokio::time::timeout(CLAIMER_START, async {
                    claiming
                        .wait_for(|c| *c != Claiming::Starting)
                        .await
                        .map_or(Claiming::Starting, |c| *c)
                })
                .await
                .unwrap_or(Claiming::Starting)
            };
            if now != Claiming::Watching {
                return false;
            }
            // Alone, the queue's cost buys nothing: the page is fetched here. So too while
            // `WAITING_PAGES` per other worker wait unclaimed: they have as much as they keep
            // up with, and this worker goes on at its own pace rather than waiting for them
            // (two workers are never slower than one); below that, a page is queued before
            // they run out, so that a worker keeping up is never left without work. Counting what
            // they hold would share a page only once the last one's commits are done: a
            // worker behind a slow link to the state would idle half the time. A failure
            // to ask says nothing of the others; fetched here too (as safe as sharing off).
            let asked = blocking(move || {
                let (others, left) = state.others_and_left(&me, &source)?;
                tracing::debug!(%source, others, left, on_the_way, "share the next page?");
                Ok(others > 0
                    && left.saturating_add(on_the_way)
                        < others.saturating_mul(WAITING_PAGES * PAGE as u64))
            });
            match asked.await {
                Ok(share) => share,
                Err(e) => {
                    tracing::warn!("asking which workers are alive: {e}");
                    false
                }
            }
        })
    }

    fn wait(&self, source: &str) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        if let Some((own, schema)) = &self.own {
            own.waiting(schema);
        }
        let (state, source) = (self.state.clone(), source.to_owned());
        Box::pin(async move {
            // Woken by the completions (`WorkQueue::wait_drained`), not polling; the timeout
            // only bounds one blocking call, the wait goes on until the queue is drained.
            loop {
                let (st, s) = (state.clone(), source.clone());
                if blocking(move || st.wait_drained(&s, WAIT_AT_MOST)).await? {
                    return Ok(());
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resourcesync_store::{Claim, MemState};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    /// A queue counting the coordinator's questions, and telling when it starts to wait.
    #[derive(Debug, Default)]
    struct Counting {
        inner: MemState,
        left: AtomicUsize,
        waits: AtomicUsize,
        waiting: tokio::sync::Notify,
    }

    impl WorkQueue for Counting {
        fn add_work(&self, items: &[WorkItem]) -> resourcesync_store::Result<usize> {
            self.inner.add_work(items)
        }
        fn claim_work(
            &self,
            worker: &str,
            n: usize,
            ttl: Duration,
        ) -> resourcesync_store::Result<Vec<Claim>> {
            self.inner.claim_work(worker, n, ttl)
        }
        fn complete(&self, claims: &[Claim]) -> resourcesync_store::Result<usize> {
            self.inner.complete(claims)
        }
        fn release(&self, claims: &[Claim]) -> resourcesync_store::Result<usize> {
            self.inner.release(claims)
        }
        fn renew_work(
            &self,
            claims: &[Claim],
            ttl: Duration,
        ) -> resourcesync_store::Result<Vec<Claim>> {
            self.inner.renew_work(claims, ttl)
        }
        fn work_left(&self, source: &str) -> resourcesync_store::Result<u64> {
            self.left.fetch_add(1, Ordering::SeqCst);
            self.inner.work_left(source)
        }
        fn wait_drained(
            &self,
            source: &str,
            timeout: Duration,
        ) -> resourcesync_store::Result<bool> {
            self.waits.fetch_add(1, Ordering::SeqCst);
            self.waiting.notify_one();
            self.inner.wait_drained(source, timeout)
        }
    }

    fn item(i: usize) -> WorkItem {
        WorkItem {
            key: format!("s {i}"),
            source: "s".into(),
            payload: String::new(),
        }
    }

    /// The coordinator asks once and is woken by the last completion (made while it waits,
    /// by another thread, as another worker's would be): no question asked again and again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_coordinator_is_woken_by_the_last_completion_without_polling() {
        let st = Arc::new(Counting::default());
        st.add_work(&[item(0), item(1), item(2)]).expect("add");
        let claims = st
            .claim_work("w", 3, Duration::from_secs(600))
            .expect("claim");
        assert_eq!(claims.len(), 3, "claimed in one call");
        let q = Queue::new(st.clone(), 0);
        let waiter = tokio::spawn(async move { q.wait("s").await });
        st.waiting.notified().await;
        for c in claims {
            let s = st.clone();
            tokio::task::spawn_blocking(move || s.complete(&[c]))
                .await
                .expect("task")
                .expect("complete");
        }
        tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("woken by the completion, not at the wait's bound")
            .expect("task")
            .expect("wait");
        assert_eq!(st.left.load(Ordering::SeqCst), 0, "no poll of work_left");
        assert_eq!(st.waits.load(Ordering::SeqCst), 1, "one wait");
    }
}
