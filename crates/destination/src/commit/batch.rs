//! The steps of one batch (see [`crate::commit`]): the placeholders of its fresh copies
//! recorded (step 0), its copies put in place (step 2), then its rows and writes recorded (step 4).

use resourcesync_store::{Batch, Op, Records, ResourceRecord, Store, VersionRecord};

use super::{Budget, Done, Origin, Pending, Put, Reply, Write, placeholder, versions};
use crate::report::Failed;

/// Step 0: the placeholders of the fresh copies of a batch, in one transaction.
pub(super) fn announce<'a>(
    state: &dyn Records,
    batch: impl Iterator<Item = &'a Pending>,
) -> std::result::Result<(), Failed> {
    let rows: Vec<ResourceRecord> = batch
        .filter(|p| p.fresh)
        .map(|p| placeholder(&p.row))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    // Not `put_resources`: a pending change stays until its copy is recorded (a run killed
    // now retries it).
    let mut b = Batch::new();
    for r in &rows {
        b.push(Op::PutResource(r));
    }
    state.apply(&b).map_err(Failed::from)
}

/// A batch renamed into place (step 2), waiting for the sync of its renames and its rows.
#[derive(Debug)]
pub(super) struct Placed {
    /// One outcome per copy, in order (failures final, successes until recorded).
    out: Vec<Done>,
    /// The rows of the copies placed, and their index in `out`.
    pub(super) rows: Vec<ResourceRecord>,
    slots: Vec<usize>,
    /// The URIs of the fresh copies not put in place: their placeholders go with the rows.
    unplaced: Vec<String>,
    /// The rows of other Sources whose paths copies of this batch took over
    /// ([`crate::commit::owner::Gate::taken_over`]): removed with the rows.
    taken_over: Vec<String>,
    /// The writes with no copy to put in place that joined this batch, and who waits for
    /// each job of them: recorded with the rows.
    pub(super) writes: Vec<(Vec<Write>, Reply)>,
    /// The versions of the copies placed (`--versions`), their bodies kept, then those of
    /// the copies in place the writes record: recorded with the rows.
    pub(super) versions: Vec<VersionRecord>,
    /// How many of `versions` are of copies placed (each a new version: counted).
    pub(super) new_versions: usize,
}

/// Step 2: puts each copy of the batch in place ([`Store::place`]), but those the gate refused
/// (`refused`, in order: see [`crate::commit::owner::gate`]) and those past its Source's `budget`,
/// which fail with their reason, their bodies discarded.
pub(super) fn place_batch(
    store: &dyn Store,
    state: &dyn Records,
    budget: &mut Option<Budget>,
    keeper: Option<&versions::Keeper>,
    batch: Vec<Pending>,
    gate: crate::commit::owner::Gate,
) -> Placed {
    let n = batch.len();
    let mut p = Placed {
        out: Vec::with_capacity(n),
        rows: Vec::with_capacity(n),
        slots: Vec::with_capacity(n),
        unplaced: Vec::new(),
        taken_over: Vec::new(),
        writes: Vec::new(),
        versions: Vec::new(),
        new_versions: 0,
    };
    let mut bodies = Vec::with_capacity(n);
    let mut rest = Vec::with_capacity(n);
    // The outcome of each copy refused, by its place in the batch, with the URI whose
    // placeholder goes (a fresh copy announced but not put in place).
    let mut refusals: Vec<(usize, Failed, Option<String>)> = Vec::new();
    let mut refused = gate.refused.into_iter();
    let mut taken_over = gate.taken_over.into_iter();
    for (
        i,
        Pending {
            body,
            row,
            origin,
            fresh,
            datetime,
        },
    ) in batch.into_iter().enumerate()
    {
        let over = taken_over.next().flatten();
        // Refused by the gate: never announced, so no placeholder to remove.
        if let Some(Some(f)) = refused.next() {
            refusals.push((i, f, None));
            continue;
        }
        let past_budget = budget
            .as_mut()
            .and_then(|b| b.take(state, &row, body.committed().length));
        if let Some(f) = past_budget {
            // Not put in place (its temporary body goes with it).
            refusals.push((i, f, fresh.then_some(row.uri)));
            continue;
        }
        bodies.push(body);
        rest.push((row, origin, fresh, over, datetime));
    }
    let mut refusals = refusals.into_iter().peekable();
    let mut refuse_due = |p: &mut Placed| {
        while let Some((_, f, unplaced)) = refusals.next_if(|(i, _, _)| *i == p.out.len()) {
            p.unplaced.extend(unplaced);
            p.out.push(Err(f));
        }
    };
    let placed = store.place(bodies);
    // A store that answers for fewer bodies than it was given: the others failed.
    let missing = rest.len().saturating_sub(placed.len());
    let placed = placed.into_iter().chain((0..missing).map(|_| {
        Err(resourcesync_store::Error::Conflict {
            path: "(batch)".into(),
            reason: "the store gave no outcome for this copy",
        })
    }));
    for (r, (mut row, origin, fresh, over, datetime)) in placed.zip(rest) {
        refuse_due(&mut p);
        match r {
            Ok(c) => {
                crate::crashpoint::point(match origin {
                    Origin::Download => "after-rename",
                    Origin::Package => "package-renamed",
                });
                row.length = Some(c.committed.length);
                row.hashes = c.committed.hashes;
                // Its body kept as a version before anything records it (`--versions`): a
                // copy whose body cannot be kept fails, unrecorded, and is fetched again.
                if let Some(k) = keeper {
                    match k.keep(store, &row, datetime.or(row.lastmod)) {
                        Ok(v) => p.versions.push(v),
                        Err(f) => {
                            if fresh {
                                p.unplaced.push(row.uri);
                            }
                            p.out.push(Err(f));
                            continue;
                        }
                    }
                }
                p.slots.push(p.out.len());
                p.taken_over.extend(over);
                p.out.push(Ok(Put {
                    length: c.committed.length,
                    replaced: c.replaced,
                }));
                p.rows.push(row);
            }
            // The store's error as it is: its category (a bucket over its quota stops the
            // run, a dropped connection is retried) must reach the run.
            Err(e) => {
                if fresh {
                    p.unplaced.push(row.uri);
                }
                p.out.push(Err(Failed::from(e)))
            }
        }
    }
    refuse_due(&mut p);
    p
}

/// Step 4, once the renames are synced (`synced`): records the rows, and the writes that
/// joined the batch (each job of them answered here), in one transaction; the outcome of every
/// copy.
pub(super) fn record(
    state: &dyn Records,
    keeper: Option<&versions::Keeper>,
    p: Placed,
    synced: std::result::Result<(), Failed>,
) -> Vec<Done> {
    let Placed {
        mut out,
        rows,
        slots,
        unplaced,
        taken_over,
        writes,
        mut versions,
        new_versions,
    } = p;
    if rows.is_empty() && unplaced.is_empty() && writes.is_empty() {
        return out;
    }
    let mut batch = Batch::new();
    for uri in &taken_over {
        batch.push(Op::RemoveResource(uri));
    }
    for r in &rows {
        batch.put_resource(r);
    }
    for uri in &unplaced {
        batch.push(Op::RemoveResource(uri));
    }
    for w in writes.iter().flat_map(|(w, _)| w) {
        w.add_to(&mut batch);
    }
    // The versions of the copies, first seen now; the ends of those their Source deleted.
    versions::stamped(&mut versions);
    let ends: Vec<_> = match keeper {
        Some(_) => writes
            .iter()
            .flat_map(|(w, _)| w)
            .filter_map(Write::version_end)
            .collect(),
        None => Vec::new(),
    };
    versions::add_to(&mut batch, &versions, &ends);
    // The rows only once the files are durably in place; a failure here leaves files with
    // their placeholders, which the next run adopts by their digest or deletes.
    let done = synced.and_then(|()| state.apply(&batch).map_err(Failed::from));
    match &done {
        Ok(()) => {
            if let Some(k) = keeper {
                k.recorded(new_versions);
            }
            // The rows and the removal of their pending changes are one transaction.
            for _ in &rows {
                crate::crashpoint::point("state");
            }
        }
        Err(e) => {
            for i in slots {
                out[i] = Err(e.clone());
            }
        }
    }
    drop(batch);
    for (_, reply) in writes {
        reply.send(vec![done.clone().map(|()| Put::WRITTEN)]);
    }
    out
}

/// Puts a batch in place and records it (steps 1 to 4 of the module documentation); one outcome
/// per copy, in order.
#[cfg(test)]
pub(crate) fn commit_batch(
    store: &dyn Store,
    state: &dyn Records,
    batch: Vec<Pending>,
) -> Vec<Done> {
    let gate = crate::commit::owner::gate(state, &batch, &[]);
    let admitted = batch.iter().zip(&gate.refused).filter(|(_, r)| r.is_none());
    if let Err(e) = announce(state, admitted.map(|(p, _)| p)).and_then(|()| Ok(store.sync()?)) {
        return batch.iter().map(|_| Err(e.clone())).collect();
    }
    let p = place_batch(store, state, &mut None, None, batch, gate);
    let synced = store.sync().map_err(Failed::from);
    record(state, None, p, synced)
}
