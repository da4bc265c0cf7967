//! One harvest: `ListRecords` (OAI-PMH 2.0 §4.5) from the first page through its resumption
//! tokens (§3.5), every record written into the index, all in one transaction: a harvest
//! that fails leaves the index as it was, so nothing is published that was not read.
//!
//! Bad input handled here: a token seen twice in one list (a provider that loops) is an
//! error after bounded work; so is a run of pages with no record; `badResumptionToken`
//! (§3.6) restarts the list once, then is an error; `noRecordsMatch` is an empty list;
//! `cannotDisseminateFormat` is an error naming the prefix; a response that is not
//! well-formed XML is an error naming the request, the line and what to do. A record whose
//! identifier has no safe path, or without a usable datestamp or metadata, is skipped with
//! its reason.
//!
//! A harvest is capped (the options `maxPages`, `maxRecords`, `maxHarvestBytes`,
//! `maxHarvestSeconds`, beside `maxResponseBytes` and `maxRecordBytes` per response and per
//! record): a repository that hands out a new token and a new record on every page would
//! otherwise keep one harvest, and its transaction, going for ever. Past a cap, the harvest is
//! an error naming the cap and how to raise it, and nothing of it is taken.

use std::collections::HashSet;
use std::time::Instant;

use resourcesync_model::{HashAlg, MultiHasher};

use super::client::{Client, describe};
use super::index::{self, Incoming};
use super::path::record_path;
use super::xml::{self, OaiError, Response};
use super::{OaiOptions, datestamp_ns};
use crate::error::{Error, Result};

/// Pages in a row with no record and a token after which a list is taken to loop.
const MAX_EMPTY_PAGES: u32 = 100;
/// Skipped records kept for the report (the rest are counted).
const MAX_SKIPPED_KEPT: usize = 100;

/// What a harvest did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarvestReport {
    /// The harvest's number in the index.
    pub seq: i64,
    /// Whether it listed everything (no `from`).
    pub full: bool,
    /// The `from` argument sent, if any.
    pub from: Option<String>,
    /// Requests sent.
    pub requests: u64,
    /// Records read (deleted ones included).
    pub records: u64,
    /// Records that changed the index (new, updated, deleted).
    pub changed: u64,
    /// Records deleted by absence (full harvests of repositories without persistent deletions).
    pub gone_by_absence: u64,
    /// Records skipped: how many.
    pub skipped: u64,
    /// The first of them: identifier and reason.
    pub skipped_first: Vec<(String, String)>,
    /// Times the list was started again after `badResumptionToken`.
    pub restarts: u32,
    /// Bytes of record documents read (deleted records take none).
    pub bytes: u64,
}

/// A response read (by `deadline` when given), or an error naming the request, where and what
/// to do.
pub(crate) fn fetch(
    client: &Client,
    opts: &OaiOptions,
    args: &[(&str, &str)],
    deadline: Option<Instant>,
) -> Result<Response> {
    let bytes = client.get(args, deadline)?;
    let limits = xml::Limits {
        record: opts.max_record_bytes,
        response: opts.max_response_bytes,
    };
    xml::parse(&bytes, limits).map_err(|e| {
        if e.limit {
            return Error::Inventory(format!(
                "oai-pmh {} ({}): {e}; nothing was taken from this harvest",
                client.base(),
                describe(args)
            ));
        }
        Error::Inventory(format!(
            "oai-pmh {} ({}): the response is not a well-formed OAI-PMH document: {e}; nothing \
             was taken from this harvest (the repository sent a broken page: try again later, \
             or report it to the repository's maintainers)",
            client.base(),
            describe(args)
        ))
    })
}

/// A harvest that reached one of its caps: the error naming it, and how to raise it.
fn capped(client: &Client, what: String, param: &str) -> Error {
    Error::Inventory(format!(
        "oai-pmh {}: {what} before the list ended; nothing was taken from this harvest, and \
         what was published before stays as it is (if the repository is that large, raise the \
         cap: {param}=N in the specification)",
        client.base()
    ))
}

/// Harvests `ListRecords` into the index (from `from` when given), as harvest number `seq`,
/// within the caps of `opts`.
pub(crate) fn harvest(
    client: &Client,
    opts: &OaiOptions,
    conn: &mut rusqlite::Connection,
    index_err: &dyn Fn(rusqlite::Error) -> Error,
    from: Option<String>,
) -> Result<HarvestReport> {
    let tx = conn.transaction().map_err(index_err)?;
    let seq = index::next_seq(&tx).map_err(index_err)?;
    let full = from.is_none();
    let started = Instant::now();
    let mut h = Harvest {
        client,
        opts,
        index_err,
        started,
        deadline: started.checked_add(opts.max_harvest_time),
        first_date: None,
        rep: HarvestReport {
            seq,
            full,
            from: from.clone(),
            ..HarvestReport::default()
        },
    };
    let mut first: Vec<(&str, &str)> = vec![("verb", "ListRecords")];
    first.push(("metadataPrefix", &opts.metadata_prefix));
    if let Some(s) = &opts.set {
        first.push(("set", s));
    }
    if let Some(f) = &from {
        first.push(("from", f));
    }
    while let ListEnd::Again = h.list(&tx, &first)? {}
    let mut rep = h.rep;
    if full {
        rep.gone_by_absence = index::delete_unseen(&tx, seq).map_err(index_err)? as u64;
    }
    let date = h.first_date.unwrap_or_default();
    index::finish(&tx, seq, &date, full).map_err(index_err)?;
    tx.commit().map_err(index_err)?;
    Ok(rep)
}

/// How one pass over the list ended.
enum ListEnd {
    /// The list is complete.
    Done,
    /// The repository refused a token: the list is taken again from its start.
    Again,
}

/// A harvest under way: what it reads with, its caps' clock, what it found so far.
struct Harvest<'a> {
    client: &'a Client,
    opts: &'a OaiOptions,
    index_err: &'a dyn Fn(rusqlite::Error) -> Error,
    started: Instant,
    deadline: Option<Instant>,
    /// The `responseDate` of the first response: where the next harvest starts from.
    first_date: Option<String>,
    rep: HarvestReport,
}

impl Harvest<'_> {
    /// One pass over the list, page by page, each record into the index.
    fn list(&mut self, tx: &rusqlite::Transaction<'_>, first: &[(&str, &str)]) -> Result<ListEnd> {
        let mut seen_tokens: HashSet<[u8; 16]> = HashSet::new();
        let mut token: Option<String> = None;
        let mut empty_pages = 0u32;
        loop {
            let args: Vec<(&str, &str)> = match &token {
                None => first.to_vec(),
                Some(t) => vec![("verb", "ListRecords"), ("resumptionToken", t.as_str())],
            };
            let page = self.request(&args)?;
            if let Some(e) = page.errors.first() {
                return self.oai_error(e, token.is_some(), &args);
            }
            if page.records.is_empty() {
                empty_pages += 1;
            } else {
                empty_pages = 0;
            }
            for rec in &page.records {
                self.record(tx, rec)?;
            }
            match page.token.filter(|t| !t.is_empty()) {
                None => return Ok(ListEnd::Done),
                Some(t) => {
                    self.check_token(&t, &mut seen_tokens, empty_pages)?;
                    token = Some(t);
                }
            }
        }
    }

    fn out_of_time(&self) -> Error {
        capped(
            self.client,
            format!(
                "the harvest took longer than maxHarvestSeconds={}",
                self.opts.max_harvest_time.as_secs()
            ),
            "maxHarvestSeconds",
        )
    }

    /// One page, within the caps on requests and time; the first one's `responseDate` kept.
    fn request(&mut self, args: &[(&str, &str)]) -> Result<Response> {
        let (client, opts) = (self.client, self.opts);
        if self.rep.requests >= opts.max_pages {
            return Err(capped(
                client,
                format!("the harvest sent maxPages={} requests", opts.max_pages),
                "maxPages",
            ));
        }
        if self.started.elapsed() >= opts.max_harvest_time {
            return Err(self.out_of_time());
        }
        self.rep.requests += 1;
        let page = match fetch(client, opts, args, self.deadline) {
            Ok(p) => p,
            Err(_) if self.started.elapsed() >= opts.max_harvest_time => {
                return Err(self.out_of_time());
            }
            Err(e) => return Err(e),
        };
        if self.first_date.is_none() {
            if page.response_date.is_empty() {
                return Err(Error::Inventory(format!(
                    "oai-pmh {} ({}): the response has no responseDate",
                    client.base(),
                    describe(args)
                )));
            }
            self.first_date = Some(page.response_date.clone());
        }
        Ok(page)
    }

    /// An OAI-PMH error answered to `args`: an empty list ends it (§3.6), a first bad token
    /// takes the list again, anything else is the harvest's error.
    fn oai_error(
        &mut self,
        e: &OaiError,
        had_token: bool,
        args: &[(&str, &str)],
    ) -> Result<ListEnd> {
        let base = self.client.base();
        match e.code.as_str() {
            "noRecordsMatch" => Ok(ListEnd::Done),
            "badResumptionToken" if had_token && self.rep.restarts == 0 => {
                tracing::warn!(
                    "oai-pmh {base}: badResumptionToken ({}); listing again from the start",
                    e.message
                );
                self.rep.restarts += 1;
                Ok(ListEnd::Again)
            }
            "badResumptionToken" => Err(Error::Inventory(format!(
                "oai-pmh {base} ({}): badResumptionToken again after starting the list anew \
                 ({}); the repository cannot complete a list: try again later",
                describe(args),
                e.message
            ))),
            "cannotDisseminateFormat" => Err(Error::Inventory(format!(
                "oai-pmh {base}: the repository cannot give metadataPrefix {:?} ({}); choose \
                 one of those its ListMetadataFormats lists (metadataPrefix=… in the \
                 specification)",
                self.opts.metadata_prefix, e.message
            ))),
            code => Err(Error::Inventory(format!(
                "oai-pmh {base} ({}): error {code}: {}",
                describe(args),
                e.message
            ))),
        }
    }

    /// One record, within the caps on records and bytes: into the index, or skipped with why.
    fn record(&mut self, tx: &rusqlite::Transaction<'_>, rec: &xml::Record) -> Result<()> {
        let (client, opts) = (self.client, self.opts);
        let rep = &mut self.rep;
        rep.records += 1;
        if rep.records > opts.max_records {
            return Err(capped(
                client,
                format!("the harvest read more than maxRecords={}", opts.max_records),
                "maxRecords",
            ));
        }
        rep.bytes += rec.metadata.as_ref().map_or(0, |m| m.len() as u64);
        if rep.bytes > opts.max_harvest_bytes {
            return Err(capped(
                client,
                format!(
                    "the harvest's records took more than maxHarvestBytes={} bytes",
                    opts.max_harvest_bytes
                ),
                "maxHarvestBytes",
            ));
        }
        match take(rec) {
            Err(reason) => {
                rep.skipped += 1;
                tracing::warn!(
                    "oai-pmh {}: record {:?} skipped: {reason}",
                    client.base(),
                    rec.identifier
                );
                if rep.skipped_first.len() < MAX_SKIPPED_KEPT {
                    rep.skipped_first.push((rec.identifier.clone(), reason));
                }
            }
            Ok((path, mtime_ns, md5)) => {
                let incoming = Incoming {
                    path: &path,
                    identifier: &rec.identifier,
                    datestamp: &rec.datestamp,
                    mtime_ns,
                    body: rec.metadata.as_deref().filter(|_| !rec.deleted).zip(md5),
                };
                if index::upsert(tx, rep.seq, &incoming).map_err(self.index_err)? {
                    rep.changed += 1;
                }
            }
        }
        Ok(())
    }

    /// A token seen before in this list, or one more page in a row without a record past
    /// [`MAX_EMPTY_PAGES`], is taken for a loop.
    fn check_token(&self, t: &str, seen: &mut HashSet<[u8; 16]>, empty_pages: u32) -> Result<()> {
        let base = self.client.base();
        if !seen.insert(token_hash(t)) {
            return Err(Error::Inventory(format!(
                "oai-pmh {base}: the resumptionToken {:?} came twice in one list (after {} \
                 requests): the repository loops; nothing was taken from this harvest (report \
                 it to the repository's maintainers)",
                t.chars().take(80).collect::<String>(),
                self.rep.requests
            )));
        }
        if empty_pages >= MAX_EMPTY_PAGES {
            return Err(Error::Inventory(format!(
                "oai-pmh {base}: {MAX_EMPTY_PAGES} pages in a row without a record, each with \
                 another resumptionToken: taken for a loop; nothing was taken from this harvest"
            )));
        }
        Ok(())
    }
}

fn token_hash(t: &str) -> [u8; 16] {
    let mut h = MultiHasher::new(&[HashAlg::Md5]);
    h.update(t.as_bytes());
    let hex = h.finish().value_of(&HashAlg::Md5).unwrap_or_default();
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("00"), 16).unwrap_or(0);
    }
    out
}

/// A record's path, time and (when not deleted) MD5 of its metadata, or why it is skipped.
fn take(rec: &xml::Record) -> std::result::Result<(String, i64, Option<String>), String> {
    let path = record_path(&rec.identifier)?;
    let path = path.to_string_lossy().into_owned();
    let mtime_ns = datestamp_ns(&rec.datestamp)
        .ok_or_else(|| format!("datestamp {:?} is not an OAI-PMH datestamp", rec.datestamp))?;
    if rec.deleted {
        return Ok((path, mtime_ns, None));
    }
    if let Some(p) = &rec.problem {
        return Err(p.clone());
    }
    let Some(md) = &rec.metadata else {
        return Err("no <metadata>".into());
    };
    let mut h = MultiHasher::new(&[HashAlg::Md5]);
    h.update(md);
    Ok((path, mtime_ns, h.finish().value_of(&HashAlg::Md5)))
}
