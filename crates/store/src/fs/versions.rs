//! [`VersionBodies`] of a directory: each body a file under `DEST/.resourcesync/versions`,
//! hard-linked from the copy just placed (no byte copied), or copied where the file system
//! has no hard links (through a temporary file, renamed into place once synced).

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{FsStore, STATE_DIR, SYNC_WHOLE_FS, open_nofollow, sync_dir};
use crate::error::{Error, Result};
use crate::path::RelPath;
use crate::versions::{VERSIONS_DIR, VersionBodies, digest_of_name, version_name};

impl FsStore {
    /// The file of the body named `digest`.
    fn version_path(&self, digest: &str) -> Result<PathBuf> {
        Ok(self.root.join(STATE_DIR).join(version_name(digest)?))
    }

    /// Copies `src` to `dst` through a synced temporary file (a file system without hard
    /// links); whether `dst` was added.
    fn copy_version(&self, src: &Path, dst: &Path) -> Result<bool> {
        let name = format!(
            "dl-version-{}-{}",
            std::process::id(),
            dst.file_name().and_then(|n| n.to_str()).unwrap_or("body")
        );
        let tmp = self.tmp.join(name);
        let mut from = open_nofollow(src).map_err(|e| Error::io(src, e))?;
        let copied = (|| {
            let mut to = fs::File::create(&tmp)?;
            io::copy(&mut from, &mut to)?;
            to.sync_all()
        })();
        if let Err(e) = copied.and_then(|()| fs::rename(&tmp, dst)) {
            let _ = fs::remove_file(&tmp);
            return Err(Error::io(dst, e));
        }
        Ok(true)
    }
}

impl FsStore {
    /// Puts the file `src` at `dst` in place of what is there: linked under a temporary name
    /// beside it, renamed over it (atomic).
    fn relink_version(&self, src: &Path, dst: &Path) -> Result<()> {
        let tmp = dst.with_file_name(format!(
            ".relink-{}-{}",
            std::process::id(),
            dst.file_name().and_then(|n| n.to_str()).unwrap_or("body")
        ));
        let _ = fs::remove_file(&tmp);
        let done = fs::hard_link(src, &tmp).and_then(|()| fs::rename(&tmp, dst));
        if let Err(e) = done {
            let _ = fs::remove_file(&tmp);
            return Err(Error::io(dst, e));
        }
        Ok(())
    }
}

impl VersionBodies for FsStore {
    fn keep(&self, key: &RelPath, digest: &str) -> Result<bool> {
        let dst = self.version_path(digest)?;
        let src = key.under(&self.root);
        let m = fs::symlink_metadata(&src).map_err(|e| Error::io(&src, e))?;
        if !m.is_file() {
            return Err(Error::io(&src, io::Error::other("not a regular file")));
        }
        let dir = dst.parent().unwrap_or(&self.root);
        // `link(2)` of the file itself (a symbolic link put there since is linked as one,
        // and refused by `open_version`): atomic, and refused when the name exists (the body
        // is kept already). Its directory is made the first time one of its bodies is kept.
        let mut linked = fs::hard_link(&src, &dst);
        if linked
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
        {
            resourcesync_fsmode::private_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            linked = fs::hard_link(&src, &dst);
        }
        let added = match linked {
            Ok(()) => true,
            // Kept already: as it should be unless it is not the file it was (a copy edited in
            // place edits the body linked from it; a same-length edit is for an audit of the
            // bodies to find), then the new copy's file takes its name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let same =
                    fs::symlink_metadata(&dst).is_ok_and(|d| d.is_file() && d.len() == m.len());
                if same {
                    return Ok(false);
                }
                self.relink_version(&src, &dst)?;
                true
            }
            Err(_) => {
                if fs::symlink_metadata(&dst).is_ok_and(|m| m.is_file()) {
                    return Ok(false);
                }
                self.copy_version(&src, &dst)?
            }
        };
        if added && !SYNC_WHOLE_FS {
            sync_dir(dir)?;
        }
        Ok(added)
    }

    fn open_version(&self, digest: &str) -> Result<Option<Box<dyn Read + Send>>> {
        let p = self.version_path(digest)?;
        match open_nofollow(&p) {
            Ok(f) => Ok(Some(Box::new(f))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&p, e)),
        }
    }

    fn version_length(&self, digest: &str) -> Result<Option<u64>> {
        let p = self.version_path(digest)?;
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&p, e)),
        }
    }

    fn remove_version(&self, digest: &str) -> Result<bool> {
        let p = self.version_path(digest)?;
        match fs::remove_file(&p) {
            Ok(()) => {
                if !SYNC_WHOLE_FS {
                    sync_dir(p.parent().unwrap_or(&self.root))?;
                }
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io(&p, e)),
        }
    }

    fn versions_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        // `versions/sha256/AB/HEX`: the folders in order, each read whole (a 256th of the
        // bodies), from the one of `after`.
        let after = after
            .map(|d| version_name(d).map(|n| n.rsplit('/').next().unwrap_or_default().to_owned()))
            .transpose()?;
        let top = self.root.join(STATE_DIR).join(VERSIONS_DIR).join("sha256");
        let names = |dir: &Path| -> Result<Vec<String>> {
            match fs::read_dir(dir) {
                Ok(rd) => {
                    let mut v = Vec::new();
                    for e in rd {
                        let e = e.map_err(|e| Error::io(dir, e))?;
                        if let Some(n) = e.file_name().to_str() {
                            v.push(n.to_ascii_lowercase());
                        }
                    }
                    v.sort();
                    Ok(v)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(Error::io(dir, e)),
            }
        };
        let mut out = Vec::new();
        for ab in names(&top)? {
            if ab.len() != 2 || after.as_ref().is_some_and(|a| ab.as_str() < &a[..2]) {
                continue;
            }
            for n in names(&top.join(&ab))? {
                if after.as_ref().is_some_and(|a| n.as_str() <= a.as_str()) || !n.starts_with(&ab) {
                    continue;
                }
                if let Some(d) = digest_of_name(&n) {
                    out.push(d);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use resourcesync_model::{HashAlg, MultiHasher};

    use super::*;
    use crate::conformance::store::put;
    use crate::versions::version_digest;

    /// A copy edited in place (appended to) edits the body linked from it; the next copy of
    /// that body put in place takes the kept body's name again.
    #[test]
    fn a_kept_body_damaged_through_its_copy_is_kept_again_from_the_next_copy() {
        let d = tempfile::tempdir().expect("tmp");
        let s = FsStore::open(d.path()).expect("store");
        let key = RelPath::parse("a.txt").expect("key");
        let body = b"the body";
        let mut h = MultiHasher::new(&[HashAlg::Sha256]);
        h.update(body);
        let digest = version_digest(&h.finish()).expect("sha-256");
        put(&s, &key, body).expect("put");
        assert!(s.keep(&key, &digest).expect("keep"));
        fs::OpenOptions::new()
            .append(true)
            .open(key.under(d.path()))
            .and_then(|mut f| f.write_all(b", edited"))
            .expect("edit in place");
        let read = |s: &FsStore| {
            let mut out = Vec::new();
            s.open_version(&digest)
                .expect("open")
                .expect("kept")
                .read_to_end(&mut out)
                .expect("read");
            out
        };
        assert_eq!(read(&s), b"the body, edited", "one file, linked");
        put(&s, &key, body).expect("put again");
        assert!(s.keep(&key, &digest).expect("keep again"), "kept anew");
        assert_eq!(read(&s), body);
        assert!(
            !s.keep(&key, &digest).expect("keep"),
            "then as it should be"
        );
    }
}
