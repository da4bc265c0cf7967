//! [`OaiInventory`]: a Source in front of an OAI-PMH 2.0 repository, one
//! resource per record.
//!
//! - `client.rs`: HTTP requests (size limit, `503` + `Retry-After`).
//! - `xml.rs`: reading responses (quick-xml, no DTD, no entity but XML's own).
//! - `harvest.rs`: `ListRecords` through resumption tokens into the index, in one transaction.
//! - `index.rs`: the on-disk index (SQLite) the listing, `open`/`serve` and the change feed
//!   read, in path order.
//! - `path.rs`: identifier → `records/<encoded>.xml`.
//!
//! A record's resource is its metadata in the chosen format (the `<metadata>` element's
//! content as a standalone XML document), at the path of its identifier, its datestamp as its
//! time; deleted records (`<header status="deleted">`, OAI-PMH 2.0 §2.5.1) are deletions.
//! [`Inventory::list`] first brings the index up to date (a harvest: incremental with `from`
//! when the repository keeps its deletions, `deletedRecord` = `persistent`; otherwise a full
//! one, deletions then found by absence), then lists the index. `open` and `serve` give the
//! stored bytes, so the digests published are those of what is served.
//!
//! The [`ChangeFeed`] cursor is `SEQ@RESPONSEDATE`: the index's harvest number and the
//! `responseDate` of that harvest's first response. The changes after it are the records
//! whose row a later harvest changed, so asking twice from one cursor gives the same answer.
//! An incremental harvest asks `from` one granule (a second, or a day) before the last
//! harvest's `responseDate`: a record whose datestamp was set just before that moment but
//! whose change became visible just after it (a repository's transaction committing late)
//! is then still harvested; records harvested again unchanged (same datestamp and bytes) are
//! no change.

mod client;
mod harvest;
mod index;
mod path;
mod xml;

use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use resourcesync_model::Hashes;

use crate::error::{Error, Result};
use crate::inventory::{
    ChangeFeed, Changed, Feed, Inventory, Listed, Listing, Served, Skipped, feed_known,
};
use crate::uri::path_bytes;

pub use harvest::HarvestReport;
pub use path::{DIR as RECORDS_DIR, MAX_SEGMENT, record_path};

/// The scheme of an OAI-PMH inventory's specification.
pub const SCHEME: &str = "oai-pmh";

/// The index's file name in the Source's working directory.
pub const INDEX_FILE: &str = ".oai-pmh-index.sqlite";

/// How to harvest.
#[derive(Debug, Clone)]
pub struct OaiOptions {
    /// The metadata format (`metadataPrefix`, OAI-PMH 2.0 §3.4); `oai_dc` by default.
    pub metadata_prefix: String,
    /// Only the records of this set (`set`, §3.4), when given.
    pub set: Option<String>,
    /// The largest response taken, in bytes, and the most bytes its records may take once
    /// made standalone documents (`maxResponseBytes`, 64 MiB by default).
    pub max_response_bytes: u64,
    /// The largest record document, in bytes (`maxRecordBytes`, 16 MiB by default).
    pub max_record_bytes: u64,
    /// The most requests (pages) one harvest sends (`maxPages`, 1,000,000 by default).
    pub max_pages: u64,
    /// The most records one harvest reads, deleted ones included (`maxRecords`, 100,000,000
    /// by default).
    pub max_records: u64,
    /// The most bytes of record documents one harvest takes (`maxHarvestBytes`, 256 GiB by
    /// default).
    pub max_harvest_bytes: u64,
    /// The longest one harvest may take (`maxHarvestSeconds`, 3 days by default).
    pub max_harvest_time: Duration,
    /// How many times in a row a `503` (or `429`) is waited for before giving up (5).
    pub max_retries: u32,
    /// The longest wait after one, whatever `Retry-After` says (2 minutes).
    pub max_retry_wait: Duration,
    /// The longest a request may take (5 minutes).
    pub request_timeout: Duration,
}

impl Default for OaiOptions {
    fn default() -> Self {
        OaiOptions {
            metadata_prefix: "oai_dc".into(),
            set: None,
            max_response_bytes: 64 << 20,
            max_record_bytes: 16 << 20,
            max_pages: 1_000_000,
            max_records: 100_000_000,
            max_harvest_bytes: 256 << 30,
            max_harvest_time: Duration::from_secs(3 * 24 * 3600),
            max_retries: 5,
            max_retry_wait: Duration::from_secs(120),
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// The finest datestamp a repository gives (`granularity`, OAI-PMH 2.0 §3.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// `YYYY-MM-DD`.
    Day,
    /// `YYYY-MM-DDThh:mm:ssZ`.
    Second,
}

/// Whether a repository keeps its deleted records (`deletedRecord`, OAI-PMH 2.0 §2.5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletedRecord {
    /// `no`: deletions are never shown.
    No,
    /// `transient`: shown for a while.
    Transient,
    /// `persistent`: always shown.
    Persistent,
}

/// An OAI-PMH repository as an inventory (see the module's documentation).
#[derive(Debug)]
pub struct OaiInventory {
    client: client::Client,
    opts: OaiOptions,
    granularity: Granularity,
    deleted: DeletedRecord,
    index: index::Index,
}

/// The nanoseconds since the epoch of an OAI-PMH datestamp (`YYYY-MM-DD`, or UTC
/// `YYYY-MM-DDThh:mm:ssZ`, fractions of a second taken).
pub(crate) fn datestamp_ns(s: &str) -> Option<i64> {
    let t = if s.len() == 10 {
        s.parse::<jiff::civil::Date>()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
    } else if s.ends_with('Z') {
        s.parse::<jiff::Timestamp>().ok()?
    } else {
        return None;
    };
    i64::try_from(t.as_nanosecond()).ok()
}

/// `from` for a harvest after one whose first response was dated `response_date`: one
/// granule earlier (see the module's documentation), in the repository's granularity.
fn from_after(response_date: &str, g: Granularity) -> Option<String> {
    let t: jiff::Timestamp = response_date.parse().ok()?;
    match g {
        Granularity::Second => {
            let t = t.checked_sub(jiff::SignedDuration::from_secs(1)).ok()?;
            Some(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        }
        Granularity::Day => {
            let d = t
                .to_zoned(jiff::tz::TimeZone::UTC)
                .date()
                .yesterday()
                .ok()?;
            Some(d.strftime("%Y-%m-%d").to_string())
        }
    }
}

/// Splits a specification `oai-pmh:URL[?metadataPrefix=P&set=S&maxResponseBytes=N&…]` into
/// the base URL and the options (the caps: `maxResponseBytes`, `maxRecordBytes`, `maxPages`,
/// `maxRecords`, `maxHarvestBytes`, `maxHarvestSeconds`, each a positive number).
pub fn parse_spec(spec: &str) -> Result<(String, OaiOptions)> {
    let bad = |m: String| Error::Config(format!("--inventory {spec:?}: {m}"));
    let rest = spec
        .split_once(':')
        .filter(|(s, _)| s.eq_ignore_ascii_case(SCHEME))
        .map(|(_, r)| r)
        .ok_or_else(|| bad(format!("not {SCHEME}:URL")))?;
    let (base, query) = rest.split_once('?').unwrap_or((rest, ""));
    let lower = base.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) || base.len() < 10 {
        return Err(bad(
            "the repository's base URL must be an http:// or https:// URL (oai-pmh:http://host/oai)"
                .into(),
        ));
    }
    let mut opts = OaiOptions::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_encoding::percent_decode_str(v)
            .decode_utf8()
            .map_err(|_| bad(format!("{k}: not UTF-8")))?
            .into_owned();
        match k {
            "metadataPrefix" if !v.is_empty() => opts.metadata_prefix = v,
            "set" if !v.is_empty() => opts.set = Some(v),
            "maxResponseBytes" | "maxRecordBytes" | "maxPages" | "maxRecords"
            | "maxHarvestBytes" | "maxHarvestSeconds" => {
                let n: u64 = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| bad(format!("{k}={v:?}: not a positive number")))?;
                match k {
                    "maxResponseBytes" => opts.max_response_bytes = n,
                    "maxRecordBytes" => opts.max_record_bytes = n,
                    "maxPages" => opts.max_pages = n,
                    "maxRecords" => opts.max_records = n,
                    "maxHarvestBytes" => opts.max_harvest_bytes = n,
                    _ => opts.max_harvest_time = Duration::from_secs(n),
                }
            }
            _ => {
                return Err(bad(format!(
                    "unknown or empty parameter {k:?}: it takes metadataPrefix, set, \
                     maxResponseBytes, maxRecordBytes, maxPages, maxRecords, maxHarvestBytes \
                     and maxHarvestSeconds (the base URL itself has no query)"
                )));
            }
        }
    }
    Ok((base.to_owned(), opts))
}

impl OaiInventory {
    /// Opens the specification `spec` (see [`parse_spec`]) with its index in `work`.
    pub fn from_spec(spec: &str, work: &Path) -> Result<Self> {
        let (base, opts) = parse_spec(spec)?;
        Self::open(&base, opts, work)
    }

    /// Opens the repository at `base` (its `Identify` answer is asked now: granularity and
    /// deletion policy), with its index in `work` ([`INDEX_FILE`]). Nothing is harvested yet:
    /// the first listing does.
    pub fn open(base: &str, opts: OaiOptions, work: &Path) -> Result<Self> {
        let client = client::Client::new(base, &opts)?;
        let id = harvest::fetch(&client, &opts, &[("verb", "Identify")], None)?;
        if let Some(e) = id.errors.first() {
            return Err(Error::Inventory(format!(
                "oai-pmh {base} (verb=Identify): error {}: {}",
                e.code, e.message
            )));
        }
        let granularity = match id.granularity.as_deref() {
            Some("YYYY-MM-DD") => Granularity::Day,
            Some("YYYY-MM-DDThh:mm:ssZ") => Granularity::Second,
            other => {
                return Err(Error::Inventory(format!(
                    "oai-pmh {base} (verb=Identify): granularity {other:?} is not one OAI-PMH \
                     2.0 defines; is this an OAI-PMH 2.0 repository?"
                )));
            }
        };
        let deleted = match id.deleted_record.as_deref() {
            Some("persistent") => DeletedRecord::Persistent,
            Some("transient") => DeletedRecord::Transient,
            _ => DeletedRecord::No,
        };
        let key = format!(
            "{base}\n{}\n{}",
            opts.metadata_prefix,
            opts.set.as_deref().unwrap_or("")
        );
        let index = index::Index::open(&work.join(INDEX_FILE), &key)?;
        Ok(OaiInventory {
            client,
            opts,
            granularity,
            deleted,
            index,
        })
    }

    /// The repository's granularity.
    pub fn granularity(&self) -> Granularity {
        self.granularity
    }

    /// The repository's deletion policy.
    pub fn deleted_record(&self) -> DeletedRecord {
        self.deleted
    }

    /// Brings the index up to date: a full harvest the first time, or when the repository
    /// does not keep its deletions; otherwise from one granule before the last harvest.
    pub fn harvest(&self) -> Result<HarvestReport> {
        let mut conn = self.index.writer();
        let last = self.index.last_harvest()?;
        let from = match (&last, self.deleted) {
            (Some((_, date)), DeletedRecord::Persistent) => from_after(date, self.granularity),
            _ => None,
        };
        let err = |e| self.index.err(e);
        let rep = harvest::harvest(&self.client, &self.opts, &mut conn, &err, from)?;
        tracing::info!(
            "oai-pmh {}: harvest {} ({}): {} requests, {} records, {} changed, {} skipped",
            self.client.base(),
            rep.seq,
            rep.from
                .as_deref()
                .map_or("full".to_owned(), |f| format!("from {f}")),
            rep.requests,
            rep.records,
            rep.changed,
            rep.skipped
        );
        Ok(rep)
    }

    fn key(rel: &Path) -> Option<String> {
        String::from_utf8(path_bytes(rel).into_owned()).ok()
    }

    fn listed(r: index::Row) -> Listed {
        Listed {
            rel: PathBuf::from(r.path),
            len: r.length,
            mtime_ns: r.mtime_ns,
            hashes: Hashes::from_known(r.md5, None, None),
            via: None,
        }
    }

    /// The rows after a position, a page at a time (present ones, or those changed after
    /// harvest `changed_after`).
    fn rows(&self, changed_after: Option<i64>) -> impl Iterator<Item = Result<index::Row>> + '_ {
        let mut buf: VecDeque<index::Row> = VecDeque::new();
        let mut last: Option<String> = None;
        let mut done = false;
        std::iter::from_fn(move || {
            if buf.is_empty() && !done {
                match self.index.page(last.as_deref(), changed_after) {
                    Ok(p) => {
                        done = p.len() < index::PAGE;
                        buf.extend(p);
                    }
                    Err(e) => {
                        done = true;
                        return Some(Err(e));
                    }
                }
            }
            let r = buf.pop_front()?;
            last = Some(r.path.clone());
            Some(Ok(r))
        })
    }

    fn not_found(rel: &Path) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{}: no such record", rel.display()),
        )
    }

    fn body(&self, rel: &Path) -> std::io::Result<(Vec<u8>, i128)> {
        let key = Self::key(rel).ok_or_else(|| Self::not_found(rel))?;
        self.index
            .body(&key)
            .map_err(std::io::Error::other)?
            .ok_or_else(|| Self::not_found(rel))
    }
}

/// A failure of the index while listing: reported, and the listing ends.
fn index_failure(e: Error) -> Skipped {
    Skipped {
        path: PathBuf::from(path::DIR),
        reason: format!("the index could not be read: {e}"),
    }
}

impl Inventory for OaiInventory {
    /// Harvests what changed (see [`OaiInventory::harvest`]: a failed harvest is an error,
    /// and nothing of it is listed), then lists the index in path order, a page at a time.
    fn list(&self) -> Result<Listing<'_>> {
        self.harvest()?;
        Ok(Box::new(
            self.rows(None)
                .map(|r| r.map(Self::listed).map_err(index_failure)),
        ))
    }

    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        let (b, _) = self.body(rel)?;
        Ok(Box::new(std::io::Cursor::new(b)))
    }

    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let key = Self::key(rel).ok_or_else(|| Self::not_found(rel))?;
        self.index
            .stat(&key)
            .map_err(std::io::Error::other)?
            .ok_or_else(|| Self::not_found(rel))
    }

    /// One lookup: the stored bytes cannot change while read.
    fn read_stable(
        &self,
        rel: &Path,
        buf: &mut Vec<u8>,
        sink: &mut dyn FnMut(&[u8]),
    ) -> std::io::Result<Option<(u64, i128)>> {
        let (b, mtime_ns) = self.body(rel)?;
        let len = b.len() as u64;
        let n = feed_known(&mut std::io::Cursor::new(b), buf, len, sink)?;
        Ok((n == len).then_some((len, mtime_ns)))
    }

    fn serve(&self, rel: &Path) -> std::io::Result<Option<Served>> {
        match self.body(rel) {
            Ok((b, mtime_ns)) => Ok(Some(Served::Body {
                len: b.len() as u64,
                mtime_ns,
                body: Box::new(std::io::Cursor::new(b)),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn change_feed(&self) -> Option<&dyn ChangeFeed> {
        Some(self)
    }
}

impl ChangeFeed for OaiInventory {
    /// The last harvest (one is made first when there is none).
    fn cursor(&self) -> Result<String> {
        if self.index.last_harvest()?.is_none() {
            self.harvest()?;
        }
        let (seq, date) = self
            .index
            .last_harvest()?
            .ok_or_else(|| Error::Inventory("oai-pmh: no harvest recorded".into()))?;
        Ok(format!("{seq}@{date}"))
    }

    /// Harvests what changed, then gives every record the harvests after `cursor` changed.
    fn changes_since(&self, cursor: &str) -> Result<Feed<'_>> {
        let unknown = || {
            Error::Inventory(format!(
                "oai-pmh: {cursor:?} is not a cursor of this index (it was made anew, or the \
                 cursor is another inventory's): list everything instead"
            ))
        };
        let (seq, date) = cursor.split_once('@').ok_or_else(unknown)?;
        let seq: i64 = seq.parse().map_err(|_| unknown())?;
        if self.index.harvest_date(seq)?.as_deref() != Some(date) {
            return Err(unknown());
        }
        self.harvest()?;
        let next = self.cursor()?;
        let changes = self.rows(Some(seq)).map(|r| match r {
            Ok(r) if r.deleted => Ok(Changed::Gone(PathBuf::from(r.path))),
            Ok(r) => Ok(Changed::Present(Self::listed(r))),
            Err(e) => Err(index_failure(e)),
        });
        Ok(Feed {
            changes: Box::new(changes),
            cursor: next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specifications_are_parsed_or_refused_clearly() {
        let (base, o) = parse_spec("oai-pmh:http://h/oai").expect("plain");
        assert_eq!(
            (base.as_str(), o.metadata_prefix.as_str()),
            ("http://h/oai", "oai_dc")
        );
        let (_, o) =
            parse_spec("OAI-PMH:https://h/oai?metadataPrefix=marc21&set=a%3Ab&maxResponseBytes=9")
                .expect("full");
        assert_eq!(o.metadata_prefix, "marc21");
        assert_eq!(o.set.as_deref(), Some("a:b"));
        assert_eq!(o.max_response_bytes, 9);
        let (_, o) = parse_spec(
            "oai-pmh:http://h/oai?maxRecordBytes=1&maxPages=2&maxRecords=3&maxHarvestBytes=4\
             &maxHarvestSeconds=5",
        )
        .expect("caps");
        assert_eq!(
            (
                o.max_record_bytes,
                o.max_pages,
                o.max_records,
                o.max_harvest_bytes,
                o.max_harvest_time
            ),
            (1, 2, 3, 4, Duration::from_secs(5))
        );
        for bad in [
            "oai-pmh:ftp://h/oai",
            "oai-pmh:http://h/oai?verb=Identify",
            "oai-pmh:http://h/oai?maxResponseBytes=0",
            "oai-pmh:http://h/oai?maxPages=0",
            "oai-pmh:http://h/oai?maxHarvestSeconds=soon",
            "postgres://h",
        ] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn datestamps_and_the_overlap_of_one_granule() {
        assert_eq!(datestamp_ns("1970-01-02"), Some(86_400_000_000_000));
        assert_eq!(datestamp_ns("1970-01-01T00:00:01Z"), Some(1_000_000_000));
        assert_eq!(datestamp_ns("yesterday"), None);
        assert_eq!(datestamp_ns("1970-01-01T00:00:01+02:00"), None);
        assert_eq!(
            from_after("2026-03-01T00:00:00Z", Granularity::Second).as_deref(),
            Some("2026-02-28T23:59:59Z")
        );
        assert_eq!(
            from_after("2026-03-01T10:00:00Z", Granularity::Day).as_deref(),
            Some("2026-02-28")
        );
    }
}
