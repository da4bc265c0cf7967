//! What one simulation run is: the Source's workload, the strategy and the network.

use serde::Serialize;

use crate::error::{Error, Result};

/// How the Destination learns about changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Every synchronization interval, a baseline diff against the Resource List (the paper's
    /// "baseline", Z39.99-2014 §10).
    Baseline,
    /// Every synchronization interval, the Change List after the cursor (the paper's
    /// "incremental", Z39.99-2014 §12).
    Incremental,
    /// Each change pushed as a Change Notification (Change Notification 1.0.1), the resource
    /// fetched on arrival; the synchronization interval plays no part.
    Push,
}

impl Strategy {
    /// The name used on the command line and in the CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Baseline => "baseline",
            Strategy::Incremental => "incremental",
            Strategy::Push => "push",
        }
    }

    /// All three, in plotting order.
    pub const ALL: [Strategy; 3] = [Strategy::Baseline, Strategy::Incremental, Strategy::Push];
}

impl std::str::FromStr for Strategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "baseline" => Ok(Strategy::Baseline),
            "incremental" => Ok(Strategy::Incremental),
            "push" => Ok(Strategy::Push),
            _ => Err(Error::Config(format!(
                "unknown strategy {s:?}: baseline, incremental or push"
            ))),
        }
    }
}

/// Virtual time or real HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Discrete events in virtual time.
    Model,
    /// Our Source and Destination over loopback HTTP, in real time.
    Real,
}

impl Mode {
    /// The name used on the command line and in the CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Model => "model",
            Mode::Real => "real",
        }
    }
}

/// How the times between changes are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChangeDist {
    /// Every `change_interval` seconds exactly.
    Fixed,
    /// Exponentially distributed with mean `change_interval` (a Poisson process).
    Exp,
}

impl ChangeDist {
    /// The name used on the command line and in the CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeDist::Fixed => "fixed",
            ChangeDist::Exp => "exp",
        }
    }
}

/// Relative weights of the kinds of change. A change that cannot happen (an update or delete
/// when the Source is empty) becomes a create.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChangeMix {
    /// Weight of creates.
    pub create: f64,
    /// Weight of updates.
    pub update: f64,
    /// Weight of deletes.
    pub delete: f64,
}

impl Default for ChangeMix {
    /// Mostly updates, with as many creates as deletes so that N stays about constant.
    fn default() -> Self {
        ChangeMix {
            create: 0.1,
            update: 0.8,
            delete: 0.1,
        }
    }
}

impl ChangeMix {
    /// Parses `create,update,delete` weights (`0.1,0.8,0.1`).
    pub fn parse(s: &str) -> Result<Self> {
        let v: Vec<f64> = s
            .split(',')
            .map(|p| p.trim().parse::<f64>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                Error::Config(format!("--mix {s:?}: three numbers create,update,delete"))
            })?;
        match v.as_slice() {
            [c, u, d] if v.iter().all(|x| x.is_finite() && *x >= 0.0) && c + u + d > 0.0 => {
                Ok(ChangeMix {
                    create: *c,
                    update: *u,
                    delete: *d,
                })
            }
            _ => Err(Error::Config(format!(
                "--mix {s:?}: three non-negative weights create,update,delete, not all zero"
            ))),
        }
    }

    /// `create,update,delete`.
    pub fn to_spec(&self) -> String {
        format!("{},{},{}", self.create, self.update, self.delete)
    }
}

/// Payload sizes in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum SizeDist {
    /// Every payload this size.
    Fixed {
        /// Bytes.
        bytes: u64,
    },
    /// Uniform between `min` and `max` bytes, both included.
    Uniform {
        /// Fewest bytes.
        min: u64,
        /// Most bytes.
        max: u64,
    },
}

impl Default for SizeDist {
    /// The paper: "the maximum representation size was set to 1k bytes".
    fn default() -> Self {
        SizeDist::Uniform { min: 1, max: 1024 }
    }
}

impl SizeDist {
    /// Parses `fixed:BYTES` or `uniform:MIN:MAX`.
    pub fn parse(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        let num = |p: &str| {
            p.parse::<u64>()
                .map_err(|_| Error::Config(format!("--size {s:?}: {p:?} is not a byte count")))
        };
        let d = match parts.as_slice() {
            ["fixed", b] => SizeDist::Fixed { bytes: num(b)? },
            ["uniform", a, b] => SizeDist::Uniform {
                min: num(a)?,
                max: num(b)?,
            },
            _ => {
                return Err(Error::Config(format!(
                    "--size {s:?}: fixed:BYTES or uniform:MIN:MAX"
                )));
            }
        };
        d.check()?;
        Ok(d)
    }

    fn check(&self) -> Result<()> {
        let ok = match *self {
            SizeDist::Fixed { bytes } => (1..=1 << 30).contains(&bytes),
            SizeDist::Uniform { min, max } => min >= 1 && min <= max && max <= 1 << 30,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "payload sizes {} must be between 1 byte and 1 GiB, min <= max",
                self.to_spec()
            )))
        }
    }

    /// `fixed:BYTES` or `uniform:MIN:MAX`.
    pub fn to_spec(&self) -> String {
        match *self {
            SizeDist::Fixed { bytes } => format!("fixed:{bytes}"),
            SizeDist::Uniform { min, max } => format!("uniform:{min}:{max}"),
        }
    }

    /// One draw.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> u64 {
        match *self {
            SizeDist::Fixed { bytes } => bytes,
            SizeDist::Uniform { min, max } => rng.u64(min..=max),
        }
    }
}

/// The network of model mode. Real mode runs over loopback and ignores it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Network {
    /// Seconds from sending a request to the first byte of its response.
    pub request_latency: f64,
    /// Bytes per second of one response body.
    pub bandwidth: f64,
    /// Resource downloads in flight at once (the Destination's `--concurrency`).
    pub concurrency: usize,
    /// Seconds of the Destination's own work per synchronization, before its first request
    /// (opening its state, staging, committing): what a real run costs beyond its requests.
    /// For push: per notification received, before it acts on it.
    pub sync_overhead: f64,
    /// Seconds from a change at the Source to its listing in the Source's documents (and its
    /// notification): the Source's scan and publish time. For push: the time of one publish
    /// batch, to the notification's delivery; changes made while one runs wait for the next.
    pub publish_delay: f64,
}

impl Default for Network {
    /// 50 ms per request, 1 MB/s, 8 downloads at once, no overhead.
    fn default() -> Self {
        Network {
            request_latency: 0.05,
            bandwidth: 1_000_000.0,
            concurrency: 8,
            sync_overhead: 0.0,
            publish_delay: 0.0,
        }
    }
}

impl Network {
    /// Seconds to fetch a body of `bytes`.
    pub fn transfer(&self, bytes: u64) -> f64 {
        self.request_latency + bytes as f64 / self.bandwidth
    }
}

/// When our Source closes the open Change List and starts another (the Source's
/// `resourcesync_source::state::Rotation`, whose defaults these are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rotation {
    /// Most changes in one Change List.
    pub max_entries: u64,
    /// Longest period of one Change List, in seconds.
    pub max_age_secs: u64,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            max_entries: 10_000,
            max_age_secs: 86_400,
        }
    }
}

/// One simulation run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// Resources at the start.
    pub resources: u64,
    /// Mean seconds between changes at the Source.
    pub change_interval: f64,
    /// How the times between changes are drawn.
    pub change_dist: ChangeDist,
    /// Kinds of change.
    pub mix: ChangeMix,
    /// Payload sizes.
    pub size: SizeDist,
    /// How the Destination follows the Source.
    pub strategy: Strategy,
    /// Seconds between the starts of two synchronizations (baseline, incremental).
    pub sync_interval: f64,
    /// Seconds of changes (and of the measured interval).
    pub duration: f64,
    /// Seed of the workload.
    pub seed: u64,
    /// Virtual or real time.
    pub mode: Mode,
    /// The network (model mode).
    pub network: Network,
    /// Change List rotation of the Source.
    pub rotation: Rotation,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            resources: 1000,
            change_interval: 1.0,
            change_dist: ChangeDist::Fixed,
            mix: ChangeMix::default(),
            size: SizeDist::default(),
            strategy: Strategy::Incremental,
            sync_interval: 10.0,
            duration: 1000.0,
            seed: 1,
            mode: Mode::Model,
            network: Network::default(),
            rotation: Rotation::default(),
        }
    }
}

impl Config {
    /// Refuses what cannot be simulated.
    pub fn check(&self) -> Result<()> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::Config(format!(
                    "{name} must be a positive number of seconds"
                )))
            }
        };
        pos("--change-interval", self.change_interval)?;
        pos("--sync-interval", self.sync_interval)?;
        pos("--duration", self.duration)?;
        if self.resources > 1_000_000 {
            return Err(Error::Config("--resources is at most 1,000,000".into()));
        }
        if self.duration / self.change_interval > 10_000_000.0 {
            return Err(Error::Config(
                "more than 10 million changes: raise --change-interval or lower --duration".into(),
            ));
        }
        if self.duration / self.sync_interval > 1_000_000.0 {
            return Err(Error::Config(
                "more than a million synchronizations: raise --sync-interval".into(),
            ));
        }
        let n = self.network;
        if !(n.request_latency.is_finite() && n.request_latency >= 0.0) {
            return Err(Error::Config(
                "--request-latency must be >= 0 seconds".into(),
            ));
        }
        if !(n.bandwidth.is_finite() && n.bandwidth > 0.0) {
            return Err(Error::Config(
                "--bandwidth must be positive bytes per second".into(),
            ));
        }
        if !(n.sync_overhead.is_finite() && n.sync_overhead >= 0.0) {
            return Err(Error::Config("--sync-overhead must be >= 0 seconds".into()));
        }
        if !(n.publish_delay.is_finite() && n.publish_delay >= 0.0) {
            return Err(Error::Config("--publish-delay must be >= 0 seconds".into()));
        }
        if !(1..=1024).contains(&n.concurrency) {
            return Err(Error::Config("--concurrency is 1 to 1024".into()));
        }
        if self.rotation.max_entries == 0 || self.rotation.max_age_secs == 0 {
            return Err(Error::Config(
                "Change List rotation limits must be positive".into(),
            ));
        }
        self.size.check()?;
        Ok(())
    }
}
