//! [`PgInventory`]: the resources of a Source as the rows of a PostgreSQL table or view.
//!
//! # The table's contract
//!
//! One row per resource, with conventional column names (map another schema onto them with a
//! view):
//!
//! | column | type | |
//! | --- | --- | --- |
//! | `path` | `text` | the path relative to the base URL (the URI is the base URL + the path, percent-encoded) |
//! | `body` | `bytea NULL` | the bytes |
//! | `url` | `text NULL` | where the bytes are instead (an `http(s)` URL): `serve` redirects there |
//! | `updated_at` | `timestamptz NOT NULL` | the last change (`<lastmod>`; the change feed's position) |
//! | `length` | `bigint`, optional | the length of a `url` row's bytes (a `body` row's is `octet_length(body)`) |
//! | `md5`, `sha256` | `text`, optional | hex digests of the bytes, published as they are (not computed) |
//! | `deleted` | `boolean`, optional | `true`: the resource is gone (a tombstone, which the change feed sees) |
//!
//! `path` and `updated_at` are required, and one of `body` and `url`; which of the others the
//! table has is read from `information_schema` at connect. The table is chosen by `?table=NAME`
//! (or `SCHEMA.NAME`; default `resources`) in the URL, a parameter taken out of it before
//! connecting, as is `?feed_window=SECONDS` (see below).
//!
//! A row is a resource when its path is safe (valid UTF-8, relative, no empty, `.` or `..`
//! segment, no NUL nor control byte) and it has a `body`, or a `url` that is `http(s)` and a
//! `length`; a row with a body is served from it (its `url`, if any, is ignored). Any other
//! row is listed as an `Err(Skipped)` item naming the row and the rule, and the listing goes
//! on. Paths must be unique among rows not deleted (a second row of a path is reported, left
//! out). A row whose `md5`/`sha256` holds something other than hex digits of the right length
//! is reported too. A row with digests is published without reading its body
//! ([`Inventory::listed_digests_trusted`]); one without is read and hashed; a `url` row
//! without the digests a scan computes is skipped (its bytes are elsewhere).
//!
//! # Listing
//!
//! `SELECT … ORDER BY path COLLATE "C"` (byte order: the order of the state and of the
//! Resource List) through a server-side cursor in a `REPEATABLE READ` transaction, fetched
//! a thousand rows at a time: never all rows in memory, never the bodies (their lengths
//! only). A listing holds one connection of a small pool ([`POOL_SIZE`]) while it lives.
//!
//! # Change feed
//!
//! The cursor is the high-water mark of `updated_at`, in microseconds (exact). Changes since a
//! cursor are the rows whose `updated_at` is later than the cursor *minus a safety window*
//! ([`DEFAULT_FEED_WINDOW`], `?feed_window=SECONDS`): `updated_at` is usually set by `now()`, the
//! start of the writing transaction, so a transaction that started before another but commits
//! after it brings a smaller `updated_at` than the high-water mark already seen. The window must
//! be longer than the longest transaction writing the table. Rows inside the window are given
//! again by the next feed (a scan finds them unchanged). A row with `deleted = true` is `Gone`;
//! set `updated_at` with the flag. A row removed from the table leaves no trace a feed can see:
//! delete with the flag, or let full listings catch removals (`ScanOptions::full`, or every
//! scan without a recorded cursor). A cursor later than the table's newest `updated_at` (rows
//! were removed) is refused, and the scan then lists everything.
//!
//! The client is the synchronous `postgres` crate (its calls block; not for an async task). No
//! TLS: the server is expected on a trusted network.

use std::io::Read;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use postgres::{Client, Config, NoTls};

use resourcesync_store::blocking::call;

use crate::error::{Error, Result};
use crate::inventory::{
    ChangeFeed, Changed, Feed, Inventory, Listed, Listing, Served, Skipped, feed_known,
};
use crate::uri::path_bytes;

mod rows;

use rows::{Columns, RowIs, RowStream, Sql};

/// Connections one [`PgInventory`] opens at most (a listing holds one while it lives; each
/// read takes one for its duration).
pub const POOL_SIZE: usize = 8;

/// The table used when the URL names none.
pub const DEFAULT_TABLE: &str = "resources";

/// The default safety window of the change feed (see the module's documentation).
pub const DEFAULT_FEED_WINDOW: Duration = Duration::from_secs(5);

/// Bytes of a body read at a time (a body larger than this is read in parts, in one
/// transaction: never more than this in memory per reader).
const CHUNK: i32 = 1 << 20;

/// What a feed cursor of this inventory starts with.
const CURSOR_PREFIX: &str = "pg-updated-at:";

/// A Source's resources as the rows of a PostgreSQL table or view (see the module's
/// documentation for the table's contract).
#[derive(Clone)]
pub struct PgInventory {
    shared: Arc<Shared>,
    sql: Arc<Sql>,
    window_us: i64,
}

impl std::fmt::Debug for PgInventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgInventory")
            .field("target", &self.shared.target)
            .finish_non_exhaustive()
    }
}

/// The pool, shared with the readers and listings given out.
struct Shared {
    config: Config,
    target: String,
    idle: Mutex<Idle>,
    freed: Condvar,
}

struct Idle {
    clients: Vec<Client>,
    open: usize,
}

/// A connection taken from the pool, given back when dropped unless `broken` (or closed).
struct Pooled {
    shared: Arc<Shared>,
    client: Option<Client>,
    broken: bool,
}

impl Pooled {
    fn client(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .unwrap_or_else(|| unreachable!("a pooled connection is taken only when dropped"))
    }

    fn target(&self) -> &str {
        &self.shared.target
    }

    fn err(&mut self, e: postgres::Error) -> Error {
        self.broken |= e.is_closed();
        Error::Postgres {
            target: self.shared.target.clone(),
            cause: e,
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let mut idle = self.shared.lock();
        match self.client.take() {
            Some(c) if !self.broken && !c.is_closed() => idle.clients.push(c),
            gone => {
                idle.open = idle.open.saturating_sub(1);
                // Closing a client is a call of its own runtime too.
                call(move || drop(gone));
            }
        }
        self.shared.freed.notify_one();
    }
}

impl Drop for Shared {
    /// The idle connections are closed where blocking is allowed (a Source is often dropped
    /// at the end of an async function: `serve` shutting down).
    fn drop(&mut self) {
        let clients = std::mem::take(&mut self.lock().clients);
        call(move || drop(clients));
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, a new one while fewer than [`POOL_SIZE`] are open, or the next
    /// one given back.
    fn conn(self: &Arc<Self>) -> Result<Pooled> {
        let mut idle = self.lock();
        loop {
            if let Some(c) = idle.clients.pop() {
                return Ok(self.pooled(c));
            }
            if idle.open < POOL_SIZE {
                idle.open += 1;
                drop(idle);
                return match self.config.connect(NoTls) {
                    Ok(mut c) => match c.batch_execute("SET TIME ZONE 'UTC'") {
                        Ok(()) => Ok(self.pooled(c)),
                        Err(e) => {
                            self.lock().open -= 1;
                            self.freed.notify_one();
                            Err(self.err(e))
                        }
                    },
                    Err(e) => {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                        Err(self.err(e))
                    }
                };
            }
            idle = self.freed.wait(idle).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn pooled(self: &Arc<Self>, c: Client) -> Pooled {
        Pooled {
            shared: self.clone(),
            client: Some(c),
            broken: false,
        }
    }

    fn err(&self, cause: postgres::Error) -> Error {
        Error::Postgres {
            target: self.target.clone(),
            cause,
        }
    }
}

/// A PostgreSQL error in full (the server's message, not only the client's "db error").
fn message(e: &postgres::Error) -> String {
    use std::error::Error as _;
    match e.source() {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}

/// Whether `s` is a table name this inventory takes: `NAME` or `SCHEMA.NAME`, each 1 to 63
/// letters, digits, `_` or `$`, not starting with a digit nor `$`.
fn valid_table(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 63
            && p.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
    };
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() <= 2 && parts.iter().all(|p| part(p))
}

/// The URL without this inventory's own parameters, and their values.
fn split_url(url: &str) -> Result<(String, String, Option<Duration>)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut table, mut window, mut kept) = (DEFAULT_TABLE.to_owned(), None, Vec::new());
    for p in query.split('&').filter(|p| !p.is_empty()) {
        match p.split_once('=') {
            Some(("table", v)) => table = v.to_owned(),
            Some(("feed_window", v)) => {
                let secs: f64 = v.parse().map_err(|_| {
                    Error::Config(format!("feed_window={v:?}: give a number of seconds"))
                })?;
                if !(0.0..=86_400.0).contains(&secs) {
                    return Err(Error::Config(format!(
                        "feed_window={v}: from 0 to 86400 seconds"
                    )));
                }
                window = Some(Duration::from_secs_f64(secs));
            }
            _ => kept.push(p),
        }
    }
    if !valid_table(&table) {
        return Err(Error::Config(format!(
            "table={:?}: a table is NAME or SCHEMA.NAME, each 1 to 63 letters, digits, _ or $",
            table.chars().take(80).collect::<String>()
        )));
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, table, window))
}

/// The server(s) and database of a configuration, and the table (no user nor password).
fn describe(c: &Config, table: &str) -> String {
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .zip(c.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(h, p)| match h {
            postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
            #[cfg(unix)]
            postgres::config::Host::Unix(d) => format!("{}:{p}", d.display()),
        })
        .collect();
    format!(
        "postgres://{}/{} (table {table})",
        hosts.join(","),
        c.get_dbname().unwrap_or("")
    )
}

/// The table's columns this inventory uses, checked against the contract.
fn columns(conn: &mut Pooled, table: &str, quoted: &str) -> Result<Columns> {
    let rows = conn
        .client()
        .query(
            "SELECT c.column_name::text, c.data_type::text FROM information_schema.columns c
             JOIN pg_class r ON r.relname = c.table_name
             JOIN pg_namespace n ON n.oid = r.relnamespace AND n.nspname = c.table_schema
             WHERE r.oid = to_regclass($1)",
            &[&quoted],
        )
        .map_err(|e| conn.err(e))?;
    let target = conn.target().to_owned();
    if rows.is_empty() {
        return Err(Error::MissingTable {
            target,
            table: table.to_owned(),
        });
    }
    let mut cols = Columns::default();
    let (mut path, mut updated) = (false, false);
    const TEXT: &[&str] = &["text", "character varying", "character"];
    const INT: &[&str] = &["bigint", "integer", "smallint"];
    for r in &rows {
        let (name, ty): (String, String) = (
            r.try_get(0).map_err(|e| conn.err(e))?,
            r.try_get(1).map_err(|e| conn.err(e))?,
        );
        let (flag, want): (&mut bool, &[&str]) = match name.as_str() {
            "path" => (&mut path, TEXT),
            "updated_at" => (&mut updated, &["timestamp with time zone"]),
            "body" => (&mut cols.body, &["bytea"]),
            "url" => (&mut cols.url, TEXT),
            "length" => (&mut cols.length, INT),
            "md5" => (&mut cols.md5, TEXT),
            "sha256" => (&mut cols.sha256, TEXT),
            "deleted" => (&mut cols.deleted, &["boolean"]),
            _ => continue,
        };
        if !want.contains(&ty.as_str()) {
            return Err(Error::Config(format!(
                "{target}: column {name} is {ty}, expected {}",
                want.join(" or ")
            )));
        }
        *flag = true;
    }
    let missing = [
        (!path).then_some("path"),
        (!updated).then_some("updated_at"),
        (!cols.body && !cols.url).then_some("body or url"),
    ];
    let missing: Vec<&str> = missing.into_iter().flatten().collect();
    if !missing.is_empty() {
        return Err(Error::Config(format!(
            "{target}: no column {} (see the contract in docs/inventories.md)",
            missing.join(", no column ")
        )));
    }
    Ok(cols)
}

fn io_err(e: Error) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

fn not_found(rel: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{}: no such resource", rel.display()),
    )
}

/// A row's body, read in parts of [`CHUNK`] bytes in one `REPEATABLE READ` transaction (so
/// the parts are of one version of the row); the connection is given back at the end.
struct Body {
    conn: Option<Pooled>,
    sql: Arc<Sql>,
    path: String,
    part: std::io::Cursor<Vec<u8>>,
    /// Bytes fetched so far, and in all.
    fetched: u64,
    len: u64,
}

impl Body {
    fn finish(&mut self) {
        if let Some(mut c) = self.conn.take() {
            if c.client().batch_execute("COMMIT").is_err() {
                c.broken = true;
            }
        }
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.part.read(buf)?;
        if n > 0 || buf.is_empty() {
            return Ok(n);
        }
        if self.fetched >= self.len {
            self.finish();
            return Ok(0);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Ok(0);
        };
        let from = i32::try_from(self.fetched + 1)
            .map_err(|_| std::io::Error::other("a body larger than 2 GiB"))?;
        let row = conn
            .client()
            .query_opt(self.sql.chunk().as_str(), &[&self.path, &from, &CHUNK])
            .map_err(|e| io_err(conn.err(e)))?;
        let part: Vec<u8> = match row.map(|r| r.try_get::<_, Option<Vec<u8>>>(0)) {
            Some(Ok(Some(p))) if !p.is_empty() => p,
            Some(Err(e)) => return Err(io_err(conn.err(e))),
            _ => return Err(std::io::Error::other("the row's body changed while read")),
        };
        self.fetched += part.len() as u64;
        self.part = std::io::Cursor::new(part);
        self.part.read(buf)
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        call(|| self.finish());
    }
}

/// A row looked up by path: its record, and (when asked) the first part of its body.
enum Found {
    Live(Listed, Option<String>),
    Missing,
    Bad(String),
}

impl PgInventory {
    /// Connects to the database at `url` (`postgres://USER@HOST:PORT/DB?table=NAME`, see the
    /// module's documentation) and checks the table's columns.
    pub fn connect(url: &str) -> Result<Self> {
        let (url, table, window) = split_url(url)?;
        let mut config = Config::from_str(&url).map_err(|e| Error::Postgres {
            target: "the PostgreSQL URL".into(),
            cause: e,
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let quoted = table
            .split('.')
            .map(|p| format!("\"{p}\""))
            .collect::<Vec<_>>()
            .join(".");
        let shared = Arc::new(Shared {
            target: describe(&config, &table),
            config,
            idle: Mutex::new(Idle {
                clients: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        });
        let cols = columns(&mut shared.conn()?, &table, &quoted)?;
        let inv = PgInventory {
            shared,
            sql: Arc::new(Sql::new(quoted, cols)),
            window_us: 0,
        };
        Ok(inv.with_feed_window(window.unwrap_or(DEFAULT_FEED_WINDOW)))
    }

    /// The change feed's safety window (see the module's documentation).
    pub fn with_feed_window(mut self, window: Duration) -> Self {
        self.window_us = i64::try_from(window.as_micros()).unwrap_or(i64::MAX);
        self
    }

    /// The server, database and table (no user nor password).
    pub fn target(&self) -> &str {
        &self.shared.target
    }

    /// A server-side cursor over `sql`, in a new `REPEATABLE READ` transaction; `before`
    /// runs first in it (the feed's high-water mark).
    fn stream(&self, sql: &str) -> Result<RowStream> {
        let mut conn = self.shared.conn()?;
        let declare = format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
             DECLARE resourcesync_rows NO SCROLL CURSOR FOR {sql}"
        );
        if let Err(e) = conn.client().batch_execute(&declare) {
            let e = conn.err(e);
            let _ = conn.client().batch_execute("ROLLBACK");
            return Err(e);
        }
        Ok(RowStream::new(conn, "resourcesync_rows"))
    }

    /// Looks up the row of `rel` in `conn`'s transaction (or none).
    fn find(&self, conn: &mut Pooled, rel: &Path) -> std::io::Result<Found> {
        let bytes = path_bytes(rel);
        let path = match (rows::unsafe_path(&bytes), std::str::from_utf8(&bytes)) {
            (None, Ok(p)) => p,
            _ => return Ok(Found::Missing),
        };
        let row = conn
            .client()
            .query_opt(self.sql.one().as_str(), &[&path])
            .map_err(|e| io_err(conn.err(e)))?;
        let Some(row) = row else {
            return Ok(Found::Missing);
        };
        let url: Option<String> = row.try_get(3).map_err(|e| io_err(conn.err(e)))?;
        let body_len: Option<i64> = row.try_get(1).map_err(|e| io_err(conn.err(e)))?;
        Ok(match rows::record(&row).map_err(|e| io_err(conn.err(e)))? {
            (_, RowIs::Live(l)) => Found::Live(l, url.filter(|_| body_len.is_none())),
            (_, RowIs::Deleted(_)) => Found::Missing,
            (_, RowIs::Bad(s)) => Found::Bad(s.reason),
        })
    }

    /// The body of `rel` with its record, in a transaction of its own; a `url` row's URL
    /// instead.
    fn body(&self, rel: &Path) -> std::io::Result<Option<(Listed, Result<Body, String>)>> {
        let mut conn = self.shared.conn().map_err(io_err)?;
        conn.client()
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .map_err(|e| io_err(conn.err(e)))?;
        let found = self.find(&mut conn, rel);
        let found = match found {
            Ok(Found::Live(l, None)) => l,
            other => {
                if conn.client().batch_execute("ROLLBACK").is_err() {
                    conn.broken = true;
                }
                return match other? {
                    Found::Live(l, Some(url)) => Ok(Some((l, Err(url)))),
                    Found::Missing => Ok(None),
                    Found::Bad(reason) => Err(std::io::Error::other(reason)),
                    Found::Live(_, None) => unreachable!("matched above"),
                };
            }
        };
        let body = Body {
            conn: Some(conn),
            sql: self.sql.clone(),
            path: found.rel.to_string_lossy().into_owned(),
            part: std::io::Cursor::new(Vec::new()),
            fetched: 0,
            len: found.len,
        };
        Ok(Some((found, Ok(body))))
    }

    /// A resource's bytes and record; an error for a missing one or a `url` row.
    fn read_body(&self, rel: &Path) -> std::io::Result<(Listed, Body)> {
        match self.body(rel)? {
            None => Err(not_found(rel)),
            Some((l, Ok(b))) => Ok((l, b)),
            Some((_, Err(url))) => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!(
                    "{}: the bytes are not in the table but at {url}",
                    rel.display()
                ),
            )),
        }
    }

    /// The newest `updated_at` (deleted rows included), in microseconds; `None` for an empty
    /// table.
    fn newest(&self, conn: &mut Pooled) -> Result<Option<i64>> {
        let row = conn
            .client()
            .query_one(self.sql.newest().as_str(), &[])
            .map_err(|e| conn.err(e))?;
        row.try_get(0).map_err(|e| conn.err(e))
    }
}

impl Inventory for PgInventory {
    fn list(&self) -> Result<Listing<'_>> {
        let rows = self.stream(&self.sql.list())?;
        Ok(Box::new(rows.map(|r| match r {
            Ok(Changed::Present(l)) => Ok(l),
            Ok(Changed::Gone(p)) => Err(Skipped {
                reason: "a deleted row in the listing".into(),
                path: p,
            }),
            Err(s) => Err(s),
        })))
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(self.read_body(rel)?.1))
    }

    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let mut conn = self.shared.conn().map_err(io_err)?;
        match self.find(&mut conn, rel)? {
            Found::Live(l, _) => Ok((l.len, l.mtime_ns)),
            Found::Missing => Err(not_found(rel)),
            Found::Bad(reason) => Err(std::io::Error::other(reason)),
        }
    }

    /// One transaction: the row's length and time, and its body, of one version of the row.
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let (l, mut body) = self.read_body(rel)?;
        let n = feed_known(&mut body, buf, l.len, sink)?;
        Ok((n == l.len).then_some((l.len, l.mtime_ns)))
    }

    fn change_feed(&self) -> Option<&dyn ChangeFeed> {
        Some(self)
    }

    fn listed_digests_trusted(&self) -> bool {
        true
    }

    /// A `url` row: a redirect there; a row with a body: the body.
    fn serve(&self, rel: &Path) -> std::io::Result<Option<Served>> {
        Ok(match self.body(rel)? {
            None => None,
            Some((_, Err(url))) => Some(Served::Redirect(url)),
            Some((l, Ok(body))) => Some(Served::Body {
                len: l.len,
                mtime_ns: l.mtime_ns,
                body: Box::new(body),
            }),
        })
    }
}

fn encode_cursor(us: Option<i64>) -> String {
    match us {
        Some(us) => format!("{CURSOR_PREFIX}{us}"),
        None => CURSOR_PREFIX.to_owned(),
    }
}

impl ChangeFeed for PgInventory {
    fn cursor(&self) -> Result<String> {
        let mut conn = self.shared.conn()?;
        Ok(encode_cursor(self.newest(&mut conn)?))
    }

    fn changes_since(&self, cursor: &str) -> Result<Feed<'_>> {
        let refuse = |why: &str| {
            Error::Inventory(format!(
                "{}: cursor {:?} {why}",
                self.shared.target,
                cursor.chars().take(80).collect::<String>()
            ))
        };
        let since: Option<i64> = match cursor.strip_prefix(CURSOR_PREFIX) {
            Some("") => None,
            Some(us) => Some(
                us.parse()
                    .map_err(|_| refuse("is not one of this inventory"))?,
            ),
            None => return Err(refuse("is not one of this inventory")),
        };
        let mut conn = self.shared.conn()?;
        let begin = conn
            .client()
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        begin.map_err(|e| conn.err(e))?;
        let newest = self.newest(&mut conn)?;
        let ahead = match (since, newest) {
            (Some(s), Some(n)) => s > n,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if ahead {
            let _ = conn.client().batch_execute("ROLLBACK");
            return Err(refuse(
                "is later than the table's newest updated_at: rows were removed; list everything",
            ));
        }
        let after = since.map(|s| s.saturating_sub(self.window_us));
        let declare = format!(
            "DECLARE resourcesync_rows NO SCROLL CURSOR FOR {}",
            self.sql.feed(after)
        );
        if let Err(e) = conn.client().batch_execute(&declare) {
            let e = conn.err(e);
            let _ = conn.client().batch_execute("ROLLBACK");
            return Err(e);
        }
        Ok(Feed {
            changes: Box::new(RowStream::new(conn, "resourcesync_rows")),
            cursor: encode_cursor(newest),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_urls_own_parameters_are_taken_out() {
        let (u, t, w) =
            split_url("postgres://u@127.0.0.1:5/db?table=records&connect_timeout=3").expect("url");
        assert_eq!(
            (u.as_str(), t.as_str(), w),
            (
                "postgres://u@127.0.0.1:5/db?connect_timeout=3",
                "records",
                None
            )
        );
        let (u, t, w) = split_url("postgres://u@h/db?feed_window=0.5").expect("url");
        assert_eq!(
            (u.as_str(), t.as_str(), w),
            (
                "postgres://u@h/db",
                DEFAULT_TABLE,
                Some(Duration::from_millis(500))
            )
        );
        for bad in [
            "postgres://h/db?table=a;drop",
            "postgres://h/db?table=a.b.c",
            "postgres://h/db?table=\"x\"",
            "postgres://h/db?table=",
            "postgres://h/db?feed_window=-1",
            "postgres://h/db?feed_window=soon",
        ] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
    }
}
