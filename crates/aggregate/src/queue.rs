//! The coordinator's side of the shared download work (see [`crate::work`]): the
//! Destination engine's `Downloads` port over a Source's PostgreSQL state. A sync with more
//! fetches than its threshold queues them here, as work items of the Source's schema (key: the
//! Source and the URI), and waits, polling with a bounded back-off, until none is left.

use std::sync::Arc;
use std::time::Duration;

use resourcesync_destination::share::PortFuture;
use resourcesync_destination::{Downloads, SharedFetch};
use resourcesync_store::{WorkItem, WorkQueue};

/// The shortest and longest waits between two looks at a queue (doubling while it is not
/// empty).
pub(crate) const POLL_MIN: Duration = Duration::from_millis(20);
pub(crate) const POLL_MAX: Duration = Duration::from_secs(1);

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
}

impl Queue {
    pub(crate) fn new(state: Arc<dyn WorkQueue>, threshold: usize) -> Self {
        Queue { state, threshold }
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

    fn wait(&self, source: &str) -> PortFuture<'_, resourcesync_destination::Result<()>> {
        let (state, source) = (self.state.clone(), source.to_owned());
        Box::pin(async move {
            let mut pause = POLL_MIN;
            loop {
                let (st, s) = (state.clone(), source.clone());
                if blocking(move || st.work_left(&s)).await? == 0 {
                    return Ok(());
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(POLL_MAX);
            }
        })
    }
}
