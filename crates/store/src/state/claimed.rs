//! [`Claimed`]: a state through which the work of claimed items is recorded together with the
//! claims' completion.
//!
//! A worker that claimed work items ([`crate::WorkQueue::claim_work`]), each the fetch of one
//! resource, hands the engine `Claimed::new(state)` after [`Claimed::hold`]ing the claims:
//! each batch the engine applies that writes the row of a held item's resource
//! ([`Op::PutResource`]) or records its failure ([`Op::PutPending`]) goes with
//! [`Op::CompleteWork`] for that claim, in the same transaction. So the row and the item's
//! removal from the queue happen together or not at all, and not at all once the claim expired
//! and was taken over by another worker (the batch fails with [`crate::Error::LeaseLost`]):
//! a worker that stalled past its claims never writes over the one that took them. The engine
//! above does not know its work was claimed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::state::{Batch, BatchGuard, Claim, Guarded, Op, Records};

/// Records whose writes complete the claims they concern (see the module's documentation).
pub type Claimed = Guarded<Claims>;

/// The guard of [`Claimed`]: the claims held, by the URI of the resource each is about.
#[derive(Debug, Default)]
pub struct Claims {
    held: Mutex<HashMap<String, Claim>>,
}

impl Claimed {
    /// `inner`, holding no claim yet.
    pub fn new(inner: Arc<dyn Records>) -> Self {
        Guarded::with(inner, Claims::default())
    }

    /// Holds `claim`, the work of the resource `uri`: the next batch writing its row or its
    /// pending change completes it.
    pub fn hold(&self, uri: &str, claim: Claim) {
        self.lock().insert(uri.to_owned(), claim);
    }

    /// The claim held for `uri`, given up by this state (not completed): the caller settles
    /// it (completes or releases it) itself.
    pub fn take(&self, uri: &str) -> Option<Claim> {
        self.lock().remove(uri)
    }

    /// The claims held now (those not yet completed nor taken back): what their worker
    /// renews while their downloads run ([`crate::WorkQueue::renew_work`]).
    pub fn held(&self) -> Vec<Claim> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Claim>> {
        self.guard().lock()
    }
}

impl Claims {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Claim>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl BatchGuard for Claims {
    /// The batch, with the completion of every claim held for a resource whose row or pending
    /// change it writes; those claims are let go once it is applied.
    fn apply(&self, inner: &dyn Records, batch: &Batch<'_>) -> Result<()> {
        let claims: Vec<(String, Claim)> = {
            let held = self.lock();
            let mut seen = std::collections::HashSet::new();
            batch
                .ops()
                .iter()
                .filter_map(|op| match op {
                    Op::PutResource(r) => Some(r.uri.as_str()),
                    Op::PutPending(p) => Some(p.uri.as_str()),
                    _ => None,
                })
                .filter(|uri| seen.insert(*uri))
                .filter_map(|uri| held.get(uri).map(|c| (uri.to_owned(), c.clone())))
                .collect()
        };
        if claims.is_empty() {
            return inner.apply(batch);
        }
        let mut with = Batch::new();
        for op in batch.ops() {
            with.push(*op);
        }
        for (_, c) in &claims {
            with.push(Op::CompleteWork(c));
        }
        inner.apply(&with)?;
        let mut held = self.lock();
        for (uri, c) in claims {
            if held.get(&uri) == Some(&c) {
                held.remove(&uri);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{MemState, RecordWrites, Records, ResourceRecord, WorkItem, WorkQueue};
    use std::time::Duration;

    fn row(uri: &str) -> ResourceRecord {
        ResourceRecord {
            uri: uri.into(),
            source: "s".into(),
            path: uri.into(),
            ..ResourceRecord::default()
        }
    }

    fn item(uri: &str) -> WorkItem {
        WorkItem {
            key: format!("s {uri}"),
            source: "s".into(),
            payload: String::new(),
        }
    }

    #[test]
    fn a_row_completes_its_claim_and_a_lost_claim_writes_nothing() {
        let shared = Arc::new(MemState::new());
        shared.add_work(&[item("a"), item("b")]).expect("add");
        let long = Duration::from_secs(60);
        let claims = shared.claim_work("w1", 2, long).expect("claim");
        assert_eq!(claims.len(), 2);
        let c = Claimed::new(shared.clone() as Arc<dyn Records>);
        c.hold("a", claims[0].clone());
        // Worker w1 stalls; its claim of `b` is taken over (here: given back and re-claimed).
        c.hold("b", claims[1].clone());
        assert_eq!(shared.release(&claims[1..]).expect("release"), 1);
        let taken = shared.claim_work("w2", 1, long).expect("claim");
        assert_eq!(taken.len(), 1);
        // The row of `a` and its claim's completion go together.
        c.put_resources(&[row("a")]).expect("held: written");
        assert!(shared.resource("a").expect("read").is_some());
        assert_eq!(shared.work_left("s").expect("left"), 1, "a completed");
        assert!(c.take("a").is_none(), "let go once completed");
        // The row of `b` under a lost claim: refused, nothing written.
        assert!(matches!(
            c.put_resources(&[row("b")]),
            Err(crate::Error::LeaseLost { .. })
        ));
        assert!(shared.resource("b").expect("read").is_none());
        assert_eq!(shared.work_left("s").expect("left"), 1);
        // A write about no claim passes through.
        c.put_resource(&row("c")).expect("unclaimed");
    }
}
