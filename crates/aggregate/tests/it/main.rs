//! The aggregator's tests: one binary, one module per file.

mod bad_sources;
mod config;
mod limits;
mod outage;
mod push;
mod page;
mod republish;
mod service;
