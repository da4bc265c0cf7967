//! Streaming writer: deterministic documents, split into numbered parts and an index past the
//! Sitemap limits (Z39.99-2014 §7: 50,000 entries, 50 MB; §10.2 Resource List Index; §12.2
//! Change List Index).
//!
//! [`DocumentWriter`] writes one document. [`SplitWriter`] takes any number of entries and writes
//! either one document or, when a limit would be passed, numbered parts and a `<sitemapindex>`:
//! every part links to the index with `rel="index"` and carries the root `rel="up"` link; the
//! index lists the parts with `at`/`completed` (snapshot documents) or `from`/`until` (change
//! documents: each part covers from the end of the previous one to its last entry, the last part
//! ends at the document's `until`, or stays open without one).
//!
//! Output is a function of the input alone: attribute order is fixed, one entry per line.

use std::fmt::Write as _;
use std::io::{self, Read, Seek, SeekFrom, Write};

use crate::datetime::W3cDateTime;
use crate::document::{
    Entry, ExtAttr, Header, Link, MAX_DOCUMENT_BYTES, MAX_ENTRIES, Metadata, RS_NS, Root,
    SITEMAP_NS,
};
use crate::error::Error;
use crate::reader::escape_text_into;

const SPOOL_BLOCK: usize = 64 * 1024;

const XML_DECL: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

fn check_chars(doc: &str, what: &str, s: &str) -> Result<(), Error> {
    // The common case at byte speed: no control character, and no 0xEF lead byte (which
    // U+FFFE and U+FFFF, encoded EF BF BE and EF BF BF, start with).
    if s.bytes().all(|b| b >= 0x20 && b != 0xEF) {
        return Ok(());
    }
    // XML 1.0 §2.2: these characters cannot appear in a document at all, escaped or not.
    if let Some(c) = s.chars().find(|&c| {
        (c < '\u{20}' && !matches!(c, '\t' | '\n' | '\r')) || c == '\u{FFFE}' || c == '\u{FFFF}'
    }) {
        return Err(Error::Unwritable {
            doc: doc.to_owned(),
            message: format!(
                "{what} contains U+{:04X}, which XML cannot represent",
                c as u32
            ),
        });
    }
    Ok(())
}

/// Whether an attribute value has characters [`push_attr_value`] escapes.
fn needs_attr_escape(s: &str) -> bool {
    s.bytes()
        .any(|b| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\t' | b'\n' | b'\r'))
}

fn push_attr_value(out: &mut String, s: &str) {
    if !needs_attr_escape(s) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // Character references survive attribute-value normalization (XML 1.0 §3.3.3).
            '\t' => out.push_str("&#9;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
}

fn push_text(out: &mut String, s: &str) {
    if !s.bytes().any(|b| matches!(b, b'&' | b'<' | b'>' | b'\r')) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        if c == '\r' {
            out.push_str("&#13;");
        } else {
            let mut tmp = [0u8; 4];
            escape_text_into(c.encode_utf8(&mut tmp), out);
        }
    }
}

struct AttrWriter<'a> {
    out: &'a mut String,
    doc: &'a str,
    /// The root's namespace declarations (prefix, URI), other than Sitemap's and `rs`.
    ns: &'a [(String, String)],
}

/// The namespace a prefix has in a written document.
fn written_binding<'a>(ns: &'a [(String, String)], prefix: &str) -> Option<&'a str> {
    match prefix {
        "rs" => Some(RS_NS),
        "xml" => Some("http://www.w3.org/XML/1998/namespace"),
        p => ns.iter().find(|(q, _)| q == p).map(|(_, u)| u.as_str()),
    }
}

impl AttrWriter<'_> {
    fn attr(&mut self, name: &str, value: &str) -> Result<(), Error> {
        check_chars(self.doc, name, value)?;
        self.out.push(' ');
        self.out.push_str(name);
        self.out.push_str("=\"");
        push_attr_value(self.out, value);
        self.out.push('"');
        Ok(())
    }

    fn opt_str(&mut self, name: &str, value: &Option<String>) -> Result<(), Error> {
        if let Some(v) = value {
            self.attr(name, v)?;
        }
        Ok(())
    }

    fn opt_display(
        &mut self,
        name: &str,
        value: Option<&dyn std::fmt::Display>,
    ) -> Result<(), Error> {
        if let Some(v) = value {
            // Formatted in place (no string per attribute), checked, and escaped when needed
            // (rare: then formatted again into a string of its own).
            let start = self.out.len();
            self.out.push(' ');
            self.out.push_str(name);
            self.out.push_str("=\"");
            let value_start = self.out.len();
            let _ = write!(self.out, "{v}");
            let written = &self.out[value_start..];
            if check_chars(self.doc, name, written).is_err() || needs_attr_escape(written) {
                self.out.truncate(start);
                self.attr(name, &v.to_string())?;
            } else {
                self.out.push('"');
            }
        }
        Ok(())
    }

    /// Extension attributes, each preceded by a declaration of its prefix when the root does
    /// not bind that prefix to the attribute's namespace (it was declared below the root).
    fn extra(&mut self, extra: &[ExtAttr]) -> Result<(), Error> {
        let mut declared: Vec<&str> = Vec::new();
        for x in extra {
            if let Some((p, _)) = x.name.split_once(':') {
                if p != "xmlns"
                    && !x.namespace.is_empty()
                    && written_binding(self.ns, p) != Some(x.namespace.as_str())
                    && !declared.contains(&p)
                {
                    self.attr(&format!("xmlns:{p}"), &x.namespace)?;
                    declared.push(p);
                }
            }
            self.attr(&x.name, &x.value)?;
        }
        Ok(())
    }
}

fn dt(v: &Option<W3cDateTime>) -> Option<&dyn std::fmt::Display> {
    v.as_ref().map(|d| d as &dyn std::fmt::Display)
}

fn push_md(
    out: &mut String,
    doc: &str,
    ns: &[(String, String)],
    md: &Metadata,
) -> Result<(), Error> {
    out.push_str("<rs:md");
    let mut w = AttrWriter { out, doc, ns };
    w.opt_display(
        "capability",
        md.capability.as_ref().map(|c| c as &dyn std::fmt::Display),
    )?;
    w.opt_display(
        "change",
        md.change.as_ref().map(|c| c as &dyn std::fmt::Display),
    )?;
    w.opt_display("datetime", dt(&md.datetime))?;
    w.opt_display("at", dt(&md.at))?;
    w.opt_display("completed", dt(&md.completed))?;
    w.opt_display("from", dt(&md.from))?;
    w.opt_display("until", dt(&md.until))?;
    w.opt_display(
        "hash",
        md.hash.as_ref().map(|h| h as &dyn std::fmt::Display),
    )?;
    w.opt_display(
        "length",
        md.length.as_ref().map(|h| h as &dyn std::fmt::Display),
    )?;
    w.opt_str("type", &md.mime_type)?;
    w.opt_str("encoding", &md.encoding)?;
    w.opt_str("path", &md.path)?;
    w.extra(&md.extra)?;
    out.push_str("/>");
    Ok(())
}

fn push_ln(out: &mut String, doc: &str, ns: &[(String, String)], l: &Link) -> Result<(), Error> {
    out.push_str("<rs:ln");
    let mut w = AttrWriter { out, doc, ns };
    w.attr("rel", &l.rel)?;
    w.attr("href", &l.href)?;
    w.opt_display("pri", l.pri.as_ref().map(|h| h as &dyn std::fmt::Display))?;
    w.opt_display("modified", dt(&l.modified))?;
    w.opt_display("hash", l.hash.as_ref().map(|h| h as &dyn std::fmt::Display))?;
    w.opt_display(
        "length",
        l.length.as_ref().map(|h| h as &dyn std::fmt::Display),
    )?;
    w.opt_str("type", &l.mime_type)?;
    w.opt_str("encoding", &l.encoding)?;
    w.opt_str("path", &l.path)?;
    w.opt_str("profile", &l.profile)?;
    w.extra(&l.extra)?;
    out.push_str("/>");
    Ok(())
}

/// Serializes the XML declaration, the root start tag and the root's children.
pub fn header_xml(doc: &str, header: &Header) -> Result<String, Error> {
    let mut out = String::with_capacity(512);
    out.push_str(XML_DECL);
    out.push('<');
    out.push_str(header.root.element());
    out.push_str(" xmlns=\"");
    out.push_str(SITEMAP_NS);
    out.push_str("\" xmlns:rs=\"");
    out.push_str(RS_NS);
    out.push('"');
    {
        let mut w = AttrWriter {
            out: &mut out,
            doc,
            ns: &header.namespaces,
        };
        for (prefix, uri) in &header.namespaces {
            if prefix.is_empty() || prefix == "rs" {
                continue;
            }
            w.attr(&format!("xmlns:{prefix}"), uri)?;
        }
        w.extra(&header.extra)?;
    }
    out.push_str(">\n");
    if let Some(md) = &header.md {
        out.push_str("  ");
        push_md(&mut out, doc, &header.namespaces, md)?;
        out.push('\n');
    }
    for l in &header.links {
        out.push_str("  ");
        push_ln(&mut out, doc, &header.namespaces, l)?;
        out.push('\n');
    }
    for x in &header.extensions {
        out.push_str("  ");
        out.push_str(&x.xml);
        out.push('\n');
    }
    Ok(out)
}

/// Serializes one entry as a line, appending to `out`. `namespaces` are the root's extra
/// declarations ([`Header::namespaces`]).
pub fn entry_xml(
    out: &mut String,
    doc: &str,
    root: Root,
    namespaces: &[(String, String)],
    e: &Entry,
) -> Result<(), Error> {
    if e.loc.is_empty() {
        return Err(Error::Unwritable {
            doc: doc.to_owned(),
            message: "an entry needs a non-empty <loc>".into(),
        });
    }
    check_chars(doc, "<loc>", &e.loc)?;
    let el = root.entry_element();
    out.push('<');
    out.push_str(el);
    out.push_str("><loc>");
    push_text(out, &e.loc);
    out.push_str("</loc>");
    if let Some(lm) = &e.lastmod {
        out.push_str("<lastmod>");
        let _ = write!(out, "{lm}");
        out.push_str("</lastmod>");
    }
    if let Some(cf) = &e.changefreq {
        check_chars(doc, "<changefreq>", cf.as_str())?;
        out.push_str("<changefreq>");
        push_text(out, cf.as_str());
        out.push_str("</changefreq>");
    }
    if let Some(p) = &e.priority {
        check_chars(doc, "<priority>", p)?;
        out.push_str("<priority>");
        push_text(out, p);
        out.push_str("</priority>");
    }
    if let Some(md) = &e.md {
        push_md(out, doc, namespaces, md)?;
    }
    for l in &e.links {
        push_ln(out, doc, namespaces, l)?;
    }
    for x in &e.extensions {
        out.push_str(&x.xml);
    }
    out.push_str("</");
    out.push_str(el);
    out.push_str(">\n");
    Ok(())
}

fn footer_xml(root: Root) -> String {
    format!("</{}>\n", root.element())
}

/// Writes one document: header on creation, then entries, then [`finish`](Self::finish).
#[derive(Debug)]
pub struct DocumentWriter<W: Write> {
    out: W,
    doc: String,
    root: Root,
    namespaces: Vec<(String, String)>,
    line: String,
    bytes: u64,
    entries: u64,
}

impl<W: Write> DocumentWriter<W> {
    /// Writes the header of a document named `doc` (used in errors).
    pub fn new(mut out: W, doc: impl Into<String>, header: &Header) -> Result<Self, Error> {
        let doc = doc.into();
        let h = header_xml(&doc, header)?;
        out.write_all(h.as_bytes()).map_err(|source| Error::Write {
            doc: doc.clone(),
            source,
        })?;
        Ok(DocumentWriter {
            out,
            root: header.root,
            namespaces: header.namespaces.clone(),
            bytes: h.len() as u64,
            entries: 0,
            line: String::with_capacity(512),
            doc,
        })
    }

    /// Writes an entry.
    pub fn write_entry(&mut self, e: &Entry) -> Result<(), Error> {
        self.line.clear();
        entry_xml(&mut self.line, &self.doc, self.root, &self.namespaces, e)?;
        self.out
            .write_all(self.line.as_bytes())
            .map_err(|source| Error::Write {
                doc: self.doc.clone(),
                source,
            })?;
        self.bytes += self.line.len() as u64;
        self.entries += 1;
        Ok(())
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Entries written so far.
    pub fn entries_written(&self) -> u64 {
        self.entries
    }

    /// Closes the root element and flushes; returns the output.
    pub fn finish(mut self) -> Result<W, Error> {
        let f = footer_xml(self.root);
        self.out
            .write_all(f.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|source| Error::Write {
                doc: self.doc.clone(),
                source,
            })?;
        Ok(self.out)
    }
}

/// Which output of a split document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// The whole document, when it fits the limits.
    Single,
    /// Part `n` (from 1) of a split document.
    Part(usize),
    /// The index of a split document.
    Index,
}

/// Where a [`SplitWriter`] puts its outputs, and under which URLs they will be published.
pub trait PartSink {
    /// An output document.
    type Out: Write;
    /// A scratch buffer for one part's entries.
    type Spool: Read + Write + Seek;
    /// Opens an output.
    fn open(&mut self, target: Target) -> io::Result<Self::Out>;
    /// Completes an output (e.g. syncs and renames a temporary file into place).
    fn close(&mut self, target: Target, out: Self::Out) -> io::Result<()>;
    /// A fresh, empty spool.
    fn spool(&mut self) -> io::Result<Self::Spool>;
    /// The URL an output will be published at.
    fn url(&self, target: Target) -> String;
}

/// An in-memory sink, for tests and small documents.
#[derive(Debug, Default, Clone)]
pub struct MemorySink {
    /// Base for the URLs: parts are `{base}-{n}.xml`, the index and single `{base}.xml`.
    pub base: String,
    /// The outputs written, in order.
    pub outputs: Vec<(Target, Vec<u8>)>,
}

impl PartSink for MemorySink {
    type Out = Vec<u8>;
    type Spool = io::Cursor<Vec<u8>>;
    fn open(&mut self, _target: Target) -> io::Result<Vec<u8>> {
        Ok(Vec::new())
    }
    fn close(&mut self, target: Target, out: Vec<u8>) -> io::Result<()> {
        self.outputs.push((target, out));
        Ok(())
    }
    fn spool(&mut self) -> io::Result<Self::Spool> {
        Ok(io::Cursor::new(Vec::new()))
    }
    fn url(&self, target: Target) -> String {
        match target {
            Target::Single | Target::Index => format!("{}.xml", self.base),
            Target::Part(n) => format!("{}-{n}.xml", self.base),
        }
    }
}

/// When to split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitLimits {
    /// Most entries in one document (default 50,000).
    pub max_entries: usize,
    /// Most bytes in one document (default 50 MB).
    pub max_bytes: u64,
}

impl Default for SplitLimits {
    fn default() -> Self {
        SplitLimits {
            max_entries: MAX_ENTRIES,
            max_bytes: MAX_DOCUMENT_BYTES,
        }
    }
}

/// What a [`SplitWriter`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitSummary {
    /// Entries written.
    pub entries: u64,
    /// Number of parts (1 when not split).
    pub parts: usize,
    /// Whether an index was written.
    pub indexed: bool,
    /// URLs of the parts (or of the single document).
    pub part_urls: Vec<String>,
}

struct Part<S> {
    spool: S,
    /// Entries not yet written to the spool (written in 64 KiB blocks).
    pending: Vec<u8>,
    entries: usize,
    bytes: u64,
    last_time: Option<W3cDateTime>,
}

/// Writes a document of any size, splitting it into parts and an index past the limits.
pub struct SplitWriter<S: PartSink> {
    sink: S,
    header: Header,
    doc: String,
    limits: SplitLimits,
    part: Option<Part<S::Spool>>,
    /// Index entries of the parts completed so far.
    done: Vec<Entry>,
    /// `until` of the previous part, the `from` of the next (change documents).
    next_from: Option<W3cDateTime>,
    line: String,
    entries: u64,
    header_len: u64,
    index_link_len: u64,
}

impl<S: PartSink> std::fmt::Debug for SplitWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitWriter")
            .field("doc", &self.doc)
            .field("entries", &self.entries)
            .field("parts_done", &self.done.len())
            .finish_non_exhaustive()
    }
}

impl<S: PartSink> SplitWriter<S> {
    /// A writer for a `<urlset>` document with `header` (its links are copied into every part).
    pub fn new(
        sink: S,
        doc: impl Into<String>,
        header: Header,
        limits: SplitLimits,
    ) -> Result<Self, Error> {
        let doc = doc.into();
        let header_len =
            header_xml(&doc, &header)?.len() as u64 + footer_xml(header.root).len() as u64;
        // Room for the `index` link every part gets when split, and for a part's own md.
        let index_link_len = 64 + sink.url(Target::Index).len() as u64 + 64;
        let next_from = header.md.as_ref().and_then(|m| m.from);
        Ok(SplitWriter {
            sink,
            header,
            doc,
            limits,
            part: None,
            done: Vec::new(),
            next_from,
            line: String::with_capacity(512),
            entries: 0,
            header_len,
            index_link_len,
        })
    }

    fn is_change_kind(&self) -> bool {
        self.header.capability().is_some_and(|c| c.is_change_kind())
    }

    fn io(&self, source: io::Error) -> Error {
        Error::Write {
            doc: self.doc.clone(),
            source,
        }
    }

    /// Adds an entry.
    pub fn write_entry(&mut self, e: &Entry) -> Result<(), Error> {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let r = entry_xml(
            &mut line,
            &self.doc,
            self.header.root,
            &self.header.namespaces,
            e,
        )
        .and_then(|()| {
            let time = e
                .change_time()
                .copied()
                .or_else(|| e.md.as_ref().and_then(|m| m.until.or(m.from)));
            self.write_serialized(&line, time)
        });
        self.line = line;
        r
    }

    /// Adds an entry already serialized by [`entry_xml`] for this document's root and
    /// namespaces (one line, ending with a newline), e.g. rendered ahead on other threads.
    /// `time` is what [`SplitWriter::write_entry`] takes from the entry for change documents
    /// (its change time, else its `until` or `from`): the `until` of a part closed after it.
    pub fn write_serialized(&mut self, line: &str, time: Option<W3cDateTime>) -> Result<(), Error> {
        let len = line.len() as u64;
        let overhead = self.header_len + self.index_link_len;
        if let Some(p) = &self.part {
            if p.entries >= self.limits.max_entries
                || (p.entries > 0 && overhead + p.bytes + len > self.limits.max_bytes)
            {
                self.close_part(false)?;
            }
        }
        if self.part.is_none() {
            let spool = self.sink.spool().map_err(|e| self.io(e))?;
            self.part = Some(Part {
                spool,
                pending: Vec::with_capacity(SPOOL_BLOCK),
                entries: 0,
                bytes: 0,
                last_time: None,
            });
        }
        let r = match self.part.as_mut() {
            Some(p) => {
                p.entries += 1;
                p.bytes += len;
                if time.is_some() {
                    p.last_time = time;
                }
                p.pending.extend_from_slice(line.as_bytes());
                if p.pending.len() >= SPOOL_BLOCK {
                    let r = p.spool.write_all(&p.pending);
                    p.pending.clear();
                    r
                } else {
                    Ok(())
                }
            }
            None => Ok(()),
        };
        r.map_err(|e| self.io(e))?;
        self.entries += 1;
        Ok(())
    }

    /// The metadata of a part, from the document's.
    fn part_md(&self, last: bool, last_time: Option<W3cDateTime>) -> Option<Metadata> {
        let mut md = self.header.md.clone()?;
        if self.is_change_kind() {
            md.from = self.next_from.or(md.from);
            if !last {
                md.until = last_time.or(md.from);
            }
        }
        Some(md)
    }

    fn close_part(&mut self, last: bool) -> Result<(), Error> {
        let Some(mut part) = self.part.take() else {
            return Ok(());
        };
        let n = self.done.len() + 1;
        let single = last && n == 1;
        let target = if single {
            Target::Single
        } else {
            Target::Part(n)
        };
        let mut header = self.header.clone();
        header.md = self.part_md(last, part.last_time);
        if !single {
            header
                .links
                .push(Link::new("index", self.sink.url(Target::Index)));
        }
        let mut out = self.sink.open(target).map_err(|e| self.io(e))?;
        let h = header_xml(&self.doc, &header)?;
        let r = (|| {
            out.write_all(h.as_bytes())?;
            part.spool.write_all(&part.pending)?;
            part.spool.seek(SeekFrom::Start(0))?;
            io::copy(&mut part.spool, &mut out)?;
            out.write_all(footer_xml(header.root).as_bytes())?;
            out.flush()
        })();
        r.map_err(|e| self.io(e))?;
        self.sink.close(target, out).map_err(|e| self.io(e))?;
        // The index entry for this part.
        let mut ie = Entry::new(self.sink.url(target));
        if let Some(md) = &header.md {
            let mut imd = Metadata::default();
            if self.is_change_kind() {
                imd.from = md.from;
                imd.until = md.until;
            } else {
                imd.at = md.at;
                imd.completed = md.completed;
            }
            if !imd.is_empty() {
                ie.md = Some(imd);
            }
        }
        if self.is_change_kind() {
            self.next_from = header.md.as_ref().and_then(|m| m.until).or(self.next_from);
        }
        self.done.push(ie);
        Ok(())
    }

    /// Completes the document: the last part and, when split, the index. Returns the sink.
    pub fn finish(mut self) -> Result<(S, SplitSummary), Error> {
        if self.part.is_none() && self.done.is_empty() {
            // No entries at all: still one (empty) document.
            let spool = self.sink.spool().map_err(|e| self.io(e))?;
            self.part = Some(Part {
                spool,
                pending: Vec::with_capacity(SPOOL_BLOCK),
                entries: 0,
                bytes: 0,
                last_time: None,
            });
        }
        self.close_part(true)?;
        let parts = self.done.len();
        let indexed = parts > 1;
        if indexed {
            let mut ih = self.header.clone();
            ih.root = Root::SitemapIndex;
            ih.extensions.clear();
            let mut out = self.sink.open(Target::Index).map_err(|e| self.io(e))?;
            let mut w = DocumentWriter::new(&mut out, self.doc.clone(), &ih)?;
            for e in &self.done {
                w.write_entry(e)?;
            }
            w.finish()?;
            self.sink
                .close(Target::Index, out)
                .map_err(|e| self.io(e))?;
        }
        let summary = SplitSummary {
            entries: self.entries,
            parts,
            indexed,
            part_urls: self.done.iter().map(|e| e.loc.clone()).collect(),
        };
        Ok((self.sink, summary))
    }
}
