//! `publish` and `serve` with `--inventory`, run as a user would: the rows of a PostgreSQL table
//! (the server of scripts/postgres.sh) and the records of an OAI-PMH repository (the provider of
//! scripts/oai-provider.sh), each published with one command, served, and synced by our
//! Destination; the second `publish` of an unchanged inventory records nothing.

use std::process::{Command, Output};
use std::time::Duration;

use crate::serve::http_get;

fn env(var: &str, script: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "{var} is not set: run the tests with scripts/test.sh (it runs scripts/{script})"
        ),
    }
}

fn resourcesync(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(args)
        .output()
        .expect("run resourcesync")
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// The body of a raw HTTP/1.1 response.
fn body(raw: &str) -> &str {
    raw.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

#[test]
fn a_postgresql_table_published_served_and_synced() {
    let url = env("RESOURCESYNC_TEST_POSTGRES", "postgres.sh");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let schema = format!("cli_inv_{}_{nanos}", std::process::id());
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.batch_execute(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.resources (path text PRIMARY KEY, body bytea, url text,
             updated_at timestamptz NOT NULL DEFAULT now(), md5 text, deleted boolean NOT NULL DEFAULT false);
         INSERT INTO {schema}.resources(path, body) VALUES ('a.txt', 'alpha'), ('docs/b.txt', 'beta');
         INSERT INTO {schema}.resources(path, body, deleted) VALUES ('gone.txt', 'x', true);
         INSERT INTO {schema}.resources(path, url, md5) VALUES ('big.pdf', 'http://files.example/big.pdf', NULL);"
    ))
    .expect("table");
    let spec = format!("{url}?table={schema}.resources");
    let work = tempfile::tempdir().expect("work");
    let w = work.path().join("source");
    let ws = w.to_str().expect("path");
    let r = json_of(&resourcesync(&[
        "publish",
        ws,
        "--inventory",
        &spec,
        "--base-url",
        "http://example.org/",
        "--json",
    ]));
    // Two rows with bodies; the deleted one is not there; a `url` row without a digest
    // cannot be hashed (its bytes are elsewhere): skipped, with a reason.
    assert_eq!(r["resources"], 2, "{r}");
    assert!(
        r["skipped"]
            .as_array()
            .is_some_and(|s| s.iter().any(|x| x["path"] == "big.pdf")),
        "{r}"
    );
    let again = json_of(&resourcesync(&[
        "publish",
        ws,
        "--inventory",
        &spec,
        "--base-url",
        "http://example.org/",
        "--json",
    ]));
    assert_eq!(
        (
            again["created"].as_u64(),
            again["updated"].as_u64(),
            again["deleted"].as_u64()
        ),
        (Some(0), Some(0), Some(0)),
        "{again}"
    );

    // Served (documents from the working directory, bytes from the table) and synced.
    let serve_dir = work.path().join("served");
    let (mut child, rx) = crate::serve::spawn_serve_with(&serve_dir, &["--inventory", &spec]);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let sd = line.rsplit(" at ").next().expect("URL").to_owned();
    let addr = sd
        .strip_prefix("http://")
        .and_then(|r| r.split_once('/'))
        .map(|(a, _)| a.to_owned())
        .expect("address");
    let (status, raw) = http_get(&addr, "/a.txt");
    assert_eq!((status, body(&raw)), (200, "alpha"));
    let dest = work.path().join("dest");
    let out = resourcesync(&["sync", &sd, dest.to_str().expect("path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(dest.join("docs/b.txt")).expect("copy"),
        b"beta"
    );
    assert!(!dest.join("gone.txt").exists());
    // SIGTERM: a clean exit (the inventory's connections closed where blocking is allowed).
    crate::aggregate::signal(&child, "-TERM");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let _ = db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
}

#[test]
fn an_oai_pmh_repository_published_and_served() {
    let root = env("RESOURCESYNC_TEST_OAI", "oai-provider.sh");
    // The provider's `fixture` repository: 300 records, every 10th deleted.
    let spec = format!("oai-pmh:{root}fixture/oai?metadataPrefix=oai_dc");
    let work = tempfile::tempdir().expect("work");
    let w = work.path().join("bridge");
    let r = json_of(&resourcesync(&[
        "publish",
        w.to_str().expect("path"),
        "--inventory",
        &spec,
        "--base-url",
        "http://example.org/",
        "--json",
    ]));
    assert_eq!(r["resources"], 270, "{r}");
    // Served from a working directory of its own (the one above was published under another
    // base URL).
    let (mut child, rx) =
        crate::serve::spawn_serve_with(&work.path().join("served"), &["--inventory", &spec]);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let sd = line.rsplit(" at ").next().expect("URL").to_owned();
    let dest = work.path().join("dest");
    let out = resourcesync(&["sync", &sd, dest.to_str().expect("path"), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copies: Vec<_> = std::fs::read_dir(dest.join("records"))
        .expect("records")
        .filter_map(Result::ok)
        .collect();
    assert_eq!(copies.len(), 270);
    let one = std::fs::read_to_string(copies[0].path()).expect("a record");
    assert!(one.contains("oai_dc:dc") || one.contains("<dc"), "{one}");
    let _ = child.kill();
    let _ = child.wait();
}
