//! The service's log as an operator reads it: every test of this binary logs through one
//! subscriber (installed once, level WARN and above) into a bounded buffer, which a test
//! searches for the lines that name its own Source.

use std::io::Write;
use std::sync::{Mutex, Once};

/// Most bytes kept (the rest of the log is dropped: tests look for early lines).
const KEPT: usize = 4 << 20;

static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

struct Buffer;

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let mut g = LOG.lock().unwrap_or_else(|p| p.into_inner());
        let room = KEPT.saturating_sub(g.len()).min(b.len());
        g.extend_from_slice(&b[..room]);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts capturing the log (from every thread), if it is not yet.
pub(crate) fn capture() {
    INSTALL.call_once(|| {
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(|| Buffer)
            .finish();
        let _ = tracing::subscriber::set_global_default(sub);
    });
}

/// The lines logged so far that contain every one of `words`.
pub(crate) fn lines_with(words: &[&str]) -> Vec<String> {
    let g = LOG.lock().unwrap_or_else(|p| p.into_inner());
    String::from_utf8_lossy(&g)
        .lines()
        .filter(|l| words.iter().all(|w| l.contains(w)))
        .map(str::to_owned)
        .collect()
}
