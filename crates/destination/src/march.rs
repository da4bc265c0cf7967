//! The one march: what the Source publishes, what the state records and (for an audit) what is
//! on disk, walked together in URI order, yielding one [`Verdict`] per URI (create, update,
//! delete, same, damaged) by the one rule ([`resourcesync_diff::needs_update`]; for a change,
//! [`crate::plan::current::change_applied`]). Every mode consumes the same verdicts:
//!
//! - **walks** (baseline and baseline diff, audit, repair): [`march`] merges the state's rows and
//!   the published list, both sorted by URI, in one pass and constant memory (as rclone's
//!   `fs/march` walks two listings); [`judge`] decides each [`Step`] from the copy as each mode
//!   sees it (the state's row for a sync, the measured file for an audit). Baseline and repair
//!   turn verdicts into jobs ([`job`]); audit counts them.
//! - **change-driven** (incremental, catch-up, push, dump manifests, shared fetches): no walk
//!   (an incremental of three changes on a million copies must not read a million rows): each
//!   change becomes a job by [`change_job`], and where it runs its verdict is decided from one
//!   state lookup by [`change_verdict`], with the same rule.
//!
//! So a sync (or its dry run) and an audit of the same copies cannot disagree on what is to be
//! fetched, removed or left alone.

use resourcesync_diff::{Difference, Item, Merged, needs_update, try_merge_by};
use resourcesync_model::Change;
use resourcesync_store::{ObjectMeta, ResourceRecord};

use crate::job::{Job, JobKind, Reason};
use crate::plan::current::{change_applied, record_item};
use crate::plan::staging::StagedItem;

/// What the one rule says of one URI's copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Published, no copy: fetched.
    Create,
    /// Published and copied, and they differ (`None`: the copy's content is not known, a
    /// placeholder of a killed run, `crate::commit`): fetched.
    Update(Option<Difference>),
    /// A copy the Source no longer publishes: removed (with `--delete`) or kept.
    Delete,
    /// Published and copied, and they agree: left alone.
    Same,
    /// The state says current but the copy on disk is not what it records (missing, another
    /// length, other content; why): fetched again.
    Damaged(String),
}

/// The verdict of one URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The URI.
    pub(crate) uri: String,
    /// What the rule says.
    pub(crate) kind: Kind,
}

/// Something that is of one URI (a state row, a published entry).
pub(crate) trait Keyed {
    /// The URI it is of.
    fn uri(&self) -> &str;
}

impl Keyed for Item {
    fn uri(&self) -> &str {
        &self.uri
    }
}

impl Keyed for ResourceRecord {
    fn uri(&self) -> &str {
        &self.uri
    }
}

impl Keyed for StagedItem {
    fn uri(&self) -> &str {
        &self.uri
    }
}

impl<T> Keyed for (String, T) {
    fn uri(&self) -> &str {
        &self.0
    }
}

/// One step of the march: a URI, the state's row of it and the published entry of it (at least
/// one of the two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step<R, P> {
    /// The URI.
    pub(crate) uri: String,
    /// The state's row (or what stands for it).
    pub(crate) row: Option<R>,
    /// The published entry.
    pub(crate) published: Option<P>,
}

/// Marches the state's `rows` and the `published` list, both sorted by URI (byte order) without
/// duplicates, into steps in URI order: one pass, constant memory. A failed read of either side
/// is yielded in its place and ends the march (nothing is decided from half an inventory).
pub(crate) fn march<R, P, E>(
    rows: impl IntoIterator<Item = Result<R, E>>,
    published: impl IntoIterator<Item = Result<P, E>>,
) -> impl Iterator<Item = Result<Step<R, P>, E>>
where
    R: Keyed,
    P: Keyed,
{
    try_merge_by(rows, published, |r: &R, p: &P| {
        r.uri().as_bytes().cmp(p.uri().as_bytes())
    })
    .map(|m| {
        m.map(|m| match m {
            Merged::Left(r) => Step {
                uri: r.uri().to_owned(),
                row: Some(r),
                published: None,
            },
            Merged::Right(p) => Step {
                uri: p.uri().to_owned(),
                row: None,
                published: Some(p),
            },
            Merged::Both(r, p) => Step {
                uri: p.uri().to_owned(),
                row: Some(r),
                published: Some(p),
            },
        })
    })
}

/// The one rule of a walk: the verdict on the copy of `uri` (as the mode sees it: the state's
/// row, or the file measured) against the `original` published; `None` when there is neither.
pub(crate) fn judge(uri: &str, copy: Option<&Item>, original: Option<&Item>) -> Option<Verdict> {
    let kind = match (copy, original) {
        (None, None) => return None,
        (Some(_), None) => Kind::Delete,
        (None, Some(_)) => Kind::Create,
        (Some(c), Some(o)) => match needs_update(c, o) {
            Some(why) => Kind::Update(Some(why)),
            None => Kind::Same,
        },
    };
    Some(Verdict {
        uri: uri.to_owned(),
        kind,
    })
}

/// The job a verdict of a walk comes to (`item`: what is fetched): a create, an update or a
/// damaged copy is fetched (a damaged one whatever the state says), a delete removes the copy
/// (or keeps it, without `--delete`), the same is left alone.
pub(crate) fn job(kind: &Kind, item: StagedItem) -> Option<Job> {
    Some(match kind {
        Kind::Create => Job::fetch(item, Reason::New),
        Kind::Update(_) => Job::fetch(item, Reason::Listed),
        Kind::Damaged(_) => Job::fetch(item, Reason::Repair),
        Kind::Delete => Job::delete(item.uri),
        Kind::Same => return None,
    })
}

/// The job of a change (Change List entry, notification, pending change, dump manifest entry):
/// a delete, or a fetch whose verdict [`change_verdict`] decides where it runs, from the state's
/// row of that one URI.
pub(crate) fn change_job(item: StagedItem) -> Job {
    let kind = if item.change == Some(Change::Deleted) {
        JobKind::Delete
    } else {
        JobKind::Fetch(Reason::Change)
    };
    Job { item, kind }
}

/// The one rule for a change, from one state lookup: the state's row `prior` of its URI and the
/// object `existing` at its path. A deleted resource is a delete; a change the state proves
/// applied ([`change_applied`]) is the same; else an update of a copy there is, or a create.
pub(crate) fn change_verdict(
    item: &StagedItem,
    prior: Option<&ResourceRecord>,
    existing: Option<&ObjectMeta>,
) -> Kind {
    if item.change == Some(Change::Deleted) {
        return Kind::Delete;
    }
    if change_applied(item, prior, existing) {
        return Kind::Same;
    }
    match prior.filter(|p| !p.gone) {
        Some(p) => Kind::Update(needs_update(&record_item(p), &item.item())),
        None if existing.is_some() => Kind::Update(None),
        None => Kind::Create,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resourcesync_model::Hashes;

    fn item(uri: &str, length: u64, hash: &str) -> Item {
        Item {
            uri: uri.into(),
            length: Some(length),
            hashes: Hashes::parse(hash).0,
            ..Item::default()
        }
    }

    const MD5: &str = "md5:900150983cd24fb0d6963f7d28e17f72";
    const OTHER: &str = "md5:00000000000000000000000000000000";

    #[test]
    fn a_march_yields_one_verdict_per_uri_in_uri_order() {
        let rows: Vec<Result<Item, ()>> = vec![
            Ok(item("a", 1, "")),
            Ok(item("b", 3, MD5)),
            Ok(item("c", 3, MD5)),
            Ok(item("e", 1, "")),
        ];
        let list: Vec<Result<Item, ()>> = vec![
            Ok(item("b", 3, OTHER)),
            Ok(item("c", 3, MD5)),
            Ok(item("d", 1, "")),
            Ok(item("e", 2, "")),
        ];
        let got: Vec<(String, Option<Kind>)> = march(rows, list)
            .map(|s| s.expect("step"))
            .map(|s| {
                let v = judge(&s.uri, s.row.as_ref(), s.published.as_ref());
                (s.uri, v.map(|v| v.kind))
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a".to_owned(), Some(Kind::Delete)),
                ("b".to_owned(), Some(Kind::Update(Some(Difference::Digest)))),
                ("c".to_owned(), Some(Kind::Same)),
                ("d".to_owned(), Some(Kind::Create)),
                ("e".to_owned(), Some(Kind::Update(Some(Difference::Length)))),
            ]
        );
        assert_eq!(judge("f", None, None), None);
    }

    #[test]
    fn a_failed_read_ends_the_march_with_its_error() {
        let rows: Vec<Result<Item, &str>> =
            vec![Ok(item("a", 1, "")), Err("gone"), Ok(item("z", 1, ""))];
        let list: Vec<Result<Item, &str>> = vec![Ok(item("b", 1, ""))];
        let got: Vec<_> = march(rows, list).map(|s| s.map(|s| s.uri)).collect();
        assert_eq!(got, [Ok("a".to_owned()), Err("gone")]);
    }

    #[test]
    fn verdicts_come_to_jobs() {
        let it = |u: &str| StagedItem {
            uri: u.into(),
            ..StagedItem::default()
        };
        let kind = |k: &Kind| job(k, it("u")).map(|j| j.kind);
        assert_eq!(kind(&Kind::Create), Some(JobKind::Fetch(Reason::New)));
        assert_eq!(
            kind(&Kind::Update(None)),
            Some(JobKind::Fetch(Reason::Listed))
        );
        assert_eq!(
            kind(&Kind::Damaged("missing".into())),
            Some(JobKind::Fetch(Reason::Repair))
        );
        assert_eq!(kind(&Kind::Delete), Some(JobKind::Delete));
        assert_eq!(kind(&Kind::Same), None);
        let deleted = StagedItem {
            change: Some(Change::Deleted),
            ..it("u")
        };
        assert_eq!(change_job(deleted).kind, JobKind::Delete);
        assert_eq!(change_job(it("u")).kind, JobKind::Fetch(Reason::Change));
    }

    #[test]
    fn a_change_is_judged_from_one_lookup_by_the_same_rule() {
        let change = |hash: &str| StagedItem {
            uri: "u".into(),
            change: Some(Change::Updated),
            length: Some(3),
            hashes: Hashes::parse(hash).0,
            ..StagedItem::default()
        };
        let row = ResourceRecord {
            uri: "u".into(),
            length: Some(3),
            hashes: Hashes::parse(MD5).0,
            ..ResourceRecord::default()
        };
        let object = ObjectMeta {
            length: 3,
            regular: true,
            ..ObjectMeta::default()
        };
        assert_eq!(
            change_verdict(&change(MD5), Some(&row), Some(&object)),
            Kind::Same
        );
        assert_eq!(
            change_verdict(&change(OTHER), Some(&row), Some(&object)),
            Kind::Update(Some(Difference::Digest))
        );
        // The state proves nothing without the object it records.
        assert_eq!(
            change_verdict(&change(MD5), Some(&row), None),
            Kind::Update(None)
        );
        assert_eq!(change_verdict(&change(MD5), None, None), Kind::Create);
        assert_eq!(
            change_verdict(&change(MD5), None, Some(&object)),
            Kind::Update(None)
        );
        let deleted = StagedItem {
            change: Some(Change::Deleted),
            ..change(MD5)
        };
        assert_eq!(
            change_verdict(&deleted, Some(&row), Some(&object)),
            Kind::Delete
        );
    }
}
