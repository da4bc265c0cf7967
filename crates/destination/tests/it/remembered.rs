//! Remembered discovery: an incremental starts from the documents the last run found
//! (conditional GETs, one round trip), and falls back to a full discovery when they answer with
//! something unexpected, applying every change all the same (Z39.99-2014 §12).

use crate::common;
use crate::hand;

use std::sync::Arc;

use common::*;
use hand::{T1, T2, capability_list, lh, url, urlset};
use resourcesync_destination::{Mode, Quiet, SyncReport, sync};
use resourcesync_testkit::server::Reply;

async fn run(o: &resourcesync_destination::SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

/// Every request the server answered since its last reset.
fn total_hits(s: &Server) -> u64 {
    s.shared.hits.lock().expect("hits").values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_with_nothing_changed_costs_at_most_three_requests() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("sub/b.txt", b"bravo")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    // From the site root: discovery goes through the well-known URI (Z39.99-2014 §6.3.2).
    let o = options(&server.base, &dest);
    assert_eq!(run(&o).await.mode, Mode::Baseline);
    for round in 0..2 {
        server.reset_hits();
        let r = run(&o).await;
        assert_eq!(r.mode, Mode::Incremental);
        assert_eq!((r.created, r.updated, r.deleted, r.failed), (0, 0, 0, 0));
        let hits = total_hits(&server);
        assert!(
            hits <= 3,
            "round {round}: {hits} requests: {:?}",
            server.shared.hits.lock().expect("hits")
        );
        assert_eq!(server.hits("/.well-known/resourcesync"), 0, "rediscovered");
    }
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_open_change_list_is_read_and_applied() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("sub/b.txt", b"bravo")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.delete = true;
    run(&o).await;
    for (i, body) in [&b"alpha, again"[..], b"alpha, a third time"]
        .iter()
        .enumerate()
    {
        write_tree(
            src.path(),
            &[("a.txt", body), (&format!("new{i}.txt"), b"new")],
        );
        if i == 1 {
            std::fs::remove_file(src.path().join("sub/b.txt")).expect("rm");
        }
        publish(src.path(), &server.base, None);
        server.reset_hits();
        let r = run(&o).await;
        assert_eq!(r.mode, Mode::Incremental);
        assert_eq!(
            (r.created, r.updated, r.deleted, r.failed),
            (1, 1, u64::try_from(i).expect("i"), 0),
            "{:?}",
            r.failures
        );
        assert_eq!(dest_files(&dest), source_files(src.path()));
        assert_eq!(server.hits("/.well-known/resourcesync"), 0, "rediscovered");
        // The documents (at most three, at once) and the two resources changed.
        assert!(total_hits(&server) <= 5, "{}", total_hits(&server));
    }
}

/// A hand-made Source served from memory: a Source Description at the well-known URI naming
/// the Capability List at `cap`, a Resource List of `a.txt` at T1, and a single Change List
/// (`/cl.xml`, from T1) of `changes` linking to its index when `index` is given.
pub(crate) fn hand_source(s: &Server, cap: &str, changes: &[String], index: Option<&str>) {
    let b = &s.base;
    let sd = urlset(
        None,
        "capability=\"description\"",
        &[url(
            &format!("{b}{}", cap.trim_start_matches('/')),
            "capability=\"capabilitylist\"",
        )],
    );
    s.route("/.well-known/resourcesync", Reply::xml(sd));
    s.route(
        cap,
        Reply::xml(capability_list(&[
            ("resourcelist", format!("{b}rl.xml")),
            ("changelist", format!("{b}cl.xml")),
        ])),
    );
    s.route(
        "/rl.xml",
        Reply::xml(urlset(
            None,
            &format!("capability=\"resourcelist\" at=\"{T1}\""),
            &[url(&format!("{b}a.txt"), &lh(b"alpha"))],
        )),
    );
    let mut cl = urlset(
        None,
        &format!("capability=\"changelist\" from=\"{T1}\""),
        changes,
    );
    if let Some(ix) = index {
        cl = cl.replacen(
            "<rs:md",
            &format!("<rs:ln rel=\"index\" href=\"{b}{ix}\"/>\n<rs:md"),
            1,
        );
        let ixdoc = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex {}>\n\
             <rs:md capability=\"changelist\" from=\"{T1}\"/>\n\
             <sitemap><loc>{b}cl.xml</loc><rs:md capability=\"changelist\" from=\"{T1}\"/></sitemap>\n\
             </sitemapindex>\n",
            hand::NS
        );
        s.route(&format!("/{ix}"), Reply::xml(ixdoc));
    }
    s.route("/cl.xml", Reply::xml(cl));
    s.route("/a.txt", Reply::ok(&b"alpha"[..]));
    s.route("/b.txt", Reply::ok(&b"bravo"[..]));
}

pub(crate) fn created_b(s: &Server) -> String {
    url(
        &format!("{}b.txt", s.base),
        &format!("change=\"created\" datetime=\"{T2}\" {}", lh(b"bravo")),
    )
}

pub(crate) fn created_a(s: &Server) -> String {
    url(
        &format!("{}a.txt", s.base),
        &format!("change=\"created\" datetime=\"{T1}\" {}", lh(b"alpha")),
    )
}

/// After a fallback, the next run starts from what the fallback found: at most three
/// requests, none to the well-known URI.
async fn next_run_is_quick(server: &Server, o: &resourcesync_destination::SyncOptions) {
    server.reset_hits();
    let r = run(o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (0, 0, 0));
    let hits = total_hits(server);
    assert!(
        hits <= 3,
        "{hits}: {:?}",
        server.shared.hits.lock().expect("hits")
    );
    assert_eq!(server.hits("/.well-known/resourcesync"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_list_that_moved_falls_back_to_discovery() {
    let server = Server::empty().await;
    hand_source(&server, "/cap.xml", &[created_a(&server)], None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    assert_eq!(run(&o).await.mode, Mode::Baseline);
    next_run_is_quick(&server, &o).await;
    // The Capability List moves (the old URL answers 404) and b.txt is created.
    hand_source(
        &server,
        "/moved/cap.xml",
        &[created_a(&server), created_b(&server)],
        None,
    );
    server.fault("/cap.xml", Fault::Status(404));
    // A Source of another Capability List: a baseline diff of the copy (the state is kept
    // per Capability List), which keeps a.txt and fetches b.txt.
    let r = run(&o).await;
    assert_eq!(
        (r.created, r.unchanged, r.failed),
        (1, 1, 0),
        "{:?}",
        r.failures
    );
    assert_eq!(
        r.source.capability_list,
        Some(format!("{}moved/cap.xml", server.base))
    );
    assert!(dest.join("b.txt").is_file());
    next_run_is_quick(&server, &o).await;
    assert_eq!(server.hits("/moved/cap.xml"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_that_404s_falls_back_to_discovery() {
    let server = Server::empty().await;
    hand_source(&server, "/cap.xml", &[created_a(&server)], Some("ix.xml"));
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    assert_eq!(run(&o).await.mode, Mode::Baseline);
    next_run_is_quick(&server, &o).await;
    assert_eq!(server.hits("/ix.xml"), 1, "the index is asked for");
    // The Source drops its index (404; Z39.99-2014 §12.2: an index may be rewritten) and
    // b.txt is created in its Change List.
    hand_source(
        &server,
        "/cap.xml",
        &[created_a(&server), created_b(&server)],
        None,
    );
    server.fault("/ix.xml", Fault::Status(404));
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.failed), (1, 0), "{:?}", r.failures);
    assert!(dest.join("b.txt").is_file());
    next_run_is_quick(&server, &o).await;
    assert_eq!(server.hits("/ix.xml"), 0, "the index is forgotten");
}

/// A Capability List that moved while a resource was dropped (Z39.99-2014 §9): the copies are
/// carried over to the new Capability List, so the baseline against its Resource List deletes
/// the copy of the resource it no longer lists (`--delete`), instead of leaving it recorded
/// under the old one for ever; what it still lists is not fetched again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_list_that_moved_carries_the_copies_over() {
    let server = Server::empty().await;
    hand_source(
        &server,
        "/cap.xml",
        &[created_a(&server), created_b(&server)],
        None,
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert!(dest.join("a.txt").is_file() && dest.join("b.txt").is_file());
    // The Capability List moves, and b.txt is no longer published.
    hand_source(&server, "/moved/cap.xml", &[created_a(&server)], None);
    server.fault("/cap.xml", Fault::Status(404));
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!((r.deleted, r.unchanged, r.failed), (1, 1, 0), "{r:?}");
    assert!(
        !dest.join("b.txt").exists(),
        "the dropped resource's copy is deleted"
    );
    assert!(dest.join("a.txt").is_file());
    assert_eq!(
        server.hits("/a.txt"),
        0,
        "a copy still listed is not fetched again"
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("moved from")),
        "{:?}",
        r.warnings
    );
    next_run_is_quick(&server, &o).await;

    // It moves back, b.txt published again: the old Capability List's cursor from before
    // the first move does not count (a baseline, which fetches b.txt again).
    server.clear_faults();
    hand_source(
        &server,
        "/cap.xml",
        &[created_a(&server), created_b(&server)],
        None,
    );
    server.fault("/moved/cap.xml", Fault::Status(404));
    let r = run(&o).await;
    assert!(
        matches!(r.mode, Mode::Baseline | Mode::BaselineDiff),
        "{r:?}"
    );
    assert_eq!((r.created, r.failed), (1, 0), "{r:?}");
    assert_eq!(std::fs::read(dest.join("b.txt")).expect("b"), b"bravo");
}

/// What the Capability List names as the Change List is a plain, open Change List while the
/// open period fits in one document, and the Change List Index when it does not (Z39.99-2014
/// §12.1, §12.2): across runs the same URL turns from one into the other and back. Each
/// incremental run stays incremental and applies every change, including those of a period
/// closed since the last run, found through the plain list's `index` link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_list_turning_from_an_index_into_a_list_and_back_loses_no_change() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("b.txt", b"bravo")]);
    let server = Server::start(src.path()).await;
    // One entry makes a document; three changes close a period.
    let small = |cfg: &mut resourcesync_source::SourceConfig| {
        cfg.publish.split.max_entries = 1;
        cfg.scan.rotation.max_entries = 3;
    };
    let is_index = || {
        std::fs::read_to_string(src.path().join("resourcesync/changelist.xml"))
            .expect("changelist.xml")
            .contains("<sitemapindex")
    };
    publish_with(src.path(), &server.base, small);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    assert_eq!(run(&o).await.mode, Mode::Baseline);

    // Two changes in the open period: past one document, an index.
    write_tree(src.path(), &[("c.txt", b"charlie"), ("d.txt", b"delta")]);
    publish_with(src.path(), &server.base, small);
    assert!(is_index());
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.updated, r.failed), (2, 0, 0), "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // e.txt fills the period, which closes; a.txt's update opens the next one, alone: a plain
    // list, whose history starts after this Destination's cursor.
    write_tree(src.path(), &[("e.txt", b"echo")]);
    publish_with(src.path(), &server.base, small);
    write_tree(src.path(), &[("a.txt", b"alpha, changed")]);
    publish_with(src.path(), &server.base, small);
    assert!(!is_index());
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.updated, r.failed), (1, 1, 0), "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // And back to an index.
    write_tree(src.path(), &[("f.txt", b"foxtrot")]);
    publish_with(src.path(), &server.base, small);
    assert!(is_index());
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.updated, r.failed), (1, 0, 0), "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// The Capability List names the open Change List (`changelist.xml`), which links to its index;
/// the index lists the same open list under its period's name. A walk from the open list reads
/// it once: the index's open part is taken from it, not fetched again (the catch-up after a
/// baseline walks so, as does any run that discovered the Source anew).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_change_list_is_read_once_through_its_index() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    write_tree(src.path(), &[("a.txt", b"alpha, changed")]);
    publish(src.path(), &server.base, None);
    let index = std::fs::read_to_string(src.path().join("resourcesync/changelist-index.xml"))
        .expect("index");
    assert!(index.contains("changelists/00001.xml"), "{index}");
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!((r.mode, r.failed), (Mode::Baseline, 0));
    // Each read beside the baseline, then asked for again after it (crate::sync::ahead).
    assert_eq!(server.hits("/resourcesync/changelist.xml"), 2);
    assert_eq!(server.hits("/resourcesync/changelist-index.xml"), 2);
    assert_eq!(
        server.hits("/resourcesync/changelists/00001.xml"),
        0,
        "the open list fetched again as the index's part"
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));
}
