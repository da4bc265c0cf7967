//! Whether a copy is current: the Destination's one rule, on top of the diff engine's
//! [`needs_update`] (Z39.99-2014 §5.2 leaves the comparison to the Destination).
//!
//! A copy listed by a Resource List is current when [`needs_update`] finds no difference
//! between its state row and the entry (the baseline's diff does exactly that). A change (a
//! Change List entry, a notification, a dump manifest entry) says the resource changed: the
//! copy is current only when, on top of that, the entry carries evidence that the state row
//! is of this version (a digest of an algorithm both have, or a `<lastmod>` both have: a length
//! alone proves nothing, an update may keep it), and the object in the store is the one the
//! row records (a regular object of the recorded length).

use resourcesync_diff::{Item, needs_update};
use resourcesync_store::{ObjectMeta, ResourceRecord};

use crate::plan::staging::StagedItem;

/// The diff engine's view of a state row.
pub(crate) fn record_item(r: &ResourceRecord) -> Item {
    Item {
        uri: r.uri.clone(),
        length: r.length,
        lastmod: r.lastmod,
        hashes: r.hashes.clone(),
    }
}

/// Whether a change entry carries what proves a copy current when the diff engine finds no
/// difference: a digest of an algorithm the copy has, or a `<lastmod>` both have.
fn has_evidence(item: &StagedItem, copy: &ResourceRecord) -> bool {
    item.hashes.agrees_with(&copy.hashes).is_some()
        || (item.lastmod.is_some() && copy.lastmod.is_some())
}

/// Whether the change `item` is applied already: the state row `prior` is of its version and
/// the object `existing` in the store is the one it records (a resumed run, a change seen
/// twice, a dump entry already extracted).
pub(crate) fn change_applied(
    item: &StagedItem,
    prior: Option<&ResourceRecord>,
    existing: Option<&ObjectMeta>,
) -> bool {
    let (Some(p), Some(m)) = (prior, existing) else {
        return false;
    };
    !p.gone
        && m.regular
        && p.length.is_none_or(|l| l == m.length)
        && has_evidence(item, p)
        && needs_update(&record_item(p), &item.item()).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use resourcesync_model::{Hashes, W3cDateTime};

    fn row(length: u64, hash: &str, lastmod: Option<&str>) -> ResourceRecord {
        ResourceRecord {
            uri: "http://h/a".into(),
            length: Some(length),
            hashes: Hashes::parse(hash).0,
            lastmod: lastmod.map(|l| W3cDateTime::parse(l).expect("date")),
            ..ResourceRecord::default()
        }
    }

    fn change(length: u64, hash: &str, lastmod: Option<&str>) -> StagedItem {
        StagedItem {
            uri: "http://h/a".into(),
            length: Some(length),
            hashes: Hashes::parse(hash).0,
            lastmod: lastmod.map(|l| W3cDateTime::parse(l).expect("date")),
            ..StagedItem::default()
        }
    }

    fn object(length: u64) -> ObjectMeta {
        ObjectMeta {
            length,
            regular: true,
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_change_is_applied_only_with_evidence_and_the_recorded_object() {
        let md5 = "md5:900150983cd24fb0d6963f7d28e17f72";
        let other = "md5:00000000000000000000000000000000";
        let r = row(3, md5, Some("2026-01-01T00:00:00Z"));
        // The same digest: applied.
        assert!(change_applied(
            &change(3, md5, None),
            Some(&r),
            Some(&object(3))
        ));
        // Another digest: not.
        assert!(!change_applied(
            &change(3, other, None),
            Some(&r),
            Some(&object(3))
        ));
        // A length alone proves nothing.
        let bare = row(3, "", None);
        assert!(!change_applied(
            &change(3, "", None),
            Some(&bare),
            Some(&object(3))
        ));
        // Lastmods both have, not later: applied; later: not.
        let t = Some("2026-01-01T00:00:00Z");
        assert!(change_applied(
            &change(3, "", t),
            Some(&r),
            Some(&object(3))
        ));
        let later = Some("2026-02-01T00:00:00Z");
        assert!(!change_applied(
            &change(3, "", later),
            Some(&r),
            Some(&object(3))
        ));
        // The object in the store is not the one recorded: not.
        assert!(!change_applied(
            &change(3, md5, None),
            Some(&r),
            Some(&object(4))
        ));
        assert!(!change_applied(&change(3, md5, None), Some(&r), None));
        let link = ObjectMeta {
            regular: false,
            ..object(3)
        };
        assert!(!change_applied(
            &change(3, md5, None),
            Some(&r),
            Some(&link)
        ));
        // A row kept after a delete: not.
        let gone = ResourceRecord { gone: true, ..r };
        assert!(!change_applied(
            &change(3, md5, None),
            Some(&gone),
            Some(&object(3))
        ));
    }
}
