//! What a scan reads changes from: the inventory's [`ChangeFeed`] after the cursor recorded by
//! the previous scan, or the whole listing (merged with the previous snapshot), and the cursor
//! to record with the new snapshot.
//!
//! The feed is used when the inventory has one, the state holds a cursor (recorded by an
//! earlier scan of this state) and [`crate::scan::ScanOptions::full`] is off; its changes are
//! looked up in the snapshot one by one and go through the same steps as a listing's
//! (`Merged::Right` created, `Both` perhaps updated, `Left` deleted), so digests are computed
//! exactly as for listed resources. Otherwise (the first scan, no cursor, a cursor the feed
//! refuses, a full scan asked for) everything is listed, and the cursor recorded is the one
//! taken *before* the listing: a change made while listing is then given again by the next
//! feed (recorded twice at worst, never missed). Either way the cursor is written in the scan's
//! transaction, so it is committed with the changes it covers and never before them.
//!
//! Both go through the rule of what an inventory may publish ([`crate::inventory::names`]):
//! a resource no Destination could fetch is a skipped item, whatever the inventory.

use std::cell::RefCell;

use resourcesync_diff::Merged;

use crate::error::{Error, Result};
use crate::inventory::{Changed, Inventory, Listed, Listing, Skipped, names};
use crate::state::{KnownRow, Recorder};
use crate::uri::path_bytes as key;

/// The meta key of the state holding the change feed's cursor.
pub const CURSOR_KEY: &str = "inventory_cursor";

/// The changes a feed gave.
pub(super) type Changes<'a> =
    Box<dyn Iterator<Item = std::result::Result<Changed, Skipped>> + Send + 'a>;

/// Where a scan's steps come from.
pub(super) enum Plan<'a> {
    /// Every resource, merged with the previous snapshot.
    List(Listing<'a>),
    /// The changes after the recorded cursor, each looked up in the snapshot.
    Feed(Changes<'a>),
}

/// Chooses how to scan `inv` (see the module's documentation) given the cursor `recorded` in
/// the state; `full` lists everything whatever (a full scan asked for, or the baseline).
/// Returns the cursor to record with the snapshot (`None`: the inventory has no feed, and a
/// cursor left from another is removed).
pub(super) fn plan<'a>(
    inv: &'a dyn Inventory,
    recorded: Option<&str>,
    full: bool,
    names_only: bool,
) -> Result<(Plan<'a>, Option<String>)> {
    let Some(feed) = inv.change_feed() else {
        return Ok((Plan::List(list(inv, names_only)?), None));
    };
    if let (false, Some(cursor)) = (full, recorded) {
        match feed.changes_since(cursor) {
            Ok(f) => {
                return Ok((
                    Plan::Feed(names::publishable_changes(f.changes)),
                    Some(f.cursor),
                ));
            }
            Err(e) => tracing::warn!(
                "the inventory's change feed refused the recorded cursor ({e}): listing everything"
            ),
        }
    }
    // Taken before the listing: whatever changes while it runs is after this cursor.
    let cursor = feed.cursor()?;
    Ok((Plan::List(list(inv, names_only)?), Some(cursor)))
}

/// The inventory's listing, through the rule of what an inventory may publish
/// ([`names::publishable`]).
fn list(inv: &dyn Inventory, names_only: bool) -> Result<Listing<'_>> {
    let listing = if names_only {
        inv.list_names()
    } else {
        inv.list()
    }?;
    Ok(names::publishable(listing))
}

/// A feed's changes as the steps of a merge with the snapshot: a present resource the snapshot
/// lacks is `Right`, one it has is `Both`, a gone one it has is `Left` (one it lacks is no
/// step). Problems with single changes are kept in `skipped`; a failed lookup or a change out
/// of path order ends the steps, kept in `error` (the scan then stops, recording nothing).
pub(super) struct FeedSteps<'r, 'c, 'a> {
    pub(super) rec: &'r Recorder<'c>,
    pub(super) changes: Changes<'a>,
    pub(super) last: Option<Vec<u8>>,
    pub(super) skipped: &'r RefCell<Vec<Skipped>>,
    pub(super) error: &'r RefCell<Option<Error>>,
}

impl Iterator for FeedSteps<'_, '_, '_> {
    type Item = Merged<KnownRow, Listed>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.error.borrow().is_some() {
                return None;
            }
            let change = match self.changes.next()? {
                Ok(c) => c,
                Err(s) if s.is_listing_broken() => {
                    *self.error.borrow_mut() = Some(Error::Inventory(format!(
                        "the change feed broke off: {} (nothing recorded)",
                        s.reason
                    )));
                    return None;
                }
                Err(s) => {
                    self.skipped.borrow_mut().push(s);
                    continue;
                }
            };
            let k = key(change.rel()).into_owned();
            if self.last.as_ref().is_some_and(|l| &k <= l) {
                *self.error.borrow_mut() = Some(Error::Inventory(format!(
                    "{} given by the change feed after {}: not in path order, or twice \
                     (nothing recorded)",
                    change.rel().display(),
                    String::from_utf8_lossy(self.last.as_deref().unwrap_or_default())
                )));
                return None;
            }
            let known = match self.rec.known(&k) {
                Ok(known) => known,
                Err(e) => {
                    *self.error.borrow_mut() = Some(e);
                    return None;
                }
            };
            self.last = Some(k);
            match (change, known) {
                (Changed::Present(l), None) => return Some(Merged::Right(l)),
                (Changed::Present(l), Some(k)) => return Some(Merged::Both(k, l)),
                (Changed::Gone(_), Some(k)) => return Some(Merged::Left(k)),
                (Changed::Gone(_), None) => continue,
            }
        }
    }
}
