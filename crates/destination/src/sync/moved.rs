//! A Source whose Capability List moved: discovery from the same start URL now finds another
//! Capability List than the one the state followed (a Source Description that names a new
//! one, a Source that reorganised its documents).
//!
//! The state keys a Source's copies by its Capability List (Z39.99-2014 §9: the Capability List
//! identifies the set of resources a Destination synchronizes). Taken for a new Source, the
//! moved one would have every resource fetched again, and the copies of resources it dropped
//! meanwhile would stay under the old key for ever, out of reach of `--delete`. Instead the
//! copies are carried over to the new Capability List, and the run is a baseline against its
//! Resource List (no cursor under the new key): what is listed and current is kept as it is,
//! what changed is fetched, what is no longer listed is deleted (with `--delete`), the moved
//! Source's history before its move not being comparable with the new one's.

use resourcesync_store::{Batch, Op, Records, SourceCursor};

use crate::discover::known::{Known, start_key};
use crate::error::Result;
use crate::options::SyncOptions;

/// Rows carried over per transaction.
const PAGE: usize = 1000;

/// When the state followed another Capability List from the same start URL (and has a cursor
/// for it), carries its copies and pending changes over to `key`, the Capability List found
/// now; returns the one it moved from. Nothing is written on a dry run (the old one is still
/// named).
pub(crate) fn carry_over(
    state: &dyn Records,
    opts: &SyncOptions,
    key: &str,
) -> Result<Option<String>> {
    let start = start_key(&opts.url, opts.set.as_deref());
    let Some(known) = Known::recall(&state.documents(&start)?) else {
        return Ok(None);
    };
    let old = known.info.key();
    if old == key || state.cursor(&old)?.and_then(|c| c.cursor).is_none() {
        return Ok(None);
    }
    if opts.dry_run {
        return Ok(Some(old));
    }
    let mut after: Option<String> = None;
    loop {
        // Rows carried over leave the old key: the next page is after the last one read.
        let mut page = state.resources_page(&old, after.as_deref(), PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        for r in &mut page {
            key.clone_into(&mut r.source);
        }
        let mut batch = Batch::new();
        for r in &page {
            batch.put_resource(r);
        }
        state.apply(&batch)?;
    }
    let mut after: Option<String> = None;
    loop {
        let mut page = state.pending_page(&old, after.as_deref(), PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.uri.clone());
        let uris: Vec<String> = page.iter().map(|p| p.uri.clone()).collect();
        for p in &mut page {
            key.clone_into(&mut p.source);
        }
        let mut batch = Batch::new();
        for (p, uri) in page.iter().zip(&uris) {
            batch.push(Op::PutPending(p));
            batch.push(Op::RemovePending(&old, uri));
        }
        state.apply(&batch)?;
    }
    // Neither the old cursor (it is not followed any more) nor one the new key may have from
    // long ago (a Source that moved back) says where the copies are now: the run is a
    // baseline, and its end sets the new key's cursor.
    let (gone, reset) = (
        SourceCursor {
            source: old.clone(),
            ..SourceCursor::default()
        },
        SourceCursor {
            source: key.to_owned(),
            ..SourceCursor::default()
        },
    );
    let mut batch = Batch::new();
    batch.push(Op::SetCursor(&gone));
    if state.cursor(key)?.is_some() {
        batch.push(Op::SetCursor(&reset));
    }
    state.apply(&batch)?;
    Ok(Some(old))
}
