//! Republishing (Z39.99-2014 §14.8): the aggregator follows two Sources (ours,
//! a directory published by `resourcesync-source`; one written by hand) and is itself a
//! Source: its Source Description lists one Capability List per Source; every Resource List
//! entry carries `<rs:ln rel="via">` to the original with the original's digest, length and
//! datetime; every document validates; our Destination syncs from it and gets the same bytes;
//! a change at an original shows in the aggregator's Change List.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use resourcesync_aggregate::republish::Republish;
use resourcesync_aggregate::{Aggregator, Options, StateChoice};
use resourcesync_destination::{Quiet, SyncOptions};
use resourcesync_model::reader::{DocumentReader, ReadOptions};
use resourcesync_model::validate::validate_each;
use resourcesync_model::{Capability, Change, Entry, HashAlg};
use resourcesync_source::{BaseOrigin, Source, SourceConfig};
use resourcesync_testkit::Server;

use crate::service::{config, hand_written, until};

/// Publishes `dir` as a Source at `base` (documents inside it).
async fn publish(dir: &Path, base: &str) {
    let (dir, base) = (dir.to_owned(), base.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut s = Source::open(SourceConfig::new(&dir, &base)).expect("open source");
        s.scan().expect("scan");
        s.publish().expect("publish");
    })
    .await
    .expect("publish task");
}

/// A document fetched and validated (no error), with its entries.
pub(crate) async fn document(url: &str) -> (Option<Capability>, Vec<Entry>) {
    let r = reqwest::get(url).await.expect("GET");
    assert_eq!(r.status().as_u16(), 200, "{url}");
    let ct = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(ct.starts_with("application/xml"), "{url}: {ct}");
    let body = r.bytes().await.expect("body");
    let mut entries = Vec::new();
    let report = validate_each(
        DocumentReader::new(&body[..], ReadOptions::named(url)).expect("reader"),
        |e| entries.push(e.clone()),
    )
    .expect("validate");
    assert!(report.is_valid(), "{url}: {:?}", report.findings);
    (report.capability, entries)
}

/// The URL of the entry of `capability` in a Capability List.
pub(crate) fn named(entries: &[Entry], capability: Capability) -> String {
    entries
        .iter()
        .find(|e| e.md.as_ref().and_then(|m| m.capability.clone()) == Some(capability.clone()))
        .map(|e| e.loc.clone())
        .unwrap_or_else(|| panic!("no {capability:?} in {entries:?}"))
}

pub(crate) fn md5_of(e: &Entry) -> Option<String> {
    e.md.as_ref()?.hash.as_ref()?.value_of(&HashAlg::Md5)
}

/// The aggregator on a listener of its own, republishing under its address.
pub(crate) async fn aggregator(text: &str, store: &Path) -> (Arc<Aggregator>, String) {
    aggregator_in(text, store, None).await
}

/// [`aggregator`], with the copies in the bucket at `object_store` when given.
pub(crate) async fn aggregator_in(
    text: &str,
    store: &Path,
    object_store: Option<String>,
) -> (Arc<Aggregator>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}/", listener.local_addr().expect("addr"));
    let agg = Arc::new(
        Aggregator::start(
            &config(text),
            Options {
                store: store.to_owned(),
                state: StateChoice::PerSource,
                worker: "test".into(),
                object_store,
                republish: Some(Republish {
                    base_url: base.clone(),
                    origin: BaseOrigin::Listen,
                }),
            },
        )
        .expect("start"),
    );
    let router = resourcesync_aggregate::web::router(agg.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (agg, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aggregator_republishes_what_it_copied_with_provenance() {
    let ours_dir = tempfile::tempdir().expect("tempdir");
    let ours = Server::start(ours_dir.path()).await;
    for i in 0..5 {
        std::fs::write(
            ours_dir.path().join(format!("r{i}.txt")),
            format!("resource {i}\n"),
        )
        .expect("write");
    }
    std::fs::create_dir(ours_dir.path().join("sub")).expect("mkdir");
    std::fs::write(ours_dir.path().join("sub/deep.txt"), b"deep\n").expect("write");
    publish(ours_dir.path(), &ours.base).await;
    let hand = hand_written().await;
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"ours\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n\n\
         [[source]]\nname = \"hand\"\nurl = \"{}.well-known/resourcesync\"\nschedule = \"1s\"\n",
        ours.base, hand.base
    );
    let (agg, base) = aggregator(&text, store.path()).await;
    let limit = Duration::from_secs(60);
    for name in ["ours", "hand"] {
        let v = until(&agg, name, limit, |v| v.republishes >= 1).await;
        assert!(v.republish_error.is_none(), "{v:#?}");
    }

    // The Source Description: one Capability List per Source (Z39.99-2014 §6.3.2, §8), at the
    // well-known URI and under /rs/.
    let (cap, entries) = document(&format!("{base}.well-known/resourcesync")).await;
    assert_eq!(cap, Some(Capability::Description));
    let mut caps: Vec<String> = entries.iter().map(|e| e.loc.clone()).collect();
    caps.sort();
    assert_eq!(
        caps,
        [
            format!("{base}rs/hand/resourcesync/capabilitylist.xml"),
            format!("{base}rs/ours/resourcesync/capabilitylist.xml"),
        ]
    );
    let (_, under) = document(&format!("{base}rs/.well-known/resourcesync")).await;
    assert_eq!(under.len(), 2);

    for (name, origin_base) in [("ours", &ours.base), ("hand", &hand.base)] {
        let capl = format!("{base}rs/{name}/resourcesync/capabilitylist.xml");
        let (cap, c) = document(&capl).await;
        assert_eq!(cap, Some(Capability::CapabilityList));
        let (_, list) = document(&named(&c, Capability::ResourceList)).await;
        document(&named(&c, Capability::ChangeList)).await;
        let want = if name == "ours" { 6 } else { 2 };
        assert_eq!(list.len(), want, "{name}: {list:?}");
        for e in &list {
            entry_has_its_provenance(e, &base, name, origin_base).await;
        }
    }
    // Hand-written datetimes, carried as published.
    let (_, c) = document(&format!("{base}rs/hand/resourcesync/capabilitylist.xml")).await;
    let (_, hand_list) = document(&named(&c, Capability::ResourceList)).await;
    let one = hand_list
        .iter()
        .find(|e| e.loc.ends_with("x/one.txt"))
        .expect("one");
    assert_eq!(
        one.links[0].modified.map(|m| m.to_string()).as_deref(),
        Some("2026-10-01T00:00:00Z")
    );

    // Our Destination syncs from the aggregator (one of its Capability Lists) and gets the
    // same bytes as the aggregator's copies, which are the originals'.
    for name in ["ours", "hand"] {
        a_destination_gets_the_copies(&base, name, &store.path().join(name)).await;
    }

    // A change at the original shows in the aggregator's Change List, with its provenance.
    let before = agg.status().get("ours").expect("ours").republishes;
    std::fs::write(ours_dir.path().join("r1.txt"), b"resource 1, changed\n").expect("write");
    std::fs::remove_file(ours_dir.path().join("r3.txt")).expect("rm");
    publish(ours_dir.path(), &ours.base).await;
    a_change_is_republished(&agg, &base, &ours.base, before, limit).await;
    // The deleted copy is no longer served.
    let gone = reqwest::get(format!("{base}rs/ours/r3.txt"))
        .await
        .expect("GET");
    assert_eq!(gone.status().as_u16(), 404);
    // Nothing else of the folder is served: the Destination's state, paths out of it.
    for p in [
        "rs/ours/.resourcesync/state.sqlite",
        "rs/ours/.resourcesync/republish/state.sqlite",
        "rs/ours/..%2fhand/x/one.txt",
        "rs/nobody/r1.txt",
    ] {
        let r = reqwest::get(format!("{base}{p}")).await.expect("GET");
        assert!(
            matches!(r.status().as_u16(), 400 | 404),
            "{p}: {}",
            r.status()
        );
    }
    // The page for operators is still there.
    assert_eq!(
        reqwest::get(format!("{base}api/sources"))
            .await
            .expect("GET")
            .status()
            .as_u16(),
        200
    );
}

/// A republished entry: one `via` link to the original (at `origin_base`), the copy served
/// with the original's bytes, length, digest and datetime (Z39.99-2014 §14.8).
async fn entry_has_its_provenance(e: &Entry, base: &str, name: &str, origin_base: &str) {
    let rel = e
        .loc
        .strip_prefix(&format!("{base}rs/{name}/"))
        .unwrap_or_else(|| panic!("{} not under the aggregator", e.loc));
    let via: Vec<_> = e.links.iter().filter(|l| l.rel == "via").collect();
    assert_eq!(via.len(), 1, "{}", e.loc);
    let via = via[0];
    assert_eq!(via.href, format!("{origin_base}{rel}"), "the original URI");
    // The original's bytes, digest and length; its datetime.
    let original = reqwest::get(&via.href)
        .await
        .expect("GET")
        .bytes()
        .await
        .expect("body");
    let copy = reqwest::get(&e.loc).await.expect("GET copy");
    assert_eq!(copy.status().as_u16(), 200, "{}", e.loc);
    assert_eq!(copy.bytes().await.expect("copy"), original, "{}", e.loc);
    let md = e.md.as_ref().expect("md");
    assert_eq!(md.length, Some(original.len() as u64));
    assert_eq!(via.length, Some(original.len() as u64));
    assert_eq!(
        via.hash.as_ref().and_then(|h| h.value_of(&HashAlg::Md5)),
        md5_of(e),
        "{}",
        e.loc
    );
    assert!(via.modified.is_some(), "{}", e.loc);
    assert_eq!(
        e.lastmod, via.modified,
        "{}: the copy keeps the original's datetime",
        e.loc
    );
}

/// Our Destination, syncing the republished Source `name`, gets the bytes of the copies in
/// `copies`.
async fn a_destination_gets_the_copies(base: &str, name: &str, copies: &Path) {
    let dest = tempfile::tempdir().expect("dest");
    let mut opts = SyncOptions::new(format!("{base}.well-known/resourcesync"), dest.path());
    opts.set = Some(format!("{base}rs/{name}/resourcesync/capabilitylist.xml"));
    let r = resourcesync_destination::sync(&opts, Arc::new(Quiet))
        .await
        .expect("sync from the aggregator");
    assert_eq!(r.failed, 0, "{r:?}");
    let got = resourcesync_testkit::tree::files(dest.path(), &[".resourcesync"]);
    let copies = resourcesync_testkit::tree::files(copies, &[".resourcesync"]);
    assert!(!copies.is_empty());
    assert_eq!(strip(&got, &format!("rs/{name}/")), copies, "{name}");
}

/// After republish number `before`, the open Change List of `ours` has `r1.txt` updated (with
/// its provenance and digest) and `r3.txt` deleted.
async fn a_change_is_republished(
    agg: &Aggregator,
    base: &str,
    ours_base: &str,
    before: u64,
    limit: Duration,
) {
    let capl = format!("{base}rs/ours/resourcesync/capabilitylist.xml");
    let deadline = std::time::Instant::now() + limit;
    loop {
        until(agg, "ours", limit, |v| v.republishes > before).await;
        let (_, c) = document(&capl).await;
        // What the Capability List names: the open Change List itself (Z39.99-2014 §12.1).
        let (_, changes) = document(&named(&c, Capability::ChangeList)).await;
        let updated = changes.iter().find(|e| {
            e.loc == format!("{base}rs/ours/r1.txt")
                && e.md.as_ref().and_then(|m| m.change.clone()) == Some(Change::Updated)
        });
        let deleted = changes.iter().any(|e| {
            e.loc == format!("{base}rs/ours/r3.txt")
                && e.md.as_ref().and_then(|m| m.change.clone()) == Some(Change::Deleted)
        });
        if let (Some(u), true) = (updated, deleted) {
            let via = u.links.iter().find(|l| l.rel == "via").expect("via");
            assert_eq!(via.href, format!("{ours_base}r1.txt"));
            assert_eq!(
                md5_of(u).as_deref(),
                Some(md5_hex(b"resource 1, changed\n").as_str())
            );
            assert_eq!(
                via.hash.as_ref().and_then(|h| h.value_of(&HashAlg::Md5)),
                md5_of(u)
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no change republished: {changes:?}"
        );
    }
}

pub(crate) fn md5_hex(b: &[u8]) -> String {
    use md5::Digest as _;
    hex::encode(md5::Md5::digest(b))
}

/// The files of a Destination of the aggregator, with the prefix its URIs map under removed
/// when it is there.
fn strip(files: &BTreeMap<String, Vec<u8>>, prefix: &str) -> BTreeMap<String, Vec<u8>> {
    files
        .iter()
        .map(|(k, v)| (k.strip_prefix(prefix).unwrap_or(k).to_owned(), v.clone()))
        .collect()
}

/// A hand-written Source whose Resource List is `list` (`(loc, body)` entries; the bodies of
/// its own URIs are served under their paths).
fn evil_list(s: &resourcesync_testkit::Server, list: &[(&str, &[u8])]) {
    let b = &s.base;
    let mut urls = String::new();
    for (loc, body) in list {
        urls.push_str(&format!(
            "  <url><loc>{loc}</loc><rs:md hash=\"md5:{}\" length=\"{}\"/></url>\n",
            md5_hex(body),
            body.len()
        ));
        if let Some(path) = loc.strip_prefix(b.as_str()) {
            s.route(&format!("/{path}"), resourcesync_testkit::Reply::ok(*body));
        }
    }
    s.route(
        "/list.xml",
        resourcesync_testkit::Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:ln rel="up" href="{b}caps.xml"/>
  <rs:md capability="resourcelist" at="2026-11-01T00:00:00Z"/>
{urls}</urlset>"#
        )),
    );
}

/// Provenance spoofed by a path collision (SECURITY.md, "Two URIs, one path"): a Source lists
/// its own `BASE/victim.example/doc.txt`, then also `http://victim.example/doc.txt` with the
/// same digest. Both map to `victim.example/doc.txt` in its folder; the second must not be
/// recorded against the first one's bytes, so no republished entry claims
/// `rel="via" href="http://victim.example/doc.txt"` for bytes that came from the Source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_collision_does_not_spoof_a_via() {
    let evil = resourcesync_testkit::Server::empty().await;
    let b = evil.base.clone();
    evil.route(
        "/.well-known/resourcesync",
        resourcesync_testkit::Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="description"/>
  <url><loc>{b}caps.xml</loc><rs:md capability="capabilitylist"/></url>
</urlset>"#
        )),
    );
    evil.route(
        "/caps.xml",
        resourcesync_testkit::Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:ln rel="up" href="{b}.well-known/resourcesync"/>
  <rs:md capability="capabilitylist"/>
  <url><loc>{b}list.xml</loc><rs:md capability="resourcelist"/></url>
</urlset>"#
        )),
    );
    let own = format!("{b}victim.example/doc.txt");
    let victim = "http://victim.example/doc.txt";
    let body: &[u8] = b"the Source's bytes, not victim.example's\n";
    evil_list(&evil, &[(&own, body)]);
    let store = tempfile::tempdir().expect("store");
    let text = format!(
        "[[source]]\nname = \"evil\"\nurl = \"{b}.well-known/resourcesync\"\nschedule = \"1s\"\n"
    );
    let (agg, base) = aggregator(&text, store.path()).await;
    let limit = Duration::from_secs(60);
    let v = until(&agg, "evil", limit, |v| v.republishes >= 1).await;
    assert!(v.republish_error.is_none(), "{v:#?}");
    // Now the other host's URI too, with the digest of the copy in place.
    evil_list(&evil, &[(&own, body), (victim, body)]);
    let syncs = v.syncs;
    let v = until(&agg, "evil", limit, |v| {
        v.syncs >= syncs + 2 && v.republishes >= 3 && !v.running
    })
    .await;
    let capl = format!("{base}rs/evil/resourcesync/capabilitylist.xml");
    let (_, c) = document(&capl).await;
    let (_, list) = document(&named(&c, Capability::ResourceList)).await;
    let vias: Vec<(String, String)> = list
        .iter()
        .flat_map(|e| {
            e.links
                .iter()
                .filter(|l| l.rel == "via")
                .map(|l| (e.loc.clone(), l.href.clone()))
        })
        .collect();
    assert_eq!(
        vias,
        [(format!("{base}rs/evil/victim.example/doc.txt"), own.clone())],
        "{v:#?}"
    );
    // The refusal is a failure of the Source's sync (the resource's, kept as pending), and
    // the copy in place is still the Source's own.
    assert!(
        v.recent.iter().any(|e| e.summary.contains("1 failed")),
        "{:#?}",
        v.recent
    );
    assert_eq!(
        std::fs::read(store.path().join("evil/victim.example/doc.txt")).expect("copy"),
        body
    );
}
