//! The checks of the versions a state keeps (`state/versions.rs`): numbered in the order
//! seen, each ending when the next begins or the Source deletes the resource, a body listed
//! again kept as one version, pages in (URI, number) order, written all or nothing with the
//! batch they are in.

use resourcesync_model::W3cDateTime;

use super::{EXPIRED, LONG, SharedState, record, uris};
use crate::conformance::{Outcome, ensure, ok};
use crate::error::Error;
use crate::state::{Batch, Op, Records, VersionEnd, VersionRecord};

const A: &str = "sha-256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
const B: &str = "sha-256:3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d";
const C: &str = "sha-256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6";

fn t(s: &str) -> std::result::Result<W3cDateTime, String> {
    W3cDateTime::parse(s).map_err(|e| e.to_string())
}

/// A version as written: `seq` and the end are the state's to set.
fn version(
    uri: &str,
    digest: &str,
    datetime: &str,
    seen: &str,
) -> std::result::Result<VersionRecord, String> {
    Ok(VersionRecord {
        source: "cap".into(),
        uri: uri.into(),
        seq: 0,
        digest: digest.into(),
        length: 3,
        datetime: Some(t(datetime)?),
        first_seen: t(seen)?,
        until: None,
        deleted: false,
        deleted_datetime: None,
    })
}

fn put(s: &dyn Records, v: &VersionRecord) -> Outcome {
    ok("put version", s.apply(Batch::new().push(Op::PutVersion(v))))
}

fn all_of(s: &dyn Records, uri: &str) -> std::result::Result<Vec<VersionRecord>, String> {
    ok("versions_of", s.versions_of("cap", uri, None, 100))
}

/// A resource changed twice, and listed again unchanged between: three versions in the order
/// seen, each ending when the next was first seen, the Source's times kept.
pub(super) fn versions_in_time_order(s: &dyn Records) -> Outcome {
    let u = "http://h/r";
    ensure!(all_of(s, u)?.is_empty(), "versions of nothing");
    let v1 = version(u, A, "2020-01-01T00:00:00Z", "2020-01-01T00:00:05Z")?;
    let v1_again = version(u, A, "2020-01-01T00:00:00Z", "2020-01-02T00:00:00Z")?;
    let v2 = VersionRecord {
        length: 7,
        datetime: None,
        ..version(u, B, "2020-01-03T00:00:00Z", "2020-01-03T00:00:01.25Z")?
    };
    let v3 = version(u, C, "2020-01-04T00:00:00+01:00", "2020-01-04T00:00:02Z")?;
    for v in [&v1, &v1_again, &v2, &v3] {
        put(s, v)?;
    }
    let got = all_of(s, u)?;
    let want = [
        VersionRecord {
            seq: 1,
            until: Some(v2.first_seen),
            ..v1
        },
        VersionRecord {
            seq: 2,
            until: Some(v3.first_seen),
            ..v2.clone()
        },
        VersionRecord {
            seq: 3,
            ..v3.clone()
        },
    ];
    ensure!(got == want, "versions {got:#?}");
    // The current one listed again: nothing changes.
    put(s, &v3)?;
    ensure!(all_of(s, u)? == want, "a body listed again made a version");
    // Read after a number, and a page at a time.
    let after = ok("versions_of", s.versions_of("cap", u, Some(1), 1))?;
    ensure!(after == want[1..2], "after 1, one: {after:?}");
    ensure!(
        ok("versions_of", s.versions_of("cap", u, Some(3), 10))?.is_empty(),
        "after the last"
    );
    ensure!(
        ok("versions_of", s.versions_of("other", u, None, 10))?.is_empty(),
        "another Source's"
    );
    ensure!(ok("referenced", s.digest_referenced(B))?, "B is named");
    ensure!(
        !ok("referenced", s.digest_referenced("sha-256:00"))?,
        "an unknown digest is named"
    );
    Ok(())
}

/// A body seen again after another (A, B, A) is a new version naming the same digest.
pub(super) fn a_body_seen_again_is_a_new_version(s: &dyn Records) -> Outcome {
    let u = "http://h/r";
    put(
        s,
        &version(u, A, "2020-01-01T00:00:00Z", "2020-01-01T00:00:01Z")?,
    )?;
    put(
        s,
        &version(u, B, "2020-01-02T00:00:00Z", "2020-01-02T00:00:01Z")?,
    )?;
    put(
        s,
        &version(u, A, "2020-01-03T00:00:00Z", "2020-01-03T00:00:01Z")?,
    )?;
    let got = all_of(s, u)?;
    let digests: Vec<(u64, &str, bool)> = got
        .iter()
        .map(|v| (v.seq, v.digest.as_str(), v.until.is_none()))
        .collect();
    ensure!(
        digests == [(1, A, false), (2, B, false), (3, A, true)],
        "versions {digests:?}"
    );
    Ok(())
}

/// A deleted resource keeps its versions: the last ends at the delete, marked deleted with
/// the Source's time; a delete of nothing current changes nothing; the resource created again
/// begins a new version.
pub(super) fn a_deleted_resource_keeps_its_versions(s: &dyn Records) -> Outcome {
    let u = "http://h/r";
    let end = VersionEnd {
        source: "cap".into(),
        uri: u.into(),
        at: t("2020-01-05T00:00:00Z")?,
        datetime: Some(t("2020-01-04T23:00:00Z")?),
    };
    // Nothing to end.
    ok("end", s.apply(Batch::new().push(Op::EndVersion(&end))))?;
    ensure!(all_of(s, u)?.is_empty(), "a delete made a version");
    put(
        s,
        &version(u, A, "2020-01-01T00:00:00Z", "2020-01-01T00:00:01Z")?,
    )?;
    put(
        s,
        &version(u, B, "2020-01-02T00:00:00Z", "2020-01-02T00:00:01Z")?,
    )?;
    ok("end", s.apply(Batch::new().push(Op::EndVersion(&end))))?;
    let got = all_of(s, u)?;
    ensure!(got.len() == 2, "versions after the delete: {got:#?}");
    ensure!(
        got[0].until == Some(t("2020-01-02T00:00:01Z")?) && !got[0].deleted,
        "the replaced one: {:?}",
        got[0]
    );
    ensure!(
        got[1].until == Some(end.at)
            && got[1].deleted
            && got[1].deleted_datetime == end.datetime
            && got[1].digest == B,
        "the deleted one: {:?}",
        got[1]
    );
    // Deleted again later: the first delete's time is kept.
    let later = VersionEnd {
        at: t("2020-02-01T00:00:00Z")?,
        datetime: None,
        ..end.clone()
    };
    ok("end", s.apply(Batch::new().push(Op::EndVersion(&later))))?;
    ensure!(all_of(s, u)? == got, "a second delete changed the versions");
    // Created again with the body it had when deleted: a new version.
    put(
        s,
        &version(u, B, "2020-03-01T00:00:00Z", "2020-03-01T00:00:01Z")?,
    )?;
    let again = all_of(s, u)?;
    ensure!(
        again.len() == 3 && again[..2] == got[..] && again[2].seq == 3 && again[2].until.is_none(),
        "created again: {again:#?}"
    );
    Ok(())
}

/// [`Records::versions_page`]: a Source's versions in (URI, number) order, a page at a time,
/// another Source's apart; [`Op::RemoveVersion`] removes one, the others keep their numbers.
pub(super) fn versions_page_in_uri_then_time_order(s: &dyn Records) -> Outcome {
    let uris_in_order = ["http://h/a", "http://h/b", "http://h/é"];
    for (i, u) in uris_in_order.iter().enumerate().rev() {
        for (j, d) in [A, B].iter().enumerate() {
            let seen = format!("2020-01-0{}T00:00:0{}Z", j + 1, i);
            put(s, &version(u, d, "2020-01-01T00:00:00Z", &seen)?)?;
            let other = VersionRecord {
                source: "other".into(),
                ..version(&format!("{u}x"), d, "2020-01-01T00:00:00Z", &seen)?
            };
            put(s, &other)?;
        }
    }
    let mut all = Vec::new();
    let mut after: Option<(String, u64)> = None;
    loop {
        let page = ok(
            "versions_page",
            s.versions_page("cap", after.as_ref().map(|(u, n)| (u.as_str(), *n)), 4),
        )?;
        ensure!(page.len() <= 4, "a page of {} for 4", page.len());
        let Some(last) = page.last() else { break };
        after = Some((last.uri.clone(), last.seq));
        all.extend(page.into_iter().map(|v| (v.uri, v.seq)));
    }
    let want: Vec<(String, u64)> = uris_in_order
        .iter()
        .flat_map(|u| [((*u).to_owned(), 1), ((*u).to_owned(), 2)])
        .collect();
    ensure!(all == want, "pages {all:?}");
    // Removed: the first of "b"; the second keeps its number.
    ok(
        "remove",
        s.apply(Batch::new().push(Op::RemoveVersion("cap", "http://h/b", 1))),
    )?;
    let b: Vec<u64> = all_of(s, "http://h/b")?.iter().map(|v| v.seq).collect();
    ensure!(b == [2], "after a removal: {b:?}");
    let page = ok(
        "versions_page",
        s.versions_page("cap", Some(("http://h/a", 2)), 1),
    )?;
    ensure!(
        page.len() == 1 && page[0].uri == "http://h/b" && page[0].seq == 2,
        "the page after a/2: {page:?}"
    );
    // The last version of each naming A removed (cap and other): A is named by none.
    for u in uris_in_order {
        ok(
            "remove",
            s.apply(Batch::new().push(Op::RemoveVersion("cap", u, 1))),
        )?;
        ok(
            "remove",
            s.apply(Batch::new().push(Op::RemoveVersion("other", &format!("{u}x"), 1))),
        )?;
    }
    ensure!(!ok("referenced", s.digest_referenced(A))?, "A still named");
    ensure!(ok("referenced", s.digest_referenced(B))?, "B not named");
    Ok(())
}

/// Many versions in one batch (as the committer writes them, which a database may apply in
/// bulk) are each what they would be alone, in order: one per resource, a body listed again
/// none, two of one resource one after the other.
pub(super) fn versions_in_one_batch(s: &dyn Records) -> Outcome {
    let (u1, u2, u3) = ("http://h/1", "http://h/2", "http://h/3");
    let at = |n: u32| format!("2020-01-0{n}T00:00:00Z");
    let first = [
        version(u1, A, &at(1), &at(1))?,
        version(u2, A, &at(1), &at(1))?,
        version(u3, B, &at(1), &at(1))?,
    ];
    let second = [
        version(u1, A, &at(2), &at(2))?,
        version(u2, B, &at(2), &at(2))?,
        version(u3, B, &at(2), &at(2))?,
    ];
    let third = [
        version(u1, B, &at(3), &at(3))?,
        version(u1, C, &at(4), &at(4))?,
    ];
    for vs in [&first[..], &second[..], &third[..]] {
        let mut b = Batch::new();
        for v in vs {
            b.push(Op::PutVersion(v));
        }
        ok("apply", s.apply(&b))?;
    }
    let seen = |uri: &str| -> std::result::Result<Vec<(u64, String, Option<String>)>, String> {
        Ok(all_of(s, uri)?
            .into_iter()
            .map(|v| (v.seq, v.digest, v.until.map(|t| t.to_string())))
            .collect())
    };
    let d = |x: &str| x.to_owned();
    ensure!(
        seen(u1)?
            == [
                (1, d(A), Some(at(3))),
                (2, d(B), Some(at(4))),
                (3, d(C), None)
            ],
        "{u1}: {:?}",
        seen(u1)?
    );
    ensure!(
        seen(u2)? == [(1, d(A), Some(at(2))), (2, d(B), None)],
        "{u2}: {:?}",
        seen(u2)?
    );
    ensure!(seen(u3)? == [(1, d(B), None)], "{u3}: {:?}", seen(u3)?);
    Ok(())
}

/// A version and the copy's row it is written with are one batch: a lost fence writes neither.
pub(super) fn a_version_is_written_with_its_batch(s: &dyn SharedState) -> Outcome {
    let stale = ok("lease", s.lease_source("cap", "w1", EXPIRED))?.ok_or("no lease")?;
    let r = record("cap", "http://h/r", "r");
    let v = version(
        "http://h/r",
        A,
        "2020-01-01T00:00:00Z",
        "2020-01-01T00:00:01Z",
    )?;
    let mut batch = Batch::new();
    batch
        .put_resource(&r)
        .push(Op::PutVersion(&v))
        .fence(&stale);
    match s.apply(&batch) {
        Err(Error::LeaseLost { .. }) => {}
        other => return Err(format!("a batch fenced by an expired lease: {other:?}")),
    }
    ensure!(uris(s, "cap")?.is_empty(), "the row of a failed batch");
    ensure!(
        all_of(s, "http://h/r")?.is_empty(),
        "the version of a failed batch"
    );
    let held = ok("lease", s.lease_source("cap", "w1", LONG))?.ok_or("no lease")?;
    let mut batch = Batch::new();
    batch.fence(&held).put_resource(&r).push(Op::PutVersion(&v));
    ok("apply", s.apply(&batch))?;
    ensure!(all_of(s, "http://h/r")?.len() == 1, "the version");
    Ok(())
}
