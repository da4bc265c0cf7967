//! Calling synchronous clients from anywhere: [`offload`].
//!
//! The PostgreSQL client (`postgres`) and the S3 client (`reqwest::blocking`) each drive their
//! connections on a Tokio runtime of their own, which panics when it is entered, or dropped,
//! on a thread of another runtime that runs async tasks. The Destination engine calls its
//! state from async tasks, and any program may drop a store at the end of an async function:
//! every such call and drop goes through [`offload`].

/// Runs `f` where it may block: directly on a plain thread or a blocking-pool thread; through
/// `block_in_place` on a worker of a multi-threaded Tokio runtime; on a thread of its own from
/// a current-thread runtime, which has no other thread to hand its tasks to.
pub fn offload<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Err(_) => f(),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| match s.spawn(f).join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }),
    }
}
