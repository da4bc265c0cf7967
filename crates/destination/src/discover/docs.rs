//! Fetching documents and walking lists.
//!
//! A document is first downloaded to a temporary file (bounded by the maximum document size),
//! then read with the model's streaming [`DocumentReader`] on a blocking thread, so that a 50 MB
//! Resource List is never held in memory. An index (`<sitemapindex>`, Z39.99-2014 §10.2, §12.2)
//! is expanded part by part, each part streamed on its own; a visited set and a depth limit stop
//! an index that lists itself.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use reqwest::header::{CONTENT_TYPE, DATE, ETAG, LAST_MODIFIED, LINK};
use resourcesync_model::{Capability, DocumentReader, Entry, Header, ReadOptions};

use crate::error::{Error, Result};
use crate::http::{Conditional, Http, header};

/// Most entries read from an index or a small document (Source Description, Capability List).
pub const MAX_INDEX_ENTRIES: usize = 100_000;
/// Deepest nesting of indexes followed (the specification has one level).
pub const MAX_INDEX_DEPTH: usize = 3;

/// Downloads documents into a scratch folder.
#[derive(Debug, Clone)]
pub struct DocFetcher {
    pub(crate) http: Arc<Http>,
    pub(crate) dir: PathBuf,
    pub(crate) max_bytes: u64,
}

/// A downloaded body of any kind.
#[derive(Debug)]
pub(crate) struct Download {
    pub url: String,
    pub file: tempfile::TempPath,
    pub link_header: Option<String>,
    pub content_type: Option<String>,
    /// The validators to send with the next GET of it, when strong enough ([`validators`]).
    pub validators: Option<Conditional>,
}

/// What a conditional GET of a document found (RFC 9110 §13.1).
#[derive(Debug)]
pub(crate) enum Fetched {
    /// 304 Not Modified: the copy last read is current.
    Unchanged,
    /// A new copy.
    Doc(Box<Doc>),
}

/// The validators of a response worth sending next time (RFC 9110 §8.8, §13.1): its `ETag`
/// and `Last-Modified`. A `Last-Modified` no earlier than the response's `Date` (to the second)
/// is weak (RFC 9110 §8.8.2.2): the document may change again within that second and keep it,
/// and an `ETag` may be made of it (nginx's is); a conditional GET could then answer 304 to a
/// document that changed, and changes would be skipped: such a response keeps no validator.
fn validators(resp: &reqwest::Response) -> Option<Conditional> {
    let etag = header(resp, ETAG);
    let last_modified = header(resp, LAST_MODIFIED);
    if let Some(lm) = &last_modified {
        let lm = httpdate::parse_http_date(lm).ok()?;
        let date = header(resp, DATE).and_then(|d| httpdate::parse_http_date(&d).ok())?;
        if date <= lm {
            return None;
        }
    }
    let c = Conditional {
        etag,
        last_modified,
    };
    (!c.is_empty()).then_some(c)
}

/// A downloaded ResourceSync or Sitemap document, its header read.
#[derive(Debug)]
pub(crate) struct Doc {
    pub url: String,
    pub header: Header,
    /// The validators it came with ([`validators`]).
    pub validators: Option<Conditional>,
    file: tempfile::TempPath,
    max_bytes: u64,
}

/// The options every document of the Source is read with: IRIs in `<loc>` are read as their
/// percent-encoded URIs, once, here, so that the state, the diff, the fetch and the mapping see
/// one form ([`resourcesync_model::mapping::iri_to_uri`]; counted, [`iri_warning`]).
fn read_opts(url: &str, max_bytes: u64) -> ReadOptions {
    let mut o = ReadOptions::named(url);
    o.max_document_bytes = max_bytes.max(1);
    o.iris_as_uris = true;
    o
}

/// The warning, once per list, about its `n` entries whose `<loc>` was an IRI.
pub(crate) fn iri_warning(list: &str, n: u64) -> String {
    format!(
        "{n} resource{s} of {list} {have} URIs with spaces or non-ASCII letters (IRIs, not the \
         URIs a <loc> must be: Z39.99-2014 §7, RFC 3986 §2): fetched percent-encoded, as \
         browsers do, and stored like their encoded form; tell the Source's maintainer",
        s = if n == 1 { "" } else { "s" },
        have = if n == 1 { "has" } else { "have" },
    )
}

impl DocFetcher {
    /// A fetcher using a client, writing downloads into `dir`, refusing documents larger than
    /// `max_bytes`.
    pub fn new(http: Arc<Http>, dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        DocFetcher {
            http,
            dir: dir.into(),
            max_bytes,
        }
    }

    /// Downloads a URL (with retries) to a temporary file.
    pub(crate) async fn download(&self, url: &str) -> Result<Download> {
        self.http.with_retries(|| self.download_once(url)).await
    }

    async fn download_once(&self, url: &str) -> Result<Download> {
        self.download_if(url, None).await?.ok_or_else(|| {
            Error::Http(resourcesync_http::Error::Status {
                url: url.to_owned(),
                status: 304,
                retry_after: None,
            })
        })
    }

    /// A conditional GET (with retries) of a document: `Unchanged` on 304.
    pub(crate) async fn fetch_if(&self, url: &str, cond: Option<&Conditional>) -> Result<Fetched> {
        let d = self
            .http
            .with_retries(|| self.download_if(url, cond))
            .await?;
        Ok(match d {
            None => Fetched::Unchanged,
            Some(d) => Fetched::Doc(Box::new(self.parse(d).await?)),
        })
    }

    /// One GET, conditional with `cond`: `None` on 304 (only possible with `cond`).
    async fn download_if(&self, url: &str, cond: Option<&Conditional>) -> Result<Option<Download>> {
        let mut resp = self.http.get_once(url, cond).await?;
        if resp.status().as_u16() == 304 && cond.is_some() {
            return Ok(None);
        }
        if resp.status().as_u16() == 304 {
            return Err(Error::Http(resourcesync_http::Error::Status {
                url: url.to_owned(),
                status: 304,
                retry_after: None,
            }));
        }
        let link_header = header(&resp, LINK);
        let content_type = header(&resp, CONTENT_TYPE);
        let validators = validators(&resp);
        if resp.content_length().is_some_and(|n| n > self.max_bytes) {
            return Err(too_large(url, self.max_bytes));
        }
        let mut tmp = tempfile::Builder::new()
            .prefix("doc-")
            .tempfile_in(&self.dir)
            .map_err(|e| Error::io(format!("temporary file in {}", self.dir.display()), e))?;
        let mut n = 0u64;
        while let Some(chunk) = self.http.chunk(&mut resp, url).await? {
            n += chunk.len() as u64;
            if n > self.max_bytes {
                return Err(too_large(url, self.max_bytes));
            }
            tmp.write_all(&chunk)
                .map_err(|e| Error::io("writing a temporary file", e))?;
        }
        tmp.flush()
            .map_err(|e| Error::io("writing a temporary file", e))?;
        Ok(Some(Download {
            url: url.to_owned(),
            file: tmp.into_temp_path(),
            link_header,
            content_type,
            validators,
        }))
    }

    /// Reads the header of a download; `Err` when it is not a Sitemap document.
    pub(crate) async fn parse(&self, d: Download) -> Result<Doc> {
        let max = self.max_bytes;
        let url = d.url.clone();
        let path = d.file.to_path_buf();
        let header = tokio::task::spawn_blocking(move || -> Result<Header> {
            let f = File::open(&path).map_err(|e| Error::io(format!("reading {url}"), e))?;
            let r = DocumentReader::open(f, read_opts(&url, max))?;
            Ok(r.header().clone())
        })
        .await??;
        Ok(Doc {
            url: d.url,
            header,
            validators: d.validators,
            file: d.file,
            max_bytes: max,
        })
    }

    /// Downloads and reads the header of a document.
    pub(crate) async fn document(&self, url: &str) -> Result<Doc> {
        let d = self.download(url).await?;
        self.parse(d).await
    }
}

impl Doc {
    /// Keeps the validators it came with, by its URL.
    fn remember_validators(&self, into: &mut HashMap<String, Conditional>) {
        if let Some(v) = &self.validators {
            into.insert(self.url.clone(), v.clone());
        }
    }

    /// Streams the entries through `f` on a blocking thread, returning the state back and how
    /// many `<loc>`s were IRIs read as their URIs ([`read_opts`]).
    pub(crate) async fn stream<S, F>(self, mut state: S, mut f: F) -> Result<(S, u64)>
    where
        S: Send + 'static,
        F: FnMut(&mut S, Entry) -> Result<()> + Send + 'static,
    {
        let Doc {
            url,
            file,
            max_bytes,
            ..
        } = self;
        tokio::task::spawn_blocking(move || -> Result<(S, u64)> {
            let fh = File::open(&file).map_err(|e| Error::io(format!("reading {url}"), e))?;
            let mut r = DocumentReader::open(fh, read_opts(&url, max_bytes))?;
            while let Some(e) = r.next_entry()? {
                f(&mut state, e)?;
                crate::crashpoint::point("list-entry");
            }
            drop(file);
            Ok((state, r.iris_read()))
        })
        .await?
    }

    /// The last entry of a small document (at most [`MAX_INDEX_ENTRIES`]; more is an error),
    /// the document kept: for an index, its last part (the open Change List, Z39.99-2014
    /// §12.2).
    pub(crate) async fn last_entry(&self) -> Result<Option<Entry>> {
        let (url, path, max) = (self.url.clone(), self.file.to_path_buf(), self.max_bytes);
        tokio::task::spawn_blocking(move || -> Result<Option<Entry>> {
            let fh = File::open(&path).map_err(|e| Error::io(format!("reading {url}"), e))?;
            let mut r = DocumentReader::open(fh, read_opts(&url, max))?;
            let (mut last, mut n) = (None, 0usize);
            while let Some(e) = r.next_entry()? {
                n += 1;
                if n > MAX_INDEX_ENTRIES {
                    return Err(Error::BadDocument {
                        url,
                        message: format!("more than {MAX_INDEX_ENTRIES} entries in an index"),
                    });
                }
                last = Some(e);
            }
            Ok(last)
        })
        .await?
    }

    /// The entries of a small document (at most [`MAX_INDEX_ENTRIES`]; more is an error).
    pub(crate) async fn entries(self) -> Result<Vec<Entry>> {
        let url = self.url.clone();
        self.stream(Vec::new(), move |v: &mut Vec<Entry>, e| {
            if v.len() >= MAX_INDEX_ENTRIES {
                return Err(Error::BadDocument {
                    url: url.clone(),
                    message: format!(
                        "more than {MAX_INDEX_ENTRIES} entries, the most read from a Source \
                         Description, Capability List or index: tell the Source's maintainer \
                         (Z39.99-2014 §10.2: split lists are indexed)"
                    ),
                });
            }
            v.push(e);
            Ok(())
        })
        .await
        .map(|(v, _)| v)
    }
}

/// What a list walk is told, in order: the top document, then each document of entries and its
/// entries.
pub(crate) trait ListSink: Send + 'static {
    /// The top document (the index, or the single list). An error stops the walk.
    fn top(&mut self, _url: &str, _header: &Header) -> Result<()> {
        Ok(())
    }
    /// Whether to read a part listed in an index (from its `<sitemap>` entry).
    fn want_child(&mut self, _entry: &Entry) -> bool {
        true
    }
    /// A document of entries is about to be streamed; `false` skips it.
    fn document(&mut self, _url: &str, _header: &Header) -> Result<bool> {
        Ok(true)
    }
    /// One entry.
    fn entry(&mut self, e: Entry) -> Result<()>;
}

/// What a walk saw.
#[derive(Debug, Clone)]
pub(crate) struct WalkInfo {
    /// The top document's header.
    pub top: Header,
    /// The top document's URL (an index a single Change List links to, when followed).
    pub top_url: String,
    /// The last part an index lists (for a Change List Index, the open Change List, Z39.99-2014
    /// §12.2); `None` for a single list.
    pub last_part: Option<String>,
    /// The validators of the documents fetched, by URL.
    pub validators: HashMap<String, Conditional>,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// Documents of a list fetched before the walk, by a conditional GET (crate::discover::known):
/// the top document, and parts either fetched (`Some`) or unchanged since the last run read
/// them whole (`None`: skipped, every entry of theirs was seen then).
#[derive(Debug, Default)]
pub(crate) struct Prefetched {
    /// The top document, when fetched already.
    pub top: Option<Doc>,
    /// Parts, by URL.
    pub parts: HashMap<String, Option<Doc>>,
    /// Whether a single Change List's `index` link is not followed (its index is known
    /// unchanged, so this list is the open one of an index read before).
    pub no_index_link: bool,
    /// Other documents fetched already and current (a 200, or a 304 to the validators of the
    /// copy read earlier in the run: `crate::sync::ahead`), by URL: read instead of fetched
    /// when the walk comes to them (the top's `index` link, or a part).
    pub fetched: HashMap<String, Doc>,
}

fn check_capability(doc: &Doc, cap: &Capability, warnings: &mut Vec<String>) -> Result<()> {
    match doc.header.capability() {
        Some(c) if c == cap => Ok(()),
        None if *cap == Capability::ResourceList => {
            warnings.push(format!(
                "{}: a plain Sitemap (no <rs:md>): read as a Resource List (Z39.99-2014 §10.1)",
                doc.url
            ));
            Ok(())
        }
        other => Err(Error::BadDocument {
            url: doc.url.clone(),
            message: format!(
                "expected a {} document, found {} (Z39.99-2014 §7: the capability of the \
                 <rs:md> says what a document is): the Source names it as its {cap}; tell the \
                 Source's maintainer",
                cap,
                other.map_or("a plain Sitemap".to_owned(), |c| format!("capability {c}"))
            ),
        }),
    }
}

/// "larger than the N bytes allowed", and what to do.
fn too_large(url: &str, max: u64) -> Error {
    Error::BadDocument {
        url: url.to_owned(),
        message: format!(
            "larger than the {max} bytes allowed for a document (five times the 50 MB a \
             Sitemap may have, Z39.99-2014 §7): tell the Source's maintainer (Z39.99-2014 \
             §10.2: large lists are split and indexed)"
        ),
    }
}

/// The error of a document the Source names (in its Capability List, an index, a link) that
/// could not be fetched, once retries are spent: with what the user can do.
pub(crate) fn named(e: Error) -> Error {
    match e {
        Error::Http(resourcesync_http::Error::Status { url, status, .. }) => {
            let hint = match status {
                404 | 410 => {
                    "the Source names this document but does not serve it: tell the Source's \
                     maintainer"
                }
                401 | 403 => {
                    "access refused: if the Source needs a token, give it with --token; else \
                     tell the Source's maintainer"
                }
                429 => "the Source asks for fewer requests: try again later, or with --rate",
                500..=599 => {
                    "the Source's server failed: try again later, and tell the Source's \
                     maintainer if it persists"
                }
                _ => "not a document: tell the Source's maintainer",
            };
            Error::BadDocument {
                url,
                message: format!("HTTP {status}: {hint}"),
            }
        }
        Error::Http(resourcesync_http::Error::Transport {
            url,
            message,
            transient: true,
        }) => Error::BadDocument {
            url,
            message: format!(
                "{message}: the Source could not be read: try again later (--timeout and \
                 --retries give it more time)"
            ),
        },
        other => other,
    }
}

/// Walks a list (Resource List or Change List, or their index) and streams every entry into the
/// sink. A part that cannot be read stops the walk with an error: a list read in part must not
/// be taken for the whole (deletes would follow).
pub(crate) async fn walk<S: ListSink>(
    f: &DocFetcher,
    url: &str,
    cap: Capability,
    sink: S,
) -> Result<(S, WalkInfo)> {
    walk_with(f, url, cap, sink, Prefetched::default()).await
}

/// The Change List Index at `ix` that the Change List at `url` links to, if it is one (else a
/// warning says why it is ignored).
async fn change_list_index(
    f: &DocFetcher,
    url: &str,
    ix: &str,
    fetched: Option<Doc>,
    warnings: &mut Vec<String>,
) -> Option<Doc> {
    let got = match fetched {
        Some(d) => Ok(d),
        None => f.document(ix).await,
    };
    match got {
        Ok(d) if d.header.is_index() && d.header.capability() == Some(&Capability::ChangeList) => {
            Some(d)
        }
        Ok(d) => {
            warnings.push(format!(
                "{}: the index link of {url} is not a Change List Index: ignored",
                d.url
            ));
            None
        }
        Err(e) => {
            warnings.push(format!("index of {url}: {e}: ignored"));
            None
        }
    }
}

/// Whether `e`, the last Change List an index lists (the open one, Z39.99-2014 §12.2), is
/// the open Change List `open` read already under another URL (a Source that names its open
/// list in the Capability List, linked to the index that lists it by its period's name): both
/// open (no `until`), of the same `from`. Its entries are then read from `open`, not fetched
/// again; a change published between the two reads is read by the next run, the cursor going
/// no further than the last change read.
pub(crate) fn is_the_open_list(open: &Doc, e: &resourcesync_model::Entry) -> bool {
    let (Some(a), Some(b)) = (open.header.md.as_ref(), e.md.as_ref()) else {
        return false;
    };
    match (a.from, b.from) {
        (Some(x), Some(y)) => {
            e.loc != open.url
                && a.until.is_none()
                && b.until.is_none()
                && x.cmp_instant(&y) == std::cmp::Ordering::Equal
        }
        _ => false,
    }
}

/// [`walk`], starting from documents fetched already.
pub(crate) async fn walk_with<S: ListSink>(
    f: &DocFetcher,
    url: &str,
    cap: Capability,
    mut sink: S,
    mut pre: Prefetched,
) -> Result<(S, WalkInfo)> {
    let mut warnings = Vec::new();
    let mut validators = HashMap::new();
    let mut last_part = None;
    let mut iris = 0u64;
    let mut visited: HashSet<String> = HashSet::new();
    visited.insert(url.to_owned());
    let mut doc = match pre.top.take() {
        Some(d) => d,
        None => f.document(url).await.map_err(named)?,
    };
    check_capability(&doc, &cap, &mut warnings)?;
    doc.remember_validators(&mut validators);
    // Z39.99-2014 §12.1: a Change List points to its index (`rel="index"`), which lists every
    // Change List; walk the index when the Capability List names a single list.
    let mut opened = None;
    if cap == Capability::ChangeList && !doc.header.is_index() && !pre.no_index_link {
        if let Some(ix) = doc.header.link("index").map(|l| l.href.clone()) {
            if visited.insert(ix.clone()) {
                let fetched = pre.fetched.remove(&ix);
                if let Some(d) = change_list_index(f, url, &ix, fetched, &mut warnings).await {
                    d.remember_validators(&mut validators);
                    opened = Some(std::mem::replace(&mut doc, d));
                }
            }
        }
    }
    sink.top(&doc.url, &doc.header)?;
    let top = doc.header.clone();
    let top_url = doc.url.clone();
    let mut queue: VecDeque<(String, usize)> = VecDeque::new();
    let mut pending_doc = Some(doc);
    let mut depth = 0usize;
    loop {
        let d = match pending_doc.take() {
            Some(d) => d,
            None => match queue.pop_front() {
                Some((u, dep)) => {
                    depth = dep;
                    let d = match pre.parts.remove(&u) {
                        Some(Some(d)) => d,
                        // Unchanged since the last run read it whole.
                        Some(None) => continue,
                        None => match pre.fetched.remove(&u) {
                            Some(d) => d,
                            None => f.document(&u).await.map_err(named)?,
                        },
                    };
                    check_capability(&d, &cap, &mut warnings)?;
                    d.remember_validators(&mut validators);
                    d
                }
                None => break,
            },
        };
        if d.header.is_index() {
            // Skipping its parts would take a list read in part for the whole (deletes would
            // follow): refused.
            if depth >= MAX_INDEX_DEPTH {
                return Err(Error::IndexTooDeep {
                    url: d.url,
                    depth: MAX_INDEX_DEPTH,
                });
            }
            if depth > 0 {
                warnings.push(format!("{}: an index inside an index", d.url));
            }
            let children = d.entries().await?;
            if depth == 0 {
                last_part = children.last().map(|e| e.loc.clone());
                if let Some(o) = opened.take() {
                    if let Some(e) = children.last().filter(|e| is_the_open_list(&o, e)) {
                        pre.parts.entry(e.loc.clone()).or_insert(Some(o));
                    }
                }
            }
            // Children go first, in the index's order (forward chronological for Change List
            // Indexes, Z39.99-2014 §12.2).
            let mut fresh = Vec::new();
            for e in children {
                if !sink.want_child(&e) {
                    continue;
                }
                if visited.insert(e.loc.clone()) {
                    fresh.push((e.loc, depth + 1));
                } else {
                    warnings.push(format!("{}: listed twice or lists itself: skipped", e.loc));
                }
            }
            for c in fresh.into_iter().rev() {
                queue.push_front(c);
            }
            continue;
        }
        if sink.document(&d.url, &d.header)? {
            let n;
            (sink, n) = d.stream(sink, |s: &mut S, e| s.entry(e)).await?;
            iris += n;
        }
    }
    if iris > 0 {
        warnings.push(iri_warning(&top_url, iris));
    }
    Ok((
        sink,
        WalkInfo {
            top,
            top_url,
            last_part,
            validators,
            warnings,
        },
    ))
}
