//! The log an operator reads (crates/cli/src/log.rs, resourcesync_websub::access): JSON or
//! text lines, to a file or standard error, a line per request with `--access-log`, and
//! `/healthz` on `serve` and `hub`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::serve::http_get;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    c.env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("RESOURCESYNC_") && !k.starts_with("RESOURCESYNC_TEST") {
            c.env_remove(k);
        }
    }
    c
}

/// The lines of a stream, as they come.
fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// The host:port of the first URL in `line`.
fn addr_in(line: &str) -> String {
    let rest = &line[line.find("http://").expect("a URL") + 7..];
    rest[..rest.find('/').expect("a path")].to_owned()
}

/// SIGTERM, then the exit.
fn stop(child: &mut Child) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            assert!(st.success(), "{st:?}");
            return;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::yield_now();
    }
}

/// `serve` with `--access-log --log-format json --log-file`: a JSON object per request with
/// its remote, method, path, status, body bytes and duration; `/healthz` answers.
#[cfg(unix)]
#[test]
fn serve_writes_an_access_log_as_json_to_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::write(data.join("a.txt"), "hello\n").expect("write");
    let log = dir.path().join("serve.log");
    let mut child = bin()
        .arg("serve")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--no-watch", "--access-log"])
        .args(["--log-format", "json", "--log-file"])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = lines(child.stdout.take().expect("stdout"));
    let first = out.recv_timeout(Duration::from_secs(60)).expect("serving");
    let addr = addr_in(&first);
    let (status, body) = http_get(&addr, "/healthz");
    assert_eq!(status, 200);
    assert!(body.ends_with("\r\n\r\nok\n"), "{body}");
    let (status, _) = http_get(&addr, "/a.txt");
    assert_eq!(status, 200);
    let (status, _) = http_get(&addr, "/missing.txt");
    assert_eq!(status, 404);
    stop(&mut child);

    let text = std::fs::read_to_string(&log).expect("the log file");
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let access = |path: &str| {
        events
            .iter()
            .find(|e| e["target"] == "access" && e["path"] == path)
            .unwrap_or_else(|| panic!("no access line for {path} in:\n{text}"))
            .clone()
    };
    let a = access("/a.txt");
    assert_eq!(a["method"], "GET");
    assert_eq!(a["status"], 200);
    assert_eq!(a["bytes"], 6);
    assert_eq!(a["level"], "INFO");
    assert!(a["duration_ms"].as_f64().is_some_and(|d| d >= 0.0), "{a}");
    assert!(
        a["remote"]
            .as_str()
            .is_some_and(|r| r.starts_with("127.0.0.1:")),
        "{a}"
    );
    let m = access("/missing.txt");
    assert_eq!(m["status"], 404);
    assert_eq!(access("/healthz")["bytes"], 3);
}

/// `serve` and `hub` with `--log-format json --log-file`: their start-up and shut-down lines
/// are JSON objects in the file, and nothing is written to standard error.
#[cfg(unix)]
#[test]
fn start_and_stop_lines_go_through_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::write(data.join("a.txt"), "hello\n").expect("write");
    let serve = [
        "serve".into(),
        data.display().to_string(),
        "--no-watch".into(),
    ];
    let hub = [
        "hub".into(),
        "--state".into(),
        dir.path().join("hub.sqlite").display().to_string(),
    ];
    for (args, start, stop_line) in [
        (&serve, "serving ", "shutting down"),
        (&hub, "WebSub hub at http://", "hub shutting down"),
    ] {
        let log = dir.path().join(format!("{}.log", args[0]));
        let mut child = bin()
            .args(args)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
                "--log-file",
            ])
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let out = lines(child.stdout.take().expect("stdout"));
        let mut err = child.stderr.take().expect("stderr");
        out.recv_timeout(Duration::from_secs(60))
            .expect("first line");
        stop(&mut child);
        let mut said = String::new();
        std::io::Read::read_to_string(&mut err, &mut said).expect("stderr");
        assert_eq!(said, "", "{}: nothing on standard error", args[0]);
        let text = std::fs::read_to_string(&log).expect("the log file");
        let messages: Vec<String> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                v["message"].as_str().unwrap_or_default().to_owned()
            })
            .collect();
        assert!(
            messages.iter().any(|m| m.starts_with(start)),
            "{start} in {text}"
        );
        assert!(
            messages.iter().any(|m| m.starts_with(stop_line)),
            "{stop_line} in {text}"
        );
    }
}

/// Without `--access-log` no request is logged (the rest of the log still is).
#[cfg(unix)]
#[test]
fn the_access_log_is_off_unless_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    std::fs::write(data.join("a.txt"), "hello\n").expect("write");
    let log = dir.path().join("serve.log");
    let mut child = bin()
        .arg("serve")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--no-watch", "-v", "--log-file"])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let out = lines(child.stdout.take().expect("stdout"));
    let first = out.recv_timeout(Duration::from_secs(60)).expect("serving");
    let (status, _) = http_get(&addr_in(&first), "/a.txt");
    assert_eq!(status, 200);
    stop(&mut child);
    let text = std::fs::read_to_string(&log).expect("the log file");
    // -v: the debug lines are there, in text.
    assert!(text.contains("DEBUG"), "{text}");
    assert!(!text.contains("path=/a.txt"), "{text}");
}

/// `hub --access-log`: text lines on standard error, in the same form; `/healthz` answers.
#[cfg(unix)]
#[test]
fn hub_answers_healthz_and_logs_the_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = bin()
        .args(["hub", "--listen", "127.0.0.1:0", "--access-log", "--state"])
        .arg(dir.path().join("hub.sqlite"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = lines(child.stdout.take().expect("stdout"));
    let err = lines(child.stderr.take().expect("stderr"));
    let first = out.recv_timeout(Duration::from_secs(60)).expect("hub line");
    let (status, body) = http_get(&addr_in(&first), "/healthz");
    assert_eq!(status, 200);
    assert!(body.ends_with("\r\n\r\nok\n"), "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let line = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let l = err.recv_timeout(left).expect("an access line on stderr");
        if l.contains("access:") {
            break l;
        }
    };
    stop(&mut child);
    for part in [
        " INFO access: remote=127.0.0.1:",
        " method=GET path=/healthz status=200 bytes=3 duration_ms=",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
}
