//! Where documents go: the [`DocSink`] port, shaped so that a directory, an object store (S3:
//! put a whole object under a key, delete, list keys) and memory can each implement it.
//!
//! Keys are [`RelPath`]s, `/`-separated paths under the output root, as the documents are
//! served under the base URL: `resourcesync/capabilitylist.xml`,
//! `resourcesync/resourcelists/000001/...`, `.well-known/resourcesync` (see
//! [`crate::publish::layout::Layout::doc_key`]): the Destination's checked relative path, so no
//! key escapes the output root. A prefix ([`DocSink::list`], [`DocSink::delete_prefix`]) is
//! plain text: `resourcesync/resourcelists/` (a folder, ending in `/`) is no path. A document is
//! put whole and atomically: a reader sees the previous bytes or the new ones, never a part.
//!
//! Implementations: [`DirSink`] (files under a directory, each through a temporary file
//! synced and renamed into place: what `publish --out` and `serve` write), [`MemSink`]
//! (memory: tests, and the template for a new backend) and, with the feature `s3`,
//! `BucketSink` (objects of an S3-compatible bucket: `publish --out s3://…`, `sink/bucket.rs`).

use std::collections::BTreeMap;
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use resourcesync_model::path::RelPath;
use resourcesync_model::writer::{PartSink, Target};

use crate::error::{Error, Result};
use crate::publish::layout::{AtomicFile, Layout, write_file};

/// A document being written: its bytes become visible at its key, whole, on
/// [`DocWriter::commit`]; dropped uncommitted, nothing changes.
pub trait DocWriter: Write + Send {
    /// Makes the document visible (for a directory: flush, sync, rename into place).
    fn commit(self: Box<Self>) -> Result<()>;
}

/// Where documents are published (see the module's documentation).
pub trait DocSink: Send + Sync + std::fmt::Debug {
    /// Starts the document at `key`, to be written as a stream and committed.
    fn create(&self, key: &RelPath) -> Result<Box<dyn DocWriter>>;

    /// Puts a whole document at `key`. An implementation may leave a document whose bytes
    /// are the same in place (no rewrite).
    fn put(&self, key: &RelPath, bytes: &[u8]) -> Result<()> {
        let mut w = self.create(key)?;
        w.write_all(bytes)
            .map_err(|e| Error::io(Path::new(key.as_str()), e))?;
        w.commit()
    }

    /// Whether a document is at `key`.
    fn exists(&self, key: &RelPath) -> Result<bool>;

    /// Removes the document at `key` (none there: nothing to do).
    fn delete(&self, key: &RelPath) -> Result<()>;

    /// The keys that start with `prefix`, in byte order. A name found under the prefix that is
    /// no [`RelPath`] (put there by something else) is an error naming it.
    fn list(&self, prefix: &str) -> Result<Vec<RelPath>>;

    /// Removes every document whose key starts with `prefix`.
    fn delete_prefix(&self, prefix: &str) -> Result<()> {
        for k in self.list(prefix)? {
            self.delete(&k)?;
        }
        Ok(())
    }

    /// A scratch file (the entries of a document's part are spooled before it is written).
    fn scratch(&self) -> io::Result<std::fs::File> {
        tempfile::tempfile()
    }

    /// The document's file, when the sink is a local file system (what is reported as
    /// written, and what the notifier digests).
    fn local_path(&self, key: &RelPath) -> Option<PathBuf> {
        let _ = key;
        None
    }
}

/// Documents as files under a directory (the output directory: keys are paths under it).
#[derive(Debug, Clone)]
pub struct DirSink {
    root: PathBuf,
}

impl DirSink {
    /// A sink writing under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        DirSink { root: root.into() }
    }

    fn path(&self, key: &RelPath) -> PathBuf {
        key.under(&self.root)
    }
}

/// A buffered [`AtomicFile`] as a [`DocWriter`].
struct DirWriter(BufWriter<AtomicFile>);

impl Write for DirWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl DocWriter for DirWriter {
    fn commit(self: Box<Self>) -> Result<()> {
        let f = self.0.into_inner().map_err(|e| {
            let e = e.into_error();
            Error::io(Path::new("document"), e)
        })?;
        f.commit()
    }
}

impl DocSink for DirSink {
    fn create(&self, key: &RelPath) -> Result<Box<dyn DocWriter>> {
        let f = AtomicFile::create(&self.path(key))?;
        Ok(Box::new(DirWriter(BufWriter::with_capacity(256 * 1024, f))))
    }

    /// Durably (temporary file, sync, rename); a file that has exactly these bytes already is
    /// left as it is.
    fn put(&self, key: &RelPath, bytes: &[u8]) -> Result<()> {
        write_file(&self.path(key), bytes)
    }

    fn exists(&self, key: &RelPath) -> Result<bool> {
        Ok(self.path(key).is_file())
    }

    fn delete(&self, key: &RelPath) -> Result<()> {
        let p = self.path(key);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io(p, e)),
            _ => Ok(()),
        }
    }

    /// The files under the folder `prefix` names (up to its last `/`) whose keys start with
    /// it; temporary files (`.tmp-*`) are not documents.
    fn list(&self, prefix: &str) -> Result<Vec<RelPath>> {
        let dir = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let mut keys = Vec::new();
        let mut todo = vec![dir.to_owned()];
        while let Some(d) = todo.pop() {
            let Ok(rd) = std::fs::read_dir(self.root.join(&d)) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(".tmp-") {
                    continue;
                }
                let key = if d.is_empty() {
                    name
                } else {
                    format!("{d}/{name}")
                };
                match e.file_type() {
                    Ok(t) if t.is_dir() => todo.push(key),
                    Ok(t) if t.is_file() && key.starts_with(prefix) => keys.push(key),
                    _ => {}
                }
            }
        }
        keys.sort_unstable();
        keys.iter().map(|k| doc_key(k)).collect()
    }

    /// A folder prefix (ending in `/`) is removed whole.
    fn delete_prefix(&self, prefix: &str) -> Result<()> {
        if prefix.ends_with('/') {
            let p = self.root.join(prefix);
            return match std::fs::remove_dir_all(&p) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io(p, e)),
                _ => Ok(()),
            };
        }
        for k in self.list(prefix)? {
            self.delete(&k)?;
        }
        Ok(())
    }

    fn scratch(&self) -> io::Result<std::fs::File> {
        let mut f = tempfile::tempfile_in(&self.root).or_else(|_| tempfile::tempfile())?;
        f.rewind()?;
        Ok(f)
    }

    fn local_path(&self, key: &RelPath) -> Option<PathBuf> {
        Some(self.path(key))
    }
}

/// Documents in memory, by key. Clones share the documents.
#[derive(Debug, Clone, Default)]
pub struct MemSink {
    docs: Arc<RwLock<BTreeMap<String, Arc<[u8]>>>>,
}

impl MemSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The document at `key`.
    pub fn get(&self, key: &str) -> Option<Arc<[u8]>> {
        self.read().get(key).cloned()
    }

    /// Every key, in order.
    pub fn keys(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<[u8]>>> {
        self.docs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<[u8]>>> {
        self.docs.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// A document being written to a [`MemSink`]: in place on commit.
struct MemWriter {
    sink: MemSink,
    key: String,
    bytes: Vec<u8>,
}

impl Write for MemWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl DocWriter for MemWriter {
    fn commit(self: Box<Self>) -> Result<()> {
        let MemWriter { sink, key, bytes } = *self;
        sink.write().insert(key, bytes.into());
        Ok(())
    }
}

impl DocSink for MemSink {
    fn create(&self, key: &RelPath) -> Result<Box<dyn DocWriter>> {
        Ok(Box::new(MemWriter {
            sink: self.clone(),
            key: key.as_str().to_owned(),
            bytes: Vec::new(),
        }))
    }

    fn exists(&self, key: &RelPath) -> Result<bool> {
        Ok(self.read().contains_key(key.as_str()))
    }

    fn delete(&self, key: &RelPath) -> Result<()> {
        self.write().remove(key.as_str());
        Ok(())
    }

    fn list(&self, prefix: &str) -> Result<Vec<RelPath>> {
        self.read()
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| doc_key(k))
            .collect()
    }
}

/// A key a sink found (a file name under its folder, an object's key) as a [`RelPath`]: an
/// error naming it when it is none.
pub(crate) fn doc_key(found: &str) -> Result<RelPath> {
    RelPath::parse(found).map_err(|e| {
        let why = format!("found among the documents, but no document's key ({e}): remove it");
        Error::io(
            Path::new(found),
            io::Error::new(io::ErrorKind::InvalidData, why),
        )
    })
}

/// Parts of one document committed at once (their syncs overlap the writing of the next part
/// and each other).
const PARTS_IN_FLIGHT: usize = 4;

/// A [`PartSink`] writing a (possibly split) document through a [`DocSink`]: the single
/// document or the index at `NAME.xml`, parts at `NAME-NNNNN.xml`. Parts are committed in the
/// background, a few at once; all are in place before the index is (the index names them).
pub(crate) struct SinkParts<'a> {
    sink: &'a dyn DocSink,
    layout: &'a Layout,
    name: String,
    /// Keys written.
    pub(crate) written: Vec<RelPath>,
    pending: std::collections::VecDeque<std::thread::JoinHandle<Result<RelPath>>>,
}

impl<'a> SinkParts<'a> {
    /// The parts of the document `NAME.xml` (name relative to the documents folder, without
    /// `.xml`).
    pub(crate) fn new(sink: &'a dyn DocSink, layout: &'a Layout, name: &str) -> Self {
        SinkParts {
            sink,
            layout,
            name: name.to_owned(),
            written: Vec::new(),
            pending: Default::default(),
        }
    }

    fn file_name(&self, target: Target) -> String {
        match target {
            Target::Single | Target::Index => format!("{}.xml", self.name),
            Target::Part(n) => format!("{}-{n:05}.xml", self.name),
        }
    }

    /// The key of a part (or of the single document, or the index).
    fn key(&self, target: Target) -> io::Result<RelPath> {
        self.layout
            .doc_key(&self.file_name(target))
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Waits for the oldest part in flight.
    fn join_one(&mut self) -> io::Result<()> {
        if let Some(h) = self.pending.pop_front() {
            let key = h
                .join()
                .map_err(|_| io::Error::other("committing a document part panicked"))?
                .map_err(|e| io::Error::other(e.to_string()))?;
            self.written.push(key);
        }
        Ok(())
    }
}

/// An open part: the writer and the key it commits to.
pub(crate) struct PartOut(Box<dyn DocWriter>);

impl Write for PartOut {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl PartSink for SinkParts<'_> {
    type Out = PartOut;
    type Spool = std::fs::File;

    fn open(&mut self, target: Target) -> io::Result<PartOut> {
        let key = self.key(target)?;
        let w = self
            .sink
            .create(&key)
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(PartOut(w))
    }

    fn close(&mut self, target: Target, out: PartOut) -> io::Result<()> {
        let key = self.key(target)?;
        if let Target::Part(_) = target {
            if self.pending.len() >= PARTS_IN_FLIGHT {
                self.join_one()?;
            }
            self.pending
                .push_back(std::thread::spawn(move || out.0.commit().map(|()| key)));
            return Ok(());
        }
        while !self.pending.is_empty() {
            self.join_one()?;
        }
        out.0
            .commit()
            .map_err(|e| io::Error::other(e.to_string()))?;
        self.written.push(key);
        Ok(())
    }

    fn spool(&mut self) -> io::Result<std::fs::File> {
        self.sink.scratch()
    }

    fn url(&self, target: Target) -> String {
        self.layout.doc_url(&self.file_name(target))
    }
}

pub mod conformance;

#[cfg(feature = "s3")]
mod bucket;
#[cfg(feature = "s3")]
pub use bucket::BucketSink;

#[cfg(test)]
mod tests;
