//! The state writes of a run that put no copy in place: a copy found current or adopted by its
//! digest, a copy removed or kept after its Source deleted it, a change settled or failed. They
//! go to the committer like copies ([`super::Committer::write`]) and are recorded in the
//! transaction of the batch they join, so that every row and pending change a run writes is
//! written by the committer, one transaction per batch.

use resourcesync_model::W3cDateTime;
use resourcesync_store::{Batch, Op, PendingChange, ResourceRecord, VersionEnd};

use crate::error::Error;
use crate::report::Failed;

/// The error of writes that failed where the run cannot go on without them (the cursor must
/// not move past what they record).
pub(crate) fn not_recorded(f: Failed) -> Error {
    Error::StateWrite {
        message: format!("recording in the state: {}", f.message),
    }
}

/// One write with no copy to put in place.
#[derive(Debug, Clone)]
pub(crate) enum Write {
    /// The row of a copy already in place (adopted by its digest, or found current): written,
    /// and its pending change forgotten (as for a copy put in place, [`Batch::put_resource`]).
    Row(ResourceRecord),
    /// The copy of `uri` is removed (or was never put in place): its row and its pending
    /// change go.
    Removed {
        /// The Source's key.
        source: String,
        /// The resource.
        uri: String,
        /// The Source's time of the delete (the change's `datetime`, else its `<lastmod>`),
        /// when it gave one: kept with the end of the current version (`--versions`).
        when: Option<W3cDateTime>,
    },
    /// The copy of `uri` is kept after its Source deleted it: marked gone, its pending change
    /// forgotten.
    Kept {
        /// The Source's key.
        source: String,
        /// The resource.
        uri: String,
        /// The Source's time of the delete, as for [`Write::Removed`].
        when: Option<W3cDateTime>,
    },
    /// Nothing is left to do for `uri`: its pending change is forgotten.
    Settled {
        /// The Source's key.
        source: String,
        /// The resource.
        uri: String,
    },
    /// A change that failed, kept to be retried by the next run.
    Pending(PendingChange),
}

impl Write {
    /// The end of the current version this write records (`--versions`): a copy the Source
    /// deleted, removed or kept.
    pub(crate) fn version_end(&self) -> Option<VersionEnd> {
        match self {
            Write::Removed { source, uri, when } | Write::Kept { source, uri, when } => {
                Some(super::versions::ended(source, uri, *when))
            }
            _ => None,
        }
    }

    /// Adds the write's operations to `batch`.
    pub(crate) fn add_to<'a>(&'a self, batch: &mut Batch<'a>) {
        match self {
            Write::Row(r) => {
                batch.put_resource(r);
            }
            Write::Removed { source, uri, .. } => {
                batch
                    .push(Op::RemoveResource(uri))
                    .push(Op::RemovePending(source, uri));
            }
            Write::Kept { source, uri, .. } => {
                batch
                    .push(Op::SetGone(uri, true))
                    .push(Op::RemovePending(source, uri));
            }
            Write::Settled { source, uri } => {
                batch.push(Op::RemovePending(source, uri));
            }
            Write::Pending(p) => {
                batch.push(Op::PutPending(p));
            }
        }
    }
}
