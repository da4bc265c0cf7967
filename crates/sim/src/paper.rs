//! The grid of the paper's experiments (Figures 2–4): the values [`crate::grid`] runs and
//! [`crate::plot`] draws.

/// Resources of the paper's grid.
pub const RESOURCES: [u64; 5] = [100, 1_000, 10_000, 25_000, 50_000];
/// Change intervals of the paper's grid, seconds.
pub const CHANGE_INTERVALS: [f64; 2] = [0.1, 10.0];
/// Synchronization intervals of the paper's grid, seconds.
pub const SYNC_INTERVALS: [f64; 2] = [10.0, 100.0];
