//! Sync and audit cannot disagree: both consume the one march's verdicts (`crate::march`), so
//! on the same copies, what a dry run of sync would fetch is what an audit finds not in sync,
//! what it would remove is what the audit finds extra, and what it leaves alone is what the
//! audit finds in sync (Z39.99-2014 §5.2: the comparison is the Destination's, made once).

use crate::common;
use crate::hand;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::*;
use hand::*;
use resourcesync_destination::{AuditReport, Mode, Quiet, SyncReport, sync};

/// Publishes a Source of only a Resource List (so that every later run is a baseline diff)
/// listing `entries` (name, `<rs:md>` attributes) at `at`.
fn publish_list(root: &std::path::Path, b: &str, at: &str, entries: &[(&str, String)]) {
    let cap = format!("{b}rs/cap.xml");
    // An entry whose attributes are a `<lastmod>` (no length, no digest) is written with it.
    let urls: Vec<String> = entries
        .iter()
        .map(|(name, md)| match md.strip_prefix("lastmod=") {
            Some(t) => format!(
                "<url><loc>{b}{name}</loc><lastmod>{}</lastmod></url>\n",
                t.trim_matches('"')
            ),
            None => url(&format!("{b}{name}"), md),
        })
        .collect();
    let rl = urlset(
        Some(&cap),
        &format!("capability=\"resourcelist\" at=\"{at}\""),
        &urls,
    );
    let cl = capability_list(&[("resourcelist", format!("{b}rs/rl.xml"))]);
    write_tree(
        root,
        &[("rs/cap.xml", cl.as_bytes()), ("rs/rl.xml", rl.as_bytes())],
    );
}

/// The URIs a dry run would fetch (create or update) and remove (delete or keep).
fn planned(r: &SyncReport) -> (BTreeSet<String>, BTreeSet<String>) {
    let of = |actions: &[&str]| {
        r.planned
            .iter()
            .filter(|p| actions.contains(&p.action))
            .map(|p| p.uri.clone())
            .collect()
    };
    (of(&["create", "update"]), of(&["delete", "keep"]))
}

/// The URIs an audit finds not in sync (missing or different) and extra.
fn audited(a: &AuditReport) -> (BTreeSet<String>, BTreeSet<String>) {
    let not_in_sync = a
        .missing
        .iter()
        .chain(&a.different)
        .map(|d| d.uri.clone())
        .collect();
    let extra = a.extra.iter().map(|d| d.uri.clone()).collect();
    (not_in_sync, extra)
}

/// Every verdict the march gives, on one set of copies: the same copy; a changed length; a
/// changed digest (same length); a changed `<lastmod>` only (no length, no digest published);
/// a copy removed from disk; a copy damaged on disk (another length); a copy the Source no
/// longer lists (a delete); a new resource (a create).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_of_sync_and_an_audit_give_the_same_verdicts() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}rs/cap.xml");
    let lastmod = |t: &str| format!("lastmod=\"{t}\"");
    let v1: [(&str, &[u8]); 7] = [
        ("same.txt", b"the same"),
        ("length.txt", b"short"),
        ("digest.txt", b"abcdef"),
        ("lastmod.txt", b"dated"),
        ("missing.txt", b"removed by hand"),
        ("damaged.txt", b"appended to by hand"),
        ("gone.txt", b"no longer listed"),
    ];
    write_tree(src.path(), &v1);
    let entries: Vec<(&str, String)> = v1
        .iter()
        .map(|(n, body)| match *n {
            "lastmod.txt" => (*n, lastmod(T1)),
            _ => (*n, lh(body)),
        })
        .collect();
    publish_list(src.path(), &b, T1, &entries);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.delete = true;
    let r = sync(&o, Arc::new(Quiet)).await.expect("first sync");
    assert_eq!((r.created, r.failed), (7, 0), "{r:?}");

    // The Source changes; the copies are damaged by hand.
    let v2: [(&str, &[u8]); 7] = [
        ("same.txt", b"the same"),
        ("length.txt", b"longer than before"),
        ("digest.txt", b"ABCDEF"),
        ("lastmod.txt", b"dated"),
        ("missing.txt", b"removed by hand"),
        ("damaged.txt", b"appended to by hand"),
        ("new.txt", b"a new resource"),
    ];
    write_tree(src.path(), &v2);
    let entries: Vec<(&str, String)> = v2
        .iter()
        .map(|(n, body)| match *n {
            "lastmod.txt" => (*n, lastmod(T2)),
            _ => (*n, lh(body)),
        })
        .collect();
    publish_list(src.path(), &b, T2, &entries);
    std::fs::remove_file(dest.join("missing.txt")).expect("rm");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dest.join("damaged.txt"))
        .expect("open");
    std::io::Write::write_all(&mut f, b" and more").expect("append");
    drop(f);

    let mut dry = o.clone();
    dry.dry_run = true;
    let r = sync(&dry, Arc::new(Quiet)).await.expect("dry run");
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    let a = resourcesync_destination::audit(&crate::sync::audit_opts(&cap, &dest), Arc::new(Quiet))
        .await
        .expect("audit");
    let (fetched, removed) = planned(&r);
    let (not_in_sync, extra) = audited(&a);
    let uris =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| format!("{b}{n}")).collect() };
    // Each fixture gave its verdict (the comparison below is not of two empty sets).
    assert_eq!(
        fetched,
        uris(&[
            "length.txt",
            "digest.txt",
            "lastmod.txt",
            "missing.txt",
            "damaged.txt",
            "new.txt"
        ]),
        "{:#?}",
        r.planned
    );
    assert_eq!(removed, uris(&["gone.txt"]), "{:#?}", r.planned);
    // Sync and audit agree.
    assert_eq!(not_in_sync, fetched, "audit: {a:#?}");
    assert_eq!(extra, removed, "audit: {a:#?}");
    assert_eq!(a.in_sync_count, r.unchanged, "audit: {a:#?}; sync: {r:?}");
    assert_eq!(r.unchanged, 1);

    // The sync proper does what its dry run said (a damaged copy is counted as repaired), and
    // then the audit finds nothing to do either.
    let r = sync(&o, Arc::new(Quiet)).await.expect("sync");
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(
        (r.created + r.updated + r.repaired, r.deleted, r.unchanged),
        (fetched.len() as u64, removed.len() as u64, 1),
        "{r:?}"
    );
    let a = resourcesync_destination::audit(&crate::sync::audit_opts(&cap, &dest), Arc::new(Quiet))
        .await
        .expect("audit");
    assert!(a.in_sync, "{a:#?}");
    assert_eq!(a.in_sync_count, 7);
}
