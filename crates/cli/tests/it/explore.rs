//! `resourcesync explore URL`, run as a user would, against a Source on 127.0.0.1: the tree, its
//! JSON form, and the exit status (0 valid, 1 invalid or unreadable documents, 2 nothing found).

use std::process::{Command, Output};

use resourcesync_testkit::sync::*;
use resourcesync_testkit::{Fault, Server};

fn explore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .arg("explore")
        .args(args)
        .args(["--retries", "0"])
        .output()
        .expect("run resourcesync explore")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_tree_its_json_and_the_exit_status() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b/c.txt", b"charlie"),
            ("b/d e.txt", b"delta"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base, Some(2));

    let o = explore(&[&server.base]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "Source Description  {}.well-known/resourcesync",
            server.base
        )
    );
    for s in [
        "└─ Capability List  ",
        "├─ Resource List Index  ",
        "Resource List  ",
        // What the Capability List names is the open Change List (Z39.99-2014 §12.1); its
        // index is reached through its `index` link.
        "├─ Change List  ",
        "Change List Index (index)  ",
        // The first scan is the baseline: its Change List is open and empty.
        "Change List  ",
        "0 entries; from ",
    ] {
        assert!(stdout.contains(s), "{s:?} missing:\n{out}");
    }
    assert!(
        stdout
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("valid: ")),
        "{out}"
    );

    let o = explore(&[&server.base, "--json", "--max-parts", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["roots"][0]["kind"], "Source Description");
    assert_eq!(v["roots"][0]["children"][0]["kind"], "Capability List");
    assert_eq!(v["invalid"], 0);
    assert_eq!(v["not_expanded"], 1, "2 parts, 1 followed");

    // A part gone: exit 1, the document marked.
    let v2 = v["roots"][0]["children"][0]["children"]
        .as_array()
        .expect("children")
        .iter()
        .find(|c| c["kind"] == "Resource List Index")
        .expect("index")["children"][0]["url"]
        .as_str()
        .expect("part url")
        .to_owned();
    let path = v2
        .strip_prefix(server.base.trim_end_matches('/'))
        .expect("under base");
    server.fault(path, Fault::Status(404));
    let o = explore(&[&server.base]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("UNREADABLE"), "{}", text(&o));
    assert!(text(&o).contains("HTTP 404"), "{}", text(&o));

    // Nothing there: exit 2.
    let empty = tmp();
    let nothing = Server::start_in_thread(empty.path());
    let o = explore(&[&nothing.base]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("no ResourceSync document found"),
        "{}",
        text(&o)
    );
}
