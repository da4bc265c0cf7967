//! Time as the simulation sees it: seconds since the start of the measured interval.
//!
//! [`VirtualClock`] is moved by the model's event loop (a change, a request completing);
//! [`WallClock`] reads the real time of a run over HTTP. The [`crate::Tracker`] takes its times
//! from the driver, which reads them from its clock.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A source of the current simulated time.
pub trait Clock {
    /// Seconds since the start of the run (the measured interval starts at 0).
    fn now(&self) -> f64;
}

/// Virtual time: stands still until the event loop advances it.
#[derive(Debug, Default)]
pub struct VirtualClock(Cell<f64>);

impl VirtualClock {
    /// A clock at 0.
    pub fn new() -> Self {
        VirtualClock(Cell::new(0.0))
    }

    /// Moves the clock to `t` (never backwards).
    pub fn advance_to(&self, t: f64) {
        if t > self.0.get() {
            self.0.set(t);
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> f64 {
        self.0.get()
    }
}

/// Real time since a start instant.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    start: Instant,
}

impl WallClock {
    /// A clock whose 0 is now.
    pub fn start() -> Self {
        WallClock {
            start: Instant::now(),
        }
    }

    /// The instant of simulated time `t`.
    pub fn instant_of(&self, t: f64) -> Instant {
        self.start + Duration::from_secs_f64(t.max(0.0))
    }
}

impl Clock for WallClock {
    fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }
}
