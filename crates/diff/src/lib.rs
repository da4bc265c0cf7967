//! The one diff engine: two inventories in, a plan of creates, updates and deletes out.
//!
//! [`needs_update`] is the single rule that decides whether a copy differs from its original
//! (Z39.99-2014 §5.2 leaves the comparison to the Destination): lengths first, when both are
//! known; then a digest of an algorithm both sides have; then `<lastmod>`. [`diff_sorted`] merges
//! two inventories sorted by URI in one pass and constant memory. [`last_per_key`] is the rule
//! "several changes of one URI collapse to the last" (§12.1).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::cmp::Ordering;

use resourcesync_model::{Hashes, W3cDateTime};

pub mod collapse;
pub mod merge;
pub use collapse::last_per_key;
pub use merge::{MergeBy, Merged, Page, Pages, TryMergeBy, merge_by, pages, try_merge_by};

/// What is known of one resource: at the Source (from a Resource List or a scan) or at the
/// Destination (from its state).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item {
    /// The resource's URI.
    pub uri: String,
    /// Length in bytes.
    pub length: Option<u64>,
    /// Last modification.
    pub lastmod: Option<W3cDateTime>,
    /// Digests.
    pub hashes: Hashes,
}

/// Why two items differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Difference {
    /// The lengths differ.
    Length,
    /// A digest of an algorithm both have differs.
    Digest,
    /// Neither length nor a shared digest tells them apart, and the lastmods differ.
    Lastmod,
}

/// The single rule: does `copy` need updating to match `original`? `None` when it does not.
///
/// 1. Lengths, when both are known and differ: a difference.
/// 2. A digest of an algorithm both sides have: it decides (equal digests mean equal content,
///    whatever the lastmods say).
/// 3. Otherwise lastmods, when both are known: a later original is a difference; an equal or
///    earlier one is not.
/// 4. Otherwise (nothing to compare): no difference claimed.
pub fn needs_update(copy: &Item, original: &Item) -> Option<Difference> {
    if let (Some(a), Some(b)) = (copy.length, original.length) {
        if a != b {
            return Some(Difference::Length);
        }
    }
    match original.hashes.agrees_with(&copy.hashes) {
        Some(true) => return None,
        Some(false) => return Some(Difference::Digest),
        None => {}
    }
    if let (Some(a), Some(b)) = (&copy.lastmod, &original.lastmod) {
        if b.cmp_instant(a) == Ordering::Greater {
            return Some(Difference::Lastmod);
        }
    }
    None
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The original exists, the copy does not.
    Create(Item),
    /// Both exist and differ.
    Update {
        /// The copy as it is.
        copy: Item,
        /// The original.
        original: Item,
        /// How they differ.
        why: Difference,
    },
    /// The copy exists, the original does not.
    Delete(Item),
    /// Both exist and agree.
    Same(Item),
}

/// Merges a copy inventory and an original inventory, both sorted by URI (byte order) without
/// duplicates, into actions in URI order. Runs in one pass and constant memory.
pub fn diff_sorted<C, O>(copy: C, original: O) -> DiffIter<C::IntoIter, O::IntoIter>
where
    C: IntoIterator<Item = Item>,
    O: IntoIterator<Item = Item>,
{
    DiffIter {
        merge: merge_by(copy, original, by_uri),
    }
}

/// The iterator of [`diff_sorted`].
#[derive(Debug)]
pub struct DiffIter<C: Iterator<Item = Item>, O: Iterator<Item = Item>> {
    merge: MergeBy<C, O, fn(&Item, &Item) -> Ordering>,
}

/// URIs in byte order.
fn by_uri(c: &Item, o: &Item) -> Ordering {
    c.uri.as_bytes().cmp(o.uri.as_bytes())
}

impl<C: Iterator<Item = Item>, O: Iterator<Item = Item>> Iterator for DiffIter<C, O> {
    type Item = Action;

    fn next(&mut self) -> Option<Action> {
        self.merge.next().map(action)
    }
}

/// [`diff_sorted`] of two fallible inventories (rows read from the state, entries from a
/// staged list): the first error is yielded in its place and ends the plan.
pub fn try_diff_sorted<C, O, E>(copy: C, original: O) -> impl Iterator<Item = Result<Action, E>>
where
    C: IntoIterator<Item = Result<Item, E>>,
    O: IntoIterator<Item = Result<Item, E>>,
{
    try_merge_by(copy, original, by_uri).map(|m| m.map(action))
}

/// The action of one merge step (the one rule, [`needs_update`], where both sides have it).
fn action(m: Merged<Item, Item>) -> Action {
    match m {
        Merged::Left(c) => Action::Delete(c),
        Merged::Right(o) => Action::Create(o),
        Merged::Both(c, o) => match needs_update(&c, &o) {
            Some(why) => Action::Update {
                copy: c,
                original: o,
                why,
            },
            None => Action::Same(o),
        },
    }
}

/// Counts of a plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Creates.
    pub created: u64,
    /// Updates.
    pub updated: u64,
    /// Deletes.
    pub deleted: u64,
    /// Unchanged.
    pub same: u64,
}

impl Summary {
    /// Counts an action.
    pub fn add(&mut self, a: &Action) {
        match a {
            Action::Create(_) => self.created += 1,
            Action::Update { .. } => self.updated += 1,
            Action::Delete(_) => self.deleted += 1,
            Action::Same(_) => self.same += 1,
        }
    }

    /// Whether copy and original agree entirely.
    pub fn in_sync(&self) -> bool {
        self.created == 0 && self.updated == 0 && self.deleted == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(uri: &str, length: Option<u64>, lastmod: Option<&str>, hash: &str) -> Item {
        Item {
            uri: uri.into(),
            length,
            lastmod: lastmod.map(|s| W3cDateTime::parse(s).expect("datetime")),
            hashes: Hashes::parse(hash).0,
        }
    }

    #[test]
    fn length_decides_first() {
        let a = item(
            "u",
            Some(1),
            Some("2013-01-01"),
            "md5:00000000000000000000000000000000",
        );
        let b = item(
            "u",
            Some(2),
            Some("2013-01-01"),
            "md5:00000000000000000000000000000000",
        );
        assert_eq!(needs_update(&a, &b), Some(Difference::Length));
    }

    #[test]
    fn shared_digest_decides_over_lastmod() {
        let copy = item(
            "u",
            Some(3),
            Some("2013-01-01"),
            "md5:900150983cd24fb0d6963f7d28e17f72",
        );
        let same = item(
            "u",
            Some(3),
            Some("2014-01-01"),
            "md5:900150983CD24FB0D6963F7D28E17F72 sha-1:aa",
        );
        assert_eq!(needs_update(&copy, &same), None);
        let other = item(
            "u",
            Some(3),
            Some("2012-01-01"),
            "md5:11111111111111111111111111111111",
        );
        assert_eq!(needs_update(&copy, &other), Some(Difference::Digest));
    }

    #[test]
    fn lastmod_when_nothing_else_compares() {
        let copy = item("u", None, Some("2013-01-01T00:00:00Z"), "");
        let newer = item("u", None, Some("2013-01-01T00:00:01Z"), "sha-256:ab");
        assert_eq!(needs_update(&copy, &newer), Some(Difference::Lastmod));
        let older = item("u", None, Some("2012-12-31T23:00:00Z"), "");
        assert_eq!(needs_update(&copy, &older), None);
        assert_eq!(needs_update(&copy, &item("u", None, None, "")), None);
    }

    #[test]
    fn merge_produces_a_plan_in_uri_order() {
        let copy = vec![
            item("a", Some(1), None, ""),
            item("b", Some(1), None, ""),
            item("d", Some(1), None, ""),
        ];
        let original = vec![
            item("b", Some(2), None, ""),
            item("c", Some(1), None, ""),
            item("d", Some(1), None, ""),
        ];
        let plan: Vec<Action> = diff_sorted(copy, original).collect();
        let kinds: Vec<(&str, &str)> = plan
            .iter()
            .map(|a| match a {
                Action::Create(i) => ("create", i.uri.as_str()),
                Action::Update { original, .. } => ("update", original.uri.as_str()),
                Action::Delete(i) => ("delete", i.uri.as_str()),
                Action::Same(i) => ("same", i.uri.as_str()),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("delete", "a"),
                ("update", "b"),
                ("create", "c"),
                ("same", "d")
            ]
        );
        let mut s = Summary::default();
        plan.iter().for_each(|a| s.add(a));
        assert_eq!((s.created, s.updated, s.deleted, s.same), (1, 1, 1, 1));
        assert!(!s.in_sync());
    }
}
