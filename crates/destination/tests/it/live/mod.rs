//! A live Source served in-process on 127.0.0.1:0 (`resourcesync_source::server`), with the
//! file-system watcher off so that tests decide when a batch runs.
#![allow(unreachable_pub)]

use std::path::Path;
use std::time::Duration;

use resourcesync_source::server::{self, Running, ServeOptions};
use resourcesync_source::watch::WatchOptions;
use resourcesync_source::{Source, SourceConfig};

/// Serves `dir` as a live Source, the configuration adjusted by `f`. Changes are published when
/// the test runs a batch (`running.publisher().batch(false)`).
pub async fn live(dir: &Path, f: impl FnOnce(&mut SourceConfig)) -> Running {
    let listener = server::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut cfg = SourceConfig::new(dir, &format!("http://{addr}/"));
    f(&mut cfg);
    server::prepare_config(&mut cfg);
    let source = tokio::task::spawn_blocking(move || Source::open(cfg))
        .await
        .expect("join")
        .expect("source");
    let opts = ServeOptions {
        watch: WatchOptions {
            use_watcher: false,
            rescan_interval: Duration::from_secs(3600),
            resourcelist_interval: Duration::from_secs(3600),
            ..WatchOptions::default()
        },
        ..ServeOptions::default()
    };
    server::start(source, listener, opts).await.expect("start")
}
