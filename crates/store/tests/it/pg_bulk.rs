//! `PgState` applies a batch in a few statements (rows, pending changes and claims each in
//! bulk): the outcome is the batch applied a write at a time, in order, in one transaction.

use std::time::Duration;

use resourcesync_model::{Hashes, W3cDateTime};
use resourcesync_store::{
    Batch, Claimed, Error, Op, PendingChange, PgState, RecordWrites, Records, ResourceRecord,
    WorkItem, WorkQueue,
};

use crate::pg_state::Schemas;

const LONG: Duration = Duration::from_secs(3600);

fn row(uri: &str, path: &str) -> ResourceRecord {
    ResourceRecord {
        uri: uri.into(),
        source: "cap".into(),
        path: path.into(),
        ..ResourceRecord::default()
    }
}

fn pending(uri: &str) -> PendingChange {
    PendingChange {
        source: "cap".into(),
        uri: uri.into(),
        change: None,
        length: None,
        hashes: Hashes::default(),
        lastmod: None,
        duplicates: Vec::new(),
        error: "failed".into(),
    }
}

/// More rows than one statement takes, every column set on some and unset on others, with the
/// pending changes they clear: all written as given; another Source's pending change stays.
#[test]
fn pg_many_rows_in_one_batch_are_each_written_as_given() {
    let mut schemas = Schemas::new();
    let st = schemas.state();
    let n = 2_500;
    for i in (0..n).step_by(7) {
        st.put_pending(&pending(&format!("u{i:05}")))
            .expect("pending");
    }
    let mut other = pending("u00000");
    other.source = "other".into();
    st.put_pending(&other).expect("pending");
    let rows: Vec<ResourceRecord> = (0..n)
        .map(|i| {
            let mut r = row(&format!("u{i:05}"), &format!("d/{i}"));
            if i % 2 == 0 {
                r.length = Some(i as u64);
                r.hashes = Hashes::parse(&format!("md5:{:032x} sha-256:{:064x}", i, i)).0;
                r.lastmod = W3cDateTime::parse("2026-01-02T03:04:05Z").ok();
                r.etag = Some(format!("\"e{i}\""));
                r.last_modified = Some("Fri, 02 Jan 2026 03:04:05 GMT".into());
                r.gone = true;
            }
            r
        })
        .collect();
    st.put_resources(&rows).expect("put");
    assert_eq!(st.count_resources("cap").expect("count"), n as u64);
    for r in &rows {
        assert_eq!(st.resource(&r.uri).expect("read").as_ref(), Some(r));
    }
    let left = st.pending_page("cap", None, 10).expect("pending");
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(st.pending_page("other", None, 10).expect("other").len(), 1);
}

/// Writes of one table in a batch keep their order: a row put twice has its later value, a
/// row put then removed is gone, removed then put is there.
#[test]
fn pg_writes_of_one_batch_keep_their_order() {
    let mut schemas = Schemas::new();
    let st = schemas.state();
    let (a1, a2, b, c) = (row("a", "1"), row("a", "2"), row("b", "b"), row("c", "c"));
    let mut batch = Batch::new();
    batch
        .push(Op::PutResource(&a1))
        .push(Op::PutResource(&b))
        .push(Op::PutResource(&a2))
        .push(Op::RemoveResource("b"))
        .push(Op::PutResource(&c))
        .push(Op::RemoveResource("c"))
        .push(Op::PutResource(&c));
    st.apply(&batch).expect("apply");
    assert_eq!(
        st.resource("a").expect("a").map(|r| r.path),
        Some("2".into())
    );
    assert_eq!(st.resource("b").expect("b"), None);
    assert_eq!(st.resource("c").expect("c"), Some(c.clone()));
    // A pending change put then removed, and removed then put.
    let (p, q) = (pending("p"), pending("q"));
    let mut batch = Batch::new();
    batch
        .push(Op::PutPending(&p))
        .push(Op::RemovePending("cap", "p"))
        .push(Op::RemovePending("cap", "q"))
        .push(Op::PutPending(&q));
    st.apply(&batch).expect("apply");
    let left: Vec<String> = st
        .pending_page("cap", None, 10)
        .expect("pending")
        .into_iter()
        .map(|p| p.uri)
        .collect();
    assert_eq!(left, ["q"]);
}

/// The rows of claimed fetches and the claims' completions in one batch: one claim taken over
/// by another worker refuses the whole batch (named in the error), nothing written, the other
/// claims still held; without it, every row is written and every item completed.
#[test]
fn pg_a_batch_of_completions_fails_whole_on_one_lost_claim() {
    let mut schemas = Schemas::new();
    let st = std::sync::Arc::new(schemas.state());
    let items: Vec<WorkItem> = (0..5)
        .map(|i| WorkItem {
            key: format!("cap u{i}"),
            source: "cap".into(),
            payload: String::new(),
        })
        .collect();
    st.add_work(&items).expect("add");
    let claims = st.claim_work("w1", 5, LONG).expect("claim");
    assert_eq!(claims.len(), 5);
    // The claim of u3 is given back and taken by w2.
    assert_eq!(st.release(&claims[3..4]).expect("release"), 1);
    let taken = st.claim_work("w2", 5, LONG).expect("claim");
    assert_eq!(taken.len(), 1);
    let c = Claimed::new(st.clone() as std::sync::Arc<dyn Records>);
    let rows: Vec<ResourceRecord> = (0..5).map(|i| row(&format!("u{i}"), "p")).collect();
    for (i, cl) in claims.iter().enumerate() {
        c.hold(&format!("u{i}"), cl.clone());
    }
    match c.put_resources(&rows) {
        Err(Error::LeaseLost { name, holder }) => {
            assert_eq!((name.as_str(), holder.as_str()), ("cap u3", "w1"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(st.count_resources("cap").expect("count"), 0);
    assert_eq!(st.work_left("cap").expect("left"), 5);
    // Without the lost one: all written, all completed.
    assert!(c.take("u3").is_some());
    let rest: Vec<ResourceRecord> = rows.iter().filter(|r| r.uri != "u3").cloned().collect();
    c.put_resources(&rest).expect("held claims");
    assert_eq!(st.count_resources("cap").expect("count"), 4);
    assert_eq!(
        st.work_left("cap").expect("left"),
        1,
        "only w2's item is left"
    );
    // Completing or releasing them again does nothing; w2's completes.
    assert_eq!(st.complete(&claims).expect("complete"), 0);
    assert_eq!(st.release(&claims).expect("release"), 0);
    assert_eq!(st.complete(&taken).expect("complete"), 1);
    assert_eq!(st.work_left("cap").expect("left"), 0);
}

/// Many claims settled at once: completed or released in bulk, counted once each.
#[test]
fn pg_many_claims_are_settled_at_once() {
    let mut schemas = Schemas::new();
    let st: PgState = schemas.state();
    let items: Vec<WorkItem> = (0..1_500)
        .map(|i| WorkItem {
            key: format!("k{i:05}"),
            source: "cap".into(),
            payload: String::new(),
        })
        .collect();
    st.add_work(&items).expect("add");
    let claims = st.claim_work("w", 1_500, LONG).expect("claim");
    assert_eq!(claims.len(), 1_500);
    assert_eq!(st.release(&claims[..1_200]).expect("release"), 1_200);
    assert_eq!(st.release(&claims[..1_200]).expect("again"), 0);
    let again = st.claim_work("w", 2_000, LONG).expect("claim");
    assert_eq!(again.len(), 1_200, "released items are claimable again");
    assert!(again.iter().all(|c| c.attempts == 2));
    // The old claims of the released items complete nothing; the others do.
    assert_eq!(st.complete(&claims).expect("complete"), 300);
    assert_eq!(st.complete(&again).expect("complete"), 1_200);
    assert_eq!(st.work_left("cap").expect("left"), 0);
}
