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

use std::sync::{Arc, Mutex};

use common::*;
use resourcesync_destination::{Mode, Observer, SyncOptions, SyncReport, sync};
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
    let up = up.map_or(String::new(), |u| format!("<rs:ln rel=\"up\" href=\"{u}\"/>\n"));
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
    format!("length=\"{}\" hash=\"md5:{}\"", body.len(), md5_of(body))
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
    assert!(w.contains(&format!("{b}rs/cl.xml")), "names the document: {w}");
    assert!(w.contains("no `from`"), "{w}");
    assert!(!w.contains("at , "), "an empty datetime: {w}");
    assert_eq!(
        r.warnings.iter().filter(|w| w.contains("cursor")).count(),
        1,
        "{:#?}",
        r.warnings
    );
}
