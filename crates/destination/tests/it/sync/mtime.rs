//! A copy's modification time is the Source file's, fraction included: the Source publishes
//! `<lastmod>` at microsecond precision (Z39.99-2014 §7, W3C Datetime fractions) and the
//! Destination gives the copy that time (`fetch/mtime.rs`), so tools comparing times exactly
//! (rsync -t, rclone, make) see the copy as the file.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::run;
use crate::common::*;

/// 2023-11-14T22:13:20.120456789Z: a time with a fraction finer than a millisecond.
fn sub_second_time() -> SystemTime {
    UNIX_EPOCH + Duration::new(1_700_000_000, 120_456_789)
}

fn mtime(p: &std::path::Path) -> SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The text of every Resource List published under `dir`.
fn resource_lists(dir: &std::path::Path) -> Vec<String> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            v.extend(resource_lists(&p));
        } else if p.file_name().is_some_and(|n| n == "resourcelist.xml") {
            v.push(std::fs::read_to_string(&p).expect("read"));
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_gets_the_source_files_sub_second_time() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let t = sub_second_time();
    std::fs::File::options()
        .write(true)
        .open(src.path().join("a.txt"))
        .and_then(|f| f.set_modified(t))
        .expect("set the time");
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let lists = resource_lists(&src.path().join("resourcesync"));
    assert!(!lists.is_empty(), "no Resource List published");
    for rl in &lists {
        assert!(
            rl.contains("<lastmod>2023-11-14T22:13:20.120456Z</lastmod>"),
            "{rl}"
        );
    }

    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!((r.created, r.failed), (1, 0), "{:?}", r.failures);
    let copy = mtime(&dest.join("a.txt"));
    let source = mtime(&src.path().join("a.txt"));
    let apart = copy.duration_since(source).unwrap_or_else(|e| e.duration());
    assert!(
        apart < Duration::from_millis(1),
        "copy {copy:?}, Source {source:?}: {apart:?} apart"
    );
    // Exactly the published microseconds.
    assert_eq!(copy, UNIX_EPOCH + Duration::new(1_700_000_000, 120_456_000));
}
