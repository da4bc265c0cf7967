//! Point lookups of the newest snapshot from other threads than the scan's: a few read-only
//! connections to the state database, taken and given back per lookup, so that concurrent
//! lookups neither wait for one another nor for a scan.
//!
//! The database is in WAL mode (see [`crate::state::State::open`]): a reader sees the last
//! committed snapshot while a scan writes the next one, and a scan is recorded in one
//! transaction, so a lookup never sees a half-recorded scan.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use resourcesync_model::Hashes;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::parse_mtime;
use crate::error::{Error, Result};

/// Idle connections kept for the next lookups; more lookups at once open more (closed when
/// given back). Lookups run on the server's worker threads, so few are ever open at once.
const IDLE_CONNECTIONS: usize = 8;

/// The page cache of each read connection (KiB): lookups touch a few pages each, and the
/// operating system's cache keeps the rest of the file.
const CACHE_KIB: i64 = 512;

/// What the newest snapshot records of one resource, for serving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Length in bytes when hashed.
    pub length: u64,
    /// Modification time when hashed, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Media type.
    pub mime_type: Option<String>,
    /// Digests.
    pub hashes: Hashes,
}

/// Read-only lookups in a state database (see the module's documentation).
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl Reader {
    /// Lookups in the database at `path` (connections are opened on first use).
    pub fn new(path: &Path) -> Self {
        Reader {
            path: path.to_owned(),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn err(&self, cause: rusqlite::Error) -> Error {
        Error::State {
            path: self.path.clone(),
            cause,
        }
    }

    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| self.err(e))?;
        // A reader waits only while the log's index is rebuilt (after a crash, or when the
        // last other connection closed): briefly.
        conn.busy_timeout(Duration::from_secs(2))
            .map_err(|e| self.err(e))?;
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(|e| self.err(e))?;
        Ok(conn)
    }

    /// What the newest snapshot records at a path (relative, as bytes).
    pub fn recorded(&self, path: &[u8]) -> Result<Option<Recorded>> {
        let taken = self.idle.lock().ok().and_then(|mut v| v.pop());
        let conn = match taken {
            Some(c) => c,
            None => self.connect()?,
        };
        let found = conn
            .prepare_cached(
                "SELECT length, mtime_ns, type, md5, sha1, sha256 FROM resources WHERE path=?1",
            )
            .and_then(|mut s| {
                s.query_row([path], |r| {
                    Ok(Recorded {
                        length: r.get::<_, i64>(0)? as u64,
                        mtime_ns: parse_mtime(r.get_ref(1)?.as_str()?),
                        mime_type: r.get(2)?,
                        hashes: Hashes::from_known(r.get(3)?, r.get(4)?, r.get(5)?),
                    })
                })
                .optional()
            })
            .map_err(|e| self.err(e))?;
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < IDLE_CONNECTIONS {
                idle.push(conn);
            }
        }
        Ok(found)
    }
}
