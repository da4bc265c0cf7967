//! `resourcesync aggregate`, run as an operator would: two Sources served by `resourcesync
//! serve` processes, the service started with one, the second added by editing the file and
//! sending SIGHUP, a broken edit refused while the service goes on, SIGTERM draining to a clean
//! exit; and a configuration error at start naming its line. Polls with deadlines, no sleeps.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::serve::{http_get, spawn_serve};

/// The Source Description URL a `serve` process prints first.
fn served(dir: &std::path::Path) -> (Child, String) {
    let (child, rx) = spawn_serve(dir);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let url = line.rsplit(" at ").next().expect("URL").to_owned();
    (child, url)
}

pub(crate) fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
}

/// Polls `/api/sources` until `f` holds on it.
pub(crate) fn until(
    addr: &str,
    what: &str,
    f: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let end = Instant::now() + Duration::from_secs(90);
    loop {
        let (status, raw) = http_get(addr, "/api/sources");
        let body = raw.split("\r\n\r\n").nth(1).unwrap_or("");
        if status == 200 {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
                if f(&v) {
                    return v;
                }
            }
        }
        assert!(Instant::now() < end, "{what}: not within 90 s: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(crate) fn following(v: &serde_json::Value, name: &str, resources: u64) -> bool {
    v.as_array().is_some_and(|a| {
        a.iter()
            .any(|s| s["name"] == name && s["phase"] == "following" && s["resources"] == resources)
    })
}

fn source_toml(name: &str, url: &str) -> String {
    format!("[[source]]\nname = \"{name}\"\nurl = \"{url}\"\nschedule = \"1s\"\ndelete = true\n\n")
}

#[cfg(unix)]
#[test]
fn aggregate_follows_reloads_on_sighup_and_drains_on_sigterm() {
    let (a_dir, b_dir) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    for i in 0..3 {
        std::fs::write(a_dir.path().join(format!("a{i}.txt")), format!("a {i}\n")).expect("write");
    }
    for i in 0..4 {
        std::fs::write(b_dir.path().join(format!("b{i}.txt")), format!("b {i}\n")).expect("write");
    }
    let (mut a, a_url) = served(a_dir.path());
    let (mut b, b_url) = served(b_dir.path());
    let work = tempfile::tempdir().expect("work");
    let cfg = work.path().join("aggregate.toml");
    std::fs::write(&cfg, source_toml("alpha", &a_url)).expect("config");
    let mut agg = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["aggregate", "--config", cfg.to_str().expect("path")])
        .args(["--serve", "127.0.0.1:0", "--json", "--grace", "10"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let rx = lines_of(agg.stdout.take().expect("stdout"));
    let erx = lines_of(agg.stderr.take().expect("stderr"));
    let first: serde_json::Value = serde_json::from_str(
        &rx.recv_timeout(Duration::from_secs(60))
            .expect("start line"),
    )
    .expect("JSON start line");
    assert_eq!(first["sources"], 1);
    let page = first["serve"].as_str().expect("serve URL").to_owned();
    let addr = page
        .strip_prefix("http://")
        .and_then(|r| r.strip_suffix('/'))
        .expect("address")
        .to_owned();
    until(&addr, "alpha baselined", |v| following(v, "alpha", 3));
    // The copies, in the default store beside the configuration.
    assert_eq!(
        std::fs::read(work.path().join("copies/alpha/a1.txt")).expect("copy"),
        b"a 1\n"
    );

    // A second Source, added by editing the file and SIGHUP.
    std::fs::write(
        &cfg,
        format!(
            "{}{}",
            source_toml("alpha", &a_url),
            source_toml("beta", &b_url)
        ),
    )
    .expect("config");
    signal(&agg, "-HUP");
    until(&addr, "beta added", |v| {
        following(v, "alpha", 3) && following(v, "beta", 4)
    });

    // A broken edit: refused, said on stderr, the service goes on with what it had.
    std::fs::write(&cfg, "[[source]]\nname = \"alpha\"\nurl = \"not a url\"\n").expect("config");
    signal(&agg, "-HUP");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let line = erx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
            .expect("a message about the refused configuration");
        if line.contains("not read again") {
            assert!(line.contains("aggregate.toml:3"), "{line}");
            break;
        }
    }
    let v = until(&addr, "both still followed", |v| {
        following(v, "alpha", 3) && following(v, "beta", 4)
    });
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    let (status, page) = http_get(&addr, "/");
    assert_eq!(status, 200);
    assert!(page.contains("alpha") && page.contains("beta"), "{page}");
    let (status, metrics) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("resourcesync_aggregate_resources{source=\"beta\"} 4"),
        "{metrics}"
    );

    // SIGTERM: drained, a clean exit.
    signal(&agg, "-TERM");
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = agg.try_wait().expect("wait") {
            break st;
        }
        assert!(Instant::now() < end, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The lines of a child's output, as they come.
fn lines_of(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

#[test]
fn a_configuration_error_at_start_names_its_line_and_exits_2() {
    let work = tempfile::tempdir().expect("work");
    let cfg = work.path().join("bad.toml");
    std::fs::write(
        &cfg,
        "[[source]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/\"\n\n[[source]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/\"\n",
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["aggregate", "--config", cfg.to_str().expect("path")])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:6") && err.contains("used twice"),
        "{err}"
    );
    // Nothing was created.
    assert!(!work.path().join("copies").exists());
}
