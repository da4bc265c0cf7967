//! The conformance suite of the [`DocSink`] port, for implementers: the checks every sink must
//! pass, each on a new, empty sink. Implement [`Harness`] (make a sink; read back a key's
//! bytes by the backend's own means) and call [`run`] from a test; it returns every failed
//! check by name.
//!
//! What a sink must do: put whole and replace, say whether a key exists, list the keys under a
//! prefix in byte order, delete one and a folder, and show nothing of a document before its
//! commit (a writer dropped uncommitted leaves nothing).

use std::io::Write;

use resourcesync_model::path::RelPath;

use super::DocSink;

/// The outcome of one check: what went wrong, if anything.
pub type Outcome = std::result::Result<(), String>;

/// A named check of a new, empty sink.
pub type Check = (&'static str, fn(&dyn DocSink, &dyn Harness) -> Outcome);

/// What the suite needs of an implementation under test.
pub trait Harness {
    /// A new, empty sink.
    fn sink(&mut self) -> Box<dyn DocSink>;
    /// The bytes at `key` of the sink made last, read by the backend's own means (a file, an
    /// object), or `None`.
    fn read(&self, key: &str) -> Option<Vec<u8>>;
}

/// Every check, by name.
pub const CHECKS: &[Check] = &[
    ("put_and_replace", put_and_replace),
    ("exists", exists),
    ("list_in_key_order_under_a_prefix", list_in_key_order),
    ("nothing_seen_before_commit", nothing_seen_before_commit),
    ("delete_and_delete_prefix", delete_and_delete_prefix),
];

/// Runs every check, each on a new, empty sink of `h`; every failure, named, in one error.
pub fn run(h: &mut dyn Harness) -> Outcome {
    let mut failed = Vec::new();
    for (name, check) in CHECKS {
        let sink = h.sink();
        if let Err(e) = check(&*sink, &*h) {
            failed.push(format!("{name}: {e}"));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// `Err(message)` unless `cond`.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

fn ok<T>(what: &str, r: crate::Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

fn key(k: &str) -> std::result::Result<RelPath, String> {
    RelPath::parse(k).map_err(|e| format!("key {k:?}: {e}"))
}

/// Four documents, one of them put twice.
fn put_some(sink: &dyn DocSink) -> Outcome {
    for (k, b) in [
        ("resourcesync/b.xml", &b"b"[..]),
        ("resourcesync/a/1.xml", b"one"),
        ("resourcesync/a/2.xml", b"two"),
        (".well-known/resourcesync", b"sd"),
        ("resourcesync/b.xml", b"b again"),
    ] {
        ok(&format!("put {k}"), sink.put(&key(k)?, b))?;
    }
    Ok(())
}

fn put_and_replace(sink: &dyn DocSink, h: &dyn Harness) -> Outcome {
    put_some(sink)?;
    let got = h.read("resourcesync/b.xml");
    ensure!(
        got.as_deref() == Some(&b"b again"[..]),
        "resourcesync/b.xml put twice holds {got:?}"
    );
    let got = h.read("resourcesync/a/1.xml");
    ensure!(
        got.as_deref() == Some(&b"one"[..]),
        "resourcesync/a/1.xml holds {got:?}"
    );
    Ok(())
}

fn exists(sink: &dyn DocSink, _: &dyn Harness) -> Outcome {
    put_some(sink)?;
    ensure!(
        ok("exists", sink.exists(&key("resourcesync/a/1.xml")?))?,
        "resourcesync/a/1.xml, put, does not exist"
    );
    ensure!(
        !ok("exists", sink.exists(&key("resourcesync/a/3.xml")?))?,
        "resourcesync/a/3.xml, never put, exists"
    );
    Ok(())
}

fn list_in_key_order(sink: &dyn DocSink, _: &dyn Harness) -> Outcome {
    put_some(sink)?;
    let all = ok("list", sink.list("resourcesync/"))?;
    ensure!(
        all == [
            "resourcesync/a/1.xml",
            "resourcesync/a/2.xml",
            "resourcesync/b.xml"
        ],
        "list resourcesync/: {all:?}"
    );
    let a = ok("list", sink.list("resourcesync/a/"))?;
    ensure!(
        a == ["resourcesync/a/1.xml", "resourcesync/a/2.xml"],
        "list resourcesync/a/: {a:?}"
    );
    Ok(())
}

fn nothing_seen_before_commit(sink: &dyn DocSink, h: &dyn Harness) -> Outcome {
    let k = key("resourcesync/c.xml")?;
    let mut w = ok("create", sink.create(&k))?;
    w.write_all(b"half").map_err(|e| format!("write: {e}"))?;
    drop(w);
    ensure!(
        !ok("exists", sink.exists(&k))?,
        "a document dropped uncommitted is seen"
    );
    let mut w = ok("create", sink.create(&k))?;
    w.write_all(b"whole").map_err(|e| format!("write: {e}"))?;
    ensure!(
        !ok("exists", sink.exists(&k))?,
        "a document is seen before its commit"
    );
    ok("commit", w.commit())?;
    let got = h.read(k.as_str());
    ensure!(
        got.as_deref() == Some(&b"whole"[..]),
        "committed, {k} holds {got:?}"
    );
    Ok(())
}

fn delete_and_delete_prefix(sink: &dyn DocSink, _: &dyn Harness) -> Outcome {
    put_some(sink)?;
    ok("put", sink.put(&key("resourcesync/c.xml")?, b"c"))?;
    ok("delete", sink.delete(&key("resourcesync/b.xml")?))?;
    ok(
        "delete of nothing",
        sink.delete(&key("resourcesync/never.xml")?),
    )?;
    ok("delete folder", sink.delete_prefix("resourcesync/a/"))?;
    let left = ok("list", sink.list("resourcesync/"))?;
    ensure!(
        left == ["resourcesync/c.xml"],
        "after deletes, resourcesync/ lists {left:?}"
    );
    ensure!(
        ok("exists", sink.exists(&key(".well-known/resourcesync")?))?,
        "a delete under resourcesync/ removed .well-known/resourcesync"
    );
    Ok(())
}
