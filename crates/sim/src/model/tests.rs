//! Unit tests of the model.

use super::*;
use crate::config::{ChangeMix, Network, SizeDist};

fn updates_only() -> ChangeMix {
    ChangeMix {
        create: 0.0,
        update: 1.0,
        delete: 0.0,
    }
}

/// A network so fast that only the schedule matters.
fn instant() -> Network {
    Network {
        request_latency: 0.0,
        bandwidth: 1e15,
        concurrency: 4,
        sync_overhead: 0.0,
        publish_delay: 0.0,
    }
}

/// One change every 2 s, a sync every 10 s, over 100 s, nothing costing time: a change at
/// 10k + 2j waits 10 − 2j (j = 1..5, the one at 10k+10 is synced at once by the tick at the
/// same time), mean (8+6+4+2+0)/5 = 4 s, for every strategy that polls.
#[test]
fn hand_worked_latency_of_polling() {
    for strategy in [Strategy::Baseline, Strategy::Incremental] {
        let cfg = Config {
            resources: 100,
            change_interval: 2.0,
            mix: updates_only(),
            strategy,
            sync_interval: 10.0,
            duration: 100.0,
            network: instant(),
            ..Config::default()
        };
        let m = run(&cfg).expect("run");
        assert_eq!(m.changes, 50, "{strategy:?}");
        assert!((m.avg_latency - 4.0).abs() < 1e-6, "{strategy:?}: {m:?}");
        assert_eq!(m.unsynced_changes, 0);
        // Out of sync: 4 resources-intervals of 8,6,4,2 s per 10 s... of 100 resources:
        // per window, 8+6+4+2 = 20 resource-seconds out of 1000.
        assert!((m.avg_consistency - 0.98).abs() < 1e-3, "{m:?}");
    }
}

/// Push on an instant network: every copy follows at once.
#[test]
fn push_on_an_instant_network_is_always_consistent() {
    let cfg = Config {
        resources: 50,
        change_interval: 1.0,
        strategy: Strategy::Push,
        duration: 50.0,
        network: instant(),
        ..Config::default()
    };
    let m = run(&cfg).expect("run");
    assert!(
        m.avg_latency < 1e-9 && m.avg_consistency > 1.0 - 1e-9,
        "{m:?}"
    );
    assert_eq!(m.unsynced_changes, 0);
}

/// Push latency is a notification plus a download: 2 × 0.1 s + bytes / bandwidth.
#[test]
fn push_latency_is_two_requests() {
    let sizes = DocSizes::measure().expect("sizes");
    let cfg = Config {
        resources: 10,
        change_interval: 1.0,
        mix: updates_only(),
        size: SizeDist::Fixed { bytes: 1000 },
        strategy: Strategy::Push,
        duration: 20.0,
        network: Network {
            request_latency: 0.1,
            bandwidth: 10_000.0,
            concurrency: 1,
            sync_overhead: 0.0,
            publish_delay: 0.0,
        },
        ..Config::default()
    };
    let m = run(&cfg).expect("run");
    let expect = 0.2 + (sizes.notification_header + sizes.change_list_entry + 1000) as f64 / 1e4;
    assert!(
        (m.avg_latency - expect).abs() < 1e-9,
        "{} vs {expect}",
        m.avg_latency
    );
    // Efficiency per notification: the payload over payload plus notification.
    let eff = 1000.0 / (1000 + sizes.notification_header + sizes.change_list_entry) as f64;
    assert!((m.efficiency - eff).abs() < 1e-9);
    assert!((m.requests_per_change - 2.0).abs() < 1e-9);
}

/// Push with a slow Source: a publish batch takes 1.5 s, changes made while one runs wait
/// for the next and go out in one notification. Changes at 1, 2, 3, 4 s: batches [1] from
/// 1 to 2.5 s, [2] from 2.5 to 4, [3, 4] from 4 to 5.5 (the change at 4 s is made before
/// that batch starts). Latencies 1.5, 2, 2.5, 1.5 s on an instant network.
#[test]
fn push_batches_changes_made_while_the_source_publishes() {
    let cfg = Config {
        resources: 1000,
        change_interval: 1.0,
        mix: updates_only(),
        size: SizeDist::Fixed { bytes: 100 },
        strategy: Strategy::Push,
        duration: 4.0,
        network: Network {
            publish_delay: 1.5,
            ..instant()
        },
        ..Config::default()
    };
    let m = run(&cfg).expect("run");
    assert_eq!((m.changes, m.iterations), (4, 3));
    assert!((m.avg_latency - 1.875).abs() < 1e-9, "{}", m.avg_latency);
    // Three notifications and four downloads.
    assert!((m.requests_per_change - 7.0 / 4.0).abs() < 1e-9);
}

/// Baseline: one iteration fetches discovery, the Resource List and the changed resources;
/// efficiency is the changed bytes over all of them.
#[test]
fn hand_worked_baseline_efficiency() {
    let sizes = DocSizes::measure().expect("sizes");
    let cfg = Config {
        resources: 20,
        change_interval: 10.0,
        mix: updates_only(),
        size: SizeDist::Fixed { bytes: 500 },
        strategy: Strategy::Baseline,
        sync_interval: 10.0,
        duration: 30.0,
        network: instant(),
        ..Config::default()
    };
    let m = run(&cfg).expect("run");
    // Each iteration: one changed resource (500 bytes) of discovery + list + 500.
    let total = sizes.discovery() + sizes.resource_list(20) + 500;
    assert!((m.efficiency - 500.0 / total as f64).abs() < 1e-9, "{m:?}");
    assert_eq!(m.iterations, 3);
    assert_eq!(m.requests, 3 * 4);
}

/// Incremental: the open Change List is fetched whole each time (one period here), so the
/// bytes of the lists grow with the changes recorded.
#[test]
fn incremental_fetches_the_open_change_list_whole() {
    let sizes = DocSizes::measure().expect("sizes");
    let cfg = Config {
        resources: 20,
        change_interval: 10.0,
        mix: updates_only(),
        size: SizeDist::Fixed { bytes: 500 },
        strategy: Strategy::Incremental,
        sync_interval: 10.0,
        duration: 30.0,
        network: instant(),
        ..Config::default()
    };
    let m = run(&cfg).expect("run");
    let fixed = sizes.discovery()
        + sizes.change_list_index_header
        + sizes.change_list_index_entry
        + sizes.change_list_header;
    // The open list holds one change per interval (the first scan is the baseline and
    // records none).
    let total: u64 = (1..=3)
        .map(|k| fixed + k * sizes.change_list_entry + 500)
        .sum();
    assert_eq!(m.bytes_total, total);
    assert_eq!(m.bytes_required, 1500);
}

#[test]
fn same_seed_same_metrics() {
    let cfg = Config {
        resources: 300,
        change_interval: 0.5,
        change_dist: crate::ChangeDist::Exp,
        strategy: Strategy::Incremental,
        sync_interval: 5.0,
        duration: 200.0,
        ..Config::default()
    };
    let a = run(&cfg).expect("run").csv_row();
    assert_eq!(a, run(&cfg).expect("run").csv_row());
    assert_ne!(a, run(&Config { seed: 7, ..cfg }).expect("run").csv_row());
}
