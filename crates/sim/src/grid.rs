//! The paper's grid (§3): N ∈ {100, 1k, 10k, 25k, 50k}, change interval ∈ {0.1 s, 10 s},
//! synchronization interval ∈ {10 s, 100 s}, for baseline and incremental, plus push, run in
//! model mode; a CSV of every run and the plots of Figures 2–4 ([`crate::plot`]).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::config::{Config, Mode, Strategy};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
pub use crate::paper::{CHANGE_INTERVALS, RESOURCES, SYNC_INTERVALS};

/// The configurations of the grid, from `base` (which gives the workload's mix, sizes, seed,
/// duration and network).
pub fn paper_grid(base: &Config) -> Vec<Config> {
    let mut out = Vec::new();
    for &sync_interval in &SYNC_INTERVALS {
        for &change_interval in &CHANGE_INTERVALS {
            for strategy in Strategy::ALL {
                for &resources in &RESOURCES {
                    out.push(Config {
                        resources,
                        change_interval,
                        sync_interval,
                        strategy,
                        mode: Mode::Model,
                        ..base.clone()
                    });
                }
            }
        }
    }
    out
}

/// What a grid run wrote.
#[derive(Debug, Clone)]
pub struct GridReport {
    /// One row per run.
    pub rows: Vec<Metrics>,
    /// The CSV.
    pub csv: PathBuf,
    /// The plots (SVG and PNG).
    pub plots: Vec<PathBuf>,
    /// Seconds the grid took.
    pub seconds: f64,
}

/// Writes `rows` as a CSV file.
pub fn write_csv(path: &Path, rows: &[Metrics]) -> Result<()> {
    let mut text = String::from(Metrics::csv_header());
    text.push('\n');
    for r in rows {
        text.push_str(&r.csv_row());
        text.push('\n');
    }
    let tmp = path.with_extension("csv.tmp");
    let mut f = std::fs::File::create(&tmp)
        .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(format!("renaming {}", path.display()), e))
}

/// Runs the paper's grid from `base` in model mode, writing `grid.csv` and the figures into
/// `out`. `progress` is told of each run as it ends (index from 1, count, the row).
pub fn run_paper(
    base: &Config,
    out: &Path,
    mut progress: impl FnMut(usize, usize, &Metrics),
) -> Result<GridReport> {
    if base.mode != Mode::Model {
        return Err(Error::Config(
            "--grid paper runs in model mode (the real grid would take hours of real time)".into(),
        ));
    }
    let started = std::time::Instant::now();
    std::fs::create_dir_all(out)
        .map_err(|e| Error::io(format!("creating {}", out.display()), e))?;
    let configs = paper_grid(base);
    let mut rows = Vec::with_capacity(configs.len());
    for (i, cfg) in configs.iter().enumerate() {
        let m = crate::run(cfg)?;
        progress(i + 1, configs.len(), &m);
        rows.push(m);
    }
    let csv = out.join("grid.csv");
    write_csv(&csv, &rows)?;
    let plots = crate::plot::paper_figures(&rows, out)?;
    Ok(GridReport {
        rows,
        csv,
        plots,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_has_every_combination_once() {
        let g = paper_grid(&Config::default());
        assert_eq!(g.len(), 5 * 2 * 2 * 3);
        let mut keys: Vec<String> = g
            .iter()
            .map(|c| {
                format!(
                    "{} {} {} {:?}",
                    c.resources, c.change_interval, c.sync_interval, c.strategy
                )
            })
            .collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 60);
    }
}
