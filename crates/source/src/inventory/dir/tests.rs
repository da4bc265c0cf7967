//! Unit tests of the module.

use super::*;
use crate::inventory::conformance::{self, Harness};
use crate::inventory::{Listed, Skipped};
use std::os::unix::fs::symlink;

/// A whole listing, collected.
fn all(l: Result<Listing<'_>>) -> (Vec<Listed>, Vec<Skipped>) {
    let (mut listed, mut skipped) = (Vec::new(), Vec::new());
    for e in l.expect("listing") {
        match e {
            Ok(l) => listed.push(l),
            Err(s) => skipped.push(s),
        }
    }
    (listed, skipped)
}

/// `top/tree` (the inventory's root) and `top/outside/secret.txt` beside it.
struct Fixture {
    _top: tempfile::TempDir,
    tree: PathBuf,
    outside: PathBuf,
}

fn fixture() -> Fixture {
    let top = tempfile::tempdir().expect("tempdir");
    let tree = top.path().join("tree");
    let outside = top.path().join("outside");
    std::fs::create_dir_all(tree.join("sub")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), "secret").expect("write");
    std::fs::write(tree.join("a.txt"), "inside a").expect("write");
    std::fs::write(tree.join("sub/b.txt"), "inside b").expect("write");
    Fixture {
        _top: top,
        tree,
        outside,
    }
}

/// Both ways of opening: `openat2` beneath the root (where the kernel has it) and the
/// fallback that opens by path and checks what it opened.
fn both(tree: &Path) -> [DirInventory; 2] {
    let inv = DirInventory::new(tree, vec![], false, vec![]).expect("inventory");
    [inv.clone(), inv.with_openat2(false)]
}

fn read_all(inv: &DirInventory, rel: &str) -> std::io::Result<String> {
    let mut s = String::new();
    inv.open_file(Path::new(rel))?.read_to_string(&mut s)?;
    Ok(s)
}

#[test]
fn links_inside_the_tree_are_followed_either_way() {
    let f = fixture();
    symlink("a.txt", f.tree.join("rel-link")).expect("symlink");
    symlink("../a.txt", f.tree.join("sub/up-link")).expect("symlink");
    // Absolute: `RESOLVE_BENEATH` refuses it even pointing inside; the checked way takes it.
    symlink(f.tree.join("a.txt"), f.tree.join("abs-link")).expect("symlink");
    symlink("sub", f.tree.join("dir-link")).expect("symlink");
    for inv in both(&f.tree) {
        for rel in [
            "a.txt",
            "rel-link",
            "sub/up-link",
            "abs-link",
            "sub/../a.txt",
        ] {
            assert_eq!(read_all(&inv, rel).expect(rel), "inside a", "{rel}");
        }
        assert_eq!(read_all(&inv, "dir-link/b.txt").expect("b"), "inside b");
    }
}

#[test]
fn nothing_outside_the_tree_is_opened_either_way() {
    let f = fixture();
    let secret = f.outside.join("secret.txt");
    symlink(&secret, f.tree.join("abs-out")).expect("symlink");
    symlink("../outside/secret.txt", f.tree.join("rel-out")).expect("symlink");
    symlink("../outside", f.tree.join("dir-out")).expect("symlink");
    symlink(&f.outside, f.tree.join("sub/abs-dir-out")).expect("symlink");
    // A magic link of /proc on the way.
    let magic = PathBuf::from(format!("/proc/self/root{}", secret.display()));
    symlink(&magic, f.tree.join("magic-out")).expect("symlink");
    let absolute = secret.display().to_string();
    for inv in both(&f.tree) {
        for rel in [
            "abs-out",
            "rel-out",
            "dir-out/secret.txt",
            "sub/abs-dir-out/secret.txt",
            "magic-out",
            "../outside/secret.txt",
            "sub/../../outside/secret.txt",
            absolute.as_str(),
        ] {
            let r = read_all(&inv, rel);
            assert!(r.is_err(), "{rel} was opened: {r:?}");
            let r = inv.read_stable(Path::new(rel), &mut Vec::new(), &mut |_| {});
            assert!(r.is_err(), "{rel} was read: {r:?}");
        }
    }
}

/// A directory swapped for a link out of the tree, again and again, while the same path
/// is opened: never the file outside (the race `RESOLVE_BENEATH`, or the check of what was
/// opened, closes).
#[test]
fn a_directory_swapped_for_a_link_never_leads_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fixture();
    std::fs::write(f.outside.join("f.txt"), "secret").expect("write");
    let real = f.tree.join("real");
    std::fs::create_dir(&real).expect("mkdir");
    std::fs::write(real.join("f.txt"), "inside").expect("write");
    let link = f.tree.join("link");
    symlink("../outside", &link).expect("symlink");
    let swap = f.tree.join("swap");
    for inv in both(&f.tree) {
        let stop = AtomicBool::new(false);
        let (mut inside, mut refused) = (0u32, 0u32);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    for (from, to) in [(&real, &swap), (&swap, &real), (&link, &swap)] {
                        std::fs::rename(from, to).expect("rename");
                    }
                    std::fs::rename(&swap, &link).expect("rename");
                }
            });
            for _ in 0..4000 {
                match read_all(&inv, "swap/f.txt") {
                    Ok(s) => {
                        assert_eq!(s, "inside", "read through the link");
                        inside += 1;
                    }
                    Err(_) => refused += 1,
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(inside + refused, 4000);
    }
}

#[test]
fn read_stable_reads_whole_files_of_any_size() {
    let f = fixture();
    let sizes = [
        0usize,
        1,
        100,
        4095,
        4096,
        4097,
        READ_BUF - 1,
        READ_BUF,
        3 * READ_BUF + 7,
    ];
    for n in sizes {
        let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        std::fs::write(f.tree.join(format!("f{n}")), &data).expect("write");
    }
    for inv in both(&f.tree) {
        let mut buf = Vec::new();
        for n in sizes {
            let mut got = Vec::new();
            let r = inv
                .read_stable(Path::new(&format!("f{n}")), &mut buf, &mut |d| {
                    got.extend_from_slice(d)
                })
                .expect("read");
            let md = std::fs::metadata(f.tree.join(format!("f{n}"))).expect("stat");
            assert_eq!(r, Some((n as u64, mtime_ns(&md))), "f{n}");
            let want: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            assert!(got == want, "f{n}: the bytes fed differ");
        }
        assert!(buf.len() <= READ_BUF + 1, "read buffer bounded");
    }
}

/// A reader whose file is longer than its size said: the read does not stop at the
/// size, so the caller sees more bytes than expected (and tries again).
#[test]
fn feed_known_sees_bytes_past_the_expected_size() {
    let data = vec![7u8; 5000];
    for len in [0u64, 10, 4999] {
        let mut fed = 0u64;
        let n = feed_known(&mut data.as_slice(), &mut Vec::new(), len, &mut |d| {
            fed += d.len() as u64
        })
        .expect("feed");
        assert!(n > len, "{len}: {n}");
        assert_eq!(n, fed);
    }
    let n = feed_known(&mut data.as_slice(), &mut Vec::new(), 6000, &mut |_| {}).expect("feed");
    assert_eq!(n, 5000, "a shorter file ends at its end");
}

#[test]
fn open_direct_takes_only_paths_without_links() {
    let f = fixture();
    symlink("a.txt", f.tree.join("rel-link")).expect("symlink");
    symlink("sub", f.tree.join("dir-link")).expect("symlink");
    symlink("../outside", f.tree.join("dir-out")).expect("symlink");
    let [beneath, checked] = both(&f.tree);
    for inv in [&beneath, &checked] {
        for rel in ["rel-link", "dir-link/b.txt", "dir-out/secret.txt"] {
            assert!(
                inv.open_direct(Path::new(rel)).expect(rel).is_none(),
                "{rel}"
            );
        }
    }
    assert!(
        checked
            .open_direct(Path::new("a.txt"))
            .expect("a")
            .is_none()
    );
    if let Some(mut file) = beneath.open_direct(Path::new("sub/b.txt")).expect("b") {
        let mut s = String::new();
        file.read_to_string(&mut s).expect("read");
        assert_eq!(s, "inside b");
    }
    assert!(beneath.open_direct(Path::new("missing")).is_err() || !openat2_available());
}

/// A link is listed only when its target would be: never a link to a skipped file (the
/// state database), a dotfile or an excluded file, which the server would not serve either.
#[test]
fn links_to_files_left_out_are_not_listed() {
    let f = fixture();
    let t = &f.tree;
    std::fs::write(t.join("state.sqlite"), "SQLite format 3").expect("write");
    std::fs::write(t.join(".hidden"), "h").expect("write");
    std::fs::write(t.join("x.log"), "log").expect("write");
    symlink("state.sqlite", t.join("db-link")).expect("symlink");
    symlink(".hidden", t.join("hidden-link")).expect("symlink");
    symlink("x.log", t.join("log-link")).expect("symlink");
    symlink("a.txt", t.join("ok-link")).expect("symlink");
    let inv = DirInventory::new(t, vec!["*.log".into()], false, vec![t.join("state.sqlite")])
        .expect("inventory");
    for (listed, _) in [all(inv.list()), all(inv.list_names())] {
        let mut got: Vec<String> = listed
            .iter()
            .map(|l| l.rel.to_string_lossy().into_owned())
            .collect();
        got.sort();
        assert_eq!(got, ["a.txt", "ok-link", "sub/b.txt"]);
    }
}

#[test]
fn skipped_paths_are_compared_whole_even_under_the_filesystem_root() {
    let f = fixture();
    let inv = DirInventory::new(&f.tree, vec![], false, vec![f.tree.join("sub/b.txt")])
        .expect("inventory");
    assert!(inv.skipped_path(Path::new("sub/b.txt")));
    for rel in ["sub/b.tx", "sub/b.txt2", "ub/b.txt", "sub"] {
        assert!(!inv.skipped_path(Path::new(rel)), "{rel}");
    }
    let inv = DirInventory::new(Path::new("/"), vec![], false, vec![PathBuf::from("/tmp")])
        .expect("inventory");
    assert!(inv.skipped_path(Path::new("tmp")));
    assert!(!inv.skipped_path(Path::new("tm")));
}

#[test]
fn the_walk_lists_what_it_should_in_parallel() {
    let f = fixture();
    let t = &f.tree;
    let mut want = vec!["a.txt".to_owned(), "sub/b.txt".to_owned()];
    for d in 0..30 {
        let dir = format!("d{d}/e{}", d % 3);
        std::fs::create_dir_all(t.join(&dir)).expect("mkdir");
        for i in 0..20 {
            let rel = format!("{dir}/f{i}.txt");
            std::fs::write(t.join(&rel), &rel).expect("write");
            want.push(rel);
        }
    }
    std::fs::write(t.join(".hidden"), "h").expect("write");
    std::fs::create_dir(t.join(".dot")).expect("mkdir");
    std::fs::write(t.join(".dot/x"), "x").expect("write");
    std::fs::create_dir(t.join("state")).expect("mkdir");
    std::fs::write(t.join("state/s.sqlite"), "s").expect("write");
    std::fs::write(t.join("skipped-file"), "s").expect("write");
    std::fs::write(t.join("sub/c.log"), "log").expect("write");
    symlink("a.txt", t.join("alias")).expect("symlink");
    want.push("alias".into());
    symlink("sub", t.join("dir-alias")).expect("symlink");
    symlink(f.outside.join("secret.txt"), t.join("leak")).expect("symlink");
    let inv = DirInventory::new(
        t,
        vec!["*.log".into()],
        false,
        vec![t.join("state"), t.join("skipped-file")],
    )
    .expect("inventory");
    let (listed, skipped) = all(inv.list());
    let mut got: Vec<String> = listed
        .iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    for l in &listed {
        let md = std::fs::metadata(t.join(&l.rel)).expect("stat");
        assert_eq!(
            (l.len, l.mtime_ns),
            (md.len(), mtime_ns(&md)),
            "{:?}",
            l.rel
        );
    }
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].path, Path::new("leak"));
    // Without a stat per file: the same files (a link still followed only inside), the
    // same skipped link; regular files with no size or time.
    let (names, skipped_names) = all(inv.list_names());
    let mut got_names: Vec<String> = names
        .iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect();
    got_names.sort();
    assert_eq!(got_names, want);
    assert_eq!(skipped_names, skipped);
    let a = names
        .iter()
        .find(|l| l.rel == Path::new("a.txt"))
        .expect("a.txt");
    assert_eq!((a.len, a.mtime_ns), (0, 0), "no stat for a regular file");
    // Dotfiles on request (the state and the excluded log still left out).
    let inv =
        DirInventory::new(t, vec!["*.log".into()], true, vec![t.join("state")]).expect("inventory");
    let (listed, _) = all(inv.list());
    for rel in [".hidden", ".dot/x", "skipped-file"] {
        assert!(listed.iter().any(|l| l.rel == Path::new(rel)), "{rel}");
    }
    assert!(!listed.iter().any(|l| l.rel.starts_with("state")));
    assert!(!listed.iter().any(|l| l.rel.ends_with("c.log")));
}

/// The directory inventory under the conformance suite: the fixture written to a directory,
/// the broken resource a dangling link; with `openat2` and with the checked fallback.
struct Dir {
    top: tempfile::TempDir,
    openat2: bool,
}

impl Harness for Dir {
    fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
        self.top = tempfile::tempdir().expect("tempdir");
        for (rel, bytes) in files {
            self.put(rel, bytes);
        }
        let root = self.top.path();
        if let Some(b) = broken {
            symlink("nowhere", root.join(b)).expect("symlink");
        }
        let inv = DirInventory::new(root, vec![], false, vec![]).expect("inventory");
        Box::new(inv.with_openat2(self.openat2))
    }

    fn put(&mut self, rel: &str, bytes: &[u8]) {
        let p = self.top.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, bytes).expect("write");
    }

    fn remove(&mut self, rel: &str) {
        std::fs::remove_file(self.top.path().join(rel)).expect("remove");
    }
}

#[test]
fn the_directory_inventory_passes_the_conformance_suite() {
    for openat2 in [true, false] {
        let top = tempfile::tempdir().expect("tempdir");
        conformance::run(&mut Dir { top, openat2 }).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The walk holds the entries of the directories on its way down, not the tree: 40
/// directories of 100 files, and never more than one directory's entries (plus the
/// directories still to walk) held at once.
#[test]
fn the_walk_holds_one_directory_at_a_time() {
    let f = fixture();
    for d in 0..40 {
        let dir = f.tree.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for i in 0..100 {
            std::fs::write(dir.join(format!("f{i:03}")), "x").expect("write");
        }
    }
    let inv = DirInventory::new(&f.tree, vec![], false, vec![]).expect("inventory");
    for stat in [true, false] {
        let mut walk = inv.walk(stat);
        let n = walk.by_ref().filter(|e| e.is_ok()).count();
        assert_eq!(n, 40 * 100 + 2, "every file");
        assert!(
            walk.peak() <= 100 + 44,
            "held {} entries at once: more than one directory's",
            walk.peak()
        );
    }
}

/// Entries come in the order of whole paths' bytes, not of names sorted per directory.
#[test]
fn the_walk_orders_by_whole_paths() {
    let f = fixture();
    let t = &f.tree;
    for rel in ["a-b", "a.txt", "a/x", "a0", "sub/c", "sub-d", "sub.e"] {
        let p = t.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, "x").expect("write");
    }
    let inv = DirInventory::new(t, vec![], false, vec![]).expect("inventory");
    let (listed, _) = all(inv.list());
    let got: Vec<String> = listed
        .iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        got,
        [
            "a-b",
            "a.txt",
            "a/x",
            "a0",
            "sub-d",
            "sub.e",
            "sub/b.txt",
            "sub/c"
        ]
    );
}

/// Names sorted by their first 16 bytes and, where those are equal, whole: names sharing
/// 16 bytes and more, a directory whose name ends at byte 15 or 16 (its `/` inside or past the
/// prefix), bytes above 0x7f; in whole-path order, with and without the stat threads.
#[test]
fn the_walk_orders_names_past_their_first_16_bytes() {
    let f = fixture();
    let t = &f.tree;
    let names = [
        "record-0000000000-b",
        "record-0000000000-a",
        "record-0000000000",
        "record-000000000",
        "record-000000000\u{e9}",
        "record-00000000-",
        "record-000000000-z",
        "record-0000000000-a.d/x",
        "record-000000001/x",
        "record-00000000/x",
        "record-0000000001/x",
    ];
    for rel in names {
        let p = t.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, "x").expect("write");
    }
    // Enough files beside them for the stat threads.
    for i in 0..walk::POOL_FROM {
        std::fs::write(t.join(format!("record-0000000000-n{i:04}")), "x").expect("write");
    }
    for threads in [1, 3] {
        let mut inv = DirInventory::new(t, vec![], false, vec![]).expect("inventory");
        inv.threads = threads;
        let (listed, skipped) = all(inv.list());
        assert!(skipped.is_empty(), "{skipped:?}");
        let got: Vec<Vec<u8>> = listed
            .iter()
            .map(|l| crate::inventory::path_bytes(&l.rel).into_owned())
            .collect();
        let mut want = got.clone();
        want.sort();
        assert_eq!(got, want, "{threads} threads: not in whole-path order");
        assert_eq!(got.len(), names.len() + walk::POOL_FROM + 2, "every file");
    }
}

/// With directories large enough for the stat threads, the walk reads the next directory
/// while the threads stat the current one's files: it then holds two directories' entries,
/// never more (12 directories of `POOL_FROM + 10` files).
#[test]
fn the_walk_reads_one_directory_ahead_and_no_more() {
    let f = fixture();
    let per = walk::POOL_FROM + 10;
    for d in 0..12 {
        let dir = f.tree.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for i in 0..per {
            std::fs::write(dir.join(format!("f{i:04}")), "x").expect("write");
        }
    }
    let mut inv = DirInventory::new(&f.tree, vec![], false, vec![]).expect("inventory");
    inv.threads = 2;
    let mut walk = inv.walk(true);
    let n = walk.by_ref().filter(|e| e.is_ok()).count();
    assert_eq!(n, 12 * per + 2, "every file");
    // The root's 14 entries, the directory given, the one read ahead.
    assert!(
        walk.peak() > per + 14,
        "held {} entries at most: the next directory was not read ahead",
        walk.peak()
    );
    assert!(
        walk.peak() <= 2 * per + 14,
        "held {} entries at once: more than two directories'",
        walk.peak()
    );
}

/// Directories large enough for the stat threads (more files than [`walk::POOL_FROM`], in
/// several batches, with subdirectories, a link and files of different sizes among them, one
/// after the other): listed in whole-path order with every file's own size and time,
/// as a walk without the threads lists it.
#[test]
fn the_stat_threads_give_a_large_directory_in_order() {
    let f = fixture();
    let big = f.tree.join("big");
    std::fs::create_dir(&big).expect("mkdir");
    let n = 3 * walk::POOL_FROM + 17;
    for i in 0..n {
        std::fs::write(big.join(format!("f{i:05}")), "x".repeat(i % 97)).expect("write");
        if i % 200 == 7 {
            // Sorts among the files: `f00007-d/` after `f00007` and before `f00008`.
            let d = big.join(format!("f{i:05}-d"));
            std::fs::create_dir(&d).expect("mkdir");
            std::fs::write(d.join("inner"), "in").expect("write");
        }
    }
    symlink("f00010", big.join("f00010.link")).expect("symlink");
    // A second large directory after the first (and the small ones inside it).
    let next = f.tree.join("big2");
    std::fs::create_dir(&next).expect("mkdir");
    for i in 0..walk::POOL_FROM + 1 {
        std::fs::write(next.join(format!("g{i:05}")), "y".repeat(i % 13)).expect("write");
    }
    let mut pooled = DirInventory::new(&f.tree, vec![], false, vec![]).expect("inventory");
    pooled.threads = 3;
    let mut alone = pooled.clone();
    alone.threads = 1;
    let (got, skipped) = all(pooled.list());
    let (want, _) = all(alone.list());
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(got, want);
    let dirs = (0..n).filter(|i| i % 200 == 7).count();
    assert_eq!(
        got.len(),
        n + dirs + 1 + walk::POOL_FROM + 1 + 2,
        "every file"
    );
    for w in got.windows(2) {
        assert!(
            path_bytes(&w[0].rel) < path_bytes(&w[1].rel),
            "{:?} before {:?}",
            w[0].rel,
            w[1].rel
        );
    }
    for l in &got {
        let md = std::fs::metadata(f.tree.join(&l.rel)).expect("stat");
        assert_eq!(
            (l.len, l.mtime_ns),
            (md.len(), mtime_ns(&md)),
            "{:?}",
            l.rel
        );
    }
}
