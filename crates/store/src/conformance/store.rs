//! The [`Store`] contract (see [`crate::object`]), checked on a new, empty store per check.

use std::any::Any;
use std::io::Read;
use std::ops::ControlFlow;
use std::time::{Duration, SystemTime};

use resourcesync_model::{HashAlg, Hashes, MultiHasher};

use super::{Check, Outcome, ensure, ok, run_checks};
use crate::object::{Expect, Finished, ObjectMeta, Store, Upload, UploadSink};
use crate::path::RelPath;

mod features;
mod versions;

/// Every check, by name.
pub const CHECKS: &[Check<dyn Store>] = &[
    ("put_get_head", put_get_head),
    ("missing_key", missing_key),
    ("list_in_key_order", list_in_key_order),
    ("delete_removes", delete_removes),
    ("refused_body_never_visible", refused_body_never_visible),
    ("unfinished_upload_invisible", unfinished_upload_invisible),
    ("overwrite_is_atomic", overwrite_is_atomic),
    ("keys_that_escape_are_refused", keys_that_escape_are_refused),
    ("modification_time", modification_time),
    ("batch_with_a_foreign_upload", batch_with_a_foreign_upload),
    ("concurrent_puts", concurrent_puts),
    ("local_directory", features::local_directory),
    ("hierarchy_blocks", features::hierarchy_blocks),
    ("interrupted_cleaning", features::interrupted_cleaning),
    ("versions_kept_by_digest", versions::versions_kept_by_digest),
    (
        "versions_listed_in_order",
        versions::versions_listed_in_order,
    ),
    (
        "versions_named_by_sha256_only",
        versions::versions_named_by_sha256_only,
    ),
];

/// Runs every check, each on a new, empty store from `make`.
pub fn run(mut make: impl FnMut() -> Box<dyn Store>) -> Outcome {
    run_checks(CHECKS, &mut make)
}

/// Every check of [`CHECKS`] from a task on a Tokio runtime's worker (multi-threaded, then
/// current-thread), its calls through [`crate::blocking::call`], on a new store from `make`.
pub fn run_on_workers(mut make: impl FnMut() -> Box<dyn Store>) -> Outcome {
    super::worker::run_checks_on_workers(CHECKS, &mut make)
}

fn key(s: &str) -> std::result::Result<RelPath, String> {
    RelPath::parse(s).map_err(|e| format!("key {s:?}: {e}"))
}

/// What `body` must be: its length and its md5 and sha-256 digests.
pub fn expect_of(body: &[u8]) -> Expect {
    let mut h = MultiHasher::new(&[HashAlg::Md5, HashAlg::Sha256]);
    h.update(body);
    Expect {
        length: Some(body.len() as u64),
        hashes: h.finish(),
        max_bytes: 1 << 30,
        modified: None,
        uri: None,
        sha256: false,
    }
}

/// Puts `body` at `k`, verified against its own length and digests.
pub fn put(s: &dyn Store, k: &RelPath, body: &[u8]) -> Outcome {
    ok(
        &format!("put {k}"),
        s.put(k, expect_of(body), &mut &body[..]),
    )
    .map(drop)
}

/// The body at `k`.
pub fn get(s: &dyn Store, k: &RelPath) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::new();
    ok(&format!("get {k}"), s.get(k))?
        .read_to_end(&mut out)
        .map_err(|e| format!("reading {k}: {e}"))?;
    Ok(out)
}

/// Every key, in the order listed (after `after`).
pub fn keys(s: &dyn Store, after: Option<&RelPath>) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    ok(
        "list",
        s.list(after, &mut |item| {
            let (k, _) = item?;
            out.push(k.as_str().to_owned());
            Ok(ControlFlow::Continue(()))
        }),
    )?;
    Ok(out)
}

/// Every key [`Store::list_keys`] gives, in its order (after `after`).
fn key_names(s: &dyn Store, after: Option<&RelPath>) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    ok(
        "list_keys",
        s.list_keys(after, &mut |item| {
            out.push(item?.as_str().to_owned());
            Ok(ControlFlow::Continue(()))
        }),
    )?;
    Ok(out)
}

fn put_get_head(s: &dyn Store) -> Outcome {
    let k = key("a/b c/d.txt")?;
    let placed = ok("put", s.put(&k, expect_of(b"hello"), &mut &b"hello"[..]))?;
    ensure!(!placed.replaced, "a new key says it replaced something");
    ensure!(
        placed.committed.length == 5,
        "length {}",
        placed.committed.length
    );
    ensure!(get(s, &k)? == b"hello", "get gives another body");
    let m = ok("head", s.head(&k))?.ok_or("head finds nothing")?;
    ensure!(m.length == 5 && m.regular, "head says {m:?}");
    let (n, h) = ok("hash", s.hash(&k, &[HashAlg::Sha256]))?;
    let want = expect_of(b"hello").hashes;
    ensure!(
        n == 5 && h.value_of(&HashAlg::Sha256) == want.value_of(&HashAlg::Sha256),
        "hash says {n} {h}"
    );
    ensure!(
        keys(s, None)? == ["a/b c/d.txt"],
        "list: {:?}",
        keys(s, None)?
    );
    Ok(())
}

fn missing_key(s: &dyn Store) -> Outcome {
    let k = key("nothing/here")?;
    ensure!(
        ok("head", s.head(&k))?.is_none(),
        "head finds a missing key"
    );
    ensure!(s.get(&k).is_err(), "get opens a missing key");
    ensure!(!ok("delete", s.delete(&k))?, "delete removes a missing key");
    ensure!(keys(s, None)?.is_empty(), "an empty store lists keys");
    Ok(())
}

fn list_in_key_order(s: &dyn Store) -> Outcome {
    // '/' (0x2f) sorts after '-' and '.': a walk that lists a directory before its siblings
    // gets this wrong.
    let names = [
        "b", "a/c", "a-c", "a/b/d", "a.x", "z", "a/b.c", "a/b/e/f", "é",
    ];
    for n in names {
        put(s, &key(n)?, n.as_bytes())?;
    }
    let mut want: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    want.sort();
    let got = keys(s, None)?;
    ensure!(got == want, "listed {got:?}, want {want:?}");
    // The names alone (Store::list_keys): the same keys in the same order.
    let named = key_names(s, None)?;
    ensure!(named == want, "list_keys gave {named:?}, want {want:?}");
    for (i, a) in want.iter().enumerate() {
        let rest = keys(s, Some(&key(a)?))?;
        ensure!(rest == want[i + 1..], "after {a:?}: {rest:?}");
        let rest = key_names(s, Some(&key(a)?))?;
        ensure!(rest == want[i + 1..], "list_keys after {a:?}: {rest:?}");
    }
    // A key that is not there, and one inside a "directory".
    let rest = keys(s, Some(&key("a/b")?))?;
    ensure!(rest == want[2..], "after \"a/b\": {rest:?}");
    // Each listing asked to stop at its second key.
    let n = std::cell::Cell::new(0);
    let second = || {
        n.set(n.get() + 1);
        Ok(if n.get() == 2 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        })
    };
    ok("list with a stop", s.list(None, &mut |_| second()))?;
    ensure!(
        n.get() == 2,
        "the listing went on after a stop ({} keys)",
        n.get()
    );
    n.set(0);
    ok(
        "list_keys with a stop",
        s.list_keys(None, &mut |_| second()),
    )?;
    ensure!(
        n.get() == 2,
        "list_keys went on after a stop ({} keys)",
        n.get()
    );
    Ok(())
}

fn delete_removes(s: &dyn Store) -> Outcome {
    let k = key("d/e/f")?;
    put(s, &k, b"x")?;
    put(s, &key("d/g")?, b"y")?;
    ensure!(ok("delete", s.delete(&k))?, "delete says nothing was there");
    ensure!(
        ok("head", s.head(&k))?.is_none(),
        "still there after delete"
    );
    ensure!(!ok("delete again", s.delete(&k))?, "deleted twice");
    ensure!(keys(s, None)? == ["d/g"], "list: {:?}", keys(s, None)?);
    put(s, &k, b"z")?;
    ensure!(get(s, &k)? == b"z", "a put after a delete");
    Ok(())
}

fn refused_body_never_visible(s: &dyn Store) -> Outcome {
    let k = key("r/x")?;
    // A wrong digest.
    let mut e = expect_of(b"right");
    e.hashes = Hashes::parse("md5:00000000000000000000000000000000").0;
    let mut up = ok("begin", s.begin(&k, e))?;
    ok("write", up.write(b"right"))?;
    match up.finish() {
        Err(e) if e.is_verification() => {}
        other => return Err(format!("a wrong digest was accepted: {other:?}")),
    }
    // A short body.
    let mut e = expect_of(b"right");
    e.length = Some(10);
    let mut up = ok("begin", s.begin_new(&k, e))?;
    ok("write", up.write(b"right"))?;
    ensure!(up.finish().is_err(), "a short body was accepted");
    // Too long: refused while writing.
    let mut up = ok("begin", s.begin(&k, expect_of(b"abc")))?;
    ensure!(
        up.write(b"abcd").is_err(),
        "a body past its length was written"
    );
    drop(up);
    ensure!(
        ok("head", s.head(&k))?.is_none(),
        "a refused body is visible"
    );
    ensure!(keys(s, None)?.is_empty(), "list: {:?}", keys(s, None)?);
    // Over an old body: the old one stays.
    put(s, &k, b"old")?;
    let mut e = expect_of(b"new");
    e.hashes = Hashes::parse(&format!("sha-256:{}", "0".repeat(64))).0;
    let mut up = ok("begin", s.begin(&k, e))?;
    ok("write", up.write(b"new"))?;
    ensure!(up.finish().is_err(), "a wrong sha-256 was accepted");
    ensure!(get(s, &k)? == b"old", "a refused body replaced the old one");
    Ok(())
}

fn unfinished_upload_invisible(s: &dyn Store) -> Outcome {
    let k = key("u/v")?;
    let mut up = ok("begin", s.begin_new(&k, expect_of(b"body")))?;
    ok("write", up.write(b"bo"))?;
    ensure!(ok("head", s.head(&k))?.is_none(), "visible while written");
    ok("write", up.write(b"dy"))?;
    let f = ok("finish", up.finish())?;
    ensure!(ok("head", s.head(&k))?.is_none(), "visible once finished");
    ensure!(keys(s, None)?.is_empty(), "listed before placed");
    drop(f);
    ensure!(ok("head", s.head(&k))?.is_none(), "visible once dropped");
    ensure!(keys(s, None)?.is_empty(), "listed once dropped");
    Ok(())
}

fn overwrite_is_atomic(s: &dyn Store) -> Outcome {
    let k = key("o/p")?;
    put(s, &k, b"old body")?;
    let new = vec![b'n'; 100_000];
    let mut up = ok("begin", s.begin(&k, expect_of(&new)))?;
    for c in new.chunks(7_000) {
        ok("write", up.write(c))?;
        ensure!(
            get(s, &k)? == b"old body",
            "the old body changed while writing"
        );
    }
    let f = ok("finish", up.finish())?;
    ensure!(
        get(s, &k)? == b"old body",
        "the old body changed once finished"
    );
    let out = ok("publish", s.publish(vec![f]))?;
    let placed = out.into_iter().next().ok_or("no outcome")?;
    let placed = ok("place", placed)?;
    ensure!(placed.replaced, "an overwrite says nothing was replaced");
    ensure!(get(s, &k)? == new, "the new body is not there");
    let m = ok("head", s.head(&k))?.ok_or("gone")?;
    ensure!(m.length == 100_000, "head says {m:?}");
    Ok(())
}

fn keys_that_escape_are_refused(s: &dyn Store) -> Outcome {
    for bad in [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a/./b",
        "a//b",
        "a/",
        "a\\..\\b",
        "a\0b",
        ".resourcesync/state.sqlite",
        ".ResourceSync/tmp/x",
    ] {
        ensure!(RelPath::parse(bad).is_err(), "key {bad:?} accepted");
    }
    // Odd but valid keys round-trip.
    let odd = [
        "sp ace/ü.txt",
        "%2e%2e/x",
        ".../x",
        ".hidden",
        "x/.resourcesync",
    ];
    for o in odd {
        put(s, &key(o)?, o.as_bytes())?;
    }
    for o in odd {
        ensure!(
            get(s, &key(o)?)? == o.as_bytes(),
            "{o:?} does not round-trip"
        );
    }
    let mut want: Vec<&str> = odd.to_vec();
    want.sort();
    ensure!(keys(s, None)? == want, "list: {:?}", keys(s, None)?);
    Ok(())
}

fn modification_time(s: &dyn Store) -> Outcome {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let k = key("m/t")?;
    let mut e = expect_of(b"t");
    e.modified = Some(t);
    ok("put", s.put(&k, e, &mut &b"t"[..]))?;
    let m = ok("head", s.head(&k))?.ok_or("gone")?;
    ensure!(
        m.modified.is_none_or(|m| m == t),
        "the time given at put is {:?}",
        m.modified
    );
    let t2 = t + Duration::from_secs(86_400);
    if ok("set_modified", s.set_modified(&k, t2))? {
        let m = ok("head", s.head(&k))?.ok_or("gone")?;
        ensure!(m.modified == Some(t2), "set_modified gave {:?}", m.modified);
    }
    ensure!(
        s.set_modified(&key("m/none")?, t).is_err(),
        "set_modified of nothing"
    );
    Ok(())
}

/// The body of an upload begun by no store.
#[derive(Debug)]
struct Foreign;

impl UploadSink for Foreign {
    fn write_all(&mut self, _: &[u8]) -> crate::Result<()> {
        Ok(())
    }
    fn seal(self: Box<Self>, _: Option<SystemTime>) -> crate::Result<Box<dyn Any + Send>> {
        Ok(Box::new(0u8))
    }
}

fn batch_with_a_foreign_upload(s: &dyn Store) -> Outcome {
    let mut batch: Vec<Finished> = Vec::new();
    for (i, n) in ["b/1", "b/2", "b/3"].iter().enumerate() {
        let k = key(n)?;
        if i == 1 {
            let mut up = Upload::new(k, expect_of(b"f"), Box::new(Foreign));
            ok("write", up.write(b"f"))?;
            // Verified against what was counted, not what the sink kept.
            batch.push(ok("finish", up.finish())?);
            continue;
        }
        let mut up = ok("begin", s.begin(&k, expect_of(n.as_bytes())))?;
        ok("write", up.write(n.as_bytes()))?;
        batch.push(ok("finish", up.finish())?);
    }
    let out = ok("publish", s.publish(batch))?;
    ensure!(out.len() == 3, "{} outcomes for 3 uploads", out.len());
    ensure!(out[0].is_ok() && out[2].is_ok(), "{out:?}");
    ensure!(out[1].is_err(), "an upload of no store was placed");
    ensure!(
        keys(s, None)? == ["b/1", "b/3"],
        "list: {:?}",
        keys(s, None)?
    );
    Ok(())
}

fn concurrent_puts(s: &dyn Store) -> Outcome {
    let outcomes: Vec<Outcome> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                sc.spawn(move || -> Outcome {
                    for i in 0..25 {
                        let n = format!("c/{}/{i:02}", i % 3);
                        put(s, &key(&n)?, format!("{t}").as_bytes())?;
                        let m: Option<ObjectMeta> = ok("head", s.head(&key(&n)?))?;
                        ensure!(m.is_some_and(|m| m.length == 1), "{n} not there");
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    });
    for o in outcomes {
        o?;
    }
    let listed = keys(s, None)?;
    ensure!(listed.len() == 25, "{} keys listed", listed.len());
    for k in &listed {
        let b = get(s, &key(k)?)?;
        ensure!(b.len() == 1 && (b'0'..=b'3').contains(&b[0]), "{k}: {b:?}");
    }
    Ok(())
}
