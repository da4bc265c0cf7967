//! The checks of what a store declares in its [`crate::Features`]: each passes trivially for a
//! store that does not declare the feature, and holds it to its word when it does. (Crash
//! safety, [`crate::Features::crash_safe`], needs a process killed mid-put: [`crate::conformance::crash`].)

use super::{get, keys, put};
use crate::conformance::{Outcome, ensure, ok};
use crate::features::At;
use crate::object::Store;
use crate::path::RelPath;

fn key(s: &str) -> std::result::Result<RelPath, String> {
    RelPath::parse(s).map_err(|e| format!("key {s:?}: {e}"))
}

/// A store that declares a local directory keeps each object as the file at its key under it.
pub(super) fn local_directory(s: &dyn Store) -> Outcome {
    let Some(dir) = s.features().local else {
        return Ok(());
    };
    ensure!(
        dir.is_dir(),
        "the declared local directory {dir:?} is not one"
    );
    let k = key("l/m.txt")?;
    put(s, &k, b"local body")?;
    let file = k.under(dir);
    let on_disk = std::fs::read(&file).map_err(|e| format!("reading {file:?}: {e}"))?;
    ensure!(
        on_disk == b"local body",
        "the file {file:?} under the declared local directory holds {on_disk:?}"
    );
    Ok(())
}

/// A store whose keys nest says which puts are blocked by what it holds; one with flat keys
/// never says so.
pub(super) fn hierarchy_blocks(s: &dyn Store) -> Outcome {
    let f = s.features();
    put(s, &key("h/a")?, b"file")?;
    let blocked = |k: &str| -> std::result::Result<bool, String> {
        ok(&format!("blocked {k}"), f.blocked(&key(k)?))
    };
    if f.hierarchy.is_none() {
        ensure!(!blocked("h/a/b")?, "flat keys, yet h/a/b is blocked by h/a");
        return Ok(());
    }
    ensure!(blocked("h/a/b")?, "h/a/b is not blocked by the object h/a");
    ensure!(blocked("h")?, "h is not blocked by the directory of h/a");
    ensure!(!blocked("h/a")?, "h/a is blocked by its own object");
    ensure!(!blocked("x/y")?, "x/y, where nothing is, is blocked");
    // What a caller skips its `head` on: nothing there means nothing there.
    let at = |k: &str| -> std::result::Result<Option<At>, String> {
        ok(&format!("at {k}"), f.at(&key(k)?))
    };
    ensure!(
        at("h/a")? == Some(At::Taken),
        "h/a holds an object, yet at() says {:?}",
        at("h/a")?
    );
    ensure!(
        at("x/y")? == Some(At::Free),
        "nothing is at x/y, yet at() says {:?}",
        at("x/y")?
    );
    Ok(())
}

/// A store that cleans after an interrupted run removes what uploads abandoned without their
/// destructors (as a killed process leaves them), and nothing placed.
pub(super) fn interrupted_cleaning(s: &dyn Store) -> Outcome {
    let Some(c) = s.features().interrupted else {
        return Ok(());
    };
    let kept = key("c/kept")?;
    put(s, &kept, b"kept")?;
    let left = key("c/left")?;
    let mut up = ok("begin", s.begin(&left, super::expect_of(b"left")))?;
    ok("write", up.write(b"le"))?;
    std::mem::forget(up);
    let mut up = ok("begin", s.begin_new(&left, super::expect_of(b"left")))?;
    ok("write", up.write(b"left"))?;
    std::mem::forget(ok("finish", up.finish())?);
    ok("clean_interrupted", c.clean_interrupted())?;
    ensure!(
        keys(s, None)? == ["c/kept"],
        "after cleaning: {:?}",
        keys(s, None)?
    );
    ensure!(get(s, &kept)? == b"kept", "cleaning changed a placed body");
    put(s, &left, b"left")?;
    ensure!(get(s, &left)? == b"left", "no put at a cleaned key");
    ok("clean_interrupted again", c.clean_interrupted())?;
    ensure!(
        keys(s, None)? == ["c/kept", "c/left"],
        "after cleaning again: {:?}",
        keys(s, None)?
    );
    Ok(())
}
