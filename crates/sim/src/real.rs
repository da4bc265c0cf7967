//! placeholder
use crate::{Config, Metrics, Result, Error};
/// x
pub fn run(_cfg: &Config) -> Result<Metrics> { Err(Error::Unsupported("x".into())) }
