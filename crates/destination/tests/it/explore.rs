//! Explore: the tree of a Source's documents, each validated, against an in-process Source on
//! 127.0.0.1 (live, or a published tree with injected faults).

use crate::common;
use crate::live;

use std::collections::HashSet;
use std::sync::Arc;

use common::*;
use resourcesync_destination::{
    Error, ExploreNode, ExploreOptions, ExploreReport, NodeStatus, Quiet, explore,
};

fn opts(url: &str) -> ExploreOptions {
    let mut o = ExploreOptions::new(url);
    o.http.retries = 0;
    o.http.read_timeout = std::time::Duration::from_secs(5);
    o
}

async fn run(o: &ExploreOptions) -> ExploreReport {
    explore(o, Arc::new(Quiet)).await.expect("explore")
}

fn nodes(r: &ExploreReport) -> Vec<&ExploreNode> {
    fn walk<'a>(n: &'a ExploreNode, out: &mut Vec<&'a ExploreNode>) {
        out.push(n);
        for c in &n.children {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    for r in &r.roots {
        walk(r, &mut out);
    }
    out
}

fn of_kind<'a>(r: &'a ExploreReport, kind: &str) -> Vec<&'a ExploreNode> {
    nodes(r)
        .into_iter()
        .filter(|n| n.kind == kind && n.status != NodeStatus::Repeated)
        .collect()
}

fn dump(r: &ExploreReport) -> String {
    format!("{r:#?}")
}

fn files(n: usize) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("d{}/f{i}.txt", i % 3),
                format!("file {i}").into_bytes(),
            )
        })
        .collect()
}

fn write_files(root: &std::path::Path, files: &[(String, Vec<u8>)]) {
    let v: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    write_tree(root, &v);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_source_is_explored_from_its_root_and_is_valid() {
    let src = tmp();
    write_files(src.path(), &files(7));
    let running = live::live(src.path(), |c| {
        c.publish.split.max_entries = 3;
        c.publish.dumps = true;
    })
    .await;
    // A change, so that the Change List has entries after the first snapshot.
    write_tree(src.path(), &[("d0/f0.txt", b"changed")]);
    running.publisher().batch(false).await.expect("batch");

    let r = run(&opts(running.base_url())).await;
    assert!(r.is_valid(), "{}", dump(&r));
    assert_eq!((r.invalid, r.unreadable, r.skipped), (0, 0, 0));
    // Source Description (§8) → Capability List (§9) → capability documents.
    assert_eq!(r.roots.len(), 1, "{}", dump(&r));
    let top = &r.roots[0];
    assert_eq!(top.kind, "Source Description");
    assert_eq!(top.url, running.source_description_url());
    assert_eq!(top.children.len(), 1);
    let cl = &top.children[0];
    assert_eq!(cl.kind, "Capability List");
    let kinds: HashSet<&str> = cl.children.iter().map(|c| c.kind.as_str()).collect();
    for k in [
        "Resource List Index",
        // What the Capability List names: the open Change List, fitting in one document
        // (Z39.99-2014 §12.1); its index is reached through its `index` link.
        "Change List",
        "Resource Dump",
        "Change Dump",
        "Resource List Archive",
        "Change List Archive",
    ] {
        assert!(kinds.contains(k), "{k} missing: {kinds:?}");
    }
    // The Resource List Index (§10.2): 7 entries in parts of 3.
    let rli = cl
        .children
        .iter()
        .find(|c| c.kind == "Resource List Index")
        .expect("index");
    assert_eq!(rli.children.len(), 3, "{}", dump(&r));
    assert!(rli.at.is_some());
    let parts: Vec<&ExploreNode> = rli
        .children
        .iter()
        .filter(|c| c.kind == "Resource List")
        .collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts.iter().map(|p| p.entries.unwrap_or(0)).sum::<u64>(), 7);
    assert!(parts.iter().all(|p| p.via == "part" && p.span.is_some()));
    // The Change List Index (§12.2) and its open Change List, with a time span.
    assert_eq!(of_kind(&r, "Change List Index").len(), 1, "{}", dump(&r));
    let cls = of_kind(&r, "Change List");
    assert!(!cls.is_empty(), "{}", dump(&r));
    assert!(cls.iter().all(|c| c.from.is_some() && c.span.is_some()));
    // The Resource Dump (§11.1): packages listed, manifests (§11.2) read through `contents`.
    let packages: Vec<&ExploreNode> = nodes(&r)
        .into_iter()
        .filter(|n| n.status == NodeStatus::Package)
        .collect();
    assert!(!packages.is_empty(), "{}", dump(&r));
    let manifests = of_kind(&r, "Resource Dump Manifest");
    assert!(!manifests.is_empty());
    assert!(manifests.iter().all(|m| m.via == "contents"));
    // Each document is read once.
    let read: Vec<&str> = nodes(&r)
        .into_iter()
        .filter(|n| matches!(n.status, NodeStatus::Valid | NodeStatus::Invalid))
        .map(|n| n.url.as_str())
        .collect();
    let unique: HashSet<&str> = read.iter().copied().collect();
    assert_eq!(read.len(), unique.len(), "{read:?}");
    assert_eq!(r.documents as usize, read.len());

    // From a deep document, discovery climbs to the same tree (§6.2 `up` links).
    let deep = parts[1].url.clone();
    let r2 = run(&opts(&deep)).await;
    assert_eq!(r2.roots.len(), 1);
    assert_eq!(r2.roots[0].kind, "Source Description");
    assert_eq!(r2.documents, r.documents);
    running.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parts_documents_and_depth_are_bounded() {
    let src = tmp();
    write_files(src.path(), &files(9));
    let running = live::live(src.path(), |c| {
        c.publish.split.max_entries = 2;
    })
    .await;
    let mut o = opts(running.base_url());
    o.max_parts = 1;
    let r = run(&o).await;
    let rli = of_kind(&r, "Resource List Index");
    assert_eq!(rli.len(), 1, "{}", dump(&r));
    assert_eq!(rli[0].children.len(), 1, "one part read");
    assert_eq!(rli[0].more, 4, "9 entries in 5 parts: 4 not followed");
    assert!(r.not_expanded >= 4);
    assert!(r.is_valid());

    let mut o = opts(running.base_url());
    o.max_documents = 3;
    let r = run(&o).await;
    assert_eq!(r.documents, 3, "{}", dump(&r));
    assert!(r.skipped > 0);
    assert!(
        nodes(&r)
            .iter()
            .any(|n| n.status == NodeStatus::Skipped && !n.messages.is_empty())
    );

    let mut o = opts(running.base_url());
    o.max_depth = 1;
    let r = run(&o).await;
    assert_eq!(
        r.documents, 2,
        "Source Description and Capability List only"
    );
    assert!(r.skipped > 0);
    running.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_mislabelled_and_unreadable_documents_are_reported() {
    let src = tmp();
    write_files(src.path(), &files(5));
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, Some(2));
    let r = run(&opts(&server.base)).await;
    assert!(r.is_valid(), "{}", dump(&r));
    let parts: Vec<String> = of_kind(&r, "Resource List")
        .iter()
        .map(|n| n.url.clone())
        .collect();
    assert_eq!(parts.len(), 3, "{}", dump(&r));
    let cli = of_kind(&r, "Change List Index")[0].url.clone();
    let path = |u: &str| {
        u.strip_prefix(server.base.trim_end_matches('/'))
            .expect("under base")
            .to_owned()
    };

    // A part that breaks MUSTs (no `at`, §10.1; a relative <loc>, §7), a part that is gone, and
    // a Change List Index that is in fact a Resource List (§9, §12.2).
    server.fault(
        &path(&parts[0]),
        Fault::Body(
            br#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="resourcelist"/>
  <url><loc>not/absolute.txt</loc></url>
</urlset>"#
                .to_vec(),
        ),
    );
    server.fault(&path(&parts[1]), Fault::Status(404));
    server.fault(
        &path(&cli),
        Fault::Body(
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:ln rel="up" href="{}resourcesync/capabilitylist.xml"/>
  <rs:md capability="resourcelist" at="2024-01-01T00:00:00Z"/>
  <url><loc>{}x.txt</loc></url>
</urlset>"#,
                server.base, server.base
            )
            .into_bytes(),
        ),
    );
    let r = run(&opts(&server.base)).await;
    assert!(!r.is_valid());
    assert_eq!((r.invalid, r.unreadable), (2, 1), "{}", dump(&r));
    let by_url = |u: &str| {
        nodes(&r)
            .into_iter()
            .find(|n| n.url == u && n.status != NodeStatus::Repeated)
            .expect("node")
            .clone()
    };
    let bad = by_url(&parts[0]);
    assert_eq!(bad.status, NodeStatus::Invalid);
    assert!(bad.errors >= 2, "{bad:?}");
    assert!(!bad.messages.is_empty() && bad.messages.len() <= 3);
    assert!(bad.messages.iter().all(|m| m.contains("error[")), "{bad:?}");
    let gone = by_url(&parts[1]);
    assert_eq!(gone.status, NodeStatus::Unreadable);
    assert!(gone.messages[0].contains("404"), "{gone:?}");
    let mislabelled = by_url(&cli);
    assert_eq!(mislabelled.status, NodeStatus::Invalid);
    assert!(
        mislabelled.messages[0].contains("listed as changelist"),
        "{mislabelled:?}"
    );
    // The rest is still explored.
    assert_eq!(by_url(&parts[2]).status, NodeStatus::Valid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_that_lists_itself_is_shown_once_and_discovery_failure_is_fatal() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let me = format!("{}hostile/loop.xml", server.base);
    server.fault(
        "/hostile/loop.xml",
        Fault::Body(
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="resourcelist" at="2024-01-01T00:00:00Z"/>
  <sitemap><loc>{me}</loc></sitemap>
  <sitemap><loc>{me}</loc></sitemap>
</sitemapindex>"#
            )
            .into_bytes(),
        ),
    );
    let r = run(&opts(&me)).await;
    assert_eq!(r.roots.len(), 1, "{}", dump(&r));
    assert_eq!(r.documents, 1);
    let top = &r.roots[0];
    assert_eq!(top.kind, "Resource List Index");
    assert_eq!(top.children.len(), 2);
    assert!(
        top.children
            .iter()
            .all(|c| c.status == NodeStatus::Repeated)
    );

    // Nothing to discover: a fatal error (exit 2 on the command line).
    let empty = tmp();
    let server = Server::start(empty.path()).await;
    let e = explore(&opts(&server.base), Arc::new(Quiet))
        .await
        .expect_err("nothing to explore");
    assert!(matches!(e, Error::Discovery { .. }), "{e}");
}
