//! `resourcesync sync` and `resourcesync audit`, run as a user would, against an in-process
//! Source on 127.0.0.1.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use resourcesync_testkit::sync::*;
use resourcesync_testkit::{Fault, Server};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run resourcesync")
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn sync_then_audit_exit_codes_and_json() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("dir/b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);

    let o = run(&["sync", &server.base, p(&dest), "--json", "--retries", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["mode"], "baseline");
    assert_eq!(v["created"], 3);
    assert_eq!(v["failed"], 0);
    assert_eq!(dest_files(&dest), source_files(src.path()));

    let o = run(&["audit", &server.base, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(json(&o)["in_sync"], true);

    // Plain text, in a pipe: a summary and no progress bar.
    let o = run(&["sync", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.starts_with("incremental from "), "{t}");
    assert!(t.contains("0 created, 0 updated, 0 deleted, 0 kept"), "{t}");

    std::fs::write(dest.join("a.txt"), b"ALPHA").expect("tamper");
    let o = run(&["audit", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("different a.txt"),
        "{}",
        text(&o)
    );
    let o = run(&["audit", &server.base, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["different"][0]["why"], "digest");

    // A resource served with the wrong content: exit 1, listed.
    let out2 = tmp();
    let dest2 = dest_in(&out2);
    server.fault("/c.txt", Fault::Body(b"CHARLIE".to_vec()));
    let o = run(&["sync", &server.base, p(&dest2), "--retries", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains(&format!("failed {}c.txt (c.txt)", server.base)),
        "{}",
        text(&o)
    );
    server.clear_faults();

    // Nothing listening: exit 2.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port");
    let o = run(&[
        "sync",
        &format!("http://{closed}/"),
        p(&dest2),
        "--retries",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("could not be reached"), "{}", text(&o));
}

#[cfg(unix)]
#[test]
fn kill_9_then_resume_without_refetching() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| (format!("f{i}.dat"), vec![b'0' + i as u8; 1000 + i]))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    // One download at a time: once the fourth resource is requested, three are downloaded and
    // verified; copies are put in place and recorded in batches, so up to three are in place.
    let stalled = server.stall_after(3);
    let mut child = bin()
        .args(["sync", &server.base, p(&dest), "--concurrency", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    stalled
        .recv_timeout(Duration::from_secs(120))
        .expect("the sync reached the stalled resource");
    child.kill().expect("kill -9");
    child.wait().expect("wait");
    // No file at its final path is partial or wrong.
    let done = dest_files(&dest);
    let all = source_files(src.path());
    assert!(done.len() <= 3, "{:?}", done.keys());
    for (path, content) in &done {
        assert_eq!(all.get(path), Some(content), "{path}");
    }
    server.clear_faults();
    server.reset_hits();
    let o = run(&["sync", &server.base, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    // Copies in place are not fetched again (recorded, or adopted by their digest).
    assert_eq!(v["created"], 8 - done.len(), "{v}");
    // Each resource counted once: the copies in place as unchanged.
    let counted: u64 = ["created", "updated", "unchanged", "failed", "filtered"]
        .iter()
        .filter_map(|k| v[k].as_u64())
        .sum();
    assert_eq!(counted, 8, "{v}");
    for path in done.keys() {
        assert_eq!(server.hits(&format!("/{path}")), 0, "{path} fetched again");
    }
    assert_eq!(dest_files(&dest), all);
}

/// A full disk must not lose a resource (security issue, item 6): when a change fails and
/// cannot be recorded as pending either (the state's disk is full: injected with the test hook
/// `RESOURCESYNC_TEST_CRASH_AT=pending:1:fail`, an ENOSPC from that write), the run fails with
/// exit 2 naming the state database and the error, and the cursor stays where it was; the
/// next `sync` that exits 0 has every resource.
#[test]
fn a_failed_state_write_keeps_the_cursor_and_the_next_sync_has_everything() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    server.fault("/b.txt", Fault::Status(500));
    let o = bin()
        .args(["sync", &server.base, p(&dest), "--retries", "0"])
        .env("RESOURCESYNC_TEST_CRASH_AT", "pending:1:fail")
        .output()
        .expect("run resourcesync");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("b.txt"), "{t}");
    assert!(t.contains("state.sqlite"), "{t}");
    assert!(t.contains("No space left on device"), "{t}");
    assert!(t.contains("the cursor was not moved"), "{t}");
    assert_eq!(
        t.matches("No space left on device").count(),
        1,
        "the cause said once: {t}"
    );

    server.clear_faults();
    let o = run(&["sync", &server.base, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(dest_files(&dest), source_files(src.path()));
    let o = run(&["audit", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Errors callers can act on (reshape issue, item 5): a full disk while copies are written
/// (injected with `RESOURCESYNC_TEST_CRASH_AT=download:3:fail`, an ENOSPC from the third write
/// of a body and every later one) fails every copy alike, so the run stops there with exit 2
/// and the cursor unmoved, instead of trying each of the other resources and ending with exit 1
/// and a failure per resource; the next `sync` has everything.
#[test]
fn a_full_disk_while_copying_stops_the_run_instead_of_failing_every_resource() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..40)
        .map(|i| (format!("r{i:02}.txt"), format!("body {i}").into_bytes()))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = bin()
        .args(["sync", &server.base, p(&dest), "--concurrency", "1"])
        .env("RESOURCESYNC_TEST_CRASH_AT", "download:3:fail")
        .output()
        .expect("run resourcesync");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("No space left on device"), "{t}");
    assert!(t.contains("the cursor was not moved"), "{t}");
    let fetched = (0..40)
        .filter(|i| server.hits(&format!("/r{i:02}.txt")) > 0)
        .count();
    assert!(
        fetched < 10,
        "the run went on after the disk was full: {fetched} fetched\n{t}"
    );

    let o = run(&["sync", &server.base, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// Runs `resourcesync ARGS` with `dir` mounted read-only (a bind mount in a mount namespace of
/// its own, made by `unshare`: nothing outside the child sees it, and it goes with the child).
#[cfg(target_os = "linux")]
fn run_read_only(dir: &Path, args: &[&str]) -> Output {
    let script =
        r#"d="$1"; shift; mount --bind "$d" "$d" && mount -o remount,bind,ro "$d" && exec "$@""#;
    let o = Command::new("unshare")
        .args([
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            script,
            "sh",
            p(dir),
        ])
        .arg(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        .output()
        .expect("unshare (util-linux) runs");
    let t = text(&o);
    assert!(
        !t.contains("mount:") && !t.contains("unshare:"),
        "this test needs a private mount namespace (unshare --map-root-user --mount) to mount the copy read-only: {t}"
    );
    o
}

/// A copy on a read-only file system can be audited and dry-run (security issue, item 10):
/// both only read the state.
#[cfg(target_os = "linux")]
#[test]
fn audit_and_dry_run_of_a_read_only_copy() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("d/b.txt", b"bravo")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = run(&["sync", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let o = run_read_only(&dest, &["audit", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run_read_only(&dest, &["sync", &server.base, p(&dest), "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A difference is still found.
    std::fs::write(dest.join("a.txt"), b"ALPHA").expect("tamper");
    let o = run_read_only(&dest, &["audit", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

/// Names a Source controls reach no terminal as control characters (security issue, item 8):
/// a hand-written Resource List names files whose decoded names clear the screen, colour the
/// output, ring the bell or start a fake line; the failure lines print them escaped.
#[test]
fn control_characters_in_names_are_escaped_in_text_output() {
    let src = tmp();
    let server = Server::start_in_thread(src.path());
    let locs = [
        "evil%1B%5B2J%1B%5B31mRED%07.txt",
        "x%0D%0Afake%20line.txt",
        "c1%C2%9B2J.txt",
    ];
    let entries: String = locs
        .iter()
        .map(|l| {
            format!(
                "<url><loc>{}{l}</loc><rs:md length=\"1\"/></url>\n",
                server.base
            )
        })
        .collect();
    std::fs::write(
        src.path().join("rl.xml"),
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:md capability=\"resourcelist\" at=\"2026-01-01T00:00:00Z\"/>\n{entries}</urlset>\n"
        ),
    )
    .expect("write the list");
    let out = tmp();
    let dest = dest_in(&out);
    let url = format!("{}rl.xml", server.base);
    let o = run(&["sync", &url, p(&dest), "--retries", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    for c in t.chars() {
        assert!(
            c == '\n' || !c.is_control(),
            "control U+{:04X} printed: {t:?}",
            c as u32
        );
    }
    assert!(t.contains("evil\\x1b[2J\\x1b[31mRED\\x07.txt"), "{t}");
    assert!(t.contains("x\\r\\nfake line.txt"), "{t}");
    assert!(t.contains("c1\\u{9b}2J.txt"), "{t}");
    assert!(!t.lines().any(|l| l.starts_with("fake line")), "{t}");
}

/// `--include`, `--exclude` and `--bandwidth`: only the kept resources are copied, the report
/// counts the others, and a bad pattern or rate is refused before anything is fetched (exit 2).
#[test]
fn include_exclude_and_bandwidth_flags() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("img/a.png", b"alpha"),
            ("img/b.tmp", b"bravo"),
            ("doc/c.txt", b"charlie"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let base = server.base.clone();
    let include = format!("{base}img/*");
    let o = run(&[
        "sync",
        &base,
        p(&dest),
        "--json",
        "--include",
        &include,
        "--exclude",
        "*.tmp",
        "--bandwidth",
        "10MB/s",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(
        (v["created"].as_u64(), v["filtered"].as_u64()),
        (Some(1), Some(2)),
        "{v}"
    );
    assert!(dest.join("img/a.png").exists());
    assert!(!dest.join("img/b.tmp").exists() && !dest.join("doc/c.txt").exists());

    for (flag, value, says) in [
        ("--include", "http://h/[a", "include pattern"),
        ("--bandwidth", "fast", "is not a rate"),
    ] {
        let fresh = tmp();
        let o = run(&["sync", &base, p(&dest_in(&fresh)), flag, value]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains(says), "{}", text(&o));
        assert!(
            !dest_in(&fresh).exists(),
            "nothing is made before the options are checked"
        );
    }
}
