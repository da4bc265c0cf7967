//! `audit --at` and `restore --at` from the command line (issue 37 item 4; docs/history.md):
//! exit codes, the JSON reports, OUT refused when not empty (unless --force) or inside DEST,
//! and a restore by the Capability List URL once the Source is gone (nothing fetched).

use std::path::Path;
use std::process::{Command, Output};

use resourcesync_model::W3cDateTime;
use resourcesync_testkit::Server;
use resourcesync_testkit::sync::*;

fn rs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        .output()
        .expect("run resourcesync")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn audit_and_restore_at_a_time() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"one"), ("d/b.txt", b"bee")]);
    let server = Server::start_in_thread(src.path());
    let base = server.base.clone();
    publish(src.path(), &base, None);
    let work = tmp();
    let dest = dest_in(&work);
    let sync = || {
        let o = rs(&["sync", &base, s(&dest), "--versions", "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        json(&o)
    };
    let key = sync()["source"]["capability_list"]
        .as_str()
        .expect("the Capability List")
        .to_owned();
    let t1 = W3cDateTime::now(true).to_string();
    write_tree(src.path(), &[("a.txt", b"two, longer")]);
    publish(src.path(), &base, None);
    sync();
    let t2 = W3cDateTime::now(true).to_string();

    // At t1 the copy of a.txt (now `two, longer`) is not what it was: exit 1.
    let o = rs(&["audit", &base, s(&dest), "--at", &t1, "--json"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r = json(&o);
    assert_eq!(r["different_count"], 1, "{r}");
    assert_eq!(r["different"][0]["path"], "a.txt", "{r}");
    assert_eq!(r["different"][0]["version"]["seq"], 1, "{r}");
    assert_eq!(r["in_sync_count"], 1, "{r}");
    // At t2 it is: exit 0, and the summary says so.
    let o = rs(&["audit", &base, s(&dest), "--at", &t2]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("in sync at "));
    // Not a datetime: an error, exit 2.
    let o = rs(&["audit", &base, s(&dest), "--at", "yesterday"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("W3C Datetime"));

    // Restored at t1: the files of then, byte for byte, and nothing else in OUT.
    let out = work.path().join("out");
    let o = rs(&["restore", &base, s(&dest), s(&out), "--at", &t1, "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(json(&o)["restored"], 2);
    let then = [("a.txt", &b"one"[..]), ("d/b.txt", b"bee")]
        .map(|(p, b)| (p.to_owned(), b.to_vec()))
        .into_iter()
        .collect();
    assert_eq!(dest_files(&out), then);
    assert!(
        !out.join(".resourcesync").exists(),
        "OUT has only the copies"
    );

    // OUT not empty: refused (exit 2), unless --force; OUT inside DEST: refused.
    let o = rs(&["restore", &base, s(&dest), s(&out), "--at", &t2]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not empty"));
    assert_eq!(dest_files(&out), then, "untouched");
    let inside = dest.join("d").join("restored");
    let o = rs(&["restore", &base, s(&dest), s(&inside), "--at", &t2]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("inside the destination"));
    assert!(!inside.exists());

    // The Source gone: by its Capability List URL, nothing is fetched.
    drop(server);
    let o = rs(&["restore", &key, s(&dest), s(&out), "--at", &t2, "--force"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        std::fs::read(out.join("a.txt")).expect("a.txt"),
        b"two, longer"
    );
    // Before the first run: nothing existed, nothing is written.
    let empty = work.path().join("empty");
    let o = rs(&[
        "restore",
        &key,
        s(&dest),
        s(&empty),
        "--at",
        "2000-01-01T00:00:00Z",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(dest_files(&empty).is_empty());
}
