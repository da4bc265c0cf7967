//! Progress of a long scan (`publish`, the start of `serve`): drawn on standard error once the
//! work has taken [`delay`] (two seconds), only on a terminal and without `-q`; nothing at all
//! in a pipe or a file, and nothing for work that ends sooner.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use resourcesync_source::scan::ScanProgress;

use crate::units::{bytes, noun};

/// How long work runs before its progress is drawn: two seconds (the environment variable
/// `RESOURCESYNC_PROGRESS_AFTER_MS` sets another, for tests).
fn delay() -> Duration {
    std::env::var("RESOURCESYNC_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(2), Duration::from_millis)
}

/// What the display is told from the work's thread.
#[derive(Debug)]
enum Note {
    /// The scan is over; documents are being written.
    Writing,
    /// The work is over.
    Done,
}

/// A progress display of a scan and the publish after it (see the module documentation).
#[derive(Debug)]
pub(crate) struct ScanDisplay {
    tx: Option<mpsc::Sender<Note>>,
    thread: Option<JoinHandle<()>>,
}

impl ScanDisplay {
    /// Starts watching `p` (a scan of `what`); draws nothing when progress is not allowed (see
    /// [`crate::out::progress_allowed`]).
    pub(crate) fn start(p: Arc<ScanProgress>, what: String) -> Self {
        if !crate::out::progress_allowed() {
            return ScanDisplay {
                tx: None,
                thread: None,
            };
        }
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("resourcesync-progress".into())
            .spawn(move || show(&p, &what, &rx))
            .ok();
        ScanDisplay {
            tx: Some(tx),
            thread,
        }
    }

    /// The scan is over: documents are being written.
    pub(crate) fn writing(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Note::Writing);
        }
    }

    /// The work is over: the display is cleared (and never drawn if it was not yet).
    pub(crate) fn finish(mut self) {
        self.end();
    }

    fn end(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Note::Done);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ScanDisplay {
    fn drop(&mut self) {
        self.end();
    }
}

/// The line for the scan's counters. What is read is called resources whatever the inventory
/// (files of a directory, rows of a table, objects of a bucket, records of a repository).
fn line(p: &ScanProgress) -> String {
    if !p.listed.load(Ordering::Relaxed) {
        // The scan reads files while the listing goes on (the total is not known yet).
        let read = p.read.load(Ordering::Relaxed);
        if read == 0 {
            return "listing the resources".into();
        }
        return format!(
            "listing the resources; {read} {} read so far ({})",
            noun(read, "resource", "resources"),
            bytes(p.bytes_read.load(Ordering::Relaxed))
        );
    }
    let (read, total) = (
        p.read.load(Ordering::Relaxed),
        p.to_read.load(Ordering::Relaxed),
    );
    if read >= total {
        // The scan is recording what it read, or the documents are being written.
        return format!(
            "{read} {} read ({}); recording and writing the documents",
            noun(read, "resource", "resources"),
            bytes(p.bytes_read.load(Ordering::Relaxed))
        );
    }
    format!(
        "reading {read}/{total} {} ({})",
        noun(total, "resource", "resources"),
        bytes(p.bytes_read.load(Ordering::Relaxed))
    )
}

/// Waits [`delay`], then draws until told the work is done.
fn show(p: &ScanProgress, what: &str, rx: &mpsc::Receiver<Note>) {
    let mut writing = false;
    // Quiet for the delay: work that ends sooner draws nothing.
    let started = std::time::Instant::now();
    let wait = delay();
    loop {
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left) {
            Ok(Note::Writing) => writing = true,
            Ok(Note::Done) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => break,
        }
    }
    // Set up hidden, then drawn: the first frame has its message.
    let bar = ProgressBar::hidden();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix}: {msg}  {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_prefix(crate::printable::printable(what).into_owned());
    let message = |writing: bool| {
        if writing {
            "writing the documents".to_owned()
        } else {
            line(p)
        }
    };
    bar.set_message(message(writing));
    bar.set_draw_target(ProgressDrawTarget::stderr());
    bar.tick();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Note::Writing) => writing = true,
            Ok(Note::Done) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        bar.set_message(message(writing));
        bar.tick();
    }
    bar.finish_and_clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_line_counts_resources_whatever_the_inventory() {
        let p = ScanProgress::default();
        assert_eq!(line(&p), "listing the resources");
        p.read.store(1, Ordering::Relaxed);
        assert_eq!(
            line(&p),
            "listing the resources; 1 resource read so far (0 B)"
        );
        p.listed.store(true, Ordering::Relaxed);
        p.to_read.store(3, Ordering::Relaxed);
        p.bytes_read.store(2048, Ordering::Relaxed);
        assert_eq!(line(&p), "reading 1/3 resources (2.0 KiB)");
        p.read.store(3, Ordering::Relaxed);
        assert_eq!(
            line(&p),
            "3 resources read (2.0 KiB); recording and writing the documents"
        );
    }
}
