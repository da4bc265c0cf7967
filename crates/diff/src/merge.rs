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

/// [`merge_by`] of two fallible sequences (rows read from a database, entries from a
/// document): the first error of either side is yielded in its place and ends the merge, so
/// that nothing is planned from half an inventory.
pub fn try_merge_by<L, R, T, U, E, F>(
    left: L,
    right: R,
    cmp: F,
) -> TryMergeBy<L::IntoIter, R::IntoIter, F>
where
    L: IntoIterator<Item = Result<T, E>>,
    R: IntoIterator<Item = Result<U, E>>,
    F: FnMut(&T, &U) -> Ordering,
{
    TryMergeBy {
        left: left.into_iter().peekable(),
        right: right.into_iter().peekable(),
        cmp,
        failed: false,
    }
}

/// The iterator of [`try_merge_by`].
pub struct TryMergeBy<L: Iterator, R: Iterator, F> {
    left: Peekable<L>,
    right: Peekable<R>,
    cmp: F,
    failed: bool,
}

impl<L: Iterator, R: Iterator, F> std::fmt::Debug for TryMergeBy<L, R, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TryMergeBy").finish_non_exhaustive()
    }
}

impl<L, R, T, U, E, F> Iterator for TryMergeBy<L, R, F>
where
    L: Iterator<Item = Result<T, E>>,
    R: Iterator<Item = Result<U, E>>,
    F: FnMut(&T, &U) -> Ordering,
{
    type Item = Result<Merged<T, U>, E>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if matches!(self.left.peek(), Some(Err(_))) {
            self.failed = true;
            return self.left.next().map(|r| r.map(Merged::Left));
        }
        if matches!(self.right.peek(), Some(Err(_))) {
            self.failed = true;
            return self.right.next().map(|r| r.map(Merged::Right));
        }
        let order = match (self.left.peek(), self.right.peek()) {
            (None, None) => return None,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(Ok(l)), Some(Ok(r))) => (self.cmp)(l, r),
            // Errors were taken above.
            _ => return None,
        };
        Some(match order {
            Ordering::Less => self.left.next()?.map(Merged::Left),
            Ordering::Greater => self.right.next()?.map(Merged::Right),
            Ordering::Equal => {
                let l = self.left.next()?;
                let r = self.right.next()?;
                l.and_then(|l| r.map(|r| Merged::Both(l, r)))
            }
        })
    }
}

/// One page of a sequence read a page at a time ([`pages`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    /// What the page gives (possibly fewer than it read: rows left out are not items).
    pub items: Vec<T>,
    /// The key of the last row the page read, to read on after; `None`: the sequence ends.
    pub last: Option<String>,
}

/// A sequence read a page at a time by `fetch` (given the key to read after, `None` first),
/// flattened: the shape of a database read in key order in bounded memory. An error is
/// yielded once and ends it. A page may give no items and still say where to read on.
pub fn pages<T, E, F>(fetch: F) -> Pages<T, F>
where
    F: FnMut(Option<&str>) -> Result<Page<T>, E>,
{
    Pages {
        fetch,
        after: None,
        buf: std::collections::VecDeque::new(),
        done: false,
    }
}

/// The iterator of [`pages`].
pub struct Pages<T, F> {
    fetch: F,
    after: Option<String>,
    buf: std::collections::VecDeque<T>,
    done: bool,
}

impl<T, F> std::fmt::Debug for Pages<T, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pages")
            .field("after", &self.after)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<T, E, F> Iterator for Pages<T, F>
where
    F: FnMut(Option<&str>) -> Result<Page<T>, E>,
{
    type Item = Result<T, E>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(t) = self.buf.pop_front() {
                return Some(Ok(t));
            }
            if self.done {
                return None;
            }
            match (self.fetch)(self.after.as_deref()) {
                Ok(p) => {
                    self.done = p.last.is_none();
                    self.after = p.last;
                    self.buf.extend(p.items);
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
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

    #[test]
    fn a_failed_side_ends_the_merge_with_its_error() {
        let left: Vec<Result<u8, &str>> = vec![Ok(1), Ok(3), Err("broken"), Ok(9)];
        let right: Vec<Result<u8, &str>> = vec![Ok(2), Ok(3), Ok(4)];
        let got: Vec<_> = try_merge_by(left, right, |l, r| l.cmp(r)).collect();
        assert_eq!(
            got,
            vec![
                Ok(Merged::Left(1)),
                Ok(Merged::Right(2)),
                Ok(Merged::Both(3, 3)),
                Err("broken"),
            ]
        );
    }

    #[test]
    fn pages_read_on_after_the_last_key_even_past_empty_pages() {
        // Rows 0..10 in pages of 3, the odd ones left out: a page may give nothing.
        let rows: Vec<u32> = (0..10).collect();
        let read = |after: Option<&str>| -> Result<Page<u32>, String> {
            let from = after.map_or(0, |a| a.parse::<u32>().expect("key") + 1);
            let page: Vec<u32> = rows
                .iter()
                .copied()
                .filter(|r| *r >= from)
                .take(3)
                .collect();
            Ok(Page {
                last: page.last().map(|r| r.to_string()),
                items: page.into_iter().filter(|r| r % 2 == 0 || *r > 8).collect(),
            })
        };
        let got: Vec<u32> = pages(read).map(|r| r.expect("row")).collect();
        assert_eq!(got, vec![0, 2, 4, 6, 8, 9]);
        let failing = |_: Option<&str>| -> Result<Page<u32>, String> { Err("gone".into()) };
        let got: Vec<_> = pages(failing).collect();
        assert_eq!(got, vec![Err("gone".to_owned())]);
    }
}
