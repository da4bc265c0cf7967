//! What the executor runs and what a job comes to: made by the planners (`march`, the
//! baseline, the incremental) and run by `fetch/` (the executor, the download, the hand-out to
//! other workers); it imports neither.

use resourcesync_model::Change;

use crate::commit::Receipt;
pub(crate) use crate::outcome::Outcome;
use crate::plan::staging::StagedItem;

/// What to do with one resource.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) item: StagedItem,
    pub(crate) kind: JobKind,
}

impl Job {
    /// The removal of the copy of `uri` (the Source deleted it).
    pub(crate) fn delete(uri: String) -> Job {
        Job {
            item: StagedItem {
                uri,
                change: Some(Change::Deleted),
                ..StagedItem::default()
            },
            kind: JobKind::Delete,
        }
    }

    /// The fetch of `item`, for `reason`.
    pub(crate) fn fetch(item: StagedItem, reason: Reason) -> Job {
        Job {
            item,
            kind: JobKind::Fetch(reason),
        }
    }
}

/// Whether a job fetches a copy or removes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKind {
    /// Fetch it, for this reason.
    Fetch(Reason),
    /// The Source deleted it.
    Delete,
}

/// Why a copy is fetched, which says what is consulted first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A resource a list names whose copy the diff found out of date (or the state has only a
    /// copy kept after a delete of): its row and the file in place are consulted first.
    Listed,
    /// A resource a list names the diff found no row of (a create of a baseline): not looked
    /// up in the state again.
    New,
    /// A Change List entry (Z39.99-2014 §12.1): skipped only when the state proves the change
    /// applied; an update may be patched (§14.4).
    Change,
    /// The copy in place is damaged ([`crate::fetch::repair`]): fetched whatever the state
    /// says, unconditionally.
    Repair,
}

impl Reason {
    /// The reason of a fetch handed to another worker, from its flags
    /// ([`crate::share::SharedFetch`]): a repair first, then a change, then a create.
    pub(crate) fn from_flags(change: bool, new: bool, repair: bool) -> Reason {
        match (change, new, repair) {
            (_, _, true) => Reason::Repair,
            (true, _, _) => Reason::Change,
            (_, true, _) => Reason::New,
            _ => Reason::Listed,
        }
    }

    /// The flags of a fetch handed to another worker: (`listed_change`, `new`, `repair`).
    pub(crate) fn flags(self) -> (bool, bool, bool) {
        (
            self == Reason::Change,
            self == Reason::New,
            self == Reason::Repair,
        )
    }
}

/// How far a job got before its copy waits for the committer.
pub(crate) enum Started {
    /// Ended: what was done.
    Done(Outcome),
    /// Downloaded, verified and queued: the receipt of its batch, and what the copy will be.
    Queued(Receipt, Made),
}

/// What a queued copy will be once its batch is committed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Made {
    Created,
    Updated,
    Repaired,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_survives_its_flags() {
        for r in [Reason::Listed, Reason::New, Reason::Change, Reason::Repair] {
            let (change, new, repair) = r.flags();
            assert_eq!(Reason::from_flags(change, new, repair), r);
        }
    }
}
