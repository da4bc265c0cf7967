//! The merge under every diff: two sequences sorted by the same key, walked together in one
//! pass and constant memory, each step saying which side has the key.
//!
//! [`crate::diff_sorted`] merges two inventories of [`crate::Item`]s this way; a caller with
//! other rows (a Source's listing against its previous snapshot, keyed by path) merges them
//! with [`merge_by`] and applies [`crate::needs_update`] where both sides have a key.

use std::cmp::Ordering;
use std::iter::Peekable;

/// One step of a merge: the key is on the left only, on the right only, or on both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged<L, R> {
    /// Only the left sequence has this key.
    Left(L),
    /// Only the right sequence has this key.
    Right(R),
    /// Both have it.
    Both(L, R),
}

/// Merges `left` and `right`, both sorted (ascending, without duplicates) by the order `cmp`
/// compares them in, into steps in that order.
pub fn merge_by<L, R, F>(left: L, right: R, cmp: F) -> MergeBy<L::IntoIter, R::IntoIter, F>
where
    L: IntoIterator,
    R: IntoIterator,
    F: FnMut(&L::Item, &R::Item) -> Ordering,
{
    MergeBy {
        left: left.into_iter().peekable(),
        right: right.into_iter().peekable(),
        cmp,
    }
}

/// The iterator of [`merge_by`].
pub struct MergeBy<L: Iterator, R: Iterator, F> {
    left: Peekable<L>,
    right: Peekable<R>,
    cmp: F,
}

impl<L: Iterator, R: Iterator, F> std::fmt::Debug for MergeBy<L, R, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeBy").finish_non_exhaustive()
    }
}

impl<L, R, F> Iterator for MergeBy<L, R, F>
where
    L: Iterator,
    R: Iterator,
    F: FnMut(&L::Item, &R::Item) -> Ordering,
{
    type Item = Merged<L::Item, R::Item>;

    fn next(&mut self) -> Option<Self::Item> {
        let order = match (self.left.peek(), self.right.peek()) {
            (None, None) => return None,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(l), Some(r)) => (self.cmp)(l, r),
        };
        match order {
            Ordering::Less => self.left.next().map(Merged::Left),
            Ordering::Greater => self.right.next().map(Merged::Right),
            Ordering::Equal => {
                let l = self.left.next()?;
                let r = self.right.next()?;
                Some(Merged::Both(l, r))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_in_key_order() {
        let left = ["a", "c", "d", "f"];
        let right = [("b", 2), ("c", 3), ("f", 6), ("g", 7)];
        let got: Vec<_> = merge_by(left, right, |l, r| l.cmp(&r.0)).collect();
        assert_eq!(
            got,
            vec![
                Merged::Left("a"),
                Merged::Right(("b", 2)),
                Merged::Both("c", ("c", 3)),
                Merged::Left("d"),
                Merged::Both("f", ("f", 6)),
                Merged::Right(("g", 7)),
            ]
        );
    }

    #[test]
    fn one_side_empty() {
        let got: Vec<Merged<u8, u8>> = merge_by([0u8; 0], [1u8, 2], |l, r| l.cmp(r)).collect();
        assert_eq!(got, vec![Merged::Right(1), Merged::Right(2)]);
        let got: Vec<Merged<u8, u8>> = merge_by([1u8], [0u8; 0], |l, r| l.cmp(r)).collect();
        assert_eq!(got, vec![Merged::Left(1)]);
    }
}
