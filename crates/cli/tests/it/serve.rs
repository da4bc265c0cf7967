//! `resourcesync serve`, run as a user would: it prints where it serves, answers over loopback,
//! and stops cleanly on SIGTERM. No sleeps: the test reads the "serving" line and polls with
//! deadlines.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub(crate) fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut buf = String::new();
    s.read_to_string(&mut buf).expect("read");
    let status = buf
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    (status, buf)
}

/// `resourcesync serve DIR --listen 127.0.0.1:0`, and its standard output line by line.
pub(crate) fn spawn_serve(dir: &std::path::Path) -> (std::process::Child, mpsc::Receiver<String>) {
    spawn(Command::new(env!("CARGO_BIN_EXE_resourcesync")), dir)
}

/// `resourcesync serve DIR --listen 127.0.0.1:0 EXTRA…`, and its standard output line by line.
pub(crate) fn spawn_serve_with(
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    cmd.args(["serve", dir.to_str().expect("path")]).args(extra);
    spawn_args(cmd)
}

/// `cmd serve DIR --listen 127.0.0.1:0` (`cmd` the binary, or a shell that runs it), and its
/// standard output line by line.
fn spawn(mut cmd: Command, dir: &std::path::Path) -> (std::process::Child, mpsc::Receiver<String>) {
    cmd.args(["serve", dir.to_str().expect("path")]);
    spawn_args(cmd)
}

fn spawn_args(mut cmd: Command) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = cmd
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

#[cfg(unix)]
#[test]
fn serve_prints_its_url_answers_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "hello\n").expect("write");
    let (mut child, rx) = spawn_serve(dir.path());
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let url = line
        .strip_prefix(&format!("serving {} at ", dir.path().display()))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    let rest = url.strip_prefix("http://").expect("http URL");
    let (addr, path) = rest.split_at(rest.find('/').expect("path"));
    assert_eq!(path, "/.well-known/resourcesync");

    let (status, body) = http_get(addr, path);
    assert_eq!(status, 200);
    assert!(body.contains("capability=\"description\""), "{body}");
    let (status, body) = http_get(addr, "/a.txt");
    assert_eq!(status, 200);
    assert!(body.contains("rel=\"resourcesync\""), "{body}");
    assert!(body.ends_with("hello\n"), "{body}");
    let (status, _) = http_get(addr, "/.resourcesync/state.sqlite");
    assert_eq!(status, 404);

    // SIGTERM: a graceful, successful exit.
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::yield_now();
    };
    assert!(status.success(), "{status:?}");
    // Documents went to the state directory, not into DIR.
    assert!(!dir.path().join("resourcesync").exists());
    assert!(!dir.path().join(".well-known").exists());
    assert!(
        dir.path()
            .join(".resourcesync/www/resourcesync/capabilitylist.xml")
            .is_file()
    );
}

/// The soft and hard open-files limits of process `pid`, from `/proc/PID/limits`.
#[cfg(target_os = "linux")]
fn open_files_limits(pid: u32) -> (String, String) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    open_files_limits_in(&text)
}

/// The soft and hard open-files limits in the text of a `/proc/PID/limits`.
#[cfg(target_os = "linux")]
fn open_files_limits_in(text: &str) -> (String, String) {
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let mut w = line["Max open files".len()..].split_whitespace();
    (
        w.next().expect("soft").to_owned(),
        w.next().expect("hard").to_owned(),
    )
}

/// The binary raises its soft open-files limit to the hard one at start (the store, a library,
/// only reads it to size its budget of unnamed temporary files).
#[cfg(target_os = "linux")]
#[test]
fn the_binary_raises_its_open_files_limit_to_the_hard_one() {
    use rustix::process::{Resource, getrlimit};
    let lim = getrlimit(Resource::Nofile);
    let Some(hard) = lim.maximum else {
        eprintln!("no hard limit on open files: nothing to raise to");
        return;
    };
    // A soft limit below the hard one, set by a shell for the child only (not for this process,
    // whose limit the other tests of this binary share), which then execs the binary.
    let soft = lim.current.unwrap_or(hard).min(hard - 1).to_string();
    let under_soft_limit = |program: &str| {
        let mut c = Command::new("sh");
        c.args(["-c", r#"ulimit -S -n "$1" && shift && exec "$@""#, "sh"])
            .args([soft.as_str(), program]);
        c
    };
    // The shell does set it: a program it runs starts with that soft limit.
    let mut cat = under_soft_limit("cat");
    let out = cat.arg("/proc/self/limits").output().expect("sh");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        open_files_limits_in(&String::from_utf8_lossy(&out.stdout)),
        (soft.clone(), hard.to_string())
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut child, rx) = spawn(
        under_soft_limit(env!("CARGO_BIN_EXE_resourcesync")),
        dir.path(),
    );
    let line = rx.recv_timeout(Duration::from_secs(60));
    let limits = open_files_limits(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.is_ok_and(|l| l.starts_with("serving")), "not serving");
    assert_eq!(limits, (hard.to_string(), hard.to_string()));
}

/// A child process killed and reaped when dropped: a test that fails leaves no server running.
pub(crate) struct Reaped(pub(crate) std::process::Child);

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
