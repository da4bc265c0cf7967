//! Include and exclude patterns (`SyncOptions::filter`, crate::filter): only the resources kept
//! are fetched, and the copies of those left out are left alone, by the baseline, by the
//! Change Lists and with `--delete`. Z39.99-2014 §5.2 leaves what a Destination keeps to it.

use crate::common;

use std::sync::Arc;

use common::*;
use resourcesync_destination::{Mode, Quiet, SyncReport, UriFilter, sync};

async fn run(o: &resourcesync_destination::SyncOptions) -> SyncReport {
    sync(o, Arc::new(Quiet)).await.expect("sync")
}

fn filter(include: &[&str], exclude: &[&str]) -> UriFilter {
    let v = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    UriFilter::new(&v(include), &v(exclude)).expect("patterns")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_resources_kept_are_fetched_and_the_others_are_left_alone() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("keep/a.txt", b"alpha"),
            ("keep/b.tmp", b"bravo"),
            ("other/c.txt", b"charlie"),
            ("d.txt", b"delta"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let out = tmp();
    let dest = dest_in(&out);

    // A first run without patterns copies everything.
    let mut o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!((r.created, r.filtered), (4, 0));

    // Changes at the Source: one kept resource and two left out updated, one left out deleted.
    write_tree(
        src.path(),
        &[
            ("keep/a.txt", b"alpha, updated"),
            ("keep/b.tmp", b"bravo, updated"),
            ("other/c.txt", b"charlie, updated"),
        ],
    );
    std::fs::remove_file(src.path().join("d.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    o.filter = filter(&["*/keep/*"], &["*.tmp"]);
    o.delete = true;
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.updated, r.deleted, r.failed), (1, 0, 0), "{r:?}");
    assert_eq!(r.filtered, 3, "b.tmp, c.txt and d.txt are left out");
    assert_eq!(server.resource_hits(), 1, "only keep/a.txt is fetched");
    let got = dest_files(&dest);
    assert_eq!(got["keep/a.txt"], b"alpha, updated");
    // Left alone: neither updated nor deleted.
    assert_eq!(got["keep/b.tmp"], b"bravo");
    assert_eq!(got["other/c.txt"], b"charlie");
    assert_eq!(got["d.txt"], b"delta");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_baseline_fetches_nothing_left_out_even_with_a_resource_dump() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("img/a.png", b"png a"),
            ("img/b.png", b"png b"),
            ("doc/c.pdf", b"pdf c"),
        ],
    );
    let server = Server::start(src.path()).await;
    // With dumps: a package holds every resource, so the lists are read instead.
    publish_with(src.path(), &server.base, |c| c.publish.dumps = true);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.filter = filter(&["*.png"], &[]);
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!((r.created, r.filtered, r.packages), (2, 1, 0), "{r:?}");
    assert_eq!(server.resource_hits(), 2);
    let got = dest_files(&dest);
    assert_eq!(
        got.keys().map(String::as_str).collect::<Vec<_>>(),
        ["img/a.png", "img/b.png"]
    );
}
