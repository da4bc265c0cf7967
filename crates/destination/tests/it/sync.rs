//! The Destination against an in-process Source (loopback only): discovery, baseline,
//! incremental, deletes, audit, hostile documents and resumption.

use crate::common;

use std::sync::Arc;

use common::*;
use resourcesync_destination::{AuditOptions, Error, Mode, Quiet, SyncReport, sync};

mod mtime;

/// Signals once `left` resources are done.
struct Counting {
    left: std::sync::Mutex<u64>,
    tx: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
}

impl resourcesync_destination::Observer for Counting {
    fn resource_done(&self) {
        let mut g = self.left.lock().expect("count");
        *g = g.saturating_sub(1);
        if *g == 0 {
            let _ = self.tx.lock().expect("tx").send(());
        }
    }
}

async fn run(o: &resourcesync_destination::SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

pub(crate) fn audit_opts(url: &str, dest: &std::path::Path) -> AuditOptions {
    let mut a = AuditOptions::new(url, dest);
    a.http.retries = 0;
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_from_the_site_root_then_incremental_with_delete() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("sub/b.txt", b"bravo bravo"),
            ("sub/deeper/c d.txt", b"charlie with a space"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);

    // Discovery from the site root: /.well-known/resourcesync, then the Capability List.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline);
    adds_up(&r, 3);
    assert_eq!(
        r.source.capability_list.as_deref(),
        Some(format!("{}resourcesync/capabilitylist.xml", server.base).as_str())
    );
    assert_eq!(r.base_url, server.base);
    assert_eq!((r.created, r.failed), (3, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&dest), source_files(src.path()));
    assert!(r.cursor.is_some());

    // Nothing changed: an incremental run fetches nothing.
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (0, 0, 0));
    assert_eq!(server.resource_hits(), 0);

    // Create, update, delete at the Source.
    write_tree(
        src.path(),
        &[("new.txt", b"delta"), ("a.txt", b"alpha, longer now")],
    );
    std::fs::remove_file(src.path().join("sub/b.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    o.delete = true;
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (1, 1, 1, 0),
        "{r:?}"
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));
    assert_eq!(
        server.hits("/sub/deeper/c%20d.txt"),
        0,
        "unchanged, not fetched"
    );
}

/// Renames at the Source inside directories that hold one file each: with `--delete`, the
/// incremental run deletes the old name and fetches the new one at once, into a directory the
/// delete empties. The delete must not take the directory from under the new copy (it failed
/// with "No such file or directory" in most runs before; the store's unit test
/// `a_delete_never_takes_away_a_directory_a_new_copy_is_on_its_way_into` pins the order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renames_within_one_file_directories_with_delete() {
    let src = tmp();
    let names: Vec<String> = (0..24).map(|i| format!("d{i}/old.txt")).collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), &b"same body"[..]))
        .collect();
    write_tree(src.path(), &files);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!((r.created, r.failed), (24, 0), "{:?}", r.failures);
    for i in 0..24 {
        std::fs::rename(
            src.path().join(format!("d{i}/old.txt")),
            src.path().join(format!("d{i}/new.txt")),
        )
        .expect("rename");
    }
    publish(src.path(), &server.base, None);
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(
        (r.created, r.deleted, r.failed),
        (24, 24, 0),
        "{:?}",
        r.failures
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// Files that become directories and directories that become files at the Source: with
/// `--delete`, a new copy whose path is blocked by a file or directory the same run deletes
/// waits for that delete (before, every such copy failed, "a file is where a directory is
/// needed", until the next run). Both ways, incremental and as a baseline diff.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_turned_into_directories_and_back_with_delete() {
    let src = tmp();
    let mut first: Vec<(String, &[u8])> =
        (0..8).map(|i| (format!("f{i}"), &b"a file"[..])).collect();
    first.extend((0..8).map(|i| (format!("g{i}/inner.txt"), &b"in a directory"[..])));
    let refs: Vec<(&str, &[u8])> = first.iter().map(|(p, b)| (p.as_str(), *b)).collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!((r.created, r.failed), (16, 0), "{:?}", r.failures);
    // f<i> becomes a directory holding f<i>/inner.txt; g<i>/ becomes a file g<i>.
    for i in 0..8 {
        let root = src.path();
        std::fs::remove_file(root.join(format!("f{i}"))).expect("rm f");
        std::fs::create_dir(root.join(format!("f{i}"))).expect("mkdir f");
        std::fs::write(root.join(format!("f{i}/inner.txt")), "now inside").expect("f/inner");
        std::fs::remove_dir_all(root.join(format!("g{i}"))).expect("rm g");
        std::fs::write(root.join(format!("g{i}")), "now a file").expect("g");
    }
    publish(src.path(), &server.base, None);
    // Without --delete the old copies stay, and block the new ones: the failures say what
    // clears them.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.kept, r.failed), (16, 16), "{:?}", r.failures);
    assert!(
        r.failures
            .iter()
            .all(|f| f.error.contains("`--delete` removes kept copies")),
        "{:?}",
        r.failures
    );
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(
        (r.created, r.deleted, r.failed),
        (16, 16, 0),
        "{:?}",
        r.failures
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // Back again, as a baseline diff: the Change List Index says its history starts after the
    // cursor, so the run diffs against the Resource List (deletes and creates in URI order).
    for i in 0..8 {
        let root = src.path();
        std::fs::remove_dir_all(root.join(format!("f{i}"))).expect("rm f/");
        std::fs::write(root.join(format!("f{i}")), "a file again").expect("f");
        std::fs::remove_file(root.join(format!("g{i}"))).expect("rm g");
        std::fs::create_dir(root.join(format!("g{i}"))).expect("mkdir g");
        std::fs::write(root.join(format!("g{i}/inner.txt")), "inside again").expect("g/inner");
    }
    publish(src.path(), &server.base, None);
    let index = std::fs::read_to_string(src.path().join("resourcesync/changelist-index.xml"))
        .expect("index");
    server.fault(
        "/resourcesync/changelist-index.xml",
        Fault::Body(history_from_2999(&index)),
    );
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    assert_eq!(
        (r.created, r.deleted, r.failed),
        (16, 16, 0),
        "{:?}",
        r.failures
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_delete_the_copy_stays_and_is_reported_once() {
    let src = tmp();
    write_tree(
        src.path(),
        &[("keep.txt", b"keep"), ("gone.txt", b"gone soon")],
    );
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    run(&o).await;
    std::fs::remove_file(src.path().join("gone.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    let r = run(&o).await;
    assert_eq!((r.deleted, r.kept), (0, 1));
    assert_eq!(r.kept_uris, [format!("{}gone.txt", server.base)]);
    assert!(dest.join("gone.txt").exists(), "kept without --delete");
    // Remembered: neither reported again nor fetched.
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.kept, r.created, r.failed), (0, 0, 0));
    assert_eq!(server.resource_hits(), 0);
    // The audit sees the kept copy as extra.
    let a = resourcesync_destination::audit(&audit_opts(&server.base, &dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(!a.in_sync);
    assert_eq!(a.extra.len(), 1);
    assert_eq!(a.extra[0].path.as_deref(), Some("gone.txt"));
    // A later run with --delete removes the remembered copy.
    let mut o = o;
    o.delete = true;
    let r = run(&o).await;
    assert_eq!((r.deleted, r.failed), (1, 0), "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_resource_list_is_read_part_by_part_and_audited() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..11)
        .map(|i| {
            (
                format!("d{}/f{i:02}.txt", i % 3),
                format!("file {i}").repeat(i + 1).into_bytes(),
            )
        })
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, Some(3));
    let out = tmp();
    let dest = dest_in(&out);
    // Start from the Resource List itself: discovery follows its up link.
    let cap =
        std::fs::read_to_string(src.path().join("resourcesync/capabilitylist.xml")).expect("cap");
    let rl = cap
        .split("<loc>")
        .nth(1)
        .and_then(|s| s.split("</loc>").next())
        .expect("rl loc")
        .to_owned();
    assert!(
        std::fs::read_to_string(src.path().join(rl.trim_start_matches(&server.base)))
            .expect("rl")
            .contains("<sitemapindex"),
        "published as an index"
    );
    let r = run(&options(&rl, &dest)).await;
    assert_eq!((r.created, r.failed), (11, 0), "{:?}", r.failures);
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // Audit: clean, then tampered.
    let a = resourcesync_destination::audit(&audit_opts(&server.base, &dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(a.in_sync, "{a:?}");
    assert_eq!((a.resources, a.in_sync_count), (11, 11));
    std::fs::write(dest.join("d0/f00.txt"), b"FILE 0").expect("tamper"); // same length
    std::fs::write(dest.join("d1/f01.txt"), b"short").expect("tamper");
    std::fs::remove_file(dest.join("d2/f02.txt")).expect("rm");
    std::fs::write(dest.join("stray.txt"), b"?").expect("stray");
    let a = resourcesync_destination::audit(&audit_opts(&server.base, &dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(!a.in_sync);
    let whys: Vec<(&str, &str)> = a
        .different
        .iter()
        .map(|d| (d.path.as_deref().unwrap_or(""), d.why.as_str()))
        .collect();
    assert_eq!(whys, [("d0/f00.txt", "digest"), ("d1/f01.txt", "length")]);
    assert_eq!(a.missing.len(), 1);
    assert_eq!(a.missing[0].path.as_deref(), Some("d2/f02.txt"));
    assert_eq!(a.extra.len(), 1);
    assert_eq!(a.extra[0].path.as_deref(), Some("stray.txt"));
    // --fast reads no copy: the change that kept the length goes unnoticed (the digest recorded
    // at download stands for the content), the rest is found as before.
    let mut fast = audit_opts(&server.base, &dest);
    fast.fast = true;
    let a = resourcesync_destination::audit(&fast, Arc::new(Quiet))
        .await
        .expect("audit --fast");
    let whys: Vec<(&str, &str)> = a
        .different
        .iter()
        .map(|d| (d.path.as_deref().unwrap_or(""), d.why.as_str()))
        .collect();
    assert_eq!(whys, [("d1/f01.txt", "length")]);
    assert_eq!((a.missing.len(), a.extra.len()), (1, 1));
    assert_eq!(
        a.in_sync_count, 9,
        "d0/f00.txt counted in sync by its recorded digest"
    );

    // A baseline sync repairs the removed and truncated copies (the state is checked against
    // the files). An incremental one leaves them: nothing changed at the Source (its first scan
    // is the baseline and recorded no change), so the cursor is cleared first.
    let o = options(&server.base, &dest);
    let st = resourcesync_store::SqliteState::open(&o.state_path()).expect("state");
    resourcesync_store::RecordWrites::set_cursor(
        &st,
        &resourcesync_store::SourceCursor {
            source: r.source.key(),
            cursor: None,
            synced_at: None,
            checked_at: None,
        },
    )
    .expect("cursor");
    drop(st);
    let r = run(&o).await;
    assert_eq!(r.failed, 0);
    assert_eq!(
        std::fs::read(dest.join("d2/f02.txt")).expect("repaired"),
        files[2].1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_hash_fails_that_resource_only() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("good1.txt", b"good one"),
            ("bad.txt", b"original"),
            ("good2.txt", b"good two"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    server.fault("/bad.txt", Fault::Body(b"tampered".to_vec())); // same length, other digest
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!((r.created, r.failed), (2, 1));
    assert!(
        r.failures[0].error.contains("md5 digest"),
        "{:?}",
        r.failures
    );
    assert_eq!(r.failures[0].path.as_deref(), Some("bad.txt"));
    assert!(!dest.join("bad.txt").exists(), "nothing at the final path");
    assert_eq!(
        std::fs::read_dir(dest.join(".resourcesync/tmp"))
            .expect("tmp")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("dl-"))
            .count(),
        0,
        "temporary file removed"
    );
    // Fixed at the Source: the next run retries it (pending) and fetches nothing else.
    server.clear_faults();
    server.reset_hits();
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!((r.created, r.failed), (1, 0), "{r:?}");
    assert_eq!(server.resource_hits(), 1);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_resumes_without_refetching() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| (format!("r{i}.bin"), vec![b'a' + i as u8; 100 + i]))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.concurrency = 1;
    // The server stalls after 3 resources; the run is cut off (as a kill would) once the
    // fourth request is stalled and the first three are reported done, i.e. committed (copies
    // are committed in batches, after their download slot is freed).
    let stalled = server.stall_after(3);
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let obs = Arc::new(Counting {
        left: std::sync::Mutex::new(3),
        tx: std::sync::Mutex::new(done_tx),
    });
    let task = tokio::spawn({
        let o = o.clone();
        async move { sync(&o, obs).await }
    });
    tokio::task::spawn_blocking(move || {
        stalled.recv().expect("stalled");
        done_rx.recv().expect("three done");
    })
    .await
    .expect("join");
    task.abort();
    let _ = task.await;
    let done: Vec<String> = dest_files(&dest).into_keys().collect();
    assert_eq!(done.len(), 3, "{done:?}");
    for (p, c) in dest_files(&dest) {
        assert_eq!(Some(&c), source_files(src.path()).get(&p), "{p} intact");
    }
    server.clear_faults();
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.created, r.unchanged, r.failed), (5, 3, 0), "{r:?}");
    for p in &done {
        assert_eq!(server.hits(&format!("/{p}")), 0, "{p} refetched");
    }
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// A Change List Index whose history (its first `from`) starts in 2999: after any cursor, so a
/// Destination that reads it has a gap to fill from the Resource List.
fn history_from_2999(index: &str) -> Vec<u8> {
    let from = index
        .split("from=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .map(|f| format!("from=\"{f}\""))
        .expect("from");
    index
        .replace(&from, "from=\"2999-01-01T00:00:00Z\"")
        .into_bytes()
}

fn rl_doc(entries: &[(String, Option<(u64, String)>)]) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n<rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>\n",
    );
    for (loc, md) in entries {
        s.push_str(&format!("<url><loc>{loc}</loc>"));
        if let Some((len, hash)) = md {
            s.push_str(&format!("<rs:md length=\"{len}\" hash=\"{hash}\"/>"));
        }
        s.push_str("</url>\n");
    }
    s.push_str("</urlset>\n");
    s
}

fn md5_of(b: &[u8]) -> String {
    let (_, h) = resourcesync_model::MultiHasher::new(&[resourcesync_model::HashAlg::Md5])
        .hash_reader(b)
        .expect("hash");
    h.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_locs_are_refused_and_nothing_is_written_outside() {
    let root = tmp();
    write_tree(
        root.path(),
        &[
            ("ok.txt", b"fine"),
            ("x", b"secret"),
            ("long.txt", b"0123456789ABCDEF"),
        ],
    );
    let server = Server::start(root.path()).await;
    let b = server.base.trim_end_matches('/').to_owned();
    let port = server.addr.port();
    let entries = vec![
        (format!("{b}/../x"), None),
        (format!("{b}/%2e%2e/x"), None),
        (format!("{b}/a/%2E%2E/%2e%2e/x"), None),
        (format!("{b}/..%2fx"), None),
        (format!("{b}/a%00b"), None),
        (format!("{b}/a%5C..%5Cx"), None),
        (format!("{b}/{}", "n".repeat(300)), None),
        (format!("{b}/ok.txt"), Some((4, md5_of(b"fine")))),
        // Served longer than published: cut off at the length and rejected.
        (format!("{b}/long.txt"), Some((4, md5_of(b"0123")))),
        (format!("{b}/missing.txt"), None),
        (
            format!("http://localhost:{port}/ok.txt"),
            Some((4, md5_of(b"fine"))),
        ),
    ];
    write_tree(
        root.path(),
        &[("hostile/rl.xml", rl_doc(&entries).as_bytes())],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&format!("{b}/hostile/rl.xml"), &dest)).await;
    assert!(r.source.plain_sitemap || r.source.capability_list.is_none());
    assert_eq!(r.created, 2, "{r:?}");
    assert_eq!(r.failed, 9, "{:?}", r.failures);
    let refused = r
        .failures
        .iter()
        .filter(|f| f.error.starts_with("refused"))
        .count();
    assert_eq!(refused, 7, "{:?}", r.failures);
    assert!(
        r.failures
            .iter()
            .any(|f| f.uri.ends_with("/long.txt") && f.error.contains("longer than 4")),
        "{:?}",
        r.failures
    );
    assert!(
        r.failures
            .iter()
            .any(|f| f.uri.ends_with("/missing.txt") && f.error.contains("404")),
        "{:?}",
        r.failures
    );
    assert_eq!(server.hits("/x"), 0, "refused URIs are never fetched");
    let outside: Vec<String> = std::fs::read_dir(out.path())
        .expect("out")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(outside, ["dest"]);
    let copies: Vec<String> = dest_files(&dest).into_keys().collect();
    assert_eq!(
        copies,
        [format!("localhost_{port}/ok.txt"), "ok.txt".to_owned()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_that_lists_itself_ends() {
    let root = tmp();
    write_tree(root.path(), &[("a.txt", b"aaa")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    let index = format!(
        "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>\
         <sitemap><loc>{b}hostile/index.xml</loc></sitemap><sitemap><loc>{b}hostile/part.xml</loc></sitemap>\
         <sitemap><loc>{b}hostile/part.xml</loc></sitemap></sitemapindex>"
    );
    let part = rl_doc(&[(format!("{b}a.txt"), Some((3, md5_of(b"aaa"))))]);
    write_tree(
        root.path(),
        &[
            ("hostile/index.xml", index.as_bytes()),
            ("hostile/part.xml", part.as_bytes()),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&format!("{b}hostile/index.xml"), &dest)).await;
    assert_eq!((r.created, r.failed), (1, 0));
    assert!(
        r.warnings.iter().any(|w| w.contains("lists itself")),
        "{:?}",
        r.warnings
    );
    // Once by discovery, once by the walk; never again through its own entry.
    assert_eq!(server.hits("/hostile/index.xml"), 2);
    assert_eq!(server.hits("/hostile/part.xml"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_paths_and_several_sets() {
    let root = tmp();
    write_tree(root.path(), &[("a.txt", b"aaa")]);
    let server = Server::start(root.path()).await;
    publish(root.path(), &server.base, None);
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/capabilitylist.xml");
    let http =
        Arc::new(resourcesync_destination::http::Http::new(Default::default()).expect("http"));
    let scratch = tmp();
    let f = resourcesync_destination::docs::DocFetcher::new(http, scratch.path(), 1 << 20);

    // Without the well-known URI: robots.txt's Sitemap line (the Resource List, then up).
    server.fault("/.well-known/resourcesync", Fault::Status(404));
    let rl = std::fs::read_to_string(root.path().join("resourcesync/capabilitylist.xml"))
        .expect("cap")
        .split("<loc>")
        .nth(1)
        .and_then(|s| s.split("</loc>").next())
        .expect("rl")
        .to_owned();
    write_tree(
        root.path(),
        &[(
            "robots.txt",
            format!("User-agent: *\nSitemap: {rl}\n").as_bytes(),
        )],
    );
    let i = resourcesync_destination::discover(&f, &b, None)
        .await
        .expect("robots");
    assert_eq!(i.capability_list.as_deref(), Some(cap.as_str()));

    // A page with an HTML link, and a Link header.
    std::fs::remove_file(root.path().join("robots.txt")).expect("rm");
    write_tree(
        root.path(),
        &[(
            "hostile/page.html",
            format!("<html><head><link rel=\"resourcesync\" href=\"{cap}\"></head></html>")
                .as_bytes(),
        )],
    );
    let i = resourcesync_destination::discover(&f, &format!("{b}hostile/page.html"), None)
        .await
        .expect("html link");
    assert_eq!(i.capability_list.as_deref(), Some(cap.as_str()));
    write_tree(root.path(), &[("hostile/plain.txt", b"text")]);
    server.fault(
        "/hostile/plain.txt",
        Fault::Header("link", format!("<{cap}>; rel=\"resourcesync\"")),
    );
    let i = resourcesync_destination::discover(&f, &format!("{b}hostile/plain.txt"), None)
        .await
        .expect("link header");
    assert_eq!(i.capability_list.as_deref(), Some(cap.as_str()));

    // Several Capability Lists: an error naming them, or the one chosen with --set.
    let desc = format!(
        "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"description\"/>\
         <url><loc>{cap}</loc><rs:md capability=\"capabilitylist\"/></url>\
         <url><loc>{b}other/capabilitylist.xml</loc><rs:md capability=\"capabilitylist\"/></url></urlset>"
    );
    write_tree(root.path(), &[("hostile/desc.xml", desc.as_bytes())]);
    let e = resourcesync_destination::discover(&f, &format!("{b}hostile/desc.xml"), None)
        .await
        .expect_err("several");
    assert!(
        matches!(e, Error::SeveralSets { ref found, .. } if found.len() == 2),
        "{e}"
    );
    assert!(e.to_string().contains("--set"), "{e}");
    let i = resourcesync_destination::discover(&f, &format!("{b}hostile/desc.xml"), Some(&cap))
        .await
        .expect("set");
    assert_eq!(i.capability_list.as_deref(), Some(cap.as_str()));
    assert_eq!(
        i.description.as_deref(),
        Some(format!("{b}hostile/desc.xml").as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_nothing() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"a"), ("b.txt", b"bb")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.dry_run = true;
    let r = run(&o).await;
    assert!(r.dry_run);
    assert_eq!(r.created, 2);
    assert_eq!(r.planned.len(), 2);
    assert!(!dest.exists(), "nothing written");
    assert_eq!(server.resource_hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_across_rotated_change_lists_and_a_history_gap() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"a"), ("b.txt", b"b")]);
    let server = Server::start(src.path()).await;
    let rotate = |cfg: &mut resourcesync_source::SourceConfig| {
        cfg.scan.rotation.max_entries = 1;
    };
    publish_with(src.path(), &server.base, rotate);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    run(&o).await;
    // Several scans, each closing Change Lists: a.txt changes twice (collapsed to the last).
    write_tree(src.path(), &[("a.txt", b"a, second")]);
    publish_with(src.path(), &server.base, rotate);
    write_tree(
        src.path(),
        &[("a.txt", b"a, third and last"), ("c.txt", b"c")],
    );
    publish_with(src.path(), &server.base, rotate);
    let index = std::fs::read_to_string(src.path().join("resourcesync/changelist-index.xml"))
        .expect("index");
    assert!(index.matches("<sitemap>").count() > 2, "{index}");
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (1, 1, 0), "{r:?}");
    assert_eq!(server.hits("/a.txt"), 1, "two changes, one fetch");
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // The history no longer reaches the cursor: a baseline diff instead.
    write_tree(src.path(), &[("b.txt", b"b, changed")]);
    publish_with(src.path(), &server.base, rotate);
    server.fault(
        "/resourcesync/changelist-index.xml",
        Fault::Body(history_from_2999(&index)),
    );
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("change history starts")),
        "{:?}",
        r.warnings
    );
    assert_eq!((r.updated, r.failed), (1, 0));
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_are_retried_and_retry_after_honoured() {
    let src = tmp();
    write_tree(src.path(), &[("x.txt", b"x"), ("y.txt", b"y")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    server.fault("/x.txt", Fault::Flaky(503, 2));
    server.fault("/y.txt", Fault::Flaky(429, 1));
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!((r.created, r.failed), (2, 0), "{r:?}");
    assert_eq!(server.hits("/x.txt"), 3);
    assert_eq!(server.hits("/y.txt"), 2);
    // Past the retries: reported, not fatal.
    let out = tmp();
    let dest = dest_in(&out);
    server.fault("/x.txt", Fault::Flaky(500, 10));
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!((r.created, r.failed), (1, 1), "{r:?}");
    assert!(r.failures[0].error.contains("HTTP 500"), "{:?}", r.failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_responses_time_out() {
    let src = tmp();
    write_tree(src.path(), &[("fast.txt", b"fast"), ("slow.txt", b"slow")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    server.fault("/slow.txt", Fault::Stall);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.http.read_timeout = std::time::Duration::from_millis(300);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!((r.created, r.failed), (1, 1), "{r:?}");
    assert!(!dest.join("slow.txt").exists());
    // The overall limit ends a run whatever it waits for; what is done is kept.
    server.fault("/resourcesync/capabilitylist.xml", Fault::Stall);
    let mut o = options(&server.base, &dest);
    o.deadline = Some(std::time::Duration::from_millis(500));
    let e = sync(&o, Arc::new(Quiet)).await.expect_err("deadline");
    assert!(matches!(e, Error::Deadline(_)), "{e}");
    assert!(dest.join("fast.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_are_tried_in_priority_order_then_the_loc() {
    let root = tmp();
    write_tree(
        root.path(),
        &[
            ("r.txt", b"resource"),
            ("m1/r.txt", b"resource"),
            ("m2/r.txt", b"resource"),
            ("s.txt", b"second"),
            ("m3/s.txt", b"SECOND"),
        ],
    );
    let server = Server::start(root.path()).await;
    let b = &server.base;
    let (r, s) = (md5_of(b"resource"), md5_of(b"second"));
    let doc = format!(
        "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\"><rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>\
         <url><loc>{b}r.txt</loc><rs:md length=\"8\" hash=\"{r}\"/>\
         <rs:ln rel=\"duplicate\" pri=\"2\" href=\"{b}m2/r.txt\"/>\
         <rs:ln rel=\"duplicate\" pri=\"1\" href=\"{b}m1/r.txt\"/>\
         <rs:ln rel=\"duplicate\" pri=\"3\" href=\"gsiftp://grid.example.org/r.txt\"/></url>\
         <url><loc>{b}s.txt</loc><rs:md length=\"6\" hash=\"{s}\"/>\
         <rs:ln rel=\"duplicate\" href=\"{b}m3/s.txt\"/></url></urlset>"
    );
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    server.fault("/m1/r.txt", Fault::Status(500));
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/rl.xml"), &dest);
    o.http.retries = 0;
    let rep = run(&o).await;
    assert_eq!((rep.created, rep.failed), (2, 0), "{rep:?}");
    assert_eq!(
        (
            server.hits("/m1/r.txt"),
            server.hits("/m2/r.txt"),
            server.hits("/r.txt")
        ),
        (1, 1, 0),
        "pri 1, then pri 2, which serves it"
    );
    // A mirror serving other content is rejected; the <loc> is fetched instead.
    assert_eq!((server.hits("/m3/s.txt"), server.hits("/s.txt")), (1, 1));
    assert_eq!(std::fs::read(dest.join("s.txt")).expect("s"), b"second");
    assert_eq!(std::fs::read(dest.join("r.txt")).expect("r"), b"resource");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_are_not_utf8_after_decoding_are_refused_clearly() {
    let root = tmp();
    write_tree(root.path(), &[("ok.txt", b"fine")]);
    let server = Server::start(root.path()).await;
    let b = server.base.trim_end_matches('/').to_owned();
    // Latin-1 "café.txt": the byte E9 alone is not UTF-8.
    let entries = vec![
        (format!("{b}/caf%E9.txt"), Some((4, md5_of(b"fine")))),
        (format!("{b}/ok.txt"), Some((4, md5_of(b"fine")))),
    ];
    write_tree(root.path(), &[("l/rl.xml", rl_doc(&entries).as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&format!("{b}/l/rl.xml"), &dest)).await;
    assert_eq!((r.created, r.failed), (1, 1), "{:?}", r.failures);
    let f = &r.failures[0];
    assert!(f.uri.ends_with("/caf%E9.txt"), "{f:?}");
    assert!(
        f.error.contains("not UTF-8") && f.error.contains("%E9"),
        "the error names the segment and the rule: {}",
        f.error
    );
    assert_eq!(server.hits("/caf%E9.txt"), 0, "never fetched");
    let copies: Vec<String> = dest_files(&dest).into_keys().collect();
    assert_eq!(copies, ["ok.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_prior_knowledge_is_opt_in() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    // The test server (axum) answers both HTTP/1.1 and h2c with prior knowledge: it records
    // the version of every request.
    for (prior_knowledge, expect) in [(false, "HTTP/1.1"), (true, "HTTP/2.0")] {
        let out = tmp();
        let dest = dest_in(&out);
        let mut o = options(&server.base, &dest);
        o.http.http2_prior_knowledge = prior_knowledge;
        server.reset_hits();
        let r = run(&o).await;
        assert_eq!((r.created, r.failed), (1, 0));
        assert_eq!(
            server.versions(),
            [expect],
            "prior knowledge {prior_knowledge}"
        );
    }
}

/// An incremental checks every copy beside the run proper (`fetch/repair.rs`, `Scan`), and
/// judges what that check noted against the rows as they are once the changes are applied: a
/// copy deleted at the destination is fetched again, one whose time was changed gets its time
/// back without a download, and one damaged at the destination that the Source also updated
/// is fetched once, as the update, never again at the version the state held before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_repairs_beside_the_changes_against_the_rows_after_them() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("gone.txt", b"deleted at the destination"),
            ("both.txt", b"damaged here, updated there"),
            ("touched.txt", b"only its time changed"),
            ("fine.txt", b"left alone"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!((r.created, r.failed), (4, 0), "{:?}", r.failures);
    let touched_at = std::fs::metadata(dest.join("touched.txt"))
        .and_then(|m| m.modified())
        .expect("mtime");

    std::fs::remove_file(dest.join("gone.txt")).expect("rm");
    std::fs::write(dest.join("both.txt"), b"short").expect("damage");
    std::fs::File::options()
        .write(true)
        .open(dest.join("touched.txt"))
        .and_then(|f| f.set_modified(touched_at + std::time::Duration::from_secs(3600)))
        .expect("touch");
    write_tree(
        src.path(),
        &[("both.txt", b"updated at the Source, another length")],
    );
    publish(src.path(), &server.base, None);

    server.reset_hits();
    let mut o = o.clone();
    o.check_now = true;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(
        (r.updated, r.repaired, r.failed),
        (1, 1, 0),
        "{:?}",
        r.failures
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));
    assert_eq!(server.hits("/both.txt"), 1, "fetched once, as the update");
    assert_eq!(server.hits("/gone.txt"), 1);
    assert_eq!(
        server.hits("/touched.txt"),
        0,
        "same content: its time set back"
    );
    assert_eq!(server.hits("/fine.txt"), 0);
    assert_eq!(
        std::fs::metadata(dest.join("touched.txt"))
            .and_then(|m| m.modified())
            .expect("mtime"),
        touched_at
    );
}
