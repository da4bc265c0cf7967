//! The checks of a store's kept version bodies ([`crate::Features::versions`],
//! [`crate::versions`]): each passes trivially for a store that does not declare them.

use std::io::Read;

use resourcesync_model::{HashAlg, MultiHasher};

use super::{get, keys, put};
use crate::conformance::{Outcome, ensure, ok};
use crate::object::Store;
use crate::path::RelPath;
use crate::versions::{VersionBodies, version_digest};

fn key(s: &str) -> std::result::Result<RelPath, String> {
    RelPath::parse(s).map_err(|e| format!("key {s:?}: {e}"))
}

/// The version digest of `body`.
fn digest(body: &[u8]) -> std::result::Result<String, String> {
    let mut h = MultiHasher::new(&[HashAlg::Sha256]);
    h.update(body);
    version_digest(&h.finish()).ok_or_else(|| "no sha-256".into())
}

fn read(v: &dyn VersionBodies, d: &str) -> std::result::Result<Option<Vec<u8>>, String> {
    let Some(mut r) = ok("open_version", v.open_version(d))? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    r.read_to_end(&mut out)
        .map_err(|e| format!("reading the version {d}: {e}"))?;
    Ok(Some(out))
}

/// A body kept from the copy at a key, once per digest whoever lists it; unchanged when the
/// copy is replaced or deleted; never listed among the copies; removed on demand.
pub(super) fn versions_kept_by_digest(s: &dyn Store) -> Outcome {
    let f = s.features();
    let Some(v) = f.versions else {
        return Ok(());
    };
    let (a, b) = (key("v/a.txt")?, key("v/b.txt")?);
    let (one, two) = (&b"first body"[..], &b"second, longer body"[..]);
    let (d1, d2) = (digest(one)?, digest(two)?);
    ensure!(read(v, &d1)?.is_none(), "a body kept before any was");
    put(s, &a, one)?;
    ensure!(ok("keep", v.keep(&a, &d1))?, "the first keep added nothing");
    ensure!(!ok("keep", v.keep(&a, &d1))?, "the same body kept twice");
    // Another copy of the same body: stored once.
    put(s, &b, one)?;
    ensure!(
        !ok("keep", v.keep(&b, &d1))?,
        "the same body of another key kept again"
    );
    ensure!(read(v, &d1)?.as_deref() == Some(one), "the kept body");
    ensure!(
        ok("version_length", v.version_length(&d1))? == Some(one.len() as u64),
        "the kept length"
    );
    // The copy replaced, then deleted: the kept body is as it was.
    put(s, &a, two)?;
    ensure!(ok("keep", v.keep(&a, &d2))?, "the second body not added");
    ok("delete", s.delete(&a))?;
    ensure!(
        read(v, &d1)?.as_deref() == Some(one),
        "a kept body changed with its copy: {:?}",
        read(v, &d1)?
    );
    ensure!(read(v, &d2)?.as_deref() == Some(two), "the second body");
    ensure!(get(s, &b)? == one, "the other copy");
    ensure!(
        keys(s, None)? == ["v/b.txt"],
        "kept bodies listed as copies: {:?}",
        keys(s, None)?
    );
    ensure!(ok("remove", v.remove_version(&d1))?, "nothing removed");
    ensure!(!ok("remove", v.remove_version(&d1))?, "removed twice");
    ensure!(read(v, &d1)?.is_none(), "a removed body opens");
    ensure!(get(s, &b)? == one, "a copy removed with its kept body");
    Ok(())
}

/// Only a sha-256 names a kept body: anything else (another algorithm, a path) is refused,
/// and nothing is kept from a key without an object.
pub(super) fn versions_named_by_sha256_only(s: &dyn Store) -> Outcome {
    let f = s.features();
    let Some(v) = f.versions else {
        return Ok(());
    };
    let k = key("n/a.txt")?;
    put(s, &k, b"body")?;
    for bad in [
        "md5:841a2d689ad86bd1611447453c22c6fc",
        "sha-256:../../../../../tmp/x",
        "sha-256:",
    ] {
        ensure!(v.keep(&k, bad).is_err(), "kept as {bad:?}");
        ensure!(v.open_version(bad).is_err(), "opened {bad:?}");
    }
    ensure!(
        v.keep(&key("n/none.txt")?, &digest(b"body")?).is_err(),
        "kept from a key without an object"
    );
    Ok(())
}

/// The kept bodies are listed by digest, in order, a page after a digest at a time; a removed
/// one is no longer listed; the copies never are.
pub(super) fn versions_listed_in_order(s: &dyn Store) -> Outcome {
    let f = s.features();
    let Some(v) = f.versions else {
        return Ok(());
    };
    let (a, b) = (key("l/a.txt")?, key("l/b.txt")?);
    let (one, two) = (&b"listed one"[..], &b"listed two"[..]);
    let (d1, d2) = (digest(one)?, digest(two)?);
    put(s, &a, one)?;
    put(s, &b, two)?;
    ok("keep", v.keep(&a, &d1))?;
    ok("keep", v.keep(&b, &d2))?;
    // Every body, one at a time (other checks may have kept theirs).
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = ok("versions_after", v.versions_after(after.as_deref(), 1))?;
        ensure!(page.len() <= 1, "a page of {} for a limit of 1", page.len());
        let Some(d) = page.into_iter().next() else {
            break;
        };
        ensure!(all.len() < 10_000, "the listing does not end");
        after = Some(d.clone());
        all.push(d);
    }
    ensure!(all.windows(2).all(|w| w[0] < w[1]), "not in order: {all:?}");
    ensure!(
        all.contains(&d1) && all.contains(&d2),
        "{d1}, {d2} not in {all:?}"
    );
    let whole = ok("versions_after", v.versions_after(None, 10_000))?;
    ensure!(whole == all, "one page {whole:?} is not the pages {all:?}");
    ok("remove", v.remove_version(&d1))?;
    let after_removal = ok("versions_after", v.versions_after(None, 10_000))?;
    ensure!(
        !after_removal.contains(&d1) && after_removal.contains(&d2),
        "after removing {d1}: {after_removal:?}"
    );
    ok("remove", v.remove_version(&d2))?;
    Ok(())
}
