//! Credentials are never shown: `--print-config` redacts them (from the command line, the
//! environment and the file), `--help` hides the environment values and the file defaults of
//! the flags that carry them, and the log of `aggregate` does not show a key of a Source URL.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    for (k, _) in std::env::vars() {
        if k.starts_with("RESOURCESYNC_") && !k.starts_with("RESOURCESYNC_TEST") {
            c.env_remove(k);
        }
    }
    c
}

fn run(c: &mut Command) -> String {
    let o = c.output().expect("run");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{all}");
    all
}

fn shows_none(out: &str, secrets: &[&str]) {
    for s in secrets {
        assert!(!out.contains(s), "{s} shown:\n{out}");
    }
}

#[test]
fn print_config_redacts_every_credential() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("aggregate.toml");
    std::fs::write(
        &file,
        "base-url = \"https://u:Secret3@agg.example/?sig=Secret4\"\n\n[[source]]\nname = \"a\"\n\
         url = \"http://127.0.0.1:9/\"\n",
    )
    .expect("write");
    let out = run(bin()
        .args(["aggregate", "--print-config", "--config"])
        .arg(&file)
        .args([
            "--store",
            "s3://KEYID:Secret1@127.0.0.1:9/bucket?region=garage",
        ])
        .env(
            "RESOURCESYNC_STATE",
            "postgres://agg:Secret2@127.0.0.1:9/db",
        ));
    shows_none(&out, &["Secret1", "Secret2", "Secret3", "Secret4"]);
    assert!(
        out.contains("store = \"s3://KEYID:REDACTED@127.0.0.1:9/bucket?region=garage\""),
        "{out}"
    );
    assert!(
        out.contains("postgres://agg:REDACTED@127.0.0.1:9/db"),
        "{out}"
    );

    let out = run(bin().args([
        "sync",
        "--print-config",
        "--token",
        "Secret5",
        "https://h.example/rs?api_key=Secret6",
        "/tmp/dest",
    ]));
    shows_none(&out, &["Secret5", "Secret6"]);
    assert!(out.contains("token = \"REDACTED\""), "{out}");
}

#[test]
fn help_hides_secret_values_from_the_environment_and_the_file() {
    let out = run(bin()
        .args(["aggregate", "--help"])
        .env(
            "RESOURCESYNC_STORE",
            "s3://KEYID:Secret7@127.0.0.1:9/bucket",
        )
        .env(
            "RESOURCESYNC_STATE",
            "postgres://agg:Secret8@127.0.0.1:9/db",
        ));
    shows_none(&out, &["Secret7", "Secret8"]);
    assert!(
        out.contains("RESOURCESYNC_STORE"),
        "the variable is named: {out}"
    );
    let out = run(bin()
        .args(["sync", "--help"])
        .env("RESOURCESYNC_TOKEN", "Secret9"));
    shows_none(&out, &["Secret9"]);
    // A value from the configuration file becomes the flag's default: not shown either.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("aggregate.toml");
    std::fs::write(
        &file,
        "store = \"s3://KEYID:Secret10@127.0.0.1:9/bucket\"\n",
    )
    .expect("write");
    let out = run(bin().args(["aggregate", "--help", "--config"]).arg(&file));
    shows_none(&out, &["Secret10"]);
}

#[test]
fn the_log_of_aggregate_shows_no_key_of_a_source_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("aggregate.toml");
    // Nothing listens on port 9: the client's error quotes the URL, query and all.
    std::fs::write(
        &file,
        "[[source]]\nname = \"keyed\"\n\
         url = \"http://127.0.0.1:9/.well-known/resourcesync?api_key=Secret11\"\nschedule = \"1h\"\n",
    )
    .expect("write");
    let mut child = bin()
        .args(["aggregate", "--config"])
        .arg(&file)
        .args(["--store"])
        .arg(dir.path().join("copies"))
        .env("RUST_LOG", "debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let end = Instant::now() + Duration::from_secs(60);
    let mut log = String::new();
    let mut failed = false;
    while !failed {
        let left = end.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            break;
        };
        failed = line.contains("sync failed");
        log.push_str(&line);
        log.push('\n');
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(failed, "no failed sync logged:\n{log}");
    assert!(log.contains("api_key=REDACTED"), "{log}");
    shows_none(&log, &["Secret11"]);
}
