//! Applying packages: each manifest entry planned, extracted (by several threads for a Resource
//! Dump package) and settled in manifest order, the copies handed to the committer in batches.

use std::fs::File;
use std::sync::Arc;

use resourcesync_model::package::{DumpLimits, patch_path};
use resourcesync_model::{Capability, Change, DocumentReader, Entry, W3cDateTime};
use resourcesync_store::PendingChange;

use crate::commit::{Done, MAX_BATCH, Pending, Producer, Write, not_recorded};
use crate::discover::docs::DocFetcher;
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::outcome::DumpStats;
use crate::plan::staging::StagedItem;
use crate::report::{Failure, push_capped};

use super::download::download_package;
use super::extract::{Applied, Plan, delete, extract, extract_job, extract_patch, plan};
use super::package::{Extractor, Package, manifest_opts, open_package};
use super::{Told, warn};

/// Second pass over the manifest: applies its entries in order (entries at or before `cursor`
/// are skipped, for Change Dumps). Entry failures are warnings.
pub(super) fn apply_package(
    ctx: &Ctx,
    pkg: &mut Package,
    cursor: Option<W3cDateTime>,
    fresh: bool,
    told: &mut Told,
) -> Result<()> {
    for n in std::mem::take(&mut pkg.notes) {
        told.warn(n);
    }
    let fh = File::open(&pkg.manifest).map_err(|e| Error::io("reading a manifest", e))?;
    let mut r = DocumentReader::new(fh, manifest_opts(&pkg.url, pkg.max_document_bytes))?;
    let change_dump = pkg.header.capability() == Some(&Capability::ChangeDumpManifest);
    let threads = extract_threads();
    if !change_dump && cursor.is_none() && threads > 0 {
        // A Resource Dump: no deletes, no patches, every entry on its own.
        return apply_parallel(ctx, pkg, &mut r, threads, fresh, told);
    }
    let mut batch = Batch::new(ctx)?;
    let mut nth = 0usize;
    while let Some(e) = r.next_entry()? {
        nth += 1;
        if let (Some(c), Some(t)) = (&cursor, e.change_time()) {
            if t.cmp_instant(c) != std::cmp::Ordering::Greater {
                continue;
            }
        }
        if let Some(t) = e.change_time() {
            if told
                .stats
                .last
                .is_none_or(|l| t.cmp_instant(&l) == std::cmp::Ordering::Greater)
            {
                told.stats.last = Some(*t);
            }
        }
        ctx.ports.obs.add_total(1);
        let item = StagedItem::from_entry(&e);
        if let Some(why) = pkg.refused.get(&nth) {
            let res = Err(Error::Package {
                url: pkg.url.clone(),
                message: why.clone(),
            });
            settle(ctx, &mut batch, &pkg.url, item, res, told)?;
            continue;
        }
        let path = e.md.as_ref().and_then(|m| m.path.clone());
        let patch = patch_path(&e)
            .filter(|_| change_dump && e.change() == Some(&Change::Updated))
            .map(str::to_owned);
        let res = match (change_dump, e.change(), path) {
            (true, Some(Change::Deleted), _) => {
                // Earlier entries first: the copy a delete removes may be in the batch.
                batch.flush(ctx, &pkg.url, told)?;
                delete(ctx, &e.loc)
            }
            // The whole bitstream first (nothing to trust but its digests); the patch when
            // there is none or it fails (Z39.99-2014 §14.4).
            (_, _, Some(p)) => match (extract_caught(ctx, pkg, &e, &p, fresh), patch) {
                (Err(err), Some(pp)) => {
                    batch.flush(ctx, &pkg.url, told)?;
                    extract_patch(ctx, pkg, &e, &pp).map_err(|why| Error::Package {
                        url: pkg.url.clone(),
                        message: format!("{err}; its patch: {why}"),
                    })
                }
                (r, _) => r,
            },
            (_, _, None) => match patch {
                Some(pp) => {
                    // The patch applies to the copy as recorded: earlier entries first.
                    batch.flush(ctx, &pkg.url, told)?;
                    extract_patch(ctx, pkg, &e, &pp).map_err(|why| Error::Package {
                        url: pkg.url.clone(),
                        message: format!("{}: patch: {why}", e.loc),
                    })
                }
                None => Ok(Applied::Skipped),
            },
        };
        settle(ctx, &mut batch, &pkg.url, item, res, told)?;
    }
    batch.flush(ctx, &pkg.url, told)
}

/// [`extract`], where a panic (a bug: nothing known panics there) is that entry's error, as on
/// the extracting threads of [`apply_parallel`], instead of ending the whole run.
pub(super) fn extract_caught(
    ctx: &Ctx,
    pkg: &mut Package,
    e: &Entry,
    path: &str,
    fresh: bool,
) -> Result<Applied> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        extract(ctx, pkg, e, path, fresh)
    }))
    .unwrap_or_else(|_| Err(Error::Task("extracting this entry panicked".into())))
}

/// What one manifest entry came to, taken into account: a verified copy goes to the batch, a
/// failure to [`entry_failed`].
pub(super) fn settle(
    ctx: &Ctx,
    batch: &mut Batch,
    url: &str,
    item: StagedItem,
    res: Result<Applied>,
    told: &mut Told,
) -> Result<()> {
    ctx.ports.obs.resource_done();
    match res {
        Ok(Applied::Verified { pending, update }) => {
            batch.push(*pending, item, update)?;
            return batch.receive(ctx, url, told, false);
        }
        Ok(Applied::Unchanged) => told.stats.unchanged += 1,
        Ok(Applied::Deleted) => told.stats.deleted += 1,
        Ok(Applied::Skipped) => return Ok(()),
        Err(err) => {
            let msg = match err {
                Error::Package { message, .. } => message,
                other => other.to_string(),
            };
            return entry_failed(ctx, url, item, msg, told);
        }
    }
    note_dumped(ctx, &item.uri)
}

/// A manifest entry that could not be applied. Where the lists fetch what the packages leave
/// out ([`DumpStats::lists`]), a warning: the resource is fetched on its own. Otherwise a
/// failure of the run, kept as pending (with what the manifest publishes of it) for the next
/// run, which fetches it from its URI (or applies a newer package: see [`crate::dump::only`]).
pub(super) fn entry_failed(
    ctx: &Ctx,
    url: &str,
    item: StagedItem,
    msg: String,
    told: &mut Told,
) -> Result<()> {
    told.stats.failed += 1;
    let msg = if msg.contains(&item.uri) {
        msg
    } else {
        format!("{}: {msg}", item.uri)
    };
    if told.stats.lists {
        told.warn(format!(
            "package {url}: {msg}: left to the lists, which fetch it on its own"
        ));
        return Ok(());
    }
    told.stats.run_failed += 1;
    let error = format!(
        "package {url}: {msg}; the Source offers no list to fetch it from instead: kept as \
         pending, the next sync tries again (from its URI, or from a newer package)"
    );
    if !ctx.dry_run {
        let p = PendingChange {
            source: ctx.key.clone(),
            uri: item.uri.clone(),
            change: item.change.clone().or(Some(Change::Updated)),
            length: item.length,
            hashes: item.hashes.clone(),
            lastmod: item.lastmod,
            duplicates: item.duplicates.clone(),
            error: error.clone(),
        };
        ctx.ports
            .committer
            .write_blocking(vec![Write::Pending(p)])
            .map_err(not_recorded)?;
    }
    let path = ctx.mapper.map(&item.uri).ok().map(|r| r.to_string());
    // Dealt with: the pending changes retried in this run leave it alone.
    note_dumped(ctx, &item.uri)?;
    push_capped(
        &mut told.stats.failures,
        Failure::new(item.uri, path, error),
    );
    Ok(())
}

/// Manifest entries handed to an extracting thread at once.
pub(super) const JOB_CHUNK: usize = 64;

/// How many threads extract the bitstreams of a Resource Dump package (the one reading the
/// manifest aside): one per core, at most 4; none (the reading thread extracts) on one core.
pub(super) fn extract_threads() -> usize {
    if cfg!(not(any(unix, windows))) {
        // No positional reads: the package file has one position.
        return 0;
    }
    match std::thread::available_parallelism().map_or(1, usize::from) {
        0 | 1 => 0,
        n => n.min(4),
    }
}

/// A chunk of manifest entries and what to do with each.
type Jobs = Vec<(StagedItem, Result<Plan>)>;
/// What came of a chunk of entries.
type Outcomes = Vec<(StagedItem, Result<Applied>)>;

/// What to do with the manifest entry `e`: its failure when refused on its own (`refused`:
/// an unsafe path, a ZIP entry refused, no path), else [`plan`].
fn plan_entry(
    ctx: &Ctx,
    refused: Option<String>,
    url: &str,
    e: &Entry,
    fresh: bool,
) -> Result<Plan> {
    match (refused, e.md.as_ref().and_then(|m| m.path.as_deref())) {
        (None, Some(path)) => plan(ctx, url, e, path, fresh),
        (why, _) => Err(Error::Package {
            url: url.to_owned(),
            message: why.unwrap_or_else(|| format!("{}: no path", e.loc)),
        }),
    }
}

/// An extracting thread: takes chunks of jobs until there are none, extracts each bitstream,
/// sends the outcomes back with their chunk's number.
fn extract_worker(
    ctx: &Ctx,
    ex: &mut Extractor,
    job_rx: &std::sync::Mutex<std::sync::mpsc::Receiver<(u64, Jobs)>>,
    out_tx: &std::sync::mpsc::Sender<(u64, Outcomes)>,
) {
    loop {
        let next = match job_rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((seq, jobs)) = next else {
            return;
        };
        let out = jobs
            .into_iter()
            .map(|(item, p)| {
                let res = p.and_then(|p| match p {
                    Plan::Unchanged => Ok(Applied::Unchanged),
                    Plan::Filtered => Ok(Applied::Skipped),
                    // A panic here would leave its chunk unanswered and `apply_parallel`
                    // waiting for it: it is that entry's error instead.
                    Plan::Extract(job) => {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            extract_job(ctx, ex, *job)
                        }))
                        .unwrap_or_else(|_| {
                            Err(Error::Task("extracting this entry panicked".into()))
                        })
                    }
                });
                (item, res)
            })
            .collect();
        if out_tx.send((seq, out)).is_err() {
            return;
        }
    }
}

/// [`apply_package`] for a Resource Dump package with `threads` extracting threads: this one
/// reads the manifest and decides what to do with each entry ([`plan`]); the others inflate
/// and verify the bitstreams, chunks of [`JOB_CHUNK`] entries at a time; their outcomes are
/// taken into account here in manifest order, as one thread would have.
pub(super) fn apply_parallel(
    ctx: &Ctx,
    pkg: &mut Package,
    r: &mut DocumentReader<File>,
    threads: usize,
    fresh: bool,
    told: &mut Told,
) -> Result<()> {
    let url = pkg.url.clone();
    let mut batch = Batch::new(ctx)?;
    std::thread::scope(|scope| -> Result<()> {
        let (job_tx, job_rx) = std::sync::mpsc::sync_channel::<(u64, Jobs)>(threads * 2);
        let job_rx = Arc::new(std::sync::Mutex::new(job_rx));
        let (out_tx, out_rx) = std::sync::mpsc::channel::<(u64, Outcomes)>();
        for _ in 0..threads {
            let mut ex = pkg.ex.fork();
            let (job_rx, out_tx) = (job_rx.clone(), out_tx.clone());
            scope.spawn(move || extract_worker(ctx, &mut ex, &job_rx, &out_tx));
        }
        drop(out_tx);
        // Chunks sent, and outcomes taken into account (in order), counted in chunks.
        let (mut sent, mut settled) = (0u64, 0u64);
        let mut early: std::collections::BTreeMap<u64, Outcomes> = Default::default();
        let mut take =
            |wait: bool, settled: &mut u64, batch: &mut Batch, told: &mut Told| -> Result<()> {
                let got = if wait {
                    Some(
                        out_rx
                            .recv()
                            .map_err(|_| Error::Task("an extracting thread has stopped".into()))?,
                    )
                } else {
                    out_rx.try_recv().ok()
                };
                if let Some((seq, out)) = got {
                    early.insert(seq, out);
                }
                while let Some(out) = early.remove(settled) {
                    *settled += 1;
                    for (item, res) in out {
                        settle(ctx, batch, &url, item, res, told)?;
                    }
                }
                Ok(())
            };
        let mut chunk = Vec::with_capacity(JOB_CHUNK);
        let mut more = true;
        let mut nth = 0usize;
        while more {
            match r.next_entry()? {
                Some(e) => {
                    nth += 1;
                    ctx.ports.obs.add_total(1);
                    let p = plan_entry(ctx, pkg.refused.get(&nth).cloned(), &url, &e, fresh);
                    chunk.push((StagedItem::from_entry(&e), p));
                    if chunk.len() < JOB_CHUNK {
                        continue;
                    }
                }
                None => more = false,
            }
            if chunk.is_empty() {
                continue;
            }
            // At most two chunks per thread waiting or being extracted.
            while sent - settled >= (threads * 2) as u64 {
                take(true, &mut settled, &mut batch, told)?;
            }
            let jobs = std::mem::replace(&mut chunk, Vec::with_capacity(JOB_CHUNK));
            job_tx
                .send((sent, jobs))
                .map_err(|_| Error::Task("the extracting threads have stopped".into()))?;
            sent += 1;
            take(false, &mut settled, &mut batch, told)?;
        }
        drop(job_tx);
        while settled < sent {
            take(true, &mut settled, &mut batch, told)?;
        }
        Ok(())
    })?;
    batch.flush(ctx, &url, told)
}

/// Remembers that a dump package put this URI's copy in place during this run.
pub(super) fn note_dumped(ctx: &Ctx, uri: &str) -> Result<()> {
    if let Some(d) = &ctx.memo.dumped {
        d.lock()
            .map_err(|_| Error::Task("staging lock poisoned".into()))?
            .upsert(&StagedItem {
                uri: uri.to_owned(),
                ..StagedItem::default()
            })?;
    }
    Ok(())
}

/// Copies in a chunk handed to the committer at once.
pub(super) const CHUNK: usize = 256;
/// Most chunks handed to the committer and not yet answered (bounds the temporary files and
/// the memory a package holds while the committer is behind): room for the batch being
/// recorded and the one filling, since the committer fills a batch before it commits it.
pub(super) const MAX_IN_FLIGHT: usize = 2 * MAX_BATCH / CHUNK + 2;

/// The copies of a package on their way to the committer ([`crate::commit`]), which puts them
/// in place and records them in batches on its own thread while the next ones are extracted:
/// (copy, `<loc>`, whether the state had it) in chunks of [`CHUNK`].
pub(super) struct Batch {
    pub(super) chunk: Vec<Pending>,
    pub(super) meta: Vec<(StagedItem, bool)>,
    /// The chunks handed over and not yet answered, by tag: their entries and flags.
    pub(super) in_flight: std::collections::HashMap<u64, Vec<(StagedItem, bool)>>,
    pub(super) next_tag: u64,
    pub(super) producer: Producer,
    pub(super) rx: std::sync::mpsc::Receiver<(u64, Vec<Done>)>,
}

impl Batch {
    fn new(ctx: &Ctx) -> Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        Ok(Batch {
            chunk: Vec::new(),
            meta: Vec::new(),
            in_flight: std::collections::HashMap::new(),
            next_tag: 0,
            producer: ctx.ports.committer.producer(tx).map_err(Error::Task)?,
            rx,
        })
    }

    /// Adds a copy; a full chunk goes to the committer, announcing more.
    fn push(&mut self, p: Pending, item: StagedItem, update: bool) -> Result<()> {
        self.chunk.push(p);
        self.meta.push((item, update));
        if self.chunk.len() >= CHUNK {
            self.hand_over(true)?;
        }
        Ok(())
    }

    /// Hands the chunk to the committer (`more`: another follows at once).
    fn hand_over(&mut self, more: bool) -> Result<()> {
        if self.chunk.is_empty() && !more {
            // Nothing to add; a batch waiting for more is told there is none.
            return self.producer.end().map_err(Error::Task);
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        let items = std::mem::take(&mut self.chunk);
        self.producer.send(items, tag, more).map_err(Error::Task)?;
        self.in_flight.insert(tag, std::mem::take(&mut self.meta));
        Ok(())
    }

    /// Takes the outcomes the committer has sent: those ready, waiting while more than
    /// [`MAX_IN_FLIGHT`] chunks are out, or (`all`) every one.
    fn receive(&mut self, ctx: &Ctx, url: &str, told: &mut Told, all: bool) -> Result<()> {
        loop {
            let wait = if all {
                !self.in_flight.is_empty()
            } else {
                self.in_flight.len() > MAX_IN_FLIGHT
            };
            let got = if wait {
                self.rx
                    .recv()
                    .map_err(|_| Error::Task("the commit thread has stopped".into()))?
            } else {
                match self.rx.try_recv() {
                    Ok(g) => g,
                    Err(_) => return Ok(()),
                }
            };
            let (tag, done) = got;
            let Some(meta) = self.in_flight.remove(&tag) else {
                continue;
            };
            for (d, (item, update)) in done.into_iter().zip(meta) {
                match d {
                    Ok(put) => {
                        if update || put.replaced {
                            told.stats.updated += 1;
                        } else {
                            told.stats.created += 1;
                        }
                        told.stats.bytes += put.length;
                        note_dumped(ctx, &item.uri)?;
                    }
                    Err(f) => {
                        // A full, read-only or forbidden store fails every copy after this one
                        // alike: the run stops, as for a download (crate::fetch::exec).
                        if f.category == resourcesync_model::Category::Stop {
                            ctx.state_failed(crate::report::about(&item.uri, &f.message));
                        }
                        entry_failed(ctx, url, item, f.message, told)?
                    }
                }
            }
        }
    }

    /// Hands over what is left and waits until every copy is in place and recorded (or failed).
    fn flush(&mut self, ctx: &Ctx, url: &str, told: &mut Told) -> Result<()> {
        self.hand_over(false)?;
        self.receive(ctx, url, told, true)
    }
}

/// Downloads, checks and applies one package. A refused package is an `Err`; entry failures are
/// warnings.
pub(super) async fn one_package(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    entry: &Entry,
    cap: Capability,
    (cursor, fresh, lists): (Option<W3cDateTime>, bool, bool),
    limits: &DumpLimits,
) -> Result<(DumpStats, Vec<String>, u64)> {
    ctx.ports.obs.phase("downloading a package");
    let file = download_package(
        &ctx.ports.http,
        ctx.ports.obs.as_ref(),
        &fetcher.dir,
        entry,
        limits,
    )
    .await?;
    ctx.ports.obs.phase("unpacking");
    let (ctx2, url, scratch, limits) =
        (ctx.clone(), entry.loc.clone(), fetcher.dir.clone(), *limits);
    let max_doc = fetcher.max_bytes;
    tokio::task::spawn_blocking(move || {
        let mut pkg = open_package(&file, &url, cap, limits, &scratch, max_doc)?;
        let mut told = Told {
            stats: DumpStats {
                lists,
                ..DumpStats::default()
            },
            ..Told::default()
        };
        apply_package(&ctx2, &mut pkg, cursor, fresh, &mut told)?;
        drop(file);
        Ok((told.stats, told.warnings, told.dropped))
    })
    .await?
}

pub(super) fn merge(into: &mut DumpStats, s: DumpStats) {
    into.run_failed += s.run_failed;
    for f in s.failures {
        push_capped(&mut into.failures, f);
    }
    if let Some(t) = s.last {
        if into
            .last
            .is_none_or(|l| t.cmp_instant(&l) == std::cmp::Ordering::Greater)
        {
            into.last = Some(t);
        }
    }
    into.packages += s.packages;
    into.refused += s.refused;
    into.created += s.created;
    into.updated += s.updated;
    into.deleted += s.deleted;
    into.unchanged += s.unchanged;
    into.failed += s.failed;
    into.bytes += s.bytes;
}

/// Applies a list of packages in order (entries at or before the cursor skipped; `fresh`: see
/// [`extract`]; `lists`: see [`DumpStats::lists`]). A refused package is a warning where the
/// lists fetch its resources; otherwise a failure of the run, and for a Change Dump the end of
/// the packages applied (the later ones wait for it: §13.1 order).
pub(super) async fn apply_all(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    packages: &[Entry],
    cap: Capability,
    (cursor, fresh, lists): (Option<W3cDateTime>, bool, bool),
    limits: &DumpLimits,
    warnings: &mut Vec<String>,
) -> Result<DumpStats> {
    let mut stats = DumpStats {
        lists,
        ..DumpStats::default()
    };
    let mut dropped = 0u64;
    for p in packages {
        match one_package(ctx, fetcher, p, cap.clone(), (cursor, fresh, lists), limits).await {
            Ok((s, w, d)) => {
                merge(&mut stats, s);
                stats.packages += 1;
                for m in w {
                    warn(warnings, &mut dropped, m);
                }
                dropped += d;
            }
            // A refused package, or one that could not be fetched: its resources are left to
            // the lists. Store or state failures end the run.
            Err(e @ (Error::Package { .. } | Error::Http(_))) if lists => {
                stats.refused += 1;
                warn(
                    warnings,
                    &mut dropped,
                    format!("{e}: package refused, its resources are fetched one by one"),
                );
            }
            Err(e @ (Error::Package { .. } | Error::Http(_))) => {
                stats.refused += 1;
                stats.run_failed += 1;
                let change_dump = cap == Capability::ChangeDumpManifest;
                let error = format!(
                    "{e}: package refused; the Source offers no list to fetch its resources from \
                     instead: the next sync tries the package again{}",
                    if change_dump {
                        ", and the packages after it"
                    } else {
                        ""
                    }
                );
                push_capped(
                    &mut stats.failures,
                    Failure::new(p.loc.clone(), None, error),
                );
                if change_dump {
                    stats.stopped = p.md.as_ref().and_then(|m| m.from).or(cursor);
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    if dropped > 0 {
        warnings.push(format!("{dropped} more warning(s) about packages"));
    }
    Ok(stats)
}
