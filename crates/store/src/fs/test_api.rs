//! The file-level steps behind the [`crate::Store`] port of [`FsStore`], called one by one
//! by the unit tests of `fs` (the port strings them together: `fs/object.rs`).

use std::io::Write;

use resourcesync_model::MultiHasher;

use super::*;

/// A body being received: a temporary file that counts, hashes and caps what is written.
#[derive(Debug)]
pub(crate) struct TempFile {
    out: BufWriter<Sink>,
    hasher: MultiHasher,
    expect: Expect,
    written: u64,
}

impl TempFile {
    /// Appends bytes. Fails, keeping nothing, once the body would pass its limit.
    pub(crate) fn write(&mut self, buf: &[u8]) -> Result<()> {
        let (limit, what) = self.expect.limit();
        let total = self.written.saturating_add(buf.len() as u64);
        if total > limit {
            return Err(Error::TooLong { limit, what });
        }
        self.out
            .write_all(buf)
            .map_err(|e| Error::io(self.out.get_ref().path(), e))?;
        self.hasher.update(buf);
        self.written = total;
        Ok(())
    }
}

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileMeta {
    /// Size in bytes.
    pub length: u64,
    /// Its modification time, where the file system gives one.
    pub modified: Option<SystemTime>,
    /// Whether it is a regular file (else a symbolic link or something else that is not a
    /// directory).
    pub is_file: bool,
}

/// A [`TempFile`] writing to `sink`.
fn temp_file(sink: Sink, expect: Expect) -> TempFile {
    let algs = expect.algs();
    TempFile {
        out: buffered(sink, &expect),
        hasher: MultiHasher::new(&algs),
        expect,
        written: 0,
    }
}

impl FsStore {
    /// Starts receiving the body of the copy at `rel`, which is expected to be new (no file at
    /// `rel`): on Linux, an unnamed temporary file (`O_TMPFILE`) in the directory of `rel`
    /// (created as needed, never through a symbolic link), named by [`FsStore::place_in`] with one
    /// `linkat(2)` (see the `anon` module); elsewhere, when unnamed files are not supported or
    /// too many are open, or with [`FsStore::with_unnamed_temps`]`(false)`, a named temporary
    /// file as [`FsStore::create_temp`]. A file found at `rel` after all is replaced as usual.
    /// `dirs` keeps the directories opened: keep one for a package or a batch. Dropped without
    /// being placed (a refused body), the file takes away the directories created for it that
    /// are empty and in which no other unnamed file is in flight (never one that was there
    /// before or into which a copy was placed).
    pub(crate) fn create_temp_at(
        &self,
        expect: Expect,
        rel: &RelPath,
        dirs: &mut DirHandles,
    ) -> Result<TempFile> {
        #[cfg(target_os = "linux")]
        if let Some(a) = &self.anon {
            if let Some(f) = a.create(&self.root, &self.tmp, rel, dirs)? {
                return Ok(temp_file(Sink::Anon(f), expect));
            }
        }
        let _ = (rel, dirs);
        self.create_temp(expect)
    }

    /// Starts receiving a body.
    pub(crate) fn create_temp(&self, expect: Expect) -> Result<TempFile> {
        Ok(temp_file(self.named_sink()?, expect))
    }

    /// Verifies a received body and puts it at `rel` atomically and durably (the file and its
    /// directory synced): [`FsStore::verify`], [`FsStore::sync`], [`FsStore::place`], [`FsStore::sync`].
    pub(crate) fn commit(&self, tmp: TempFile, rel: &RelPath) -> Result<Committed> {
        let v = self.verify(tmp)?;
        let rels = std::slice::from_ref(rel);
        self.sync(&[])?;
        let c = self.place(v, rel)?;
        self.sync(rels)?;
        Ok(c)
    }

    /// Flushes a received body and checks it against its length and digests, without waiting
    /// for the disk or putting it in place.
    pub(crate) fn verify(&self, tmp: TempFile) -> Result<Verified> {
        let TempFile {
            out,
            hasher,
            expect,
            written,
        } = tmp;
        let held = seal(out, expect.modified)?;
        let hashes = hasher.finish();
        // Z39.99-2014 §7: `length` and every `hash` value describe the representation.
        expect.verify(written, &hashes)?;
        Ok(Verified {
            held,
            committed: Committed {
                length: written,
                hashes,
            },
        })
    }

    /// Puts a verified body at `rel` (a rename), without waiting for the disk. Call
    /// [`FsStore::sync`] before, so that the data is on disk before the name, and after, before
    /// recording the copy anywhere.
    pub(crate) fn place(&self, v: Verified, rel: &RelPath) -> Result<Committed> {
        let path = match v.held {
            Held::Named(p) => p,
            #[cfg(target_os = "linux")]
            Held::Anon(f) => {
                self.place_anon(f)?;
                return Ok(v.committed);
            }
        };
        self.parents(rel, true)?;
        let target = rel.under(&self.root);
        if let Ok(m) = fs::symlink_metadata(&target) {
            if m.is_dir() {
                return Err(Error::Conflict {
                    path: target,
                    reason: "a directory is where the file goes",
                });
            }
        }
        match path.persist(&target) {
            Ok(_) => {}
            // The directory went since it was checked (a delete emptied it meanwhile): made
            // again, once (as `place_in` does, where the window is a whole batch and tested).
            Err(e) if e.error.kind() == io::ErrorKind::NotFound && e.path.exists() => {
                self.parents(rel, true)?;
                e.path
                    .persist(&target)
                    .map_err(|e| Error::io(&target, e.error))?;
            }
            Err(e) => return Err(Error::io(&target, e.error)),
        }
        Ok(v.committed)
    }

    /// What is at `rel`, if anything (directories count as nothing).
    pub(crate) fn stat(&self, rel: &RelPath) -> Result<Option<FileMeta>> {
        if !self.parents(rel, false)? {
            return Ok(None);
        }
        let target = rel.under(&self.root);
        match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => Ok(None),
            Ok(m) => Ok(Some(FileMeta {
                length: m.len(),
                modified: m.modified().ok(),
                is_file: m.is_file(),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&target, e)),
        }
    }

    /// Every copy, in no particular order (the Destination's own folder left out). Names that
    /// are not valid [`RelPath`]s are passed as errors.
    pub(crate) fn list(
        &self,
        f: &mut dyn FnMut(Result<(RelPath, FileMeta)>) -> Result<()>,
    ) -> Result<()> {
        // Depth-first, without following symbolic links; one directory handle open at a time
        // per level.
        let mut stack: Vec<(PathBuf, String)> = vec![(self.root.clone(), String::new())];
        while let Some((dir, prefix)) = stack.pop() {
            let rd = fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
            for e in rd {
                let e = e.map_err(|e| Error::io(&dir, e))?;
                let name = e.file_name();
                let Some(name) = name.to_str() else {
                    f(Err(Error::UnsafePath {
                        path: e.path().display().to_string(),
                        reason: "file name is not UTF-8",
                    }))?;
                    continue;
                };
                let Some(rel) = child_rel(&prefix, name) else {
                    continue;
                };
                let ft = e.file_type().map_err(|err| Error::io(e.path(), err))?;
                if ft.is_dir() {
                    stack.push((e.path(), rel));
                    continue;
                }
                let meta = e.metadata().ok();
                let len = meta.as_ref().map_or(0, |m| m.len());
                let modified = meta.and_then(|m| m.modified().ok());
                let item = RelPath::parse(&rel).map_err(Error::from).map(|p| {
                    (
                        p,
                        FileMeta {
                            length: len,
                            modified,
                            is_file: ft.is_file(),
                        },
                    )
                });
                f(item)?;
            }
        }
        Ok(())
    }
}
