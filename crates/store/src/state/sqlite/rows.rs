//! The rows of the SQLite state as records and back: the column lists, the conversions of
//! column values (shared with the PostgreSQL state), and a resource's row written.

use resourcesync_model::{Change, HashAlg, Hashes, W3cDateTime};
use rusqlite::{Connection, params};

use crate::state::{PendingChange, ResourceRecord, VersionRecord};

pub(in crate::state) fn opt_u64(v: Option<i64>) -> Option<u64> {
    v.and_then(|n| u64::try_from(n).ok())
}

pub(in crate::state) fn to_i64(v: Option<u64>) -> Option<i64> {
    v.and_then(|n| i64::try_from(n).ok())
}

pub(in crate::state) fn parse_dt(s: Option<String>) -> Option<W3cDateTime> {
    s.and_then(|s| W3cDateTime::parse(&s).ok())
}

pub(in crate::state) fn encode_dups(d: &[(u32, String)]) -> String {
    crate::state::encode_duplicates(d)
}

pub(in crate::state) fn decode_dups(s: Option<String>) -> Vec<(u32, String)> {
    crate::state::decode_duplicates(s.as_deref().unwrap_or_default())
}

fn digest_of(h: &Hashes, alg: HashAlg) -> Option<String> {
    h.value_of(&alg)
}

pub(super) const RESOURCE_COLS: &str =
    "uri, source, path, length, md5, sha1, sha256, lastmod, etag, last_modified, gone";

/// Writes the row of `r`, replacing the row of its URI.
///
/// Most rows replace one of the same Source and path (a copy's placeholder, then its row; an
/// update): those are updated in place, which leaves the indexes on `uri`, `(source, uri)` and
/// `path` as they are. `INSERT OR REPLACE` deletes the old row and inserts a new one, writing
/// every index twice; it stays for the others (a new URI, a row moving to another Source or
/// path).
pub(super) fn put_row(c: &Connection, r: &ResourceRecord) -> rusqlite::Result<()> {
    let (md5, sha1, sha256) = (
        digest_of(&r.hashes, HashAlg::Md5),
        digest_of(&r.hashes, HashAlg::Sha1),
        digest_of(&r.hashes, HashAlg::Sha256),
    );
    let lastmod = r.lastmod.map(|d| d.to_string());
    let p = params![
        r.uri,
        r.source,
        r.path,
        to_i64(r.length),
        md5,
        sha1,
        sha256,
        lastmod,
        r.etag,
        r.last_modified,
        i64::from(r.gone),
    ];
    let upsert = c.prepare_cached(
        "INSERT INTO resources(uri, source, path, length, md5, sha1, sha256, lastmod, etag, \
         last_modified, gone) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT(uri) DO UPDATE SET length = excluded.length, md5 = excluded.md5, \
         sha1 = excluded.sha1, sha256 = excluded.sha256, lastmod = excluded.lastmod, \
         etag = excluded.etag, last_modified = excluded.last_modified, gone = excluded.gone \
         WHERE source = excluded.source AND path = excluded.path",
    );
    if upsert?.execute(p)? == 1 {
        return Ok(());
    }
    // The URI's row is another Source's or another path's.
    c.prepare_cached(&format!(
        "INSERT OR REPLACE INTO resources({RESOURCE_COLS}) \
         VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
    ))?
    .execute(p)
    .map(drop)
}

pub(super) fn row_to_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<ResourceRecord> {
    Ok(ResourceRecord {
        uri: row.get(0)?,
        source: row.get(1)?,
        path: row.get(2)?,
        length: opt_u64(row.get(3)?),
        hashes: Hashes::from_known(row.get(4)?, row.get(5)?, row.get(6)?),
        lastmod: parse_dt(row.get(7)?),
        etag: row.get(8)?,
        last_modified: row.get(9)?,
        gone: row.get::<_, i64>(10)? != 0,
    })
}

/// The columns of a version, in the order [`row_to_version`] reads them.
pub(super) const VERSION_COLS: &str = "source, uri, seq, digest, length, datetime, first_seen, until, \
     deleted, deleted_datetime";

pub(super) fn row_to_version(row: &rusqlite::Row<'_>) -> rusqlite::Result<VersionRecord> {
    let first_seen: String = row.get(6)?;
    Ok(VersionRecord {
        source: row.get(0)?,
        uri: row.get(1)?,
        seq: opt_u64(row.get(2)?).unwrap_or(0),
        digest: row.get(3)?,
        length: opt_u64(row.get(4)?).unwrap_or(0),
        datetime: parse_dt(row.get(5)?),
        first_seen: W3cDateTime::parse(&first_seen).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, Box::new(e))
        })?,
        until: parse_dt(row.get(7)?),
        deleted: row.get::<_, i64>(8)? != 0,
        deleted_datetime: parse_dt(row.get(9)?),
    })
}

pub(super) fn row_to_pending(row: &rusqlite::Row<'_>) -> rusqlite::Result<PendingChange> {
    let hashes: Option<String> = row.get(4)?;
    Ok(PendingChange {
        source: row.get(0)?,
        uri: row.get(1)?,
        change: row.get::<_, Option<String>>(2)?.map(|c| Change::parse(&c)),
        length: opt_u64(row.get(3)?),
        hashes: hashes.map(|h| Hashes::parse(&h).0).unwrap_or_default(),
        lastmod: parse_dt(row.get(5)?),
        duplicates: decode_dups(row.get(6)?),
        error: row.get::<_, Option<String>>(7)?.unwrap_or_default(),
    })
}
