//! `resourcesync validate` and `inspect`, run as a user would.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
}

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../model/tests/fixtures/spec")
        .join(rel)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run resourcesync")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn valid_document_exits_zero() {
    let f = fixture("z39.99-2014/ex21.xml");
    let o = run(&["validate", f.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(": valid (Change List, 4 entries"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn invalid_document_exits_one_with_file_line_col_rule() {
    let f = fixture("z39.99-2014/ex27.xml");
    let p = f.to_str().expect("path");
    let o = run(&["validate", p]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(
        out.contains(&format!(
            "{p}:11:7: error[RS-7-hash-syntax]: sha-256 digest is not hexadecimal"
        )),
        "{out}"
    );
}

#[test]
fn unreadable_input_exits_two() {
    let o = run(&["validate", "/nonexistent/resourcelist.xml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/resourcelist.xml"));
}

#[test]
fn malformed_xml_is_invalid_not_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("bad.xml");
    std::fs::write(&p, "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n  <url><loc>x</loc>\n</urlset>")
        .expect("write");
    let o = run(&["validate", p.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("error[XML-wellformed]"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("bad.xml:3:"), "{}", stdout(&o));
}

#[test]
fn json_report_is_machine_readable() {
    let good = fixture("z39.99-2014/ex19.xml");
    let bad = fixture("z39.99-2014/ex01.xml");
    let o = run(&[
        "validate",
        "--json",
        good.to_str().expect("path"),
        bad.to_str().expect("path"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["valid"], false);
    assert_eq!(v["documents"][0]["valid"], true);
    assert_eq!(v["documents"][0]["entries"], 4);
    assert_eq!(v["documents"][1]["valid"], false);
    assert_eq!(
        v["documents"][1]["findings"][0]["rule"],
        "RS-6.2-up-mandatory"
    );
    assert_eq!(v["documents"][1]["findings"][0]["line"], 4);
}

#[test]
fn gzip_documents_are_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("changelist.xml.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).expect("create"),
        flate2::Compression::default(),
    );
    gz.write_all(&std::fs::read(fixture("z39.99-2014/ex19.xml")).expect("read"))
        .expect("gzip");
    gz.finish().expect("finish");
    let o = run(&["validate", p.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn stdin_is_read_with_dash() {
    let mut child = bin()
        .args(["validate", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&std::fs::read(fixture("z39.99-2014/ex13.xml")).expect("read"))
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// Serves `body` with `status` as `/resourcelist.xml` on 127.0.0.1 (the test kit's Source
/// server) and returns the URL.
fn serve_once(body: Vec<u8>, status: &'static str) -> String {
    let code = status
        .split(' ')
        .next()
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    let server = resourcesync_testkit::Server::empty_in_thread();
    server.route(
        "/resourcelist.xml",
        resourcesync_testkit::Reply::xml(body).with_status(code),
    );
    server.url("resourcelist.xml")
}

#[test]
fn urls_are_fetched() {
    let url = serve_once(
        std::fs::read(fixture("z39.99-2014/ex14.xml")).expect("read"),
        "200 OK",
    );
    let o = run(&["validate", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains(&format!("{url}: valid (Resource List")));
}

#[test]
fn http_errors_are_unreadable() {
    let url = serve_once(b"gone".to_vec(), "404 Not Found");
    let o = run(&["validate", &url]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("404"));
}

#[test]
fn inspect_summarizes() {
    let f = fixture("z39.99-2014/ex19.xml");
    let o = run(&["inspect", f.to_str().expect("path")]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.contains("kind:       Change List (<urlset>)"), "{out}");
    assert!(out.contains("entries:    4"), "{out}");
    assert!(
        out.contains("time span:  2013-01-03T11:00:00Z .. 2013-01-03T21:00:00Z"),
        "{out}"
    );
    assert!(
        out.contains("changes:    created (1), updated (2), deleted (1)"),
        "{out}"
    );
    let o = run(&[
        "inspect",
        "--json",
        fixture("z39.99-2014/ex14.xml").to_str().expect("path"),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["kind"], "Resource List");
    assert_eq!(v["at"], "2013-01-03T09:00:00Z");
    let algs: Vec<&str> = v["digests"]
        .as_array()
        .expect("digests")
        .iter()
        .map(|d| d["algorithm"].as_str().expect("alg"))
        .collect();
    assert_eq!(algs, ["md5", "sha-256"]);
}

#[test]
fn rules_are_listed() {
    let o = run(&["validate", "--rules"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("RS-12.1-chronological"));
    // Rules added later are listed with their section.
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("RS-7-datetime-not-used "))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        line.contains("warning") && line.ends_with("[Z39.99-2017 §7]"),
        "{line:?}"
    );
}
