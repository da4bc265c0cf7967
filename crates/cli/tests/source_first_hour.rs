//! What a new user of `publish`, `serve` and `hub` trips over in the first hour (issues "The
//! first hour" and "Conformance"), each run through the binary as a user would.

#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    c.stdin(Stdio::null());
    c
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// How many times `needle` occurs in `hay`.
fn times(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

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
