//! Interoperability with the Python reference client, `resync-sync` (resync 2.0.1, see
//! `interop_resync` for its known defects), against `resourcesync publish` behind a static
//! server: the incremental run is given the Change List URL the Capability List names, as
//! resync's README shows (`--changelist-uri`), which is a plain, open Change List (Z39.99-2014
//! §12.1) that resync can read.

#![cfg(unix)]

use std::collections::BTreeMap;
use std::path::Path;

use resourcesync_model::{Capability, DocumentReader, Entry, Header, ReadOptions, Root};
use resourcesync_testkit::server::Server;

use crate::interop_resync::{counts, dest_files, files, put, resync, resync_sync, statuses};
use crate::source_support::{get, run};

fn document(url: &str) -> (Header, Vec<Entry>) {
    let (status, body) = get(url);
    assert_eq!(status, 200, "GET {url}: {body}");
    let mut r = DocumentReader::new(body.as_bytes(), ReadOptions::named(url))
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let mut entries = Vec::new();
    while let Some(e) = r.next_entry().unwrap_or_else(|e| panic!("{url}: {e}")) {
        entries.push(e);
    }
    (r.header().clone(), entries)
}

/// The Change List URL the Capability List names, found from the Source Description.
fn named_change_list(base: &str) -> String {
    let (_, sd) = document(&format!("{base}.well-known/resourcesync"));
    let (_, caps) = document(&sd[0].loc);
    caps.iter()
        .find(|e| {
            e.md.as_ref().and_then(|m| m.capability.as_ref()) == Some(&Capability::ChangeList)
        })
        .map(|e| e.loc.clone())
        .expect("a Change List in the Capability List")
}

fn publish(src: &Path, base: &str) {
    let (code, out) = run(&["publish", src.to_str().expect("UTF-8"), "--base-url", base]);
    assert_eq!(code, Some(0), "{out}");
}

/// The Source's resources: its files, without its documents and state.
fn source_files(src: &Path) -> BTreeMap<String, Vec<u8>> {
    files(src, &[".resourcesync", ".well-known", "resourcesync"])
}

#[test]
fn resync_incremental_from_the_named_change_list_against_publish() {
    resync_sync();
    let root = tempfile::tempdir().expect("tempdir");
    let (src, dst, work, staging) = (
        root.path().join("src"),
        root.path().join("dst"),
        root.path().join("work"),
        root.path().join("staging"),
    );
    for d in [&src, &work, &staging] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let dst_s = dst.to_str().expect("UTF-8 temp path");
    for (rel, content) in [
        ("a.txt", "alpha\n"),
        ("b.txt", "bravo\n"),
        ("sub/c.txt", "c\n"),
    ] {
        put(&staging, &src.join(rel), content.as_bytes());
    }
    let server = Server::start_in_thread(&src);
    let base = server.base.clone();
    publish(&src, &base);
    let out = resync(&work, &["--baseline", &base, dst_s]);
    assert!(
        statuses(&out)
            .iter()
            .any(|(w, c)| w == "SYNCED" && c["created"] == 3),
        "{out}"
    );
    assert_eq!(dest_files(&dst), source_files(&src));

    put(&staging, &src.join("a.txt"), b"alpha, second version\n");
    put(&staging, &src.join("sub/d.txt"), b"delta\n");
    std::fs::remove_file(src.join("b.txt")).expect("rm");
    publish(&src, &base);

    let cl = named_change_list(&base);
    let (h, changes) = document(&cl);
    assert_eq!(h.root, Root::UrlSet, "{cl}: a plain Change List");
    // resync's window starts at the first change (resync defect 3 in `interop_resync`).
    let from = changes
        .iter()
        .filter_map(|e| e.md.as_ref().and_then(|m| m.datetime))
        .min_by(|a, b| a.cmp_instant(b))
        .expect("changes")
        .to_string();
    let out = resync(
        &work,
        &[
            "--incremental",
            "--delete",
            "--changelist-uri",
            &cl,
            "--from",
            &from,
            &base,
            dst_s,
        ],
    );
    assert_eq!(
        statuses(&out).first(),
        Some(&(
            "CHANGES APPLIED".to_owned(),
            counts(&[("created", 1), ("updated", 1), ("deleted", 1)])
        )),
        "{out}"
    );
    assert_eq!(dest_files(&dst), source_files(&src));
}
