//! A mirror, end to end, as a user runs it: `resourcesync serve` publishes a folder whose names
//! have spaces, non-ASCII letters and `%`; `resourcesync sync` mirrors it through a baseline,
//! an update (a file changed, one deleted, one added), a repair (a copy damaged on disk, found
//! by `audit`, fetched again by the next `sync`) and `sync --delete` (a stray file removed).
//! After each step every copy has the Source file's bytes, the mode a new file gets
//! (`0666 & ~umask`, docs/operations.md "File modes") and the Source file's modification time
//! to the millisecond, and the report's counts add up; `audit` exits 0 at the end.
//!
//! Python resync 2.0.1 follows the same Source beside it with its documented flags: a
//! `--baseline`, then `--incremental --changelist-uri` with the Change List our Capability List
//! names (as resync's README shows; no `--from`), and ends with the Source's files (under the
//! names it writes, still percent-encoded: `interop_resync`, defect 1). Its audit and its
//! other defects are `interop_resync::resync_baseline_incremental_and_audit_against_serve`.
#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use crate::interop_resync::{
    Published, Server, assert_same_tree, counts, files, put, resync, resync_sync, source_files,
    statuses, wait_for,
};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        .output()
        .expect("run resourcesync")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `resourcesync sync --json ARGS`: exit 0, and its report.
fn sync(base: &str, dest: &Path, more: &[&str]) -> serde_json::Value {
    let mut args = vec!["sync", base, dest.to_str().expect("utf-8"), "--json"];
    args.extend(more);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "sync {more:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&o)))
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("no count {k} in {v}"))
}

/// The report's identity: each resource the run went through counted once.
fn adds_up(v: &serde_json::Value, resources: u64) {
    let sum: u64 = ["created", "updated", "unchanged", "failed", "filtered"]
        .iter()
        .map(|k| n(v, k))
        .sum();
    assert_eq!(sum, resources, "{v}");
}

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every copy: the Source's bytes, a new file's mode, the Source file's time to the ms.
fn check(src: &Path, dest: &Path, fresh_mode: u32, when: &str) {
    let (want, got) = (source_files(src), files(dest, &[".resourcesync"]));
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{when}: names"
    );
    for (rel, bytes) in &want {
        let copy = dest.join(rel);
        assert!(got[rel] == *bytes, "{when}: {rel}: bytes");
        let mode = std::fs::metadata(&copy).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(mode, fresh_mode, "{when}: {rel}: mode {mode:o}");
        let (s, c) = (mtime(&src.join(rel)), mtime(&copy));
        let off = s.duration_since(c).or_else(|_| c.duration_since(s));
        assert!(
            off.is_ok_and(|d| d <= Duration::from_millis(1)),
            "{when}: {rel}: mtime {c:?}, the Source's {s:?}"
        );
    }
}

#[test]
fn mirror_through_update_repair_and_delete() {
    // Fail first, and clearly, when the reference client is not installed.
    resync_sync();
    let root = tempfile::tempdir().expect("tmp");
    let (src, dest, staging, work) = (
        root.path().join("src"),
        root.path().join("dest"),
        root.path().join("staging"),
        root.path().join("resync"),
    );
    let resync_dest = root.path().join("resync-dest");
    let resync_dest = resync_dest.to_str().expect("utf-8");
    for d in [&src, &staging, &work] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let fresh_mode = fresh_mode(&staging);
    let initial: [(&str, &[u8]); 6] = [
        ("sub dir/\u{fc} 1.txt", b"u umlaut\n"),
        (
            "\u{65e5}\u{672c}\u{8a9e}/a b.txt",
            "\u{65e5}\u{672c}\n".as_bytes(),
        ),
        ("50% off.txt", b"half\n"),
        ("100%.txt", b"whole\n"),
        ("a%20b.txt", b"a literal %20\n"),
        ("gone soon.txt", b"bye\n"),
    ];
    for (rel, bytes) in initial {
        put(&staging, &src.join(rel), bytes);
    }
    let server = Server::start(&src, &root.path().join("serve.log"));
    let base = format!("{}/", server.base);
    published(&server, &src, "the first Resource List");

    // Baseline.
    let v = sync(&base, &dest, &["--retries", "0"]);
    assert_eq!((n(&v, "created"), n(&v, "failed")), (6, 0), "{v}");
    adds_up(&v, 6);
    check(&src, &dest, fresh_mode, "baseline");
    let out = resync(&work, &["--baseline", &server.base, resync_dest]);
    assert!(
        statuses(&out).iter().any(|(w, c)| w == "SYNCED"
            && *c == counts(&[("same", 0), ("created", 6), ("updated", 0), ("deleted", 0)])),
        "{out}"
    );

    // An update, a deletion, an addition; followed incrementally, deletions applied.
    let changelist = change_and_wait(&server, &staging, &src);
    let v = sync(&base, &dest, &["--retries", "0", "--delete"]);
    assert_eq!(v["mode"], "incremental", "{v}");
    assert_eq!(
        (
            n(&v, "created"),
            n(&v, "updated"),
            n(&v, "deleted"),
            n(&v, "failed")
        ),
        (1, 1, 1, 0),
        "{v}"
    );
    adds_up(&v, 2);
    check(&src, &dest, fresh_mode, "incremental");
    let out = resync(
        &work,
        &[
            "--incremental",
            "--delete",
            "--changelist-uri",
            &changelist,
            &server.base,
            resync_dest,
        ],
    );
    assert_eq!(
        statuses(&out).first(),
        Some(&(
            "CHANGES APPLIED".to_owned(),
            counts(&[("created", 1), ("updated", 1), ("deleted", 1)])
        )),
        "{out}"
    );
    assert_same_tree(&src, Path::new(resync_dest), "resync --incremental");

    repair_and_delete(&base, &src, &dest, fresh_mode);
    drop(server);
}

/// The mode a new file gets here (a file made in `dir`): what every copy must have.
fn fresh_mode(dir: &Path) -> u32 {
    std::fs::write(dir.join("fresh"), b"").expect("fresh file");
    std::fs::metadata(dir.join("fresh"))
        .expect("stat")
        .permissions()
        .mode()
        & 0o7777
}

/// A copy damaged on disk is found and fetched again; a file no resource maps to is removed
/// by `--delete`; the audit then finds the copy in sync.
fn repair_and_delete(base: &str, src: &Path, dest: &Path, fresh_mode: u32) {
    // A copy damaged on disk: audit finds it, the next sync fetches it again.
    let damaged = dest.join("\u{65e5}\u{672c}\u{8a9e}/a b.txt");
    std::fs::write(&damaged, b"not what the Source has\n").expect("damage");
    let dest_s = dest.to_str().expect("utf-8");
    let o = run(&["audit", base, dest_s]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("a b.txt"), "{}", text(&o));
    let v = sync(base, dest, &["--retries", "0", "--check"]);
    assert_eq!((n(&v, "repaired"), n(&v, "failed")), (1, 0), "{v}");
    check(src, dest, fresh_mode, "repair");

    // A file no resource maps to: `--delete` removes it, and nothing else.
    std::fs::write(dest.join("sub dir/stray file.txt"), b"stray\n").expect("stray");
    let v = sync(base, dest, &["--retries", "0", "--delete"]);
    assert_eq!((n(&v, "extra_deleted"), n(&v, "failed")), (1, 0), "{v}");
    assert!(!dest.join("sub dir/stray file.txt").exists());
    check(src, dest, fresh_mode, "--delete");

    let o = run(&["audit", base, dest_s]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Waits until `server` publishes what `src` holds (every file, at its length).
fn published(server: &Server, src: &Path, what: &str) -> Published {
    let want = source_files(src);
    wait_for(server, what, || {
        let p = server.published();
        let current = p.resources.keys().collect::<BTreeSet<_>>()
            == want.keys().collect::<BTreeSet<_>>()
            && want
                .iter()
                .all(|(r, c)| p.resources.get(r) == Some(&(c.len() as u64)));
        current.then_some(p)
    })
}

/// An update, a deletion, an addition at `src`; waits until the Change List shows exactly
/// those three changes; its URL.
fn change_and_wait(server: &Server, staging: &Path, src: &Path) -> String {
    let seen = server.published().changes;
    put(
        staging,
        &src.join("sub dir/\u{fc} 1.txt"),
        b"u umlaut, again\n",
    );
    std::fs::remove_file(src.join("gone soon.txt")).expect("rm");
    put(staging, &src.join("new dir/\u{f1} 5%.txt"), b"new\n");
    let want: BTreeMap<String, &str> = [
        ("sub dir/\u{fc} 1.txt", "updated"),
        ("gone soon.txt", "deleted"),
        ("new dir/\u{f1} 5%.txt", "created"),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .into();
    wait_for(server, "the changes in the Change List", || {
        let p = published(server, src, "the changed Resource List");
        let new: BTreeMap<String, &str> = p
            .changes
            .into_iter()
            .filter(|c| !seen.contains(c))
            .map(|c| (c.0, c.1))
            .collect();
        (new == want).then_some(p.changelist)
    })
}
