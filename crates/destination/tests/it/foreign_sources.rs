//! The Destination against Sources that are not ours, written by hand: served by a plain static
//! server, or by a small server of the test's own that changes resources while a sync runs.
//!
//! - Resources that change while a baseline runs: the run catches up from the Change Lists after
//!   the Resource List's `at` (Z39.99-2014 §12) and ends with the copy the Source last published.
//! - A Change List without `from`: said once, with the document.
//! - What the Destination says about a Source's documents: the document, the line, what to do.
//!
//! (Sources that offer only dumps: `foreign_dumps.rs`.)

use crate::common;
use crate::hand;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use common::*;
use hand::*;
use resourcesync_destination::{Mode, SyncOptions, SyncReport, sync};

async fn run(o: &SyncOptions) -> SyncReport {
    sync(o, Arc::new(Recorder::default())).await.expect("sync")
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
    let app = axum::Router::new().fallback(live_handler).with_state(live);
    format!("http://{}/", resourcesync_testkit::serve(app).await)
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
    // Right after the catch-up reads the Change List (the second read: the first is beside the
    // baseline, crate::sync::ahead): a.txt changes again.
    live.on(
        "/rs/cl.xml",
        2,
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
    // a, b and c of the list and new.txt, each once (gone.txt: deleted, counted apart).
    adds_up(&r, 4);
    assert_eq!(
        live.hits("/rs/cl.xml"),
        3,
        "beside the baseline, after it, then again once for a.txt"
    );
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

/// A resource deleted (HTTP 404) and one changed (another digest) after the Resource List was
/// written, whose changes a busy Source lists only at the second and the third reading of its
/// Change List (driven by the count of readings): the run reads the Change List again after the
/// baseline (bounded, `catch_up::MAX_READINGS`) and applies them: no failure (exit 0), the
/// deleted resource absent, the changed one at its listed version, each resource counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_a_busy_source_lists_a_little_later_are_caught_up_in_the_same_run() {
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
    let deleted = (
        format!("{b}gone.txt"),
        "deleted",
        "2024-03-01T00:00:01Z",
        b"".as_slice(),
    );
    let updated = (format!("{b}a.txt"), "updated", "2024-03-01T00:00:02Z", a2);
    // Once the catch-up has read the Change List once, it lists the deletion; twice, the
    // update (the first read of all is beside the baseline: crate::sync::ahead).
    live.on(
        "/rs/cl.xml",
        2,
        vec![(
            "/rs/cl.xml".into(),
            Some(change_list(&cap, std::slice::from_ref(&deleted))),
        )],
    );
    live.on(
        "/rs/cl.xml",
        3,
        vec![(
            "/rs/cl.xml".into(),
            Some(change_list(&cap, &[deleted.clone(), updated])),
        )],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    assert_eq!(
        live.hits("/rs/cl.xml"),
        4,
        "beside the baseline, then until both changes are listed"
    );
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), a2.to_vec()),
        ("b.txt".to_owned(), b"bravo".to_vec()),
        ("c.txt".to_owned(), b"charlie".to_vec()),
    ]
    .into();
    assert_eq!(
        dest_files(&dest),
        expected,
        "gone.txt absent, a.txt as listed"
    );
    // a, b and c, each once (gone.txt: deleted, not present, counted apart).
    adds_up(&r, 3);
    assert_eq!(r.cursor.as_deref(), Some("2024-03-01T00:00:02Z"), "{r:?}");
    // The next run has nothing to do.
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental, "{r:?}");
    assert_eq!(
        (r.created, r.updated, r.deleted, r.failed),
        (0, 0, 0, 0),
        "{r:?}"
    );
}

/// The bound of the catch-up: a Change List that never lists the deletion of a resource the
/// baseline found gone is read `catch_up::MAX_READINGS` times in all, then the failure is the
/// run's (exit 1), saying what it most likely is and what happens next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_never_listed_is_read_for_a_bounded_number_of_times_then_fails() {
    use resourcesync_destination::catch_up::{MAX_READINGS, MAX_WAIT};
    let live = Arc::new(Live::default());
    let (b, cap) = changing_source(&live).await;
    live.on("/rs/rl.xml", 1, vec![("/gone.txt".into(), None)]);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let started = std::time::Instant::now();
    let r = run(&o).await;
    assert_eq!(
        live.hits("/rs/cl.xml"),
        MAX_READINGS as u32 + 1,
        "the Change List read beside the baseline, then a bounded number of times"
    );
    // The waits between the readings add up to MAX_WAIT (a lower bound only: the machine may
    // be slow, never fast).
    assert!(started.elapsed() >= MAX_WAIT, "{:?}", started.elapsed());
    assert_eq!(r.failed, 1, "{:#?}", r.failures);
    let f = &r.failures[0];
    assert_eq!(f.uri, format!("{b}gone.txt"), "{f:?}");
    assert!(
        f.error.contains(&format!(
            "most likely deleted (or moved) after the Resource List of {T0} was written"
        )) && f.error.contains("the next sync catches up from them"),
        "{f:?}"
    );
    // a, b, c, and gone.txt failed.
    adds_up(&r, 4);
}

/// A Change List without `from` (a Source keeping a bounded history: resync-simulator's starts at
/// the oldest change it keeps, and has no `from` when that is a 1.1 deletion) cannot be shown to
/// reach back to the Resource List's `at`: the cursor stays there and the next run diffs. The
/// deletion it lists of the resource the baseline found gone is true all the same: applied, no
/// failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_a_change_list_without_from_lists_explains_a_404_of_the_baseline() {
    let live = Arc::new(Live::default());
    let (b, cap) = changing_source(&live).await;
    let no_from = urlset(
        Some(&cap),
        "capability=\"changelist\"",
        &[url(
            &format!("{b}gone.txt"),
            "change=\"deleted\" datetime=\"2024-03-01T00:00:01Z\"",
        )],
    );
    live.on(
        "/rs/rl.xml",
        1,
        vec![
            ("/gone.txt".into(), None),
            ("/rs/cl.xml".into(), Some(no_from.into_bytes())),
        ],
    );
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&cap, &dest);
    o.http.retries = 0;
    let r = run(&o).await;
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
    assert_eq!(
        live.hits("/rs/cl.xml"),
        3,
        "beside the baseline, refused after it, then read for gone.txt"
    );
    let expected: BTreeMap<String, Vec<u8>> = [
        ("a.txt".to_owned(), b"alpha".to_vec()),
        ("b.txt".to_owned(), b"bravo".to_vec()),
        ("c.txt".to_owned(), b"charlie".to_vec()),
    ]
    .into();
    assert_eq!(dest_files(&dest), expected);
    adds_up(&r, 3);
    assert_eq!(r.cursor.as_deref(), Some(T0), "the cursor stays: {r:?}");
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::BaselineDiff, "{r:?}");
    assert_eq!(r.failed, 0, "{:#?}", r.failures);
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
