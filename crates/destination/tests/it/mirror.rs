//! A Destination used as rsync users use a mirror: `--delete` removes the files no resource
//! maps to, include/exclude patterns match names as written, and the counts of every report add
//! up to the Source's resources. Names with spaces, non-ASCII characters and `%`.

use crate::common;
use crate::hand;

use std::sync::Arc;

use common::*;
use hand::*;
use resourcesync_destination::{Mode, Quiet, SyncReport, UriFilter, audit, sync};

async fn run(o: &resourcesync_destination::SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

fn filter(include: &[&str], exclude: &[&str]) -> UriFilter {
    let v = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    UriFilter::new(&v(include), &v(exclude)).expect("patterns")
}

fn names() -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("a.txt", b"alpha"),
        ("b 1.txt", b"bravo one"),
        ("日本語/ü.txt", b"umlaut"),
        ("100%.txt", b"percent"),
        ("dir/c.txt", b"charlie"),
    ]
}

fn audit_opts(url: &str, dest: &std::path::Path) -> resourcesync_destination::AuditOptions {
    let mut a = resourcesync_destination::AuditOptions::new(url, dest);
    a.http.retries = 0;
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_baseline_then_an_incremental_run_count_each_resource_once() {
    let src = tmp();
    let many: Vec<(String, Vec<u8>)> = (0..2000)
        .map(|i| (format!("many/{i:04}.txt"), format!("body {i}").into_bytes()))
        .collect();
    let files: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .chain(names())
        .collect();
    write_tree(src.path(), &files);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!((r.created, r.unchanged, r.failed), (2005, 0, 0), "{r:?}");
    adds_up(&r, 2005);

    // Two changes: the incremental run counts those two resources.
    write_tree(src.path(), &[("a.txt", b"alpha 2"), ("new.txt", b"new")]);
    publish(src.path(), &server.base, None);
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated), (1, 1), "{r:?}");
    adds_up(&r, 2);
}

/// A Change List that records, after the Resource List's `at`, a change the list already shows
/// (a Source whose list was written after the edit, `at` before it) and a resource created
/// after the list: the catch-up in the same run counts the new resource and not the other
/// again (it used to add "1 unchanged" to every baseline of such a Source).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catch_up_after_a_baseline_counts_no_resource_twice() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}rs/cap.xml");
    let t0 = "2024-03-01T00:00:00Z";
    let cl = urlset(
        Some(&cap),
        &format!("capability=\"changelist\" from=\"{t0}\""),
        &[
            url(
                &format!("{b}a.txt"),
                &format!(
                    "change=\"updated\" datetime=\"2024-03-01T00:00:01Z\" {}",
                    lh(b"alpha")
                ),
            ),
            url(
                &format!("{b}new.txt"),
                &format!(
                    "change=\"created\" datetime=\"2024-03-01T00:00:02Z\" {}",
                    lh(b"new")
                ),
            ),
        ],
    );
    let rl = urlset(
        Some(&cap),
        &format!("capability=\"resourcelist\" at=\"{t0}\""),
        &[
            url(&format!("{b}a.txt"), &lh(b"alpha")),
            url(&format!("{b}b.txt"), &lh(b"bravo")),
        ],
    );
    let caps = capability_list(&[
        ("resourcelist", format!("{b}rs/rl.xml")),
        ("changelist", format!("{b}rs/cl.xml")),
    ]);
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("new.txt", b"new"),
            ("rs/cap.xml", caps.as_bytes()),
            ("rs/rl.xml", rl.as_bytes()),
            ("rs/cl.xml", cl.as_bytes()),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&cap, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.unchanged, r.failed),
        (3, 0, 0, 0),
        "{r:?}"
    );
    adds_up(&r, 3);
    assert_eq!(r.cursor.as_deref(), Some("2024-03-01T00:00:02Z"));
}

/// Patterns match the decoded path under DEST: `b 1*.txt` leaves out `b%201.txt`,
/// `*/日本語/*` keeps the folder whatever its encoding; a pattern that matched no resource of
/// a baseline is said once, at the end of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_match_names_as_written_and_one_that_matched_nothing_is_said() {
    let src = tmp();
    write_tree(src.path(), &names());
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);

    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.filter = filter(&[], &["b 1*.txt", "100%.txt"]);
    let r = run(&o).await;
    assert_eq!((r.created, r.filtered), (3, 2), "{r:?}");
    adds_up(&r, 5);
    let got = dest_files(&dest);
    assert!(
        !got.contains_key("b 1.txt") && !got.contains_key("100%.txt"),
        "{got:?}"
    );

    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.filter = filter(&["*/日本語/*", "*.typo"], &[]);
    let rec = Arc::new(Recorder::default());
    let r = sync(&o, rec.clone()).await.expect("sync");
    assert_eq!((r.created, r.filtered), (1, 4), "{r:?}");
    adds_up(&r, 5);
    assert_eq!(
        dest_files(&dest).keys().collect::<Vec<_>>(),
        vec!["日本語/ü.txt"]
    );
    let said = rec.said("matched no resource");
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("include pattern \"*.typo\""), "{said:?}");
    assert_eq!(
        r.warnings
            .iter()
            .filter(|w| w.contains("matched no resource"))
            .count(),
        1,
        "{:?}",
        r.warnings
    );
}

/// `--delete` removes the files no resource maps to (rsync's meaning), after a dry run that
/// lists them: not the Destination's own folder, not a state database given inside DEST, not
/// what the patterns leave out, never through a symbolic link; emptied directories go too, and
/// the audit then finds nothing extra.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_files_no_resource_maps_to_and_nothing_else() {
    let src = tmp();
    write_tree(src.path(), &names());
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    // A state database inside DEST, outside its own folder.
    o.state = Some(dest.join("my state.sqlite"));
    let r = run(&o).await;
    assert_eq!(r.created, 5, "{r:?}");

    // Files of nobody's: at the top, deep in folders of their own, next to copies, with
    // spaces, non-ASCII and `%` in their names; one the patterns leave out; symbolic links to
    // a file and to a folder outside DEST; a file in the Destination's own folder.
    let outside = tmp();
    write_tree(
        outside.path(),
        &[("precious.txt", b"keep me"), ("d/inner.txt", b"me too")],
    );
    write_tree(
        &dest,
        &[
            ("stray 1.txt", b"x"),
            ("junk/deep/日本語 %41.bin", b"y"),
            ("日本語/extra ü.txt", b"z"),
            ("notes.tmp", b"left out by the patterns"),
            (".resourcesync/mine", b"the Destination's own"),
        ],
    );
    std::os::unix::fs::symlink(outside.path().join("precious.txt"), dest.join("link.txt"))
        .expect("symlink");
    std::os::unix::fs::symlink(outside.path().join("d"), dest.join("linked dir")).expect("symlink");
    let extra = [
        "junk/deep/日本語 %41.bin",
        "link.txt",
        "linked dir",
        "stray 1.txt",
        "日本語/extra ü.txt",
    ];

    let mut ao = audit_opts(&server.base, &dest);
    ao.state = o.state.clone();
    let a = audit(&ao, Arc::new(Quiet)).await.expect("audit");
    assert_eq!(
        a.extra_count, 6,
        "the five and notes.tmp, not the state database: {:?}",
        a.extra
    );

    // Copies of deleted resources only, as the aggregator's `delete = true`: the extras stay.
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(r.extra_deleted, 0, "{r:?}");
    assert!(dest.join("stray 1.txt").exists());

    o.delete_extra = true;
    o.filter = filter(&[], &["*.tmp"]);
    o.dry_run = true;
    let r = run(&o).await;
    assert_eq!(r.extra_deleted, 5, "{r:?}");
    let mut listed: Vec<&str> = r
        .planned
        .iter()
        .filter(|p| p.action == "delete-extra")
        .map(|p| p.path.as_str())
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, extra);
    assert!(
        dest.join("stray 1.txt").exists(),
        "a dry run removes nothing"
    );

    o.dry_run = false;
    let r = run(&o).await;
    assert_eq!(r.extra_deleted, 5, "{r:?}");
    assert_eq!((r.deleted, r.failed), (0, 0), "{r:?}");
    for e in extra {
        assert!(
            std::fs::symlink_metadata(dest.join(e)).is_err(),
            "{e} is removed"
        );
    }
    assert!(!dest.join("junk").exists(), "emptied folders are removed");
    assert!(dest.join("日本語/ü.txt").is_file(), "copies stay");
    assert!(
        dest.join("notes.tmp").is_file(),
        "left out by the patterns: protected"
    );
    assert!(dest.join(".resourcesync/mine").is_file());
    assert!(dest.join("my state.sqlite").is_file());
    assert_eq!(
        std::fs::read(outside.path().join("precious.txt")).expect("kept"),
        b"keep me"
    );
    assert!(outside.path().join("d/inner.txt").is_file());

    std::fs::remove_file(dest.join("notes.tmp")).expect("rm");
    let a = audit(&ao, Arc::new(Quiet)).await.expect("audit");
    assert!(a.in_sync, "{a:?}");

    // The state still works: the next run is incremental.
    o.filter = UriFilter::default();
    let r = run(&o).await;
    assert_eq!((r.mode, r.extra_deleted), (Mode::Incremental, 0), "{r:?}");
}

/// `--delete` walks DEST beside the run (crate::sync::extras::Early) and looks each file it
/// found up again once the run has ended: a file found at a path no row named, which the run
/// then fills with a new resource's copy, stays; a stray file goes. And a walk that finds more
/// files than it keeps for after the run leaves them to the walk after it: all go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_keeps_a_copy_the_run_put_where_the_walk_beside_it_found_nothing_known() {
    let src = tmp();
    write_tree(src.path(), &names());
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.delete = true;
    o.delete_extra = true;
    let r = run(&o).await;
    assert_eq!(r.created, 5, "{r:?}");

    // A new resource, and an untracked file at its path in DEST before the run (a user's copy
    // made by hand), beside a stray one.
    write_tree(src.path(), &[("new.txt", b"published")]);
    publish(src.path(), &server.base, None);
    write_tree(&dest, &[("new.txt", b"by hand"), ("stray.txt", b"x")]);
    let r = run(&o).await;
    // Counted as updated: a file was there.
    assert_eq!(
        (r.mode, r.created + r.updated, r.failed),
        (Mode::Incremental, 1, 0),
        "{r:?}"
    );
    assert_eq!(r.extra_deleted, 1, "the stray file only: {r:?}");
    assert_eq!(
        std::fs::read(dest.join("new.txt")).expect("the new copy"),
        b"published"
    );
    assert!(!dest.join("stray.txt").exists());

    // More strays than the walk beside the run keeps (10,000): every one goes all the same.
    let many: Vec<(String, Vec<u8>)> = (0..10_050)
        .map(|i| (format!("junk/{:02}/{i:05}.bin", i % 50), vec![b'j']))
        .collect();
    let files: Vec<(&str, &[u8])> = many
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_tree(&dest, &files);
    let r = run(&o).await;
    assert_eq!((r.extra_deleted, r.failed), (10_050, 0), "{r:?}");
    assert!(!dest.join("junk").exists());
    assert_eq!(
        std::fs::read(dest.join("new.txt")).expect("kept"),
        b"published"
    );
}

/// A baseline from the Resource Dump (then the Resource List, whose entries the packages put in
/// place): each resource counted once, as created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_baseline_from_a_resource_dump_counts_each_resource_once() {
    let src = tmp();
    write_tree(src.path(), &names());
    let server = Server::start(src.path()).await;
    publish_with(src.path(), &server.base, |c| c.publish.dumps = true);
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert!(r.packages > 0, "from the dump: {r:?}");
    assert_eq!((r.created, r.failed), (5, 0), "{r:?}");
    adds_up(&r, 5);
}

/// `--delete` on a bucket (the S3 store of `scripts/s3.sh`, `RESOURCESYNC_TEST_S3`): objects no
/// resource maps to are removed, one the patterns leave out is kept, the copies stay. Under a
/// random prefix of the bucket, emptied at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_objects_no_resource_maps_to_in_a_bucket() {
    use resourcesync_destination::{Destination, Ports, http::Http};
    use resourcesync_store::{Expect, MemState, RelPath, S3Config, S3Store, Store};

    let url = match std::env::var("RESOURCESYNC_TEST_S3") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "RESOURCESYNC_TEST_S3 is not set: run `export RESOURCESYNC_TEST_S3=$(scripts/s3.sh)` \
             first, or every test with scripts/test.sh"
        ),
    };
    let prefix = format!("mirror-{:08x}/", fastrand::u32(..));
    let cfg = S3Config::parse(&url)
        .expect("S3 URL")
        .with_prefix(&prefix)
        .expect("prefix");
    let scratch = tmp();
    let store = Arc::new(
        tokio::task::spawn_blocking(move || S3Store::with_config(cfg))
            .await
            .expect("task")
            .expect("bucket")
            .with_scratch(scratch.path()),
    );
    let src = tmp();
    write_tree(src.path(), &names());
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let work = tmp();
    let state = Arc::new(MemState::new());
    let ports = Ports::new(store.clone(), state, work.path(), "(memory)");
    let mut o = options(&server.base, &work.path().join("unused"));
    let d = Destination::new(
        &server.base,
        ports,
        Http::new(o.http.clone()).expect("client"),
    );
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("baseline");
    assert_eq!((r.created, r.failed), (5, 0), "{r:?}");

    let s = store.clone();
    tokio::task::spawn_blocking(move || {
        for k in ["stray 1.txt", "junk/deep/x.bin", "notes.tmp"] {
            let key = RelPath::parse(k).expect("key");
            let expect = Expect {
                max_bytes: 1 << 20,
                ..Expect::default()
            };
            s.put(&key, expect, &mut &b"nobody's"[..]).expect("put");
        }
    })
    .await
    .expect("task");

    o.delete = true;
    o.delete_extra = true;
    o.filter = filter(&[], &["*.tmp"]);
    let r = d.sync(&o, Arc::new(Quiet)).await.expect("sync --delete");
    assert_eq!(r.extra_deleted, 2, "{r:?}");
    let s = store.clone();
    let keys = tokio::task::spawn_blocking(move || {
        let mut keys = Vec::new();
        s.list(None, &mut |item| {
            keys.push(item.expect("key").0.to_string());
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .expect("list");
        for k in &keys {
            s.delete(&RelPath::parse(k).expect("key"))
                .expect("clean up");
        }
        keys
    })
    .await
    .expect("task");
    let mut want: Vec<String> = names().iter().map(|(n, _)| (*n).to_owned()).collect();
    want.push("notes.tmp".into());
    want.sort_unstable();
    assert_eq!(keys, want);
}
