//! The hostile Source fixture set: each case is served on loopback, synced,
//! and must end with the expected clear error, no file that is not a verified copy, and nothing
//! written outside DEST. Where each case lives:
//!
//! | case | test |
//! | --- | --- |
//! | zip slip (`/../../x`, absolute, backslashes), zip bombs (ratio, lying sizes) | `dump.rs`: `hostile_packages_are_refused_and_nothing_wrong_is_written` |
//! | zip bomb past the total unpacked size | `dump.rs`: `a_package_past_the_unpacked_budget_is_refused` |
//! | `<loc>` with `..`, encoded traversal, NUL, backslashes, other hosts, 10,000-char names | `locs_with_traversal_nul_other_hosts_and_long_names` |
//! | billion laughs, external entities | `entity_tricks_in_a_list_stop_the_sync` (the reader's own cases: `model/tests/it/hostile.rs`) |
//! | an index that includes itself | `sync.rs`: `an_index_that_lists_itself_ends` |
//! | an index recursing 1,000 deep | `an_index_recursing_1000_deep_is_refused` |
//! | a 1 GB document | `a_1_gb_document_is_refused_unread`, `a_1_gb_chunked_document_is_cut_at_the_limit` (1 MiB) and `..._at_the_default_limit` (256 MiB) |
//! | a body longer than its `length`, or than the limit | `bodies_longer_than_published_are_cut_off` |
//! | wrong digests | `wrong_digests_are_refused` |
//! | a failed copy in a new directory (no empty directory left) | `a_failed_copy_leaves_no_directory_made_for_it`; in a package: `dump.rs`: `a_failed_package_entry_leaves_no_directory_made_for_it` |
//! | redirect loops, redirects to other schemes | `redirect_loops_end_with_a_clear_error` |
//! | a Change List going back in time | `a_change_list_going_back_in_time_falls_back_to_the_resource_list` |
//! | a slowloris Source | `a_slowloris_source_is_cut_by_the_timeouts` |

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use resourcesync_destination::{Error, Mode, Quiet, SyncOptions, SyncReport, sync};

const NS: &str = "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                  xmlns:rs=\"http://www.openarchives.org/rs/terms/\"";

fn md5_of(b: &[u8]) -> String {
    let (_, h) = resourcesync_model::MultiHasher::new(&[resourcesync_model::HashAlg::Md5])
        .hash_reader(b)
        .expect("hash");
    h.to_string()
}

/// A Resource List of `(loc, md)` entries (`md` the inside of `<rs:md .../>`).
fn rl(entries: &[(String, String)]) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\"?>\n<urlset {NS}>\n<rs:md capability=\"resourcelist\" at=\"2020-01-01T00:00:00Z\"/>\n"
    );
    for (loc, md) in entries {
        s.push_str(&format!("<url><loc>{loc}</loc><rs:md {md}/></url>\n"));
    }
    s.push_str("</urlset>\n");
    s
}

fn md(body: &[u8]) -> String {
    format!("length=\"{}\" hash=\"{}\"", body.len(), md5_of(body))
}

/// Nothing beside DEST in its parent, and under DEST only `expected` (relative paths).
fn contained(out: &Path, dest: &Path, expected: &[&str]) {
    let beside: Vec<String> = std::fs::read_dir(out)
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        beside.is_empty() || beside == ["dest"],
        "written outside DEST: {beside:?}"
    );
    let files: Vec<String> = dest_files(dest).into_keys().collect();
    assert_eq!(files, expected, "files under DEST");
}

async fn run(o: &SyncOptions) -> Result<SyncReport, Error> {
    sync(o, Arc::new(Quiet)).await
}

fn failure<'a>(r: &'a SyncReport, uri_end: &str) -> &'a str {
    r.failures
        .iter()
        .find(|f| f.uri.ends_with(uri_end))
        .map(|f| f.error.as_str())
        .unwrap_or_else(|| panic!("no failure for {uri_end}: {:?}", r.failures))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locs_with_traversal_nul_other_hosts_and_long_names() {
    let root = tmp();
    write_tree(root.path(), &[("ok.txt", b"fine"), ("secret", b"secret")]);
    let server = Server::start(root.path()).await;
    let b = server.base.trim_end_matches('/').to_owned();
    let long_name = "n".repeat(10_000);
    let long_path = vec!["d"; 5_000].join("/");
    let cases: Vec<(String, &str)> = vec![
        (format!("{b}/../secret"), "dot segment"),
        (format!("{b}/a/../../secret"), "dot segment"),
        (format!("{b}/%2e%2e/secret"), "dot segment"),
        (format!("{b}/%2E%2e%2Fsecret"), "refused"),
        (format!("{b}/a%2f..%2f..%2fsecret"), "refused"),
        (format!("{b}/a%5c..%5c..%5csecret"), "refused"),
        (format!("{b}/a%00.txt"), "refused"),
        // The Destination's own folder (state, temporary files).
        (
            format!("{b}/.resourcesync/state.sqlite"),
            "own .resourcesync folder",
        ),
        (
            format!("{b}/%2eresourcesync/tmp/x"),
            "own .resourcesync folder",
        ),
        (format!("{b}/{long_name}"), "refused"),
        (format!("{b}/{long_path}/x"), "refused"),
        // Another host maps under DEST/<host>_<port>/ (never outside); this one is not there.
        ("http://127.0.0.1:1/x.txt".to_owned(), "connect"),
        ("file:///etc/passwd".to_owned(), "refused"),
    ];
    let mut entries: Vec<(String, String)> = cases
        .iter()
        .map(|(u, _)| (u.clone(), md(b"secret")))
        .collect();
    entries.push((format!("{b}/ok.txt"), md(b"fine")));
    write_tree(root.path(), &[("hostile/rl.xml", rl(&entries).as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}/hostile/rl.xml"), &dest);
    o.http.retries = 0;
    let r = run(&o).await.expect("sync");
    assert_eq!(
        (r.created, r.failed),
        (1, cases.len() as u64),
        "{:?}",
        r.failures
            .iter()
            .map(|f| &f.error[..f.error.len().min(200)])
            .collect::<Vec<_>>()
    );
    for (uri, expect) in &cases {
        let f = r
            .failures
            .iter()
            .find(|f| &f.uri == uri)
            .unwrap_or_else(|| panic!("{uri}: not failed"));
        assert!(f.error.contains(expect), "{uri}: {f:?}");
        eprintln!(
            "{} chars: {}",
            uri.len(),
            &f.error[..f.error.len().min(160)]
        );
    }
    assert_eq!(server.hits("/secret"), 0, "refused URIs are never fetched");
    contained(out.path(), &dest, &["ok.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entity_tricks_in_a_list_stop_the_sync() {
    let root = tmp();
    write_tree(root.path(), &[("a.txt", b"aaa")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    let mut laughs =
        String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE urlset [\n<!ENTITY l \"lol\">\n");
    for i in 1..=9 {
        let prev = if i == 1 {
            "l".to_owned()
        } else {
            format!("l{}", i - 1)
        };
        laughs.push_str(&format!(
            "<!ENTITY l{i} \"{}\">\n",
            format!("&{prev};").repeat(10)
        ));
    }
    laughs.push_str(&format!(
        "]>\n<urlset {NS}><rs:md capability=\"resourcelist\"/><url><loc>{b}a.txt&l9;</loc></url></urlset>"
    ));
    let xxe = format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE urlset [ <!ENTITY x SYSTEM \"file:///etc/passwd\"> ]>\n\
         <urlset {NS}><rs:md capability=\"resourcelist\"/><url><loc>{b}&x;</loc></url></urlset>"
    );
    let undeclared = format!(
        "<?xml version=\"1.0\"?>\n<urlset {NS}><rs:md capability=\"resourcelist\"/>\n<url><loc>{b}&x;</loc></url></urlset>"
    );
    for (name, doc, line) in [
        ("laughs.xml", laughs, 2),
        ("xxe.xml", xxe, 2),
        ("undeclared.xml", undeclared, 3),
    ] {
        write_tree(root.path(), &[(&format!("hostile/{name}"), doc.as_bytes())]);
        let out = tmp();
        let dest = dest_in(&out);
        let url = format!("{b}hostile/{name}");
        let e = run(&options(&url, &dest)).await.expect_err(name);
        let msg = e.to_string();
        eprintln!("{name}: {msg}");
        // Named as the document it was found (discovery tries it first).
        assert!(
            matches!(e, Error::Document { .. } | Error::Discovery { .. }),
            "{name}: {e:?}"
        );
        assert!(
            msg.contains(&format!("{url}:{line}:")),
            "{name}: document and line: {msg}"
        );
        assert!(
            msg.contains("XML-no-dtd") || msg.contains("entit"),
            "{name}: the rule: {msg}"
        );
        assert!(!msg.contains("root:"), "{name}: leaked a file: {msg}");
        contained(out.path(), &dest, &[]);
    }
    assert_eq!(server.hits("/a.txt"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_recursing_1000_deep_is_refused() {
    let root = tmp();
    write_tree(root.path(), &[("a.txt", b"aaa")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    let mut files = Vec::new();
    for i in 0..1000 {
        files.push((
            format!("hostile/ix{i}.xml"),
            format!(
                "<sitemapindex {NS}><rs:md capability=\"resourcelist\" at=\"2020-01-01T00:00:00Z\"/>\
                 <sitemap><loc>{b}hostile/ix{}.xml</loc></sitemap></sitemapindex>",
                i + 1
            ),
        ));
    }
    files.push((
        "hostile/ix1000.xml".into(),
        rl(&[(format!("{b}a.txt"), md(b"aaa"))]),
    ));
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_bytes()))
        .collect();
    write_tree(root.path(), &refs);
    let out = tmp();
    let dest = dest_in(&out);
    let e = run(&options(&format!("{b}hostile/ix0.xml"), &dest))
        .await
        .expect_err("too deep");
    eprintln!("{e}");
    assert!(matches!(e, Error::IndexTooDeep { .. }), "{e:?}");
    assert!(e.to_string().contains("hostile/ix3.xml"), "{e}");
    // Nothing past the limit is fetched.
    assert_eq!(server.hits("/hostile/ix4.xml"), 0);
    assert_eq!(server.hits("/a.txt"), 0);
    contained(out.path(), &dest, &[]);
}

/// A Resource List head, then spaces: valid up to where it is cut.
fn list_prefix() -> Vec<u8> {
    format!("<?xml version=\"1.0\"?>\n<urlset {NS}><rs:md capability=\"resourcelist\"/>")
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gb_document_is_refused_unread() {
    let root = tmp();
    let server = Server::start(root.path()).await;
    server.fault(
        "/hostile/huge.xml",
        Fault::Huge {
            prefix: list_prefix(),
            total: 1 << 30,
            declare_length: true,
        },
    );
    let out = tmp();
    let dest = dest_in(&out);
    let started = Instant::now();
    let e = run(&options(&format!("{}hostile/huge.xml", server.base), &dest))
        .await
        .expect_err("huge");
    eprintln!("{e} ({:?})", started.elapsed());
    assert!(
        e.to_string()
            .contains("larger than the 268435456 bytes allowed"),
        "{e}"
    );
    contained(out.path(), &dest, &[]);
}

async fn chunked_huge_document(limit: u64) {
    let root = tmp();
    let server = Server::start(root.path()).await;
    server.fault(
        "/hostile/huge.xml",
        Fault::Huge {
            prefix: list_prefix(),
            total: 1 << 30,
            declare_length: false,
        },
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{}hostile/huge.xml", server.base), &dest);
    o.max_document_bytes = limit;
    let e = run(&o).await.expect_err("huge");
    eprintln!("{e}");
    assert!(
        e.to_string()
            .contains(&format!("larger than the {limit} bytes allowed")),
        "{e}"
    );
    contained(out.path(), &dest, &[]);
    // The document is the start URL: read during discovery, before anything is made under
    // DEST (in a temporary directory removed with the run).
    assert!(!dest.exists(), "nothing made under DEST before discovery");
}

/// The same limit as the default one, hit a thousand times sooner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gb_chunked_document_is_cut_at_the_limit() {
    chunked_huge_document(1 << 20).await;
}

/// At the default limit: 256 MiB read and discarded (about a second in a debug build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gb_chunked_document_is_cut_at_the_default_limit() {
    chunked_huge_document(resourcesync_destination::options::DEFAULT_MAX_DOCUMENT_BYTES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_longer_than_published_are_cut_off() {
    let root = tmp();
    write_tree(root.path(), &[("ok.txt", b"fine")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    for (path, declare_length) in [
        ("/long1.txt", false),
        ("/long2.txt", true),
        ("/nolen.txt", false),
    ] {
        server.fault(
            path,
            Fault::Huge {
                prefix: b"0123456789".to_vec(),
                total: 1 << 30,
                declare_length,
            },
        );
    }
    let doc = rl(&[
        (format!("{b}ok.txt"), md(b"fine")),
        (format!("{b}long1.txt"), md(b"0123456789")),
        (format!("{b}long2.txt"), md(b"0123456789")),
        (
            format!("{b}nolen.txt"),
            "hash=\"md5:00000000000000000000000000000000\"".into(),
        ),
    ]);
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/rl.xml"), &dest);
    o.http.retries = 0;
    o.max_resource_bytes = 1 << 20;
    let started = Instant::now();
    let r = run(&o).await.expect("sync");
    eprintln!("{:?} in {:?}", r.failures, started.elapsed());
    assert_eq!((r.created, r.failed), (1, 3), "{r:?}");
    assert!(failure(&r, "long1.txt").contains("longer than 10"));
    assert!(failure(&r, "long2.txt").contains("longer than 10"));
    assert!(failure(&r, "nolen.txt").contains("longer than 1048576"));
    contained(out.path(), &dest, &["ok.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_digests_are_refused() {
    let root = tmp();
    write_tree(
        root.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start(root.path()).await;
    let b = &server.base;
    let sha = "sha-256:0000000000000000000000000000000000000000000000000000000000000000";
    let doc = rl(&[
        (format!("{b}a.txt"), md(b"alpha")),
        (
            format!("{b}b.txt"),
            format!("length=\"5\" hash=\"{}\"", md5_of(b"BRAVO")),
        ),
        (format!("{b}c.txt"), format!("length=\"7\" hash=\"{sha}\"")),
    ]);
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/rl.xml"), &dest);
    o.http.retries = 0;
    let r = run(&o).await.expect("sync");
    assert_eq!((r.created, r.failed), (1, 2), "{r:?}");
    assert!(failure(&r, "b.txt").contains("md5 digest"), "{r:?}");
    assert!(failure(&r, "c.txt").contains("sha-256 digest"), "{r:?}");
    contained(out.path(), &dest, &["a.txt"]);
    // Remembered as pending, and refused again (not adopted) on the next run.
    let r = run(&o).await.expect("sync");
    assert_eq!(r.failed, 2, "{r:?}");
    contained(out.path(), &dest, &["a.txt"]);
}

/// A copy that fails after its body started arriving (digest, length, size limit) takes away
/// the directories made for it, unless another copy is in them; a directory that was there
/// before stays, empty or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_copy_leaves_no_directory_made_for_it() {
    let root = tmp();
    write_tree(
        root.path(),
        &[
            // As long as what is published: refused by its digest, once received.
            ("a/b/c.txt", b"THE PUBLISHED BODY"),
            ("s/t/bad.txt", b"THE PUBLISHED BODY"),
            ("s/t/good.txt", b"good"),
            ("old/new/bad.txt", b"THE PUBLISHED BODY"),
        ],
    );
    let server = Server::start(root.path()).await;
    let b = &server.base;
    server.fault(
        "/big/huge.txt",
        Fault::Huge {
            prefix: b"0123456789".to_vec(),
            total: 1 << 30,
            declare_length: false,
        },
    );
    let doc = rl(&[
        (format!("{b}a/b/c.txt"), md(b"the published body")),
        (format!("{b}s/t/bad.txt"), md(b"the published body")),
        (format!("{b}s/t/good.txt"), md(b"good")),
        (format!("{b}old/new/bad.txt"), md(b"the published body")),
        (format!("{b}big/huge.txt"), md(b"0123456789")),
    ]);
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    std::fs::create_dir_all(dest.join("old")).expect("old");
    let mut o = options(&format!("{b}hostile/rl.xml"), &dest);
    o.http.retries = 0;
    let r = run(&o).await.expect("sync");
    assert_eq!((r.created, r.failed), (1, 4), "{r:?}");
    assert!(failure(&r, "a/b/c.txt").contains("md5 digest"), "{r:?}");
    assert!(
        failure(&r, "big/huge.txt").contains("longer than 10"),
        "{r:?}"
    );
    contained(out.path(), &dest, &["s/t/good.txt"]);
    assert_eq!(dest_dirs(&dest), ["old", "s", "s/t"]);
    // Retried on the next run, and refused again: still nothing left.
    let r = run(&o).await.expect("sync");
    assert_eq!(r.failed, 4, "{r:?}");
    assert_eq!(dest_dirs(&dest), ["old", "s", "s/t"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_loops_end_with_a_clear_error() {
    let root = tmp();
    write_tree(root.path(), &[("a.txt", b"alpha")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    server.fault("/loop.txt", Fault::Redirect(format!("{b}loop.txt")));
    server.fault("/ping.txt", Fault::Redirect(format!("{b}pong.txt")));
    server.fault("/pong.txt", Fault::Redirect(format!("{b}ping.txt")));
    server.fault("/file.txt", Fault::Redirect("file:///etc/passwd".into()));
    let doc = rl(&[
        (format!("{b}a.txt"), md(b"alpha")),
        (format!("{b}loop.txt"), md(b"x")),
        (format!("{b}ping.txt"), md(b"x")),
        (format!("{b}file.txt"), md(b"x")),
    ]);
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/rl.xml"), &dest);
    o.http.max_redirects = 5;
    let r = run(&o).await.expect("sync");
    assert_eq!((r.created, r.failed), (1, 3), "{r:?}");
    for f in &r.failures {
        eprintln!("{}: {}", f.uri, f.error);
    }
    assert!(failure(&r, "loop.txt").contains("redirect"));
    assert!(failure(&r, "ping.txt").contains("redirect"));
    assert!(failure(&r, "file.txt").contains("redirect to \"file:///etc/passwd\" not followed"));
    // Not transient: no retries.
    assert_eq!(
        server.hits("/loop.txt"),
        6,
        "the first request and 5 redirects"
    );
    contained(out.path(), &dest, &["a.txt"]);
    // A document in a loop: the sync stops, naming it.
    server.fault(
        "/hostile/rl.xml",
        Fault::Redirect(format!("{b}hostile/rl.xml")),
    );
    let e = run(&o).await.expect_err("document loop");
    assert!(e.to_string().contains("hostile/rl.xml"), "{e}");
    assert!(e.to_string().contains("redirect"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_list_going_back_in_time_falls_back_to_the_resource_list() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"a"), ("b.txt", b"b")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    run(&o).await.expect("baseline");
    write_tree(src.path(), &[("a.txt", b"a, changed"), ("c.txt", b"c")]);
    std::fs::remove_file(src.path().join("b.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    // The Change List served instead lists the changes backwards: the deletion of b.txt,
    // then (earlier) its creation; taken in document order, b.txt would be fetched back.
    let b = &server.base;
    let backwards = format!(
        "<?xml version=\"1.0\"?>\n<urlset {NS}>\n<rs:md capability=\"changelist\" from=\"2000-01-01T00:00:00Z\"/>\n\
         <url><loc>{b}a.txt</loc><rs:md change=\"updated\" datetime=\"2999-01-03T00:00:00Z\" {}/></url>\n\
         <url><loc>{b}b.txt</loc><rs:md change=\"deleted\" datetime=\"2999-01-02T00:00:00Z\"/></url>\n\
         <url><loc>{b}b.txt</loc><rs:md change=\"created\" datetime=\"2999-01-01T00:00:00Z\" {}/></url>\n</urlset>\n",
        md(b"a, changed"),
        md(b"b"),
    );
    // The open Change List, which the Change List the Capability List names links to through
    // its index (and a run that remembers the index reads directly).
    let cl = "changelists/00001.xml";
    server.fault(
        &format!("/resourcesync/{cl}"),
        Fault::Body(backwards.into_bytes()),
    );
    let mut o = o;
    o.delete = true;
    let r = run(&o).await.expect("sync");
    let w = r
        .warnings
        .iter()
        .find(|w| w.contains("forward chronological order"))
        .unwrap_or_else(|| panic!("no warning: {:?}", r.warnings));
    eprintln!("{w}");
    assert!(w.contains(&format!("{b}resourcesync/{cl}, line 5")), "{w}");
    assert!(w.contains("RS-12.1-chronological"), "{w}");
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_source_is_cut_by_the_timeouts() {
    let root = tmp();
    write_tree(root.path(), &[("ok.txt", b"fine")]);
    let server = Server::start(root.path()).await;
    let b = &server.base;
    // A byte every 20 ms never trips the read timeout; the request timeout ends it.
    server.fault(
        "/slow.txt",
        Fault::Drip {
            prefix: Vec::new(),
            every: Duration::from_millis(20),
        },
    );
    let doc = rl(&[
        (format!("{b}ok.txt"), md(b"fine")),
        (
            format!("{b}slow.txt"),
            "hash=\"md5:00000000000000000000000000000000\"".into(),
        ),
    ]);
    write_tree(root.path(), &[("hostile/rl.xml", doc.as_bytes())]);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&format!("{b}hostile/rl.xml"), &dest);
    o.http.retries = 0;
    o.http.read_timeout = Duration::from_secs(1);
    o.http.request_timeout = Duration::from_millis(400);
    let started = Instant::now();
    let r = run(&o).await.expect("sync");
    eprintln!("{:?} in {:?}", r.failures, started.elapsed());
    assert_eq!((r.created, r.failed), (1, 1), "{r:?}");
    assert!(failure(&r, "slow.txt").contains("timed out"), "{r:?}");
    contained(out.path(), &dest, &["ok.txt"]);

    // A document dripped: the overall limit ends the run, whatever each request's limits.
    server.fault(
        "/hostile/slow.xml",
        Fault::Drip {
            prefix: list_prefix(),
            every: Duration::from_millis(20),
        },
    );
    let mut o = options(&format!("{b}hostile/slow.xml"), &dest);
    o.http.request_timeout = Duration::from_secs(600);
    o.deadline = Some(Duration::from_millis(600));
    let e = run(&o).await.expect_err("deadline");
    assert!(matches!(e, Error::Deadline(_)), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// Z39.99-2017 §7: in a 1.1 Change List, an entry with only `<lastmod>` is not ordered against
/// its neighbours' `datetime` (the two need not agree): an early `<lastmod>` after a later
/// `datetime` is no reason to distrust the list, and the entry is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lastmod_only_entry_among_datetimes_is_not_out_of_order() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"a"), ("b.txt", b"b")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    run(&o).await.expect("baseline");
    write_tree(src.path(), &[("a.txt", b"a, changed"), ("c.txt", b"c")]);
    std::fs::remove_file(src.path().join("b.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    let b = &server.base;
    let mixed = format!(
        "<?xml version=\"1.0\"?>\n<urlset {NS}>\n<rs:md capability=\"changelist\" from=\"2000-01-01T00:00:00Z\"/>\n\
         <url><loc>{b}a.txt</loc><rs:md change=\"updated\" datetime=\"2999-01-02T00:00:00Z\" {}/></url>\n\
         <url><loc>{b}c.txt</loc><lastmod>2001-01-01T00:00:00Z</lastmod><rs:md change=\"created\" {}/></url>\n\
         <url><loc>{b}b.txt</loc><rs:md change=\"deleted\" datetime=\"2999-01-03T00:00:00Z\"/></url>\n</urlset>\n",
        md(b"a, changed"),
        md(b"c"),
    );
    server.fault(
        "/resourcesync/changelists/00001.xml",
        Fault::Body(mixed.into_bytes()),
    );
    o.delete = true;
    let r = run(&o).await.expect("sync");
    assert!(
        !r.warnings.iter().any(|w| w.contains("chronological")),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.updated, r.deleted), (1, 1, 1), "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}
