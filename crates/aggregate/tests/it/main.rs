//! The aggregator's tests: one binary, one module per file.

mod config;
mod limits;
mod outage;
mod page;
mod republish;
mod service;
