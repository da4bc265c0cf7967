//! [`MemState`]: the state in memory (tests, dry runs, the simulator). One lock over all of
//! it: a batch is checked (its fences) before any write, then applied, so it is all or nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use super::{
    Batch, Claim, KnownDocument, Lease, Leases, MAX_KNOWN_DOCUMENTS, Op, PendingChange, Records,
    ResourceRecord, SourceCursor, VersionRecord, WorkItem, WorkQueue, expiry, from_millis, millis,
};
use crate::error::{Error, Result};
use crate::path::RelPath;

/// A queued work item and its claim.
#[derive(Debug, Clone)]
struct Work {
    item: WorkItem,
    holder: Option<String>,
    token: u64,
    expires: i64,
    attempts: u32,
}

#[derive(Debug, Default)]
struct Inner {
    /// Rows by (Source, URI), so that a Source's rows are in URI order.
    resources: BTreeMap<(String, String), ResourceRecord>,
    /// The Source of each URI (a URI has one row).
    source_of: HashMap<String, String>,
    /// The URIs of the rows of each path.
    paths: HashMap<String, BTreeSet<String>>,
    cursors: HashMap<String, SourceCursor>,
    /// The documents remembered per start URL, in (role, URL) order.
    documents: HashMap<String, Vec<KnownDocument>>,
    pending: BTreeMap<(String, String), PendingChange>,
    /// Versions by (Source, URI, number).
    versions: BTreeMap<(String, String, u64), VersionRecord>,
    /// (holder, token, expires in ms) per name.
    leases: HashMap<String, (String, u64, i64)>,
    /// Work items by the order they were queued, and the order of each key.
    work: BTreeMap<u64, Work>,
    work_seq: HashMap<String, u64>,
    next_seq: u64,
}

impl Inner {
    fn remove_resource(&mut self, uri: &str) {
        let Some(source) = self.source_of.remove(uri) else {
            return;
        };
        if let Some(r) = self.resources.remove(&(source, uri.to_owned())) {
            if let Some(uris) = self.paths.get_mut(&r.path) {
                uris.remove(uri);
                if uris.is_empty() {
                    self.paths.remove(&r.path);
                }
            }
        }
    }

    fn put_resource(&mut self, r: &ResourceRecord) {
        self.remove_resource(&r.uri);
        self.source_of.insert(r.uri.clone(), r.source.clone());
        self.paths
            .entry(r.path.clone())
            .or_default()
            .insert(r.uri.clone());
        self.resources
            .insert((r.source.clone(), r.uri.clone()), r.clone());
    }

    /// Whether a lease is held as `l` says at `now`.
    fn holds(&self, l: &Lease, now: i64) -> bool {
        self.leases
            .get(&l.name)
            .is_some_and(|(h, t, exp)| *h == l.holder && *t == l.token && *exp > now)
    }

    /// The queue order of the item of a claim still held at `now`.
    fn held_claim(&self, c: &Claim, now: i64) -> Option<u64> {
        let seq = *self.work_seq.get(&c.item.key)?;
        let w = self.work.get(&seq)?;
        (w.holder.as_deref() == Some(c.holder.as_str()) && w.token == c.token && w.expires > now)
            .then_some(seq)
    }

    /// The last version of a resource.
    fn last_version(&mut self, source: &str, uri: &str) -> Option<&mut VersionRecord> {
        let lo = (source.to_owned(), uri.to_owned(), 0);
        let hi = (source.to_owned(), uri.to_owned(), u64::MAX);
        self.versions.range_mut(lo..=hi).next_back().map(|(_, v)| v)
    }

    /// [`Op::PutVersion`].
    fn put_version(&mut self, v: &VersionRecord) {
        let seq = match self.last_version(&v.source, &v.uri) {
            Some(last) if last.until.is_none() && last.digest == v.digest => return,
            Some(last) => {
                if last.until.is_none() {
                    last.until = Some(v.first_seen);
                }
                last.seq.saturating_add(1)
            }
            None => 1,
        };
        let v = VersionRecord {
            seq,
            until: None,
            deleted: false,
            deleted_datetime: None,
            ..v.clone()
        };
        self.versions
            .insert((v.source.clone(), v.uri.clone(), seq), v);
    }

    fn remove_work(&mut self, seq: u64) {
        if let Some(w) = self.work.remove(&seq) {
            self.work_seq.remove(&w.item.key);
        }
    }
}

/// The state in memory; nothing survives the process.
#[derive(Debug, Default)]
pub struct MemState {
    inner: Mutex<Inner>,
    settled: super::settled::Settled,
}

impl MemState {
    /// An empty state.
    pub fn new() -> Self {
        MemState::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn lost(name: &str, holder: &str) -> Error {
    Error::LeaseLost {
        name: name.to_owned(),
        holder: holder.to_owned(),
    }
}

fn page<K: Ord + Clone, V: Clone>(
    m: &BTreeMap<(String, K), V>,
    source: &str,
    after: Option<K>,
    first: K,
    limit: usize,
) -> Vec<V> {
    let lower = match after {
        Some(a) => Bound::Excluded((source.to_owned(), a)),
        None => Bound::Included((source.to_owned(), first)),
    };
    m.range((lower, Bound::Unbounded))
        .take_while(|((s, _), _)| s == source)
        .take(limit)
        .map(|(_, v)| v.clone())
        .collect()
}

impl Records for MemState {
    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>> {
        let g = self.lock();
        Ok(g.source_of
            .get(uri)
            .and_then(|s| g.resources.get(&(s.clone(), uri.to_owned())))
            .cloned())
    }

    fn in_place(&self) -> bool {
        true
    }

    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        let (uri, seq) = after.unwrap_or(("", 0));
        let lower = Bound::Excluded((source.to_owned(), uri.to_owned(), seq));
        Ok(self
            .lock()
            .versions
            .range((lower, Bound::Unbounded))
            .take_while(|((s, _, _), _)| s == source)
            .take(limit.min(super::MAX_VERSIONS_PAGE))
            .map(|(_, v)| v.clone())
            .collect())
    }

    fn digest_referenced(&self, digest: &str) -> Result<bool> {
        Ok(self.lock().versions.values().any(|v| v.digest == digest))
    }

    fn recorded_totals(&self) -> Result<(u64, u64)> {
        let g = self.lock();
        Ok(g.resources.values().fold((0u64, 0u64), |(n, b), r| {
            (n + 1, b.saturating_add(r.length.unwrap_or(0)))
        }))
    }

    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let g = self.lock();
        Ok(page(
            &g.resources,
            source,
            after.map(str::to_owned),
            String::new(),
            limit,
        ))
    }

    fn has_path(&self, path: &RelPath) -> Result<bool> {
        let path = path.as_str();
        Ok(self.lock().paths.contains_key(path))
    }

    fn path_owner(&self, path: &RelPath) -> Result<Option<String>> {
        let path = path.as_str();
        Ok(self.lock().paths.get(path).and_then(|u| u.first().cloned()))
    }

    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>> {
        Ok(self.lock().cursors.get(source).cloned())
    }

    fn documents(&self, start: &str) -> Result<Vec<KnownDocument>> {
        Ok(self
            .lock()
            .documents
            .get(start)
            .map(|d| d.iter().take(MAX_KNOWN_DOCUMENTS).cloned().collect())
            .unwrap_or_default())
    }

    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>> {
        let g = self.lock();
        Ok(page(
            &g.pending,
            source,
            after.map(str::to_owned),
            String::new(),
            limit,
        ))
    }

    fn apply(&self, batch: &Batch<'_>) -> Result<()> {
        let mut g = self.lock();
        let now = millis(SystemTime::now());
        // Every condition first: the writes below cannot fail.
        for op in batch.ops() {
            match *op {
                Op::Fence(l) if !g.holds(l, now) => return Err(lost(&l.name, &l.holder)),
                Op::CompleteWork(c) if g.held_claim(c, now).is_none() => {
                    return Err(lost(&c.item.key, &c.holder));
                }
                _ => {}
            }
        }
        for op in batch.ops() {
            match *op {
                Op::PutResource(r) => g.put_resource(r),
                Op::RemoveResource(uri) => g.remove_resource(uri),
                Op::SetGone(uri, gone) => {
                    if let Some(s) = g.source_of.get(uri).cloned() {
                        if let Some(r) = g.resources.get_mut(&(s, uri.to_owned())) {
                            r.gone = gone;
                        }
                    }
                }
                Op::PutPending(p) => {
                    g.pending
                        .insert((p.source.clone(), p.uri.clone()), p.clone());
                }
                Op::RemovePending(source, uri) => {
                    g.pending.remove(&(source.to_owned(), uri.to_owned()));
                }
                Op::SetCursor(c) => {
                    g.cursors.insert(c.source.clone(), c.clone());
                }
                Op::SetDocuments(start, docs) => {
                    let mut d = docs.to_vec();
                    d.sort_by(|a, b| (&a.role, &a.url).cmp(&(&b.role, &b.url)));
                    d.dedup_by(|a, b| a.role == b.role && a.url == b.url);
                    if d.is_empty() {
                        g.documents.remove(start);
                    } else {
                        g.documents.insert(start.to_owned(), d);
                    }
                }
                Op::PutVersion(v) => g.put_version(v),
                Op::EndVersion(e) => {
                    if let Some(last) = g.last_version(&e.source, &e.uri) {
                        if last.until.is_none() {
                            last.until = Some(e.at);
                            last.deleted = true;
                            last.deleted_datetime = e.datetime;
                        }
                    }
                }
                Op::RemoveVersion(source, uri, seq) => {
                    g.versions.remove(&(source.to_owned(), uri.to_owned(), seq));
                }
                Op::Fence(_) => {}
                Op::CompleteWork(c) => {
                    if let Some(seq) = g.held_claim(c, now) {
                        g.remove_work(seq);
                    }
                }
            }
        }
        drop(g);
        if batch
            .ops()
            .iter()
            .any(|op| matches!(op, Op::CompleteWork(_)))
        {
            self.settled.bump();
        }
        Ok(())
    }
}

impl Leases for MemState {
    fn lease_source(&self, source: &str, worker: &str, ttl: Duration) -> Result<Option<Lease>> {
        let mut g = self.lock();
        let now = millis(SystemTime::now());
        let token = match g.leases.get(source) {
            Some((h, t, exp)) if h == worker && *exp > now => *t,
            Some((_, _, exp)) if *exp > now => return Ok(None),
            Some((_, t, _)) => t.saturating_add(1),
            None => 1,
        };
        let expires = expiry(now, ttl);
        g.leases
            .insert(source.to_owned(), (worker.to_owned(), token, expires));
        Ok(Some(Lease {
            name: source.to_owned(),
            holder: worker.to_owned(),
            token,
            expires: from_millis(expires),
        }))
    }

    fn release_source(&self, lease: &Lease) -> Result<bool> {
        let mut g = self.lock();
        // Kept, expired, so that the token goes on growing.
        match g.leases.get_mut(&lease.name) {
            Some((h, t, exp)) if *h == lease.holder && *t == lease.token && *exp > 0 => {
                *exp = 0;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

impl WorkQueue for MemState {
    fn add_work(&self, items: &[WorkItem]) -> Result<usize> {
        let mut g = self.lock();
        let mut added = 0;
        for i in items {
            if g.work_seq.contains_key(&i.key) {
                continue;
            }
            g.next_seq += 1;
            let seq = g.next_seq;
            g.work_seq.insert(i.key.clone(), seq);
            g.work.insert(
                seq,
                Work {
                    item: i.clone(),
                    holder: None,
                    token: 0,
                    expires: 0,
                    attempts: 0,
                },
            );
            added += 1;
        }
        Ok(added)
    }

    fn claim_work(&self, worker: &str, n: usize, ttl: Duration) -> Result<Vec<Claim>> {
        let mut g = self.lock();
        let now = millis(SystemTime::now());
        let expires = expiry(now, ttl);
        let mut out = Vec::new();
        for w in g.work.values_mut() {
            if out.len() >= n {
                break;
            }
            if w.holder.is_some() && w.expires > now {
                continue;
            }
            w.holder = Some(worker.to_owned());
            w.token = w.token.saturating_add(1);
            w.expires = expires;
            w.attempts = w.attempts.saturating_add(1);
            out.push(Claim {
                item: w.item.clone(),
                holder: worker.to_owned(),
                token: w.token,
                expires: from_millis(expires),
                attempts: w.attempts,
            });
        }
        Ok(out)
    }

    fn complete(&self, claims: &[Claim]) -> Result<usize> {
        let mut g = self.lock();
        let now = millis(SystemTime::now());
        let mut n = 0;
        for c in claims {
            if let Some(seq) = g.held_claim(c, now) {
                g.remove_work(seq);
                n += 1;
            }
        }
        drop(g);
        if n > 0 {
            self.settled.bump();
        }
        Ok(n)
    }

    fn release(&self, claims: &[Claim]) -> Result<usize> {
        let mut g = self.lock();
        let now = millis(SystemTime::now());
        let mut n = 0;
        for c in claims {
            if let Some(seq) = g.held_claim(c, now) {
                if let Some(w) = g.work.get_mut(&seq) {
                    w.holder = None;
                    w.expires = 0;
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    fn renew_work(&self, claims: &[Claim], ttl: Duration) -> Result<Vec<Claim>> {
        let mut g = self.lock();
        let now = millis(SystemTime::now());
        let expires = expiry(now, ttl);
        let mut out = Vec::new();
        for c in claims {
            if let Some(seq) = g.held_claim(c, now) {
                if let Some(w) = g.work.get_mut(&seq) {
                    w.expires = expires;
                    out.push(Claim {
                        expires: from_millis(expires),
                        ..c.clone()
                    });
                }
            }
        }
        Ok(out)
    }

    fn work_left(&self, source: &str) -> Result<u64> {
        let g = self.lock();
        Ok(g.work.values().filter(|w| w.item.source == source).count() as u64)
    }

    fn wait_drained(&self, source: &str, timeout: Duration) -> Result<bool> {
        self.settled
            .wait_drained(|| self.work_left(source), timeout)
    }
}
