//! The validator: checks a document, streamed, against the rules of the specifications
//! ([`crate::rules`]), per document kind.
//!
//! It accepts both 1.0 (Z39.99-2014) and 1.1 (Z39.99-2017) documents. Where the versions differ
//! (1.0 makes `<lastmod>` mandatory in Change Lists; 1.1 makes it optional and orders entries by
//! `datetime`), the validator applies the 1.1 rule and reports the 1.0 one as a warning, so that
//! a valid document of either version validates: entries that carry `datetime` are ordered by
//! it, and `<lastmod>` orders (and is expected on) the entries of documents without `datetime`
//! only (see `order`).
//!
//! Every finding is one the specifications support, once per fault: a present but unreadable
//! attribute is reported as such, not also as missing ([`Metadata::invalid`](crate::Metadata::invalid)).
//!
//! Memory is bounded: per document it keeps the previous entry's time, the capabilities seen
//! (Capability Lists), a set of 64-bit hashes of the first 50,001 `<loc>`s for duplicate
//! detection, and the `<lastmod>` findings held back until it is known whether a change document
//! uses `datetime`; findings are capped (see [`Findings`]).
//!
//! Layout: `document` (the root and its `<rs:md>` and `<rs:ln>`, per document kind), `entry`
//! (each entry against its document kind, duplicate `<loc>`s), `links` (`href` and `rel` of
//! every `<rs:ln>`), `order` (the chronological order of change documents).

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::io::Read;

use crate::datetime::W3cDateTime;
use crate::document::{
    Capability, Change, Entry, Header, MAX_DOCUMENT_BYTES, MAX_ENTRIES, Position, Root,
};
use crate::error::Error;
use crate::finding::Findings;
use crate::hash::HashAlg;
use crate::reader::DocumentReader;
use crate::rules::{self, Rule};

#[cfg(test)]
mod differential;
mod document;
mod entry;
mod links;
mod order;

pub use links::is_absolute_uri;

use entry::Identity;
use order::ChangeOrder;

/// What a document is and what was found in it.
#[derive(Debug, Clone)]
pub struct Report {
    /// The document's name.
    pub name: String,
    /// Root element.
    pub root: Root,
    /// The capability of the root `<rs:md>`, if any.
    pub capability: Option<Capability>,
    /// A readable kind, e.g. "Change List Index".
    pub kind: String,
    /// Number of entries.
    pub entries: u64,
    /// Bytes read (after decompression).
    pub bytes: u64,
    /// Earliest and latest entry time (change time, else `<lastmod>`).
    pub time_span: Option<(W3cDateTime, W3cDateTime)>,
    /// Hash algorithms used by entries, with counts.
    pub digests: Vec<(String, u64)>,
    /// Entries per change type (change documents).
    pub changes: Vec<(String, u64)>,
    /// The findings, in document order.
    pub findings: Findings,
}

impl Report {
    /// Whether no error was found (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.findings.error_count() == 0
    }
}

/// Checks documents entry by entry. Feed it the header, every entry, then [`finish`](Self::finish).
#[derive(Debug)]
pub struct Validator {
    header: Header,
    findings: Findings,
    entries: u64,
    prev_time: Option<W3cDateTime>,
    prev_key_pos: Position,
    caps_seen: HashSet<Capability>,
    locs: HashSet<u64, BuildHasherDefault<Identity>>,
    span: Option<(W3cDateTime, W3cDateTime)>,
    digests: Vec<(HashAlg, u64)>,
    changes: Vec<(Change, u64)>,
    open_entry: Option<Position>,
    prev_until: Option<W3cDateTime>,
    header_pos: Position,
    kind: std::sync::Arc<str>,
    from: Option<W3cDateTime>,
    until: Option<W3cDateTime>,
    /// Order of the entries of change documents (by datetime, else `<lastmod>`).
    change_order: ChangeOrder,
    /// The finding for a root without `<rs:md>`, reported at the end unless the reader found
    /// it after the entries (see [`Validator::root_md_after_entries`]).
    md_missing: Option<String>,
}

impl Validator {
    /// Starts validating a document with this header.
    /// `header_pos` is where findings about the document as a whole are reported (the root
    /// `<rs:md>`, else the root element).
    pub fn new(header: &Header, header_pos: Position, max_findings: usize) -> Self {
        let mut v = Validator {
            header: header.clone(),
            findings: Findings::new(max_findings),
            entries: 0,
            prev_time: None,
            prev_key_pos: Position::default(),
            caps_seen: HashSet::new(),
            locs: HashSet::default(),
            span: None,
            digests: Vec::new(),
            changes: Vec::new(),
            open_entry: None,
            prev_until: None,
            header_pos,
            kind: header.kind_name().into(),
            from: header.md.as_ref().and_then(|m| m.from),
            until: header.md.as_ref().and_then(|m| m.until),
            change_order: ChangeOrder::new(max_findings),
            md_missing: None,
        };
        v.check_header();
        v
    }

    fn push(&mut self, rule: &'static Rule, pos: Position, msg: impl Into<String>) {
        self.findings.push(rule, pos, msg);
    }

    /// Tells the validator that the root's `<rs:md>` came after the first entry (the reader
    /// reports that as `RS-7-md-position`, see [`DocumentReader::root_md_after_entries`]), so
    /// that it is not also reported missing: one finding per fault.
    pub fn root_md_after_entries(&mut self) {
        self.md_missing = None;
    }

    fn check_interval(
        &mut self,
        from: Option<&W3cDateTime>,
        until: Option<&W3cDateTime>,
        pos: Position,
    ) {
        if let (Some(f), Some(u)) = (from, until) {
            if u.cmp_instant(f).is_lt() {
                self.push(
                    rules::RS_UNTIL_AFTER_FROM,
                    pos,
                    format!("until {u} is earlier than from {f}"),
                );
            }
        }
    }

    /// Completes validation of a document of `bytes` bytes.
    pub fn finish(mut self, name: &str, bytes: u64) -> Report {
        if let Some(msg) = self.md_missing.take() {
            self.push(rules::RS_MD_MANDATORY, self.header_pos, msg);
        }
        self.change_order.finish(&mut self.findings);
        if self.entries > MAX_ENTRIES as u64 {
            self.push(
                rules::SM_MAX_ENTRIES,
                self.header_pos,
                format!(
                    "{} entries; the limit is {MAX_ENTRIES}: split the document and add an index",
                    self.entries
                ),
            );
        }
        if bytes > MAX_DOCUMENT_BYTES {
            self.push(
                rules::SM_MAX_BYTES,
                self.header_pos,
                format!("{bytes} bytes; the limit is {MAX_DOCUMENT_BYTES}: split the document and add an index"),
            );
        }
        self.findings.sort();
        Report {
            name: name.to_owned(),
            root: self.header.root,
            capability: self.header.capability().cloned(),
            kind: self.header.kind_name(),
            entries: self.entries,
            bytes,
            time_span: self.span,
            digests: self
                .digests
                .into_iter()
                .map(|(a, n)| (a.token().to_owned(), n))
                .collect(),
            changes: self
                .changes
                .into_iter()
                .map(|(c, n)| (c.as_str().to_owned(), n))
                .collect(),
            findings: self.findings,
        }
    }
}

/// Reads and validates a whole document. Reader findings and validator findings are merged in
/// document order. A fatal reader error is returned as `Err`.
pub fn validate<R: Read>(reader: DocumentReader<R>) -> Result<Report, Error> {
    validate_each(reader, |_| {})
}

/// [`validate`], handing every entry to `each` once it is checked (for callers that also use
/// the entries, e.g. to follow links, in the same single pass).
pub fn validate_each<R: Read>(
    mut reader: DocumentReader<R>,
    mut each: impl FnMut(&Entry),
) -> Result<Report, Error> {
    let max = reader.max_findings();
    let mut v = Validator::new(reader.header(), reader.header_position(), max);
    // One entry, reused: its buffers serve every entry of the document.
    let mut e = Entry::default();
    while reader.next_entry_into(&mut e)? {
        v.entry(&e);
        each(&e);
    }
    if reader.root_md_after_entries().is_some() {
        v.root_md_after_entries();
    }
    let bytes = reader.bytes_read();
    let name = reader.name().to_owned();
    let mut report = v.finish(&name, bytes);
    let mut all = reader.take_findings();
    all.extend(std::mem::take(&mut report.findings));
    all.sort();
    report.findings = all;
    Ok(report)
}
