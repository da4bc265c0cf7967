//! `resourcesync simulate`: the model paper's experiments (see the `resourcesync-sim` crate).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use resourcesync_sim::{
    ChangeDist, ChangeMix, Config, Metrics, Mode, Network, Rotation, SizeDist, Strategy,
};
use serde_json::json;

use crate::EXIT_OK;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StrategyArg {
    /// Poll the Resource List every sync interval (a baseline diff each time).
    Baseline,
    /// Poll the Change Lists every sync interval.
    Incremental,
    /// Change Notifications pushed to the Destination (WebSub; in real mode through the
    /// Source's embedded hub).
    Push,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ModeArg {
    /// Virtual time: discrete events with a modelled network (fast).
    Model,
    /// Our Source server and Destination over loopback HTTP, in real time.
    Real,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DistArg {
    /// Every --change-interval seconds exactly.
    Fixed,
    /// Exponential times between changes, mean --change-interval (a Poisson process).
    Exp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum GridArg {
    /// The paper's grid: N in {100, 1k, 10k, 25k, 50k}, change interval {0.1, 10} s, sync
    /// interval {10, 100} s; baseline, incremental and push.
    Paper,
}

#[derive(Debug, Args)]
pub(crate) struct SimulateArgs {
    /// Resources at the Source at the start.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    resources: u64,
    /// Mean seconds between changes at the Source.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    change_interval: f64,
    /// How the times between changes are drawn.
    #[arg(long, value_enum, default_value = "fixed")]
    change_dist: DistArg,
    /// Weights of creates, updates and deletes.
    #[arg(long, value_name = "C,U,D", default_value = "0.1,0.8,0.1")]
    mix: String,
    /// Payload sizes: fixed:BYTES or uniform:MIN:MAX (the paper: at most 1 KiB).
    #[arg(long, value_name = "DIST", default_value = "uniform:1:1024")]
    size: String,
    /// How the Destination follows the Source.
    #[arg(long, value_enum, default_value = "incremental")]
    strategy: StrategyArg,
    /// Seconds between synchronizations (baseline, incremental).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    sync_interval: f64,
    /// Seconds of changes (and of the measured interval).
    #[arg(long, value_name = "SECONDS", default_value_t = 1000.0)]
    duration: f64,
    /// Seed of the workload (same seed, same changes, same results in model mode).
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Virtual time or real HTTP.
    #[arg(long, value_enum, default_value = "model")]
    mode: ModeArg,
    /// Model: seconds from a request to the first byte of its response.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.05)]
    request_latency: f64,
    /// Model: bytes per second of a response.
    #[arg(long, value_name = "BYTES", default_value_t = 1_000_000.0)]
    bandwidth: f64,
    /// Resource downloads in flight at once.
    #[arg(long, value_name = "N", default_value_t = 8)]
    concurrency: usize,
    /// Model: seconds of the Destination's own work per synchronization.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    sync_overhead: f64,
    /// Model: seconds from a change to its publication by the Source.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    publish_delay: f64,
    /// The Source closes its open Change List after this many changes.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    changelist_max_entries: u64,
    /// The Source closes its open Change List after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    changelist_max_age: u64,
    /// Run a whole grid (model mode) and draw its figures instead of one run.
    #[arg(long, value_enum)]
    grid: Option<GridArg>,
    /// Write the metrics as CSV here (DIR/simulate.csv, one row per run, appended; for
    /// --grid, DIR/grid.csv and the figures).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the metrics as JSON.
    #[arg(long)]
    json: bool,
}

impl SimulateArgs {
    fn config(&self) -> anyhow::Result<Config> {
        let cfg = Config {
            resources: self.resources,
            change_interval: self.change_interval,
            change_dist: match self.change_dist {
                DistArg::Fixed => ChangeDist::Fixed,
                DistArg::Exp => ChangeDist::Exp,
            },
            mix: ChangeMix::parse(&self.mix)?,
            size: SizeDist::parse(&self.size)?,
            strategy: match self.strategy {
                StrategyArg::Baseline => Strategy::Baseline,
                StrategyArg::Incremental => Strategy::Incremental,
                StrategyArg::Push => Strategy::Push,
            },
            sync_interval: self.sync_interval,
            duration: self.duration,
            seed: self.seed,
            mode: match self.mode {
                ModeArg::Model => Mode::Model,
                ModeArg::Real => Mode::Real,
            },
            network: Network {
                request_latency: self.request_latency,
                bandwidth: self.bandwidth,
                concurrency: self.concurrency,
                sync_overhead: self.sync_overhead,
                publish_delay: self.publish_delay,
            },
            rotation: Rotation {
                max_entries: self.changelist_max_entries,
                max_age_secs: self.changelist_max_age,
            },
        };
        cfg.check()?;
        Ok(cfg)
    }
}

fn human(m: &Metrics) -> String {
    format!(
        "{} {} N={} change every {} s ({}) sync every {} s for {} s: \
         consistency {:.4}, latency {:.3} s, efficiency {:.4}, \
         {:.2} requests and {:.0} bytes per change ({} changes, {} not in sync at the end)",
        m.mode,
        m.strategy,
        m.resources,
        m.change_interval,
        m.change_dist,
        m.sync_interval,
        m.duration,
        m.avg_consistency,
        m.avg_latency,
        m.efficiency,
        m.requests_per_change,
        m.bytes_per_change,
        m.changes,
        m.unsynced_changes,
    )
}

pub(crate) fn run(a: &SimulateArgs) -> anyhow::Result<u8> {
    let cfg = a.config()?;
    let mut stdout = crate::out::stdout();
    if let Some(GridArg::Paper) = a.grid {
        let out = a.out.clone().context("--grid needs --out DIR")?;
        let bar = if crate::out::progress_allowed() && !a.json {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} runs {elapsed} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        } else {
            ProgressBar::hidden()
        };
        let report = resourcesync_sim::grid::run_paper(&cfg, &out, |i, n, m| {
            bar.set_length(n as u64);
            bar.set_position(i as u64);
            bar.set_message(format!("{} N={}", m.strategy, m.resources));
        })?;
        bar.finish_and_clear();
        if a.json {
            let v = json!({
                "csv": report.csv.display().to_string(),
                "plots": report.plots.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "seconds": report.seconds,
                "runs": report.rows,
            });
            serde_json::to_writer_pretty(&mut stdout, &v)?;
            writeln!(stdout)?;
        } else {
            for m in &report.rows {
                writeln!(stdout, "{}", human(m))?;
            }
            writeln!(
                stdout,
                "{} runs in {:.1} s; CSV {}; {} figures in {}",
                report.rows.len(),
                report.seconds,
                report.csv.display(),
                report.plots.len(),
                out.display()
            )?;
        }
        return Ok(EXIT_OK);
    }
    let m = resourcesync_sim::run(&cfg)?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("simulate.csv");
        let fresh = !path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if fresh {
            writeln!(f, "{}", Metrics::csv_header())?;
        }
        writeln!(f, "{}", m.csv_row())?;
    }
    if a.json {
        serde_json::to_writer_pretty(&mut stdout, &m)?;
        writeln!(stdout)?;
    } else {
        writeln!(stdout, "{}", human(&m))?;
    }
    Ok(EXIT_OK)
}
