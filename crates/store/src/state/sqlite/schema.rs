//! The schema of a [`SqliteState`](super::SqliteState): its tables as first made (version 1),
//! and the migrations that take a database from any earlier version to this program's.

use std::path::Path;

use rusqlite::Connection;

use super::sql;
use crate::error::{Error, Result};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS resources(
    uri TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    path TEXT NOT NULL,
    length INTEGER,
    md5 TEXT,
    sha1 TEXT,
    sha256 TEXT,
    lastmod TEXT,
    etag TEXT,
    last_modified TEXT,
    gone INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS resources_source_uri ON resources(source, uri);
CREATE INDEX IF NOT EXISTS resources_path ON resources(path);
CREATE TABLE IF NOT EXISTS sources(
    source TEXT PRIMARY KEY,
    cursor TEXT,
    synced_at TEXT
);
CREATE TABLE IF NOT EXISTS pending(
    source TEXT NOT NULL,
    uri TEXT NOT NULL,
    change TEXT,
    length INTEGER,
    hashes TEXT,
    lastmod TEXT,
    duplicates TEXT,
    error TEXT,
    PRIMARY KEY(source, uri)
);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
INSERT OR IGNORE INTO meta(key, value) VALUES('schema', '1');
";

/// The schema version this program writes.
pub(super) const VERSION: i64 = 5;

/// The migrations, from version 1: `MIGRATIONS[i]` takes a database from version `i + 1` to
/// `i + 2`, in one transaction with the new version number.
pub(super) const MIGRATIONS: &[&str] = &[
    // 2: leases on Sources and work items, for several workers.
    "CREATE TABLE leases(
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        token INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL
    );
    CREATE TABLE work(
        key TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        source TEXT NOT NULL,
        payload TEXT NOT NULL,
        holder TEXT,
        token INTEGER NOT NULL DEFAULT 0,
        expires_ms INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX work_seq ON work(seq);",
    // 3: the documents discovery found, per start URL.
    "CREATE TABLE documents(
        start TEXT NOT NULL,
        role TEXT NOT NULL,
        url TEXT NOT NULL,
        etag TEXT,
        last_modified TEXT,
        PRIMARY KEY(start, role, url)
    );",
    // 4: when every copy was last checked; the rows kept after a delete, indexed apart.
    "ALTER TABLE sources ADD COLUMN checked_at TEXT;
    CREATE INDEX resources_gone ON resources(source, uri) WHERE gone <> 0;",
    // 5: the versions kept of each resource (`state/versions.rs`), and which name a body.
    "CREATE TABLE versions(
        source TEXT NOT NULL,
        uri TEXT NOT NULL,
        seq INTEGER NOT NULL,
        digest TEXT NOT NULL,
        length INTEGER NOT NULL,
        datetime TEXT,
        first_seen TEXT NOT NULL,
        until TEXT,
        deleted INTEGER NOT NULL DEFAULT 0,
        deleted_datetime TEXT,
        PRIMARY KEY(source, uri, seq)
    );
    CREATE INDEX versions_digest ON versions(digest);",
];

/// Creates the schema of version 1 where there is none, then migrates to [`VERSION`]. A
/// database of a newer version is refused, untouched.
pub(super) fn migrate(c: &mut Connection, path: &Path) -> Result<()> {
    let e = |e| sql(path, e);
    c.execute_batch(SCHEMA).map_err(e)?;
    let v: String = c
        .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
            r.get(0)
        })
        .map_err(e)?;
    let v: i64 = v.parse().map_err(|_| Error::Corrupt {
        path: path.to_owned(),
        message: format!("schema version {v:?} is not a number"),
    })?;
    if v > VERSION {
        return Err(Error::NewerSchema {
            target: path.display().to_string(),
            found: v,
            known: VERSION,
        });
    }
    if !(1..=VERSION).contains(&v) {
        return Err(Error::Corrupt {
            path: path.to_owned(),
            message: format!("schema version {v}, this program knows 1 to {VERSION}"),
        });
    }
    for (from, step) in
        (v..VERSION).zip(MIGRATIONS.iter().skip(usize::try_from(v - 1).unwrap_or(0)))
    {
        let tx = c.transaction().map_err(e)?;
        tx.execute_batch(step).map_err(e)?;
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema'",
            [(from + 1).to_string()],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
    }
    Ok(())
}
