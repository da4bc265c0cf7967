//! The integration tests of this crate, in one test binary (linked once): each former
//! `tests/NAME.rs` is the module `NAME` here (`cargo test -p CRATE --test it NAME::`).

#[cfg(target_os = "linux")]
mod robust_support;
#[cfg(unix)]
mod source_support;

mod aggregate;
mod aggregate_share;
mod aggregate_workers;
mod config;
mod crash;
mod demo;
mod explore;
mod faults_serve;
mod first_hour;
mod hub_robust;
mod hub_under_load;
mod interop_aggregate;
mod interop_resync;
mod interop_resync_publish;
mod interop_simulator;
mod interop_websub;
mod inventories;
#[cfg(target_os = "linux")]
mod iri_sources;
mod logs;
mod manual;
mod mirror_e2e;
mod modes;
mod nginx_publish;
mod push;
mod restore;
mod retention;
mod secrets;
mod serve;
#[cfg(target_os = "linux")]
mod serve_headers;
mod serve_robust;
mod serve_tls;
mod simulate;
#[cfg(target_os = "linux")]
mod slowloris;
mod source_first_hour;
mod source_page;
mod sync;
mod sync_flags;
mod validate;
