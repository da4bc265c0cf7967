//! The shell completions and man pages under packaging/ are what the program generates now
//! (crates/cli/src/manual.rs): a flag added without `scripts/generate-manual.sh` fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    for (k, _) in std::env::vars() {
        if k.starts_with("RESOURCESYNC_") {
            c.env_remove(k);
        }
    }
    c
}

fn packaging() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging")
}

const REGENERATE: &str = "out of date: run scripts/generate-manual.sh and commit packaging/";

/// Every command of the program, from its help.
fn commands() -> Vec<String> {
    let o = bin().arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    let list = help
        .split("Commands:")
        .nth(1)
        .and_then(|r| r.split("Options:").next())
        .expect("a Commands section");
    // A command's line is indented by two spaces; its wrapped description by more.
    list.lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.is_empty() && *w != "help")
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_committed_completions_are_current() {
    let cmds = commands();
    assert!(cmds.len() >= 13, "{cmds:?}");
    for (shell, file) in [
        ("bash", "resourcesync.bash"),
        ("zsh", "_resourcesync"),
        ("fish", "resourcesync.fish"),
    ] {
        let o = bin().args(["completions", shell]).output().expect("run");
        assert_eq!(o.status.code(), Some(0));
        let now = String::from_utf8(o.stdout).expect("utf-8");
        for c in &cmds {
            assert!(now.contains(c.as_str()), "{shell}: no {c}");
        }
        let committed =
            std::fs::read_to_string(packaging().join("completions").join(file)).unwrap_or_default();
        assert!(
            committed == now,
            "packaging/completions/{file} {REGENERATE}"
        );
    }
}

#[test]
fn the_committed_man_pages_are_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = bin()
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for c in commands() {
        assert!(
            pages.contains(&format!("resourcesync-{c}.1")),
            "{c}: {pages:?}"
        );
    }
    let mut committed: Vec<String> = std::fs::read_dir(packaging().join("man"))
        .map(|d| {
            d.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    committed.sort();
    assert_eq!(pages, committed, "packaging/man {REGENERATE}");
    for p in &pages {
        let now = std::fs::read(dir.path().join(p)).expect("page");
        let then = std::fs::read(packaging().join("man").join(p)).expect("page");
        assert!(now == then, "packaging/man/{p} {REGENERATE}");
    }
    // Without --out: the program's own page.
    let o = bin().arg("man").output().expect("run");
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{page}");
    assert!(page.contains("resourcesync"), "{page}");
}
