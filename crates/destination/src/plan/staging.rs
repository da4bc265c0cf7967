//! Staging: lists from the Source, kept on disk in a scratch SQLite database so that a list of a
//! million entries is never held in memory. Entries are upserted by URI (so several changes of
//! one URI collapse to the last, Z39.99-2014 §12.1), then read back in URI order (for the diff)
//! or in the order of their last occurrence (for applying changes in order).

use std::cell::Cell;
use std::path::Path;

use resourcesync_diff::Item;
use resourcesync_model::{Change, Entry, Hashes, W3cDateTime};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};

/// One entry of a list, as staged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StagedItem {
    /// `<loc>`.
    pub uri: String,
    /// The change, for Change List entries.
    pub change: Option<Change>,
    /// The published length.
    pub length: Option<u64>,
    /// The published digests.
    pub hashes: Hashes,
    /// `<lastmod>`.
    pub lastmod: Option<W3cDateTime>,
    /// The time of the change event (`datetime`, else `<lastmod>`).
    pub ctime: Option<W3cDateTime>,
    /// Mirrors (`duplicate` links, Z39.99-2014 §14.2) as (priority, href).
    pub duplicates: Vec<(u32, String)>,
    /// The path under DEST it maps to (when known).
    pub path: Option<String>,
    /// A patch link (Z39.99-2014 §14.4), for change entries.
    pub patch: Option<PatchLink>,
}

impl StagedItem {
    /// The staged form of an entry.
    pub(crate) fn from_entry(e: &Entry) -> Self {
        StagedItem {
            uri: e.loc.clone(),
            change: e.change().cloned(),
            length: e.length(),
            hashes: e.hashes().cloned().unwrap_or_default(),
            lastmod: e.lastmod,
            ctime: e.change_time().copied(),
            duplicates: e
                .links
                .iter()
                .filter(|l| l.has_rel("duplicate"))
                .map(|l| (l.priority(), l.href.clone()))
                .collect(),
            path: None,
            patch: PatchLink::from_entry(e),
        }
    }

    /// What the diff engine compares.
    pub(crate) fn item(&self) -> Item {
        Item {
            uri: self.uri.clone(),
            length: self.length,
            lastmod: self.lastmod,
            hashes: self.hashes.clone(),
        }
    }
}

/// The scratch database.
#[derive(Debug)]
pub(crate) struct Staging {
    conn: Connection,
    seq: i64,
    in_tx: u32,
    /// Whether the index on `seq` exists.
    seq_index: Cell<bool>,
    /// Whether the index on `path` exists.
    path_index: Cell<bool>,
    _file: tempfile::TempPath,
}

fn dt(s: Option<String>) -> Option<W3cDateTime> {
    s.and_then(|s| W3cDateTime::parse(&s).ok())
}

fn encode_dups(d: &[(u32, String)]) -> Option<String> {
    (!d.is_empty()).then(|| resourcesync_store::state::encode_duplicates(d))
}

fn decode_dups(s: Option<String>) -> Vec<(u32, String)> {
    resourcesync_store::state::decode_duplicates(s.as_deref().unwrap_or_default())
}

const COLS: &str = "uri, change, length, hashes, lastmod, ctime, dups, path, seq, patch";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, StagedItem)> {
    let hashes: Option<String> = r.get(3)?;
    Ok((
        r.get(8)?,
        StagedItem {
            uri: r.get(0)?,
            change: r.get::<_, Option<String>>(1)?.map(|c| Change::parse(&c)),
            length: r
                .get::<_, Option<i64>>(2)?
                .and_then(|n| u64::try_from(n).ok()),
            hashes: hashes.map(|h| Hashes::parse(&h).0).unwrap_or_default(),
            lastmod: dt(r.get(4)?),
            ctime: dt(r.get(5)?),
            duplicates: decode_dups(r.get(6)?),
            path: r.get(7)?,
            patch: r
                .get::<_, Option<String>>(9)?
                .and_then(|p| PatchLink::decode(&p)),
        },
    ))
}

impl Staging {
    /// A new, empty scratch database in `dir` (removed when dropped).
    pub(crate) fn create(dir: &Path) -> Result<Self> {
        let file = tempfile::Builder::new()
            .prefix("staging-")
            .suffix(".sqlite")
            .tempfile_in(dir)
            .map_err(|e| {
                Error::io(
                    format!("creating a staging database in {}", dir.display()),
                    e,
                )
            })?
            .into_temp_path();
        let conn = Connection::open(&file)?;
        conn.execute_batch(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA temp_store=FILE;
             PRAGMA locking_mode=EXCLUSIVE;
             CREATE TABLE items(uri TEXT PRIMARY KEY, change TEXT, length INTEGER, hashes TEXT,
                 lastmod TEXT, ctime TEXT, dups TEXT, path TEXT, seq INTEGER NOT NULL,
                 patch TEXT);",
        )?;
        Ok(Staging {
            conn,
            seq: 0,
            in_tx: 0,
            seq_index: Cell::new(false),
            path_index: Cell::new(false),
            _file: file,
        })
    }

    fn batch(&mut self) -> Result<()> {
        if self.in_tx == 0 {
            self.conn.execute_batch("BEGIN")?;
        }
        self.in_tx += 1;
        if self.in_tx >= 10_000 {
            self.flush()?;
        }
        Ok(())
    }

    /// Commits what was staged so far.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.in_tx > 0 {
            self.conn.execute_batch("COMMIT")?;
            self.in_tx = 0;
        }
        Ok(())
    }

    /// Stages an item, replacing one with the same URI; it becomes the last in order.
    pub(crate) fn upsert(&mut self, it: &StagedItem) -> Result<()> {
        self.batch()?;
        self.seq += 1;
        self.conn
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO items({COLS}) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
            ))?
            .execute(params![
                it.uri,
                it.change.as_ref().map(|c| c.as_str().to_owned()),
                it.length.and_then(|n| i64::try_from(n).ok()),
                (!it.hashes.is_empty()).then(|| it.hashes.to_string()),
                it.lastmod.map(|d| d.to_string()),
                it.ctime.map(|d| d.to_string()),
                encode_dups(&it.duplicates),
                it.path,
                self.seq,
                it.patch.as_ref().map(PatchLink::encode),
            ])?;
        Ok(())
    }

    /// Removes an item.
    pub(crate) fn remove(&mut self, uri: &str) -> Result<()> {
        self.batch()?;
        self.conn
            .prepare_cached("DELETE FROM items WHERE uri = ?1")?
            .execute([uri])?;
        Ok(())
    }

    /// The item of a URI.
    pub(crate) fn get(&self, uri: &str) -> Result<Option<StagedItem>> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {COLS} FROM items WHERE uri = ?1"))?
            .query_row([uri], row)
            .optional()?
            .map(|(_, it)| it))
    }

    /// Creates an index the first time a read needs it: lists are staged whole before they are
    /// read, and one index built over a full table costs less than one kept up by every insert.
    fn index(&self, built: &Cell<bool>, sql: &str) -> Result<()> {
        if !built.get() {
            self.conn.execute_batch(sql)?;
            built.set(true);
        }
        Ok(())
    }

    /// Whether some item maps to this path.
    pub(crate) fn has_path(&self, path: &str) -> Result<bool> {
        self.index(
            &self.path_index,
            "CREATE INDEX IF NOT EXISTS items_path ON items(path)",
        )?;
        Ok(self
            .conn
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM items WHERE path = ?1)")?
            .query_row([path], |r| r.get::<_, i64>(0))?
            != 0)
    }

    /// How many items.
    pub(crate) fn count(&self) -> Result<u64> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM items", [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Up to `limit` items after a URI (from the first with `None`), in URI (byte) order.
    pub(crate) fn page_by_uri(&self, after: Option<&str>, limit: usize) -> Result<Vec<StagedItem>> {
        let mut st = self
            .conn
            .prepare_cached(&page_by_uri_sql(after.is_none()))?;
        let after = after.unwrap_or("");
        let rows = st.query_map(
            params![after, i64::try_from(limit).unwrap_or(i64::MAX)],
            row,
        )?;
        Ok(rows
            .map(|r| r.map(|(_, it)| it))
            .collect::<rusqlite::Result<_>>()?)
    }

    /// Up to `limit` items after a position, in the order they were (last) staged.
    pub(crate) fn page_by_seq(&self, after: i64, limit: usize) -> Result<Vec<(i64, StagedItem)>> {
        self.index(
            &self.seq_index,
            "CREATE INDEX IF NOT EXISTS items_seq ON items(seq)",
        )?;
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {COLS} FROM items WHERE seq > ?1 ORDER BY seq LIMIT ?2"
        ))?;
        let rows = st.query_map(
            params![after, i64::try_from(limit).unwrap_or(i64::MAX)],
            row,
        )?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// A page after `?1` (or from `''` with `first`: every text is `>= ''`) in URI order. A condition
/// such as `(?1 IS NULL OR uri > ?1)` would keep SQLite from seeking in the primary key: each
/// page would scan from the first row, and reading every item a page at a time would take time
/// quadratic in their number (a 1,000,000-entry list in pages of 1,000).
fn page_by_uri_sql(first: bool) -> String {
    let op = if first { ">=" } else { ">" };
    format!("SELECT {COLS} FROM items WHERE uri {op} ?1 ORDER BY uri LIMIT ?2")
}

/// The relation type of a patch link (Z39.99-2014 §14.4).
pub(crate) const PATCH_REL: &str = "http://www.openarchives.org/rs/terms/patch";

/// A patch link of a change entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PatchLink {
    /// Where the patch is.
    pub href: String,
    /// Its media type.
    pub mime_type: Option<String>,
    /// Its published length.
    pub length: Option<u64>,
    /// Its published digests.
    pub hashes: Hashes,
}

impl PatchLink {
    /// The first patch link of an entry, if any.
    pub(crate) fn from_entry(e: &Entry) -> Option<PatchLink> {
        e.links
            .iter()
            .find(|l| l.has_rel(PATCH_REL))
            .map(|l| PatchLink {
                href: l.href.clone(),
                mime_type: l.mime_type.clone(),
                length: l.length,
                hashes: l.hash.clone().unwrap_or_default(),
            })
    }

    /// Whether the media type is JSON Patch (RFC 6902 §6; the specification's Example 27 writes
    /// `application/json-patch`).
    pub(crate) fn is_json_patch(&self) -> bool {
        self.mime_type.as_deref().is_some_and(|t| {
            let essence = t.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json-patch+json")
                || essence.eq_ignore_ascii_case("application/json-patch")
        })
    }

    /// One line for the staging database.
    pub(crate) fn encode(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}",
            self.href,
            self.mime_type.as_deref().unwrap_or_default(),
            self.length.map(|n| n.to_string()).unwrap_or_default(),
            self.hashes
        )
    }

    /// Reads back [`PatchLink::encode`].
    pub(crate) fn decode(s: &str) -> Option<PatchLink> {
        let mut f = s.split('\t');
        let href = f.next().filter(|h| !h.is_empty())?.to_owned();
        let mime_type = f.next().filter(|t| !t.is_empty()).map(str::to_owned);
        let length = match f.next() {
            Some("") | None => None,
            Some(n) => Some(n.parse().ok()?),
        };
        let hashes = Hashes::parse(f.next().unwrap_or_default()).0;
        Some(PatchLink {
            href,
            mime_type,
            length,
            hashes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_by_uri_seek_in_the_key_and_miss_no_item() {
        let d = tempfile::tempdir().expect("tmp");
        let mut s = Staging::create(d.path()).expect("staging");
        // "" sorts first: the first page must still include it.
        let uris = ["", "http://h/a", "http://h/b", "http://h/c", "http://h/d"];
        for u in uris {
            s.upsert(&it(u, Change::Created)).expect("upsert");
        }
        s.flush().expect("flush");
        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = s.page_by_uri(after.as_deref(), 2).expect("page");
            let Some(last) = page.last() else { break };
            after = Some(last.uri.clone());
            seen.extend(page.into_iter().map(|i| i.uri));
        }
        assert_eq!(seen, uris);
        for first in [true, false] {
            let sql = page_by_uri_sql(first);
            let plan: Vec<String> = s
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("plan")
                .query_map(params!["http://h/b", 2], |r| r.get::<_, String>(3))
                .expect("rows")
                .collect::<rusqlite::Result<_>>()
                .expect("plan rows");
            assert!(plan.iter().any(|p| p.contains("uri>?")), "{sql}: {plan:?}");
        }
    }

    fn it(uri: &str, change: Change) -> StagedItem {
        StagedItem {
            uri: uri.into(),
            change: Some(change),
            ..StagedItem::default()
        }
    }

    #[test]
    fn several_changes_collapse_to_the_last_in_order() {
        let d = tempfile::tempdir().expect("tmp");
        let mut s = Staging::create(d.path()).expect("staging");
        s.upsert(&it("b", Change::Created)).expect("b");
        s.upsert(&it("a", Change::Created)).expect("a");
        s.upsert(&it("b", Change::Updated)).expect("b2");
        s.upsert(&it("c", Change::Created)).expect("c");
        s.upsert(&it("a", Change::Deleted)).expect("a2");
        s.flush().expect("flush");
        let order: Vec<(String, String)> = s
            .page_by_seq(0, 10)
            .expect("page")
            .into_iter()
            .map(|(_, i)| (i.uri, i.change.expect("change").to_string()))
            .collect();
        assert_eq!(
            order,
            [
                ("b".to_owned(), "updated".to_owned()),
                ("c".to_owned(), "created".to_owned()),
                ("a".to_owned(), "deleted".to_owned())
            ]
        );
        let by_uri: Vec<String> = s
            .page_by_uri(Some("a"), 10)
            .expect("page")
            .into_iter()
            .map(|i| i.uri)
            .collect();
        assert_eq!(by_uri, ["b", "c"]);
        assert_eq!(s.count().expect("count"), 3);
    }

    /// The on-disk collapse is the one rule of `resourcesync_diff::last_per_key`: the same
    /// answer on sequences drawn at random (with many repeats), read back page by page.
    #[test]
    fn the_staging_collapse_agrees_with_the_one_rule() {
        let kinds = [Change::Created, Change::Updated, Change::Deleted];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..20 {
            let d = tempfile::tempdir().expect("tmp");
            let mut s = Staging::create(d.path()).expect("staging");
            let mut seq = Vec::new();
            for _ in 0..(50 + round * 37) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let uri = format!("u{}", x % 23);
                let change = kinds[(x >> 8) as usize % 3].clone();
                s.upsert(&it(&uri, change.clone())).expect("upsert");
                seq.push((uri, change.to_string()));
            }
            s.flush().expect("flush");
            let mut got = Vec::new();
            let mut after = 0;
            loop {
                let page = s.page_by_seq(after, 7).expect("page");
                let Some((last, _)) = page.last() else { break };
                after = *last;
                got.extend(
                    page.into_iter()
                        .map(|(_, i)| (i.uri, i.change.expect("change").to_string())),
                );
            }
            assert_eq!(got, resourcesync_diff::last_per_key(seq, |x| x.0.clone()));
        }
    }
}
