//! [`PgState`]: the state in PostgreSQL, shared by several workers (processes, on one machine
//! or many), its schema and its migrations.
//!
//! Every table lives in one schema (`resourcesync` unless [`PgState::connect_schema`] names
//! another), so that one database can hold several states (a test makes a new schema per
//! check). The schema is created or migrated at connect, under an advisory lock, in one
//! transaction: workers starting at once never migrate twice.
//!
//! Leases and claims expire by the server's clock (`now()`, the start of the transaction), so
//! that workers on machines whose clocks differ agree. A lease taken over bumps its token; a
//! batch fenced by a lease locks the lease's row (`FOR SHARE`) so that a takeover waits for it
//! to commit. Work items are claimed with `SELECT … FOR UPDATE SKIP LOCKED`: workers claiming at
//! once skip each other's rows instead of waiting or taking the same one.
//!
//! The client is the synchronous `postgres` crate: its calls block, and must not be made from
//! an async task (use `spawn_blocking`). Connections come from a small pool ([`POOL_SIZE`],
//! opened on demand; one closed by the server is dropped and opened again on next use), so that
//! the threads of one worker run their statements at once, as separate workers would. No TLS:
//! the server is expected on a trusted network (`sslmode=require` fails to connect).
//!
//! A state dropped gives its idle connections to the next state opened on the same URL (up to
//! [`SPARE_PER_URL`], for [`SPARE_FOR`]; another schema is one `SET search_path` away, and
//! PostgreSQL parses a prepared statement again when the search path changed): an aggregator
//! opens a state per Source sync, and through a link of 50 ms a new connection and its
//! statements prepared again cost a second or more of every small Source's sync. Likewise a
//! schema already at [`sql::VERSION`] costs one statement at connect, not a migration's
//! transaction.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use postgres::{Config, Row};
use resourcesync_model::{Change, Hashes};

use super::sqlite::{decode_dups, opt_u64, parse_dt};
use super::{
    Batch, Claim, KnownDocument, Lease, Leases, MAX_KNOWN_DOCUMENTS, PendingChange, Records,
    ResourceRecord, SourceCursor, WorkItem, WorkQueue, from_millis,
};
use crate::error::{Error, Result};
use crate::path::RelPath;

mod apply;
mod bulk;
mod listen;
mod migrate;
#[cfg(test)]
mod plans;
mod pool;
mod spare;
mod sql;
mod versions;
mod work;
mod workers;

pub use listen::WorkListener;
use pool::Idle;
pub use spare::{SPARE_FOR, SPARE_PER_URL};
pub use workers::WORKER_WANTED;

use sql::{
    GONE_AFTER, GONE_FROM, LEASE, PENDING_AFTER, PENDING_FROM, RESOURCE, RESOURCES_AFTER,
    RESOURCES_FROM, VERSION,
};

/// How many connections one [`PgState`] opens at most.
pub const POOL_SIZE: usize = 4;

/// The schema used by [`PgState::connect`].
pub const DEFAULT_SCHEMA: &str = "resourcesync";

/// The longest time-to-live of a lease or claim (a longer one is cut to it): a hundred years.
const MAX_TTL_MS: i64 = 100 * 366 * 24 * 3600 * 1000;

/// The state in PostgreSQL, shared by every worker connected to the same database and schema.
pub struct PgState {
    config: Config,
    /// The URL connected to: which spare connections ([`SPARE`]) this state may take.
    url: String,
    schema: String,
    /// The server, database and schema, for messages (no password).
    target: String,
    pool: Mutex<Idle>,
    freed: Condvar,
}

impl fmt::Debug for PgState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgState")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// Whether `s` is a plain schema name (lower-case letters, digits, `_`; not starting with a
/// digit nor `pg_`; at most 63 bytes, PostgreSQL's limit).
fn valid_schema(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with("pg_")
        && s.bytes().next().is_some_and(|b| !b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Every one of `schemas` is a plain schema name ([`valid_schema`]), or the first that is not
/// is refused.
fn check_schemas(schemas: &[String]) -> Result<()> {
    match schemas.iter().find(|s| !valid_schema(s)) {
        Some(bad) => Err(Error::Config {
            what: format!("PostgreSQL schema {:?}", cut(bad)),
            reason: "a schema is 1 to 63 lower-case letters, digits and `_`, not starting \
                     with a digit nor `pg_`"
                .into(),
        }),
        None => Ok(()),
    }
}

/// The server(s) and database of a configuration, without user nor password.
fn describe(c: &Config, schema: &str) -> String {
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
        "postgres://{}/{} (schema {schema})",
        hosts.join(","),
        c.get_dbname().unwrap_or("")
    )
}

impl PgState {
    /// Connects to the database at `url` (`postgres://USER@HOST:PORT/DB`, or any connection
    /// string the `postgres` crate takes), in the schema `resourcesync`, creating or migrating
    /// it.
    pub fn connect(url: &str) -> Result<Self> {
        PgState::connect_schema(url, DEFAULT_SCHEMA)
    }

    /// As [`PgState::connect`], in the schema `schema` (created if missing): lower-case
    /// letters, digits and `_`, at most 63 bytes.
    pub fn connect_schema(url: &str, schema: &str) -> Result<Self> {
        let s = PgState::unopened(url, schema)?;
        s.migrate()?;
        Ok(s)
    }

    /// As [`PgState::connect_schema`], without creating or migrating the schema: none where it
    /// is not at this program's version (not made yet, say). For reading what a state records
    /// without making one.
    pub fn connect_existing(url: &str, schema: &str) -> Result<Option<Self>> {
        let s = PgState::unopened(url, schema)?;
        Ok((s.current()? == Some(VERSION)).then_some(s))
    }

    /// The state of `schema` at `url`, no connection opened yet.
    fn unopened(url: &str, schema: &str) -> Result<Self> {
        check_schemas(&[schema.to_owned()])?;
        let mut config = Config::from_str(url).map_err(|e| Error::Postgres {
            target: "the PostgreSQL URL".into(),
            cause: e,
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        let target = describe(&config, schema);
        Ok(PgState {
            config,
            url: url.to_owned(),
            schema: schema.to_owned(),
            target,
            pool: Mutex::new(Idle {
                conns: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
        })
    }

    /// The server, database and schema (no user nor password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The schema the tables are in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    fn err(&self, cause: postgres::Error) -> Error {
        Error::Postgres {
            target: self.target.clone(),
            cause,
        }
    }

    /// One page of a Source's rows by `sql` (`$1` Source, `$2` the URI after which, `$3` limit).
    fn records_page(
        &self,
        sql: &'static str,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.query(sql, &[&source, &after.unwrap_or(""), &limit])?
            .iter()
            .map(row_to_record)
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    fn corrupt(&self, message: String) -> Error {
        Error::Corrupt {
            path: self.target.clone().into(),
            message,
        }
    }

    /// Completes (`complete`) or releases the claims still held, in one transaction, a
    /// statement per thousand; how many were held.
    fn settle(&self, claims: &[Claim], complete: bool) -> Result<usize> {
        if claims.is_empty() {
            return Ok(0);
        }
        self.in_tx(|tx| bulk::settle_all(tx, claims, complete))
    }
}

impl PgState {
    /// Renews the claims still held, in one transaction, a statement per thousand: those
    /// renewed, with their new expiry.
    fn renew_claims(&self, claims: &[Claim], ttl: Duration) -> Result<Vec<Claim>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let renewed: HashMap<(String, i64), i64> = self
            .in_tx(|tx| bulk::renew_all(tx, claims, ttl_ms(ttl)))?
            .into_iter()
            .collect();
        Ok(claims
            .iter()
            .filter_map(|c| {
                let at = (c.item.key.clone(), token(c.token));
                renewed.get(&at).map(|ms| Claim {
                    expires: from_millis(*ms),
                    ..c.clone()
                })
            })
            .collect())
    }
}

/// A token as stored: one too large to have been issued matches nothing.
fn token(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(-1)
}

/// A time-to-live in milliseconds, cut to [`MAX_TTL_MS`].
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).map_or(MAX_TTL_MS, |ms| ms.min(MAX_TTL_MS))
}

/// At most 80 characters of `s`, for a message.
fn cut(s: &str) -> String {
    s.chars().take(80).collect()
}

fn row_to_record(row: &Row) -> std::result::Result<ResourceRecord, postgres::Error> {
    Ok(ResourceRecord {
        uri: row.try_get(0)?,
        source: row.try_get(1)?,
        path: row.try_get(2)?,
        length: opt_u64(row.try_get(3)?),
        hashes: Hashes::from_known(row.try_get(4)?, row.try_get(5)?, row.try_get(6)?),
        lastmod: parse_dt(row.try_get(7)?),
        etag: row.try_get(8)?,
        last_modified: row.try_get(9)?,
        gone: row.try_get(10)?,
    })
}

fn row_to_pending(row: &Row) -> std::result::Result<PendingChange, postgres::Error> {
    let hashes: Option<String> = row.try_get(4)?;
    Ok(PendingChange {
        source: row.try_get(0)?,
        uri: row.try_get(1)?,
        change: row
            .try_get::<_, Option<String>>(2)?
            .map(|c| Change::parse(&c)),
        length: opt_u64(row.try_get(3)?),
        hashes: hashes.map(|h| Hashes::parse(&h).0).unwrap_or_default(),
        lastmod: parse_dt(row.try_get(5)?),
        duplicates: decode_dups(row.try_get(6)?),
        error: row.try_get::<_, Option<String>>(7)?.unwrap_or_default(),
    })
}

impl Records for PgState {
    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>> {
        let rows = self.query(RESOURCE, &[&uri])?;
        rows.first()
            .map(row_to_record)
            .transpose()
            .map_err(|e| self.err(e))
    }

    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let sql = if after.is_none() {
            RESOURCES_FROM
        } else {
            RESOURCES_AFTER
        };
        self.records_page(sql, source, after, limit)
    }

    fn gone_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        let sql = if after.is_none() {
            GONE_FROM
        } else {
            GONE_AFTER
        };
        self.records_page(sql, source, after, limit)
    }

    fn has_path(&self, path: &RelPath) -> Result<bool> {
        let path = path.as_str();
        let rows = self.query("SELECT 1 FROM resources WHERE path = $1 LIMIT 1", &[&path])?;
        Ok(!rows.is_empty())
    }

    fn has_paths(&self, paths: &[&RelPath]) -> Result<Vec<bool>> {
        let paths: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        // One statement per batch, each path looked up in the index on `path`, in order.
        let rows = self.query(
            "SELECT EXISTS(SELECT 1 FROM resources WHERE path = p.path) \
             FROM unnest($1::text[]) WITH ORDINALITY AS p(path, n) ORDER BY p.n",
            &[&paths],
        )?;
        rows.iter()
            .map(|r| r.try_get::<_, bool>(0))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    fn path_owner(&self, path: &RelPath) -> Result<Option<String>> {
        let path = path.as_str();
        let rows = self.query(sql::PATH_OWNER, &[&path])?;
        match rows.first() {
            Some(r) => r.try_get::<_, Option<String>>(0).map_err(|e| self.err(e)),
            None => Ok(None),
        }
    }

    fn path_owners(&self, paths: &[&RelPath]) -> Result<Vec<Option<String>>> {
        let paths: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        // One statement per batch, each path looked up in the index on `path`, in order.
        let rows = self.query(sql::PATH_OWNERS, &[&paths])?;
        rows.iter()
            .map(|r| r.try_get::<_, Option<String>>(0))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    fn count_resources(&self, source: &str) -> Result<u64> {
        let rows = self.query(
            "SELECT count(*) FROM resources WHERE source = $1",
            &[&source],
        )?;
        let n: i64 = match rows.first() {
            Some(r) => r.try_get(0).map_err(|e| self.err(e))?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn bytes_recorded(&self, source: &str) -> Result<u64> {
        let rows = self.query(
            "SELECT coalesce(sum(length), 0)::bigint FROM resources WHERE source = $1",
            &[&source],
        )?;
        let n: i64 = match rows.first() {
            Some(r) => r.try_get(0).map_err(|e| self.err(e))?,
            None => 0,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn recorded_totals(&self) -> Result<(u64, u64)> {
        let rows = self.query(
            "SELECT count(*), coalesce(sum(length), 0)::bigint FROM resources",
            &[],
        )?;
        let (n, b): (i64, i64) = match rows.first() {
            Some(r) => (
                r.try_get(0).map_err(|e| self.err(e))?,
                r.try_get(1).map_err(|e| self.err(e))?,
            ),
            None => (0, 0),
        };
        Ok((u64::try_from(n).unwrap_or(0), u64::try_from(b).unwrap_or(0)))
    }

    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>> {
        let rows = self.query(
            "SELECT source, cursor, synced_at, checked_at FROM sources WHERE source = $1",
            &[&source],
        )?;
        rows.first()
            .map(|r| {
                Ok(SourceCursor {
                    source: r.try_get(0)?,
                    cursor: parse_dt(r.try_get(1)?),
                    synced_at: parse_dt(r.try_get(2)?),
                    checked_at: parse_dt(r.try_get(3)?),
                })
            })
            .transpose()
            .map_err(|e| self.err(e))
    }

    fn documents(&self, start: &str) -> Result<Vec<KnownDocument>> {
        let limit = i64::try_from(MAX_KNOWN_DOCUMENTS).unwrap_or(i64::MAX);
        self.query(
            "SELECT role, url, etag, last_modified FROM documents WHERE start = $1 \
             ORDER BY role, url LIMIT $2",
            &[&start, &limit],
        )?
        .iter()
        .map(|r| {
            Ok(KnownDocument {
                role: r.try_get(0)?,
                url: r.try_get(1)?,
                etag: r.try_get(2)?,
                last_modified: r.try_get(3)?,
            })
        })
        .collect::<std::result::Result<_, postgres::Error>>()
        .map_err(|e| self.err(e))
    }

    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>> {
        let sql = if after.is_none() {
            PENDING_FROM
        } else {
            PENDING_AFTER
        };
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.query(sql, &[&source, &after.unwrap_or(""), &limit])?
            .iter()
            .map(row_to_pending)
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| self.err(e))
    }

    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<super::VersionRecord>> {
        self.read_versions_page(source, after, limit)
    }

    fn digest_referenced(&self, digest: &str) -> Result<bool> {
        self.read_digest_referenced(digest)
    }

    fn apply(&self, batch: &Batch<'_>) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.in_tx(|tx| tx.apply_batch(batch))
    }
}

impl Leases for PgState {
    fn lease_source(&self, source: &str, worker: &str, ttl: Duration) -> Result<Option<Lease>> {
        let rows = self.query(LEASE, &[&source, &worker, &ttl_ms(ttl)])?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let (token, expires): (i64, i64) = (
            row.try_get(0).map_err(|e| self.err(e))?,
            row.try_get(1).map_err(|e| self.err(e))?,
        );
        Ok(Some(Lease {
            name: source.to_owned(),
            holder: worker.to_owned(),
            token: u64::try_from(token).unwrap_or(0),
            expires: from_millis(expires),
        }))
    }

    fn release_source(&self, lease: &Lease) -> Result<bool> {
        // Kept, expired, so that the token goes on growing.
        let rows = self.query(
            "UPDATE leases SET expires = to_timestamp(0) WHERE name = $1 AND holder = $2 \
             AND token = $3 AND expires > to_timestamp(0) RETURNING 1",
            &[&lease.name, &lease.holder, &token(lease.token)],
        )?;
        Ok(!rows.is_empty())
    }
}

impl WorkQueue for PgState {
    fn add_work(&self, items: &[WorkItem]) -> Result<usize> {
        self.queue_work(items)
    }

    fn claim_work(&self, worker: &str, n: usize, ttl: Duration) -> Result<Vec<Claim>> {
        self.claim_rows(worker, n, ttl)
    }

    fn work_left(&self, source: &str) -> Result<u64> {
        self.count_work(source)
    }

    fn wait_drained(&self, source: &str, timeout: Duration) -> Result<bool> {
        self.wait_for_drain(source, timeout)
    }

    fn complete(&self, claims: &[Claim]) -> Result<usize> {
        self.settle(claims, true)
    }

    fn release(&self, claims: &[Claim]) -> Result<usize> {
        self.settle(claims, false)
    }

    fn renew_work(&self, claims: &[Claim], ttl: Duration) -> Result<Vec<Claim>> {
        self.renew_claims(claims, ttl)
    }
}
