//! [`MemInventory`]: resources held in memory, with a change feed.
//!
//! For tests (a Source whose resources a test sets exactly, without a file system), and the
//! template for a new backend: everything an [`Inventory`] must do is here in its simplest
//! form: a listing that streams in path order (each step a lookup after the last key given,
//! no copy of the whole), per-entry problems, open, and the optional [`ChangeFeed`].

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use resourcesync_model::{HashAlg, Hashes, MultiHasher};

use crate::error::{Error, Result};
use crate::inventory::{ChangeFeed, Changed, Feed, Inventory, Listed, Listing, Skipped};
use crate::uri::path_bytes;

/// One resource held.
#[derive(Debug, Clone)]
struct MemFile {
    bytes: Arc<[u8]>,
    mtime_ns: i128,
    hashes: Hashes,
    /// When set, the resource is there but cannot be read (listed as a problem, opened with
    /// this error): what a backend's broken entry looks like.
    broken: Option<String>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<Vec<u8>, MemFile>,
    /// Per path, the sequence number of its last change (deleted ones included).
    changed: BTreeMap<Vec<u8>, u64>,
    /// The last sequence number given.
    seq: u64,
    /// The modification time given to the next write without one (a clock that only moves
    /// forward, one second per write).
    clock_ns: i128,
}

/// Resources held in memory (see the module's documentation). Cheap to share: clones see the
/// same resources.
#[derive(Debug, Clone, Default)]
pub struct MemInventory {
    inner: Arc<RwLock<Inner>>,
}

/// A relative path from the bytes the listing orders by.
fn rel_of(key: &[u8]) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(std::ffi::OsStr::from_bytes(key))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(key).into_owned())
    }
}

fn not_found(rel: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{}: no such resource", rel.display()),
    )
}

impl MemInventory {
    /// An empty inventory.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates or replaces the resource at `rel` (relative, `/`-separated), modified now (a
    /// clock of this inventory's, one second later than the previous write). Its MD5 is known
    /// to the listing, as a backend storing checksums would know it.
    pub fn put(&self, rel: impl AsRef<Path>, bytes: &[u8]) {
        let mut g = self.write();
        g.clock_ns += 1_000_000_000;
        let t = g.clock_ns;
        drop(g);
        self.put_at(rel, bytes, t);
    }

    /// Creates or replaces the resource at `rel`, modified at `mtime_ns` (nanoseconds since
    /// the epoch).
    pub fn put_at(&self, rel: impl AsRef<Path>, bytes: &[u8], mtime_ns: i128) {
        let mut h = MultiHasher::new(&[HashAlg::Md5]);
        h.update(bytes);
        let file = MemFile {
            bytes: bytes.into(),
            mtime_ns,
            hashes: h.finish(),
            broken: None,
        };
        self.record(rel.as_ref(), Some(file));
    }

    /// Makes the resource at `rel` one that is there but cannot be read, for `reason`.
    pub fn break_entry(&self, rel: impl AsRef<Path>, reason: &str) {
        let file = MemFile {
            bytes: Arc::from(&[][..]),
            mtime_ns: 0,
            hashes: Hashes::default(),
            broken: Some(reason.to_owned()),
        };
        self.record(rel.as_ref(), Some(file));
    }

    /// Removes the resource at `rel`, if there.
    pub fn remove(&self, rel: impl AsRef<Path>) {
        self.record(rel.as_ref(), None);
    }

    fn record(&self, rel: &Path, file: Option<MemFile>) {
        let key = path_bytes(rel).into_owned();
        let mut g = self.write();
        let existed = match file {
            Some(f) => {
                g.files.insert(key.clone(), f);
                true
            }
            None => g.files.remove(&key).is_some(),
        };
        if existed {
            g.seq += 1;
            let seq = g.seq;
            g.changed.insert(key, seq);
        }
    }

    fn get(&self, rel: &Path) -> std::io::Result<MemFile> {
        let f = self
            .read()
            .files
            .get(path_bytes(rel).as_ref())
            .cloned()
            .ok_or_else(|| not_found(rel))?;
        match &f.broken {
            Some(reason) => Err(std::io::Error::other(reason.clone())),
            None => Ok(f),
        }
    }

    /// The entry after `after` (the first with `None`) as the listing gives it.
    fn next_after(
        &self,
        after: Option<&[u8]>,
    ) -> Option<(Vec<u8>, std::result::Result<Listed, Skipped>)> {
        let g = self.read();
        let mut range = match after {
            Some(k) => g
                .files
                .range::<[u8], _>((Bound::Excluded(k), Bound::Unbounded)),
            None => g.files.range::<[u8], _>(..),
        };
        let (key, f) = range.next()?;
        let rel = rel_of(key);
        let item = match &f.broken {
            Some(reason) => Err(Skipped {
                path: rel,
                reason: reason.clone(),
            }),
            None => Ok(Listed {
                rel,
                len: f.bytes.len() as u64,
                mtime_ns: f.mtime_ns,
                hashes: f.hashes.clone(),
                via: None,
            }),
        };
        Some((key.clone(), item))
    }
}

impl Inventory for MemInventory {
    /// One lookup per entry, after the last key given: the listing holds one key, whatever
    /// the size of the inventory, and sees writes made meanwhile past its position.
    fn list(&self) -> Result<Listing<'_>> {
        let mut last: Option<Vec<u8>> = None;
        Ok(Box::new(std::iter::from_fn(move || {
            let (key, item) = self.next_after(last.as_deref())?;
            last = Some(key);
            Some(item)
        })))
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        let f = self.get(rel)?;
        Ok(Box::new(std::io::Cursor::new(f.bytes)))
    }

    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let f = self.get(rel)?;
        Ok((f.bytes.len() as u64, f.mtime_ns))
    }

    fn change_feed(&self) -> Option<&dyn ChangeFeed> {
        Some(self)
    }
}

impl ChangeFeed for MemInventory {
    fn cursor(&self) -> Result<String> {
        Ok(self.read().seq.to_string())
    }

    /// The paths whose last change is after the cursor, in path order, each with its state
    /// now (collected under one lock: the changes of a test are few; a backend with many reads
    /// them in pages, as the listing does).
    fn changes_since(&self, cursor: &str) -> Result<Feed<'_>> {
        let since: u64 = cursor
            .parse()
            .map_err(|_| Error::Config(format!("not a cursor of this inventory: {cursor:?}")))?;
        let g = self.read();
        if since > g.seq {
            return Err(Error::Config(format!(
                "cursor {since} is ahead of this inventory ({})",
                g.seq
            )));
        }
        let changes: Vec<std::result::Result<Changed, Skipped>> = g
            .changed
            .iter()
            .filter(|(_, seq)| **seq > since)
            .map(|(key, _)| {
                let rel = rel_of(key);
                match g.files.get(key) {
                    None => Ok(Changed::Gone(rel)),
                    Some(MemFile {
                        broken: Some(reason),
                        ..
                    }) => Err(Skipped {
                        path: rel,
                        reason: reason.clone(),
                    }),
                    Some(f) => Ok(Changed::Present(Listed {
                        rel,
                        len: f.bytes.len() as u64,
                        mtime_ns: f.mtime_ns,
                        hashes: f.hashes.clone(),
                        via: None,
                    })),
                }
            })
            .collect();
        Ok(Feed {
            changes: Box::new(changes.into_iter()),
            cursor: g.seq.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::conformance::{self, Harness};

    struct Mem(MemInventory);

    impl Harness for Mem {
        fn build(&mut self, files: &[(&str, &[u8])], broken: Option<&str>) -> Box<dyn Inventory> {
            self.0 = MemInventory::new();
            for (rel, bytes) in files {
                self.0.put(rel, bytes);
            }
            if let Some(b) = broken {
                self.0.break_entry(b, "unreadable on purpose");
            }
            Box::new(self.0.clone())
        }

        fn put(&mut self, rel: &str, bytes: &[u8]) {
            self.0.put(rel, bytes);
        }

        fn remove(&mut self, rel: &str) {
            self.0.remove(rel);
        }
    }

    #[test]
    fn the_memory_inventory_passes_the_conformance_suite() {
        conformance::run(&mut Mem(MemInventory::new())).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_listing_holds_its_place_while_the_inventory_changes() {
        let m = MemInventory::new();
        for r in ["a", "c", "e"] {
            m.put(r, b"x");
        }
        let mut l = m.list().expect("list");
        assert_eq!(l.next().expect("a").expect("ok").rel, Path::new("a"));
        m.put("0", b"behind");
        m.put("d", b"ahead");
        let rest: Vec<PathBuf> = l.map(|e| e.expect("ok").rel).collect();
        assert_eq!(rest, [Path::new("c"), Path::new("d"), Path::new("e")]);
    }
}
