//! `resourcesync`: the command-line front end. Thin by design: every command is a few lines over
//! the library crates.
#![forbid(unsafe_code)]

mod aggregate;
mod config;
#[cfg(test)]
mod config_reference;
mod demo;
mod explore;
mod hub;
mod input;
mod log;
mod manual;
mod manual_sections;
mod out;
mod printable;
mod progress;
mod publish;
mod restore;
mod rt;
mod serve;
mod signal;
mod simulate;
mod sync;
mod units;
mod validate;
mod watch;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc rather than the system's allocator: a sync allocates per request and per copy,
/// from many threads (docs/performance.md, "The loopback baseline").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit status: success, or in sync / valid.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit status: differences found, document invalid, some items failed.
pub(crate) const EXIT_DIFFERENCES: u8 = 1;
/// Exit status: could not do the job (unreadable input, bad arguments, I/O).
pub(crate) const EXIT_ERROR: u8 = 2;

/// The heading of the global flags in each command's `--help`, listed after its own.
pub(crate) const GLOBAL_OPTIONS: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "resourcesync",
    version,
    about = "ResourceSync (ANSI/NISO Z39.99) Source, Destination and tools",
    long_about = "ResourceSync (ANSI/NISO Z39.99) Source, Destination and tools.\n\n\
                  Exit status: 0 ok, 1 differences or invalid documents, 2 error."
)]
struct Cli {
    /// More detail: `serve` and `hub` log at debug level, `sync --watch` prints every round,
    /// `publish` lists the documents written, `explore` every finding.
    #[arg(short, long, global = true, conflicts_with = "quiet", help_heading = GLOBAL_OPTIONS)]
    verbose: bool,
    /// Say less: no progress and no summaries, only errors and warnings (`serve` and `hub`
    /// log warnings and errors; `validate` reports errors only; `sync` and `audit` print
    /// nothing on success, and their summary on standard error when a resource failed or a
    /// copy differs; the exit status is the same: 0 ok, 1 failures or differences, 2 error).
    #[arg(short, long, global = true, help_heading = GLOBAL_OPTIONS)]
    quiet: bool,
    #[command(flatten)]
    log: log::LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Try it: a sample Source served on 127.0.0.1, explored, synced, changed, synced again and
    /// audited, each step with its figures (nothing to set up).
    Demo(demo::DemoArgs),
    /// Check documents against every rule of the specifications.
    Validate(validate::ValidateArgs),
    /// Summarize a document: kind, entries, time span, digests.
    Inspect(validate::InspectArgs),
    /// Publish a directory as a Source: scan, record changes, write every document.
    Publish(publish::PublishArgs),
    /// Serve a directory as a live Source: resources, documents, change detection.
    Serve(serve::ServeArgs),
    /// Synchronize a directory with a Source: discovery, baseline, then incremental.
    #[command(after_help = sync::SYNC_COUNTS)]
    Sync(sync::SyncArgs),
    /// Compare a synchronized directory with the Source's current state.
    Audit(sync::AuditArgs),
    /// Write the copies as they were at a time into a new directory, from the versions kept
    /// by `sync --versions`.
    Restore(restore::RestoreArgs),
    /// Show the tree of a Source's documents, each validated.
    Explore(explore::ExploreArgs),
    /// Reproduce the model paper's experiments (consistency, latency, transfer efficiency of
    /// baseline, incremental and push), in virtual time or over loopback HTTP.
    Simulate(simulate::SimulateArgs),
    /// Follow many Sources as one service: copies per Source, a page for operators, a JSON
    /// API and metrics; SIGHUP reads the configuration again, SIGTERM drains.
    Aggregate(aggregate::AggregateArgs),
    /// Run a W3C WebSub hub: subscriptions, verification, signed deliveries with retries,
    /// state in SQLite (for Change Notification, `serve --hub`, `sync --watch --push`).
    Hub(hub::HubArgs),
    /// Print the completions of a shell (bash, zsh, fish, elvish, powershell).
    Completions(manual::CompletionsArgs),
    /// Print the man page, or write a page per command into a directory (--out).
    Man(manual::ManArgs),
}

/// Raises the soft limit of open files to the hard one (ignoring failure), before any thread
/// or runtime starts: a sync keeps a descriptor open per new copy until it is linked into place
/// (the store sizes its budget from the soft limit, which it only reads), and `serve` one per
/// connection. The libraries leave process-wide limits alone; the program sets them.
fn raise_open_files_limit() {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let lim = getrlimit(Resource::Nofile);
        let raise = match (lim.current, lim.maximum) {
            (Some(soft), Some(hard)) => soft < hard,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if raise {
            // Refused (macOS refuses an unlimited soft limit, for one): the limit stays.
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: lim.maximum,
                    maximum: lim.maximum,
                },
            );
        }
    }
}

fn main() -> ExitCode {
    raise_open_files_limit();
    // TLS through rustls with the ring provider (no C toolchain beyond ring's own).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = config::parse();
    out::set_verbosity(if cli.quiet {
        out::Verbosity::Quiet
    } else if cli.verbose {
        out::Verbosity::Verbose
    } else {
        out::Verbosity::Normal
    });
    log::set(cli.log.clone(), cli.quiet, cli.verbose);
    let result = match cli.command {
        Command::Validate(a) => validate::run_validate(&a),
        Command::Inspect(a) => validate::run_inspect(&a),
        Command::Publish(a) => publish::run(&a),
        Command::Sync(a) => sync::run_sync(&a),
        Command::Audit(a) => sync::run_audit(&a),
        Command::Restore(a) => restore::run(&a),
        Command::Explore(a) => explore::run(&a),
        Command::Demo(a) => demo::run(&a),
        Command::Serve(a) => serve::run(&a),
        Command::Simulate(a) => simulate::run(&a),
        Command::Hub(a) => hub::run(&a),
        Command::Aggregate(a) => aggregate::run(&a),
        Command::Completions(a) => manual::run_completions(&a),
        Command::Man(a) => manual::run_man(&a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // A closed pipe (`resourcesync ... | head`) is not an error worth reporting.
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return ExitCode::from(EXIT_OK);
            }
            crate::out::say!(
                "resourcesync: error: {}",
                printable::printable_message(&resourcesync_model::redact::text(&format!("{e:#}")))
            );
            ExitCode::from(EXIT_ERROR)
        }
    }
}
