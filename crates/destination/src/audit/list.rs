//! What the Source publishes, as the audit holds it: the Resource List (or the dump manifests)
//! and the later changes, in memory up to a bound, else in a scratch database on disk.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use resourcesync_diff::Item;
use resourcesync_model::{Change, Entry, Hashes, W3cDateTime};

use crate::discover::docs::ListSink;
use crate::error::Result;
use crate::mapping::UriMapper;
use crate::plan::staging::{StagedItem, Staging};

/// What the Source publishes of one resource, as far as the audit needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Published {
    pub(super) length: Option<u64>,
    pub(super) hashes: Hashes,
    pub(super) lastmod: Option<W3cDateTime>,
    /// The path under DEST it maps to; `None` when it has no safe one.
    pub(super) path: Option<String>,
}

impl Published {
    pub(super) fn item(&self, uri: &str) -> Item {
        Item {
            uri: uri.to_owned(),
            length: self.length,
            lastmod: self.lastmod,
            hashes: self.hashes.clone(),
        }
    }

    /// About the bytes it takes in memory with its URI (allocations included).
    fn weight(&self, uri: &str) -> usize {
        let digests: usize = self.hashes.0.iter().map(|d| 96 + d.value.len()).sum();
        224 + uri.len() + self.path.as_ref().map_or(0, String::len) + digests
    }
}

/// The Source's list: in memory while small, else in a scratch database.
pub(super) enum List {
    Mem {
        items: BTreeMap<String, Published>,
        bytes: usize,
        /// The paths, built when first asked for (only without a walk).
        paths: Option<HashSet<String>>,
    },
    Disk(Spill),
}

impl List {
    pub(super) fn new() -> Self {
        List::Mem {
            items: BTreeMap::new(),
            bytes: 0,
            paths: None,
        }
    }

    /// Adds or replaces the entry of a URI; moves the list to disk past `max_bytes`.
    fn put(&mut self, uri: String, p: Published, scratch: &Path, max_bytes: usize) -> Result<()> {
        match self {
            List::Mem { items, bytes, .. } => {
                use std::collections::btree_map::Entry as Slot;
                *bytes += p.weight(&uri);
                match items.entry(uri) {
                    Slot::Vacant(v) => {
                        v.insert(p);
                    }
                    Slot::Occupied(mut o) => {
                        *bytes = bytes.saturating_sub(o.get().weight(o.key()));
                        o.insert(p);
                    }
                }
                if *bytes > max_bytes {
                    let mut spill = Spill::create(scratch)?;
                    for (u, p) in std::mem::take(items) {
                        spill.put(&u, &p)?;
                    }
                    *self = List::Disk(spill);
                }
                Ok(())
            }
            List::Disk(s) => s.put(&uri, &p),
        }
    }

    fn remove(&mut self, uri: &str) -> Result<()> {
        match self {
            List::Mem { items, bytes, .. } => {
                if let Some(old) = items.remove(uri) {
                    *bytes = bytes.saturating_sub(old.weight(uri));
                }
                Ok(())
            }
            List::Disk(s) => s.remove(uri),
        }
    }

    pub(super) fn finish(&mut self) -> Result<()> {
        match self {
            List::Mem { .. } => Ok(()),
            List::Disk(s) => s.flush(),
        }
    }

    pub(super) fn count(&self) -> Result<u64> {
        match self {
            List::Mem { items, .. } => Ok(items.len() as u64),
            List::Disk(s) => s.count(),
        }
    }

    /// Up to `limit` entries after a URI, in URI (byte) order.
    pub(super) fn page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Published)>> {
        match self {
            List::Mem { items, .. } => {
                use std::ops::Bound::{Excluded, Unbounded};
                let lower = after.map_or(Unbounded, Excluded);
                Ok(items
                    .range::<str, _>((lower, Unbounded))
                    .take(limit)
                    .map(|(u, p)| (u.clone(), p.clone()))
                    .collect())
            }
            List::Disk(s) => s.page(after, limit),
        }
    }

    /// Whether some entry maps to this path.
    pub(super) fn has_path(&mut self, path: &str) -> Result<bool> {
        match self {
            List::Mem { items, paths, .. } => Ok(paths
                .get_or_insert_with(|| items.values().filter_map(|p| p.path.clone()).collect())
                .contains(path)),
            List::Disk(s) => s.has_path(path),
        }
    }
}

/// A list too large for memory: the staging database the sync uses (removed when dropped),
/// one item per URI with what the audit compares.
pub(super) struct Spill(Staging);

impl Spill {
    fn create(dir: &Path) -> Result<Self> {
        Ok(Spill(Staging::create(dir)?))
    }

    fn put(&mut self, uri: &str, p: &Published) -> Result<()> {
        self.0.upsert(&StagedItem {
            uri: uri.to_owned(),
            length: p.length,
            hashes: p.hashes.clone(),
            lastmod: p.lastmod,
            path: p.path.clone(),
            ..StagedItem::default()
        })
    }

    fn remove(&mut self, uri: &str) -> Result<()> {
        self.0.remove(uri)
    }

    fn flush(&mut self) -> Result<()> {
        self.0.flush()
    }

    pub(super) fn count(&self) -> Result<u64> {
        self.0.count()
    }

    pub(super) fn page(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Published)>> {
        Ok(self
            .0
            .page_by_uri(after, limit)?
            .into_iter()
            .map(|it| {
                (
                    it.uri,
                    Published {
                        length: it.length,
                        hashes: it.hashes,
                        lastmod: it.lastmod,
                        path: it.path,
                    },
                )
            })
            .collect())
    }

    pub(super) fn has_path(&self, path: &str) -> Result<bool> {
        self.0.has_path(path)
    }
}

/// Receives the Source's list entries (and later changes).
pub(super) struct Sink {
    pub(super) list: List,
    pub(super) scratch: PathBuf,
    pub(super) max_bytes: usize,
    pub(super) mapper: UriMapper,
    /// For changes: entries at or before it are already in the Resource List.
    pub(super) since: Option<W3cDateTime>,
}

impl Sink {
    fn put(&mut self, e: Entry) -> Result<()> {
        let path = self.mapper.map(&e.loc).ok().map(|p| p.as_str().to_owned());
        let Entry {
            loc, lastmod, md, ..
        } = e;
        let (length, hashes) = md.map_or((None, Hashes::default()), |m| {
            (m.length, m.hash.unwrap_or_default())
        });
        let p = Published {
            length,
            hashes,
            lastmod,
            path,
        };
        self.list.put(loc, p, &self.scratch, self.max_bytes)
    }
}

impl ListSink for Sink {
    fn entry(&mut self, e: Entry) -> Result<()> {
        let Some(since) = self.since else {
            return self.put(e);
        };
        if e.change_time()
            .is_some_and(|t| t.cmp_instant(&since) != std::cmp::Ordering::Greater)
        {
            return Ok(());
        }
        match e.change() {
            Some(Change::Deleted) => self.list.remove(&e.loc),
            Some(Change::Created | Change::Updated) => self.put(e),
            _ => Ok(()),
        }
    }
}
