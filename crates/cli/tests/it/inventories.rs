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

/// `serve DIR --inventory SPEC` on 127.0.0.1: the process, its Source Description URL and its
/// address.
fn serve_inventory(dir: &std::path::Path, spec: &str) -> (crate::serve::Reaped, String, String) {
    let (child, rx) = crate::serve::spawn_serve_with(dir, &["--inventory", spec]);
    let child = crate::serve::Reaped(child);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let sd = line.rsplit(" at ").next().expect("URL").to_owned();
    let addr = sd
        .strip_prefix("http://")
        .and_then(|r| r.split_once('/'))
        .map(|(a, _)| a.to_owned())
        .expect("address");
    (child, sd, addr)
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
    let (mut child, sd, addr) = serve_inventory(&serve_dir, &spec);
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
    let (mut child, sd, _) = serve_inventory(&work.path().join("served"), &spec);
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
    // SIGTERM: a clean exit (the harvesting client closed where blocking is allowed).
    crate::aggregate::signal(&child, "-TERM");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}

/// The test bucket's URL (scripts/s3.sh) under a prefix of this test's own.
fn s3_url(prefix: &str) -> String {
    let u = env("RESOURCESYNC_TEST_S3", "s3.sh");
    let (head, query) = u.split_once('?').unwrap_or((&u, ""));
    format!("{}/{prefix}?{query}", head.trim_end_matches('/'))
}

/// The entries' (loc, md5, change) of a document read from a bucket, checked valid first.
fn bucket_doc(
    b: &resourcesync_store::s3::Bucket,
    key: &str,
) -> Vec<(String, Option<String>, Option<resourcesync_model::Change>)> {
    use resourcesync_model::validate::validate;
    use resourcesync_model::{DocumentReader, HashAlg, ReadOptions};
    use std::io::Read as _;
    let (info, mut r) = b
        .get(key)
        .expect("get")
        .unwrap_or_else(|| panic!("no {key} in the bucket"));
    assert_eq!(
        info.content_type.as_deref(),
        Some("application/xml"),
        "{key}"
    );
    let mut bytes = Vec::new();
    r.read_to_end(&mut bytes).expect("read");
    let report = DocumentReader::new(&bytes[..], ReadOptions::named(key))
        .and_then(validate)
        .unwrap_or_else(|e| panic!("{key}: {e}"));
    assert!(report.is_valid(), "{key}: {:?}", report.findings);
    let mut rd = DocumentReader::new(&bytes[..], ReadOptions::named(key)).expect("doc");
    let mut v = Vec::new();
    while let Some(e) = rd.next_entry().expect("entry") {
        let md = e.md.clone().unwrap_or_default();
        v.push((
            e.loc,
            md.hash.and_then(|h| h.value_of(&HashAlg::Md5)),
            md.change,
        ));
    }
    v
}

/// The objects of a bucket published with one command, the documents into the bucket
/// (`--out s3://` at the inventory's prefix: not listed as resources), the md5s from the
/// ETags; objects put and deleted reach the Change List in the bucket; served and synced by
/// our Destination; `--out` inside the prefix refused.
#[test]
fn an_s3_bucket_published_into_itself_served_and_synced() {
    use resourcesync_model::Change;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let prefix = format!("cli-s3-{}-{nanos}", std::process::id());
    let url = s3_url(&prefix);
    let inv = resourcesync_source::inventory::S3Inventory::from_spec(&url).expect("spec");
    let b = inv.bucket();
    for (k, v) in [("a.txt", &b"alpha"[..]), ("docs/b.txt", b"beta")] {
        b.put(k, v, "text/plain").expect("put");
    }
    let work = tempfile::tempdir().expect("work");
    let w = work.path().join("source");
    let ws = w.to_str().expect("path");
    let publish = || {
        json_of(&resourcesync(&[
            "publish",
            ws,
            "--inventory",
            &url,
            "--out",
            &url,
            "--base-url",
            "http://example.org/",
            "--json",
        ]))
    };
    let r = publish();
    assert_eq!(r["resources"], 2, "{r}");
    assert!(
        r["out"].as_str().is_some_and(|o| o.starts_with("s3://")),
        "{r}"
    );
    let rl = keys_under(b, "resourcesync/resourcelists/");
    assert_eq!(rl.len(), 1, "{rl:?}");
    assert_eq!(
        bucket_doc(b, &rl[0]),
        [
            (
                "http://example.org/a.txt".to_owned(),
                Some("2c1743a391305fbf367df8e4f069f9f9".to_owned()),
                None
            ),
            (
                "http://example.org/docs/b.txt".to_owned(),
                Some("987bcab01b929eb2c07877b224215c92".to_owned()),
                None
            ),
        ]
    );
    for k in [
        "resourcesync/capabilitylist.xml",
        ".well-known/resourcesync",
    ] {
        assert!(!bucket_doc(b, k).is_empty(), "{k}");
    }
    // The documents now in the prefix are not resources: nothing changed.
    let again = publish();
    assert_eq!(
        (
            again["resources"].as_u64(),
            again["created"].as_u64(),
            again["deleted"].as_u64()
        ),
        (Some(2), Some(0), Some(0)),
        "{again}"
    );
    b.put("c.txt", b"gamma", "text/plain").expect("put");
    b.delete("a.txt").expect("delete");
    let r = publish();
    assert_eq!(
        (r["created"].as_u64(), r["deleted"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    let changes: Vec<_> = keys_under(b, "resourcesync/changelists/")
        .iter()
        .flat_map(|k| bucket_doc(b, k).into_iter().map(|(l, _, c)| (l, c)))
        .collect();
    assert_eq!(
        changes,
        [
            ("http://example.org/c.txt".to_owned(), Some(Change::Created)),
            ("http://example.org/a.txt".to_owned(), Some(Change::Deleted)),
        ]
    );

    out_inside_the_prefix_is_refused(ws, &url, &prefix);
    served_and_synced(work.path(), &url);
}

/// An OAI-PMH repository on 127.0.0.1 whose every `ListRecords` page holds one new record and
/// a new resumption token: a list that never ends. Its base URL.
fn endless_oai_repository() -> String {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/oai", l.local_addr().expect("addr"));
    std::thread::spawn(move || {
        let envelope = |inner: &str| {
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH \
                 xmlns=\"http://www.openarchives.org/OAI/2.0/\"><responseDate>\
                 2026-01-01T00:00:00Z</responseDate>{inner}</OAI-PMH>"
            )
        };
        for (n, conn) in l.incoming().enumerate() {
            let Ok(mut conn) = conn else { continue };
            let mut r = BufReader::new(conn.try_clone().expect("clone"));
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
                    break;
                }
            }
            let body = if line.contains("verb=Identify") {
                envelope(
                    "<Identify><granularity>YYYY-MM-DDThh:mm:ssZ</granularity>\
                     <deletedRecord>no</deletedRecord></Identify>",
                )
            } else {
                envelope(&format!(
                    "<ListRecords><record><header><identifier>r{n}</identifier><datestamp>\
                     2026-01-01T00:00:00Z</datestamp></header><metadata><x>{n}</x></metadata>\
                     </record><resumptionToken>t{n}</resumptionToken></ListRecords>"
                ))
            };
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn an_oai_pmh_list_that_never_ends_is_cut_at_max_pages_and_nothing_is_published() {
    let url = endless_oai_repository();
    let work = tempfile::tempdir().expect("work");
    let dir = work.path().join("bridge");
    let t = std::time::Instant::now();
    let out = resourcesync(&[
        "publish",
        dir.to_str().expect("path"),
        "--inventory",
        &format!("oai-pmh:{url}?maxPages=5"),
        "--base-url",
        "http://example.org/",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
    assert!(
        err.contains("maxPages=5") && err.contains("maxPages=N in the specification"),
        "{err}"
    );
    // No document written: no Capability List, no Resource List, no Source Description.
    for d in ["resourcesync", ".well-known"] {
        let p = dir.join(d);
        let n = std::fs::read_dir(&p).map_or(0, |r| r.count());
        assert_eq!(n, 0, "{} holds {n} entries: {err}", p.display());
    }
}

/// The PostgreSQL inventory's summary counts rows, not files; a table that does not exist is
/// named, with how to create it or name another (`table=`), not "configuration: …".
#[test]
fn a_postgresql_inventory_speaks_of_rows_and_names_a_missing_table() {
    let url = env("RESOURCESYNC_TEST_POSTGRES", "postgres.sh");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let schema = format!("cli_rows_{}_{nanos}", std::process::id());
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.batch_execute(&format!(
        "CREATE SCHEMA {schema};
         CREATE TABLE {schema}.resources (path text PRIMARY KEY, body bytea, url text,
             updated_at timestamptz NOT NULL DEFAULT now());
         INSERT INTO {schema}.resources(path, body) VALUES ('a.txt', 'alpha'), ('b.txt', 'beta');
         INSERT INTO {schema}.resources(path, url) VALUES ('big.pdf', 'http://files.example/big.pdf');"
    ))
    .expect("table");
    let work = tempfile::tempdir().expect("work");
    let ws = work.path().join("source");
    let ws = ws.to_str().expect("path");
    let spec = format!("{url}?table={schema}.resources");
    let o = resourcesync(&[
        "publish",
        ws,
        "--inventory",
        &spec,
        "--base-url",
        "http://example.org/",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("(baseline, the first snapshot: no changes recorded; 2 rows read"),
        "{out}"
    );
    assert!(out.contains("1 row skipped"), "{out}");
    assert!(!out.contains("file"), "{out}");

    let missing = format!("{schema}.missing");
    let spec = format!("{url}?table={missing}");
    let o = resourcesync(&[
        "publish",
        ws,
        "--inventory",
        &spec,
        "--base-url",
        "http://example.org/",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for part in [
        format!("the table {missing} does not exist"),
        format!("CREATE TABLE {missing} (path text PRIMARY KEY"),
        "`table=SCHEMA.NAME`".to_owned(),
    ] {
        assert!(err.contains(&part), "{part} in {err}");
    }
    assert!(!err.contains("configuration:"), "{err}");
    let _ = db.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
}

/// The keys under `prefix` in the bucket, in the order listed.
fn keys_under(b: &resourcesync_store::s3::Bucket, prefix: &str) -> Vec<String> {
    let mut keys = Vec::new();
    b.list(prefix, None, &mut |o| {
        keys.push(o.name);
        Ok(std::ops::ControlFlow::Continue(()))
    })
    .expect("list");
    keys
}

/// `publish --inventory URL --out` a place inside the inventory's prefix (not at it): the
/// documents would be listed as resources, so it is refused.
fn out_inside_the_prefix_is_refused(ws: &str, url: &str, prefix: &str) {
    // Documents inside the prefix but not at it would be listed: refused.
    let inside = s3_url(&format!("{prefix}/sub"));
    let out = resourcesync(&[
        "publish",
        ws,
        "--inventory",
        url,
        "--out",
        &inside,
        "--base-url",
        "http://example.org/",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("inside the inventory's prefix"));
}

/// The inventory `url` served (bytes streamed from the bucket) and synced; SIGTERM then exits
/// cleanly.
fn served_and_synced(work: &std::path::Path, url: &str) {
    let (mut child, sd, addr) = serve_inventory(&work.join("served"), url);
    let (status, raw) = http_get(&addr, "/docs/b.txt");
    assert_eq!((status, body(&raw)), (200, "beta"));
    let (status, _) = http_get(&addr, "/a.txt");
    assert_eq!(status, 404);
    let dest = work.join("dest");
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
    assert_eq!(std::fs::read(dest.join("c.txt")).expect("copy"), b"gamma");
    assert!(!dest.join("a.txt").exists());
    // SIGTERM: a clean exit (the bucket's client closed where blocking is allowed).
    crate::aggregate::signal(&child, "-TERM");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}
