//! Audit (Z39.99-2014 §5.2): coverage and accuracy of the copies against the Source's current
//! state, compiled from its Resource List plus the changes its Change Lists record after the
//! list's `at` (§10.1, §12.1); for a Source without a Resource List, from its Resource Dump's
//! manifests plus the changes of its Change Dump's manifests after the dump's `at`
//! (Z39.99-2017 §5.2; module `dump::list`).
//!
//! The copies are what is on disk: each is measured and hashed (with the algorithms the Source
//! publishes for it), and compared with the Source's description by the diff engine's rule
//! ([`resourcesync_diff::needs_update`]). Files under DEST that no resource maps to are extra.
//! Nothing is fetched but documents, and nothing is written.
//!
//! How, in one pass over each input:
//!
//! - DEST is walked once (`readdir` and one `statx` per file, relative to the directory, never
//!   following a symbolic link) on a thread of its own while the Source's documents are fetched
//!   and read; the walk is a map from path to size, at most [`WALK_MAX_FILES`] files (past that
//!   each copy is looked up on disk by its path instead, in bounded memory).
//! - The Source's list is kept in memory, by URI, up to about [`LIST_MEMORY_BYTES`]; a larger
//!   list (an index of a million entries) goes to a scratch SQLite database, read back a page
//!   at a time.
//! - The state's rows of the Source and the list are merged in URI order (both sorted, no lookup
//!   per entry); each row's path and each entry's path claims its file in the walk. Copies that
//!   must be hashed are read on every core, [`CHUNK`] steps of the merge at a time.
//! - What the walk holds that nothing claimed, and no row of another Source names, is extra.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use resourcesync_model::Capability;

use crate::discover::discover;
use crate::discover::docs::{DocFetcher, walk};
use crate::dump::DumpLimits;
use crate::dump::list::manifests;
use crate::error::{Error, Result};
use crate::http::Http;
use crate::mapping::{UriMapper, base_url};
use crate::options::{AuditOptions, default_state_path};
use crate::ports::Ports;
use crate::report::SourceInfo;
use crate::report::{AuditReport, Observer};

mod compare;
pub(crate) mod copies;
mod list;

use compare::{Compare, rows_ahead};
use copies::{Copies, walk_tree};
use list::{List, Sink};
/// About the most bytes of the Source's list held in memory (estimated); a larger list goes to
/// a scratch database on disk.
pub const LIST_MEMORY_BYTES: usize = 24 << 20;
/// Most files under DEST held in memory by the walk (about 100 bytes each); past it each copy
/// is looked up on disk by its path.
pub const WALK_MAX_FILES: usize = 250_000;
/// Steps of the merge whose copies are measured together (on every core when they are hashed).
pub const CHUNK: usize = 1024;
/// Rows and entries read from a database at a time.
const PAGE: usize = 1000;

/// The memory bounds of an audit (tests use small ones to take the on-disk paths).
#[derive(Debug, Clone, Copy)]
struct Limits {
    list_bytes: usize,
    walk_files: usize,
}

const LIMITS: Limits = Limits {
    list_bytes: LIST_MEMORY_BYTES,
    walk_files: WALK_MAX_FILES,
};

/// Stops a walk of DEST when the audit ends first (an error, the time limit).
/// What an audit compares the copies with.
enum Against {
    /// The Resource List.
    List(String),
    /// The manifests of the Resource Dump's packages (a Source without a Resource List).
    Dump(String),
}

struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Audits a destination directory against a Source (see the module docs).
pub async fn audit(opts: &AuditOptions, obs: Arc<dyn Observer>) -> Result<AuditReport> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, audit_inner(opts, obs, LIMITS))
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => audit_inner(opts, obs, LIMITS).await,
    }
}

/// Audits the copies in `ports` against a Source (see the module docs): the engine of
/// [`audit()`], on the ports a caller gives ([`crate::Destination::audit`]).
pub(crate) async fn audit_ports(
    ports: &Ports,
    opts: &AuditOptions,
    obs: Arc<dyn Observer>,
) -> Result<AuditReport> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, audit_with(ports, None, opts, obs, LIMITS))
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => audit_with(ports, None, opts, obs, LIMITS).await,
    }
}

async fn audit_inner(
    opts: &AuditOptions,
    obs: Arc<dyn Observer>,
    limits: Limits,
) -> Result<AuditReport> {
    if !opts.dest.is_dir() {
        return Err(crate::error::not_a_directory(
            &opts.dest,
            "nothing to audit (sync into it first, or give the directory the copy is in)",
        ));
    }
    let (ports, no_state) = open_ports(opts)?;
    audit_with(&ports, no_state, opts, obs, limits).await
}

/// The audit of the copies in `ports` (see the module docs). `no_state`: the warning to give
/// when the state was not found.
async fn audit_with(
    ports: &Ports,
    no_state: Option<String>,
    opts: &AuditOptions,
    obs: Arc<dyn Observer>,
    limits: Limits,
) -> Result<AuditReport> {
    let started = Instant::now();
    // The listing of the copies needs nothing from the Source: it runs while the documents
    // are fetched and read.
    let cancel = Arc::new(AtomicBool::new(false));
    let _cancel = CancelOnDrop(cancel.clone());
    let store = ports.store.clone();
    let walking =
        tokio::task::spawn_blocking(move || walk_tree(store.as_ref(), limits.walk_files, &cancel));
    let http = Arc::new(Http::new(opts.http.clone())?);
    let scratch = &ports.scratch;
    let fetcher = DocFetcher {
        http,
        dir: scratch.clone(),
        max_bytes: opts.max_document_bytes,
    };
    obs.phase("discovery");
    let info = discover(&fetcher, &opts.url, opts.set.as_deref()).await?;
    let mut warnings = info.warnings.clone();
    let against = against(opts, &info)?;
    let base = base_url(
        opts.base_url.as_deref(),
        info.description.as_deref(),
        info.capability_list.as_deref(),
        match &against {
            Against::List(u) | Against::Dump(u) => u,
        },
    );
    let mapper = UriMapper::new(&base)?;
    // The state's rows of this Source are read while the list is.
    let state = ports.state.clone();
    let rows = rows_ahead(state.clone(), info.key());
    let sink = Sink {
        list: List::new(),
        scratch: scratch.clone(),
        max_bytes: limits.list_bytes,
        mapper,
        since: None,
    };
    let mut list = read_published(&fetcher, &obs, &info, &against, sink, &mut warnings).await?;
    list.finish()?;
    warnings.extend(no_state);
    let resources = list.count()?;
    obs.add_total(resources);
    obs.phase("comparing");
    let tree = walking.await??;
    let store = ports.store.clone();
    let obs2 = obs.clone();
    let fast = opts.fast;
    let own_state = copies::state_key(
        &opts.dest,
        &opts
            .state
            .clone()
            .unwrap_or_else(|| default_state_path(&opts.dest)),
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let found = tokio::task::spawn_blocking(move || {
        let copies = match tree {
            Some(t) => Copies::Walked(t, store.as_ref()),
            None => Copies::OnDisk(store.as_ref()),
        };
        let compare = Compare {
            state: state.as_ref(),
            obs: obs2.as_ref(),
            fast,
            threads,
            own_state,
        };
        compare.run(&mut list, copies, |_| {
            rows.recv()
                .unwrap_or_else(|_| Err(Error::Task("the reader of the state stopped".into())))
        })
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

/// The list audited against: the Resource List, else the Resource Dump's manifests
/// (Z39.99-2017 §5.2; crate::dump::list).
fn against(opts: &AuditOptions, info: &SourceInfo) -> Result<Against> {
    match (&info.resource_list, &info.resource_dump) {
        (Some(rl), _) => Ok(Against::List(rl.clone())),
        (None, Some(rd)) => Ok(Against::Dump(rd.clone())),
        (None, None) => {
            let offers = if info.offered.is_empty() {
                "nothing".to_owned()
            } else {
                info.offered.join(", ")
            };
            Err(Error::BadDocument {
                url: info
                    .capability_list
                    .clone()
                    .unwrap_or_else(|| opts.url.clone()),
                message: format!(
                    "the Source offers no Resource List and no Resource Dump to audit against \
                     (it lists: {offers}; Z39.99-2014 §5.2): tell the Source's maintainer"
                ),
            })
        }
    }
}

/// The copies in DEST and the state database, read only; without one, an empty one and the
/// warning that says so.
fn open_ports(opts: &AuditOptions) -> Result<(Ports, Option<String>)> {
    let state_path = opts
        .state
        .clone()
        .unwrap_or_else(|| default_state_path(&opts.dest));
    let (ports, found) = Ports::directory_read_only(&opts.dest, &state_path)?;
    let warning = (!found).then(|| {
        format!(
            "no state database at {}: every copy is measured as found",
            state_path.display()
        )
    });
    Ok((ports, warning))
}

/// What the Source publishes: the list audited against, then the later changes (Z39.99-2014
/// §5.2: "compiled on the basis of a Resource List and Change Lists").
async fn read_published(
    fetcher: &DocFetcher,
    obs: &Arc<dyn Observer>,
    info: &SourceInfo,
    against: &Against,
    sink: Sink,
    warnings: &mut Vec<String>,
) -> Result<List> {
    let (mut sink, at) = match against {
        Against::List(rl) => {
            obs.phase("reading the Resource List");
            let (sink, rl_info) = walk(fetcher, rl, Capability::ResourceList, sink).await?;
            warnings.extend(rl_info.warnings);
            (sink, rl_info.top.md.as_ref().and_then(|m| m.at))
        }
        Against::Dump(rd) => {
            obs.phase("reading the Resource Dump's manifests");
            let dl = DumpLimits::default();
            let (mut sink, at) = manifests(fetcher, obs, rd, None, &dl, sink, warnings).await?;
            // Z39.99-2014 §13.2: the changes after the dump's `at`, from the Change Dump.
            if let (Some(cd), Some(at)) = (&info.change_dump, at) {
                obs.phase("reading the Change Dump's manifests");
                sink.since = Some(at);
                sink = manifests(fetcher, obs, cd, Some(at), &dl, sink, warnings)
                    .await?
                    .0;
            }
            (sink, at)
        }
    };
    if let (Some(cl), Some(at)) = (&info.change_list, at) {
        obs.phase("reading the Change Lists");
        sink.since = Some(at);
        let (s, i) = walk(fetcher, cl, Capability::ChangeList, sink).await?;
        sink = s;
        warnings.extend(i.warnings);
    }
    Ok(sink.list)
}

#[cfg(test)]
mod tests;
