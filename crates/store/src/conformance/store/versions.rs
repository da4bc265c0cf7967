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
