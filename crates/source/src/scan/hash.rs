//! The hashing threads of a scan: they take batches of files in path order from a queue the
//! scan keeps short (a bounded number of batches in flight, however large the inventory),
//! read and hash each file, prepare its row (and, when asked, its Resource List entry,
//! serialized) and hand each batch back whole.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

use resourcesync_model::writer::entry_xml;
use resourcesync_model::{Entry, HashAlg, Hashes, Link, MultiHasher, Root};

use crate::inventory::Inventory;
use crate::scan::mime_type;
use crate::state::Resource;
use crate::state::lastmod_of;
use crate::uri::path_bytes as key;
use crate::uri::path_to_uri;

/// Hashes a file, re-reading it when it changed meanwhile (three tries). `buf` is a read buffer
/// reused across calls. `Err` carries the reason to skip it.
pub fn hash_stable(
    inv: &dyn Inventory,
    rel: &Path,
    algs: &[HashAlg],
    buf: &mut Vec<u8>,
) -> std::result::Result<(u64, i128, Hashes), String> {
    for _ in 0..3 {
        let mut h = MultiHasher::new(algs);
        let stable = inv
            .read_stable(rel, buf, &mut |d| h.update(d))
            .map_err(|e| e.to_string())?;
        if let Some((len, mtime)) = stable {
            if h.length() == len {
                return Ok((len, mtime, h.finish()));
            }
        }
    }
    Err("changed while being read, three times; skipped until it settles".into())
}

/// One file as a hashing thread prepared it: its row and, when the Resource List is rendered
/// along (see [`crate::scan::scan`]), whether its entry was serialized (appended to its
/// batch's text).
pub(super) struct Prepared {
    pub(super) resource: Resource,
    pub(super) rendered: bool,
}

/// What became of one file given to the hashing threads: prepared, or why it was skipped.
pub(super) type Outcome = std::result::Result<Prepared, String>;

/// A file to read: its path and, when the previous snapshot has it, its recorded length;
/// `listed`, the length, time and digests to record without reading it (from an inventory
/// whose listed digests are trusted: [`Inventory::listed_digests_trusted`]).
pub(super) struct Job {
    pub(super) rel: PathBuf,
    pub(super) known: Option<u64>,
    pub(super) listed: Option<(u64, i128, Hashes)>,
    /// The provenance link the inventory listed (see [`crate::inventory::Listed::via`]).
    pub(super) via: Option<Box<Link>>,
}

/// A batch of files as the scan hands it to the threads: its number (batches are numbered in
/// path order), the files, and whether to serialize their entries.
struct Batch {
    index: usize,
    jobs: Vec<Job>,
    render: bool,
}

/// A batch as a hashing thread hands it back: its number, each file with its outcome, and the
/// serialized entries of those rendered, end to end (one buffer per batch, not one per file),
/// with where each ends. `panicked` when hashing one of them panicked (the outcomes are then
/// incomplete).
pub(super) struct Chunk {
    pub(super) index: usize,
    pub(super) items: Vec<(Job, Outcome)>,
    pub(super) text: String,
    pub(super) ends: Vec<usize>,
    pub(super) panicked: bool,
}

/// Bytes reserved per entry rendered along (most are shorter; a longer one grows the buffer).
const LINE_ESTIMATE: usize = 256;

/// The hashing threads: batches go in through [`Hashers::send`], come back (in any order)
/// through [`Hashers::recv`].
pub(super) struct Hashers {
    jobs: Option<Sender<Batch>>,
    done: Receiver<Chunk>,
    next: usize,
}

impl Hashers {
    /// Starts `threads` hashing threads in `scope`. They end when this is dropped (or
    /// [`Hashers::close`]d) and the batches sent are done.
    pub(super) fn start<'scope, 'env: 'scope>(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        inv: &'env dyn Inventory,
        base: &'env str,
        algs: &'env [HashAlg],
        threads: usize,
    ) -> Self {
        let (jobs_tx, jobs_rx) = channel::<Batch>();
        let (done_tx, done) = channel::<Chunk>();
        let jobs_rx = std::sync::Arc::new(Mutex::new(jobs_rx));
        for _ in 0..threads.max(1) {
            let (jobs_rx, done_tx) = (jobs_rx.clone(), done_tx.clone());
            scope.spawn(move || {
                let mut buf = Vec::new();
                loop {
                    let next = jobs_rx
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .recv();
                    let Ok(batch) = next else { break };
                    let index = batch.index;
                    let chunk = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        hash_batch(inv, base, algs, batch, &mut buf)
                    }))
                    .unwrap_or_else(|_| Chunk {
                        index,
                        items: Vec::new(),
                        text: String::new(),
                        ends: Vec::new(),
                        panicked: true,
                    });
                    // The receiver is gone when the scan stopped: stop.
                    if done_tx.send(chunk).is_err() {
                        break;
                    }
                }
            });
        }
        Hashers {
            jobs: Some(jobs_tx),
            done,
            next: 0,
        }
    }

    /// Hands a batch of files (in path order, after those sent before) to the threads;
    /// returns its number.
    pub(super) fn send(&mut self, jobs: Vec<Job>, render: bool) -> usize {
        let index = self.next;
        self.next += 1;
        if let Some(tx) = &self.jobs {
            // Sent while the threads run (they stop only when this sender is dropped).
            let _ = tx.send(Batch {
                index,
                jobs,
                render,
            });
        }
        index
    }

    /// The next batch done (in the order they finish); `None` when every thread has ended.
    pub(super) fn recv(&self) -> Option<Chunk> {
        self.done.recv().ok()
    }

    /// No more batches: the threads end once those sent are done.
    pub(super) fn close(&mut self) {
        self.jobs = None;
    }
}

/// Hashes the files of a batch in order.
fn hash_batch(
    inv: &dyn Inventory,
    base: &str,
    algs: &[HashAlg],
    batch: Batch,
    buf: &mut Vec<u8>,
) -> Chunk {
    let render = batch.render;
    let mut text = String::with_capacity(if render {
        batch.jobs.len() * LINE_ESTIMATE
    } else {
        0
    });
    let mut ends = Vec::with_capacity(if render { batch.jobs.len() } else { 0 });
    let items = batch
        .jobs
        .into_iter()
        .map(|job| {
            let out = prepare(inv, base, &job, algs, render.then_some(&mut text), buf);
            if matches!(out, Ok(Prepared { rendered: true, .. })) {
                ends.push(text.len());
            }
            (job, out)
        })
        .collect();
    Chunk {
        index: batch.index,
        items,
        text,
        ends,
        panicked: false,
    }
}

/// Hashes one listed file and prepares its row; when `render`, appends its entry to `text`
/// (nothing when it cannot be written: left to the publish, which reports it).
fn prepare(
    inv: &dyn Inventory,
    base: &str,
    job: &Job,
    algs: &[HashAlg],
    render: Option<&mut String>,
    buf: &mut Vec<u8>,
) -> Outcome {
    let rel = job.rel.as_path();
    let uri = path_to_uri(base, rel).ok_or_else(|| "no URI for this path".to_owned())?;
    let (length, mtime_ns, hashes) = match &job.listed {
        Some(l) => l.clone(),
        None => hash_stable(inv, rel, algs, buf)?,
    };
    let mut resource = Resource {
        path: key(rel).into_owned(),
        uri,
        length,
        mtime_ns,
        lastmod: lastmod_of(mtime_ns),
        mime_type: Some(mime_type(rel)),
        hashes,
        via: job.via.clone(),
    };
    let mut rendered = false;
    if let Some(text) = render {
        // The entry `resource_entry` builds, with the row's strings moved in and back out
        // (not cloned per file).
        let mut e = Entry::new(std::mem::take(&mut resource.uri));
        e.lastmod = Some(resource.lastmod);
        let md = e.md_mut();
        if !resource.hashes.is_empty() {
            md.hash = Some(std::mem::take(&mut resource.hashes));
        }
        md.length = Some(resource.length);
        md.mime_type = resource.mime_type.take();
        if let Some(v) = resource.via.take() {
            e.links.push(*v);
        }
        let start = text.len();
        // The Resource List's root and (no) extra namespaces, as `publish` writes it.
        rendered = entry_xml(text, "resourcelist", Root::UrlSet, &[], &e).is_ok();
        if !rendered {
            text.truncate(start);
        }
        resource.uri = std::mem::take(&mut e.loc);
        if let Some(md) = e.md.as_mut() {
            if let Some(h) = md.hash.take() {
                resource.hashes = h;
            }
            resource.mime_type = md.mime_type.take();
        }
        resource.via = e.links.pop().map(Box::new);
    }
    Ok(Prepared { resource, rendered })
}
