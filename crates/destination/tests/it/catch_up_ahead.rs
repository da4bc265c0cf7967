//! The catch-up after a first baseline (Z39.99-2014 §5.2, §12.1) reads the Change List beside
//! the baseline and asks for it again, conditionally, once the downloads have their bodies
//! (crate::sync::ahead; docs/wide-area.md): one round trip at the end instead of two, and no
//! change missed.
//!
//! The Source here is the test's own: documents served from memory with an `ETag` (the digest
//! of the body) and a 304 to an `If-None-Match` that matches it (RFC 9110 §13.1.2), changed
//! by hooks on the nth request of a path, and a request held until another arrives.

use crate::common;
use crate::hand;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use common::*;
use hand::*;
use resourcesync_destination::{Mode, SyncOptions, SyncReport, sync};

async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Recorder::default())).await.expect("sync")
}

/// Bodies to set, by path.
type Edits = Vec<(String, Vec<u8>)>;

/// A request held ([`Src::hold`]).
struct Hold {
    path: String,
    nth: u32,
    until: String,
    until_nth: u32,
}

/// A Source served from memory (see the module docs).
struct Src {
    files: Mutex<HashMap<String, Vec<u8>>>,
    hooks: Mutex<Vec<(String, u32, Edits)>>,
    hits: Mutex<HashMap<String, u32>>,
    not_modified: Mutex<HashMap<String, u32>>,
    holds: Mutex<Vec<Hold>>,
    /// The holds that saw their other request arrive, by path.
    met: Mutex<Vec<String>>,
    /// Bumped at every request (woken holds look again).
    arrivals: tokio::sync::watch::Sender<u64>,
}

impl Src {
    fn new() -> Arc<Src> {
        Arc::new(Src {
            files: Mutex::default(),
            hooks: Mutex::default(),
            hits: Mutex::default(),
            not_modified: Mutex::default(),
            holds: Mutex::default(),
            met: Mutex::default(),
            arrivals: tokio::sync::watch::channel(0).0,
        })
    }

    fn set(&self, path: &str, body: impl Into<Vec<u8>>) {
        let mut f = self.files.lock().expect("files");
        f.insert(path.to_owned(), body.into());
    }

    /// Once the `nth` request of `path` is answered, sets these bodies.
    fn on(&self, path: &str, nth: u32, edits: Edits) {
        let mut h = self.hooks.lock().expect("hooks");
        h.push((path.to_owned(), nth, edits));
    }

    /// Holds the `nth` request of `path` until the `until_nth` request of `until` has arrived
    /// (at most 20 s).
    fn hold(&self, path: &str, nth: u32, until: &str, until_nth: u32) {
        self.holds.lock().expect("holds").push(Hold {
            path: path.to_owned(),
            nth,
            until: until.to_owned(),
            until_nth,
        });
    }

    fn hits(&self, path: &str) -> u32 {
        let h = self.hits.lock().expect("hits");
        h.get(path).copied().unwrap_or(0)
    }

    fn not_modified(&self, path: &str) -> u32 {
        let h = self.not_modified.lock().expect("304");
        h.get(path).copied().unwrap_or(0)
    }
}

fn etag(body: &[u8]) -> String {
    format!("\"{}\"", md5_of(body).replace(':', "-"))
}

async fn handler(
    axum::extract::State(src): axum::extract::State<Arc<Src>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let path = uri.path().to_owned();
    let n = {
        let mut h = src.hits.lock().expect("hits");
        let n = h.entry(path.clone()).or_default();
        *n += 1;
        *n
    };
    let mut arrivals = src.arrivals.subscribe();
    src.arrivals.send_modify(|a| *a += 1);
    let hold = {
        let holds = src.holds.lock().expect("holds");
        let h = holds.iter().find(|h| h.path == path && h.nth == n);
        h.map(|h| (h.until.clone(), h.until_nth))
    };
    if let Some((until, until_nth)) = hold {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if src.hits(&until) >= until_nth {
                src.met.lock().expect("met").push(path.clone());
                break;
            }
            if tokio::time::timeout_at(deadline, arrivals.changed())
                .await
                .is_err()
            {
                break;
            }
        }
    }
    let body = src.files.lock().expect("files").get(&path).cloned();
    let edits: Vec<Edits> = {
        let mut hooks = src.hooks.lock().expect("hooks");
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut *hooks)
            .into_iter()
            .partition(|(p, nth, _)| *p == path && *nth == n);
        *hooks = later;
        now.into_iter().map(|(_, _, e)| e).collect()
    };
    for (p, b) in edits.into_iter().flatten() {
        src.set(&p, b);
    }
    let Some(body) = body else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    let tag = etag(&body);
    let asked = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    if asked == Some(tag.as_str()) {
        *src.not_modified
            .lock()
            .expect("304")
            .entry(path)
            .or_default() += 1;
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, tag)]).into_response();
    }
    ([(header::ETAG, tag)], body).into_response()
}

const T0: &str = "2024-03-01T00:00:00Z";
const T1S: &str = "2024-03-01T00:00:01Z";
const T2S: &str = "2024-03-01T00:00:02Z";

/// A Change List from T0 linking to its index (as ours does while the open period fits in one
/// document, Z39.99-2014 §12.1), of these (loc, datetime, body) updates.
fn change_list(cap: &str, index: &str, changes: &[(String, &str, &[u8])]) -> Vec<u8> {
    let urls: Vec<String> = changes
        .iter()
        .map(|(loc, at, body)| {
            url(
                loc,
                &format!("change=\"updated\" datetime=\"{at}\" {}", lh(body)),
            )
        })
        .collect();
    let doc = urlset(
        Some(cap),
        &format!("capability=\"changelist\" from=\"{T0}\""),
        &urls,
    );
    doc.replacen(
        "<rs:md ",
        &format!("<rs:ln rel=\"index\" href=\"{index}\"/>\n<rs:md "),
        1,
    )
    .into_bytes()
}

/// A Source of a.txt and b.txt listed at T0, whose Change List (`/rs/cl.xml`, linking to its
/// index `/rs/clx.xml`, which lists it as `/rs/cl-1.xml`) lists `changes`; its base URL and
/// Capability List. `b.txt` is served as `b_now`.
async fn source(src: &Arc<Src>, b_now: &[u8], changes: &[(&str, &str, &[u8])]) -> (String, String) {
    let app = axum::Router::new()
        .fallback(handler)
        .with_state(src.clone());
    let b = format!("http://{}/", resourcesync_testkit::serve(app).await);
    let cap = format!("{b}rs/cap.xml");
    src.set(
        "/rs/cap.xml",
        capability_list(&[
            ("resourcelist", format!("{b}rs/rl.xml")),
            ("changelist", format!("{b}rs/cl.xml")),
        ]),
    );
    let urls = [
        url(&format!("{b}a.txt"), &lh(b"alpha")),
        url(&format!("{b}b.txt"), &lh(b"bravo")),
    ];
    src.set(
        "/rs/rl.xml",
        urlset(
            Some(&cap),
            &format!("capability=\"resourcelist\" at=\"{T0}\""),
            &urls,
        ),
    );
    src.set("/a.txt", b"alpha".as_slice());
    src.set("/b.txt", b_now);
    let changes: Vec<(String, &str, &[u8])> = changes
        .iter()
        .map(|(p, at, body)| (format!("{b}{p}"), *at, *body))
        .collect();
    let cl = change_list(&cap, &format!("{b}rs/clx.xml"), &changes);
    src.set("/rs/cl.xml", cl.clone());
    src.set("/rs/cl-1.xml", cl);
    src.set(
        "/rs/clx.xml",
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex {NS}>\n\
             <rs:ln rel=\"up\" href=\"{cap}\"/>\n<rs:md capability=\"changelist\" from=\"{T0}\"/>\n\
             <sitemap><loc>{b}rs/cl-1.xml</loc><rs:md from=\"{T0}\"/></sitemap>\n</sitemapindex>\n"
        ),
    );
    (b, cap)
}

/// The Change List and its index, read beside the baseline, are asked for again at the end at
/// once: the index's request arrives while the list's is held (read one after the other, the
/// index would be asked for only once the list is answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_list_and_its_index_are_asked_for_again_together() {
    let src = Src::new();
    let (_, cap) = source(&src, b"bravo", &[]).await;
    src.hold("/rs/cl.xml", 2, "/rs/clx.xml", 2);
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&cap, &dest)).await;
    assert_eq!((r.mode, r.failed), (Mode::Baseline, 0), "{r:?}");
    assert_eq!(
        (src.hits("/rs/cl.xml"), src.hits("/rs/clx.xml")),
        (2, 2),
        "each read beside the baseline, then asked for again"
    );
    assert_eq!(
        *src.met.lock().expect("met"),
        vec!["/rs/cl.xml".to_owned()],
        "the index was not asked for while the list's answer was out"
    );
    // Unchanged: both answered 304 (the copies read beside the baseline walked), the open list
    // taken from the list (not fetched under the index's name).
    assert_eq!(src.not_modified("/rs/cl.xml"), 1);
    assert_eq!(src.not_modified("/rs/clx.xml"), 1);
    assert_eq!(src.hits("/rs/cl-1.xml"), 0);
}

/// b.txt changed before the baseline fetched it (served newer than the Resource List says), and
/// the Change List read beside the baseline lists that change: unchanged at the end (304), its
/// copy is walked and the change applied: b.txt at its listed version, no failure, the cursor
/// at the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_list_unchanged_since_it_was_read_beside_the_baseline_is_applied() {
    let src = Src::new();
    let b2 = b"bravo, changed before the baseline".as_slice();
    let (_, cap) = source(&src, b2, &[("b.txt", T1S, b2)]).await;
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&cap, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert_eq!(src.not_modified("/rs/cl.xml"), 1, "asked for conditionally");
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), b"alpha".to_vec()),
        ("b.txt".to_owned(), b2.to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
    assert_eq!(r.cursor.as_deref(), Some(T1S), "{r:?}");
}

/// a.txt changes, and the Change List lists it, right after the Change List is read beside the
/// baseline: the list answers 200 at the end (its `ETag` changed) and the change is applied in
/// the same run (Z39.99-2014 §12.1): a.txt at its new version, the cursor at the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_listed_after_the_change_list_was_read_beside_the_baseline_is_caught_up() {
    let src = Src::new();
    let (b, cap) = source(&src, b"bravo", &[]).await;
    let a2 = b"alpha, changed while the baseline ran".as_slice();
    let cl = change_list(
        &cap,
        &format!("{b}rs/clx.xml"),
        &[(format!("{b}a.txt"), T2S, a2)],
    );
    src.on(
        "/rs/cl.xml",
        1,
        vec![
            ("/a.txt".into(), a2.to_vec()),
            ("/rs/cl.xml".into(), cl.clone()),
            ("/rs/cl-1.xml".into(), cl),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&cap, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert_eq!(src.not_modified("/rs/cl.xml"), 0, "changed: read again");
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), a2.to_vec()),
        ("b.txt".to_owned(), b"bravo".to_vec()),
    ]
    .into();
    assert_eq!(
        dest_files(&dest),
        expected,
        "the copy the Source last published"
    );
    assert_eq!(r.cursor.as_deref(), Some(T2S), "{r:?}");
    // The next run has nothing to do.
    let r = run(&options(&cap, &dest)).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!((r.created, r.updated, r.failed), (0, 0, 0), "{r:?}");
}

/// A Capability List that names the Change List Index itself: the index and its open list (its
/// last part, Z39.99-2014 §12.2) are read beside the baseline and asked for again at the end
/// (both 304), and the change the open list names is applied from the copy read beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_named_by_the_capability_list_and_its_open_list_are_read_beside_the_baseline() {
    let src = Src::new();
    let b2 = b"bravo, changed before the baseline".as_slice();
    let (b, cap) = source(&src, b2, &[("b.txt", T1S, b2)]).await;
    src.set(
        "/rs/cap.xml",
        capability_list(&[
            ("resourcelist", format!("{b}rs/rl.xml")),
            ("changelist", format!("{b}rs/clx.xml")),
        ]),
    );
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&cap, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert_eq!(
        (src.hits("/rs/clx.xml"), src.hits("/rs/cl-1.xml")),
        (2, 2),
        "each read beside the baseline, then asked for again"
    );
    assert_eq!(
        (
            src.not_modified("/rs/clx.xml"),
            src.not_modified("/rs/cl-1.xml")
        ),
        (1, 1)
    );
    assert_eq!(src.hits("/rs/cl.xml"), 0);
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), b"alpha".to_vec()),
        ("b.txt".to_owned(), b2.to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
    assert_eq!(r.cursor.as_deref(), Some(T1S), "{r:?}");
}

/// A baseline from a Resource Dump asks for the Change List again as its package is asked
/// for, not once the package is unpacked: the package's request is held until the Change
/// List's second request arrives (asked after the unpacking, it could not arrive while the
/// package is held: the hold would give up after 20 s, unmet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_baseline_asks_for_the_change_list_again_beside_its_package() {
    let src = Src::new();
    let (b, cap) = source(&src, b"bravo", &[]).await;
    let pkg = package(
        &cap,
        &format!("capability=\"resourcedump-manifest\" at=\"{T0}\""),
        &[
            (format!("{b}a.txt"), "/a.txt", b"alpha".as_slice(), ""),
            (format!("{b}b.txt"), "/b.txt", b"bravo".as_slice(), ""),
        ],
    );
    src.set(
        "/rs/rd.xml",
        dump_doc(
            &cap,
            &format!("capability=\"resourcedump\" at=\"{T0}\""),
            &[(format!("{b}rs/rd-1.zip"), &pkg, "")],
        ),
    );
    src.set("/rs/rd-1.zip", pkg);
    src.set(
        "/rs/cap.xml",
        capability_list(&[
            ("resourcelist", format!("{b}rs/rl.xml")),
            ("resourcedump", format!("{b}rs/rd.xml")),
            ("changelist", format!("{b}rs/cl.xml")),
        ]),
    );
    src.hold("/rs/rd-1.zip", 1, "/rs/cl.xml", 2);
    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&cap, &dest)).await;
    assert_eq!((r.mode, r.failed), (Mode::Baseline, 0), "{r:?}");
    assert_eq!((r.packages, r.from_packages), (1, 2), "{r:?}");
    assert_eq!(
        *src.met.lock().expect("met"),
        vec!["/rs/rd-1.zip".to_owned()],
        "the Change List was not asked for again while the package's answer was out"
    );
    assert_eq!(src.not_modified("/rs/cl.xml"), 1);
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), b"alpha".to_vec()),
        ("b.txt".to_owned(), b"bravo".to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
}
