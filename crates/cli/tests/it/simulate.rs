//! `resourcesync simulate`: the CSV of a model run depends on its seed only; the options are
//! checked; real-mode push runs from the command line.

use std::process::Command;

fn simulate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("run resourcesync")
}

const RUN: [&str; 12] = [
    "--resources",
    "500",
    "--change-interval",
    "0.5",
    "--change-dist",
    "exp",
    "--sync-interval",
    "5",
    "--duration",
    "300",
    "--strategy",
    "incremental",
];

#[test]
fn same_seed_same_csv_other_seed_other_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = |name: &str, seed: &str| {
        let out = dir.path().join(name);
        let o = simulate(
            &[
                &RUN[..],
                &["--seed", seed, "--out", out.to_str().expect("utf-8")],
            ]
            .concat(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(out.join("simulate.csv")).expect("csv")
    };
    let a = csv("a", "7");
    let b = csv("b", "7");
    let c = csv("c", "8");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.lines().count(), 2, "{a}");
    assert!(a.starts_with("mode,strategy,resources,"), "{a}");
}

#[test]
fn json_has_the_paper_metrics() {
    let o = simulate(&[&RUN[..], &["--json"]].concat());
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for k in [
        "avg_consistency",
        "avg_latency",
        "efficiency",
        "requests_per_change",
        "bytes_per_change",
    ] {
        assert!(v[k].is_number(), "{k} in {v}");
    }
    let c = v["avg_consistency"].as_f64().unwrap_or(-1.0);
    assert!((0.0..=1.0).contains(&c));
}

#[test]
fn bad_options_are_errors() {
    let o = simulate(&["--sync-interval", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--sync-interval"));
    let o = simulate(&["--grid", "paper"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Real-mode push from the command line: the Source's embedded hub and the Destination's push
/// follower, briefly; every change arrives by notification.
#[test]
fn real_push_runs() {
    let o = simulate(&[
        "--strategy",
        "push",
        "--mode",
        "real",
        "--resources",
        "20",
        "--change-interval",
        "0.2",
        "--duration",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let v = if v.is_array() { v[0].clone() } else { v };
    assert_eq!(v["strategy"], "push", "{v}");
    assert_eq!(v["mode"], "real", "{v}");
    assert!(v["changes"].as_u64().unwrap_or(0) > 0, "{v}");
    assert_eq!(v["unsynced_changes"], 0, "{v}");
    // The Destination's requests are counted (discovery, then a GET per created or updated
    // resource). Not necessarily more than one per change: deletes need no request, so a run whose
    // changes include a delete can come out at exactly one per change (seen on a loaded CI run).
    assert!(v["requests"].as_u64().unwrap_or(0) > 0, "{v}");
    assert!(
        v["requests_per_change"].as_f64().unwrap_or(0.0) > 0.0,
        "{v}"
    );
}
