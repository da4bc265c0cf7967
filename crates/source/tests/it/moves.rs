//! A Source that moves to another base URL, and one state published into several output
//! directories (`publish --out OUT` and `serve`, which writes under the state folder): the
//! change history is carried over, and every document a Capability List names is there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use resourcesync_model::validate::validate;
use resourcesync_model::{Change, DocumentReader, Entry, Header, ReadOptions};
use resourcesync_source::scan::ScanOptions;
use resourcesync_source::state::Rotation;
use resourcesync_source::{BaseOrigin, Source, SourceConfig};

fn read(path: &Path) -> (Header, Vec<Entry>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let r = DocumentReader::new(&bytes[..], ReadOptions::named(path.display().to_string()))
        .and_then(validate)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.is_valid(), "{}: {:?}", path.display(), r.findings);
    let mut r = DocumentReader::new(&bytes[..], ReadOptions::named(path.display().to_string()))
        .expect("header");
    let h = r.header().clone();
    let mut v = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        v.push(e);
    }
    (h, v)
}

/// Every document reachable from the Source Description in `out` (published at `base`),
/// through the Capability List, indexes and archives: each must be a file in `out`, valid.
/// Returns (URL, path) of each, and every URL any of them names.
fn reachable(out: &Path, base: &str) -> (Vec<(String, PathBuf)>, BTreeSet<String>) {
    let docs_base = format!("{base}resourcesync/");
    let mut todo = vec![format!("{base}.well-known/resourcesync")];
    let mut seen = BTreeSet::new();
    let mut named = BTreeSet::new();
    let mut found = Vec::new();
    while let Some(url) = todo.pop() {
        if !seen.insert(url.clone()) {
            continue;
        }
        let rel = url
            .strip_prefix(base)
            .unwrap_or_else(|| panic!("{url} is not under {base}"));
        let path = out.join(rel);
        assert!(
            path.is_file(),
            "{url} is named but {} is missing",
            path.display()
        );
        if !url.ends_with(".xml") && !url.ends_with("/.well-known/resourcesync") {
            continue;
        }
        let (h, entries) = read(&path);
        for l in &h.links {
            named.insert(l.href.clone());
        }
        for e in entries {
            named.insert(e.loc.clone());
            if e.loc.starts_with(&docs_base) {
                todo.push(e.loc);
            }
        }
        found.push((url, path));
    }
    (found, named)
}

fn config(dir: &Path, out: &Path, state: &Path, base: &str) -> SourceConfig {
    let mut cfg = SourceConfig::new(dir, base);
    cfg.out = Some(out.to_owned());
    cfg.state = Some(state.to_owned());
    // A Change List per change: closed Change Lists and an archive with something in it.
    cfg.scan = ScanOptions {
        rotation: Rotation {
            max_entries: 1,
            ..Rotation::default()
        },
        ..ScanOptions::default()
    };
    cfg.publish.keep_resource_lists = 5;
    cfg
}

/// (path under the base, change, datetime) of every entry of every Change List in `out`.
fn history(out: &Path, base: &str) -> Vec<(String, Change, String)> {
    let index: Vec<String> = read(&out.join("resourcesync/changelist-index.xml"))
        .1
        .into_iter()
        .map(|e| e.loc)
        .collect();
    let mut all = Vec::new();
    for cl in index {
        let rel = cl.strip_prefix(base).expect("under base");
        for e in read(&out.join(rel)).1 {
            let md = e.md.as_ref().expect("md");
            all.push((
                e.loc.strip_prefix(base).expect("under base").to_owned(),
                md.change.clone().expect("change"),
                md.datetime.expect("datetime").to_string(),
            ));
        }
    }
    all
}

/// Scans and publishes, after `edit`.
fn publish_after(s: &mut Source, edit: impl FnOnce()) {
    edit();
    s.scan().expect("scan");
    s.publish().expect("publish");
}

#[test]
fn a_move_carries_the_change_history_to_the_new_urls() {
    let dir = tempfile::tempdir().expect("dir");
    let work = tempfile::tempdir().expect("work");
    let (out, state) = (work.path().join("out"), work.path().join("state.sqlite"));
    let d = dir.path();
    std::fs::write(d.join("a.txt"), "alpha").expect("write");
    std::fs::write(d.join("b.txt"), "beta").expect("write");
    let old = "http://old.example.org/data/";
    let new = "https://new.example.org/";
    {
        let mut s = Source::open(config(d, &out, &state, old)).expect("open");
        publish_after(&mut s, || {});
        publish_after(&mut s, || {
            std::fs::write(d.join("a.txt"), "alpha, changed").expect("write")
        });
        publish_after(&mut s, || {
            std::fs::remove_file(d.join("b.txt")).expect("rm")
        });
        assert!(s.moved().is_none());
    }
    let before = history(&out, old);
    assert_eq!(before.len(), 2, "{before:?}");

    // Another URL without --move: refused, saying how to move, nothing changed.
    let err = Source::open(config(d, &out, &state, new))
        .expect_err("a given URL does not move the Source by itself")
        .to_string();
    for want in ["--move", old, new, "--state"] {
        assert!(err.contains(want), "{want}: {err}");
    }
    assert_eq!(history(&out, old), before);

    // With --move: every resource and change under the new URL, the same history.
    let mut cfg = config(d, &out, &state, new);
    cfg.move_base = true;
    let mut s = Source::open(cfg).expect("open with --move");
    let m = s.moved().expect("moved").clone();
    assert_eq!((m.from.as_str(), m.to.as_str()), (old, new));
    assert_eq!((m.resources, m.changes), (1, 2));
    publish_after(&mut s, || {
        std::fs::write(d.join("c.txt"), "gamma").expect("write")
    });
    let after = history(&out, new);
    assert_eq!(after[..2], before[..], "the history carried over");
    assert_eq!(after[2].0, "c.txt");
    let (docs, named) = reachable(&out, new);
    assert!(docs.len() >= 8, "{docs:?}");
    let stale: Vec<&String> = named.iter().filter(|u| u.starts_with(old)).collect();
    assert!(
        stale.is_empty(),
        "documents still name the old URL: {stale:?}"
    );
    assert!(
        named.contains(&format!("{new}a.txt")) && named.contains(&format!("{new}c.txt")),
        "{named:?}"
    );
    drop(s);

    // The next run under the new URL needs nothing more.
    let s = Source::open(config(d, &out, &state, new)).expect("open again");
    assert!(s.moved().is_none());
}

#[test]
fn a_listen_address_is_followed_and_a_given_url_is_not() {
    let dir = tempfile::tempdir().expect("dir");
    let work = tempfile::tempdir().expect("work");
    let (out, state) = (work.path().join("out"), work.path().join("state.sqlite"));
    std::fs::write(dir.path().join("a.txt"), "alpha").expect("write");
    let open = |base: &str, origin: BaseOrigin, move_base: bool| {
        let mut cfg = config(dir.path(), &out, &state, base);
        cfg.base_origin = origin;
        cfg.move_base = move_base;
        Source::open(cfg).map(|mut s| {
            s.scan().expect("scan");
            s.publish().expect("publish");
            s.moved().map(|m| m.from.clone())
        })
    };
    let listen = BaseOrigin::Listen;
    let given = BaseOrigin::Given;
    // `serve --listen 127.0.0.1:0` twice: the second run follows its new address.
    assert_eq!(
        open("http://127.0.0.1:41001/", listen, false).expect("1"),
        None
    );
    assert_eq!(
        open("http://127.0.0.1:41002/", listen, false).expect("2"),
        Some("http://127.0.0.1:41001/".into())
    );
    // A URL somebody chose is not taken over silently, nor left silently.
    let err = open("https://example.org/", given, false).expect_err("given");
    assert!(err.to_string().contains("--move"), "{err}");
    assert_eq!(
        open("https://example.org/", given, true).expect("--move"),
        Some("http://127.0.0.1:41002/".into())
    );
    let err = open("http://127.0.0.1:41003/", listen, false).expect_err("listen after given");
    assert!(
        err.to_string().contains("--base-url https://example.org/"),
        "{err}"
    );
    // A server listening at the given URL leaves it given.
    assert_eq!(
        open("https://example.org/", listen, false).expect("same"),
        None
    );
    let err = open("http://127.0.0.1:41004/", listen, false).expect_err("still given");
    assert!(err.to_string().contains("--move"), "{err}");
}

/// One state, documents written into two output directories in turn (`publish --out OUT`, then
/// `serve`, which writes under the state folder, then `publish` again): each directory has
/// every document its Capability List names (before: the Resource List and closed Change Lists
/// recorded as written were not written again into the other directory).
#[test]
fn every_document_is_written_into_each_output_directory() {
    let dir = tempfile::tempdir().expect("dir");
    let work = tempfile::tempdir().expect("work");
    let state = work.path().join("state.sqlite");
    let (one, two) = (work.path().join("one"), work.path().join("two"));
    let d = dir.path();
    let base = "http://127.0.0.1:8080/";
    std::fs::write(d.join("a.txt"), "alpha").expect("write");
    let mut s = Source::open(config(d, &one, &state, base)).expect("open");
    publish_after(&mut s, || {});
    publish_after(&mut s, || {
        std::fs::write(d.join("b.txt"), "beta").expect("write")
    });
    publish_after(&mut s, || {
        std::fs::write(d.join("c.txt"), "gamma").expect("write")
    });
    drop(s);
    let (in_one, _) = reachable(&one, base);

    let mut s = Source::open(config(d, &two, &state, base)).expect("open");
    publish_after(&mut s, || {});
    drop(s);
    let (in_two, _) = reachable(&two, base);
    // Everything but the earlier snapshots' Resource Lists (which cannot be written again,
    // and leave the archive of this directory).
    let urls = |docs: &[(String, PathBuf)]| -> BTreeSet<String> {
        docs.iter().map(|(u, _)| u.clone()).collect()
    };
    let (u1, u2) = (urls(&in_one), urls(&in_two));
    let missing: Vec<&String> = u1
        .difference(&u2)
        .filter(|u| !u.contains("/resourcelists/"))
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
    assert_eq!(history(&two, base), history(&one, base));
    assert_eq!(history(&two, base).len(), 2);

    // Back to the first directory, after a change: complete there too.
    let mut s = Source::open(config(d, &one, &state, base)).expect("open");
    publish_after(&mut s, || {
        std::fs::remove_file(d.join("a.txt")).expect("rm")
    });
    drop(s);
    reachable(&one, base);
}

/// A state recorded before the origin of its base URL was (an earlier version): a base URL of
/// the form `serve` gives itself (`http://ADDRESS:PORT/`) is followed; any other is kept.
#[test]
fn an_older_state_follows_a_listen_address_only() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("a.txt"), "alpha").expect("write");
    for (old, followed) in [
        ("http://127.0.0.1:41001/", true),
        ("http://[::1]:41001/", true),
        ("http://localhost:41001/", false),
        ("http://127.0.0.1:41001/data/", false),
        ("https://127.0.0.1:41001/", false),
    ] {
        let work = tempfile::tempdir().expect("work");
        let (out, state) = (work.path().join("out"), work.path().join("state.sqlite"));
        let mut s = Source::open(config(dir.path(), &out, &state, old)).expect("open");
        s.scan().expect("scan");
        s.publish().expect("publish");
        drop(s);
        let db = rusqlite::Connection::open(&state).expect("sqlite");
        db.execute("DELETE FROM meta WHERE key = 'base_url_origin'", [])
            .expect("forget the origin");
        drop(db);
        let mut cfg = config(dir.path(), &out, &state, "http://127.0.0.1:41002/");
        cfg.base_origin = BaseOrigin::Listen;
        match Source::open(cfg) {
            Ok(s) => {
                assert!(followed, "{old} was followed");
                assert_eq!(s.moved().map(|m| m.from.as_str()), Some(old));
            }
            Err(e) => {
                assert!(!followed, "{old}: {e}");
                assert!(e.to_string().contains("--move"), "{e}");
            }
        }
    }
}

/// `publish --move` (and any publish) to a base URL a Destination would read two ways or could
/// not map: refused before anything moves, saying why; the state stays under its URL, and a
/// move to another host is a move like any other.
#[test]
fn a_move_to_a_hostile_base_url_is_refused_and_changes_nothing() {
    let long = format!("http://new.example/{}/", "n".repeat(100_000));
    let long_segment = format!("http://new.example/{}/", "n".repeat(256));
    let cases: Vec<(&str, &str)> = vec![
        ("http://new.example/a/../../etc/", "dot segment"),
        ("http://new.example/a/%2e%2E/b/", "dot segment"),
        ("http://new.example/a%2F..%2Fb/", "encoded /"),
        ("http://new.example/a%5cb/", "encoded /"),
        ("http://new.example/%00/", "NUL"),
        ("http://new.example/caf%E9/", "not UTF-8"),
        ("http://new.example//x/", "empty path segment"),
        ("http://new.example/.resourcesync/", ".resourcesync"),
        ("http://new.example/x/.ResourceSync/", ".resourcesync"),
        ("/etc/passwd", "absolute URI"),
        ("file:///etc/", "only http and https"),
        (&long, "longer than 1024 bytes"),
        (&long_segment, "longer than 255 bytes"),
        ("http:///etc/", "no host"),
        ("http://new.example/a\nb/", "control character"),
        ("http://new.example/a\tb/", "control character"),
        ("http://user:pw@new.example/", "user information"),
        ("http://new.example:99999/", "bad port"),
        ("http://[::1/", "IPv6"),
        (
            "http://new.example\\@evil.example/",
            "not allowed unencoded",
        ),
        ("http://new.example/a\"b/", "not allowed unencoded"),
        ("http://new.example/x?y=1", "query"),
    ];
    let dir = tempfile::tempdir().expect("dir");
    let work = tempfile::tempdir().expect("work");
    let (out, state) = (work.path().join("out"), work.path().join("state.sqlite"));
    let d = dir.path();
    std::fs::write(d.join("a.txt"), "alpha").expect("write");
    let old = "http://old.example/data/";
    publish_after(
        &mut Source::open(config(d, &out, &state, old)).expect("open"),
        || {},
    );
    let before = reachable(&out, old).0;
    for (base, why) in &cases {
        let mut cfg = config(d, &out, &state, base);
        cfg.move_base = true;
        let e = Source::open(cfg).expect_err(base).to_string();
        assert!(e.contains(why) && e.contains("--base-url"), "{why}: {e}");
        assert!(
            e.len() < 600,
            "the URL is cut short in the error: {} bytes",
            e.len()
        );
        // Refused the same way without --move (a first publish under it).
        let fresh = tempfile::tempdir().expect("fresh");
        let cfg = config(
            d,
            &fresh.path().join("out"),
            &fresh.path().join("s.sqlite"),
            base,
        );
        assert!(Source::open(cfg).is_err(), "{base}");
    }
    // Nothing moved: the state opens under its URL, its documents as they were.
    let s = Source::open(config(d, &out, &state, old)).expect("still under the old URL");
    assert!(s.moved().is_none());
    drop(s);
    assert_eq!(reachable(&out, old).0, before);
    // Another host is a base like any other.
    let mut cfg = config(d, &out, &state, "https://other.example:8443/x/");
    cfg.move_base = true;
    let s = Source::open(cfg).expect("a move to another host");
    assert_eq!(s.moved().map(|m| m.resources), Some(1));
}
