//! The modes of what the directory store and the SQLite state write (docs/operations.md, "File
//! modes"): a copy has the mode a new file gets (`0666 & ~umask`) whether it was new (an
//! unnamed `O_TMPFILE` file, or a named temporary file) or replaced an older one; the state
//! and its write-ahead log are `0600` in a `0700` folder. The umask is set in this process only
//! around the writes (tests that set it take turns). An S3 bucket has no modes.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Mutex;

use resourcesync_store::{Expect, FsStore, RelPath, SqliteState, Store};

static UMASK: Mutex<()> = Mutex::new(());

fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
    let _g = UMASK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
    let r = f();
    rustix::process::umask(old);
    r
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn put(s: &FsStore, key: &str, body: &[u8], new: bool) {
    let key = RelPath::parse(key).expect("key");
    let expect = Expect {
        max_bytes: 1024,
        ..Expect::default()
    };
    let mut up = if new {
        s.begin_new(&key, expect)
    } else {
        s.begin(&key, expect)
    }
    .expect("begin");
    up.write(body).expect("write");
    let done = up.finish().expect("finish");
    for r in s.publish(vec![done]).expect("publish") {
        r.expect("placed");
    }
}

#[test]
fn new_and_replaced_copies_have_the_mode_of_a_new_file() {
    for unnamed in [true, false] {
        for (mask, file, dir) in [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)] {
            let d = tempfile::tempdir().expect("tmp");
            let root = d.path().join("dest");
            with_umask(mask, || {
                let s = FsStore::open(&root)
                    .expect("store")
                    .with_unnamed_temps(unnamed);
                put(&s, "a/b.txt", b"new", true);
                put(&s, "c.txt", b"new, named", false);
                put(&s, "a/b.txt", b"replaced", false);
                put(&s, "c.txt", b"replaced, expected new", true);
            });
            let what = format!("umask {mask:04o}, unnamed files {unnamed}");
            assert_eq!(std::fs::read(root.join("a/b.txt")).expect("b"), b"replaced");
            for f in ["a/b.txt", "c.txt"] {
                assert_eq!(mode(&root.join(f)), file, "{what}: {f}");
            }
            assert_eq!(mode(&root), dir, "{what}: the destination");
            assert_eq!(mode(&root.join("a")), dir, "{what}: a");
            for own in [".resourcesync", ".resourcesync/tmp"] {
                assert_eq!(mode(&root.join(own)), 0o700, "{what}: {own}");
            }
        }
    }
}

#[test]
fn the_state_and_its_write_ahead_log_are_owner_only() {
    let d = tempfile::tempdir().expect("tmp");
    let db = d.path().join("made/state.sqlite");
    let state = with_umask(0o022, || SqliteState::open(&db)).expect("state");
    assert_eq!(mode(&db), 0o600);
    assert_eq!(mode(&d.path().join("made")), 0o700);
    // SQLite makes its write-ahead log with the database's mode.
    let wal = d.path().join("made/state.sqlite-wal");
    assert!(wal.exists(), "no write-ahead log while the state is open");
    assert_eq!(mode(&wal), 0o600);
    drop(state);
}
