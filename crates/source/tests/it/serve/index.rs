//! Resources are answered from the state database: after a scan records a change,
//! what a request gets of the recorded state (the digest `ETag`) is the new scan's, for a file
//! updated, created or deleted, even when the path was served (and cached) before.

use super::*;

/// The `ETag` of a file not as recorded: its size and modification time.
fn unrecorded(r: &Resp) -> bool {
    r.header("etag").is_some_and(|t| !t.starts_with("\"md5-"))
}

#[test]
fn answers_follow_the_state_after_a_scan() {
    let s = Served::start(
        |d| {
            default_tree(d);
            std::fs::write(d.join("upd.txt"), "before\n").expect("write");
            std::fs::write(d.join("gone.txt"), "going\n").expect("write");
        },
        |_, opts| {
            // Batches run by hand only.
            opts.watch.use_watcher = false;
            opts.watch.rescan_interval = Duration::from_secs(3600);
        },
    );
    let md5_tag = |b: &[u8]| format!("\"md5-{}\"", md5_hex(b));
    // Served once before the change: whatever the server keeps of these paths, it keeps now.
    let r = get(s.addr, "/upd.txt");
    assert_eq!(
        (r.status, r.header("etag")),
        (200, Some(md5_tag(b"before\n").as_str()))
    );
    assert_eq!(get(s.addr, "/gone.txt").status, 200);
    assert_eq!(get(s.addr, "/new.txt").status, 404);

    std::fs::write(s.dir.path().join("upd.txt"), "after, longer\n").expect("write");
    std::fs::remove_file(s.dir.path().join("gone.txt")).expect("remove");
    std::fs::write(s.dir.path().join("new.txt"), "new\n").expect("write");
    // Before the scan: the files as they are, without a recorded digest (not the old one).
    let r = get(s.addr, "/upd.txt");
    assert_eq!(r.body, b"after, longer\n");
    assert!(unrecorded(&r), "{:?}", r.header("etag"));
    let r = get(s.addr, "/new.txt");
    assert_eq!(r.status, 200);
    assert!(unrecorded(&r), "{:?}", r.header("etag"));

    let publisher = s.running.as_ref().expect("running").publisher().clone();
    let report = s.rt.block_on(publisher.batch(false)).expect("batch");
    assert_eq!(
        (
            report.scan.created,
            report.scan.updated,
            report.scan.deleted
        ),
        (1, 1, 1)
    );
    // After it: the new scan's digests, for the paths asked before too.
    let r = get(s.addr, "/upd.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"after, longer\n");
    assert_eq!(r.header("etag"), Some(md5_tag(b"after, longer\n").as_str()));
    let r = get(s.addr, "/new.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("etag"), Some(md5_tag(b"new\n").as_str()));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let c = get_h(s.addr, "/new.txt", &[("If-None-Match", &md5_tag(b"new\n"))]);
    assert_eq!(c.status, 304);
    assert_eq!(get(s.addr, "/gone.txt").status, 404);
    assert_eq!(get(s.addr, "/gone.txt").status, 404);
    // Unchanged files keep theirs.
    let r = get(s.addr, "/a.txt");
    assert_eq!(r.header("etag"), Some(md5_tag(b"hello, world\n").as_str()));

    // Deleted again, then created with other bytes: the digest follows once more.
    std::fs::remove_file(s.dir.path().join("new.txt")).expect("remove");
    s.rt.block_on(publisher.batch(false)).expect("batch");
    assert_eq!(get(s.addr, "/new.txt").status, 404);
    std::fs::write(s.dir.path().join("new.txt"), "new again\n").expect("write");
    s.rt.block_on(publisher.batch(false)).expect("batch");
    let r = get(s.addr, "/new.txt");
    assert_eq!(r.header("etag"), Some(md5_tag(b"new again\n").as_str()));
    s.stop();
}
