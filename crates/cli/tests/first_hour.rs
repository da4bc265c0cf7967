//! What a new user trips over in the first hour (issue "The first hour"), each run as a user
//! would: output nobody reads, signals, exit codes through pipes.

#![cfg(unix)]

#[path = "../../destination/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `resourcesync ARGS 2>&1`, its output in one pipe (the shell only joins the two streams and
/// is replaced by the program: the child's PID is the program's).
fn spawn_joined(args: &[&str]) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&1")
        .arg(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn")
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig}");
}

/// Waits at most `limit` for the child to exit; kills it (and fails) past that.
fn exits_within(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the first line of the child's output, then closes the pipe (as `| head -1` does).
fn read_first_line_and_close(child: &mut Child) -> String {
    let out = child.stdout.take().expect("stdout");
    let mut r = BufReader::new(out);
    let mut line = String::new();
    r.read_line(&mut line).expect("first line");
    drop(r);
    line
}

/// `serve DIR 2>&1 | head -1`, then SIGTERM (and SIGINT): the server stops within 5 s, although
/// its shutdown message has nowhere to go.
#[test]
fn serve_stops_on_a_signal_when_nobody_reads_its_output() {
    for sig in ["-TERM", "-INT"] {
        let src = tmp();
        write_tree(src.path(), &[("a.txt", b"alpha")]);
        let state = tmp();
        let st = state.path().join("state.sqlite");
        let mut child = spawn_joined(&[
            "serve",
            p(src.path()),
            "--listen",
            "127.0.0.1:0",
            "--state",
            p(&st),
            "--no-watch",
        ]);
        let line = read_first_line_and_close(&mut child);
        assert!(line.contains("serving"), "{line}");
        signal(&child, sig);
        let status = exits_within(&mut child, Duration::from_secs(5), "serve");
        assert_eq!(status.code(), Some(0), "serve {sig}: {status:?}");
    }
}

/// `sync URL DEST --watch 2>&1 | head -1`, then SIGINT or SIGTERM: the watch stops within 5 s.
#[test]
fn sync_watch_stops_on_a_signal_when_nobody_reads_its_output() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    for sig in ["-INT", "-TERM"] {
        let out = tmp();
        let dest = dest_in(&out);
        let mut child = spawn_joined(&[
            "sync",
            &server.base,
            p(&dest),
            "--watch",
            "--interval",
            "1",
            "-v",
        ]);
        let _ = read_first_line_and_close(&mut child);
        signal(&child, sig);
        let status = exits_within(&mut child, Duration::from_secs(5), "sync --watch");
        assert!(
            matches!(status.code(), Some(0 | 1)),
            "sync --watch {sig}: {status:?}"
        );
    }
}

/// A Source of 300 files and an empty destination.
fn out_of_sync() -> (tempfile::TempDir, Server, tempfile::TempDir) {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 7),
                format!("file {i}").into_bytes(),
            )
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(a, b)| (a.as_str(), &b[..])).collect();
    write_tree(src.path(), &refs);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    std::fs::create_dir_all(dest_in(&out)).expect("mkdir");
    (src, server, out)
}

/// `audit URL DEST | head -1` exits 1 (not in sync), not 0; with `--json` too, and without
/// "Broken pipe" on standard error.
#[test]
fn audit_through_a_closed_pipe_keeps_its_exit_status() {
    let (_src, server, out) = out_of_sync();
    let dest = dest_in(&out);
    for json in [false, true] {
        let mut c = bin();
        c.args(["audit", &server.base, p(&dest)]);
        if json {
            c.arg("--json");
        }
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // The reader goes away before anything is written.
        drop(child.stdout.take());
        let o = child.wait_with_output().expect("wait");
        assert_eq!(o.status.code(), Some(1), "json {json}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("Broken pipe"), "json {json}: {err}");
        assert!(!err.contains("panicked"), "json {json}: {err}");
    }
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run resourcesync")
}

/// Every entry under `dir` (empty when it does not exist).
fn entries(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A start URL that does not answer is refused (exit 2, naming the URL and its status), not
/// taken for the whole site; `explore` the same.
#[test]
fn a_start_url_that_does_not_answer_is_refused() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let nope = format!("{}nope", server.base);
    for args in [
        vec!["sync", nope.as_str(), p(&dest)],
        vec!["explore", nope.as_str()],
        vec!["audit", nope.as_str(), p(out.path())],
    ] {
        let o = run(&args);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(&nope) && t.contains("HTTP 404"), "{args:?}: {t}");
        assert_eq!(
            t.matches(&nope).count(),
            1,
            "{args:?}: the URL said once: {t}"
        );
    }
    assert!(!dest.exists(), "nothing created");
    // The site root still works, and so does a page of the Source's.
    let o = run(&["sync", &server.base, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// Nothing is created under DEST before the Source is found: an existing empty DEST stays
/// empty, a missing one is not made; `audit` of a missing DEST is an error, not 1 "missing".
#[test]
fn nothing_is_created_before_the_source_is_known() {
    let out = tmp();
    let empty = out.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let missing = out.path().join("missing");
    for url in ["not a url", "ftp://x/y", "http://127.0.0.1:1/"] {
        for dest in [&empty, &missing] {
            let o = run(&["sync", url, p(dest)]);
            assert_eq!(o.status.code(), Some(2), "{url}: {}", text(&o));
            assert!(entries(dest).is_empty(), "{url}: {:?}", entries(dest));
            assert_eq!(dest.exists(), *dest == empty, "{url}");
        }
    }
    let o = run(&["sync", "http://127.0.0.1:1/", p(&empty)]);
    assert!(text(&o).contains("could not be reached"), "{}", text(&o));

    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, None);
    let o = run(&["audit", &server.base, p(&missing)]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("is not a directory") && t.contains(p(&missing)),
        "{t}"
    );
    assert!(!t.contains("missing a.txt"), "{t}");
}
