//! A Source built by Python resync's `resync-build` (2.0.1), which writes file names into
//! `<loc>` as they are: `http://host/data/sub dir/ü 1.txt`, an IRI, not the URI Z39.99-2014 §7
//! asks for. Served by nginx (`RESOURCESYNC_TEST_NGINX`, set by scripts/test.sh; the test fails
//! without it, and without resync: scripts/python-peers.sh), `resourcesync sync` fetches every
//! such file percent-encoded, as browsers do, and stores it under its name: exit 0, every file
//! with its bytes, and one warning for the list, not one per resource.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};

use crate::interop_resync::{files, resync_build};
use crate::nginx_publish::{free_port, nginx_binary, start_nginx};
use resourcesync_testkit::sync::write_tree;

fn build(args: &[&str]) {
    let o = Command::new(resync_build())
        .args(args)
        .env("PYTHONUTF8", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run resync-build");
    assert!(
        o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("Traceback"),
        "resync-build {args:?}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn a_source_resync_built_with_iris_in_loc_is_mirrored_whole() {
    // Fail first, and clearly, when a tool is missing.
    resync_build();
    nginx_binary();
    let top = tempfile::tempdir().expect("tmp");
    // nginx's worker (nobody, when the test runs as root) must traverse to the files.
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let site = top.path().join("site");
    let data = site.join("data");
    let names: [(&str, &[u8]); 4] = [
        ("sub dir/\u{fc} 1.txt", b"u umlaut\n"),
        (
            "\u{65e5}\u{672c}\u{8a9e}/a b.txt",
            "\u{65e5}\u{672c}\n".as_bytes(),
        ),
        ("50% off.txt", b"percent\n"),
        ("plain.txt", b"plain\n"),
    ];
    write_tree(&data, &names);
    for d in ["rs", ".well-known"] {
        std::fs::create_dir_all(site.join(d)).expect("mkdir");
    }
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}/");
    // resync's documented way: a Resource List of the folder mapped to its URL, a Capability
    // List naming it, a Source Description at the well-known URI.
    let rl = format!("{base}rs/resourcelist.xml");
    let cl = format!("{base}rs/capabilitylist.xml");
    build(&[
        "--write-resourcelist",
        "--hash",
        "md5",
        "--capabilitylist-link",
        &cl,
        "--outfile",
        s(&site.join("rs/resourcelist.xml")),
        &format!("{base}data/={}", s(&data)),
    ]);
    build(&[
        "--write-capabilitylist",
        &format!("resourcelist={rl}"),
        "--outfile",
        s(&site.join("rs/capabilitylist.xml")),
    ]);
    build(&[
        "--write-sourcedescription",
        &cl,
        "--outfile",
        s(&site.join(".well-known/resourcesync")),
    ]);
    let written = std::fs::read_to_string(site.join("rs/resourcelist.xml")).expect("list");
    assert!(
        written.contains(&format!("<loc>{base}data/sub dir/\u{fc} 1.txt</loc>")),
        "resync writes IRIs (the premise of this test): {written}"
    );
    let _nginx = start_nginx(&top.path().join("nginx"), &[(port, &site)]);

    let out = tempfile::tempdir().expect("tmp");
    let dest = out.path().join("dest");
    let o = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["sync", &base, s(&dest), "--json", "--retries", "0"])
        .output()
        .expect("run resourcesync");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(
        (v["created"].as_u64(), v["failed"].as_u64()),
        (Some(4), Some(0)),
        "{v}"
    );
    assert_eq!(files(&dest.join("data"), &[]), files(&data, &[]));
    let warning = "3 resources of ";
    let iri = |w: &&serde_json::Value| w.as_str().is_some_and(|w| w.contains("non-ASCII"));
    let w: Vec<_> = v["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .filter(iri)
        .collect();
    assert_eq!(w.len(), 1, "{v}");
    let w = w[0].as_str().unwrap_or_default();
    assert!(
        w.starts_with(warning) && w.contains(&rl) && w.contains("percent-encoded"),
        "{w}"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).matches(warning).count(),
        1,
        "{}",
        text(&o)
    );

    // `validate` still says what the Source got wrong.
    let o = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["validate", &rl])
        .output()
        .expect("run resourcesync");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("SM-loc-uri"), "{}", text(&o));
}
