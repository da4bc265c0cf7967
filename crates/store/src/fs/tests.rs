//! Unit tests of `fs`.

use super::*;
use resourcesync_model::Hashes;

fn expect_abc(length: Option<u64>, hash: &str) -> Expect {
    Expect {
        length,
        hashes: Hashes::parse(hash).0,
        max_bytes: 1 << 20,
        modified: None,
        uri: None,
        sha256: false,
    }
}

#[test]
fn a_copy_gets_its_modification_time_and_set_modified_changes_it() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("store");
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_357_135_200_250);
    let mut e = expect_abc(Some(3), "");
    e.modified = Some(t);
    let mut tmp = s.create_temp(e).expect("temp");
    tmp.write(b"abc").expect("write");
    let rel = RelPath::parse("a/b.txt").expect("rel");
    s.commit(tmp, &rel).expect("commit");
    let m = s.stat(&rel).expect("stat").expect("there");
    assert_eq!(m.modified, Some(t));
    let t2 = t + std::time::Duration::from_secs(60);
    s.set_modified(&rel, t2).expect("set");
    assert_eq!(
        s.stat(&rel).expect("stat").expect("there").modified,
        Some(t2)
    );
    // Never through a symbolic link.
    std::os::unix::fs::symlink(d.path().join("a/b.txt"), d.path().join("a/l.txt")).expect("link");
    let l = RelPath::parse("a/l.txt").expect("rel");
    assert!(s.set_modified(&l, t).is_err());
}

#[test]
fn commit_verifies_and_renames() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    let mut t = s
        .create_temp(expect_abc(
            Some(3),
            "md5:900150983cd24fb0d6963f7d28e17f72 \
             sha-1:a9993e364706816aba3e25717850c26c9cd0d89d",
        ))
        .expect("temp");
    t.write(b"abc").expect("write");
    let rel = RelPath::parse("x/y/z.txt").expect("rel");
    let c = s.commit(t, &rel).expect("commit");
    assert_eq!(c.length, 3);
    assert_eq!(fs::read(d.path().join("x/y/z.txt")).expect("read"), b"abc");
    assert_eq!(s.clean_tmp().expect("clean"), 0);
    assert!(s.stat(&rel).expect("stat").is_some());
    let mut seen = Vec::new();
    s.list(&mut |r| {
        seen.push(r?.0.to_string());
        Ok(())
    })
    .expect("list");
    assert_eq!(seen, ["x/y/z.txt"]);
    assert!(s.remove(&rel).expect("remove"));
    assert!(!d.path().join("x").exists(), "empty parents removed");
}

#[test]
fn wrong_digest_or_length_is_rejected_and_nothing_is_left() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    let rel = RelPath::parse("a.txt").expect("rel");
    let mut t = s
        .create_temp(expect_abc(None, "md5:00000000000000000000000000000000"))
        .expect("temp");
    t.write(b"abc").expect("write");
    let e = s.commit(t, &rel).expect_err("digest");
    assert!(matches!(e, Error::DigestMismatch { .. }), "{e}");
    let mut t = s.create_temp(expect_abc(Some(2), "")).expect("temp");
    let e = t.write(b"abc").expect_err("too long");
    assert!(matches!(e, Error::TooLong { limit: 2, .. }), "{e}");
    drop(t);
    let mut t = s.create_temp(expect_abc(Some(4), "")).expect("temp");
    t.write(b"abc").expect("write");
    let e = s.commit(t, &rel).expect_err("short");
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    assert!(!d.path().join("a.txt").exists());
    assert_eq!(
        fs::read_dir(d.path().join(STATE_DIR).join("tmp"))
            .expect("tmp dir")
            .count(),
        0,
        "temporary files removed"
    );
}

fn verified(s: &FsStore, body: &[u8]) -> Verified {
    let mut t = s.create_temp(expect_abc(None, "")).expect("temp");
    t.write(body).expect("write");
    s.verify(t).expect("verify")
}

#[test]
fn place_in_says_what_it_replaced_and_never_replaces_a_directory() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    let mut dirs = DirCache::default();
    let rel = RelPath::parse("a/b/c.txt").expect("rel");
    let p = s
        .place_in(verified(&s, b"one"), &rel, &mut dirs)
        .expect("new");
    assert!(!p.replaced);
    assert_eq!(p.committed.length, 3);
    let p = s
        .place_in(verified(&s, b"two!"), &rel, &mut dirs)
        .expect("again");
    assert!(p.replaced, "a file was there");
    assert_eq!(fs::read(d.path().join("a/b/c.txt")).expect("read"), b"two!");
    fs::create_dir(d.path().join("a/b/dir")).expect("dir");
    let e = s
        .place_in(
            verified(&s, b"x"),
            &RelPath::parse("a/b/dir").expect("rel"),
            &mut dirs,
        )
        .expect_err("a directory is there");
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert!(d.path().join("a/b/dir").is_dir());
    assert_eq!(s.clean_tmp().expect("clean"), 0, "no temporary file left");
}

#[cfg(unix)]
#[test]
fn place_in_checks_each_new_directory_of_a_batch() {
    let d = tempfile::tempdir().expect("tmp");
    let outside = tempfile::tempdir().expect("outside");
    let s = FsStore::open(d.path()).expect("open");
    let mut dirs = DirCache::default();
    s.place_in(
        verified(&s, b"a"),
        &RelPath::parse("x/a").expect("rel"),
        &mut dirs,
    )
    .expect("x/a");
    // A directory first met after the cache was filled is checked like any other.
    std::os::unix::fs::symlink(outside.path(), d.path().join("link")).expect("symlink");
    let e = s
        .place_in(
            verified(&s, b"b"),
            &RelPath::parse("link/b").expect("rel"),
            &mut dirs,
        )
        .expect_err("through a link");
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert_eq!(fs::read_dir(outside.path()).expect("dir").count(), 0);
    // A fresh cache checks again what an old one knew.
    fs::remove_file(d.path().join("x/a")).expect("rm");
    fs::remove_dir(d.path().join("x")).expect("rmdir");
    std::os::unix::fs::symlink(outside.path(), d.path().join("x")).expect("symlink x");
    dirs.clear();
    let e = s
        .place_in(
            verified(&s, b"c"),
            &RelPath::parse("x/c").expect("rel"),
            &mut dirs,
        )
        .expect_err("x is a link now");
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert_eq!(fs::read_dir(outside.path()).expect("dir").count(), 0);
}

/// The names in the temporary folder.
fn temps(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d.join(STATE_DIR).join("tmp"))
        .expect("tmp dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn verified_at(s: &FsStore, rel: &RelPath, dirs: &mut DirHandles, body: &[u8]) -> Verified {
    let mut t = s
        .create_temp_at(expect_abc(Some(body.len() as u64), ""), rel, dirs)
        .expect("temp");
    t.write(body).expect("write");
    s.verify(t).expect("verify")
}

/// A delete that empties a directory (the last copy in it removed) while a new copy is on
/// its way into that directory: as when a Source renames the only file of a directory and
/// an incremental sync with `--delete` applies the delete and the create at once. The
/// directory stays for the new copy, which is placed; and a directory emptied with nothing
/// in flight goes, also when handles to it are kept.
#[test]
fn a_delete_never_takes_away_a_directory_a_new_copy_is_on_its_way_into() {
    for unnamed in [true, false] {
        let d = tempfile::tempdir().expect("tmp");
        let s = FsStore::open(d.path())
            .expect("open")
            .with_unnamed_temps(unnamed);
        let mut handles = DirHandles::default();
        let mut dirs = DirCache::default();
        let rel = |p: &str| RelPath::parse(p).expect("rel");
        let v = verified_at(&s, &rel("d/e/a.txt"), &mut handles, b"aaa");
        s.place_in(v, &rel("d/e/a.txt"), &mut dirs).expect("a");
        // b is in flight (its body verified, not yet placed) when a is deleted.
        let b = verified_at(&s, &rel("d/e/b.txt"), &mut handles, b"bb");
        assert!(s.remove(&rel("d/e/a.txt")).expect("remove a"));
        let placed = s
            .place_in(b, &rel("d/e/b.txt"), &mut dirs)
            .unwrap_or_else(|e| panic!("b placed (unnamed={unnamed}): {e}"));
        assert!(!placed.replaced);
        assert_eq!(fs::read(d.path().join("d/e/b.txt")).expect("b"), b"bb");
        // Nothing in flight: the directories a delete empties go, and the handles kept to
        // them are not used again (c is placed in a new d/e).
        assert!(s.remove(&rel("d/e/b.txt")).expect("remove b"));
        assert!(!d.path().join("d").exists(), "unnamed={unnamed}");
        let c = verified_at(&s, &rel("d/e/c.txt"), &mut handles, b"c");
        s.place_in(c, &rel("d/e/c.txt"), &mut dirs)
            .expect("c placed");
        assert_eq!(fs::read(d.path().join("d/e/c.txt")).expect("c"), b"c");
        drop(handles);
        assert_eq!(s.unnamed_descriptors(), 0);
    }
}

#[test]
fn create_temp_at_links_a_new_copy_into_place_and_leaves_nothing_behind() {
    for unnamed in [true, false] {
        let d = tempfile::tempdir().expect("tmp");
        let s = FsStore::open(d.path())
            .expect("open")
            .with_unnamed_temps(unnamed);
        let mut handles = DirHandles::default();
        let mut dirs = DirCache::default();
        let a = RelPath::parse("x/y/a.txt").expect("rel");
        let b = RelPath::parse("top.txt").expect("rel");
        let va = verified_at(&s, &a, &mut handles, b"aaa");
        let vb = verified_at(&s, &b, &mut handles, b"bb");
        // Unnamed (where the platform has them): nothing in the temporary folder, nothing
        // at the final paths yet.
        let named = temps(d.path());
        assert_eq!(
            named.is_empty(),
            unnamed && cfg!(target_os = "linux"),
            "{named:?}"
        );
        assert!(!d.path().join("x/y/a.txt").exists());
        assert!(!d.path().join("top.txt").exists());
        s.sync(&[]).expect("sync");
        let p = s.place_in(va, &a, &mut dirs).expect("a");
        assert!(!p.replaced);
        assert_eq!(p.committed.length, 3);
        assert!(!s.place_in(vb, &b, &mut dirs).expect("b").replaced);
        s.sync(&[a.clone(), b.clone()]).expect("sync");
        assert_eq!(fs::read(d.path().join("x/y/a.txt")).expect("a"), b"aaa");
        assert_eq!(fs::read(d.path().join("top.txt")).expect("b"), b"bb");
        assert_eq!(temps(d.path()), Vec::<String>::new());
        drop(handles);
        assert_eq!(s.unnamed_descriptors(), 0, "every descriptor closed");
    }
}

#[test]
fn an_unnamed_body_dropped_or_refused_leaves_nothing() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    let mut handles = DirHandles::default();
    let rel = RelPath::parse("d/a.txt").expect("rel");
    // Dropped before being placed (a run stopped between verify and link).
    drop(verified_at(&s, &rel, &mut handles, b"abc"));
    // Refused: too short for its published length.
    let mut t = s
        .create_temp_at(expect_abc(Some(4), ""), &rel, &mut handles)
        .expect("temp");
    t.write(b"abc").expect("write");
    let e = s.verify(t).expect_err("short");
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    assert!(!d.path().join("d/a.txt").exists());
    // The directory made for it is gone with it.
    assert!(!d.path().join("d").exists());
    assert_eq!(temps(d.path()), Vec::<String>::new());
    drop(handles);
    assert_eq!(s.unnamed_descriptors(), 0);
}

/// The directories under `root` (relative), the state folder left out.
fn dirs_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("dir") {
            let e = e.expect("entry");
            if e.file_type().expect("type").is_dir() && e.file_name() != STATE_DIR {
                let p = e.path();
                out.push(
                    p.strip_prefix(root)
                        .expect("under")
                        .to_string_lossy()
                        .into_owned(),
                );
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A body for `rel` that fails its published length (4 bytes published, 3 written).
fn refused_at(s: &FsStore, rel: &RelPath, dirs: &mut DirHandles) -> Error {
    let mut t = s
        .create_temp_at(expect_abc(Some(4), ""), rel, dirs)
        .expect("temp");
    t.write(b"abc").expect("write");
    s.verify(t).expect_err("short")
}

#[test]
fn a_failed_new_copy_takes_away_the_directories_made_for_it_and_no_other() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    let mut handles = DirHandles::default();
    let mut dirs = DirCache::default();
    // An empty directory that was there before stays, and so does the destination.
    fs::create_dir(d.path().join("old")).expect("old");
    let rel = |p: &str| RelPath::parse(p).expect("rel");
    refused_at(&s, &rel("old/new/deeper/a.txt"), &mut handles);
    refused_at(&s, &rel("top.txt"), &mut handles);
    assert_eq!(dirs_under(d.path()), ["old"]);
    assert!(d.path().join(STATE_DIR).join("tmp").is_dir());
    // Made again when needed, through the same handles.
    let v = verified_at(&s, &rel("old/new/deeper/a.txt"), &mut handles, b"aaa");
    s.place_in(v, &rel("old/new/deeper/a.txt"), &mut dirs)
        .expect("placed");
    // A failure in a directory that holds a copy takes nothing away.
    refused_at(&s, &rel("old/new/deeper/b.txt"), &mut handles);
    refused_at(&s, &rel("old/new/other/b.txt"), &mut handles);
    assert_eq!(
        dirs_under(d.path()),
        ["old", "old/new", "old/new/deeper"],
        "only the directory made for the failed copy alone is removed"
    );
    assert_eq!(
        fs::read(d.path().join("old/new/deeper/a.txt")).expect("a"),
        b"aaa"
    );
    drop(handles);
    assert_eq!(s.unnamed_descriptors(), 0);
}

#[test]
fn a_new_directory_stays_while_another_copy_is_in_flight_in_it() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    // Two callers with their own handles (as two extracting threads), one directory.
    let (mut h1, mut h2) = (DirHandles::default(), DirHandles::default());
    let mut dirs = DirCache::default();
    let a = RelPath::parse("n/m/a.txt").expect("rel");
    let b = RelPath::parse("n/m/b.txt").expect("rel");
    let c = RelPath::parse("n/c.txt").expect("rel");
    // b is in flight (its body received, not yet linked) when a and c fail.
    let vb = verified_at(&s, &b, &mut h2, b"bb");
    refused_at(&s, &a, &mut h1);
    refused_at(&s, &c, &mut h1);
    assert_eq!(dirs_under(d.path()), ["n", "n/m"]);
    assert!(!s.place_in(vb, &b, &mut dirs).expect("b placed").replaced);
    assert_eq!(fs::read(d.path().join("n/m/b.txt")).expect("b"), b"bb");
    // The other way round: the in-flight one fails last, and the directories go with it.
    let mut h3 = DirHandles::default();
    let x = RelPath::parse("p/q/x.txt").expect("rel");
    let mut tx = s
        .create_temp_at(expect_abc(Some(4), ""), &x, &mut h3)
        .expect("x");
    refused_at(&s, &RelPath::parse("p/q/y.txt").expect("rel"), &mut h1);
    assert!(d.path().join("p/q").is_dir(), "x is still in flight");
    tx.write(b"abc").expect("write");
    drop(tx);
    assert_eq!(dirs_under(d.path()), ["n", "n/m"]);
    // Handles opened before a removal are not used after it: p/q is made again.
    let vz = verified_at(
        &s,
        &RelPath::parse("p/q/z.txt").expect("rel"),
        &mut h1,
        b"z",
    );
    s.place_in(vz, &RelPath::parse("p/q/z.txt").expect("rel"), &mut dirs)
        .expect("z placed");
    assert_eq!(fs::read(d.path().join("p/q/z.txt")).expect("z"), b"z");
    drop((h1, h2, h3));
    assert_eq!(s.unnamed_descriptors(), 0);
}

#[cfg(unix)]
#[test]
fn removing_a_new_directory_never_follows_a_link_put_in_its_place() {
    let d = tempfile::tempdir().expect("tmp");
    let outside = tempfile::tempdir().expect("outside");
    fs::create_dir(outside.path().join("m")).expect("outside/m");
    let s = FsStore::open(d.path()).expect("open");
    let mut handles = DirHandles::default();
    let rel = RelPath::parse("n/m/a.txt").expect("rel");
    let mut t = s
        .create_temp_at(expect_abc(Some(4), ""), &rel, &mut handles)
        .expect("temp");
    t.write(b"abc").expect("write");
    // While it is in flight, its new directories are swapped for a link out of DEST.
    fs::rename(d.path().join("n"), d.path().join("moved")).expect("move");
    std::os::unix::fs::symlink(outside.path(), d.path().join("n")).expect("symlink");
    drop(t);
    assert!(outside.path().join("m").is_dir(), "nothing removed outside");
    assert!(
        fs::symlink_metadata(d.path().join("n"))
            .expect("link")
            .file_type()
            .is_symlink()
    );
}

#[test]
fn an_unnamed_body_replaces_a_file_found_in_place_but_never_a_directory() {
    let d = tempfile::tempdir().expect("tmp");
    let s = FsStore::open(d.path()).expect("open");
    let mut handles = DirHandles::default();
    let mut dirs = DirCache::default();
    let rel = RelPath::parse("d/a.txt").expect("rel");
    let v = verified_at(&s, &rel, &mut handles, b"new");
    // A file appears at the path meanwhile (a copy not recorded).
    fs::write(d.path().join("d/a.txt"), b"old!").expect("old");
    let p = s.place_in(v, &rel, &mut dirs).expect("replace");
    assert!(p.replaced);
    assert_eq!(fs::read(d.path().join("d/a.txt")).expect("read"), b"new");
    let dir = RelPath::parse("d/sub").expect("rel");
    let v = verified_at(&s, &dir, &mut handles, b"x");
    fs::create_dir(d.path().join("d/sub")).expect("dir");
    let e = s.place_in(v, &dir, &mut dirs).expect_err("a directory");
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert!(d.path().join("d/sub").is_dir());
    assert_eq!(temps(d.path()), Vec::<String>::new());
}

#[cfg(unix)]
#[test]
fn create_temp_at_never_goes_through_a_symbolic_link() {
    let d = tempfile::tempdir().expect("tmp");
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), d.path().join("link")).expect("symlink");
    fs::write(d.path().join("file"), b"f").expect("file");
    for unnamed in [true, false] {
        let s = FsStore::open(d.path())
            .expect("open")
            .with_unnamed_temps(unnamed);
        let mut handles = DirHandles::default();
        let mut dirs = DirCache::default();
        for bad in ["link/x", "link/y/z", "file/x"] {
            let rel = RelPath::parse(bad).expect("rel");
            let e = s
                .create_temp_at(expect_abc(None, ""), &rel, &mut handles)
                .and_then(|mut t| {
                    t.write(b"abc")?;
                    let v = s.verify(t)?;
                    s.place_in(v, &rel, &mut dirs)
                })
                .expect_err(bad);
            assert!(matches!(e, Error::Conflict { .. }), "{bad}: {e}");
        }
        assert_eq!(fs::read_dir(outside.path()).expect("dir").count(), 0);
    }
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_not_followed() {
    let d = tempfile::tempdir().expect("tmp");
    let outside = tempfile::tempdir().expect("outside");
    std::os::unix::fs::symlink(outside.path(), d.path().join("link")).expect("symlink");
    let s = FsStore::open(d.path()).expect("open");
    let mut t = s.create_temp(expect_abc(None, "")).expect("temp");
    t.write(b"abc").expect("write");
    let e = s
        .commit(t, &RelPath::parse("link/x").expect("rel"))
        .expect_err("through a link");
    assert!(matches!(e, Error::Conflict { .. }), "{e}");
    assert_eq!(fs::read_dir(outside.path()).expect("dir").count(), 0);
}
