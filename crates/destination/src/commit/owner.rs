//! One URI per path: two URIs never share a copy.
//!
//! Different URIs can map to one path under the destination ([`crate::mapping`]): a Source
//! that lists `BASE/victim.example/doc.txt` beside `http://victim.example/doc.txt` (both map
//! to `DEST/victim.example/doc.txt`), `%41` beside `A`, two notations of one host. Were both
//! copied, the second would overwrite the first one's copy, or (same digest) be recorded
//! against the first one's bytes, and an aggregator republishing it would claim `rel="via"` the first one's URI for bytes that came
//! from elsewhere. So a path belongs to the URI whose row in the state has it (a placeholder of
//! a copy in progress included, [`crate::commit`]), and a copy of any other URI there is
//! refused with [`Error::PathTaken`] (a per-resource failure, kept as pending like any other;
//! the first URI's copy is left as it is) **before** anything is written at the path:
//!
//! - [`check`]: before a copy in place is adopted or patched, and before a download starts over
//!   a file in place;
//! - [`gate`]: in the committer, for every copy of a batch before its placeholder is recorded
//!   and it is put in place (downloads, dump packages, fetches shared with other workers,
//!   repairs): against the state, the batch before it (placed, not yet recorded) and the
//!   copies before it in its own batch;
//! - [`InFlight`]: the fetches of one run in flight, by path, so that of two new URIs of one
//!   path the one submitted first (list order; a baseline's in URI order) is the one tried, the
//!   other refused, whichever download ends first.
//!
//! Refusing rather than moving other hosts' copies under a prefix a Source's own paths cannot
//! produce keeps every existing mirror's layout (users' scripts and web server configurations
//! read `DEST/<host>/<path>`) and needs no migration; and a prefix would not help against the
//! other collisions (two notations of one URI, two Sources in one destination), which the
//! refusal covers too.
//!
//! A row of another Source (another key in the state) gives its path up instead: that is the
//! same Source synced again after it moved to another address (its URIs changed, its paths did
//! not), or a second Source the user synced into the same destination; the row is removed
//! with the new one's ([`Gate::taken_over`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use resourcesync_store::{Records, RelPath, ResourceRecord};

use super::{Pending, is_placeholder};
use crate::error::{Error, Result};
use crate::report::Failed;

/// The refusal of `uri` at `path`, which `owner`'s row has.
fn taken(state: &dyn Records, uri: &str, path: &str, owner: String) -> Error {
    let owner_gone = state
        .resource(&owner)
        .ok()
        .flatten()
        .is_some_and(|r| r.gone && !is_placeholder(&r));
    Error::PathTaken {
        uri: uri.to_owned(),
        path: path.to_owned(),
        owner,
        owner_gone,
    }
}

/// Whether `owner`'s row is of another Source than `source` (the state's key of the Source a
/// copy is made for): a row an earlier Source left in this destination, such as the same Source
/// before it moved to another address (its URIs changed, its paths did not). Such a row gives
/// its path up to the Source synced now (its row removed with the new one's, [`gate`]); two
/// URIs of one Source never share a path.
fn of_another_source(state: &dyn Records, owner: &str, source: &str) -> bool {
    state
        .resource(owner)
        .ok()
        .flatten()
        .is_some_and(|r| r.source != source)
}

/// `Ok` when no row of another URI of the Source `source` than `uri` has `path`.
pub(crate) fn check(state: &dyn Records, uri: &str, source: &str, path: &RelPath) -> Result<()> {
    match state.path_owner(path)? {
        Some(owner) if owner != uri && !of_another_source(state, &owner, source) => {
            Err(taken(state, uri, path.as_str(), owner))
        }
        _ => Ok(()),
    }
}

/// The committer's verdict on a batch ([`gate`]), one entry per copy in order.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// `None` for a copy that may be put in place, else why not.
    pub(crate) refused: Vec<Option<Failed>>,
    /// The URI of another Source's row that has the copy's path, removed when the copy is
    /// recorded (see [`of_another_source`]).
    pub(crate) taken_over: Vec<Option<String>>,
}

/// The committer's check of a batch (see the module documentation), in order. `unrecorded`:
/// the rows of the batch before, placed and not yet recorded.
pub(crate) fn gate(state: &dyn Records, batch: &[Pending], unrecorded: &[ResourceRecord]) -> Gate {
    let all = |f: Failed| Gate {
        refused: batch.iter().map(|_| Some(f.clone())).collect(),
        taken_over: batch.iter().map(|_| None).collect(),
    };
    let paths: Vec<&RelPath> = batch.iter().map(|p| p.body.key()).collect();
    let owners = match state.path_owners(&paths) {
        Ok(o) if o.len() == batch.len() => o,
        Ok(_) => {
            return all(Failed::other(
                "the state answered for fewer paths than it was asked",
            ));
        }
        Err(e) => return all(Failed::from(e)),
    };
    // Bounded by two batches: the one before and this one.
    let mut claimed: HashMap<&str, &str> = unrecorded
        .iter()
        .map(|r| (r.path.as_str(), r.uri.as_str()))
        .collect();
    let mut g = Gate::default();
    for (p, owner) in batch.iter().zip(owners) {
        let (uri, path) = (p.row.uri.as_str(), p.row.path.as_str());
        let mut over = None;
        let other = match owner {
            Some(o) if o != uri && of_another_source(state, &o, &p.row.source) => {
                over = Some(o);
                None
            }
            Some(o) if o != uri => Some(o),
            _ => None,
        };
        let other = other.or_else(|| {
            claimed
                .get(path)
                .filter(|u| **u != uri)
                .map(|u| (*u).to_owned())
        });
        match other {
            Some(o) => {
                g.refused
                    .push(Some(Failed::from(taken(state, uri, path, o))));
                g.taken_over.push(None);
            }
            None => {
                claimed.entry(path).or_insert(uri);
                g.refused.push(None);
                g.taken_over.push(over);
            }
        }
    }
    g
}

/// The paths of a run's fetches in flight, the URI each is fetched for and by how many jobs
/// (see the module documentation). Holds as many entries as jobs are alive (downloading,
/// waiting for their batch, or deferred), never one per resource of the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlight(Arc<Mutex<HashMap<String, (String, usize)>>>);

impl InFlight {
    /// Takes `path` for `uri`, or says which other URI's fetch has it.
    pub(crate) fn take(&self, path: &str, uri: &str) -> std::result::Result<Claim, String> {
        let mut m = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match m.get_mut(path) {
            Some((other, _)) if other != uri => return Err(other.clone()),
            Some((_, n)) => *n += 1,
            None => {
                m.insert(path.to_owned(), (uri.to_owned(), 1));
            }
        }
        Ok(Claim {
            held: self.clone(),
            path: path.to_owned(),
        })
    }

    /// How many paths are held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// A path held in an [`InFlight`] until dropped.
#[derive(Debug)]
pub(crate) struct Claim {
    held: InFlight,
    path: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut m = self.held.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, n)) = m.get_mut(&self.path) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_in_flight_is_held_for_its_uri_until_every_claim_is_dropped() {
        let f = InFlight::default();
        let a = f.take("v/doc.txt", "http://v/doc.txt").expect("free");
        assert_eq!(
            f.take("v/doc.txt", "http://src/v/doc.txt").err().as_deref(),
            Some("http://v/doc.txt")
        );
        let again = f.take("v/doc.txt", "http://v/doc.txt").expect("same URI");
        drop(a);
        assert!(f.take("v/doc.txt", "http://src/v/doc.txt").is_err());
        drop(again);
        assert_eq!(f.len(), 0);
        let _b = f
            .take("v/doc.txt", "http://src/v/doc.txt")
            .expect("free again");
    }
}
