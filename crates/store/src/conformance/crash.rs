//! Crash safety of a put, for stores that claim it ([`crate::Features::crash_safe`]): a child process
//! puts a new body over an old one and is killed with `SIGKILL` at one step of the put; the
//! store, opened again, must hold the old body or the new one at the key, in full, and no other
//! key.
//!
//! The test of a backend re-executes its own test binary as the child:
//!
//! ```no_run
//! # use resourcesync_store::{conformance::crash, FsStore, RelPath};
//! # use std::process::Command;
//! # let dir = std::path::Path::new("/tmp/x");
//! // The child: a test that does nothing unless the parent set the variable.
//! if let Ok(d) = std::env::var("CRASH_CHILD_DIR") {
//!     let s = FsStore::open(d).expect("store");
//!     crash::child(&s, &crash::key()).expect("put");
//! }
//! // The parent, for each step of crash::STEPS: the old body put first, then
//! let mut cmd = Command::new(std::env::current_exe().expect("exe"));
//! cmd.args(["--exact", "crash_child", "--nocapture"]).env("CRASH_CHILD_DIR", dir);
//! crash::kill_at(&mut cmd, "half-written").expect("killed there");
//! let s = FsStore::open(dir).expect("store");
//! crash::check(&s).expect("old or new, never a part");
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::ops::ControlFlow;
use std::process::{Command, Stdio};

use super::store::{expect_of, get, put};
use super::{Outcome, ensure, ok};
use crate::object::Store;
use crate::path::RelPath;

/// The steps of a put at which the child stops, in order: after [`Store::begin`], half the body
/// written, all of it written, [`crate::Upload::finish`], the [`Store::sync`] of the body,
/// [`Store::place`], and the last [`Store::sync`]. `"done"` lets the child finish.
pub const STEPS: &[&str] = &[
    "begun",
    "half-written",
    "written",
    "finished",
    "synced-body",
    "placed",
    "synced",
];

/// What the child prints before it stops at a step.
const MARK: &str = "resourcesync-crash-step ";

/// The key the child puts.
pub fn key() -> RelPath {
    // Not reached: the key is valid.
    RelPath::parse("crash/dir/key.bin").unwrap_or_else(|_| unreachable!())
}

/// The body at the key before the child runs (put it with [`prepare`]).
pub fn old_body() -> Vec<u8> {
    vec![b'o'; 100_000]
}

/// The body the child puts: larger than any buffer, so that half of it reaches the backend.
pub fn new_body() -> Vec<u8> {
    (0..1_000_003u32).map(|i| (i % 251) as u8).collect()
}

/// Puts the old body at the key.
pub fn prepare(s: &dyn Store) -> Outcome {
    put(s, &key(), &old_body())
}

/// In the child: puts the new body over the old one, saying each step on standard output and
/// waiting there (reading standard input) until the parent kills it. A closed input lets it go
/// on.
pub fn child(s: &dyn Store, k: &RelPath) -> Outcome {
    put_pausing(s, k, false)
}

/// [`child`] for a key where nothing is yet ([`Store::begin_new`]; no [`prepare`]).
pub fn child_new(s: &dyn Store, k: &RelPath) -> Outcome {
    put_pausing(s, k, true)
}

fn put_pausing(s: &dyn Store, k: &RelPath, new_key: bool) -> Outcome {
    let pause = |step: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{MARK}{step}");
        let _ = out.flush();
        drop(out);
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    };
    let body = new_body();
    let up = if new_key {
        s.begin_new(k, expect_of(&body))
    } else {
        s.begin(k, expect_of(&body))
    };
    let mut up = ok("begin", up)?;
    pause("begun");
    let (a, b) = body.split_at(body.len() / 2);
    ok("write", up.write(a))?;
    pause("half-written");
    ok("write", up.write(b))?;
    pause("written");
    let f = ok("finish", up.finish())?;
    pause("finished");
    ok("sync", s.sync())?;
    pause("synced-body");
    let placed = s.place(vec![f]);
    for p in placed {
        ok("place", p)?;
    }
    pause("placed");
    ok("sync", s.sync())?;
    pause("synced");
    Ok(())
}

/// In the parent: runs the child `cmd` (stdin and stdout piped here) until it says it reached
/// `step`, then kills it with `SIGKILL` and waits for it; with `"done"`, lets it finish.
pub fn kill_at(cmd: &mut Command, step: &str) -> Outcome {
    let mut c = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning the child: {e}"))?;
    let out = c.stdout.take().ok_or("no stdout")?;
    let mut stdin = c.stdin.take();
    let mut seen = Vec::new();
    let mut reached = false;
    for line in BufReader::new(out).lines() {
        let line = line.map_err(|e| format!("reading the child: {e}"))?;
        // The test harness may have written on the same line before.
        let Some((_, at)) = line.split_once(MARK) else {
            continue;
        };
        seen.push(at.to_owned());
        if at == step {
            reached = true;
            break;
        }
        // On to the next step.
        if let Some(i) = stdin.as_mut() {
            i.write_all(b"go\n")
                .map_err(|e| format!("writing to the child: {e}"))?;
            i.flush()
                .map_err(|e| format!("writing to the child: {e}"))?;
        }
    }
    if reached {
        c.kill().map_err(|e| format!("killing the child: {e}"))?;
    }
    drop(stdin);
    let status = c
        .wait()
        .map_err(|e| format!("waiting for the child: {e}"))?;
    if step == "done" {
        ensure!(
            status.success(),
            "the child failed ({status}) after {seen:?}"
        );
        ensure!(seen.len() == STEPS.len(), "the child stopped at {seen:?}");
        return Ok(());
    }
    ensure!(
        reached,
        "the child never reached {step:?} (it said {seen:?}, {status})"
    );
    Ok(())
}

/// After the child: the key holds the old body or the new one, in full, and no other key is
/// listed. Which one it holds.
pub fn check(s: &dyn Store) -> std::result::Result<&'static str, String> {
    after_crash(s, true)
}

/// [`check`] after [`child_new`]: nothing at the key, or the new body in full (`"none"` or
/// `"new"`).
pub fn check_new(s: &dyn Store) -> std::result::Result<&'static str, String> {
    after_crash(s, false)
}

fn after_crash(s: &dyn Store, had_old: bool) -> std::result::Result<&'static str, String> {
    let k = key();
    if !had_old && ok("head", s.head(&k))?.is_none() {
        let mut listed = 0;
        ok(
            "list",
            s.list(None, &mut |_| {
                listed += 1;
                Ok(ControlFlow::Continue(()))
            }),
        )?;
        ensure!(
            listed == 0,
            "{listed} keys after the crash, none at the key"
        );
        put(s, &k, b"after")?;
        return Ok("none");
    }
    let mut body = Vec::new();
    ok("get", s.get(&k))?
        .read_to_end(&mut body)
        .map_err(|e| format!("reading: {e}"))?;
    let which = if had_old && body == old_body() {
        "old"
    } else if body == new_body() {
        "new"
    } else {
        return Err(format!(
            "a body of {} bytes, neither old nor new",
            body.len()
        ));
    };
    let mut listed = Vec::new();
    ok(
        "list",
        s.list(None, &mut |i| {
            listed.push(i.map(|(k, _)| k.as_str().to_owned()));
            Ok(ControlFlow::Continue(()))
        }),
    )?;
    let listed: Vec<String> = listed
        .into_iter()
        .collect::<crate::Result<_>>()
        .map_err(|e| format!("list: {e}"))?;
    ensure!(listed == [k.as_str()], "keys after the crash: {listed:?}");
    // The store still takes puts.
    put(s, &k, b"after")?;
    ensure!(get(s, &k)? == b"after", "a put after the crash");
    Ok(which)
}
