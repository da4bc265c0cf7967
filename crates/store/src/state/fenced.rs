//! [`Fenced`]: a state whose every batch of writes holds only while a lease does.
//!
//! A worker sharing a state with others (an aggregator's processes over PostgreSQL) takes a
//! [`Lease`] on a Source, then hands the engine `Fenced::new(state, lease)`: each batch the
//! engine applies goes with [`Op::Fence`] first, in the same transaction, so that a worker
//! that stalled past its lease (a pause, a partition) and lost it to another can no longer
//! write: its batch fails with [`crate::Error::LeaseLost`] and leaves the state as it was. The
//! engine above does not know it is fenced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Result;
use crate::state::{Batch, BatchGuard, Guarded, Lease, Leases, Op, Records};

/// Records whose batches apply only while a lease is held (see the module's documentation).
pub type Fenced = Guarded<Fence>;

/// The guard of [`Fenced`]: the lease, and the leases it was taken from.
#[derive(Debug)]
pub struct Fence {
    leases: Arc<dyn Leases>,
    lease: Mutex<Lease>,
}

impl Fenced {
    /// The records of `inner`, fenced by `lease` (taken on `inner`, renewed and given up
    /// there).
    pub fn new<S: Records + Leases + 'static>(inner: Arc<S>, lease: Lease) -> Self {
        let leases: Arc<dyn Leases> = inner.clone();
        Guarded::with(
            inner,
            Fence {
                leases,
                lease: Mutex::new(lease),
            },
        )
    }

    /// The lease as last taken or renewed.
    pub fn lease(&self) -> Lease {
        self.guard().lease()
    }

    /// Renews the lease for `ttl` from now; `false` when it was lost (another worker holds
    /// it, or it expired and was taken): every later batch then fails.
    pub fn renew(&self, ttl: Duration) -> Result<bool> {
        self.guard().renew(ttl)
    }

    /// Gives the lease up.
    pub fn release(&self) -> Result<bool> {
        self.guard().leases.release_source(&self.lease())
    }
}

impl Fence {
    fn lease(&self) -> Lease {
        self.lease.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn renew(&self, ttl: Duration) -> Result<bool> {
        let held = self.lease();
        match self.leases.lease_source(&held.name, &held.holder, ttl)? {
            Some(l) if l.token == held.token => {
                *self.lease.lock().unwrap_or_else(|p| p.into_inner()) = l;
                Ok(true)
            }
            // Taken again after it expired: a new token, and meanwhile another worker may have
            // written. Given back: this worker's writes stay fenced by the old token.
            Some(l) => {
                let _ = self.leases.release_source(&l);
                Ok(false)
            }
            None => Ok(false),
        }
    }
}

impl BatchGuard for Fence {
    /// The batch, with the fence first (Z39.99 says nothing of this: it is how shared state
    /// stays consistent when workers stall).
    fn apply(&self, inner: &dyn Records, batch: &Batch<'_>) -> Result<()> {
        let lease = self.lease();
        let mut fenced = Batch::new();
        fenced.push(Op::Fence(&lease));
        for op in batch.ops() {
            fenced.push(*op);
        }
        inner.apply(&fenced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{MemState, RecordWrites, ResourceRecord};

    fn row(uri: &str) -> ResourceRecord {
        ResourceRecord {
            uri: uri.into(),
            source: "s".into(),
            path: uri.into(),
            ..ResourceRecord::default()
        }
    }

    #[test]
    fn writes_hold_only_while_the_lease_does() {
        let shared = Arc::new(MemState::new());
        let ttl = Duration::from_millis(50);
        let lease = shared
            .lease_source("s", "a", ttl)
            .expect("lease")
            .expect("free");
        let a = Fenced::new(shared.clone(), lease);
        a.put_resource(&row("one")).expect("held: written");
        assert!(a.renew(ttl).expect("renew"), "still held");
        // Worker `a` stalls past its lease; `b` takes the Source over.
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let b_lease = loop {
            if let Some(l) = shared
                .lease_source("s", "b", Duration::from_secs(60))
                .expect("lease")
            {
                break l;
            }
            assert!(std::time::Instant::now() < end, "the lease never expired");
            std::thread::yield_now();
        };
        let b = Fenced::new(shared.clone(), b_lease);
        b.put_resource(&row("two")).expect("b holds it");
        // `a` wakes up: its write is refused, the state is b's.
        assert!(matches!(
            a.put_resource(&row("three")),
            Err(crate::Error::LeaseLost { .. })
        ));
        assert!(!a.renew(ttl).expect("renew"), "lost");
        assert!(shared.resource("three").expect("read").is_none());
        assert!(shared.resource("two").expect("read").is_some());
        assert!(b.release().expect("release"));
    }
}
