//! Standard output and standard error that nobody may be reading.
//!
//! `resourcesync audit URL DEST | head -1` closes the pipe after one line; a server started
//! with `2>&1 | head -1` has no standard error after its first line. Neither is a reason to
//! fail, panic, or change the exit status the work earned (1 when not in sync): a write to a
//! closed pipe ends all further output of that stream quietly, and the command goes on (a
//! server keeps serving and shuts down on its signal; a one-shot command finishes and exits
//! with its status). Rust ignores SIGPIPE, so such a write is an `EPIPE` error, which
//! `println!`/`eprintln!` turn into a panic: the binary uses [`stdout`] and [`say!`] instead.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// How much the program says (the global `-q`/`-v` flags): 0 quiet, 1 normal, 2 verbose.
static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// How much the program says: set once from `-q`/`-v`, before any command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verbosity {
    /// `-q`: no progress, no summaries; errors and warnings only.
    Quiet,
    /// The default.
    Normal,
    /// `-v`: more detail where there is more to say.
    Verbose,
}

/// Sets how much the program says (see [`Verbosity`]).
pub(crate) fn set_verbosity(v: Verbosity) {
    let n = match v {
        Verbosity::Quiet => 0,
        Verbosity::Normal => 1,
        Verbosity::Verbose => 2,
    };
    VERBOSITY.store(n, Ordering::Relaxed);
}

/// `-q` was given.
pub(crate) fn quiet() -> bool {
    VERBOSITY.load(Ordering::Relaxed) == 0
}

/// `-v` was given.
pub(crate) fn verbose() -> bool {
    VERBOSITY.load(Ordering::Relaxed) == 2
}

/// Whether progress may be drawn: standard error is a terminal and `-q` was not given (never
/// in a pipe or a file).
pub(crate) fn progress_allowed() -> bool {
    !quiet() && io::IsTerminal::is_terminal(&io::stderr())
}

static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
static STDERR_GONE: AtomicBool = AtomicBool::new(false);

/// Standard output (locked) whose closed pipe swallows everything written to it.
pub(crate) fn stdout() -> Out<io::StdoutLock<'static>> {
    Out {
        inner: io::stdout().lock(),
        gone: &STDOUT_GONE,
    }
}

/// Standard error (locked), the same way.
pub(crate) fn stderr() -> Out<io::StderrLock<'static>> {
    Out {
        inner: io::stderr().lock(),
        gone: &STDERR_GONE,
    }
}

/// A stream whose closed pipe (`EPIPE`) ends its output quietly; other errors are returned.
#[derive(Debug)]
pub(crate) struct Out<W> {
    inner: W,
    gone: &'static AtomicBool,
}

impl<W: Write> Out<W> {
    fn guard(&self, r: io::Result<()>) -> io::Result<()> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.gone.store(true, Ordering::Relaxed);
                Ok(())
            }
            r => r,
        }
    }
}

impl<W: Write> Write for Out<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.gone.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        let r = self.inner.write_all(buf);
        self.guard(r).map(|()| buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.gone.load(Ordering::Relaxed) {
            return Ok(());
        }
        let r = self.inner.flush();
        self.guard(r)
    }
}

/// Writes one line to standard error, ignoring every failure (a message about the work must
/// never stop or crash the work).
pub(crate) fn say_line(args: std::fmt::Arguments<'_>) {
    let write = || {
        let mut e = stderr();
        let _ = e.write_fmt(args);
        let _ = e.write_all(b"\n");
    };
    // Above the progress bars being drawn, if any, rather than through them.
    match shown_bars() {
        Some(mp) => mp.suspend(write),
        None => write(),
    }
}

/// The progress bars on the terminal now (at most one set: a command draws one at a time).
static BARS: std::sync::Mutex<Option<indicatif::MultiProgress>> = std::sync::Mutex::new(None);

/// Says which bars are drawn from now on (`None`: none), so that [`say_line`] writes above them.
pub(crate) fn show_bars(mp: Option<indicatif::MultiProgress>) {
    if let Ok(mut b) = BARS.lock() {
        *b = mp;
    }
}

fn shown_bars() -> Option<indicatif::MultiProgress> {
    BARS.lock().ok().and_then(|b| b.clone())
}

/// Writes one line to standard output, ignoring a closed pipe (see [`stdout`]).
pub(crate) fn say_stdout(args: std::fmt::Arguments<'_>) {
    let mut o = stdout();
    let _ = o.write_fmt(args);
    let _ = o.write_all(b"\n");
}

/// `println!` that never panics: see [`say_stdout`].
macro_rules! say_out {
    ($($t:tt)*) => {
        $crate::out::say_stdout(format_args!($($t)*))
    };
}
pub(crate) use say_out;

/// `eprintln!` that never panics: see [`say_line`].
macro_rules! say {
    ($($t:tt)*) => {
        $crate::out::say_line(format_args!($($t)*))
    };
}
pub(crate) use say;

/// Starts the log (see [`crate::log`]); a log file that cannot be opened is reported, and
/// the log goes nowhere.
pub(crate) fn init_logging() {
    if let Err(e) = crate::log::init() {
        say!("resourcesync: error: {e:#}");
        std::process::exit(i32::from(crate::EXIT_ERROR));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader has gone.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn a_closed_pipe_ends_output_quietly() {
        static GONE: AtomicBool = AtomicBool::new(false);
        let mut o = Out {
            inner: Closed,
            gone: &GONE,
        };
        assert!(writeln!(o, "one").is_ok());
        assert!(GONE.load(Ordering::Relaxed));
        assert!(writeln!(o, "two").is_ok());
        assert!(o.flush().is_ok());
    }

    /// A terminal that counts the lines cleared on it.
    #[derive(Debug, Default)]
    struct Term {
        cleared: std::sync::atomic::AtomicUsize,
    }

    /// The terminal as the bars hold it, while the test keeps its counts.
    #[derive(Debug)]
    struct Held(std::sync::Arc<Term>);

    impl indicatif::TermLike for Held {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn write_line(&self, _: &str) -> io::Result<()> {
            Ok(())
        }
        fn write_str(&self, _: &str) -> io::Result<()> {
            Ok(())
        }
        fn clear_line(&self) -> io::Result<()> {
            self.0.cleared.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A line said while bars are drawn (`sync --watch`'s "stopping after the current round")
    /// is written with the bars taken off the terminal first, not through them.
    #[test]
    fn a_line_said_while_bars_are_drawn_takes_them_off_first() {
        let term = std::sync::Arc::new(Term::default());
        let mp = indicatif::MultiProgress::with_draw_target(
            indicatif::ProgressDrawTarget::term_like(Box::new(Held(term.clone()))),
        );
        let bar = mp.add(indicatif::ProgressBar::new(10));
        bar.set_message("fetching");
        bar.inc(1);
        show_bars(Some(mp.clone()));
        let before = term.cleared.load(Ordering::SeqCst);
        say_line(format_args!("a line above the bars"));
        let after = term.cleared.load(Ordering::SeqCst);
        show_bars(None);
        assert!(
            after > before,
            "the bars were not taken off: {before} -> {after}"
        );
        bar.finish_and_clear();
    }
}
