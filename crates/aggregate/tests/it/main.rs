//! The aggregator's tests: one binary, one module per file.

/// The address of a test server that `scripts/test.sh` starts and exports in `var`
/// (`RESOURCESYNC_TEST_POSTGRES`, `RESOURCESYNC_TEST_S3`); a test without it fails loudly.
pub(crate) fn server_env(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => {
            panic!("{var} is not set: run the tests with scripts/test.sh, which starts the server")
        }
    }
}

mod bad_sources;
mod config;
mod copies_conformance;
mod history;
mod limits;
mod logs;
mod many;
mod memento;
mod outage;
mod page;
mod push;
mod quota;
mod reach;
mod recorded;
mod republish;
mod republish_ranges;
mod republish_s3;
mod service;
mod share_renew;
mod share_sources;
mod shown;
