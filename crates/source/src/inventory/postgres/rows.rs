//! The SQL of a [`super::PgInventory`] over the columns its table has, what it makes of a row
//! (the rules a row must pass to be a resource), and the paged stream of rows behind a listing
//! and a change feed.

use std::collections::VecDeque;
use std::path::PathBuf;

use postgres::Row;
use resourcesync_model::Hashes;

use super::Pooled;
use crate::inventory::{Changed, Listed, Skipped};

/// Rows fetched at a time from a server-side cursor.
pub(super) const PAGE: usize = 1000;

/// The optional columns the table has (`path` and `updated_at` it must have).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Columns {
    pub(super) body: bool,
    pub(super) url: bool,
    pub(super) length: bool,
    pub(super) md5: bool,
    pub(super) sha256: bool,
    pub(super) deleted: bool,
}

/// `updated_at` as microseconds since the epoch, exactly (whole seconds, then the microseconds
/// within the second: no floating point on the way).
pub(super) const MICROS: &str = "(extract(epoch from date_trunc('second', updated_at))::bigint \
     * 1000000 + extract(microseconds from updated_at)::bigint % 1000000)";

/// The statements of one table, built once at connect.
#[derive(Debug)]
pub(super) struct Sql {
    /// The columns of a record (see [`record`] for their order), `FROM` the table.
    select: String,
    /// The condition of a row not deleted.
    pub(super) live: &'static str,
    /// The table, quoted.
    pub(super) table: String,
    pub(super) cols: Columns,
}

impl Sql {
    pub(super) fn new(table: String, cols: Columns) -> Self {
        let or_null = |has: bool, expr: &str, ty: &str| {
            if has {
                format!("{expr}::{ty}")
            } else {
                format!("NULL::{ty}")
            }
        };
        let select = format!(
            "SELECT textsend(path::text), {}, {}, {}, {MICROS}, {}, {}, {} FROM {table}",
            or_null(cols.body, "octet_length(body)", "bigint"),
            or_null(cols.length, "length", "bigint"),
            or_null(cols.url, "url", "text"),
            or_null(cols.md5, "md5", "text"),
            or_null(cols.sha256, "sha256", "text"),
            or_null(cols.deleted, "coalesce(deleted, false)", "boolean"),
        );
        Sql {
            select,
            live: if cols.deleted {
                "NOT coalesce(deleted, false)"
            } else {
                "true"
            },
            table,
            cols,
        }
    }

    /// Every row not deleted, in path order (bytes: `COLLATE "C"`).
    pub(super) fn list(&self) -> String {
        format!(
            "{} WHERE {} ORDER BY path COLLATE \"C\"",
            self.select, self.live
        )
    }

    /// Every row changed after `after_us` (none: every row), in path order, a live row
    /// before a deleted one of the same path; a deleted row is left out when a live one has
    /// its path (a tombstone kept beside the row that replaced it).
    pub(super) fn feed(&self, after_us: Option<i64>) -> String {
        let mut cond = match after_us {
            // An integer of ours, not a value from outside: safe to write into the SQL.
            Some(us) => format!(
                "updated_at > timestamptz 'epoch' + {us}::bigint * interval '1 microsecond'"
            ),
            None => "true".to_owned(),
        };
        if self.cols.deleted {
            cond.push_str(&format!(
                " AND (NOT coalesce(t.deleted, false) OR NOT EXISTS (SELECT 1 FROM {} l \
                 WHERE l.path = t.path AND NOT coalesce(l.deleted, false)))",
                self.table
            ));
        }
        let order = if self.cols.deleted {
            ", coalesce(deleted, false)"
        } else {
            ""
        };
        format!(
            "{} t WHERE {cond} ORDER BY path COLLATE \"C\"{order}",
            self.select
        )
    }

    /// One row by path (`$1`), not deleted.
    pub(super) fn one(&self) -> String {
        format!("{} WHERE path = $1 AND {} LIMIT 1", self.select, self.live)
    }

    /// The newest `updated_at`, deleted rows included, in microseconds.
    pub(super) fn newest(&self) -> String {
        format!("SELECT max({MICROS}) FROM {}", self.table)
    }

    /// A part of one row's body: `$1` path, `$2` first byte (from 1), `$3` length.
    pub(super) fn chunk(&self) -> String {
        format!(
            "SELECT substring(body from $2::int for $3::int) FROM {} WHERE path = $1 AND {} \
             LIMIT 1",
            self.table, self.live
        )
    }
}

/// Why a relative path (as the table's bytes) is not one a Source publishes, if it is not:
/// it must be UTF-8, relative, with no empty, `.` or `..` segment and no control byte.
pub(super) fn unsafe_path(p: &[u8]) -> Option<&'static str> {
    let s = match std::str::from_utf8(p) {
        Ok(s) => s,
        Err(_) => return Some("the path is not valid UTF-8"),
    };
    if s.is_empty() {
        return Some("the path is empty");
    }
    if s.starts_with('/') {
        return Some("the path is absolute (starts with /)");
    }
    if s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Some("the path has a NUL or control byte");
    }
    for seg in s.split('/') {
        match seg {
            "" => return Some("the path has an empty segment (// or a trailing /)"),
            "." => return Some("the path has a . segment"),
            ".." => return Some("the path has a .. segment"),
            _ => {}
        }
    }
    None
}

/// Whether `u` is an absolute `http:` or `https:` URL the server may redirect to (no space
/// nor control character: it goes into a `Location` header as is).
pub(super) fn redirectable(u: &str) -> bool {
    let lower = u.get(..8).unwrap_or(u).to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://"))
        && u.len() > lower.find("//").map_or(0, |i| i + 2)
        && !u.bytes().any(|b| b <= 0x20 || b == 0x7f)
}

/// A stored hex digest of `digits` hex digits, lower-case; `Err` when it is not one.
fn hex(v: Option<String>, digits: usize, col: &str) -> Result<Option<String>, String> {
    match v {
        None => Ok(None),
        Some(h) if h.len() == digits && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(Some(h.to_ascii_lowercase()))
        }
        Some(_) => Err(format!("the {col} column is not {digits} hex digits")),
    }
}

/// What one row is.
pub(super) enum RowIs {
    /// A resource (its record).
    Live(Listed),
    /// A deleted row (`deleted` true).
    Deleted(PathBuf),
    /// Not a resource: why (the row named by its path, lossy).
    Bad(Skipped),
}

/// A path of the table's bytes, already checked to be UTF-8.
fn rel_of(p: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(p).into_owned())
}

/// What a row of [`Sql`]'s select is: path bytes, body length, `length`, `url`, microseconds,
/// md5, sha256, deleted.
pub(super) fn record(row: &Row) -> Result<(Vec<u8>, RowIs), postgres::Error> {
    let path: Vec<u8> = row.try_get(0)?;
    let body_len: Option<i64> = row.try_get(1)?;
    let length: Option<i64> = row.try_get(2)?;
    let url: Option<String> = row.try_get(3)?;
    let us: Option<i64> = row.try_get(4)?;
    let md5: Option<String> = row.try_get(5)?;
    let sha256: Option<String> = row.try_get(6)?;
    let deleted: Option<bool> = row.try_get(7)?;
    let bad = |reason: String| {
        let shown = String::from_utf8_lossy(&path).into_owned();
        RowIs::Bad(Skipped {
            path: shown.clone().into(),
            reason: format!("row with path {shown:?}: {reason}"),
        })
    };
    if let Some(rule) = unsafe_path(&path) {
        return Ok((path.clone(), bad(format!("{rule}; left out"))));
    }
    if deleted == Some(true) {
        return Ok((path.clone(), RowIs::Deleted(rel_of(&path))));
    }
    let Some(us) = us else {
        return Ok((path.clone(), bad("updated_at is NULL".into())));
    };
    let len = match (body_len, &url) {
        (Some(n), _) => n,
        (None, Some(u)) if !redirectable(u) => {
            return Ok((path.clone(), bad("url is not an http(s) URL".into())));
        }
        (None, Some(_)) => match length {
            Some(n) => n,
            None => {
                return Ok((
                    path.clone(),
                    bad("a url row needs its length (a length column)".into()),
                ));
            }
        },
        (None, None) => return Ok((path.clone(), bad("neither body nor url".into()))),
    };
    let Ok(len) = u64::try_from(len) else {
        return Ok((path.clone(), bad("a negative length".into())));
    };
    let hashes = match (hex(md5, 32, "md5"), hex(sha256, 64, "sha256")) {
        (Ok(m), Ok(s)) => Hashes::from_known(m, None, s),
        (Err(e), _) | (_, Err(e)) => return Ok((path.clone(), bad(e))),
    };
    let listed = Listed {
        rel: rel_of(&path),
        len,
        mtime_ns: i128::from(us) * 1000,
        hashes,
        via: None,
    };
    Ok((path, RowIs::Live(listed)))
}

/// The rows of a server-side cursor (`DECLARE`d in the connection's open transaction), a page
/// at a time, as changes: a listing's (never a deleted row) or a feed's. Two rows of one path:
/// the first is taken, a later live one reported, a later deleted one dropped. A failed fetch
/// ends the stream with [`Skipped::listing_broke`]. Dropped, it rolls the transaction back and
/// gives the connection back (one that fails to roll back is closed).
pub(super) struct RowStream {
    conn: Pooled,
    fetch: String,
    page: VecDeque<Row>,
    done: bool,
    last: Option<Vec<u8>>,
}

impl RowStream {
    /// A stream over the cursor `name`, open on `conn`.
    pub(super) fn new(conn: Pooled, name: &str) -> Self {
        RowStream {
            conn,
            fetch: format!("FETCH FORWARD {PAGE} FROM {name}"),
            page: VecDeque::new(),
            done: false,
            last: None,
        }
    }
}

impl Iterator for RowStream {
    type Item = std::result::Result<Changed, Skipped>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.page.is_empty() {
                if self.done {
                    return None;
                }
                match self.conn.client().query(self.fetch.as_str(), &[]) {
                    Ok(rows) => {
                        self.done = rows.len() < PAGE;
                        self.page = rows.into();
                    }
                    Err(e) => {
                        self.done = true;
                        self.conn.broken = true;
                        return Some(Err(Skipped::listing_broke(format!(
                            "{}: {}",
                            self.conn.target(),
                            super::message(&e)
                        ))));
                    }
                }
                continue;
            }
            let row = self.page.pop_front()?;
            let (path, is) = match record(&row) {
                Ok(r) => r,
                Err(e) => {
                    self.done = true;
                    self.page.clear();
                    return Some(Err(Skipped::listing_broke(format!(
                        "{}: a row the client cannot read: {}",
                        self.conn.target(),
                        super::message(&e)
                    ))));
                }
            };
            if self.last.as_deref() == Some(path.as_slice()) {
                match is {
                    RowIs::Deleted(_) => continue,
                    _ => {
                        return Some(Err(Skipped {
                            path: rel_of(&path),
                            reason: format!(
                                "row with path {:?}: another row has the same path; left out",
                                String::from_utf8_lossy(&path)
                            ),
                        }));
                    }
                }
            }
            self.last = Some(path);
            return Some(match is {
                RowIs::Live(l) => Ok(Changed::Present(l)),
                RowIs::Deleted(p) => Ok(Changed::Gone(p)),
                RowIs::Bad(s) => Err(s),
            });
        }
    }
}

impl Drop for RowStream {
    fn drop(&mut self) {
        if !self.conn.broken && self.conn.client().batch_execute("ROLLBACK").is_err() {
            self.conn.broken = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_named_by_rule() {
        for (p, ok) in [
            (&b"a/b.txt"[..], true),
            (b"a b/\xc3\xa9", true),
            (b"..a/b.", true),
            (b"", false),
            (b"/etc/passwd", false),
            (b"a/../b", false),
            (b"..", false),
            (b"a/./b", false),
            (b"a//b", false),
            (b"a/", false),
            (b"a\0b", false),
            (b"a\nb", false),
            (b"\xff", false),
        ] {
            assert_eq!(unsafe_path(p).is_none(), ok, "{p:?}");
        }
    }

    #[test]
    fn only_http_urls_are_redirected_to() {
        for (u, ok) in [
            ("https://example.org/x", true),
            ("HTTP://example.org/x", true),
            ("http://", false),
            ("javascript:alert(1)", false),
            ("file:///etc/passwd", false),
            ("https://example.org/a b", false),
            ("https://example.org/\r\nSet-Cookie: x", false),
        ] {
            assert_eq!(redirectable(u), ok, "{u}");
        }
    }
}
