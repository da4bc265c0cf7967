//! The listing of a [`DirInventory`]: a walk of the tree in the order of the paths' bytes,
//! one directory at a time, as a stream.
//!
//! Each directory is read whole (`readdir`), its entries sorted by name with a `/` after a
//! directory's (so that, as whole paths compare, `a-b` and `a.txt` come before `a/x`), and
//! given one by one; a subdirectory is read when its turn comes. What is held at any time is
//! the entries not yet given of the directories on the way down from the root: memory bounded
//! by the tree's shape, not by the number of files. The files of a large directory are
//! stat'ed on the inventory's threads.

use std::fs::{DirEntry, FileType};
use std::path::{Path, PathBuf};

use super::{DirInventory, mtime_ns};
use crate::inventory::{Listed, Skipped, path_bytes};

/// Files of one directory from which their `stat`s are spread over threads.
const PARALLEL_FROM: usize = 512;

/// One entry of a directory, as the walk gives it.
enum Item {
    File(Listed),
    Dir(PathBuf),
    Problem(Skipped),
}

/// An entry read from a directory, before what it is to the listing is known.
enum Slot {
    Ready(Item),
    /// A regular file to stat (relative to its directory).
    Stat(DirEntry, PathBuf),
    /// A symbolic link to follow and check.
    Link(PathBuf),
    /// Left out.
    Out,
}

/// The walk: an iterator of the tree's files in path order.
pub(crate) struct Walk<'a> {
    inv: &'a DirInventory,
    /// Whether regular files are stat'ed (see [`crate::inventory::Inventory::list_names`]).
    stat_files: bool,
    /// Per directory on the way down, its entries not yet given, the next one last.
    stack: Vec<Vec<Item>>,
    /// Entries held now, and the most held at once (what the walk's memory is made of).
    held: usize,
    peak: usize,
}

impl DirInventory {
    /// Starts a walk of the tree (see the module's documentation).
    pub(super) fn walk(&self, stat_files: bool) -> Walk<'_> {
        // A tree moved or replaced since the last listing is opened anew for this one.
        #[cfg(target_os = "linux")]
        if let Ok(mut g) = self.root_fd.write() {
            *g = None;
        }
        Walk {
            inv: self,
            stat_files,
            stack: vec![vec![Item::Dir(PathBuf::new())]],
            held: 1,
            peak: 1,
        }
    }

    /// The entries of one directory (`rel` under the root), the first to give last. Leaves
    /// out dotfiles unless asked, skipped paths, excluded ones; never descends through a link;
    /// lists a link only when it leads to a file inside the tree. Regular files are stat'ed
    /// only when `stat_files` (else listed with size and time 0).
    fn read_sorted(&self, rel: &Path, stat_files: bool) -> Vec<Item> {
        let entries = match std::fs::read_dir(self.canonical_root.join(rel)) {
            Ok(d) => d,
            Err(e) => {
                return vec![Item::Problem(Skipped {
                    path: rel.to_owned(),
                    reason: e.to_string(),
                })];
            }
        };
        let mut slots: Vec<(Vec<u8>, Slot)> = Vec::new();
        let mut to_stat = 0usize;
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    slots.push((
                        Vec::new(),
                        Slot::Ready(Item::Problem(Skipped {
                            path: rel.to_owned(),
                            reason: e.to_string(),
                        })),
                    ));
                    break;
                }
            };
            let name = entry.file_name();
            if !self.include_hidden && name.as_encoded_bytes().first() == Some(&b'.') {
                continue;
            }
            let path = rel.join(&name);
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            if self.skipped_path(&path) || self.excluded(&path, ft.is_dir()) {
                continue;
            }
            let mut key = path_bytes(Path::new(&name)).into_owned();
            let slot = self.classify(entry, ft, path, stat_files, &mut key);
            if matches!(slot, Slot::Stat(..) | Slot::Link(_)) {
                to_stat += 1;
            }
            slots.push((key, slot));
        }
        let threads = self.threads.min(to_stat / (PARALLEL_FROM / 2)).max(1);
        if threads > 1 && to_stat >= PARALLEL_FROM {
            let per = slots.len().div_ceil(threads);
            std::thread::scope(|s| {
                for part in slots.chunks_mut(per) {
                    s.spawn(move || part.iter_mut().for_each(|(_, slot)| self.resolve(slot)));
                }
            });
        } else {
            slots.iter_mut().for_each(|(_, slot)| self.resolve(slot));
        }
        // The last to give first: popped from the end.
        slots.sort_unstable_by(|a, b| b.0.cmp(&a.0));
        slots
            .into_iter()
            .filter_map(|(_, slot)| match slot {
                Slot::Ready(item) => Some(item),
                _ => None,
            })
            .collect()
    }

    /// What an entry is to the listing, as far as `readdir` tells; a directory's sort key gets
    /// its `/`.
    fn classify(
        &self,
        entry: DirEntry,
        ft: FileType,
        path: PathBuf,
        stat_files: bool,
        key: &mut Vec<u8>,
    ) -> Slot {
        if ft.is_dir() {
            key.push(b'/');
            Slot::Ready(Item::Dir(path))
        } else if ft.is_file() && !stat_files {
            Slot::Ready(Item::File(Listed::new(path, 0, 0)))
        } else if ft.is_file() {
            Slot::Stat(entry, path)
        } else if ft.is_symlink() {
            Slot::Link(path)
        } else {
            Slot::Out
        }
    }

    /// Finds what `readdir` did not tell: a file's size and time, where a link leads.
    fn resolve(&self, slot: &mut Slot) {
        let root = &self.canonical_root;
        let (md, path) = match std::mem::replace(slot, Slot::Out) {
            // Relative to the directory being read (`fstatat` / `statx` on its fd).
            Slot::Stat(entry, path) => (entry.metadata().map_err(|e| e.to_string()), path),
            // Follow a link only when its target stays inside the tree, is a file, and would
            // be listed itself (as the server checks: a link to a dotfile, an excluded file
            // or one of the Source's own files is not listed).
            Slot::Link(path) => {
                let md = match root.join(&path).canonicalize() {
                    Ok(target) if target.starts_with(root) => match std::fs::metadata(&target) {
                        Ok(md) if md.is_file() => {
                            let rel = target.strip_prefix(root).unwrap_or(&target);
                            if !self.admits(rel) {
                                return;
                            }
                            Ok(md)
                        }
                        Ok(_) => return,
                        Err(e) => Err(e.to_string()),
                    },
                    Ok(_) => Err("symbolic link leaves the tree; not followed".into()),
                    Err(e) => Err(format!("dangling symbolic link: {e}")),
                };
                (md, path)
            }
            other => {
                *slot = other;
                return;
            }
        };
        *slot = Slot::Ready(match md {
            Ok(md) => Item::File(Listed::new(path, md.len(), mtime_ns(&md))),
            Err(reason) => Item::Problem(Skipped { path, reason }),
        });
    }
}

impl Walk<'_> {
    /// The most entries the walk held at once so far.
    #[cfg(test)]
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }
}

impl Iterator for Walk<'_> {
    type Item = std::result::Result<Listed, Skipped>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let top = self.stack.last_mut()?;
            let Some(item) = top.pop() else {
                self.stack.pop();
                continue;
            };
            self.held -= 1;
            match item {
                Item::Dir(rel) => {
                    let items = self.inv.read_sorted(&rel, self.stat_files);
                    self.held += items.len();
                    self.peak = self.peak.max(self.held);
                    self.stack.push(items);
                }
                Item::File(l) => return Some(Ok(l)),
                Item::Problem(s) => return Some(Err(s)),
            }
        }
    }
}
