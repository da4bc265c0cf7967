//! Slowloris against the three servers (`serve`, `hub`, `aggregate --serve`): 200 connections
//! that send a request head a byte every second do not keep a normal client from being
//! answered promptly, and the server closes them once the head has taken longer than its
//! header timeout (`resourcesync_websub::server::HEADER_READ_TIMEOUT`, 30 s) or their idle
//! time runs out.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::robust_support::{Server, get, serve, served_dir};

/// Slow connections held at once.
const SLOW: usize = 200;
/// Rounds of one byte per connection, a second apart.
const ROUNDS: usize = 8;
/// The longest a normal request may take while they trickle.
const PROMPT: Duration = Duration::from_secs(5);

/// Holds [`SLOW`] connections to `server` trickling a request head, and asks for `probe`
/// between the rounds: every answer is 200 within [`PROMPT`].
fn trickle(label: &str, server: &Server, probe: &str) {
    assert_eq!(get(&server.addr, probe).map(|r| r.0), Some(200), "{label}");
    let mut slow: Vec<TcpStream> = (0..SLOW)
        .map(|_| TcpStream::connect(&server.addr).expect("connect"))
        .collect();
    for s in &mut slow {
        let _ = s.write_all(format!("GET {probe} HTTP/1.1\r\nHost: x\r\n").as_bytes());
    }
    let mut worst = Duration::ZERO;
    for round in 0..ROUNDS {
        for s in &mut slow {
            // A header that never ends, a byte at a time (a closed connection: fine).
            let _ = s.write_all(b"X");
        }
        let t = Instant::now();
        let answer = get(&server.addr, probe).map(|r| r.0);
        let took = t.elapsed();
        worst = worst.max(took);
        assert_eq!(answer, Some(200), "{label}: round {round}");
        assert!(
            took < PROMPT,
            "{label}: answered in {took:?} in round {round}"
        );
        // The pace of the attack, not a synchronisation: a byte per connection per second.
        std::thread::sleep(Duration::from_secs(1).saturating_sub(took));
    }
    eprintln!("{label}: {SLOW} slow connections, slowest normal answer {worst:?}");
    drop(slow);
    assert_eq!(get(&server.addr, probe).map(|r| r.0), Some(200), "{label}");
}

#[test]
fn serve_answers_promptly_under_slowloris() {
    let dir = served_dir();
    let server = serve(dir.path());
    trickle("serve", &server, "/d0/r0.txt");
}

#[test]
fn hub_answers_promptly_under_slowloris() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("hub.sqlite");
    let server = Server::start(&["hub", "--state", state.to_str().expect("utf-8")]);
    trickle("hub", &server, "/");
}

#[test]
fn aggregate_answers_promptly_under_slowloris() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("aggregate.toml");
    std::fs::write(
        &file,
        "[[source]]\nname = \"nowhere\"\nurl = \"http://127.0.0.1:9/\"\nschedule = \"1h\"\n",
    )
    .expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["aggregate", "--serve", "127.0.0.1:0", "--config"])
        .arg(&file)
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
    // "aggregating 1 Source into DIR; page at http://ADDR/"
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a first line");
    let addr = line
        .split("page at http://")
        .nth(1)
        .map(|a| a.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let server = Server { child, addr };
    trickle("aggregate", &server, "/healthz");
}
