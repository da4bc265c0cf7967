//! The test kit of resourcesync (a dev-dependency only, never published): what integration
//! tests of every crate serve, break and compare.
//!
//! - [`server`]: a hand-written Source server on 127.0.0.1:0: a directory and in-memory
//!   documents ([`server::Reply`]: status, headers, delay), injected faults, request counts.
//! - [`serve()`] / [`serve_at`]: any axum router on a loopback address, port 0.
//! - [`fault_proxy`]: a fault-injecting HTTP/1.1 proxy (drops, resets, truncations, 429/5xx,
//!   delays, reordering), reproducible from a seed.
//! - [`wan`]: a WAN delay proxy: one-way delay per direction, a bandwidth cap, order kept per
//!   connection; checked against itself.
//! - [`chromium`]: headless Chromium for the tests of pages.
//! - [`cut`]: a TCP proxy whose link can be cut and restored (a server going away mid-run).
//! - [`pages()`]: a loopback server answering every request with a page of the test's making.
//! - [`tls`]: a private CA and a server certificate for 127.0.0.1 and localhost, as PEM files.
//! - [`tree`]: the files under a directory, and a readable difference between two trees.
//! - `sync` (feature `sync`): publish a Source tree, compare a Destination's copy with it,
//!   Destination options with small timeouts, a replayable seed.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod chromium;
pub mod cut;
pub mod fault_proxy;
pub mod pages;
pub mod server;
#[cfg(feature = "sync")]
pub mod sync;
pub mod tls;
pub mod tree;
pub mod wan;

pub use cut::CutProxy;
pub use fault_proxy::FaultProxy;
pub use pages::pages;
pub use server::{Fault, Reply, Server};
pub use wan::{Link, Wan, WanProxy};

use std::net::SocketAddr;

/// Serves `router` on 127.0.0.1, port 0, in the current Tokio runtime; its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    serve_at("127.0.0.1", router).await
}

/// Serves `router` on `ip` (a loopback address), port 0, in the current Tokio runtime.
pub async fn serve_at(ip: &str, router: axum::Router) -> SocketAddr {
    let l = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(l, router).await;
    });
    addr
}
