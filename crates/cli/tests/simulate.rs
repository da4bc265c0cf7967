//! `resourcesync simulate`: the CSV of a model run depends on its seed only; the options are
//! checked; real-mode push says it is not available yet.

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
fn bad_options_and_real_push_are_errors() {
    let o = simulate(&["--sync-interval", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--sync-interval"));
    let o = simulate(&["--strategy", "push", "--mode", "real", "--duration", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not yet available"));
    let o = simulate(&["--grid", "paper"]);
    assert_eq!(o.status.code(), Some(2));
}
