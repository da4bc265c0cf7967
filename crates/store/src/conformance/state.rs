//! The contracts of the state's ports (see [`crate::state`]): [`RECORDS`], [`LEASES`] and
//! [`WORK_QUEUE`], each check on a new, empty state.
//!
//! A lease or claim taken for a time-to-live of zero has expired as soon as it is taken: the
//! checks of expiry need no clock and no sleep.

use std::collections::HashSet;
use std::time::Duration;

use resourcesync_model::{Change, Hashes, W3cDateTime};

use super::{Check, Outcome, ensure, ok, run_checks};
use crate::error::Error;
use crate::path::RelPath;
use crate::state::{
    Batch, KnownDocument, Leases, Op, PendingChange, RecordWrites, Records, ResourceRecord,
    SourceCursor, WorkItem, WorkQueue, for_each_resource,
};

mod versions;

/// A state with every port: the subject of the checks of leases and of the work queue (a
/// fence and a claim are checked in a batch of records, so those checks need all three).
pub trait SharedState: Records + Leases + WorkQueue {}

impl<T: Records + Leases + WorkQueue + ?Sized> SharedState for T {}

/// The checks of [`Records`] (reads, and writes through `apply`), by name.
pub const RECORDS: &[Check<dyn Records>] = &[
    ("records_page_in_uri_order", records_page_in_uri_order),
    ("pending_changes_and_cursors", pending_changes_and_cursors),
    ("a_path_names_its_owner", a_path_names_its_owner),
    (
        "putting_a_row_forgets_its_pending",
        putting_a_row_forgets_its_pending,
    ),
    (
        "documents_are_remembered_per_start",
        documents_are_remembered_per_start,
    ),
    ("versions_in_time_order", versions::versions_in_time_order),
    (
        "a_body_seen_again_is_a_new_version",
        versions::a_body_seen_again_is_a_new_version,
    ),
    (
        "a_deleted_resource_keeps_its_versions",
        versions::a_deleted_resource_keeps_its_versions,
    ),
    (
        "versions_page_in_uri_then_time_order",
        versions::versions_page_in_uri_then_time_order,
    ),
    ("versions_in_one_batch", versions::versions_in_one_batch),
];

/// The checks of [`Leases`], and of batches fenced by them, by name.
pub const LEASES: &[Check<dyn SharedState>] = &[
    ("a_batch_is_all_or_nothing", a_batch_is_all_or_nothing),
    (
        "a_version_is_written_with_its_batch",
        versions::a_version_is_written_with_its_batch,
    ),
    ("one_holder_per_lease", one_holder_per_lease),
    (
        "an_expired_lease_is_taken_over",
        an_expired_lease_is_taken_over,
    ),
];

/// The checks of the [`WorkQueue`], and of batches completing its claims, by name.
pub const WORK_QUEUE: &[Check<dyn SharedState>] = &[
    ("work_is_claimed_once", work_is_claimed_once),
    ("work_left_counts_per_source", work_left_counts_per_source),
    (
        "an_expired_claim_is_taken_over",
        an_expired_claim_is_taken_over,
    ),
    ("a_held_claim_is_renewed", a_held_claim_is_renewed),
    (
        "racing_workers_do_each_item_once",
        racing_workers_do_each_item_once,
    ),
    (
        "a_waiter_is_woken_by_the_last_completion",
        a_waiter_is_woken_by_the_last_completion,
    ),
];

/// Runs the checks of [`Records`] only, each on a new, empty state from `make`: for records
/// that are not a whole state (a wrapper such as [`crate::Fenced`] or [`crate::Claimed`]).
pub fn run_records(mut make: impl FnMut() -> Box<dyn Records>) -> Outcome {
    run_checks(RECORDS, &mut make).map_err(|e| prefixed("records", &e))
}

/// Runs every check of every port, each on a new, empty state from `make`; a failure is
/// named by its port and check (`leases: one_holder_per_lease: …`).
pub fn run(mut make: impl FnMut() -> Box<dyn SharedState>) -> Outcome {
    by_port([
        (
            "records",
            run_checks(RECORDS, &mut || make() as Box<dyn Records>),
        ),
        ("leases", run_checks(LEASES, &mut make)),
        ("work_queue", run_checks(WORK_QUEUE, &mut make)),
    ])
}

/// Every check of every port from a task on a Tokio runtime's worker (multi-threaded, then
/// current-thread), its calls through [`crate::blocking::call`], on a new state from `make`;
/// a failure is named by its port and check.
pub fn run_on_workers(mut make: impl FnMut() -> Box<dyn SharedState>) -> Outcome {
    use super::worker::run_checks_on_workers as on_workers;
    by_port([
        (
            "records",
            on_workers(RECORDS, &mut || make() as Box<dyn Records>),
        ),
        ("leases", on_workers(LEASES, &mut make)),
        ("work_queue", on_workers(WORK_QUEUE, &mut make)),
    ])
}

/// The outcomes of the ports' checks as one: every failure line named by its port.
fn by_port<const N: usize>(outcomes: [(&str, Outcome); N]) -> Outcome {
    let failed: Vec<String> = outcomes
        .into_iter()
        .filter_map(|(port, o)| o.err().map(|e| prefixed(port, &e)))
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n"))
    }
}

/// Each line of `failures` with the port it is of.
fn prefixed(port: &str, failures: &str) -> String {
    failures
        .lines()
        .map(|l| format!("{port}: {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

const LONG: Duration = Duration::from_secs(3600);
const EXPIRED: Duration = Duration::ZERO;

fn record(source: &str, uri: &str, path: &str) -> ResourceRecord {
    ResourceRecord {
        uri: uri.into(),
        source: source.into(),
        path: path.into(),
        length: Some(3),
        hashes: Hashes::parse("md5:900150983cd24fb0d6963f7d28e17f72").0,
        lastmod: W3cDateTime::parse("2013-01-02T13:00:00Z").ok(),
        etag: Some("\"e\"".into()),
        last_modified: None,
        gone: false,
    }
}

/// A path of the checks (each a valid one).
fn rel(p: &str) -> std::result::Result<RelPath, String> {
    RelPath::parse(p).map_err(|e| format!("the path {p:?}: {e}"))
}

fn uris(s: &dyn Records, source: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    ok(
        "for_each_resource",
        for_each_resource(s, source, |r| {
            out.push(r.uri);
            Ok(())
        }),
    )?;
    Ok(out)
}

fn records_page_in_uri_order(s: &dyn Records) -> Outcome {
    // "" sorts first; another Source's rows interleave.
    let mine = ["", "http://h/a", "http://h/b", "http://h/b/c", "http://h/é"];
    for (i, u) in mine.iter().enumerate().rev() {
        ok("put", s.put_resource(&record("cap", u, &format!("p{i}"))))?;
        ok(
            "put",
            s.put_resource(&record("other", &format!("{u}x"), "o")),
        )?;
    }
    let r = ok("get", s.resource("http://h/a"))?.ok_or("row missing")?;
    ensure!(r == record("cap", "http://h/a", "p1"), "round trip: {r:?}");
    let page = ok("page", s.resources_page("cap", None, 2))?;
    let got: Vec<&str> = page.iter().map(|r| r.uri.as_str()).collect();
    ensure!(got == mine[..2], "first page {got:?}");
    let page = ok("page", s.resources_page("cap", Some("http://h/a"), 2))?;
    let got: Vec<&str> = page.iter().map(|r| r.uri.as_str()).collect();
    ensure!(got == mine[2..4], "second page {got:?}");
    ensure!(uris(s, "cap")? == mine, "all rows: {:?}", uris(s, "cap")?);
    ensure!(ok("has_path", s.has_path(&rel("p3")?))?, "has_path");
    let known = ok(
        "has_paths",
        s.has_paths(&[&rel("p3")?, &rel("nowhere")?, &rel("p1")?, &rel("p3")?]),
    )?;
    ensure!(known == [true, false, true, true], "has_paths {known:?}");
    ensure!(
        ok("has_paths", s.has_paths(&[]))?.is_empty(),
        "has_paths of nothing"
    );
    ok("gone", s.set_gone("http://h/b", true))?;
    ensure!(
        ok("get", s.resource("http://h/b"))?.is_some_and(|r| r.gone),
        "set_gone"
    );
    // Replaced under another path: the old path is free.
    ok("put", s.put_resource(&record("cap", "http://h/b", "moved")))?;
    ensure!(
        !ok("has_path", s.has_path(&rel("p2")?))?,
        "an old path kept"
    );
    ok("remove", s.remove_resource("http://h/b"))?;
    ensure!(ok("get", s.resource("http://h/b"))?.is_none(), "removed");
    ensure!(
        !ok("has_path", s.has_path(&rel("moved")?))?,
        "a removed path kept"
    );
    ensure!(uris(s, "other")?.len() == mine.len(), "the other Source");
    // Counted per Source: a removed row is not, a gone one (copy kept) is.
    ok("gone", s.set_gone("http://h/a", true))?;
    let n = ok("count", s.count_resources("cap"))?;
    ensure!(n == mine.len() as u64 - 1, "count_resources: {n}");
    // The rows kept after a delete alone, a page at a time, this Source's only.
    ok("gone", s.set_gone("http://h/é", true))?;
    ok("gone", s.set_gone("http://h/ax", true))?;
    let gone = |after: Option<&str>, n| {
        ok("gone_page", s.gone_page("cap", after, n))
            .map(|p| p.into_iter().map(|r| r.uri).collect::<Vec<_>>())
    };
    ensure!(gone(None, 1)? == ["http://h/a"], "first gone page");
    ensure!(
        gone(Some("http://h/a"), 5)? == ["http://h/é"],
        "gone rows after a URI: {:?}",
        gone(Some("http://h/a"), 5)?
    );
    ok("not gone", s.set_gone("http://h/é", false))?;
    ensure!(
        gone(None, 5)? == ["http://h/a"],
        "gone rows: {:?}",
        gone(None, 5)?
    );
    ensure!(
        ok("count", s.count_resources("nobody"))? == 0,
        "count of an unknown Source"
    );
    // The bytes of a Source's copies: the lengths its rows record (3 each here).
    let b = ok("bytes", s.bytes_recorded("cap"))?;
    ensure!(b == 3 * (mine.len() as u64 - 1), "bytes_recorded: {b}");
    ensure!(
        ok("bytes", s.bytes_recorded("nobody"))? == 0,
        "bytes of an unknown Source"
    );
    // Over every Source: "cap" and "other" (3 bytes recorded for each row).
    let (rows, bytes) = ok("totals", s.recorded_totals())?;
    ensure!(
        rows == 2 * mine.len() as u64 - 1 && bytes == b + 3 * mine.len() as u64,
        "recorded_totals: {rows} rows, {bytes} bytes"
    );
    Ok(())
}

/// [`Records::path_owner`]: the URI whose row has a path, whatever its Source, a
/// placeholder's (gone, no length) included; the least URI when rows share a path.
fn a_path_names_its_owner(s: &dyn Records) -> Outcome {
    ensure!(
        ok("path_owner", s.path_owner(&rel("x/doc.txt")?))?.is_none(),
        "an owner of nothing"
    );
    ok(
        "put",
        s.put_resource(&record("cap", "http://h/x/doc.txt", "x/doc.txt")),
    )?;
    let owner = ok("path_owner", s.path_owner(&rel("x/doc.txt")?))?;
    ensure!(
        owner.as_deref() == Some("http://h/x/doc.txt"),
        "owner {owner:?}"
    );
    ensure!(
        ok("path_owner", s.path_owner(&rel("x/DOC.txt")?))?.is_none(),
        "paths compared as they are"
    );
    let placeholder = ResourceRecord {
        length: None,
        hashes: Hashes::default(),
        gone: true,
        ..record("other", "http://other/p", "p")
    };
    ok("put", s.put_resource(&placeholder))?;
    let owner = ok("path_owner", s.path_owner(&rel("p")?))?;
    ensure!(
        owner.as_deref() == Some("http://other/p"),
        "placeholder owner {owner:?}"
    );
    // Rows that share a path (written before paths were checked): the least URI, either way
    // round.
    ok("put", s.put_resource(&record("cap", "http://a/p", "p")))?;
    ok("put", s.put_resource(&record("cap", "http://z/p", "p")))?;
    let owner = ok("path_owner", s.path_owner(&rel("p")?))?;
    ensure!(
        owner.as_deref() == Some("http://a/p"),
        "shared owner {owner:?}"
    );
    ok("remove", s.remove_resource("http://a/p"))?;
    let owner = ok("path_owner", s.path_owner(&rel("p")?))?;
    ensure!(
        owner.as_deref() == Some("http://other/p"),
        "after a removal {owner:?}"
    );
    let owners = ok(
        "path_owners",
        s.path_owners(&[&rel("p")?, &rel("nowhere")?, &rel("x/doc.txt")?, &rel("p")?]),
    )?;
    ensure!(
        owners
            == [
                Some("http://other/p".to_owned()),
                None,
                Some("http://h/x/doc.txt".to_owned()),
                Some("http://other/p".to_owned())
            ],
        "path_owners {owners:?}"
    );
    ensure!(
        ok("path_owners", s.path_owners(&[]))?.is_empty(),
        "path_owners of nothing"
    );
    // Moved to another path: the old one is free.
    ok("put", s.put_resource(&record("cap", "http://other/p", "q")))?;
    ok("put", s.put_resource(&record("cap", "http://z/p", "r")))?;
    ensure!(
        ok("path_owner", s.path_owner(&rel("p")?))?.is_none(),
        "an old path still owned"
    );
    Ok(())
}

fn pending_changes_and_cursors(s: &dyn Records) -> Outcome {
    ensure!(
        ok("cursor", s.cursor("cap"))?.is_none(),
        "a cursor of nothing"
    );
    let c = SourceCursor {
        source: "cap".into(),
        cursor: W3cDateTime::parse("2013-01-03T00:00:00.5Z").ok(),
        synced_at: W3cDateTime::parse("2013-01-04T00:00:00Z").ok(),
        checked_at: W3cDateTime::parse("2013-01-04T00:00:01Z").ok(),
    };
    ok("set cursor", s.set_cursor(&c))?;
    ensure!(ok("cursor", s.cursor("cap"))? == Some(c.clone()), "cursor");
    let p = PendingChange {
        source: "cap".into(),
        uri: "http://h/z".into(),
        change: Some(Change::Updated),
        length: Some(9),
        hashes: Hashes::parse("md5:900150983cd24fb0d6963f7d28e17f72").0,
        lastmod: W3cDateTime::parse("2013-01-02T13:00:00Z").ok(),
        duplicates: vec![(1, "http://m/z".into())],
        error: "HTTP 500".into(),
    };
    ok("pending", s.put_pending(&p))?;
    ok(
        "pending",
        s.put_pending(&PendingChange {
            uri: "http://h/y".into(),
            ..p.clone()
        }),
    )?;
    let got = ok("pending page", s.pending_page("cap", None, 10))?;
    ensure!(got.len() == 2 && got[1] == p, "pending {got:?}");
    let got = ok(
        "pending page",
        s.pending_page("cap", Some("http://h/y"), 10),
    )?;
    ensure!(got == [p.clone()], "pending after: {got:?}");
    ok("remove pending", s.remove_pending("cap", "http://h/z"))?;
    ensure!(
        ok("pending page", s.pending_page("cap", None, 10))?.len() == 1,
        "removed"
    );
    Ok(())
}

fn putting_a_row_forgets_its_pending(s: &dyn Records) -> Outcome {
    for u in ["http://h/a", "http://h/b", "http://h/c"] {
        ok(
            "pending",
            s.put_pending(&PendingChange {
                source: "cap".into(),
                uri: u.into(),
                ..PendingChange::default()
            }),
        )?;
    }
    ok(
        "put_resources",
        s.put_resources(&[record("cap", "http://h/a", "a")]),
    )?;
    // One row alone: the same as in a batch (`Batch::put_resource`).
    ok(
        "put_resource",
        s.put_resource(&record("cap", "http://h/c", "c")),
    )?;
    let left = ok("pending", s.pending_page("cap", None, 10))?;
    ensure!(
        left.len() == 1 && left[0].uri == "http://h/b",
        "left {left:?}"
    );
    Ok(())
}

fn a_batch_is_all_or_nothing(s: &dyn SharedState) -> Outcome {
    let held = ok("lease", s.lease_source("cap", "w1", LONG))?.ok_or("no lease")?;
    let stale = ok("lease", s.lease_source("old", "w1", EXPIRED))?.ok_or("no lease")?;
    let (a, b) = (
        record("cap", "http://h/a", "a"),
        record("cap", "http://h/b", "b"),
    );
    let c = SourceCursor {
        source: "cap".into(),
        cursor: W3cDateTime::parse("2020-01-01T00:00:00Z").ok(),
        synced_at: None,
        checked_at: None,
    };
    // A fence that fails last: the writes before it are undone.
    let mut batch = Batch::new();
    batch
        .put_resource(&a)
        .push(Op::SetCursor(&c))
        .push(Op::RemoveResource("http://h/none"))
        .put_resource(&b)
        .fence(&stale);
    match s.apply(&batch) {
        Err(Error::LeaseLost { .. }) => {}
        other => return Err(format!("a batch fenced by an expired lease: {other:?}")),
    }
    ensure!(
        uris(s, "cap")?.is_empty(),
        "rows of a failed batch: {:?}",
        uris(s, "cap")?
    );
    ensure!(
        ok("cursor", s.cursor("cap"))?.is_none(),
        "cursor of a failed batch"
    );
    // The same batch fenced by a lease held.
    let mut batch = Batch::new();
    batch
        .fence(&held)
        .put_resource(&a)
        .push(Op::SetCursor(&c))
        .put_resource(&b);
    ok("apply", s.apply(&batch))?;
    ensure!(uris(s, "cap")? == ["http://h/a", "http://h/b"], "rows");
    ensure!(ok("cursor", s.cursor("cap"))? == Some(c), "cursor");
    ok("empty batch", s.apply(&Batch::new()))?;
    Ok(())
}

fn doc(role: &str, url: &str, etag: Option<&str>) -> KnownDocument {
    KnownDocument {
        role: role.into(),
        url: url.into(),
        etag: etag.map(str::to_owned),
        last_modified: Some("Sun, 06 Nov 1994 08:49:37 GMT".into()),
    }
}

fn documents_are_remembered_per_start(s: &dyn Records) -> Outcome {
    ensure!(
        ok("documents", s.documents("http://h/"))?.is_empty(),
        "documents of nothing"
    );
    let (cl, ix) = (
        doc("capabilitylist", "http://h/cl.xml", Some("\"1\"")),
        doc("changelist", "http://h/ix.xml", None),
    );
    ok(
        "set",
        s.set_documents("http://h/", &[ix.clone(), cl.clone()]),
    )?;
    ok(
        "other start",
        s.set_documents("http://g/", &[doc("x", "http://g/x", None)]),
    )?;
    let got = ok("documents", s.documents("http://h/"))?;
    ensure!(got == [cl.clone(), ix.clone()], "in role order: {got:?}");
    // Replaced as a whole, in a batch with the cursor.
    let ix2 = doc("changelist", "http://h/ix.xml", Some("\"2\""));
    let c = SourceCursor {
        source: "http://h/cl.xml".into(),
        cursor: W3cDateTime::parse("2020-01-01T00:00:00Z").ok(),
        synced_at: None,
        checked_at: None,
    };
    let docs = [ix2.clone()];
    let mut b = Batch::new();
    b.push(Op::SetCursor(&c))
        .push(Op::SetDocuments("http://h/", &docs));
    ok("apply", s.apply(&b))?;
    let got = ok("documents", s.documents("http://h/"))?;
    ensure!(got == [ix2], "replaced: {got:?}");
    ensure!(
        ok("documents", s.documents("http://g/"))?.len() == 1,
        "another start kept"
    );
    ok("forget", s.set_documents("http://h/", &[]))?;
    ensure!(
        ok("documents", s.documents("http://h/"))?.is_empty(),
        "forgotten"
    );
    Ok(())
}

fn one_holder_per_lease(s: &dyn SharedState) -> Outcome {
    let got: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|i| sc.spawn(move || s.lease_source("cap", &format!("w{i}"), LONG)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Ok(None)))
            .collect()
    });
    let held: Vec<_> = got
        .into_iter()
        .collect::<crate::Result<Vec<_>>>()
        .map_err(|e| format!("lease: {e}"))?
        .into_iter()
        .flatten()
        .collect();
    ensure!(
        held.len() == 1,
        "{} workers hold the lease at once",
        held.len()
    );
    let l = &held[0];
    let again = ok("renew", s.lease_source("cap", &l.holder, LONG))?.ok_or("renewal refused")?;
    ensure!(again.token == l.token, "a renewal changed the token");
    let other = if l.holder == "w0" { "w1" } else { "w0" };
    ensure!(
        ok("lease", s.lease_source("cap", other, LONG))?.is_none(),
        "a second holder"
    );
    // Another Source is free.
    ensure!(
        ok("lease", s.lease_source("cap2", other, LONG))?.is_some(),
        "another Source refused"
    );
    ensure!(ok("release", s.release_source(l))?, "release refused");
    ensure!(!ok("release", s.release_source(l))?, "released twice");
    let next = ok("lease", s.lease_source("cap", other, LONG))?.ok_or("not free after release")?;
    ensure!(
        next.token > l.token,
        "the token did not grow: {} then {}",
        l.token,
        next.token
    );
    Ok(())
}

fn an_expired_lease_is_taken_over(s: &dyn SharedState) -> Outcome {
    let old = ok("lease", s.lease_source("cap", "w1", EXPIRED))?.ok_or("no lease")?;
    let new = ok("lease", s.lease_source("cap", "w2", LONG))?.ok_or("not taken over")?;
    ensure!(new.token > old.token, "the token did not grow");
    ensure!(
        ok("lease", s.lease_source("cap", "w1", LONG))?.is_none(),
        "the old holder took it back"
    );
    ensure!(
        !ok("release", s.release_source(&old))?,
        "released by the old holder"
    );
    let r = record("cap", "http://h/a", "a");
    let mut b = Batch::new();
    b.fence(&old).put_resource(&r);
    ensure!(
        matches!(s.apply(&b), Err(Error::LeaseLost { .. })),
        "the old holder wrote"
    );
    let mut b = Batch::new();
    b.fence(&new).put_resource(&r);
    ok("apply", s.apply(&b))?;
    Ok(())
}

fn item(k: &str) -> WorkItem {
    WorkItem {
        key: k.into(),
        source: "cap".into(),
        payload: format!("fetch {k}"),
    }
}

fn work_is_claimed_once(s: &dyn SharedState) -> Outcome {
    let items: Vec<WorkItem> = (0..40).map(|i| item(&format!("k{i:02}"))).collect();
    ensure!(ok("add", s.add_work(&items))? == 40, "add");
    ensure!(
        ok("add", s.add_work(&items[..3]))? == 0,
        "a key queued twice"
    );
    let first = ok("claim", s.claim_work("w0", 2, LONG))?;
    let keys: Vec<&str> = first.iter().map(|c| c.item.key.as_str()).collect();
    ensure!(keys == ["k00", "k01"], "claimed first {keys:?}");
    ensure!(
        first[0].item == items[0] && first[0].attempts == 1,
        "{:?}",
        first[0]
    );
    // Workers claiming at once never get the same item.
    let got: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (1..5)
            .map(|i| {
                sc.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        match s.claim_work(&format!("w{i}"), 3, LONG) {
                            Ok(c) if c.is_empty() => return Ok(mine),
                            Ok(c) => mine.extend(c),
                            Err(e) => return Err(e),
                        }
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Ok(Vec::new())))
            .collect()
    });
    let mut seen = HashSet::new();
    let mut claims = Vec::new();
    for g in got {
        for c in g.map_err(|e| format!("claim: {e}"))? {
            ensure!(
                seen.insert(c.item.key.clone()),
                "{} claimed twice",
                c.item.key
            );
            claims.push(c);
        }
    }
    ensure!(
        seen.len() == 38,
        "{} items claimed by the others",
        seen.len()
    );
    ensure!(
        ok("claim", s.claim_work("w9", 5, LONG))?.is_empty(),
        "claimed a held item"
    );
    ensure!(ok("complete", s.complete(&first))? == 2, "complete");
    ensure!(ok("complete", s.complete(&first))? == 0, "completed twice");
    let back = &claims[..1];
    ensure!(ok("release", s.release(back))? == 1, "release");
    let again = ok("claim", s.claim_work("w9", 5, LONG))?;
    ensure!(
        again.len() == 1 && again[0].item == back[0].item && again[0].attempts == 2,
        "claimed after release: {again:?}"
    );
    // Completed with what it wrote, in one batch.
    let r = record("cap", "http://h/a", "a");
    let mut b = Batch::new();
    b.push(Op::CompleteWork(&again[0])).put_resource(&r);
    ok("apply", s.apply(&b))?;
    ensure!(ok("complete", s.complete(&again))? == 0, "completed twice");
    Ok(())
}

/// The items of a Source still queued, claimed or not, until completed; another Source's not.
fn work_left_counts_per_source(s: &dyn SharedState) -> Outcome {
    ensure!(ok("left", s.work_left("cap"))? == 0, "an empty queue");
    let mut items: Vec<WorkItem> = (0..5).map(|i| item(&format!("l{i}"))).collect();
    items.push(WorkItem {
        key: "other l0".into(),
        source: "other".into(),
        payload: String::new(),
    });
    ok("add", s.add_work(&items))?;
    ensure!(ok("left", s.work_left("cap"))? == 5, "5 queued");
    ensure!(ok("left", s.work_left("other"))? == 1, "1 queued elsewhere");
    let claims = ok("claim", s.claim_work("w1", 3, LONG))?;
    ensure!(claims.len() == 3, "claim");
    ensure!(
        ok("left", s.work_left("cap"))? == 5,
        "claimed items are still left"
    );
    ensure!(ok("complete", s.complete(&claims[..2]))? == 2, "complete");
    let mut b = Batch::new();
    b.push(Op::CompleteWork(&claims[2]));
    ok("apply", s.apply(&b))?;
    ensure!(ok("left", s.work_left("cap"))? == 2, "3 completed");
    Ok(())
}

/// Long enough that a waiter not woken by the last completion is seen not woken (it returns
/// `false` at its timeout), short enough that a state that only polls fails in a minute.
const WOKEN_WITHIN: Duration = Duration::from_secs(60);

/// [`WorkQueue::wait_drained`]: at once when nothing is left, `false` at its timeout while
/// items are left (another Source's do not count), and woken by the completion of the last
/// item (by `complete` or by a batch), not by its timeout.
fn a_waiter_is_woken_by_the_last_completion(s: &dyn SharedState) -> Outcome {
    ensure!(
        ok("wait", s.wait_drained("cap", LONG))?,
        "an empty queue is drained"
    );
    let mut items: Vec<WorkItem> = (0..3).map(|i| item(&format!("w{i}"))).collect();
    items.push(WorkItem {
        key: "other w0".into(),
        source: "other".into(),
        payload: String::new(),
    });
    ok("add", s.add_work(&items))?;
    ensure!(
        !ok("wait", s.wait_drained("cap", EXPIRED))?,
        "drained with 3 items left"
    );
    let claims = ok("claim", s.claim_work("w1", 4, LONG))?;
    ensure!(claims.len() == 4, "claimed {}", claims.len());
    let cap: Vec<_> = claims.iter().filter(|c| c.item.source == "cap").collect();
    let (first, last) = (vec![cap[0].clone(), cap[1].clone()], cap[2].clone());
    let started = std::time::Instant::now();
    let (woken, done) = std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = sc.spawn(move || {
            let _ = tx.send(());
            s.wait_drained("cap", WOKEN_WITHIN)
        });
        // The waiter is (about to be) waiting: the completions come now.
        let _ = rx.recv();
        let done = s.complete(&first).and_then(|n| {
            let r = record("cap", "http://h/w2", "w2");
            let mut b = Batch::new();
            b.put_resource(&r).push(Op::CompleteWork(&last));
            s.apply(&b).map(|()| n + 1)
        });
        let woken = waiter
            .join()
            .unwrap_or_else(|_| Ok(false))
            .map_err(|e| format!("wait: {e}"));
        (woken, done)
    });
    ensure!(ok("complete", done)? == 3, "3 completed");
    ensure!(woken?, "the waiter was not told the queue drained");
    ensure!(
        started.elapsed() < WOKEN_WITHIN,
        "woken by its timeout, not by the completion"
    );
    ensure!(
        !ok("wait", s.wait_drained("other", EXPIRED))?,
        "another Source's item was drained"
    );
    Ok(())
}

fn an_expired_claim_is_taken_over(s: &dyn SharedState) -> Outcome {
    ok("add", s.add_work(&[item("a"), item("b")]))?;
    let old = ok("claim", s.claim_work("w1", 1, EXPIRED))?;
    ensure!(old.len() == 1 && old[0].item.key == "a", "{old:?}");
    let new = ok("claim", s.claim_work("w2", 1, LONG))?;
    ensure!(
        new.len() == 1 && new[0].item.key == "a" && new[0].attempts == 2,
        "not taken over: {new:?}"
    );
    ensure!(new[0].token > old[0].token, "the token did not grow");
    ensure!(
        ok("complete", s.complete(&old))? == 0,
        "completed by the old holder"
    );
    ensure!(
        ok("release", s.release(&old))? == 0,
        "released by the old holder"
    );
    let r = record("cap", "http://h/a", "a");
    let mut b = Batch::new();
    b.put_resource(&r).push(Op::CompleteWork(&old[0]));
    ensure!(
        matches!(s.apply(&b), Err(Error::LeaseLost { .. })),
        "a batch completing a lost claim was applied"
    );
    ensure!(
        ok("get", s.resource("http://h/a"))?.is_none(),
        "its row was written"
    );
    ensure!(
        ok("complete", s.complete(&new))? == 1,
        "complete by the new holder"
    );
    let rest = ok("claim", s.claim_work("w3", 5, LONG))?;
    ensure!(rest.len() == 1 && rest[0].item.key == "b", "left {rest:?}");
    Ok(())
}

/// Renewing extends the claims still held, all at once; a claim that expired and was taken
/// over, or that was completed or released, is not renewed (and its holder still cannot
/// complete it).
fn a_held_claim_is_renewed(s: &dyn SharedState) -> Outcome {
    ok("add", s.add_work(&[item("a"), item("b"), item("c")]))?;
    let held = ok("claim", s.claim_work("w1", 3, Duration::from_secs(60)))?;
    ensure!(held.len() == 3, "claim {held:?}");
    let renewed = ok("renew", s.renew_work(&held, LONG))?;
    ensure!(
        renewed.len() == 3
            && renewed
                .iter()
                .zip(&held)
                .all(|(r, h)| r.item.key == h.item.key
                    && r.token == h.token
                    && r.expires > h.expires),
        "not renewed: {renewed:?}"
    );
    // Renewed, `a` is not taken over by another worker.
    ensure!(
        ok("claim", s.claim_work("w2", 3, LONG))?.is_empty(),
        "a held claim was taken"
    );
    // `a` renewed until now (it lapses), then taken over: lost to its first holder.
    ensure!(
        ok("renew", s.renew_work(&held[..1], EXPIRED))?.len() == 1,
        "renew to now"
    );
    let taken = ok("claim", s.claim_work("w2", 3, LONG))?;
    ensure!(
        taken.len() == 1 && taken[0].item.key == "a",
        "not taken over: {taken:?}"
    );
    // `b` completed, `c` released: none of the three is renewed any more.
    ensure!(ok("complete", s.complete(&held[1..2]))? == 1, "complete b");
    ensure!(ok("release", s.release(&held[2..]))? == 1, "release c");
    let again = ok("renew", s.renew_work(&held, LONG))?;
    ensure!(
        again.is_empty(),
        "renewed a lost or settled claim: {again:?}"
    );
    ensure!(
        ok("complete", s.complete(&held[..1]))? == 0,
        "completed by the holder that lost it"
    );
    ensure!(
        ok("renew", s.renew_work(&taken, LONG))?.len() == 1,
        "the new holder renews it"
    );
    ensure!(ok("complete", s.complete(&taken))? == 1, "complete a");
    Ok(())
}

/// Workers claiming and completing at once, as an aggregator's do: every item is completed
/// exactly once (none done twice, none lost), and the queue ends empty.
fn racing_workers_do_each_item_once(s: &dyn SharedState) -> Outcome {
    let items: Vec<WorkItem> = (0..60).map(|i| item(&format!("r{i:02}"))).collect();
    ensure!(ok("add", s.add_work(&items))? == 60, "add");
    let got: Vec<_> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                sc.spawn(move || -> std::result::Result<Vec<String>, String> {
                    let worker = format!("w{i}");
                    let mut done = Vec::new();
                    loop {
                        let claims = ok("claim", s.claim_work(&worker, 3, LONG))?;
                        if claims.is_empty() {
                            return Ok(done);
                        }
                        let n = ok("complete", s.complete(&claims))?;
                        ensure!(
                            n == claims.len(),
                            "{worker} completed {n} of its {} claims",
                            claims.len()
                        );
                        done.extend(claims.into_iter().map(|c| c.item.key));
                    }
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect()
    });
    let mut seen = HashSet::new();
    for g in got {
        for k in g? {
            ensure!(seen.insert(k.clone()), "{k} done twice");
        }
    }
    ensure!(seen.len() == 60, "{} of 60 items done", seen.len());
    ensure!(
        ok("claim", s.claim_work("w9", 5, EXPIRED))?.is_empty(),
        "items left in the queue"
    );
    Ok(())
}
