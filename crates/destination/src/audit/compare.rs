//! The comparison: the state's rows and the published list merged in URI order, each copy
//! measured and decided (in sync, missing, different), then the files nothing maps to.

use std::sync::Arc;

use resourcesync_diff::{Difference, Item, Page, pages};
use resourcesync_model::Hashes;
use resourcesync_store::{Records, RelPath, ResourceRecord};

use crate::error::{Error, Result};
use crate::march::{Kind, judge, march};
use crate::report::{AuditDifference, Observer, push_capped};

use super::copies::{Copies, Step, is_state, measure_all, untracked};
use super::list::List;
use super::{CHUNK, PAGE};

pub(super) fn why(d: Difference) -> &'static str {
    match d {
        Difference::Length => "length",
        Difference::Digest => "digest",
        Difference::Lastmod => "lastmod",
    }
}

#[derive(Default)]
pub(super) struct Found {
    pub(super) in_sync: u64,
    pub(super) missing: Vec<AuditDifference>,
    pub(super) extra: Vec<AuditDifference>,
    pub(super) different: Vec<AuditDifference>,
    pub(super) missing_count: u64,
    pub(super) extra_count: u64,
    pub(super) different_count: u64,
}

impl Found {
    fn missing(&mut self, d: AuditDifference) {
        self.missing_count += 1;
        push_capped(&mut self.missing, d);
    }
    fn extra(&mut self, d: AuditDifference) {
        self.extra_count += 1;
        push_capped(&mut self.extra, d);
    }
    fn different(&mut self, d: AuditDifference) {
        self.different_count += 1;
        push_capped(&mut self.different, d);
    }
}

/// Pages of rows read ahead of the merge.
pub(super) const ROW_PAGES_AHEAD: usize = 8;

/// Reads the state's rows of a Source, a page at a time in URI order, on a thread of its own,
/// up to [`ROW_PAGES_AHEAD`] pages ahead of the reader (while the Source's list is still being
/// read, then during the merge). The last page is empty; an error ends the pages.
pub(super) fn rows_ahead(
    state: Arc<dyn Records>,
    key: String,
) -> std::sync::mpsc::Receiver<Result<Vec<ResourceRecord>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(ROW_PAGES_AHEAD);
    // A plain thread: it may block on a full channel, which a pool's thread should not.
    let spawned = std::thread::Builder::new()
        .name("audit-rows".into())
        .spawn(move || {
            let mut after: Option<String> = None;
            loop {
                let page = state.resources_page(&key, after.as_deref(), PAGE);
                let last = match &page {
                    Ok(p) => p.last().map(|r| r.uri.clone()),
                    Err(_) => None,
                };
                // Stops when the reader is gone (the audit ended) or after the last page.
                if tx.send(page.map_err(Error::from)).is_err() || last.is_none() {
                    return;
                }
                after = last;
            }
        });
    if let Err(e) = spawned {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let _ = tx.send(Err(Error::io("starting a thread", e)));
        return rx;
    }
    rx
}

/// What is compared with what, and how.
pub(super) struct Compare<'a> {
    pub(super) state: &'a dyn Records,
    pub(super) obs: &'a dyn Observer,
    pub(super) fast: bool,
    pub(super) threads: usize,
    /// The key of a state database inside DEST ([`super::copies::state_key`]): not extra.
    pub(super) own_state: Option<String>,
}

impl Compare<'_> {
    /// Plans the measurement of a step.
    fn plan(&self, s: &mut Step) {
        match (&s.row, &s.published) {
            // A row the Source no longer lists: is its copy there?
            (Some(r), None) => s.at = Some(r.path.clone()),
            // Fast: the size only, the recorded digests stand for the content.
            (Some(r), Some(p)) => {
                s.at = Some(r.path.clone());
                if !self.fast {
                    s.algs = p.hashes.known_algs();
                }
            }
            // No row: a file may be in place all the same (copied by other means, or a run
            // killed between the rename and the row): measure it.
            (None, Some(p)) => {
                s.at = p.path.clone();
                s.algs = p.hashes.known_algs();
            }
            (None, None) => {}
        }
    }

    /// Decides a measured step.
    fn decide(&self, copies: &Copies<'_>, s: Step, found: &mut Found) -> Result<()> {
        let measured = match s.measured {
            Some(m) => m?,
            None => None,
        };
        let Some(p) = s.published else {
            // A copy on disk the Source does not publish: a delete (crate::march).
            let copy = measured.map(|(length, hashes)| Item {
                uri: s.uri.clone(),
                length: Some(length),
                lastmod: None,
                hashes,
            });
            if let Some(v) = judge(&s.uri, copy.as_ref(), None) {
                self.obs.resource_done();
                found.extra(AuditDifference {
                    uri: v.uri,
                    path: s.row.map(|r| r.path),
                    why: "not at the Source".into(),
                });
            }
            return Ok(());
        };
        self.obs.resource_done();
        let original = p.item(&s.uri);
        let copy = match (s.row, measured) {
            (Some(r), Some((length, hashes))) => {
                let hashes = if !self.fast {
                    hashes
                } else if r.length == Some(length) {
                    r.hashes
                } else {
                    // Fast, but the size is not the one recorded: the recorded digests do not
                    // describe this file, which is read (when a digest could tell).
                    let algs = p.hashes.known_algs();
                    if algs.is_empty() {
                        hashes
                    } else {
                        match copies.measure(&r.path, &algs)? {
                            Some((_, h)) => h,
                            None => Hashes::default(),
                        }
                    }
                };
                Some(Item {
                    uri: s.uri.clone(),
                    length: Some(length),
                    lastmod: r.lastmod,
                    hashes,
                })
            }
            // No row, or the row's file is not there: the file at the entry's path, if any.
            (row, m) => {
                let Some(path) = &p.path else {
                    found.missing(AuditDifference {
                        uri: s.uri,
                        path: None,
                        why: "no safe path under the destination".into(),
                    });
                    return Ok(());
                };
                let m = match row {
                    Some(r) if &r.path != path => copies.measure(path, &p.hashes.known_algs())?,
                    _ => m,
                };
                m.map(|(length, hashes)| Item {
                    uri: s.uri.clone(),
                    length: Some(length),
                    lastmod: None,
                    hashes,
                })
            }
        };
        // The one rule (crate::march): no copy is a create, a copy that differs an update.
        let Some(verdict) = judge(&s.uri, copy.as_ref(), Some(&original)) else {
            return Ok(());
        };
        let at = |why: &str| AuditDifference {
            uri: verdict.uri.clone(),
            path: p.path.clone(),
            why: why.into(),
        };
        match &verdict.kind {
            Kind::Same => found.in_sync += 1,
            Kind::Create => found.missing(at("no copy")),
            Kind::Update(w) => found.different(at((*w).map_or("content", why))),
            Kind::Delete | Kind::Damaged(_) => {}
        }
        Ok(())
    }

    /// Merges the state's rows of the Source with the list, in URI order, and measures the
    /// copies; then reports the files nothing maps to.
    /// `rows` gives the pages of the state's rows of the Source, in URI order, after a URI (an
    /// empty page at the end).
    pub(super) fn run(
        &self,
        list: &mut List,
        copies: Copies<'_>,
        rows: impl FnMut(Option<&str>) -> Result<Vec<ResourceRecord>>,
    ) -> Result<Found> {
        let mut found = Found::default();
        let mut copies = copies;
        self.merge(list, &mut copies, rows, &mut found)?;
        self.extras(list, copies, &mut found)?;
        Ok(found)
    }

    /// The merge of the rows with the list, in URI order, chunks of steps measured together.
    fn merge(
        &self,
        list: &List,
        copies: &mut Copies<'_>,
        mut rows: impl FnMut(Option<&str>) -> Result<Vec<ResourceRecord>>,
        found: &mut Found,
    ) -> Result<()> {
        let rows = pages(|after| {
            let page = rows(after)?;
            Ok::<_, Error>(Page {
                last: page.last().map(|r| r.uri.clone()),
                // A row whose path is not a safe one is no copy of ours (and never read).
                items: page
                    .into_iter()
                    .filter(|r| RelPath::parse(&r.path).is_ok())
                    .collect(),
            })
        });
        let pubs = pages(|after| {
            let page = list.page(after, PAGE)?;
            Ok::<_, Error>(Page {
                last: page.last().map(|e| e.0.clone()),
                items: page,
            })
        });
        // The one march (crate::march): rows and entries in URI order, a failed read ends it
        // with its error.
        let mut steps = march(rows, pubs);
        let mut chunk: Vec<Step> = Vec::with_capacity(CHUNK);
        loop {
            let next = steps.next().transpose()?;
            let end = next.is_none();
            if let Some(m) = next {
                let (uri, row) = (m.uri, m.row);
                let published = m.published.map(|(_, p)| p);
                if let Some(r) = &row {
                    copies.claim(&r.path);
                }
                if let Some(path) = published.as_ref().and_then(|p| p.path.as_deref()) {
                    copies.claim(path);
                }
                let mut s = Step {
                    uri,
                    row,
                    published,
                    at: None,
                    algs: Vec::new(),
                    measured: None,
                };
                self.plan(&mut s);
                chunk.push(s);
            }
            if chunk.len() >= CHUNK || (end && !chunk.is_empty()) {
                measure_all(copies, &mut chunk, self.threads);
                for s in chunk.drain(..) {
                    self.decide(copies, s, found)?;
                }
            }
            if end {
                break;
            }
        }
        Ok(())
    }

    /// Reports the files no resource maps to (the walked ones left unclaimed, or every file
    /// on disk neither listed nor recorded).
    fn extras(&self, list: &mut List, copies: Copies<'_>, found: &mut Found) -> Result<()> {
        match copies {
            Copies::Walked(tree, _) => {
                let mut left: Vec<String> = tree
                    .files
                    .into_iter()
                    .filter(|(_, w)| !w.claimed)
                    .map(|(p, _)| p)
                    .collect();
                left.sort_unstable();
                for path in left {
                    // A copy of another Source synced into the same DEST.
                    if !is_state(self.own_state.as_deref(), &path) && !recorded(self.state, &path)?
                    {
                        found.extra(AuditDifference {
                            uri: String::new(),
                            path: Some(path),
                            why: "no resource maps to this file".into(),
                        });
                    }
                }
                for e in tree.errors {
                    found.extra(AuditDifference {
                        uri: String::new(),
                        path: None,
                        why: e,
                    });
                }
            }
            Copies::OnDisk(store) => {
                untracked(store, self.state, None, &mut |r| {
                    match r {
                        Ok(rel) => {
                            if !is_state(self.own_state.as_deref(), rel.as_str())
                                && !list.has_path(rel.as_str())?
                            {
                                found.extra(AuditDifference {
                                    uri: String::new(),
                                    path: Some(rel.to_string()),
                                    why: "no resource maps to this file".into(),
                                });
                            }
                        }
                        Err(why) => found.extra(AuditDifference {
                            uri: String::new(),
                            path: None,
                            why,
                        }),
                    }
                    Ok(std::ops::ControlFlow::Continue(()))
                })?;
            }
        }
        Ok(())
    }
}

/// Whether some row has the path `path` of a walked file: none has a path that is not a key of
/// the store (rows are written under checked keys).
fn recorded(state: &dyn Records, path: &str) -> Result<bool> {
    match RelPath::parse(path) {
        Ok(rel) => Ok(state.has_path(&rel)?),
        Err(_) => Ok(false),
    }
}
