//! The aggregator's tests: one binary, one module per file.

mod config;
mod page;
mod republish;
mod service;
