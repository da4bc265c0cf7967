//! `sync` and `audit` flags as an rsync user reads them: `-q` (nothing on success), `--delete`
//! (files no resource maps to go too), `--include`/`--exclude` over names as written, and
//! counts that add up to the Source's resources.

use std::path::Path;
use std::process::{Command, Output};

use resourcesync_testkit::sync::*;
use resourcesync_testkit::{Fault, Server};

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

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(o)))
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// `-q`: nothing at all on success (cron mails nothing); a failure or a difference is told on
/// standard error, with exit status 1.
#[test]
fn quiet_sync_and_audit_say_nothing_on_success_and_differences_on_stderr() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("b 1.txt", b"bravo")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);

    for args in [
        vec!["-q", "sync", &server.base, p(&dest)],
        vec!["sync", "-q", &server.base, p(&dest)],
        vec!["-q", "audit", &server.base, p(&dest)],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o));
        assert!(o.stderr.is_empty(), "{args:?}: {}", text(&o));
    }

    std::fs::write(dest.join("a.txt"), b"ALPHA").expect("tamper");
    let o = run(&["-q", "audit", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("different a.txt"),
        "{}",
        text(&o)
    );

    let out2 = tmp();
    let dest2 = dest_in(&out2);
    server.fault("/a.txt", Fault::Body(b"ALPHA".to_vec()));
    let o = run(&["-q", "sync", &server.base, p(&dest2), "--retries", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("failed"),
        "{}",
        text(&o)
    );
    server.clear_faults();

    // Without -q the summary is on standard output, as before.
    let o = run(&["sync", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("created"),
        "{}",
        text(&o)
    );
}

/// The created + updated + unchanged + failed + filtered of a JSON report.
fn accounted(v: &serde_json::Value) -> u64 {
    ["created", "updated", "unchanged", "failed", "filtered"]
        .iter()
        .map(|k| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}")))
        .sum()
}

/// `sync --delete`: a dry run lists the files no resource maps to (counted, in `--json` too),
/// the run removes them, the audit then exits 0; patterns match names as written; the counts
/// add up to the Source's resources; `--help` says what each count means.
#[test]
fn delete_removes_extra_files_and_patterns_match_names_as_written() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b 1.txt", b"bravo"),
            ("日本語/ü.txt", b"umlaut"),
            ("100%.txt", b"percent"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let base = server.base.clone();

    let o = run(&[
        "sync",
        &base,
        p(&dest),
        "--json",
        "--exclude",
        "b 1*.txt",
        "--exclude",
        "100%.txt",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(
        (v["created"].as_u64(), v["filtered"].as_u64()),
        (Some(2), Some(2)),
        "{v}"
    );
    assert_eq!(accounted(&v), 4, "{v}");
    assert!(!dest.join("b 1.txt").exists() && !dest.join("100%.txt").exists());

    // One pattern matches, one is a typo: warned about, once.
    let out2 = tmp();
    let dest2 = dest_in(&out2);
    let o = run(&[
        "sync",
        &base,
        p(&dest2),
        "--include",
        "*/日本語/*",
        "--include",
        "*.pfd",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(dest2.join("日本語/ü.txt").is_file(), "{}", text(&o));
    assert!(!dest2.join("a.txt").exists());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("matched no resource").count(), 1, "{err}");
    assert!(err.contains("\"*.pfd\""), "{err}");

    // Files of nobody's in a whole copy: the audit finds them, --delete removes them.
    let out3 = tmp();
    let dest = dest_in(&out3);
    let o = run(&["sync", &base, p(&dest), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(accounted(&json(&o)), 4, "{}", text(&o));
    write_tree(&dest, &[("stray.txt", b"x"), ("old/deep/b 1.bak", b"y")]);
    let o = run(&["audit", &base, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = run(&["sync", &base, p(&dest), "--delete", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("would delete-extra stray.txt"), "{t}");
    assert!(t.contains("would delete-extra old/deep/b 1.bak"), "{t}");
    assert!(
        t.contains("2 files no resource maps to would be removed"),
        "{t}"
    );
    assert!(dest.join("stray.txt").exists());
    let o = run(&["sync", &base, p(&dest), "--delete", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v = json(&o);
    assert_eq!(v["extra_deleted"], 2, "{v}");
    assert!(!dest.join("stray.txt").exists() && !dest.join("old").exists());
    assert_eq!(
        (v["created"].as_u64(), v["deleted"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    let o = run(&["audit", &base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let o = run(&["sync", "--help"]);
    let t = String::from_utf8_lossy(&o.stdout);
    for says in [
        "unchanged  the copy was already current",
        "These add up",
        "no resource maps to",
    ] {
        assert!(t.contains(says), "{says}: {t}");
    }
}

/// DEST a regular file: `sync` and `audit` say it is not a directory and what to do (not
/// "DEST/.resourcesync/tmp: Not a directory"); the file is left as it was.
#[test]
fn a_regular_file_as_dest_is_named_as_not_a_directory() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let file = out.path().join("destfile");
    std::fs::write(&file, b"mine").expect("write");
    for (cmd, what) in [
        ("sync", "nothing can be synced into it (give a directory"),
        ("audit", "nothing to audit"),
    ] {
        let o = run(&[cmd, &server.base, p(&file)]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
        let t = text(&o);
        assert!(
            t.contains(&format!("{} is not a directory: {what}", file.display())),
            "{cmd}: {t}"
        );
        assert!(!t.contains(".resourcesync"), "{cmd}: {t}");
    }
    assert_eq!(std::fs::read(&file).expect("read"), b"mine");
}

/// A URL without its scheme (`127.0.0.1:8181`): `sync`, `audit`, `explore` and `validate` say
/// the URL it means, not "relative URL without a base".
#[test]
fn a_url_without_its_scheme_is_told_the_url_it_means() {
    let out = tmp();
    let dest = dest_in(&out);
    for args in [
        vec!["sync", "127.0.0.1:8181", p(&dest)],
        vec!["audit", "127.0.0.1:8181", p(&dest)],
        vec!["explore", "127.0.0.1:8181"],
        vec!["validate", "127.0.0.1:8181"],
    ] {
        let o = run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains("http://127.0.0.1:8181"), "{args:?}: {t}");
        assert!(!t.contains("relative URL"), "{args:?}: {t}");
    }
}

/// `--state` is a SQLite file's path: a PostgreSQL URL given to `sync`, `audit`, `publish`
/// or `restore` is refused (exit 2, its password not repeated), not made a directory named
/// `postgres:` in the working directory.
#[test]
fn a_url_as_state_is_refused_not_made_a_directory() {
    let work = tmp();
    let dest = dest_in(&work);
    let url = "postgres://u:hunter2@127.0.0.1:5432/db";
    for args in [
        vec!["sync", "http://127.0.0.1:9/", p(&dest), "--state", url],
        vec!["audit", "http://127.0.0.1:9/", p(&dest), "--state", url],
        vec![
            "publish",
            p(work.path()),
            "--base-url",
            "http://h/",
            "--state",
            url,
        ],
        vec![
            "restore",
            "http://127.0.0.1:9/",
            p(&dest),
            "out",
            "--at",
            "2026-12-01T00:00:00Z",
            "--state",
            url,
        ],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
            .args(&args)
            .current_dir(work.path())
            .output()
            .expect("run resourcesync");
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains("SQLite file"), "{args:?}: {t}");
        assert!(
            !t.contains("hunter2"),
            "{args:?}: the password repeated: {t}"
        );
        assert!(
            !work.path().join("postgres:").exists(),
            "{args:?}: made postgres:/"
        );
    }
}

/// `CMD` under a pseudo-terminal (`script`, util-linux): what it drew there, and its status.
fn on_terminal(cmd: &str) -> (String, Option<i32>) {
    let o = Command::new("script")
        .args(["-qec", cmd, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("this test needs `script` (util-linux, Debian package bsdutils)");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        o.status.code(),
    )
}

/// Every rate the bars drew, rounded for people: `12.3/s`, `1,234/s`, `4.5 MiB/s`, `512 B/s`.
fn assert_rates_rounded(shown: &str) {
    let mut rates = 0;
    for part in shown.split(" resources  ").skip(1) {
        let rate = part[..part.find("  ETA").unwrap_or(part.len())].trim();
        let n = rate
            .strip_suffix("/s")
            .unwrap_or_else(|| panic!("{rate:?}"));
        let (int, frac) = n.split_once('.').unwrap_or((n, ""));
        assert!(
            frac.len() <= 1 && frac.bytes().all(|b| b.is_ascii_digit()),
            "{rate:?}"
        );
        assert!(
            int.bytes().all(|b| b.is_ascii_digit() || b == b','),
            "{rate:?}"
        );
        rates += 1;
    }
    for part in shown.split(" received  ").skip(1) {
        let end = part.find(['\r', '\n', '\x1b']).unwrap_or(part.len());
        let rate = part[..end].trim_end();
        let n = rate.trim_end_matches("/s");
        let (num, unit) = n.split_once(' ').unwrap_or_else(|| panic!("{rate:?}"));
        assert!(unit.ends_with('B') && rate.ends_with("/s"), "{rate:?}");
        let frac = num.split_once('.').map_or("", |(_, f)| f);
        assert!(frac.len() <= 1, "{rate:?}");
        rates += 1;
    }
    assert!(rates > 0, "no rate drawn: {shown:?}");
}

/// After the last frame of the bars, they are cleared before anything else is printed.
fn assert_cleared_before(shown: &str, then: &str) {
    let last_frame = shown.rfind("ETA").expect("the bars drawn");
    let rest = &shown[last_frame..];
    let cleared = rest.find("\x1b[2K").unwrap_or(usize::MAX);
    let printed = rest
        .find(then)
        .unwrap_or_else(|| panic!("no {then:?} in {rest:?}"));
    assert!(
        cleared < printed,
        "a line left behind before {then:?}: {rest:?}"
    );
}

/// On a terminal, `sync` draws its rates rounded and leaves no progress line behind, when it
/// ends and when it stops on an error.
#[test]
fn sync_progress_shows_rates_rounded_and_leaves_no_line_behind() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("f{i}.txt"), format!("file {i}\n").into_bytes()))
        .collect();
    let tree: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &tree);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let bin = env!("CARGO_BIN_EXE_resourcesync");

    // A run long enough for the bars to be drawn (a tick is 200 ms).
    server.fault(
        "/f0.txt",
        Fault::Delay(std::time::Duration::from_millis(900)),
    );
    let out = tmp();
    let dest = dest_in(&out);
    let (shown, code) = on_terminal(&format!("'{bin}' sync '{}' '{}'", server.base, p(&dest)));
    assert_eq!(code, Some(0), "{shown:?}");
    assert_rates_rounded(&shown);
    assert_cleared_before(&shown, "created");

    // A Source that stops answering: the error comes after the bars are gone.
    server.clear_faults();
    server.fault("/.well-known/resourcesync", Fault::Stall);
    let out = tmp();
    let dest = dest_in(&out);
    let (shown, code) = on_terminal(&format!(
        "'{bin}' sync '{}.well-known/resourcesync' '{}' --timeout 1 --retries 0",
        server.base,
        p(&dest)
    ));
    assert_eq!(code, Some(2), "{shown:?}");
    assert_cleared_before(&shown, "error");
}
