//! The ResourceSync simulator: the experiments of the model paper
//! (`resourcesync-model-and-experiments-paper.txt`, §3) with our own code, extended with push.
//!
//! A run is a [`Config`]: a Source of N resources changing at an interval (fixed or
//! exponential), a change mix, a payload size distribution, a [`Strategy`] (baseline: Resource
//! List polling; incremental: Change List polling; push: Change Notifications) and a
//! synchronization interval. The same seed gives the same [`Workload`] (initial resources and
//! change events) in both [`Mode`]s:
//!
//! - [`Mode::Model`] ([`model`]): discrete events in virtual time ([`VirtualClock`]), with a
//!   network of configurable request latency, bandwidth and concurrency. The Destination plans
//!   with the project's one diff engine (`resourcesync-diff`: [`resourcesync_diff::diff_sorted`]
//!   for a Resource List, [`resourcesync_diff::needs_update`] for Change List entries and
//!   notifications), the Source's documents are sized by the model crate's writer ([`DocSizes`]).
//! - [`Mode::Real`] ([`real`]): our Source server and our Destination (`resourcesync-source`,
//!   `resourcesync-destination`, which plan with the same diff engine) over loopback HTTP in real
//!   time ([`WallClock`]), bytes and requests counted by a proxy in between.
//!
//! Both feed a [`Tracker`], which computes the paper's metrics ([`Metrics`]): average
//! consistency, average latency, data transfer efficiency, plus requests and bytes per change.
//! [`grid`] runs the paper's grid and [`plot`] draws its Figures 2–4.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod clock;
pub mod config;
pub mod docsize;
pub mod error;
pub mod grid;
pub mod metrics;
pub mod model;
mod paper;
pub mod plot;
pub mod real;
pub mod workload;

pub use clock::{Clock, VirtualClock, WallClock};
pub use config::{ChangeDist, ChangeMix, Config, Mode, Network, Rotation, SizeDist, Strategy};
pub use docsize::DocSizes;
pub use error::{Error, Result};
pub use metrics::{Metrics, Tracker};
pub use workload::{ChangeEvent, ChangeKind, Workload};

/// Runs one simulation in the configured mode.
pub fn run(cfg: &Config) -> Result<Metrics> {
    cfg.check()?;
    match cfg.mode {
        Mode::Model => model::run(cfg),
        Mode::Real => real::run(cfg),
    }
}
