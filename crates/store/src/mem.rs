//! [`MemStore`]: the [`Store`] port in memory, for tests, dry runs and the simulator. Nothing
//! survives the process ([`Features::crash_safe`] is `false`).

use std::any::Any;
use std::collections::BTreeMap;
use std::io::{Cursor, Read};
use std::ops::{Bound, ControlFlow};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use resourcesync_model::Hashes;

use crate::error::{Error, Result};
use crate::features::Features;
use crate::object::{
    Expect, Finished, ObjectMeta, Placed, Store, Upload, UploadSink, foreign_upload,
};
use crate::path::RelPath;
use crate::versions::{VersionBodies, version_name};

/// One object.
#[derive(Debug, Clone)]
struct Object {
    body: Arc<[u8]>,
    modified: SystemTime,
    hashes: Hashes,
    uri: Option<String>,
}

/// Objects in a map in memory, in key order.
#[derive(Debug, Default)]
pub struct MemStore {
    objects: Mutex<BTreeMap<RelPath, Object>>,
    /// The bodies of versions, by their name ([`crate::versions::version_name`]).
    versions: Mutex<BTreeMap<String, Arc<[u8]>>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        MemStore::default()
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<RelPath, Object>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An upload's bytes (bounded by the upload's limit, which is checked before each write).
#[derive(Debug, Default)]
struct MemSink(Vec<u8>, Option<String>);

/// A sealed body.
#[derive(Debug)]
struct MemBody {
    body: Vec<u8>,
    modified: Option<SystemTime>,
    uri: Option<String>,
}

impl UploadSink for MemSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<()> {
        self.0.extend_from_slice(buf);
        Ok(())
    }

    fn seal(self: Box<Self>, modified: Option<SystemTime>) -> Result<Box<dyn Any + Send>> {
        Ok(Box::new(MemBody {
            body: self.0,
            modified,
            uri: self.1,
        }))
    }
}

fn meta(o: &Object) -> ObjectMeta {
    ObjectMeta {
        length: o.body.len() as u64,
        modified: Some(o.modified),
        hashes: o.hashes.clone(),
        regular: true,
        uri: o.uri.clone(),
    }
}

fn not_found(key: &RelPath) -> Error {
    Error::Io {
        path: key.as_str().into(),
        cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no such object"),
    }
}

/// Keys listed per lock of the map: `f` runs without the lock (it may use the store).
const LIST_CHUNK: usize = 256;

impl Store for MemStore {
    fn features(&self) -> Features<'_> {
        Features::new()
            .finish_blocks(false)
            .in_place(true)
            .versions(self)
    }

    fn begin(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        let sink = MemSink(Vec::new(), expect.uri.clone());
        Ok(Upload::new(key.clone(), expect, Box::new(sink)))
    }

    fn place(&self, batch: Vec<Finished>) -> Vec<Result<Placed>> {
        batch
            .into_iter()
            .map(|f| {
                let (key, body, committed) = f.into_parts();
                let b = body
                    .downcast::<MemBody>()
                    .map_err(|_| foreign_upload(&key))?;
                let o = Object {
                    body: Arc::from(b.body),
                    modified: b.modified.unwrap_or_else(SystemTime::now),
                    hashes: committed.hashes.clone(),
                    uri: b.uri,
                };
                let replaced = self.lock().insert(key, o).is_some();
                Ok(Placed {
                    committed,
                    replaced,
                })
            })
            .collect()
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn get(&self, key: &RelPath) -> Result<Box<dyn Read + Send>> {
        let o = self
            .lock()
            .get(key)
            .cloned()
            .ok_or_else(|| not_found(key))?;
        Ok(Box::new(Cursor::new(o.body)))
    }

    fn head(&self, key: &RelPath) -> Result<Option<ObjectMeta>> {
        Ok(self.lock().get(key).map(meta))
    }

    fn delete(&self, key: &RelPath) -> Result<bool> {
        Ok(self.lock().remove(key).is_some())
    }

    fn list(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<(RelPath, ObjectMeta)>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let mut from = after.cloned();
        loop {
            let chunk: Vec<(RelPath, ObjectMeta)> = {
                let m = self.lock();
                let lower = match &from {
                    Some(k) => Bound::Excluded(k),
                    None => Bound::Unbounded,
                };
                m.range::<RelPath, _>((lower, Bound::Unbounded))
                    .take(LIST_CHUNK)
                    .map(|(k, o)| (k.clone(), meta(o)))
                    .collect()
            };
            let Some((last, _)) = chunk.last() else {
                return Ok(());
            };
            from = Some(last.clone());
            for item in chunk {
                if f(Ok(item))?.is_break() {
                    return Ok(());
                }
            }
        }
    }

    fn set_modified(&self, key: &RelPath, t: SystemTime) -> Result<bool> {
        let mut m = self.lock();
        let o = m.get_mut(key).ok_or_else(|| not_found(key))?;
        o.modified = t;
        Ok(true)
    }
}

impl MemStore {
    fn version_bodies(&self) -> MutexGuard<'_, BTreeMap<String, Arc<[u8]>>> {
        self.versions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The bytes of the object at a key are shared with the version (they are never changed in
/// place: a put replaces the object).
impl VersionBodies for MemStore {
    fn keep(&self, key: &RelPath, digest: &str) -> Result<bool> {
        let name = version_name(digest)?;
        if self.version_bodies().contains_key(&name) {
            return Ok(false);
        }
        let body = self
            .lock()
            .get(key)
            .map(|o| o.body.clone())
            .ok_or_else(|| not_found(key))?;
        Ok(self.version_bodies().insert(name, body).is_none())
    }

    fn open_version(&self, digest: &str) -> Result<Option<Box<dyn Read + Send>>> {
        let name = version_name(digest)?;
        Ok(self
            .version_bodies()
            .get(&name)
            .map(|b| Box::new(Cursor::new(b.clone())) as Box<dyn Read + Send>))
    }

    fn version_length(&self, digest: &str) -> Result<Option<u64>> {
        let name = version_name(digest)?;
        Ok(self.version_bodies().get(&name).map(|b| b.len() as u64))
    }

    fn remove_version(&self, digest: &str) -> Result<bool> {
        let name = version_name(digest)?;
        Ok(self.version_bodies().remove(&name).is_some())
    }

    fn versions_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>> {
        let start = after.map(version_name).transpose()?;
        let bodies = self.version_bodies();
        Ok(bodies
            .keys()
            .filter(|n| start.as_ref().is_none_or(|s| *n > s))
            .filter_map(|n| {
                n.rsplit('/')
                    .next()
                    .and_then(crate::versions::digest_of_name)
            })
            .take(limit)
            .collect())
    }
}
