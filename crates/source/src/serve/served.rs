//! What the server knows of a recorded resource: the size and modification time it had when it
//! was hashed, its strong `ETag` (from the recorded digest) and its `Content-Type`, as ready
//! header values.
//!
//! Looked up in the state database (the newest snapshot, by path: [`crate::state::Reader`]),
//! behind a bounded cache of the most recently served paths, so that memory does not grow with
//! the number of resources. The cache is emptied after every scan that changed
//! something (see [`crate::serve::watch::Publisher`]); a lookup that raced with such a scan is
//! not cached, so no entry outlives the scan that changed its resource.

use std::path::Path;
use std::sync::Mutex;

use axum::http::HeaderValue;
use hashlink::LruCache;
use resourcesync_model::{HashAlg, Hashes};

use crate::state::{Reader, Recorded};

/// Paths whose lookups are kept (found or not): about 250 bytes each, 16 MB at most. Every
/// path of a Source up to that size stays cached, so that it is served as fast as from the map
/// of every resource this replaced (a miss costs a lookup in the state, about 10 µs more: 25-30%
/// fewer requests per second on a load where every request misses); past it, memory stays
/// bounded whatever the number of resources.
pub(crate) const CACHED_PATHS: usize = 65_536;

/// What is served for one recorded resource.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    /// Size when hashed.
    pub(crate) length: u64,
    /// Modification time when hashed (nanoseconds since the epoch).
    pub(crate) mtime_ns: i128,
    /// The strong validator from the recorded digest (valid while size and time are as
    /// recorded), if a digest was recorded.
    pub(crate) etag: Option<HeaderValue>,
    /// The recorded media type, if valid as a header value.
    pub(crate) content_type: Option<HeaderValue>,
    /// `Last-Modified` for the recorded modification time.
    pub(crate) last_modified: Option<HeaderValue>,
}

impl Served {
    fn of(r: Recorded) -> Self {
        Served {
            length: r.length,
            mtime_ns: r.mtime_ns,
            etag: digest_etag(&r.hashes).and_then(|t| HeaderValue::from_str(&t).ok()),
            content_type: r
                .mime_type
                .as_deref()
                .and_then(|t| HeaderValue::from_str(t).ok()),
            last_modified: crate::serve::http_date_value(
                r.mtime_ns.div_euclid(1_000_000_000) as i64
            ),
        }
    }
}

/// The strong entity tag of a digest (`"md5-…"`), preferring the strongest recorded.
pub(crate) fn digest_etag(hashes: &Hashes) -> Option<String> {
    [HashAlg::Sha256, HashAlg::Md5, HashAlg::Sha1]
        .iter()
        .find_map(|alg| {
            hashes
                .get(alg)
                .map(|d| format!("\"{}-{}\"", alg.token(), d.value))
        })
}

#[derive(Debug)]
struct Cache {
    /// Bumped by every [`ServedIndex::invalidate`].
    generation: u64,
    entries: LruCache<Box<[u8]>, Option<Served>>,
}

/// The recorded resources, by path relative to the Source directory (as bytes).
#[derive(Debug)]
pub(crate) struct ServedIndex {
    reader: Reader,
    cache: Mutex<Cache>,
}

impl ServedIndex {
    /// Lookups in the state database at `state` (opened on first use).
    pub(crate) fn new(state: &Path) -> Self {
        ServedIndex::with_capacity(state, CACHED_PATHS)
    }

    /// [`ServedIndex::new`] keeping at most `paths` lookups.
    pub(crate) fn with_capacity(state: &Path, paths: usize) -> Self {
        ServedIndex {
            reader: Reader::new(state),
            cache: Mutex::new(Cache {
                generation: 0,
                entries: LruCache::new(paths.max(1)),
            }),
        }
    }

    /// The recorded resource at a relative path, as of the last committed scan (none when the
    /// state cannot be read: the response then does without the recorded digest and type).
    pub(crate) fn get(&self, rel: &[u8]) -> Option<Served> {
        let generation = {
            let mut c = self.cache.lock().ok()?;
            if let Some(hit) = c.entries.get(rel) {
                return hit.clone();
            }
            c.generation
        };
        let found = match self.reader.recorded(rel) {
            Ok(r) => r.map(Served::of),
            Err(e) => {
                tracing::warn!("serving without the recorded digest: {e}");
                return None;
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            // A scan committed meanwhile: what was read may be older than it.
            if c.generation == generation {
                c.entries.insert(rel.into(), found.clone());
            }
        }
        found
    }

    /// Forgets every cached lookup: called after a scan committed changes.
    pub(crate) fn invalidate(&self) {
        if let Ok(mut c) = self.cache.lock() {
            c.generation += 1;
            c.entries.clear();
        }
    }

    /// Paths whose lookups are cached now (at most its capacity).
    #[cfg(test)]
    pub(crate) fn cached(&self) -> usize {
        self.cache.lock().map_or(0, |c| c.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state database recording `n` resources `f00000`…, of length `i`.
    fn state_with(dir: &Path, n: usize) -> std::path::PathBuf {
        let path = dir.join("state.sqlite");
        let state = crate::state::State::open(&path).expect("open");
        let mut conn = rusqlite::Connection::open(&path).expect("connect");
        let tx = conn.transaction().expect("begin");
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO resources(path, uri, length, mtime_ns, lastmod, type, md5)
                     VALUES(?1, '', ?2, '1000000000', '1970-01-01T00:00:01Z', 'text/plain', ?3)",
                )
                .expect("prepare");
            for i in 0..n {
                insert
                    .execute(rusqlite::params![
                        format!("f{i:05}").into_bytes(),
                        i as i64,
                        format!("{i:032x}")
                    ])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
        drop(state);
        path
    }

    /// Memory does not grow with the resources served: many distinct paths asked, and the
    /// cache holds at most its capacity of them; each answer is still the recorded one.
    #[test]
    fn the_cache_stays_bounded_under_many_distinct_requests() {
        const CAP: usize = 4096;
        let dir = tempfile::tempdir().expect("tempdir");
        let n = CAP * 2 + 100;
        let index = ServedIndex::with_capacity(&state_with(dir.path(), n), CAP);
        for i in 0..n {
            let s = index.get(format!("f{i:05}").as_bytes()).expect("recorded");
            assert_eq!(s.length, i as u64);
            assert_eq!(s.mtime_ns, 1_000_000_000);
            let tag = format!("\"md5-{i:032x}\"");
            assert_eq!(s.etag.as_ref().map(|t| t.as_bytes()), Some(tag.as_bytes()));
            assert_eq!(
                s.content_type.as_ref().map(|t| t.as_bytes()),
                Some(&b"text/plain"[..])
            );
            // Paths not recorded are cached too, and bounded likewise.
            assert!(index.get(format!("missing{i}").as_bytes()).is_none());
            assert!(index.cached() <= CAP, "{}", index.cached());
        }
        assert_eq!(index.cached(), CAP);
        // The most recent paths are the ones kept: asked again, answered from the cache.
        assert!(index.get(format!("f{:05}", n - 1).as_bytes()).is_some());
        index.invalidate();
        assert_eq!(index.cached(), 0);
    }

    /// A lookup cached before a scan committed a change is not served after it.
    #[test]
    fn invalidate_forgets_what_a_scan_changed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = state_with(dir.path(), 3);
        let index = ServedIndex::new(&path);
        assert_eq!(index.get(b"f00001").map(|s| s.length), Some(1));
        assert!(index.get(b"f00009").is_none());
        let conn = rusqlite::Connection::open(&path).expect("connect");
        conn.execute_batch(
            "UPDATE resources SET length=42 WHERE path=CAST('f00001' AS BLOB);
             INSERT INTO resources(path, uri, length, mtime_ns, lastmod)
               VALUES(CAST('f00009' AS BLOB), '', 9, '0', '1970-01-01T00:00:00Z');",
        )
        .expect("change");
        index.invalidate();
        assert_eq!(index.get(b"f00001").map(|s| s.length), Some(42));
        assert_eq!(index.get(b"f00009").map(|s| s.length), Some(9));
    }
}
