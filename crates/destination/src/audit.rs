//! Audit (Z39.99-2014 §5.2): coverage and accuracy of the copies against the Source's current
//! state, compiled from its Resource List plus the changes its Change Lists record after the
//! list's `at` (§10.1, §12.1).
//!
//! The copies are what is on disk: each is measured and hashed (with the algorithms the Source
//! publishes for it), and compared by the diff engine ([`resourcesync_diff::diff_sorted`],
//! [`resourcesync_diff::needs_update`]) with the Source's description. Files under DEST that no
//! resource maps to are extra. Nothing is fetched but documents, and nothing is written.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use resourcesync_diff::{Action, Difference, Item, diff_sorted, needs_update};
use resourcesync_model::{Capability, Change, Entry, HashAlg, W3cDateTime};
use resourcesync_store::{FsStore, RelPath, SqliteState, StateStore, Store};

use crate::discover::discover;
use crate::docs::{DocFetcher, ListSink, walk};
use crate::error::{Error, Result};
use crate::http::Http;
use crate::mapping::{UriMapper, base_url};
use crate::options::{AuditOptions, default_state_path};
use crate::report::{AuditDifference, AuditReport, Observer, push_capped};
use crate::staging::{StagedItem, Staging};

struct Sink {
    staging: Staging,
    mapper: UriMapper,
    /// For changes: entries at or before it are already in the Resource List.
    since: Option<W3cDateTime>,
}

impl Sink {
    fn put(&mut self, e: &Entry) -> Result<()> {
        let mut it = StagedItem::from_entry(e);
        it.path = self.mapper.map(&e.loc).ok().map(|p| p.to_string());
        self.staging.upsert(&it)
    }
}

impl ListSink for Sink {
    fn entry(&mut self, e: Entry) -> Result<()> {
        let Some(since) = self.since else {
            return self.put(&e);
        };
        if e.change_time()
            .is_some_and(|t| t.cmp_instant(&since) != std::cmp::Ordering::Greater)
        {
            return Ok(());
        }
        match e.change() {
            Some(Change::Deleted) => self.staging.remove(&e.loc),
            Some(Change::Created | Change::Updated) => self.put(&e),
            _ => Ok(()),
        }
    }
}

fn why(d: Difference) -> &'static str {
    match d {
        Difference::Length => "length",
        Difference::Digest => "digest",
        Difference::Lastmod => "lastmod",
    }
}

#[derive(Default)]
struct Found {
    in_sync: u64,
    missing: Vec<AuditDifference>,
    extra: Vec<AuditDifference>,
    different: Vec<AuditDifference>,
    missing_count: u64,
    extra_count: u64,
    different_count: u64,
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

/// The copy as it is on disk: its length, its digests in the algorithms the Source publishes
/// for it, and the `<lastmod>` recorded when it was fetched.
fn local_item(
    store: &FsStore,
    uri: &str,
    rel: &RelPath,
    algs: &[HashAlg],
    lastmod: Option<W3cDateTime>,
) -> Result<Option<Item>> {
    let Some(m) = store.stat(rel)? else {
        return Ok(None);
    };
    if !m.is_file {
        return Ok(None);
    }
    let (length, hashes) = if algs.is_empty() {
        (m.length, Default::default())
    } else {
        store.hash(rel, algs)?
    };
    Ok(Some(Item {
        uri: uri.to_owned(),
        length: Some(length),
        lastmod,
        hashes,
    }))
}

/// The staged entries in URI order, read a page at a time, for a merge with the state rows.
struct Cursor<'a> {
    staging: &'a Staging,
    buf: VecDeque<StagedItem>,
    after: Option<String>,
    done: bool,
}

impl<'a> Cursor<'a> {
    fn new(staging: &'a Staging) -> Self {
        Cursor {
            staging,
            buf: VecDeque::new(),
            after: None,
            done: false,
        }
    }

    /// The entry of `uri`, if staged; `uri`s must come in increasing order.
    fn seek(&mut self, uri: &str) -> Result<Option<&StagedItem>> {
        loop {
            while self.buf.front().is_some_and(|s| s.uri.as_str() < uri) {
                self.buf.pop_front();
            }
            if !self.buf.is_empty() || self.done {
                break;
            }
            let page = self.staging.page_by_uri(self.after.as_deref(), 1000)?;
            self.done = page.is_empty();
            self.after = page.last().map(|s| s.uri.clone());
            self.buf.extend(page);
        }
        Ok(self.buf.front().filter(|s| s.uri == uri))
    }
}

fn compare(
    key: &str,
    store: &FsStore,
    state: &dyn StateStore,
    staging: &Staging,
    obs: &dyn Observer,
    dest_exists: bool,
    fast: bool,
) -> Result<Found> {
    let mut found = Found::default();
    let mut err: Option<Error> = None;
    let mut s_err: Option<Error> = None;
    let mut published = Cursor::new(staging);
    {
        // The copies: rows of the state whose file is on disk, measured now.
        let mut after: Option<String> = None;
        let mut buf: VecDeque<Item> = VecDeque::new();
        let mut done = false;
        let mut rows = std::iter::from_fn(|| {
            loop {
                if let Some(i) = buf.pop_front() {
                    return Some(i);
                }
                if done || err.is_some() {
                    return None;
                }
                let page = match state.resources_page(key, after.as_deref(), 1000) {
                    Ok(p) => p,
                    Err(e) => {
                        err = Some(e.into());
                        return None;
                    }
                };
                done = page.is_empty();
                after = page.last().map(|r| r.uri.clone());
                for r in page {
                    let Ok(rel) = RelPath::parse(&r.path) else {
                        continue;
                    };
                    // The Source's entry for this row, found by walking the staged list
                    // alongside the rows (both in URI order) instead of a lookup per row.
                    let staged = match published.seek(&r.uri) {
                        Ok(s) => s,
                        Err(e) => {
                            err = Some(e);
                            return None;
                        }
                    };
                    let algs = match staged {
                        Some(s) if !fast => s.hashes.known_algs(),
                        _ => Vec::new(),
                    };
                    let measured = local_item(store, &r.uri, &rel, &algs, r.lastmod).map(|i| {
                        // Fast mode: the digests recorded when the copy was written stand for
                        // its content, which is not read.
                        i.map(|mut i| {
                            if fast {
                                i.hashes = r.hashes.clone();
                            }
                            i
                        })
                    });
                    match measured {
                        Ok(Some(i)) => buf.push_back(i),
                        Ok(None) => {}
                        Err(e) => {
                            err = Some(e);
                            return None;
                        }
                    }
                }
            }
        });
        let mut s_after: Option<String> = None;
        let mut s_buf: VecDeque<StagedItem> = VecDeque::new();
        let mut s_done = false;
        let source = std::iter::from_fn(|| {
            loop {
                if let Some(i) = s_buf.pop_front() {
                    return Some(i.item());
                }
                if s_done {
                    return None;
                }
                match staging.page_by_uri(s_after.as_deref(), 1000) {
                    Ok(p) => {
                        s_done = p.is_empty();
                        s_after = p.last().map(|r| r.uri.clone());
                        s_buf.extend(p);
                    }
                    Err(e) => {
                        s_err = Some(e);
                        s_done = true;
                    }
                }
            }
        });
        let path_of =
            |uri: &str| -> Option<String> { staging.get(uri).ok().flatten().and_then(|s| s.path) };
        for action in diff_sorted(&mut rows, source) {
            obs.resource_done();
            match action {
                Action::Same(_) => found.in_sync += 1,
                Action::Update {
                    original, why: w, ..
                } => found.different(AuditDifference {
                    path: path_of(&original.uri),
                    uri: original.uri,
                    why: why(w).into(),
                }),
                Action::Delete(copy) => {
                    let path = state.resource(&copy.uri).ok().flatten().map(|r| r.path);
                    found.extra(AuditDifference {
                        uri: copy.uri,
                        path,
                        why: "not at the Source".into(),
                    });
                }
                Action::Create(original) => {
                    let Some(path) = path_of(&original.uri) else {
                        found.missing(AuditDifference {
                            uri: original.uri,
                            path: None,
                            why: "no safe path under the destination".into(),
                        });
                        continue;
                    };
                    // A file may be in place without a row (copied by other means, or a run killed
                    // between the rename and the row): measure it.
                    let rel = RelPath::parse(&path)?;
                    let algs = original.hashes.known_algs();
                    match local_item(store, &original.uri, &rel, &algs, None)? {
                        None => found.missing(AuditDifference {
                            uri: original.uri,
                            path: Some(path),
                            why: "no copy".into(),
                        }),
                        Some(local) => match needs_update(&local, &original) {
                            None => found.in_sync += 1,
                            Some(w) => found.different(AuditDifference {
                                uri: original.uri,
                                path: Some(path),
                                why: why(w).into(),
                            }),
                        },
                    }
                }
            }
        }
    }
    if let Some(e) = err.take().or(s_err.take()) {
        return Err(e);
    }
    // Files no resource maps to.
    if dest_exists {
        let mut list_err: Option<Error> = None;
        store.list(&mut |r| {
            match r {
                Ok((rel, _)) => {
                    let staged = match staging.has_path(rel.as_str()) {
                        Ok(b) => b,
                        Err(e) => {
                            list_err.get_or_insert(e);
                            true
                        }
                    };
                    if !staged && !state.has_path(rel.as_str())? {
                        found.extra(AuditDifference {
                            uri: String::new(),
                            path: Some(rel.to_string()),
                            why: "no resource maps to this file".into(),
                        });
                    }
                }
                Err(e) => found.extra(AuditDifference {
                    uri: String::new(),
                    path: None,
                    why: e.to_string(),
                }),
            }
            Ok(())
        })?;
        if let Some(e) = list_err {
            return Err(e);
        }
    }
    Ok(found)
}

/// Audits a destination directory against a Source (see the module docs).
pub async fn audit(opts: &AuditOptions, obs: Arc<dyn Observer>) -> Result<AuditReport> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, audit_inner(opts, obs))
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => audit_inner(opts, obs).await,
    }
}

async fn audit_inner(opts: &AuditOptions, obs: Arc<dyn Observer>) -> Result<AuditReport> {
    let started = Instant::now();
    let http = Arc::new(Http::new(opts.http.clone())?);
    let scratch =
        tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?;
    let fetcher = DocFetcher {
        http,
        dir: scratch.path().to_path_buf(),
        max_bytes: opts.max_document_bytes,
    };
    obs.phase("discovery");
    let info = discover(&fetcher, &opts.url, opts.set.as_deref()).await?;
    let mut warnings = info.warnings.clone();
    let rl = info
        .resource_list
        .clone()
        .ok_or_else(|| Error::BadDocument {
            url: info
                .capability_list
                .clone()
                .unwrap_or_else(|| opts.url.clone()),
            message: "the Source offers no Resource List to audit against".into(),
        })?;
    let base = base_url(
        opts.base_url.as_deref(),
        info.description.as_deref(),
        info.capability_list.as_deref(),
        &rl,
    );
    let mapper = UriMapper::new(&base)?;
    obs.phase("reading the Resource List");
    let sink = Sink {
        staging: Staging::create(scratch.path())?,
        mapper: mapper.clone(),
        since: None,
    };
    let (mut sink, rl_info) = walk(&fetcher, &rl, Capability::ResourceList, sink).await?;
    warnings.extend(rl_info.warnings);
    // Later changes (Z39.99-2014 §5.2: "compiled on the basis of a Resource List and Change
    // Lists").
    if let (Some(cl), Some(at)) = (
        &info.change_list,
        rl_info.top.md.as_ref().and_then(|m| m.at),
    ) {
        obs.phase("reading the Change Lists");
        sink.since = Some(at);
        match walk(&fetcher, cl, Capability::ChangeList, sink).await {
            Ok((s, i)) => {
                sink = s;
                warnings.extend(i.warnings);
            }
            Err(e) => {
                return Err(e);
            }
        }
    }
    sink.staging.flush()?;
    let staging = sink.staging;
    let resources = staging.count()?;
    obs.add_total(resources);
    obs.phase("comparing");
    let state_path = opts
        .state
        .clone()
        .unwrap_or_else(|| default_state_path(&opts.dest));
    let state: Arc<dyn StateStore> = match SqliteState::open_existing(&state_path)? {
        Some(s) => Arc::new(s),
        None => {
            warnings.push(format!(
                "no state database at {}: every copy is measured as found",
                state_path.display()
            ));
            Arc::new(SqliteState::in_memory()?)
        }
    };
    let dest_exists = opts.dest.is_dir();
    let store = FsStore::existing(&opts.dest);
    let obs2 = obs.clone();
    let key = info.key();
    let fast = opts.fast;
    let found = tokio::task::spawn_blocking(move || {
        compare(
            &key,
            &store,
            state.as_ref(),
            &staging,
            obs2.as_ref(),
            dest_exists,
            fast,
        )
    })
    .await??;
    for w in &warnings {
        obs.warning(w);
    }
    let in_sync = found.missing_count == 0 && found.extra_count == 0 && found.different_count == 0;
    Ok(AuditReport {
        source: info,
        base_url: base,
        resources,
        in_sync_count: found.in_sync,
        missing: found.missing,
        extra: found.extra,
        different: found.different,
        missing_count: found.missing_count,
        extra_count: found.extra_count,
        different_count: found.different_count,
        in_sync,
        seconds: started.elapsed().as_secs_f64(),
        warnings,
    })
}
