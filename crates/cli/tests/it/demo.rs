//! `resourcesync demo`, run as a newcomer would (the README's first command): every step is
//! reported, the final audit is in sync, the exit status is 0; `--json` gives the same steps as a
//! report; `--keep DIR` keeps both directories.

use std::process::{Command, Output};

fn demo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .arg("demo")
        .args(args)
        .output()
        .expect("run resourcesync demo")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const STEPS: [&str; 8] = [
    "source",
    "serve",
    "explore",
    "baseline",
    "change",
    "publish",
    "incremental",
    "audit",
];

#[test]
fn the_demo_runs_every_step_and_ends_in_sync() {
    let o = demo(&[]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    for (i, s) in STEPS.iter().enumerate() {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{}. {s} ", i + 1)))
            .unwrap_or_else(|| panic!("no step {s}:\n{out}"));
        assert!(line.contains(" s)"), "step {s} has no time: {line}");
    }
    assert!(
        stdout.contains("serving the Source at http://127.0.0.1:"),
        "{out}"
    );
    assert!(
        stdout.contains("Source Description  http://127.0.0.1:"),
        "{out}"
    );
    assert!(stdout.contains("baseline):"), "{out}");
    assert!(
        stdout.contains("(incremental): 2 created, 1 updated, 1 deleted"),
        "{out}"
    );
    assert!(stdout.contains("8. audit        in sync:"), "{out}");
    assert!(stdout.contains("0 missing, 0 extra, 0 different"), "{out}");
    assert!(
        stdout.trim_end().ends_with(" s") && stdout.contains("demo succeeded"),
        "{out}"
    );
}

#[test]
fn the_demo_reports_json_and_keeps_its_directories() {
    let keep = tempfile::tempdir().expect("tempdir");
    let o = demo(&["--json", "--keep", keep.path().to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o)));
    assert_eq!(r["ok"], true);
    assert_eq!(r["kept"], true);
    let steps = r["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps
        .iter()
        .map(|s| s["step"].as_str().expect("name"))
        .collect();
    assert_eq!(names, STEPS);
    assert!(steps.iter().all(|s| s["ok"] == true), "{r:#}");
    assert!(steps.iter().all(|s| s["seconds"].as_f64().is_some()));
    let source = &steps[0];
    let files = source["files"].as_u64().expect("files");
    assert!((24..=60).contains(&files), "a few dozen files: {files}");
    assert_eq!(steps[3]["details"]["created"].as_u64(), Some(files));
    assert_eq!(steps[6]["details"]["mode"], "incremental");
    assert_eq!(steps[7]["details"]["in_sync"], true);
    assert_eq!(steps[7]["details"]["resources"].as_u64(), Some(files + 1));

    // Kept: the Source and its copy, the same files (state folders aside), including the names
    // with a space and outside ASCII.
    let src = keep.path().join("source");
    let dest = keep.path().join("destination");
    for rel in [
        "docs/notes/meeting notes 2024.txt",
        "données/été/température.csv",
        "docs/guide/chapter-07 (draft).md",
    ] {
        assert_eq!(
            std::fs::read(src.join(rel)).expect("source file"),
            std::fs::read(dest.join(rel)).expect("copy"),
            "{rel}"
        );
    }
    assert!(!dest.join("images/pixel-03.bin").exists(), "deleted");

    // A second run into the same DIR is refused (exit 2), nothing overwritten.
    let o = demo(&["--keep", keep.path().to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not empty"), "{}", text(&o));
}
