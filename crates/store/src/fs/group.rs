//! Group commit of `syncfs(2)`: callers on one file system share the calls.
//!
//! A `syncfs` writes back every dirty page and inode of the file system, whoever wrote them:
//! a caller whose writes were done before a `syncfs` *started* is served by it, whichever
//! thread made it. Without sharing, every store of a process (an aggregator commits the copies
//! of several Sources at once, each store its own batches) called it on its own, one after the
//! other, each waiting for the others' data too: 26,804 calls for 40,000 copies of 20 Sources.
//!
//! Here a caller takes the number of the next call to start; if a call is running, it waits
//! for it to end, then either finds its number done by a call that started after it came (it
//! returns) or makes the next call itself, for everyone waiting. A call that fails is an
//! error for the caller that made it; those waiting for the same number try again themselves.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// The calls of one file system.
#[derive(Debug, Default)]
struct Group {
    state: Mutex<State>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The number of the last call started.
    started: u64,
    /// The number of the last call that ended well.
    completed: u64,
    /// Whether a call is running.
    running: bool,
    /// Callers waiting for a call to end.
    waiting: u64,
}

/// The groups, by device.
fn groups() -> &'static Mutex<HashMap<u64, Arc<Group>>> {
    static G: OnceLock<Mutex<HashMap<u64, Arc<Group>>>> = OnceLock::new();
    G.get_or_init(Mutex::default)
}

fn group(dev: u64) -> Arc<Group> {
    let mut g = groups().lock().unwrap_or_else(|p| p.into_inner());
    g.entry(dev).or_default().clone()
}

/// Makes everything written to the file system of `root` before this call durable, with
/// `sync` (the `syncfs` of `root`), sharing calls with the other threads of the process
/// (see the module's documentation). `dev` names the file system.
pub(crate) fn shared_sync<E>(
    dev: u64,
    root: &Path,
    sync: impl Fn(&Path) -> Result<(), E>,
) -> Result<(), E> {
    let g = group(dev);
    let mut s = g.state.lock().unwrap_or_else(|p| p.into_inner());
    // A call running now may have started before our writes: only the next one serves us.
    let need = s.started + 1;
    loop {
        if s.completed >= need {
            return Ok(());
        }
        if !s.running {
            s.running = true;
            s.started += 1;
            let mine = s.started;
            drop(s);
            let r = sync(root);
            let mut s = g.state.lock().unwrap_or_else(|p| p.into_inner());
            s.running = false;
            if r.is_ok() {
                s.completed = s.completed.max(mine);
            }
            drop(s);
            g.done.notify_all();
            return r;
        }
        s.waiting += 1;
        s = g.done.wait(s).unwrap_or_else(|p| p.into_inner());
        s.waiting -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Callers that come while a call runs are all served by the one next call: while the
    /// first call runs, every other caller is waiting (the call waits for that), so exactly
    /// two calls serve sixteen callers, each started after its callers asked.
    #[test]
    fn callers_that_come_during_a_call_share_the_next_one() {
        let dev = u64::MAX - 1;
        let calls = Arc::new(AtomicU64::new(0));
        let threads = 16u64;
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let calls = calls.clone();
                std::thread::spawn(move || {
                    let before = calls.load(Ordering::SeqCst);
                    shared_sync(dev, Path::new("/"), |_| {
                        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                            // The first call ends once every other caller waits.
                            let g = group(dev);
                            while g.state.lock().expect("state").waiting < threads - 1 {
                                std::thread::yield_now();
                            }
                        }
                        Ok::<(), ()>(())
                    })
                    .expect("sync");
                    // A call that started after this caller asked has ended.
                    assert!(calls.load(Ordering::SeqCst) > before);
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// A failed call is its caller's error, and the next caller makes a call of its own.
    #[test]
    fn a_failed_call_is_not_taken_for_done() {
        let dev = u64::MAX - 2;
        let r = shared_sync(dev, Path::new("/"), |_| Err("disk gone"));
        assert_eq!(r, Err("disk gone"));
        let calls = AtomicU64::new(0);
        shared_sync(dev, Path::new("/"), |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<(), &str>(())
        })
        .expect("sync");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
