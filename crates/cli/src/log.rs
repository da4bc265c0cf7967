//! The log of the long-running commands (`serve`, `hub`, `aggregate`): `tracing` events
//! written as text or JSON lines, to standard error or appended to a file; the level from
//! `-q`/`-v` or `RUST_LOG`; and the access log (a line per request, target `access`, see
//! `resourcesync_websub::access`) with `--access-log`. Every line is written with the
//! credentials of the URLs in it replaced ([`resourcesync_model::redact`]).

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::printable::LogWriter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One line per event for people: time, level, target, fields.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `fields`), for collectors.
    Json,
}

/// The global logging flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogArgs {
    /// Format of the log lines of `serve`, `hub` and `aggregate`.
    #[arg(long, global = true, help_heading = crate::GLOBAL_OPTIONS, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
    /// Append the log to this file instead of writing it to standard error (created if
    /// missing; reopened by a restart, so rotate by moving it and restarting or with
    /// `copytruncate`).
    #[arg(long, global = true, help_heading = crate::GLOBAL_OPTIONS, value_name = "PATH")]
    pub(crate) log_file: Option<PathBuf>,
    /// Log every request `serve` and `hub` answer: remote, method, path, status, bytes,
    /// duration_ms (target `access`; also on with `RUST_LOG=access=info`).
    #[arg(long, global = true, help_heading = crate::GLOBAL_OPTIONS)]
    pub(crate) access_log: bool,
}

/// The logging flags and `-q`/`-v`, kept until a command starts its log ([`init`]).
#[derive(Debug, Clone)]
struct Settings {
    args: LogArgs,
    quiet: bool,
    verbose: bool,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Keeps the logging flags and the global `-q`/`-v` until a command starts its log ([`init`]).
pub(crate) fn set(args: LogArgs, quiet: bool, verbose: bool) {
    let _ = SETTINGS.set(Settings {
        args,
        quiet,
        verbose,
    });
}

/// The log filter when `RUST_LOG` sets none: `info`; warnings and errors only with `-q`; this
/// program's own debug lines too with `-v`. The access log is off unless asked for.
fn default_filter(quiet: bool, verbose: bool) -> &'static str {
    if quiet {
        "warn,access=off"
    } else if verbose {
        "info,resourcesync_source=debug,resourcesync_websub=debug,resourcesync=debug,access=off"
    } else {
        "info,access=off"
    }
}

/// The filter: `RUST_LOG` if set, else [`default_filter`]; `access=info` with `--access-log`.
fn filter(s: &Settings) -> EnvFilter {
    let f = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(default_filter(s.quiet, s.verbose)));
    if s.args.access_log {
        match "access=info".parse() {
            Ok(d) => f.add_directive(d),
            Err(_) => f,
        }
    } else {
        f
    }
}

/// Where log lines go: standard error (control characters escaped, see [`LogWriter`]) or a
/// file shared by the threads.
#[derive(Debug, Clone)]
enum Sink {
    Stderr(LogWriter),
    File(Arc<Mutex<File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Every line, whatever its layer: the credentials of the URLs in it replaced
        // (resourcesync_model::redact). A line is written at once, so no URL is cut in two.
        let text = String::from_utf8_lossy(buf);
        let line = resourcesync_model::redact::text(&text);
        match self {
            Sink::Stderr(w) => {
                let _ = w.write_all(line.as_bytes());
            }
            Sink::File(f) => {
                // A poisoned lock still holds a usable file; a failed write is not worth
                // stopping the server for.
                let mut f = f.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = f.write_all(line.as_bytes());
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stderr(w) => w.flush(),
            Sink::File(f) => {
                let mut f = f.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let _ = f.flush();
                Ok(())
            }
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Sink {
    type Writer = Sink;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Starts the log as the flags say (once; later calls do nothing). Fails when the log file
/// cannot be opened.
pub(crate) fn init() -> anyhow::Result<()> {
    let settings = SETTINGS.get().cloned().unwrap_or(Settings {
        args: LogArgs {
            log_format: LogFormat::Text,
            log_file: None,
            access_log: false,
        },
        quiet: false,
        verbose: false,
    });
    let args = &settings.args;
    let (sink, ansi) = match &args.log_file {
        Some(p) => {
            // Owner-only (0600; an existing one others may read is made so): a log names
            // subscribers, callbacks and paths (see SECURITY.md).
            let f = resourcesync_fsmode::open_private(
                std::fs::OpenOptions::new().create(true).append(true),
                p,
            )
            .with_context(|| format!("opening the log file {}", p.display()))?;
            (Sink::File(Arc::new(Mutex::new(f))), false)
        }
        None => {
            let ansi = args.log_format == LogFormat::Text
                && std::io::IsTerminal::is_terminal(&std::io::stderr());
            (Sink::Stderr(LogWriter { ansi }), ansi)
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_writer(sink)
        .with_ansi(ansi)
        .with_env_filter(filter(&settings));
    let _ = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}
