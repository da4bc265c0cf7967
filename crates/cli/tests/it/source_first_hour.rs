//! What a new user of `publish`, `serve` and `hub` trips over in the first hour (issues "The
//! first hour" and "Conformance"), each run through the binary as a user would.

#![cfg(unix)]

use crate::source_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use source_support::*;

// --- Each cause said once (first-hour issue, item 6) ---

/// `serve` and `hub` on a port another program holds: the address once, the cause once, and
/// what to do (before: "Address already in use (os error 98): Address already in use (os error
/// 98)", and the hub said the address twice as well).
#[test]
fn a_busy_port_is_named_once_with_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = holder.local_addr().expect("addr").to_string();
    let hub_state = dir.path().join("hub.sqlite");
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).expect("mkdir");
    for args in [
        vec!["serve", p(&served), "--listen", &addr],
        vec!["hub", "--listen", &addr, "--state", p(&hub_state)],
    ] {
        let o = bin().args(&args).output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(times(&err, &addr), 1, "{args:?}: the address once: {err}");
        assert_eq!(
            times(&err, "Address already in use"),
            1,
            "{args:?}: the cause once: {err}"
        );
        assert!(err.contains("choose another --listen"), "{args:?}: {err}");
    }
    drop(holder);
}

/// `--listen nonsense`: the cause once, and the form expected (before: "invalid socket address:
/// invalid socket address").
#[test]
fn a_listen_address_that_is_no_address_says_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hub_state = dir.path().join("hub.sqlite");
    for args in [
        vec!["serve", p(dir.path()), "--listen", "nonsense"],
        vec!["hub", "--listen", "nonsense", "--state", p(&hub_state)],
    ] {
        let o = bin().args(&args).output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(times(&err, "invalid socket address"), 1, "{args:?}: {err}");
        assert_eq!(times(&err, "nonsense"), 1, "{args:?}: {err}");
        assert!(err.contains("HOST:PORT"), "{args:?}: {err}");
    }
}

/// A state database that cannot be opened (a folder where the file should be): the SQLite
/// error once, for the Source's state and the hub's.
#[test]
fn an_unopenable_state_database_says_its_cause_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let folder = dir.path().join("state-is-a-folder");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let served = dir.path().join("served");
    std::fs::create_dir_all(&served).expect("mkdir");
    for args in [
        vec![
            "publish",
            p(&served),
            "--base-url",
            "http://example.org/",
            "--state",
            p(&folder),
        ],
        vec!["hub", "--listen", "127.0.0.1:0", "--state", p(&folder)],
    ] {
        let o = bin().args(&args).output().expect("run");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            times(&err, "unable to open database file"),
            1,
            "{args:?}: {err}"
        );
    }
}

// --- A Source that moves (first-hour issue, item 7) ---

/// `serve DIR --listen 127.0.0.1:0` three times (before: every run after the first failed, "the
/// state … was published under http://127.0.0.1:PORT1/, not …PORT2/"), then under a new base
/// URL with `--move`, with a Destination following throughout: each run serves every document
/// under its own URLs, carries the Change List history over (Z39.99-2014 §12.1: the same
/// changes, under the new URIs), and `sync` + `audit` through the new URL leave the copy in
/// sync.
#[test]
fn a_source_served_on_port_0_follows_its_address_and_moves_with_move() {
    let work = tempfile::tempdir().expect("tempdir");
    let src = work.path().join("src");
    let dest = work.path().join("dest");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("a.txt"), "alpha\n").expect("write");
    std::fs::write(src.join("b.txt"), "beta\n").expect("write");

    // Run 1: a baseline, then a change the Destination gets from the Change List.
    let s1 = serve(&src, &["--listen", "127.0.0.1:0"]);
    follow(&s1.description, &dest, &src);
    std::fs::write(src.join("c.txt"), "gamma\n").expect("write");
    wait_for_change(&s1.base, "c.txt", "created");
    let out = follow(&s1.description, &dest, &src);
    assert!(out.contains("incremental"), "{out}");
    let base1 = s1.base.clone();
    let port1 = s1.addr.clone();
    s1.stop();

    // Changed while nobody serves it; run 2 on another port (the first one held meanwhile, so
    // that it cannot be picked again).
    std::fs::write(src.join("a.txt"), "alpha, edited while down\n").expect("write");
    let holder = std::net::TcpListener::bind(&port1).expect("hold the first port");
    let s2 = serve(&src, &["--listen", "127.0.0.1:0"]);
    drop(holder);
    assert_ne!(s2.base, base1);
    s2.said(&format!("moved the Source from {base1} to {}", s2.base));
    let (docs, resources) = fetch_every_document(&s2.base);
    assert!(docs.len() >= 8, "{docs:?}");
    assert!(
        resources.iter().all(|u| u.starts_with(&s2.base)),
        "{resources:?}"
    );
    let history = served_history(&s2.base);
    assert!(
        history.contains(&("c.txt".into(), "created".into())),
        "{history:?}"
    );
    assert!(
        history.contains(&("a.txt".into(), "updated".into())),
        "{history:?}"
    );
    follow(&s2.description, &dest, &src);
    std::fs::remove_file(src.join("b.txt")).expect("rm");
    wait_for_change(&s2.base, "b.txt", "deleted");
    let out = follow(&s2.description, &dest, &src);
    assert!(out.contains("incremental"), "{out}");
    let base2 = s2.base.clone();
    s2.stop();

    // Run 3 under a URL somebody chose: not without --move (the error says how), then moved.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let base3 = format!("http://127.0.0.1:{port}/moved/");
    let (code, err) = try_serve(&src, &["--listen", &listen, "--base-url", &base3])
        .map(|_| ())
        .expect_err("a given URL does not take the Source over by itself");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--move"), "{err}");
    assert_eq!(
        times(&err, &base2),
        2,
        "the old URL, and --base-url OLD: {err}"
    );
    let s3 = serve(&src, &["--listen", &listen, "--base-url", &base3, "--move"]);
    assert_eq!(s3.base, base3);
    s3.said(&format!("moved the Source from {base2} to {base3}"));
    let (docs, resources) = fetch_every_document(&base3);
    assert!(docs.len() >= 8, "{docs:?}");
    assert!(
        resources.iter().all(|u| u.starts_with(&base3)),
        "{resources:?}"
    );
    let history = served_history(&base3);
    for want in [
        ("c.txt", "created"),
        ("a.txt", "updated"),
        ("b.txt", "deleted"),
    ] {
        assert!(
            history.contains(&(want.0.into(), want.1.into())),
            "{want:?} carried over: {history:?}"
        );
    }
    follow(&s3.description, &dest, &src);
    std::fs::write(src.join("d.txt"), "delta\n").expect("write");
    wait_for_change(&base3, "d.txt", "created");
    let out = follow(&s3.description, &dest, &src);
    assert!(out.contains("incremental"), "{out}");
    s3.stop();
}

// --- `publish`, then `serve`, on one directory (conformance issue, item 4) ---

/// `publish` (into DIR or `--out OUT`, with the default state or `--state S`) and `serve` (with
/// the default state or `--state S`) on one directory, every pair, in both orders: `publish`
/// twice, `serve` (every document its Capability List names, recursively through indexes and
/// archives, answers 200), `publish` again (every document in its output directory), `serve`
/// again (all 200). Before: a `serve` sharing the state of a `publish --out OUT` advertised a
/// Resource List it did not have (404), and closed Change Lists too.
#[test]
fn every_document_a_capability_list_names_is_served_after_publish() {
    for publish_out in [false, true] {
        for publish_state in [false, true] {
            for serve_state in [false, true] {
                let what = format!(
                    "publish{}{}, serve{}",
                    if publish_out { " --out OUT" } else { "" },
                    if publish_state { " --state S" } else { "" },
                    if serve_state { " --state S" } else { "" },
                );
                let work = tempfile::tempdir().expect("tempdir");
                let dir = work.path().join("dir");
                let out = work.path().join("out");
                let state = work.path().join("state").join("s.sqlite");
                std::fs::create_dir_all(&dir).expect("mkdir");
                std::fs::write(dir.join("a.txt"), "alpha\n").expect("write");
                let port = free_port();
                let base = format!("http://127.0.0.1:{port}/");
                let listen = format!("127.0.0.1:{port}");
                // A Change List per change: closed ones, and archives with entries.
                let common = ["--changelist-max-entries", "1"];
                let publish = |n: &str| {
                    std::fs::write(dir.join(format!("{n}.txt")), n).expect("write");
                    let mut args = vec!["publish", p(&dir), "--base-url", &base];
                    args.extend(common);
                    if publish_out {
                        args.extend(["--out", p(&out)]);
                    }
                    if publish_state {
                        args.extend(["--state", p(&state)]);
                    }
                    let (code, said) = run(&args);
                    assert_eq!(code, Some(0), "{what}: {said}");
                    every_document_is_in(if publish_out { &out } else { &dir }, &base)
                };
                let serve_and_fetch = |n: &str| {
                    std::fs::write(dir.join(format!("{n}.txt")), n).expect("write");
                    let mut args = vec!["--listen", &listen];
                    args.extend(common);
                    if serve_state {
                        args.extend(["--state", p(&state)]);
                    }
                    let s = serve(&dir, &args);
                    assert_eq!(s.base, base, "{what}");
                    let (docs, _) = fetch_every_document(&base);
                    s.stop();
                    docs.len()
                };
                publish("b");
                publish("c");
                let served = serve_and_fetch("d");
                assert!(served >= 8, "{what}: {served} documents");
                publish("e");
                serve_and_fetch("f");
            }
        }
    }
}

// --- Small things (first-hour issue, item 8) ---

/// Every command takes the global `-q` and `-v` (before: `publish`, `serve`, `audit` and the
/// others refused them, and `sync -v` demanded `--watch`).
#[test]
fn every_command_takes_quiet_and_verbose() {
    let commands = [
        "demo", "validate", "inspect", "publish", "serve", "sync", "audit", "explore", "simulate",
        "hub",
    ];
    for c in commands {
        for flag in ["-q", "-v", "--quiet", "--verbose"] {
            let (code, out) = run(&[c, flag, "--help"]);
            assert_eq!(code, Some(0), "{c} {flag}: {out}");
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, out) = run(&[
        "publish",
        "-q",
        "-v",
        p(dir.path()),
        "--base-url",
        "http://x/",
    ]);
    assert_eq!(code, Some(2), "-q and -v together: {out}");
    assert!(out.contains("cannot be used with"), "{out}");
}

/// What `-q` and `-v` do, command by command, run for real: `publish -q` says nothing,
/// `publish -v` lists what it wrote, `sync -v` without `--watch` syncs, `audit -q` audits,
/// `serve -q` logs no change, `serve -v` logs its debug lines.
#[test]
fn quiet_and_verbose_mean_something_for_each_command() {
    let work = tempfile::tempdir().expect("tempdir");
    let src = work.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("a.txt"), "alpha\n").expect("write");
    let static_dir = work.path().join("static");
    std::fs::create_dir_all(&static_dir).expect("mkdir");
    std::fs::write(static_dir.join("a.txt"), "alpha\n").expect("write");

    let o = bin()
        .args([
            "-q",
            "publish",
            p(&static_dir),
            "--base-url",
            "http://x.example/",
        ])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty() && o.stderr.is_empty(), "{o:?}");
    std::fs::write(static_dir.join("b.txt"), "beta\n").expect("write");
    let (code, out) = run(&[
        "publish",
        "-v",
        p(&static_dir),
        "--base-url",
        "http://x.example/",
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("  ") && l.ends_with("capabilitylist.xml")),
        "every document written, one a line: {out}"
    );

    let s = serve(&src, &["-v", "--listen", "127.0.0.1:0"]);
    s.said("DEBUG");
    s.said("first scan and publish");
    let dest = work.path().join("dest");
    let (code, out) = run(&["sync", "-v", &s.description, p(&dest)]);
    assert_eq!(code, Some(0), "sync -v without --watch: {out}");
    let (code, out) = run(&["audit", "-q", &s.description, p(&dest)]);
    assert_eq!(code, Some(0), "audit -q: {out}");
    s.stop();

    let s = serve(&src, &["-q", "--listen", "127.0.0.1:0"]);
    std::fs::write(src.join("c.txt"), "gamma\n").expect("write");
    wait_for_change(&s.base, "c.txt", "created");
    let said = s.stop();
    assert!(
        !said.contains("INFO") && !said.contains("changes published"),
        "serve -q logs warnings and errors only: {said}"
    );
}

/// Sizes in binary units and counts with the right noun in the text of `publish`, `serve` and
/// `hub` (before: "1 resources (…; 1 files read, 6 bytes)", "1 part(s)", "0 subscription(s), 0
/// delivery(ies)"); exact bytes stay in `--json`.
#[test]
fn publish_serve_and_hub_say_sizes_in_units_and_counts_in_words() {
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("dir");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("big.bin"), vec![7u8; 3 << 19]).expect("write");
    let (code, out) = run(&["publish", p(&dir), "--base-url", "http://x.example/"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with("1 resource, 1.5 MiB (baseline"),
        "units and the singular: {out}"
    );
    assert!(out.contains("1 file read, 1.5 MiB)"), "{out}");
    assert!(
        out.contains("Resource List in 1 part, 1 Change List;"),
        "{out}"
    );
    assert!(!out.contains("(s)") && !out.contains(" bytes"), "{out}");
    std::fs::write(dir.join("small.txt"), "abc").expect("write");
    let (code, out) = run(&[
        "publish",
        p(&dir),
        "--base-url",
        "http://x.example/",
        "--json",
    ]);
    assert_eq!(code, Some(0), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["bytes"].as_u64(), Some((3 << 19) + 3), "{v}");
    assert_eq!(v["bytes_hashed"].as_u64(), Some(3), "{v}");

    let serve_dir = work.path().join("served");
    std::fs::create_dir_all(&serve_dir).expect("mkdir");
    std::fs::write(serve_dir.join("a.txt"), vec![b'a'; 2048]).expect("write");
    let mut child = bin()
        .args(["serve", p(&serve_dir), "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let second = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(first.starts_with("serving "), "{first}");
    assert_eq!(
        second,
        "1 resource, 2.0 KiB (first scan: 1 file read, 2.0 KiB)"
    );

    let state = work.path().join("hub.sqlite");
    let mut child = bin()
        .args(["hub", "--listen", "127.0.0.1:0", "--state", p(&state)])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hub");
    let line = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.contains("(0 subscriptions, 0 deliveries pending;"),
        "{line}"
    );
}

/// Progress of a long scan: drawn on a terminal once the work has taken its delay (two
/// seconds; `RESOURCESYNC_PROGRESS_AFTER_MS` shortens it here), never in a pipe, never with
/// `-q`, and not for work that ends before the delay. The terminal is `script`'s (util-linux).
#[test]
fn long_scans_show_progress_on_a_terminal_and_nothing_in_pipes() {
    let has_script = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_script,
        "this test needs `script` (util-linux, Debian package bsdutils) for a terminal"
    );
    let work = tempfile::tempdir().expect("tempdir");
    let fresh = |name: &str| {
        let d = work.path().join(name);
        std::fs::create_dir_all(&d).expect("mkdir");
        for i in 0..50 {
            std::fs::write(d.join(format!("f{i}.txt")), format!("file {i}\n")).expect("write");
        }
        d
    };
    // `publish DIR` on a terminal (`script` runs it under a pseudo-terminal and copies what
    // it draws to its own standard output).
    let on_terminal = |dir: &Path, flags: &str, after_ms: Option<&str>| -> String {
        let cmd = format!(
            "'{}' {flags} publish '{}' --base-url http://x.example/",
            env!("CARGO_BIN_EXE_resourcesync"),
            p(dir)
        );
        let mut c = Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null());
        c.env_remove("RESOURCESYNC_PROGRESS_AFTER_MS");
        if let Some(ms) = after_ms {
            c.env("RESOURCESYNC_PROGRESS_AFTER_MS", ms);
        }
        let o = c.output().expect("script");
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let shown = on_terminal(&fresh("a"), "", Some("0"));
    assert!(shown.contains("publish "), "progress drawn: {shown:?}");
    assert!(shown.contains("\x1b[2K"), "and cleared: {shown:?}");
    assert!(
        shown.contains("50 resources"),
        "then the summary: {shown:?}"
    );
    let quiet = on_terminal(&fresh("b"), "-q", Some("0"));
    assert!(quiet.is_empty(), "-q draws nothing: {quiet:?}");
    // Quick work within the two seconds: nothing drawn.
    let quick = on_terminal(&fresh("c"), "", None);
    assert!(!quick.contains("\x1b[2K"), "{quick:?}");
    assert!(quick.starts_with("50 resources"), "{quick:?}");
    // A pipe: nothing but the summary, whatever the delay.
    let o = bin()
        .args(["publish", p(&fresh("d")), "--base-url", "http://x.example/"])
        .env("RESOURCESYNC_PROGRESS_AFTER_MS", "0")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains('\x1b'));
}
