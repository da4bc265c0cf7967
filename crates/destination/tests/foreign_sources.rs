//! The Destination against Sources that are not ours: documents and packages written by hand
//! (as other implementations write them), served on loopback by a plain static server or by a
//! small server of the test's own that changes resources while a sync runs.
//!
//! - A Source that offers only dumps (Z39.99-2017 §5.2): baseline from the Resource Dump,
//!   incremental from the Change Dump, audit against the manifests.
//! - Resources that change while a baseline runs: the run catches up from the Change Lists after
//!   the Resource List's `at` (Z39.99-2014 §12) and ends with the copy the Source last published.
//! - Packages with unsafe entries among safe ones: refused entry by entry.
//! - A Change List without `from`: said once, with the document.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use std::io::Write;

use common::*;
use resourcesync_destination::{
    AuditOptions, Error, Mode, Observer, SyncOptions, SyncReport, audit, sync,
};
use resourcesync_model::{HashAlg, MultiHasher};

const NS: &str = "xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
                  xmlns:rs=\"http://www.openarchives.org/rs/terms/\"";

/// The warnings a run told its observer, in order.
#[derive(Debug, Default)]
struct Recorder {
    warnings: Mutex<Vec<String>>,
}

impl Observer for Recorder {
    fn warning(&self, message: &str) {
        self.warnings
            .lock()
            .expect("warnings")
            .push(message.to_owned());
    }
}

impl Recorder {
    fn said(&self, what: &str) -> Vec<String> {
        self.warnings
            .lock()
            .expect("warnings")
            .iter()
            .filter(|w| w.contains(what))
            .cloned()
            .collect()
    }
}

async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Recorder::default())).await.expect("sync")
}

fn md5_of(b: &[u8]) -> String {
    let (_, h) = MultiHasher::new(&[HashAlg::Md5])
        .hash_reader(b)
        .expect("hash");
    h.to_string()
}

/// A `<urlset>` with this `<rs:md>` (its attributes), an `up` link when given, and these `<url>`s.
fn urlset(up: Option<&str>, md: &str, urls: &[String]) -> String {
    let up = up.map_or(String::new(), |u| {
        format!("<rs:ln rel=\"up\" href=\"{u}\"/>\n")
    });
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset {NS}>\n{up}<rs:md {md}/>\n{}</urlset>\n",
        urls.concat()
    )
}

/// A `<url>` with this `<rs:md>` (its attributes).
fn url(loc: &str, md: &str) -> String {
    format!("<url><loc>{loc}</loc><rs:md {md}/></url>\n")
}

/// `length` and `hash` attributes of a body.
fn lh(body: &[u8]) -> String {
    format!("length=\"{}\" hash=\"{}\"", body.len(), md5_of(body))
}

/// A Capability List of these (capability, document) pairs.
fn capability_list(caps: &[(&str, String)]) -> String {
    let urls: Vec<String> = caps
        .iter()
        .map(|(c, loc)| url(loc, &format!("capability=\"{c}\"")))
        .collect();
    urlset(None, "capability=\"capabilitylist\"", &urls)
}

// ---------------------------------------------------------------------------------------------
// Item 5: a Change List without `from`.

/// A Change List without `from` cannot be shown to reach back to the cursor: the run says so
/// once, naming the document, without an empty datetime, and diffs against the Resource List.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_list_without_from_is_said_once_with_its_document() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}rs/cap.xml");
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            (
                "rs/cap.xml",
                capability_list(&[
                    ("resourcelist", format!("{b}rs/rl.xml")),
                    ("changelist", format!("{b}rs/cl.xml")),
                ])
                .as_bytes(),
            ),
            (
                "rs/rl.xml",
                urlset(
                    Some(&cap),
                    "capability=\"resourcelist\" at=\"2024-01-01T00:00:00Z\"",
                    &[url(&format!("{b}a.txt"), &lh(b"alpha"))],
                )
                .as_bytes(),
            ),
            (
                "rs/cl.xml",
                urlset(Some(&cap), "capability=\"changelist\"", &[]).as_bytes(),
            ),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&cap, &dest);
    run(&o).await;
    let rec = Arc::new(Recorder::default());
    let r = sync(&o, rec.clone()).await.expect("second sync");
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    let said = rec.said("cursor");
    assert_eq!(said.len(), 1, "said once: {said:#?}");
    let w = &said[0];
    assert!(
        w.contains(&format!("{b}rs/cl.xml")),
        "names the document: {w}"
    );
    assert!(w.contains("no `from`"), "{w}");
    assert!(!w.contains("at , "), "an empty datetime: {w}");
    assert_eq!(
        r.warnings.iter().filter(|w| w.contains("cursor")).count(),
        1,
        "{:#?}",
        r.warnings
    );
}

// ---------------------------------------------------------------------------------------------
// Items 1 and 3: a Source that offers only dumps; packages with unsafe entries.

const T1: &str = "2024-01-01T00:00:00Z";
const T2: &str = "2024-01-02T00:00:00Z";

/// A ZIP package of these entries (deflated).
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        w.start_file(
            *name,
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated),
        )
        .expect("start");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish").into_inner()
}

/// XML-escapes an attribute value.
fn attr(v: &str) -> String {
    v.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('"', "&quot;")
}

/// A package: its manifest (`md`: the manifest's `<rs:md>` attributes) lists each entry as
/// (loc, path, body, extra `<rs:md>` attributes); the ZIP holds each body under its path
/// without the leading slash, and the manifest.
fn package(cap: &str, md: &str, entries: &[(String, &str, &[u8], &str)]) -> Vec<u8> {
    let urls: Vec<String> = entries
        .iter()
        .map(|(loc, path, body, extra)| {
            url(
                loc,
                &format!("{extra} {} path=\"{}\"", lh(body), attr(path)),
            )
        })
        .collect();
    let manifest = urlset(Some(cap), md, &urls);
    let mut files: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(_, path, body, _)| (path.strip_prefix('/').unwrap_or(path), *body))
        .collect();
    files.push(("manifest.xml", manifest.as_bytes()));
    zip_of(&files)
}

/// A Resource Dump or Change Dump document listing these packages (loc, bytes, extra
/// `<rs:md>` attributes).
fn dump_doc(cap: &str, md: &str, packages: &[(String, &[u8], &str)]) -> String {
    let urls: Vec<String> = packages
        .iter()
        .map(|(loc, bytes, extra)| {
            url(
                loc,
                &format!("type=\"application/zip\" {} {extra}", lh(bytes)),
            )
        })
        .collect();
    urlset(Some(cap), md, &urls)
}

/// A Source with a Resource Dump and a Change Dump and no list: baseline from the dump,
/// incremental from the Change Dump, audit against the manifests (Z39.99-2017 §5.2). Nothing is
/// served at the resources' URIs: everything comes from the packages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_with_dumps_only_baseline_incremental_and_audit() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    let (a, bb, c) = (
        b"alpha".as_slice(),
        b"bravo".as_slice(),
        b"charlie".as_slice(),
    );
    let p1 = package(
        &cap,
        &format!("capability=\"resourcedump-manifest\" at=\"{T1}\""),
        &[
            (format!("{b}a.txt"), "/resources/a", a, ""),
            (format!("{b}b.txt"), "/resources/b", bb, ""),
            (format!("{b}sub/c.txt"), "/resources/c", c, ""),
        ],
    );
    let rd = dump_doc(
        &cap,
        &format!("capability=\"resourcedump\" at=\"{T1}\""),
        &[(format!("{b}resourcesync/p1.zip"), &p1, "")],
    );
    let no_changes = dump_doc(
        &cap,
        &format!("capability=\"changedump\" from=\"{T1}\""),
        &[],
    );
    write_tree(
        src.path(),
        &[
            (
                "resourcesync/cap.xml",
                capability_list(&[
                    ("resourcedump", format!("{b}resourcesync/rd.xml")),
                    ("changedump", format!("{b}resourcesync/cd.xml")),
                ])
                .as_bytes(),
            ),
            ("resourcesync/rd.xml", rd.as_bytes()),
            ("resourcesync/p1.zip", &p1),
            ("resourcesync/cd.xml", no_changes.as_bytes()),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.delete = true;
    let files = |list: &[(&str, &[u8])]| -> BTreeMap<String, Vec<u8>> {
        list.iter()
            .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
            .collect()
    };
    let audit_now = || async {
        let mut a = AuditOptions::new(&cap, &dest);
        a.http.retries = 0;
        audit(&a, Arc::new(Recorder::default()))
            .await
            .expect("audit")
    };

    // Baseline from the Resource Dump alone.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!((r.created, r.failed, r.packages), (3, 0, 1), "{r:?}");
    assert_eq!(r.cursor.as_deref(), Some(T1), "the dump's at");
    assert_eq!(
        dest_files(&dest),
        files(&[("a.txt", a), ("b.txt", bb), ("sub/c.txt", c)])
    );
    assert_eq!(server.resource_hits(), 0, "nothing fetched on its own");
    let a1 = audit_now().await;
    assert!(a1.in_sync, "{a1:?}");
    assert_eq!((a1.resources, a1.in_sync_count), (3, 3), "{a1:?}");

    // Changes, in a Change Dump package: b updated, d created, a deleted.
    let (b2, d) = (b"bravo, second".as_slice(), b"delta".as_slice());
    let c1 = package(
        &cap,
        &format!("capability=\"changedump-manifest\" from=\"{T1}\" until=\"{T2}\""),
        &[
            (
                format!("{b}b.txt"),
                "/changes/b",
                b2,
                "change=\"updated\" datetime=\"2024-01-01T10:00:00Z\"",
            ),
            (
                format!("{b}d.txt"),
                "/changes/d",
                d,
                "change=\"created\" datetime=\"2024-01-01T11:00:00Z\"",
            ),
        ],
    );
    // A delete has no bitstream (Z39.99-2014 §13.2): added to the manifest by hand.
    let c1 = {
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(c1)).expect("zip");
        let mut m = String::new();
        std::io::Read::read_to_string(&mut z.by_name("manifest.xml").expect("manifest"), &mut m)
            .expect("read");
        let m = m.replace(
            "</urlset>",
            &format!(
                "<url><loc>{b}a.txt</loc><rs:md change=\"deleted\" datetime=\"2024-01-01T12:00:00Z\"/></url>\n</urlset>"
            ),
        );
        zip_of(&[
            ("changes/b", b2),
            ("changes/d", d),
            ("manifest.xml", m.as_bytes()),
        ])
    };
    let cd = dump_doc(
        &cap,
        &format!("capability=\"changedump\" from=\"{T1}\""),
        &[(
            format!("{b}resourcesync/c1.zip"),
            &c1,
            &format!("from=\"{T1}\" until=\"{T2}\""),
        )],
    );
    write_tree(
        src.path(),
        &[
            ("resourcesync/c1.zip", &c1),
            ("resourcesync/cd.xml", cd.as_bytes()),
        ],
    );
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (1, 1, 1, 0),
        "{r:?}"
    );
    assert_eq!(r.cursor.as_deref(), Some("2024-01-01T12:00:00Z"), "{r:?}");
    let now = files(&[("b.txt", b2), ("d.txt", d), ("sub/c.txt", c)]);
    assert_eq!(dest_files(&dest), now);
    assert_eq!(server.resource_hits(), 0);

    // Nothing new.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (0, 0, 0, 0),
        "{r:?}"
    );

    // The audit compiles the Resource Dump's manifests and the Change Dump's after its `at`.
    let a2 = audit_now().await;
    assert!(a2.in_sync, "{a2:?}");
    assert_eq!(a2.resources, 3, "{a2:?}");
    std::fs::write(dest.join("d.txt"), b"DELTA").expect("tamper");
    std::fs::write(dest.join("a.txt"), b"alpha").expect("an extra file");
    let a3 = audit_now().await;
    assert!(!a3.in_sync);
    assert_eq!(
        (a3.different_count, a3.extra_count, a3.missing_count),
        (1, 1, 0),
        "{a3:?}"
    );
}

/// A package of a Source that offers only a Resource Dump, holding unsafe entries (a ZIP slip
/// with `..`, an absolute path, backslashes, a zip bomb) among safe ones: each unsafe entry is
/// refused with an error naming the package, the entry and the rule; the safe ones are
/// extracted and verified; nothing is written outside DEST. The refused ones are kept as
/// pending: the next run fetches them from their URIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_package_entries_are_refused_one_by_one_and_the_safe_ones_kept() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    let zeros = vec![0u8; 8 << 20];
    let p1 = package(
        &cap,
        &format!("capability=\"resourcedump-manifest\" at=\"{T1}\""),
        &[
            (format!("{b}r/a.txt"), "/resources/a", b"alpha", ""),
            (format!("{b}r/slip.txt"), "/../../slip", b"slip", ""),
            (format!("{b}r/abs.txt"), "//tmp/abs", b"abs", ""),
            (
                format!("{b}r/bs.txt"),
                "/resources\\..\\..\\bs",
                b"backslash",
                "",
            ),
            (format!("{b}r/z.bin"), "/resources/z", &zeros, ""),
            (format!("{b}sub/b.txt"), "/resources/b", b"bravo", ""),
        ],
    );
    let rd = dump_doc(
        &cap,
        &format!("capability=\"resourcedump\" at=\"{T1}\""),
        &[(format!("{b}resourcesync/p1.zip"), &p1, "")],
    );
    write_tree(
        src.path(),
        &[
            (
                "resourcesync/cap.xml",
                capability_list(&[("resourcedump", format!("{b}resourcesync/rd.xml"))]).as_bytes(),
            ),
            ("resourcesync/rd.xml", rd.as_bytes()),
            ("resourcesync/p1.zip", &p1),
            // One refused resource is served at its URI.
            ("r/slip.txt", b"slip"),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!((r.created, r.failed), (2, 4), "{r:?}");
    let pkg = format!("{b}resourcesync/p1.zip");
    for (loc, rule) in [
        ("r/slip.txt", "dot segment"),
        ("r/abs.txt", "absolute path"),
        ("r/bs.txt", "backslash"),
        ("r/z.bin", "zip bomb"),
    ] {
        let f = r
            .failures
            .iter()
            .find(|f| f.uri == format!("{b}{loc}"))
            .unwrap_or_else(|| panic!("no failure for {loc}: {:#?}", r.failures));
        assert!(
            f.error.contains(&pkg)
                && f.error.contains("manifest.xml line ")
                && f.error.contains(rule),
            "{loc}: {}",
            f.error
        );
    }
    let expected: BTreeMap<String, Vec<u8>> = [
        ("r/a.txt".to_owned(), b"alpha".to_vec()),
        ("sub/b.txt".to_owned(), b"bravo".to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
    let beside: Vec<String> = std::fs::read_dir(out.path())
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["dest"], "written outside DEST");
    assert_eq!(server.resource_hits(), 0);

    // The next run (the same dump) tries the refused ones again, from their URIs.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.failed), (1, 3), "{r:?}");
    assert_eq!(server.hits("/r/slip.txt"), 1);
    assert_eq!(
        std::fs::read(dest.join("r/slip.txt")).expect("fetched"),
        b"slip"
    );
}

/// A Capability List that offers nothing a Destination can sync from: a clear error naming the
/// Capability List and what it offers, before anything is created under DEST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_list_with_nothing_to_sync_from_is_a_clear_error() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap = format!("{b}resourcesync/cap.xml");
    write_tree(
        src.path(),
        &[(
            "resourcesync/cap.xml",
            capability_list(&[
                ("resourcelist-archive", format!("{b}resourcesync/rla.xml")),
                ("changelist-archive", format!("{b}resourcesync/cla.xml")),
            ])
            .as_bytes(),
        )],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let e = sync(&options(&cap, &dest), Arc::new(Recorder::default()))
        .await
        .expect_err("nothing to sync from");
    assert!(matches!(e, Error::BadDocument { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.starts_with(&cap), "{msg}");
    assert!(
        msg.contains("offers nothing") && msg.contains("resourcelist-archive, changelist-archive"),
        "{msg}"
    );
    assert!(!dest.exists(), "nothing created under DEST");
    let mut a = AuditOptions::new(&cap, out.path());
    a.http.retries = 0;
    let e = audit(&a, Arc::new(Recorder::default()))
        .await
        .expect_err("nothing to audit against");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&cap) && msg.contains("resourcelist-archive"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 2: resources that change while a baseline runs.

/// Bodies to set (or remove, `None`), by path.
type Edits = Vec<(String, Option<Vec<u8>>)>;

/// A Source served from memory that changes when a document has been served: each hook, on the
/// `nth` request of `path`, replaces (or removes, `None`) the bodies of other paths once the
/// response is built. The sync reads a document whole before it acts on it, so a change made when
/// the Resource List is served is seen by every fetch of that baseline: no timing involved.
#[derive(Default)]
struct Live {
    files: Mutex<HashMap<String, Vec<u8>>>,
    hooks: Mutex<Vec<(String, u32, Edits)>>,
    hits: Mutex<HashMap<String, u32>>,
}

impl Live {
    fn set(&self, path: &str, body: impl Into<Vec<u8>>) {
        self.files
            .lock()
            .expect("files")
            .insert(path.to_owned(), body.into());
    }

    fn on(&self, path: &str, nth: u32, set: Edits) {
        self.hooks
            .lock()
            .expect("hooks")
            .push((path.to_owned(), nth, set));
    }

    fn hits(&self, path: &str) -> u32 {
        self.hits
            .lock()
            .expect("hits")
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

async fn live_handler(
    axum::extract::State(live): axum::extract::State<Arc<Live>>,
    uri: axum::http::Uri,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = uri.path().to_owned();
    let n = {
        let mut h = live.hits.lock().expect("hits");
        let n = h.entry(path.clone()).or_default();
        *n += 1;
        *n
    };
    let body = live.files.lock().expect("files").get(&path).cloned();
    let fired: Vec<Edits> = {
        let mut hooks = live.hooks.lock().expect("hooks");
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut *hooks)
            .into_iter()
            .partition(|(p, nth, _)| *p == path && *nth == n);
        *hooks = later;
        now.into_iter().map(|(_, _, set)| set).collect()
    };
    {
        let mut files = live.files.lock().expect("files");
        for (p, b) in fired.into_iter().flatten() {
            match b {
                Some(b) => files.insert(p, b),
                None => files.remove(&p),
            };
        }
    }
    match body {
        Some(b) => b.into_response(),
        None => (axum::http::StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// Starts a [`Live`] Source on 127.0.0.1 (ephemeral port); its base URL.
async fn start_live(live: Arc<Live>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(live_handler).with_state(live);
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    format!("http://{addr}/")
}

const T0: &str = "2024-03-01T00:00:00Z";

/// A Change List (1.1, `datetime`) from T0 of these (loc, change, datetime, body) entries.
fn change_list(cap: &str, changes: &[(String, &str, &str, &[u8])]) -> Vec<u8> {
    let urls: Vec<String> = changes
        .iter()
        .map(|(loc, change, at, body)| {
            let lh = if *change == "deleted" {
                String::new()
            } else {
                lh(body)
            };
            url(loc, &format!("change=\"{change}\" datetime=\"{at}\" {lh}"))
        })
        .collect();
    urlset(
        Some(cap),
        &format!("capability=\"changelist\" from=\"{T0}\""),
        &urls,
    )
    .into_bytes()
}

/// A Source (Resource List and Change List) with resources a.txt, b.txt, c.txt, gone.txt listed
/// at T0; its base URL and Capability List.
async fn changing_source(live: &Arc<Live>) -> (String, String) {
    let b = start_live(live.clone()).await;
    let cap = format!("{b}rs/cap.xml");
    live.set(
        "/rs/cap.xml",
        capability_list(&[
            ("resourcelist", format!("{b}rs/rl.xml")),
            ("changelist", format!("{b}rs/cl.xml")),
        ]),
    );
    let listed: [(&str, &[u8]); 4] = [
        ("a.txt", b"alpha"),
        ("b.txt", b"bravo"),
        ("c.txt", b"charlie"),
        ("gone.txt", b"gone soon"),
    ];
    let urls: Vec<String> = listed
        .iter()
        .map(|(p, body)| url(&format!("{b}{p}"), &lh(body)))
        .collect();
    live.set(
        "/rs/rl.xml",
        urlset(
            Some(&cap),
            &format!("capability=\"resourcelist\" at=\"{T0}\""),
            &urls,
        ),
    );
    for (p, body) in listed {
        live.set(&format!("/{p}"), body);
    }
    live.set("/rs/cl.xml", change_list(&cap, &[]));
    (b, cap)
}

/// Resources change right after the Resource List is served (a longer body, another digest of
/// the same length, a delete, a create), and one changes again while the run catches up: the
/// run catches up from the Change List after the list's `at`, fetches each again at its listed
/// new version, and ends with the copy the Source last published, without a failure (exit 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_that_change_during_the_baseline_are_caught_up_in_the_same_run() {
    let live = Arc::new(Live::default());
    let (b, cap) = changing_source(&live).await;
    let (a2, b2, new) = (
        b"alpha, changed while the baseline ran".as_slice(),
        b"BRAVO".as_slice(),
        b"new".as_slice(),
    );
    let a3 = b"alpha, changed again while the run caught up".as_slice();
    let cl1 = change_list(
        &cap,
        &[
            (format!("{b}a.txt"), "updated", "2024-03-01T00:00:01Z", a2),
            (format!("{b}b.txt"), "updated", "2024-03-01T00:00:02Z", b2),
            (
                format!("{b}gone.txt"),
                "deleted",
                "2024-03-01T00:00:03Z",
                b"",
            ),
            (
                format!("{b}new.txt"),
                "created",
                "2024-03-01T00:00:04Z",
                new,
            ),
        ],
    );
    let mut cl2_changes = vec![
        (format!("{b}a.txt"), "updated", "2024-03-01T00:00:01Z", a2),
        (format!("{b}b.txt"), "updated", "2024-03-01T00:00:02Z", b2),
        (
            format!("{b}gone.txt"),
            "deleted",
            "2024-03-01T00:00:03Z",
            b"",
        ),
        (
            format!("{b}new.txt"),
            "created",
            "2024-03-01T00:00:04Z",
            new,
        ),
    ];
    cl2_changes.push((format!("{b}a.txt"), "updated", "2024-03-01T00:00:05Z", a3));
    let cl2 = change_list(&cap, &cl2_changes);
    // Right after the Resource List is served.
    live.on(
        "/rs/rl.xml",
        1,
        vec![
            ("/a.txt".into(), Some(a2.to_vec())),
            ("/b.txt".into(), Some(b2.to_vec())),
            ("/gone.txt".into(), None),
            ("/new.txt".into(), Some(new.to_vec())),
            ("/rs/cl.xml".into(), Some(cl1)),
        ],
    );
    // Right after the Change List is read the first time: a.txt changes again.
    live.on(
        "/rs/cl.xml",
        1,
        vec![
            ("/a.txt".into(), Some(a3.to_vec())),
            ("/rs/cl.xml".into(), Some(cl2)),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), a3.to_vec()),
        ("b.txt".to_owned(), b2.to_vec()),
        ("c.txt".to_owned(), b"charlie".to_vec()),
        ("new.txt".to_owned(), new.to_vec()),
    ]
    .into();
    assert_eq!(
        dest_files(&dest),
        expected,
        "the copy the Source last published"
    );
    assert_eq!(r.cursor.as_deref(), Some("2024-03-01T00:00:05Z"), "{r:?}");
    assert_eq!(live.hits("/rs/cl.xml"), 2, "read again once, for a.txt");
    assert_eq!(live.hits("/a.txt"), 3, "listed, then v2, then v3");

    // The next run has nothing to do.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (0, 0, 0, 0),
        "{r:?}"
    );
}

/// A resource changed after the Resource List was written, and the Change List does not list
/// the change yet (a Source that writes it later): the failure says what it most likely is, and
/// the run catches up from the Change List once it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_not_listed_yet_is_explained_and_caught_up_next_run() {
    let live = Arc::new(Live::default());
    let (b, cap) = changing_source(&live).await;
    let a2 = b"alpha, edited".as_slice();
    live.on(
        "/rs/rl.xml",
        1,
        vec![
            ("/a.txt".into(), Some(a2.to_vec())),
            ("/gone.txt".into(), None),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!(r.failed, 2, "{:#?}", r.failures);
    for (uri, what) in [("a.txt", "changed"), ("gone.txt", "deleted (or moved)")] {
        let f = r
            .failures
            .iter()
            .find(|f| f.uri == format!("{b}{uri}"))
            .unwrap_or_else(|| panic!("{uri}: {:#?}", r.failures));
        assert!(
            f.error.contains(&format!(
                "most likely {what} after the Resource List of {T0} was written"
            )) && f.error.contains("the next sync catches up from them"),
            "{f:?}"
        );
    }
    // The Source lists the changes now.
    live.set(
        "/rs/cl.xml",
        change_list(
            &cap,
            &[
                (format!("{b}a.txt"), "updated", "2024-03-01T00:00:01Z", a2),
                (
                    format!("{b}gone.txt"),
                    "deleted",
                    "2024-03-01T00:00:02Z",
                    b"",
                ),
            ],
        ),
    );
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), a2.to_vec()),
        ("b.txt".to_owned(), b"bravo".to_vec()),
        ("c.txt".to_owned(), b"charlie".to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
}

// ---------------------------------------------------------------------------------------------
// Item 6: what a Destination says about a Source.

/// Each error about a Source's document names the document, the line where it has one, and
/// what the user can do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_about_a_source_name_the_document_the_line_and_what_to_do() {
    let src = tmp();
    let server = Server::start(src.path()).await;
    let b = server.base.clone();
    let cap_of = |dir: &str, caps: &[(&str, &str)]| {
        capability_list(
            &caps
                .iter()
                .map(|(c, doc)| (*c, format!("{b}{dir}/{doc}")))
                .collect::<Vec<_>>(),
        )
    };
    let rl_of = |dir: &str, body: &str| {
        urlset(
            Some(&format!("{b}{dir}/cap.xml")),
            &format!("capability=\"resourcelist\" at=\"{T0}\""),
            &[body.to_owned()],
        )
    };
    let a_txt = url(&format!("{b}a.txt"), &lh(b"alpha"));
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            // A Resource List named and not served.
            (
                "missing/cap.xml",
                cap_of("missing", &[("resourcelist", "rl.xml")]).as_bytes(),
            ),
            // A Resource List that is not well-formed on its third line.
            (
                "broken/cap.xml",
                cap_of("broken", &[("resourcelist", "rl.xml")]).as_bytes(),
            ),
            (
                "broken/rl.xml",
                rl_of("broken", "<url><loc>x</loc></urll>\n").as_bytes(),
            ),
            // A "Resource List" that is a Change List.
            (
                "other/cap.xml",
                cap_of("other", &[("resourcelist", "rl.xml")]).as_bytes(),
            ),
            (
                "other/rl.xml",
                urlset(
                    None,
                    &format!("capability=\"changelist\" from=\"{T0}\""),
                    &[],
                )
                .as_bytes(),
            ),
            // A Source Description without a Capability List.
            (
                "empty/desc.xml",
                urlset(None, "capability=\"description\"", &[]).as_bytes(),
            ),
            // A good Source, whose Change List then fails.
            (
                "failing/cap.xml",
                cap_of(
                    "failing",
                    &[("resourcelist", "rl.xml"), ("changelist", "cl.xml")],
                )
                .as_bytes(),
            ),
            ("failing/rl.xml", rl_of("failing", &a_txt).as_bytes()),
            (
                "failing/cl.xml",
                urlset(
                    Some(&format!("{b}failing/cap.xml")),
                    &format!("capability=\"changelist\" from=\"{T0}\""),
                    &[],
                )
                .as_bytes(),
            ),
        ],
    );
    let out = tmp();
    let fail = |start: &str, dest: &str| {
        let mut o = options(&format!("{b}{start}"), &out.path().join(dest));
        o.http.retries = 0;
        o
    };
    let err = |o: SyncOptions| async move {
        sync(&o, Arc::new(Recorder::default()))
            .await
            .expect_err("fails")
            .to_string()
    };
    // (start, the document named, what else the message says, what the user can do)
    let cases = [
        (
            "missing/cap.xml",
            "missing/rl.xml",
            "HTTP 404",
            "tell the Source's maintainer",
        ),
        (
            "broken/cap.xml",
            "broken/rl.xml",
            ":5:",
            "tell the Source's maintainer",
        ),
        (
            "other/cap.xml",
            "other/rl.xml",
            "expected a resourcelist document",
            "tell the Source's maintainer",
        ),
        (
            "empty/desc.xml",
            "empty/desc.xml",
            "lists no Capability List",
            "give the URL of a Capability List",
        ),
    ];
    for (i, (start, doc, what, todo)) in cases.into_iter().enumerate() {
        let m = err(fail(start, &format!("d{i}"))).await;
        assert!(
            m.contains(&format!("{b}{doc}")) && m.contains(what) && m.contains(todo),
            "{start}: {m}"
        );
    }
    let o = fail("failing/cap.xml", "failing");
    run(&o).await;
    server.fault("/failing/cl.xml", Fault::Status(500));
    let m = err(o).await;
    assert!(
        m.contains(&format!("{b}failing/cl.xml"))
            && m.contains("HTTP 500")
            && m.contains("try again later"),
        "{m}"
    );
}
