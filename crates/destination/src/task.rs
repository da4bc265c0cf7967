//! A whole sync as a task of its own, aborted when its handle is dropped (tokio-util's
//! `AbortOnDropHandle`, as every task a run spawns: a run ending early leaves nothing behind).

use std::future::Future;

use tokio_util::task::AbortOnDropHandle;

use crate::error::{Error, Result};

/// Runs `fut` as a task of its own (aborted if this future is dropped) and waits for it.
///
/// For a whole sync called from a future that may run on `block_on`'s thread (the rounds of
/// `watch`): there every download ending would wake a thread outside the runtime's workers, a
/// futex call and a context switch each time; as a task, the engine runs on a worker and is
/// woken there (docs/performance.md, "The loopback baseline"). A panic in `fut` is raised here.
pub(crate) async fn on_worker<F, T>(fut: F) -> Result<T>
where
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let mut task = AbortOnDropHandle::new(tokio::spawn(fut));
    match (&mut task).await {
        Ok(out) => out,
        Err(e) => match e.try_into_panic() {
            Ok(p) => std::panic::resume_unwind(p),
            Err(e) => Err(Error::Task(format!("the sync was stopped: {e}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tells when the future holding it is dropped.
    struct Dropped(Option<tokio::sync::oneshot::Sender<()>>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_on_a_worker_answers_and_is_aborted_when_dropped() {
        assert_eq!(on_worker(async { Ok(7) }).await.expect("answer"), 7);
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let (dropped_tx, dropped) = tokio::sync::oneshot::channel();
        let waiting = on_worker(async move {
            let _guard = Dropped(Some(dropped_tx));
            let _ = started_tx.send(());
            std::future::pending::<Result<()>>().await
        });
        // Given up once its task runs: the task goes with it.
        tokio::select! {
            _ = waiting => panic!("a pending task answered"),
            _ = started => {}
        }
        let gone = tokio::time::timeout(std::time::Duration::from_secs(10), dropped).await;
        assert!(matches!(gone, Ok(Ok(()))), "the task outlived its handle");
    }
}
