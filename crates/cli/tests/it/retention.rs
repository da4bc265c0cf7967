//! `sync --versions --keep-versions N` (issue 37 item 5; docs/history.md): a run killed between
//! the removal of pruned version rows and of their bodies (crash point `versions-unrecorded`)
//! leaves a consistent state (no row names a missing body; the body no row names is left), and
//! the next prune removes that body.

use std::path::Path;
use std::process::Command;

use resourcesync_store::{Records, SqliteState};
use resourcesync_testkit::Server;
use resourcesync_testkit::sync::*;

/// sha-256 of `one`.
const ONE: &str = "7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed";

fn body_path(dest: &Path, digest: &str) -> std::path::PathBuf {
    let hex = digest.strip_prefix("sha-256:").expect("a sha-256");
    dest.join(".resourcesync/versions/sha256")
        .join(&hex[..2])
        .join(hex)
}

fn sync(base: &str, dest: &Path, extra: &[&str], crash: Option<&str>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    c.args([
        "sync",
        base,
        dest.to_str().expect("utf-8"),
        "--versions",
        "--json",
    ])
    .args(extra);
    if let Some(at) = crash {
        c.env("RESOURCESYNC_TEST_CRASH_AT", at);
    }
    c.output().expect("run")
}

#[test]
fn a_prune_killed_between_rows_and_bodies_is_finished_by_the_next() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"one")]);
    let server = Server::start_in_thread(src.path());
    let base = server.base.clone();
    publish(src.path(), &base, None);
    let work = tmp();
    let dest = dest_in(&work);
    let o = sync(&base, &dest, &[], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let key = v["source"]["capability_list"]
        .as_str()
        .expect("key")
        .to_owned();
    write_tree(src.path(), &[("a.txt", b"two, longer")]);
    publish(src.path(), &base, None);
    assert!(sync(&base, &dest, &[], None).status.success());
    let one = body_path(&dest, &format!("sha-256:{ONE}"));
    assert!(one.is_file(), "the first body is kept");

    // Killed once the pruned rows are removed, before their bodies are.
    let o = sync(
        &base,
        &dest,
        &["--keep-versions", "1"],
        Some("versions-unrecorded:1"),
    );
    assert!(
        !o.status.success(),
        "the run was not stopped: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let state_path = dest.join(".resourcesync/state.sqlite");
    let uri = format!("{base}a.txt");
    {
        let state = SqliteState::open(&state_path).expect("state");
        let rows = state.versions_of(&key, &uri, None, 100).expect("versions");
        assert_eq!(
            rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [2],
            "{rows:#?}"
        );
        for r in &rows {
            assert!(
                body_path(&dest, &r.digest).is_file(),
                "a row names a missing body: {r:#?}"
            );
        }
        assert!(
            !state
                .digest_referenced(&format!("sha-256:{ONE}"))
                .expect("referenced")
        );
    }
    assert!(
        one.is_file(),
        "the body is removed only after its rows, and was not yet"
    );

    // The next prune finishes: the body no row names goes.
    let o = sync(&base, &dest, &["--keep-versions", "1"], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["versions"]["pruned"]["bodies"], 1, "{v}");
    assert!(!one.exists());
    assert_eq!(
        dest_files(&dest).get("a.txt").map(Vec::as_slice),
        Some(&b"two, longer"[..])
    );
}
