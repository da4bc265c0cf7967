//! Interoperability of the republishing aggregator with the Python reference
//! client: `resourcesync aggregate --serve` follows a Source served by `resourcesync serve`,
//! and `resync-sync --baseline` syncs from the aggregator's republished Source
//! (`/rs/NAME/`, discovered at its `.well-known/resourcesync`) to the same bytes. The venv
//! missing fails the test (see `interop_resync::resync_sync`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::aggregate::{signal, until};
use crate::interop_resync::{resync, resync_sync};
use crate::serve::spawn_serve;

#[cfg(unix)]
#[test]
fn resync_sync_gets_the_same_bytes_from_the_aggregator() {
    resync_sync();
    let src = tempfile::tempdir().expect("src");
    for i in 0..4 {
        std::fs::write(src.path().join(format!("f{i}.txt")), format!("file {i}\n")).expect("write");
    }
    std::fs::create_dir(src.path().join("sub")).expect("mkdir");
    std::fs::write(src.path().join("sub/x.bin"), [0u8, 1, 2, 255]).expect("write");
    let (mut origin, rx) = spawn_serve(src.path());
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serving line");
    let url = line.rsplit(" at ").next().expect("URL").to_owned();
    let work = tempfile::tempdir().expect("work");
    let cfg = work.path().join("aggregate.toml");
    std::fs::write(
        &cfg,
        format!("[[source]]\nname = \"museum\"\nurl = \"{url}\"\nschedule = \"1s\"\n"),
    )
    .expect("config");
    let mut agg = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["aggregate", "--config", cfg.to_str().expect("path")])
        .args(["--serve", "127.0.0.1:0", "--json", "--grace", "5"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = agg.stdout.take().expect("stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first: serde_json::Value = serde_json::from_str(
        &lines
            .recv_timeout(Duration::from_secs(60))
            .expect("start line"),
    )
    .expect("JSON");
    let page = first["serve"].as_str().expect("serve URL").to_owned();
    let addr = page
        .strip_prefix("http://")
        .and_then(|r| r.strip_suffix('/'))
        .expect("address")
        .to_owned();
    until(&addr, "museum republished", |v| {
        v.as_array().is_some_and(|a| {
            a.iter()
                .any(|s| s["name"] == "museum" && s["republishes"].as_u64() >= Some(1))
        })
    });
    let dst = work.path().join("dst");
    std::fs::create_dir(&dst).expect("dst");
    let base = format!("{page}rs/museum/");
    let out = resync(
        work.path(),
        &["--baseline", &base, dst.to_str().expect("path")],
    );
    let want = resourcesync_testkit::tree::files(src.path(), &[".resourcesync"]);
    let got = resourcesync_testkit::tree::files(&dst, &[]);
    assert_eq!(got, want, "{out}");
    signal(&agg, "-TERM");
    let _ = agg.wait();
    let _ = origin.kill();
    let _ = origin.wait();
}
