//! `resourcesync sync URL DEST --watch`: sync, then keep following the Source (crate
//! `resourcesync-destination`, module `watch`), printing a line per round that changed something,
//! until SIGINT or SIGTERM.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use resourcesync_destination::{
    Observer, Round, StopHandle, SyncOptions, WatchOptions, WatchReport,
};

use crate::printable::{printable, printable_message};
use crate::{EXIT_DIFFERENCES, EXIT_OK};

/// The `--watch` options of `sync`.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// After the first sync, keep following the Source: poll its Change Lists and apply new
    /// changes, until SIGINT or SIGTERM (the round in progress is finished; a second signal stops
    /// at once).
    #[arg(long)]
    pub(crate) watch: bool,
    /// Seconds between two polls (with --watch).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        requires = "watch"
    )]
    interval: f64,
    /// Receive changes pushed over WebSub (Change Notification): subscribe to the hub the
    /// Capability List advertises, apply each notification as it arrives, and catch up from the
    /// Change List on a gap, at start, and when nothing arrived for --interval seconds.
    #[arg(long, requires = "watch")]
    push: bool,
    /// Where the callback server listens (with --push).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        requires = "push"
    )]
    callback_listen: String,
    /// The callback's base URL as the hub reaches it (default http://LISTEN/ with the port
    /// bound; with --push).
    #[arg(long, value_name = "URL", requires = "push")]
    callback_url: Option<String>,
}

/// Forwards progress and warnings of the first round (the baseline, which may be long); later
/// rounds are summed up in one line each.
struct FirstRound {
    inner: Arc<dyn Observer>,
    on: AtomicBool,
    verbose: bool,
}

impl FirstRound {
    fn live(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }
}

impl Observer for FirstRound {
    fn phase(&self, what: &str) {
        if self.live() {
            self.inner.phase(what);
        }
    }
    fn warning(&self, message: &str) {
        if self.live() {
            self.inner.warning(message);
        } else if self.verbose {
            crate::out::say!("resourcesync: warning: {}", printable_message(message));
        }
    }
    fn add_total(&self, n: u64) {
        if self.live() {
            self.inner.add_total(n);
        }
    }
    fn resource_done(&self) {
        if self.live() {
            self.inner.resource_done();
        }
    }
    fn bytes(&self, n: u64) {
        if self.live() {
            self.inner.bytes(n);
        }
    }
}

use crate::printable::mode_name;

/// The one line of a round.
fn round_line(r: &Round) -> String {
    match (&r.report, &r.error) {
        (Some(s), _) => format!(
            "{} round {}: {}: {} created, {} updated, {} deleted, {} kept, {} failed; {} in {:.2} s",
            r.started,
            r.round,
            mode_name(s.mode),
            s.created,
            s.updated,
            s.deleted,
            s.kept,
            s.failed,
            crate::units::bytes(s.bytes),
            s.seconds
        ),
        (None, Some(e)) => format!("{} round {}: failed: {e}", r.started, r.round),
        (None, None) => format!("{} round {}", r.started, r.round),
    }
}

/// Runs the watch. `progress` shows the first round's progress; `clear` removes it.
pub(crate) fn run(
    o: &SyncOptions,
    a: &WatchArgs,
    json: bool,
    progress: Arc<dyn Observer>,
    clear: impl Fn() + Send,
) -> anyhow::Result<u8> {
    if !(a.interval.is_finite() && a.interval >= 0.0) {
        bail!("--interval must be a number of seconds");
    }
    let wopts = WatchOptions {
        interval: Duration::from_secs_f64(a.interval),
        ..WatchOptions::default()
    };
    let obs = Arc::new(FirstRound {
        inner: progress,
        on: AtomicBool::new(true),
        // The global -v: a line for every round, also when nothing changed.
        verbose: crate::out::verbose(),
    });
    let rt = crate::rt::runtime()?;
    let stop = stop_on_signals(&rt);
    let mut last_failed = 0u64;
    let mut write_err: Option<std::io::Error> = None;
    let verbose = crate::out::verbose();
    let quiet = crate::out::quiet();
    let observer = obs.clone();
    let on_round = |r: &Round| {
        if observer.on.swap(false, Ordering::Relaxed) {
            clear();
        }
        if let Some(rep) = &r.report {
            last_failed = rep.failed;
        }
        if write_err.is_some() || !(r.round == 1 || verbose || r.changed()) {
            return;
        }
        // -q: a round that went well says nothing (as `sync -q`).
        if quiet && !json && r.report.as_ref().is_some_and(|rep| rep.failed == 0) {
            return;
        }
        if let Err(e) = write_round(r, json) {
            write_err = Some(e);
        }
    };
    let total = if a.push {
        let popts = resourcesync_destination::PushOptions {
            callback_listen: a.callback_listen.clone(),
            callback_url: a.callback_url.clone(),
            poll_interval: Duration::from_secs_f64(a.interval.max(1.0)),
            ..resourcesync_destination::PushOptions::default()
        };
        rt.block_on(resourcesync_destination::watch_push(
            o,
            &wopts,
            &popts,
            obs.clone(),
            &stop,
            None,
            on_round,
        ))
    } else {
        rt.block_on(resourcesync_destination::watch(
            o,
            &wopts,
            obs.clone(),
            &stop,
            on_round,
        ))
    };
    if obs.on.load(Ordering::Relaxed) {
        clear();
    }
    let total = total?;
    if let Some(e) = write_err {
        return Err(e.into());
    }
    // Work in flight may be a blocking task (a scan, a hash): not waited for past this.
    rt.shutdown_timeout(Duration::from_secs(10));
    if total.rounds == 0 {
        bail!(
            "interrupted before the first sync completed (work done is kept: run again to resume)"
        );
    }
    say_total(&total, json)?;
    Ok(if last_failed > 0 {
        EXIT_DIFFERENCES
    } else {
        EXIT_OK
    })
}

/// A stop handle that the first SIGINT/SIGTERM stops after the current round, the second at
/// once.
fn stop_on_signals(rt: &tokio::runtime::Runtime) -> StopHandle {
    let stop = StopHandle::new();
    let handle = stop.clone();
    let mut signals = {
        let _in_runtime = rt.enter();
        crate::signal::Signals::new()
    };
    rt.spawn(async move {
        signals.next().await;
        crate::out::say!(
            "resourcesync: stopping after the current round (signal again to stop at once)"
        );
        handle.stop();
        signals.next().await;
        handle.stop_now();
    });
    stop
}

/// Writes a round to standard output: a JSON line, or its line and its first failures.
fn write_round(r: &Round, json: bool) -> std::io::Result<()> {
    let mut out = crate::out::stdout();
    if json {
        let t = serde_json::to_string(r).map_err(std::io::Error::other)?;
        writeln!(out, "{t}")?;
    } else {
        writeln!(out, "{}", round_line(r))?;
        if let Some(rep) = &r.report {
            for f in rep.failures.iter().take(10) {
                writeln!(
                    out,
                    "  failed {}: {}",
                    printable(&f.uri),
                    printable(&f.error)
                )?;
            }
        }
    }
    out.flush()
}

/// The closing line (or JSON object) of the watch: the totals of every round.
fn say_total(total: &WatchReport, json: bool) -> anyhow::Result<()> {
    let mut out = crate::out::stdout();
    if json {
        let t = serde_json::to_string(&serde_json::json!({ "watch": total }))?;
        writeln!(out, "{t}")?;
    } else {
        writeln!(
            out,
            "stopped after {}{}: {} created, {} updated, {} deleted, {} kept, {} failed; {} in {:.2} s",
            crate::units::count(total.rounds, "round", "rounds"),
            if total.interrupted {
                ", the last one abandoned"
            } else {
                ""
            },
            total.created,
            total.updated,
            total.deleted,
            total.kept,
            total.failed,
            crate::units::bytes(total.bytes),
            total.seconds
        )?;
    }
    Ok(())
}
