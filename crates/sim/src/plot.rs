//! The paper's Figures 2–4 from grid rows: average consistency, average latency and data
//! transfer efficiency against the number of resources, in four panels (rows: synchronization
//! interval 10 s and 100 s; columns: change interval 0.1 s and 10 s), baseline red and solid,
//! incremental blue and dashed as in the paper; the `-push` variants add push in green, dotted.
//! Each figure is written as SVG and as PNG.
//!
//! Text is drawn with DejaVu Sans, embedded (`assets/DejaVuSans.ttf`, Bitstream Vera licence,
//! which allows redistribution; see `assets/DejaVuSans-LICENSE.txt`), so that PNGs need no
//! system font libraries.

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::paper::{CHANGE_INTERVALS, RESOURCES, SYNC_INTERVALS};

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The font is compiled in and known to be valid; a failure leaves text undrawn.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, FONT);
    });
}

/// One figure: which metric, how it is labelled.
#[derive(Debug, Clone, Copy)]
struct Figure {
    file: &'static str,
    title: &'static str,
    y: &'static str,
    value: fn(&Metrics) -> f64,
}

const FIGURES: [Figure; 3] = [
    Figure {
        file: "fig2-consistency",
        title: "Average consistency",
        y: "average consistency",
        value: |m| m.avg_consistency,
    },
    Figure {
        file: "fig3-latency",
        title: "Average latency",
        y: "average latency (s)",
        value: |m| m.avg_latency,
    },
    Figure {
        file: "fig4-efficiency",
        title: "Data transfer efficiency",
        y: "data transfer efficiency",
        value: |m| m.efficiency,
    },
];

fn series(
    rows: &[Metrics],
    strategy: &str,
    ci: f64,
    si: f64,
    f: fn(&Metrics) -> f64,
) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = rows
        .iter()
        .filter(|m| m.strategy == strategy && m.change_interval == ci && m.sync_interval == si)
        .map(|m| (m.resources as f64, f(m)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// The range of a panel's y axis, for the values of its lines.
fn y_range(fig: &Figure, lines: &[(&str, Vec<(f64, f64)>)]) -> (f64, f64) {
    let ys = lines.iter().flat_map(|(_, v)| v.iter().map(|p| p.1));
    let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    // Consistency and efficiency are fractions: from 0 (or near the lowest) to 1;
    // latency from 0.
    if fig.file == "fig3-latency" {
        (0.0, (hi * 1.08).max(1e-3))
    } else {
        let span = (hi - lo).max(0.02);
        (
            (lo - span * 0.1).max(0.0),
            (hi + span * 0.1).max(lo + 0.01).min(1.0),
        )
    }
}

type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rows: &[Metrics],
    fig: Figure,
    strategies: &[&str],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let with_push = strategies.contains(&"push");
    let title = format!(
        "{}{} (model mode, {} s per run)",
        fig.title,
        if with_push { ", with push" } else { "" },
        rows.first().map_or(0.0, |m| m.duration)
    );
    let root = root.titled(&title, ("sans-serif", 24))?;
    let panels = root.split_evenly((SYNC_INTERVALS.len(), CHANGE_INTERVALS.len()));
    let (x0, x1) = (
        RESOURCES[0] as f64 * 0.8,
        RESOURCES[RESOURCES.len() - 1] as f64 * 1.25,
    );
    for (i, area) in panels.iter().enumerate() {
        let si = SYNC_INTERVALS[i / CHANGE_INTERVALS.len()];
        let ci = CHANGE_INTERVALS[i % CHANGE_INTERVALS.len()];
        let lines: Vec<(&str, Vec<(f64, f64)>)> = strategies
            .iter()
            .map(|s| (*s, series(rows, s, ci, si, fig.value)))
            .collect();
        let (y0, y1) = y_range(&fig, &lines);
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("change interval {ci} s, sync interval {si} s"),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)?;
        chart
            .configure_mesh()
            .x_desc("number of resources")
            .y_desc(fig.y)
            .x_label_formatter(&|x| {
                if *x >= 1000.0 {
                    format!("{}k", x / 1000.0)
                } else {
                    format!("{x}")
                }
            })
            .label_style(("sans-serif", 12))
            .draw()?;
        for (name, pts) in lines {
            match name {
                "baseline" => {
                    let style = RED.stroke_width(2);
                    chart
                        .draw_series(LineSeries::new(pts.clone(), style))?
                        .label("baseline")
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                    chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, RED.filled())))?;
                }
                "incremental" => {
                    let style = BLUE.stroke_width(2);
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))?
                        .label("incremental")
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                    chart.draw_series(
                        pts.iter()
                            .map(|p| TriangleMarker::new(*p, 4, BLUE.filled())),
                    )?;
                }
                _ => {
                    let green = RGBColor(0, 140, 60);
                    let style = green.stroke_width(2);
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 2, 4, style))?
                        .label("push")
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                    chart.draw_series(
                        pts.iter().map(|p| Cross::new(*p, 4, green.stroke_width(2))),
                    )?;
                }
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.6))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn plot_err(path: &Path, e: impl std::fmt::Debug) -> Error {
    Error::Plot {
        path: path.display().to_string(),
        message: format!("{e:?}"),
    }
}

/// Draws Figures 2–4 (baseline and incremental) and their `-push` variants (all three
/// strategies) from the grid's rows, as SVG and PNG in `out`. Returns the files written.
pub fn paper_figures(rows: &[Metrics], out: &Path) -> Result<Vec<PathBuf>> {
    register_font();
    let mut written = Vec::new();
    let size = (1200, 900);
    for fig in FIGURES {
        for (suffix, strategies) in [
            ("", &["baseline", "incremental"][..]),
            ("-push", &["baseline", "incremental", "push"][..]),
        ] {
            let svg = out.join(format!("{}{suffix}.svg", fig.file));
            {
                let root = SVGBackend::new(&svg, size).into_drawing_area();
                draw(&root, rows, fig, strategies).map_err(|e| plot_err(&svg, e))?;
            }
            written.push(svg);
            let png = out.join(format!("{}{suffix}.png", fig.file));
            {
                let root = BitMapBackend::new(&png, size).into_drawing_area();
                draw(&root, rows, fig, strategies).map_err(|e| plot_err(&png, e))?;
            }
            written.push(png);
        }
    }
    Ok(written)
}
