//! Streaming reader: the document header first, then one entry at a time.
//!
//! Memory does not grow with the number of entries: the reader holds one token and one entry.
//! Everything about the input is bounded ([`ReadOptions`]): document bytes (after gzip
//! decompression, so a compression bomb stops at the limit), bytes per tag or text run, nesting
//! depth, namespace bindings, links and extensions per entry, and findings kept. No DTD is
//! accepted and no entity other than XML's five predefined ones is ever expanded, so
//! billion-laughs and external-entity documents are refused at their `<!DOCTYPE`.
//!
//! Problems that do not stop reading (a bad datetime, an unknown attribute, a prefixed
//! ResourceSync attribute) are recorded as [`Finding`](crate::Finding)s, available from
//! [`DocumentReader::findings`]; the value concerned is left unset (and its name kept in
//! [`Metadata::invalid`]). Problems that do (malformed XML, a limit, a root that is not a
//! Sitemap) are returned as [`Error`]s naming the document, line, column and rule. Well-formedness the XML parser does not check is checked
//! here: the XML declaration (first, once, and by its grammar) and processing-instruction targets
//! (see `prolog`), raw `<` in attribute values and white space between attributes. A document
//! whose root is not a Sitemap's is read to its end, so that broken XML in it is reported too.
//!
//! Layout: `limits` (the options and the byte-counting input that enforces them), `tokens`
//! (XML events to owned tokens, well-formedness checks), `header` (prolog, root, its `<rs:md>`
//! and `<rs:ln>`), `entry` (one `<url>` or `<sitemap>` at a time), `attributes` (the
//! attributes of `<rs:md>` and `<rs:ln>`), `content` (text, skipping, misplaced content),
//! `capture` (extension elements kept as XML), `prolog` (the XML declaration and
//! processing instructions), `pool` (buffers reused from one entry to the next) and `fast`
//! (the common entry recognized in one pass over the buffered bytes, quick-xml bypassed; the
//! rest goes the way above).

use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;

use quick_xml::XmlVersion;
use quick_xml::name::NamespaceResolver;
use quick_xml::reader::Reader;

use crate::document::{Entry, Header, Metadata, Position, Root};
use crate::error::{Error, LimitKind};
use crate::finding::Findings;

mod attributes;
mod capture;
mod content;
#[cfg(test)]
pub(crate) mod differential;
mod entry;
mod fast;
mod header;
mod limits;
mod pool;
mod prolog;
mod tokens;

pub(crate) use capture::escape_text_into;
pub(crate) use header::near_miss;
pub use limits::ReadOptions;

use limits::Counting;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Positioned at an entry start (element already read).
    AtEntry { pos: Position, empty: bool },
    /// Between entries, inside the root.
    InRoot,
    /// The root has ended.
    Done,
}

/// Reads a ResourceSync or Sitemap document: [`header`](Self::header) first, then entries one by
/// one with [`next_entry`](Self::next_entry) or as an iterator.
#[derive(Debug)]
pub struct DocumentReader<R: Read> {
    xml: Reader<Counting<R>>,
    /// The namespace bindings in scope (XML Namespaces 1.0 §6), kept here rather than by an
    /// `NsReader` so that an element is scanned for declarations only when it has one.
    ns: NamespaceResolver,
    /// The scope of the last `Empty` or `End` event is still to be closed.
    pending_pop: bool,
    buf: Vec<u8>,
    doc: Arc<str>,
    opts: ReadOptions,
    header: Header,
    state: State,
    depth: usize,
    capturing: bool,
    in_text: bool,
    findings: Findings,
    entries: u64,
    /// `<loc>`s read as the URI of an IRI (`ReadOptions::iris_as_uris`).
    iris: u64,
    failed: bool,
    xml_version: XmlVersion,
    header_pos: Position,
    /// Whether the document has an XML declaration (for the message about a second one).
    declared: bool,
    /// Where a root `<rs:md>` after the first entry was found, when the header had none.
    late_root_md: Option<Position>,
    /// Buffers of attribute lists and strings given back once read, reused for the next
    /// element instead of allocated per entry (bounded: see `pool`).
    pool: pool::Pool,
    /// The last namespace resolved and what it is (see `tokens::NsCache`).
    ns_cache: tokens::NsCache,
    /// The XML parser's last event was a start or end tag: it is between markup, where the
    /// fast path may take the bytes that follow (see `fast`).
    xml_between_markup: bool,
    /// The entry fast path's record of one entry (see `fast`).
    fast: fast::Scratch,
}

impl DocumentReader<Box<dyn Read + Send>> {
    /// Opens a document from any byte source, decompressing it when it starts with the gzip
    /// magic bytes (`.xml.gz` files, or bodies sent with `Content-Encoding: gzip` by a client
    /// that did not decode them).
    pub fn open<I: Read + Send + 'static>(input: I, opts: ReadOptions) -> Result<Self, Error> {
        let mut input = BufReader::with_capacity(64 * 1024, input);
        let magic = match input.fill_buf() {
            Ok(b) => b.starts_with(&[0x1f, 0x8b]),
            Err(source) => {
                return Err(Error::Io {
                    doc: Arc::from(opts.name.as_str()),
                    source,
                });
            }
        };
        let boxed: Box<dyn Read + Send> = if magic {
            Box::new(flate2::bufread::MultiGzDecoder::new(input))
        } else {
            Box::new(input)
        };
        DocumentReader::new(boxed, opts)
    }
}

impl<R: Read> DocumentReader<R> {
    /// Starts reading: reads up to the first entry and returns the reader with the header
    /// available. The input must be uncompressed (see [`DocumentReader::open`] for gzip); it is
    /// buffered here, so pass a plain reader.
    pub fn new(input: R, opts: ReadOptions) -> Result<Self, Error> {
        let counting = Counting {
            inner: input,
            buf: vec![0u8; 64 * 1024].into_boxed_slice(),
            pos: 0,
            filled: 0,
            offset: 0,
            line: 1,
            line_start: 0,
            newlines: Vec::new(),
            next_newline: 0,
            buf_start: 0,
            token_start: 0,
            max_doc: opts.max_document_bytes,
            max_token: opts.max_token_bytes,
            tripped: None,
        };
        let mut xml = Reader::from_reader(counting);
        let mut ns = NamespaceResolver::default();
        ns.set_max_namespace_bindings(opts.max_namespace_bindings);
        {
            let c = xml.config_mut();
            c.check_end_names = true;
            c.expand_empty_elements = false;
            c.trim_text(false);
        }
        let mut r = DocumentReader {
            xml,
            ns,
            pending_pop: false,
            buf: Vec::with_capacity(1024),
            doc: Arc::from(opts.name.as_str()),
            findings: Findings::new(opts.max_findings),
            opts,
            header: Header::new(Root::UrlSet, Metadata::default()),
            state: State::Done,
            depth: 0,
            capturing: false,
            in_text: false,
            entries: 0,
            iris: 0,
            failed: false,
            xml_version: XmlVersion::Implicit1_0,
            header_pos: Position { line: 1, column: 1 },
            declared: false,
            late_root_md: None,
            pool: pool::Pool::default(),
            ns_cache: tokens::NsCache::default(),
            xml_between_markup: false,
            fast: fast::Scratch::default(),
        };
        r.header.md = None;
        r.read_header()?;
        Ok(r)
    }

    /// The document header: root, its `<rs:md>` and `<rs:ln>` elements.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The document's name as given in the options.
    pub fn name(&self) -> &str {
        &self.doc
    }

    /// Non-fatal problems found so far.
    pub fn findings(&self) -> &Findings {
        &self.findings
    }

    /// Takes the findings found so far.
    pub fn take_findings(&mut self) -> Findings {
        let max = self.opts.max_findings;
        std::mem::replace(&mut self.findings, Findings::new(max))
    }

    /// Where the root `<rs:md>` starts (else the root element): the place findings about the
    /// document as a whole are reported at.
    pub fn header_position(&self) -> Position {
        self.header_pos
    }

    /// Where the root's `<rs:md>` was found after the first entry, when it had none before
    /// them (reported as `RS-7-md-position`; the entries were read as those of a plain Sitemap).
    pub fn root_md_after_entries(&self) -> Option<Position> {
        self.late_root_md
    }

    /// The most findings kept (from the options).
    pub fn max_findings(&self) -> usize {
        self.opts.max_findings
    }

    /// Entries returned so far.
    pub fn entries_read(&self) -> u64 {
        self.entries
    }

    /// Entries (and index entries) whose `<loc>` was an IRI, read as its percent-encoded URI
    /// so far; always 0 unless [`ReadOptions::iris_as_uris`].
    pub fn iris_read(&self) -> u64 {
        self.iris
    }

    /// Bytes of (decompressed) document consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.xml.get_ref().offset
    }

    fn here(&mut self) -> Position {
        let c = self.xml.get_mut();
        c.sync_lines();
        Position {
            line: c.line,
            column: c.offset - c.line_start + 1,
        }
    }

    fn err_malformed(&self, pos: Position, message: impl Into<String>) -> Error {
        Error::Malformed {
            doc: self.doc.clone(),
            pos,
            message: message.into(),
        }
    }

    fn convert_xml_error(&mut self, e: quick_xml::Error, pos: Position) -> Error {
        if let Some(limit) = self.xml.get_ref().tripped {
            let max = match limit {
                LimitKind::DocumentBytes => self.opts.max_document_bytes,
                _ => self.opts.max_token_bytes,
            };
            return Error::Limit {
                doc: self.doc.clone(),
                pos: self.here(),
                limit,
                max,
            };
        }
        match e {
            quick_xml::Error::Io(io) => Error::Io {
                doc: self.doc.clone(),
                source: io::Error::new(io.kind(), io.to_string()),
            },
            quick_xml::Error::Namespace(quick_xml::name::NamespaceError::TooManyBindings(_)) => {
                Error::Limit {
                    doc: self.doc.clone(),
                    pos,
                    limit: LimitKind::NamespaceBindings,
                    max: self.opts.max_namespace_bindings as u64,
                }
            }
            quick_xml::Error::Escape(e) => Error::Forbidden {
                doc: self.doc.clone(),
                pos,
                message: format!("entity not allowed: {e}"),
            },
            other => self.err_malformed(pos, other.to_string()),
        }
    }

    /// The next entry, or `None` at the end of the document.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, Error> {
        let mut e = Entry::default();
        Ok(self.next_entry_into(&mut e)?.then_some(e))
    }

    /// [`next_entry`](Self::next_entry) into an entry the caller holds and reuses from one
    /// entry to the next (the validator's loop): `false` at the end of the document, when `e`
    /// is left as it was. The entry is overwritten, its buffers reused.
    pub(crate) fn next_entry_into(&mut self, e: &mut Entry) -> Result<bool, Error> {
        if self.failed {
            return Ok(false);
        }
        let r = self.next_entry_inner(e);
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

#[cfg(test)]
impl<R: Read> DocumentReader<R> {
    /// Turns the entry fast path (`fast`) on or off: tests compare it with the general path.
    pub(crate) fn set_fast_path(&mut self, on: bool) {
        self.fast.enabled = on;
    }
}

impl<R: Read> Iterator for DocumentReader<R> {
    type Item = Result<Entry, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}
