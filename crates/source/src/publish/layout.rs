//! Where documents go on disk and which URLs they are published under, and how files are
//! written durably (temporary file, sync, rename).
//!
//! Layout under the output directory (served at the base URL):
//!
//! ```text
//! .well-known/resourcesync                 Source Description (Z39.99-2014 §6.3.2)
//! resourcesync/capabilitylist.xml          Capability List (§9)
//! resourcesync/resourcelist.xml            Resource List, or its index (§10)
//! resourcesync/resourcelist-NNNNN.xml      parts of a split Resource List
//! resourcesync/changelist.xml              the open Change List (§12.1), what the Capability
//!                                          List names; the Change List Index instead when the
//!                                          open period exceeds one document (§12.2)
//! resourcesync/changelist-index.xml        Change List Index of every period (§12.2)
//! resourcesync/changelists/NNNNN.xml       Change Lists, one per period, the last one open
//! resourcesync/resourcedump.xml            Resource Dump (§11.1)
//! resourcesync/dumps/...                   ZIP packages and copies of their manifests
//! resourcesync/changedump.xml              Change Dump (§13.1)
//! resourcesync/resourcelist-archive.xml    Resource List Archive (Archives §3)
//! resourcesync/changelist-archive.xml      Change List Archive (Archives §5)
//! resourcesync/archive/...                 earlier Resource Lists
//! ```

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use resourcesync_model::path::RelPath;

use crate::error::{Error, Result};

pub use crate::inventory::own::DOCS_DIR;

/// The Source Description's key in a [`crate::publish::sink::DocSink`] (Z39.99-2014
/// §6.3.2: at the well-known URI under the base).
pub const WELL_KNOWN_KEY: &str = ".well-known/resourcesync";

/// Paths and URLs of a Source's documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The output directory.
    pub out: PathBuf,
    /// The base URL resources and documents are published under (ends with `/`).
    pub base: String,
}

impl Layout {
    /// A layout writing to `out`, published at `base` (normalized to end with `/`).
    pub fn new(out: impl Into<PathBuf>, base: &str) -> Self {
        Layout {
            out: out.into(),
            base: crate::uri::normalize_base(base),
        }
    }

    /// The file of a document (name relative to the documents folder).
    pub fn doc_path(&self, name: &str) -> PathBuf {
        self.out.join(DOCS_DIR).join(name)
    }

    /// The key of a document in a [`crate::publish::sink::DocSink`] (name relative to the
    /// documents folder): its path under the output directory, `/`-separated. An error for a
    /// name that makes no [`RelPath`] (empty, `..`, a folder ending in `/`).
    pub fn doc_key(&self, name: &str) -> Result<RelPath> {
        Ok(RelPath::parse(&format!("{DOCS_DIR}/{name}"))?)
    }

    /// The key prefix of a folder of documents (`folder` relative to the documents folder,
    /// ending in `/`): what [`crate::publish::sink::DocSink::delete_prefix`] takes.
    pub fn doc_prefix(&self, folder: &str) -> String {
        format!("{DOCS_DIR}/{folder}")
    }

    /// The Source Description's key in a [`crate::publish::sink::DocSink`]
    /// ([`WELL_KNOWN_KEY`]).
    pub fn well_known_key(&self) -> Result<RelPath> {
        Ok(RelPath::parse(WELL_KNOWN_KEY)?)
    }

    /// The URL of a document.
    pub fn doc_url(&self, name: &str) -> String {
        format!("{}{DOCS_DIR}/{name}", self.base)
    }

    /// The Source Description's file.
    pub fn well_known_path(&self) -> PathBuf {
        self.out.join(".well-known").join("resourcesync")
    }

    /// The Source Description's URL.
    pub fn well_known_url(&self) -> String {
        format!("{}.well-known/resourcesync", self.base)
    }

    /// The documents folder.
    pub fn docs_dir(&self) -> PathBuf {
        self.out.join(DOCS_DIR)
    }
}

/// A file being written durably: a temporary file beside the target, renamed into place by
/// [`AtomicFile::commit`] after it is flushed and synced. Dropped uncommitted, it is removed.
/// It is published: created with the mode a new file gets (`0666 & ~umask`), which the rename
/// keeps, so that a web server running as another user can read it
/// ([`resourcesync_fsmode::public_temp`]).
#[derive(Debug)]
pub struct AtomicFile {
    tmp: tempfile::NamedTempFile,
    target: PathBuf,
}

impl AtomicFile {
    /// Starts writing `target` (its folder is created).
    pub fn create(target: &Path) -> Result<Self> {
        let dir = target
            .parent()
            .ok_or_else(|| Error::Config(format!("{} has no parent folder", target.display())))?;
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let tmp = resourcesync_fsmode::public_temp(".tmp-")
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        Ok(AtomicFile {
            tmp,
            target: target.to_owned(),
        })
    }

    /// The temporary file, to write to.
    pub fn file(&mut self) -> &mut File {
        self.tmp.as_file_mut()
    }

    /// Syncs and renames into place.
    pub fn commit(mut self) -> Result<()> {
        let target = self.target.clone();
        self.tmp
            .as_file_mut()
            .flush()
            .and_then(|()| self.tmp.as_file().sync_all())
            .map_err(|e| Error::io(&target, e))?;
        self.tmp
            .persist(&target)
            .map_err(|e| Error::io(&target, e.error))?;
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tmp.as_file_mut().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tmp.as_file_mut().flush()
    }
}

/// Writes a whole file durably. A file that already has exactly these bytes is left as it is
/// (no rewrite, no sync: documents that did not change cost one read).
pub fn write_file(target: &Path, bytes: &[u8]) -> Result<()> {
    let same = std::fs::metadata(target)
        .is_ok_and(|md| md.is_file() && md.len() == bytes.len() as u64)
        && std::fs::read(target).is_ok_and(|old| old == bytes);
    if same {
        return Ok(());
    }
    let mut f = AtomicFile::create(target)?;
    f.write_all(bytes).map_err(|e| Error::io(target, e))?;
    f.commit()
}
