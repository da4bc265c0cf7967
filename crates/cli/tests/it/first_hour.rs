//! What a new user trips over in the first hour (issue "The first hour"), each run as a user
//! would: output nobody reads, signals, exit codes through pipes.

#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use resourcesync_testkit::Server;
use resourcesync_testkit::sync::*;

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

fn md5_hex(b: &[u8]) -> String {
    use resourcesync_model::hash::{HashAlg, MultiHasher};
    let mut h = MultiHasher::new(&[HashAlg::Md5]);
    h.update(b);
    h.finish().value_of(&HashAlg::Md5).expect("md5")
}

/// A hand-written Source: files under `root` and a Resource List `rl.xml` naming them, each with
/// its length, md5 and the `<lastmod>` given (none for `None`).
fn hand_written_source(root: &Path, base: &str, files: &[(&str, &[u8], Option<&str>)]) {
    let mut entries = String::new();
    for (name, body, lastmod) in files {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, body).expect("write");
        let lm = lastmod
            .map(|l| format!("<lastmod>{l}</lastmod>"))
            .unwrap_or_default();
        entries.push_str(&format!(
            "<url><loc>{base}{name}</loc>{lm}<rs:md length=\"{}\" hash=\"md5:{}\"/></url>\n",
            body.len(),
            md5_hex(body)
        ));
    }
    std::fs::write(
        root.join("rl.xml"),
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:md capability=\"resourcelist\" at=\"2026-01-01T00:00:00Z\"/>\n{entries}</urlset>\n"
        ),
    )
    .expect("write the list");
}

fn mtime(p: &Path) -> std::time::SystemTime {
    std::fs::metadata(p)
        .expect("stat")
        .modified()
        .expect("mtime")
}

fn at(secs: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_secs(secs)
}

/// Copies get the Source's times: `<lastmod>` where the list gives one, else the response's
/// `Last-Modified` (first-hour item 3).
#[test]
fn copies_get_the_sources_modification_times() {
    let src = tmp();
    let server = Server::start_in_thread(src.path());
    hand_written_source(
        src.path(),
        &server.base,
        &[
            ("a.txt", b"alpha", Some("2013-01-02T14:00:00Z")),
            ("d/b.txt", b"bravo", Some("2001-09-09T01:46:40.5Z")),
            ("c.txt", b"charlie", None),
        ],
    );
    // The server's Last-Modified is the file's own time, to the second.
    let c_time = at(1_000_000_000);
    std::fs::File::options()
        .write(true)
        .open(src.path().join("c.txt"))
        .expect("open")
        .set_modified(c_time)
        .expect("touch");
    let out = tmp();
    let dest = dest_in(&out);
    let o = run(&["sync", &format!("{}rl.xml", server.base), p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(mtime(&dest.join("a.txt")), at(1_357_135_200));
    assert_eq!(
        mtime(&dest.join("d/b.txt")),
        at(1_000_000_000) + Duration::from_millis(500)
    );
    assert_eq!(mtime(&dest.join("c.txt")), c_time);
}

/// Plain `sync` repairs copies deleted, appended to, or changed in place (found by their time
/// or length), `sync --checksum` also one changed in place with its time put back; `audit`
/// then finds the copy in sync and the trees are byte-identical (first-hour item 2).
#[test]
fn sync_repairs_damaged_copies_and_checksum_finds_the_rest() {
    let src = tmp();
    let server = Server::start_in_thread(src.path());
    let lm = Some("2013-01-02T14:00:00Z");
    hand_written_source(
        src.path(),
        &server.base,
        &[
            ("gone.txt", b"will be deleted", lm),
            ("longer.txt", b"will be appended to", lm),
            ("same.txt", b"same length edit", lm),
            ("sneaky.txt", b"edit, time reset", lm),
            ("fine.txt", b"left alone", lm),
        ],
    );
    let url = format!("{}rl.xml", server.base);
    let out = tmp();
    let dest = dest_in(&out);
    let o = run(&["sync", &url, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::remove_file(dest.join("gone.txt")).expect("rm");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dest.join("longer.txt"))
        .expect("open");
    std::io::Write::write_all(&mut f, b" and more").expect("append");
    drop(f);
    std::fs::write(dest.join("same.txt"), b"SAME LENGTH EDIT").expect("edit");
    let before = mtime(&dest.join("sneaky.txt"));
    std::fs::write(dest.join("sneaky.txt"), b"EDIT, TIME RESET").expect("edit");
    std::fs::File::options()
        .write(true)
        .open(dest.join("sneaky.txt"))
        .expect("open")
        .set_modified(before)
        .expect("touch");
    let o = run(&["audit", &url, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));

    server.reset_hits();
    // A Source of a Resource List alone: each run is a baseline diff, which finds a missing or
    // cut copy itself; --check also finds the one whose time changed.
    let o = run(&["sync", &url, p(&dest), "--json", "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["repaired"], 3, "{v}");
    assert_eq!(server.hits("/fine.txt"), 0);
    // Same length, same time: only a checksum finds it.
    let o = run(&["audit", &url, p(&dest)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("sneaky.txt"), "{}", text(&o));

    let o = run(&["sync", &url, p(&dest), "--checksum"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("1 damaged copy fetched again"),
        "{}",
        text(&o)
    );
    let o = run(&["audit", &url, p(&dest)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut want = source_files(src.path());
    want.remove("rl.xml");
    assert_eq!(dest_files(&dest), want);
}
