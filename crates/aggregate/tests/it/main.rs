//! The aggregator's tests: one binary, one module per file.

mod bad_sources;
mod config;
mod limits;
mod outage;
mod page;
mod push;
mod republish;
mod republish_ranges;
mod republish_s3;
mod service;
mod share_renew;
mod share_sources;
