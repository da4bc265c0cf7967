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
//! ResourceSync attribute) are recorded as [`Finding`]s, available from [`DocumentReader::findings`];
//! the value concerned is left unset (and its name kept in [`Metadata::invalid`]). Problems that
//! do (malformed XML, a limit, a root that is not a Sitemap) are returned as [`Error`]s naming the
//! document, line, column and rule. Well-formedness the XML parser does not check is checked
//! here: the XML declaration (first, once, and by its grammar) and processing-instruction targets
//! (see `prolog`), raw `<` in attribute values and white space between attributes. A document
//! whose root is not a Sitemap's is read to its end, so that broken XML in it is reported too.

use std::borrow::Cow;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::Arc;

use quick_xml::XmlVersion;
use quick_xml::events::Event;
use quick_xml::name::{PrefixDeclaration, ResolveResult};
use quick_xml::reader::NsReader;

use crate::datetime::W3cDateTime;
use crate::document::{
    Capability, Change, ChangeFreq, Entry, ExtAttr, ExtElement, Header, Link, Metadata, Position,
    RS_NS, Root, SITEMAP_NS, Unreadable,
};
use crate::error::{Error, LimitKind};
use crate::finding::Findings;
use crate::hash::Hashes;
use crate::rules;

mod prolog;

/// Limits and naming for a [`DocumentReader`].
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// The name of the document in messages (a path or URL).
    pub name: String,
    /// Largest document accepted, in bytes after decompression. Default 256 MiB: five times the
    /// Sitemap limit of 50 MB, so that oversized documents are still read and reported.
    pub max_document_bytes: u64,
    /// Largest tag (with its attributes) or text run, in bytes. Default 1 MiB.
    pub max_token_bytes: u64,
    /// Deepest element nesting. Default 32 (ResourceSync documents need 3).
    pub max_depth: usize,
    /// Most namespace bindings in scope. Default 64.
    pub max_namespace_bindings: usize,
    /// Most `<rs:ln>` plus extension elements in one entry or header. Default 1,024.
    pub max_children: usize,
    /// Most findings kept (the rest are counted). Default 1,000.
    pub max_findings: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            name: "<input>".to_owned(),
            max_document_bytes: 256 * 1024 * 1024,
            max_token_bytes: 1024 * 1024,
            max_depth: 32,
            max_namespace_bindings: 64,
            max_children: 1024,
            max_findings: 1000,
        }
    }
}

impl ReadOptions {
    /// Default options for a named document.
    pub fn named(name: impl Into<String>) -> Self {
        ReadOptions {
            name: name.into(),
            ..ReadOptions::default()
        }
    }
}

/// Buffers the input and counts bytes, lines and columns of what the XML parser consumes,
/// enforcing the byte limits before anything is buffered beyond them. (Its own buffer, rather
/// than a `BufReader` underneath, so that newline counting sees exactly the consumed bytes.)
#[derive(Debug)]
struct Counting<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
    offset: u64,
    line: u64,
    line_start: u64,
    token_start: u64,
    max_doc: u64,
    max_token: u64,
    tripped: Option<LimitKind>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            self.pos = 0;
            self.filled = 0;
            loop {
                match self.inner.read(&mut self.buf) {
                    Ok(n) => {
                        self.filled = n;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            if self.filled == 0 {
                return Ok(&[]);
            }
        }
        let doc_left = self.max_doc.saturating_sub(self.offset);
        let token_left =
            (self.token_start.saturating_add(self.max_token)).saturating_sub(self.offset);
        let allowed = doc_left.min(token_left);
        if allowed == 0 {
            self.tripped = Some(if doc_left == 0 {
                LimitKind::DocumentBytes
            } else {
                LimitKind::TokenBytes
            });
            return Err(io::Error::other("resourcesync reader limit"));
        }
        let n = usize::try_from(allowed)
            .unwrap_or(usize::MAX)
            .min(self.filled - self.pos);
        Ok(&self.buf[self.pos..self.pos + n])
    }

    fn consume(&mut self, amt: usize) {
        let amt = amt.min(self.filled - self.pos);
        let part = &self.buf[self.pos..self.pos + amt];
        if let Some(last) = memchr::memrchr(b'\n', part) {
            self.line += memchr::memchr_iter(b'\n', part).count() as u64;
            self.line_start = self.offset + last as u64 + 1;
        }
        self.pos += amt;
        self.offset += amt as u64;
    }
}

/// What an element is, by namespace and local name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Name {
    UrlSet,
    SitemapIndex,
    Url,
    Sitemap,
    Loc,
    Lastmod,
    Changefreq,
    Priority,
    RsMd,
    RsLn,
    /// An element in the Sitemap or ResourceSync namespace not defined there, or in no
    /// namespace.
    Unknown(String),
    /// An element in another namespace (an extension).
    Foreign(String),
}

/// One attribute of an element, resolved.
#[derive(Debug)]
struct Attr {
    /// The prefix as written, if any.
    prefix: Option<String>,
    /// Namespace: `None` when unprefixed.
    ns: Option<String>,
    /// Local name.
    local: Cow<'static, str>,
    /// Unescaped, normalized value.
    value: String,
}

impl Attr {
    fn qname(&self) -> String {
        match &self.prefix {
            Some(p) => format!("{p}:{}", self.local),
            None => self.local.to_string(),
        }
    }
}

#[derive(Debug)]
enum Tok {
    Start {
        name: Name,
        empty: bool,
        attrs: Vec<Attr>,
        /// Namespace declarations on the element as (prefix, uri).
        decls: Vec<(String, String)>,
        /// `<qname raw-attributes` for elements being captured.
        raw: Option<String>,
        /// The element's namespace URI, for elements being captured.
        ns: Option<String>,
        qname: Cow<'static, str>,
        pos: Position,
    },
    End {
        pos: Position,
    },
    Text {
        text: String,
        /// Whether the text is markup-free character data (not a CDATA section).
        pos: Position,
    },
    Decl {
        encoding: Option<String>,
        pos: Position,
    },
    /// White space between elements.
    Space,
    Other,
    Eof {
        pos: Position,
    },
}

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
    xml: NsReader<Counting<R>>,
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
    failed: bool,
    xml_version: XmlVersion,
    header_pos: Position,
    /// Whether the document has an XML declaration (for the message about a second one).
    declared: bool,
    /// Where a root `<rs:md>` after the first entry was found, when the header had none.
    late_root_md: Option<Position>,
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
            token_start: 0,
            max_doc: opts.max_document_bytes,
            max_token: opts.max_token_bytes,
            tripped: None,
        };
        let mut xml = NsReader::from_reader(counting);
        xml.resolver_mut()
            .set_max_namespace_bindings(opts.max_namespace_bindings);
        {
            let c = xml.config_mut();
            c.check_end_names = true;
            c.expand_empty_elements = false;
            c.trim_text(false);
        }
        let mut r = DocumentReader {
            xml,
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
            failed: false,
            xml_version: XmlVersion::Implicit1_0,
            header_pos: Position { line: 1, column: 1 },
            declared: false,
            late_root_md: None,
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

    /// Bytes of (decompressed) document consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.xml.get_ref().offset
    }

    fn here(&self) -> Position {
        let c = self.xml.get_ref();
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

    /// Reads the next token, converted to owned values.
    fn next_tok(&mut self) -> Result<Tok, Error> {
        let pos = self.here();
        {
            let c = self.xml.get_mut();
            c.token_start = c.offset;
        }
        self.buf.clear();
        let ev = match self.xml.read_event_into(&mut self.buf) {
            Ok(ev) => ev,
            Err(e) => return Err(self.convert_xml_error(e, pos)),
        };
        // Whether this is the document's first token (only a byte order mark, which the XML
        // parser skips, may come before it): every token before it consumed at least one byte.
        let first = self.xml.get_ref().token_start == 0;
        let empty = matches!(ev, Event::Empty(_));
        let tok = match ev {
            Event::Start(e) | Event::Empty(e) => {
                let qname = e.name();
                let (ns, local) = self.xml.resolver().resolve_element(qname);
                if let ResolveResult::Unknown(p) = &ns {
                    let msg = format!(
                        "namespace prefix {p:?} of <{}> is not declared",
                        qname.as_ref()
                    );
                    return Err(Error::Malformed {
                        doc: self.doc.clone(),
                        pos,
                        message: msg,
                    });
                }
                if !attributes_well_formed(e.attributes_raw()) {
                    let msg = format!(
                        "attributes of <{}> are not well-formed (a raw '<' in a value, or no white space between attributes)",
                        qname.as_ref()
                    );
                    return Err(Error::Malformed {
                        doc: self.doc.clone(),
                        pos,
                        message: msg,
                    });
                }
                let name = classify(&ns, local.as_ref(), qname.as_ref());
                let keep_qname = capture_all(self.capturing, &name);
                let mut attrs = Vec::new();
                let mut decls = Vec::new();
                let capture = self.capturing || matches!(name, Name::Foreign(_));
                let want_attrs = capture
                    || !matches!(
                        name,
                        Name::Url
                            | Name::Sitemap
                            | Name::Loc
                            | Name::Lastmod
                            | Name::Changefreq
                            | Name::Priority
                    );
                // Kept for captured elements, and for the root (named in SM-root errors).
                let elem_ns = match (&ns, capture || self.depth == 0) {
                    (ResolveResult::Bound(n), true) => Some(ns_value(n.as_ref()).into_owned()),
                    _ => None,
                };
                let raw = capture.then(|| {
                    let a = e.attributes_raw();
                    format!("<{}{}", qname.as_ref(), a)
                });
                if want_attrs {
                    for a in e.attributes() {
                        let a = match a {
                            Ok(a) => a,
                            Err(err) => {
                                return Err(
                                    self.err_malformed(pos, format!("bad attribute: {err}"))
                                );
                            }
                        };
                        let value = match a.normalized_value(self.xml_version) {
                            Ok(v) => v.into_owned(),
                            Err(err) => return Err(self.convert_xml_error(err, pos)),
                        };
                        if let Some(c) = forbidden_char(&value) {
                            return Err(self.err_malformed(
                                pos,
                                format!("character U+{c:04X} is not allowed in XML 1.0 (§2.2)"),
                            ));
                        }
                        match a.key.as_namespace_binding() {
                            Some(PrefixDeclaration::Default) => {
                                decls.push((String::new(), value));
                                continue;
                            }
                            Some(PrefixDeclaration::Named(p)) => {
                                decls.push((p.to_owned(), value));
                                continue;
                            }
                            None => {}
                        }
                        let (ans, alocal) = self.xml.resolver().resolve_attribute(a.key);
                        let ns = match ans {
                            ResolveResult::Bound(n) => Some(ns_value(n.as_ref()).into_owned()),
                            ResolveResult::Unbound => None,
                            ResolveResult::Unknown(p) => {
                                let msg = format!(
                                    "namespace prefix {p:?} of attribute {} is not declared",
                                    a.key.as_ref()
                                );
                                return Err(Error::Malformed {
                                    doc: self.doc.clone(),
                                    pos,
                                    message: msg,
                                });
                            }
                        };
                        attrs.push(Attr {
                            prefix: a.key.prefix().map(|p| p.as_ref().to_owned()),
                            ns,
                            local: intern_attr(alocal.as_ref()),
                            value,
                        });
                    }
                }
                if !empty {
                    self.depth += 1;
                    if self.depth > self.opts.max_depth {
                        return Err(Error::Limit {
                            doc: self.doc.clone(),
                            pos,
                            limit: LimitKind::Depth,
                            max: self.opts.max_depth as u64,
                        });
                    }
                }
                let static_name = name.static_name();
                Tok::Start {
                    name,
                    empty,
                    attrs,
                    decls,
                    raw,
                    ns: elem_ns,
                    qname: if keep_qname {
                        Cow::Owned(qname.as_ref().to_owned())
                    } else {
                        Cow::Borrowed(static_name)
                    },
                    pos,
                }
            }
            Event::End(_) => {
                self.depth = self.depth.saturating_sub(1);
                Tok::End { pos }
            }
            Event::Text(t) => {
                let text = t.xml_content(self.xml_version);
                if let Some(c) = forbidden_char(&text) {
                    return Err(self.err_malformed(
                        pos,
                        format!("character U+{c:04X} is not allowed in XML 1.0 (§2.2)"),
                    ));
                }
                if !self.capturing && !self.in_text && is_xml_space(&text) {
                    Tok::Space
                } else {
                    Tok::Text {
                        text: text.into_owned(),
                        pos,
                    }
                }
            }
            Event::CData(t) => {
                let text = t.xml_content(self.xml_version).into_owned();
                if let Some(c) = forbidden_char(&text) {
                    return Err(self.err_malformed(
                        pos,
                        format!("character U+{c:04X} is not allowed in XML 1.0 (§2.2)"),
                    ));
                }
                Tok::Text { text, pos }
            }
            Event::GeneralRef(r) => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(c)) if forbidden_char(c.encode_utf8(&mut [0u8; 4])).is_some() => {
                        return Err(self.err_malformed(
                            pos,
                            format!(
                                "character reference to U+{:04X}, which XML 1.0 does not allow (§2.2)",
                                c as u32
                            ),
                        ));
                    }
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => match quick_xml::escape::resolve_predefined_entity(&r) {
                        Some(s) => s.to_owned(),
                        None => {
                            let name: String = r.chars().take(64).collect();
                            return Err(Error::Forbidden {
                                doc: self.doc.clone(),
                                pos,
                                message: format!(
                                    "undefined entity &{name}; (only the five predefined XML entities are allowed)"
                                ),
                            });
                        }
                    },
                    Err(e) => return Err(self.err_malformed(pos, e.to_string())),
                };
                Tok::Text { text, pos }
            }
            Event::DocType(_) => {
                return Err(Error::Forbidden {
                    doc: self.doc.clone(),
                    pos,
                    message: "document type declarations (<!DOCTYPE>) are not allowed; entities are never expanded".into(),
                });
            }
            Event::Decl(d) => {
                // XML 1.0 §2.8 [22], [23]: one declaration, first in the document (only a
                // byte order mark may precede it), following its productions.
                if !first {
                    let message = if self.declared {
                        "a second XML declaration: a document has at most one, at its very \
                         start (XML 1.0 §2.8 [22], [23])"
                    } else {
                        "an XML declaration is only allowed at the very start of the document, \
                         before any white space, comment or other markup (XML 1.0 §2.8 [22], [23])"
                    };
                    return Err(self.err_malformed(pos, message));
                }
                self.declared = true;
                if let Err((at, message)) = prolog::check_declaration(&d) {
                    let pos = position_in_first_token(self.xml.get_ref().offset, &d, at);
                    return Err(self.err_malformed(pos, message));
                }
                if let Ok(v) = d.xml_version() {
                    self.xml_version = v;
                }
                let encoding = d.encoding().and_then(Result::ok).map(|e| e.into_owned());
                Tok::Decl { encoding, pos }
            }
            Event::PI(p) => {
                if let Err(message) = prolog::check_pi_target(p.target(), first) {
                    return Err(self.err_malformed(pos, message));
                }
                Tok::Other
            }
            Event::Comment(_) => Tok::Other,
            Event::Eof => Tok::Eof { pos },
        };
        Ok(tok)
    }

    fn read_header(&mut self) -> Result<(), Error> {
        // Prolog up to the root element.
        let (root_name, root_attrs, root_decls, root_pos, root_empty, root_qname, root_ns) = loop {
            match self.next_tok()? {
                Tok::Decl { encoding, pos } => {
                    if let Some(enc) = encoding {
                        if !enc.eq_ignore_ascii_case("utf-8") && !enc.eq_ignore_ascii_case("utf8") {
                            self.findings.push(
                                rules::SM_UTF8,
                                pos,
                                format!("declared encoding {enc:?}; documents must be UTF-8"),
                            );
                        }
                    }
                }
                Tok::Start {
                    name,
                    attrs,
                    decls,
                    pos,
                    empty,
                    qname,
                    ns,
                    ..
                } => break (name, attrs, decls, pos, empty, qname, ns),
                Tok::Text { text, pos } => {
                    if !is_xml_space(&text) {
                        return Err(self.err_malformed(pos, "text before the root element"));
                    }
                }
                Tok::End { pos } => return Err(self.err_malformed(pos, "unexpected end tag")),
                Tok::Other | Tok::Space => {}
                Tok::Eof { pos } => {
                    return Err(Error::NotSitemap {
                        doc: self.doc.clone(),
                        pos,
                        rule: rules::SM_ROOT.id,
                        message: "empty document: no root element".into(),
                    });
                }
            }
        };
        let root = match root_name {
            Name::UrlSet => Root::UrlSet,
            Name::SitemapIndex => Root::SitemapIndex,
            _ => {
                let message = root_message(&root_qname, root_ns.as_deref());
                return Err(self.not_sitemap_rest(root_empty, root_pos, message));
            }
        };
        self.header.root = root;
        self.header_pos = root_pos;
        // Written documents always bind the default namespace to Sitemap's and `rs` to
        // ResourceSync's; other bindings of those two are carried by the fragments using them.
        self.header.namespaces = root_decls
            .into_iter()
            .filter(|(p, uri)| {
                uri != SITEMAP_NS && uri != RS_NS && !p.is_empty() && p != "rs" && p != "xmlns"
            })
            .collect();
        for a in root_attrs {
            if let Some(x) = self.foreign_attr(a, root_pos, "root") {
                self.header.extra.push(x);
            }
        }
        if root_empty {
            self.state = State::Done;
            self.finish_root()?;
            return Ok(());
        }
        let mut children = 0usize;
        loop {
            match self.next_tok()? {
                Tok::Start {
                    name,
                    empty,
                    attrs,
                    raw,
                    qname,
                    pos,
                    decls,
                    ns: ens,
                } => match name {
                    Name::RsMd => {
                        let md = self.metadata(attrs, pos);
                        if self.header.md.is_none() {
                            self.header_pos = pos;
                        }
                        if self.header.md.is_some() {
                            self.findings.push(
                                rules::SM_DUPLICATE_CHILD,
                                pos,
                                "the root has more than one <rs:md>",
                            );
                        } else {
                            self.header.md = Some(md);
                        }
                        self.expect_empty(empty, pos, "rs:md")?;
                    }
                    Name::RsLn => {
                        children += 1;
                        self.check_children(children, pos)?;
                        if let Some(l) = self.link(attrs, pos) {
                            self.header.links.push(l);
                        }
                        self.expect_empty(empty, pos, "rs:ln")?;
                    }
                    Name::Url | Name::Sitemap => {
                        self.check_entry_element(&name, pos);
                        self.state = State::AtEntry { pos, empty };
                        return Ok(());
                    }
                    Name::Foreign(ns) => {
                        children += 1;
                        self.check_children(children, pos)?;
                        let xml = self.capture(Tok::Start {
                            name: Name::Foreign(ns.clone()),
                            empty,
                            attrs,
                            decls,
                            raw,
                            ns: ens,
                            qname,
                            pos,
                        })?;
                        self.header
                            .extensions
                            .push(ExtElement { namespace: ns, xml });
                    }
                    other => {
                        self.unknown_element(&other, &qname, pos);
                        self.skip(empty)?;
                    }
                },
                Tok::End { .. } => {
                    self.state = State::Done;
                    self.finish_root()?;
                    return Ok(());
                }
                Tok::Text { text, pos } => self.stray_text(&text, pos),
                Tok::Decl { pos, .. } => {
                    return Err(self.err_malformed(pos, "misplaced XML declaration"));
                }
                Tok::Other | Tok::Space => {}
                Tok::Eof { pos } => {
                    return Err(self.err_malformed(pos, "document ends inside the root element"));
                }
            }
        }
    }

    /// The error for a document whose root is not a Sitemap's: reads the rest of it, so that
    /// broken XML is reported too (XML 1.0 §2.1: a well-formedness error is the more basic
    /// fault, and the one a user must fix first). A limit met on the way is not a fault of the
    /// document: the root is reported then.
    fn not_sitemap_rest(&mut self, root_empty: bool, root_pos: Position, message: String) -> Error {
        let rest = match self.skip(root_empty) {
            Ok(()) => self.finish_root(),
            Err(e) => Err(e),
        };
        match rest {
            Err(Error::Malformed {
                doc,
                pos,
                message: m,
            }) => Error::Malformed {
                doc,
                pos,
                message: format!(
                    "{m}; besides, {message} ({}, line {})",
                    rules::SM_ROOT.id,
                    root_pos.line
                ),
            },
            Err(Error::Forbidden {
                doc,
                pos,
                message: m,
            }) => Error::Forbidden {
                doc,
                pos,
                message: format!(
                    "{m}; besides, {message} ({}, line {})",
                    rules::SM_ROOT.id,
                    root_pos.line
                ),
            },
            Err(e @ Error::Io { .. }) => e,
            _ => Error::NotSitemap {
                doc: self.doc.clone(),
                pos: root_pos,
                rule: rules::SM_ROOT.id,
                message,
            },
        }
    }

    /// After the root element: only comments, PIs and white space may follow.
    fn finish_root(&mut self) -> Result<(), Error> {
        loop {
            match self.next_tok()? {
                Tok::Eof { .. } => return Ok(()),
                Tok::Other | Tok::Space => {}
                Tok::Text { text, pos } if !is_xml_space(&text) => {
                    return Err(self.err_malformed(pos, "text after the root element"));
                }
                Tok::Text { .. } => {}
                Tok::Start { pos, .. } | Tok::End { pos } | Tok::Decl { pos, .. } => {
                    return Err(self.err_malformed(pos, "content after the root element"));
                }
            }
        }
    }

    fn check_children(&self, n: usize, pos: Position) -> Result<(), Error> {
        if n > self.opts.max_children {
            return Err(Error::Limit {
                doc: self.doc.clone(),
                pos,
                limit: LimitKind::Children,
                max: self.opts.max_children as u64,
            });
        }
        Ok(())
    }

    fn check_entry_element(&mut self, name: &Name, pos: Position) {
        let expected = match self.header.root {
            Root::UrlSet => Name::Url,
            Root::SitemapIndex => Name::Sitemap,
        };
        if *name != expected {
            self.findings.push(
                rules::SM_ENTRY_ELEMENT,
                pos,
                format!(
                    "<{}> contains <{}> entries, found <{}>",
                    self.header.root.element(),
                    self.header.root.entry_element(),
                    if *name == Name::Url { "url" } else { "sitemap" }
                ),
            );
        }
    }

    fn unknown_element(&mut self, name: &Name, qname: &str, pos: Position) {
        let what = match name {
            Name::Unknown(_) => "not defined by the Sitemap protocol or ResourceSync",
            _ => "not allowed here",
        };
        self.findings.push(
            rules::SM_UNKNOWN_ELEMENT,
            pos,
            format!("element <{qname}> is {what}; skipped"),
        );
    }

    fn stray_text(&mut self, text: &str, pos: Position) {
        if !is_xml_space(text) {
            let snippet: String = text.trim().chars().take(40).collect();
            self.findings
                .push(rules::SM_TEXT, pos, format!("unexpected text {snippet:?}"));
        }
    }

    fn expect_empty(&mut self, empty: bool, pos: Position, what: &str) -> Result<(), Error> {
        if empty {
            return Ok(());
        }
        let mut content = false;
        loop {
            match self.next_tok()? {
                Tok::End { .. } => break,
                Tok::Text { text, .. } if is_xml_space(&text) => {}
                Tok::Start { empty, .. } => {
                    content = true;
                    self.skip(empty)?;
                }
                Tok::Other | Tok::Space => {}
                Tok::Eof { pos } => {
                    return Err(self.err_malformed(pos, "unexpected end of document"));
                }
                _ => content = true,
            }
        }
        if content {
            self.findings.push(
                rules::RS_EMPTY_ELEMENT,
                pos,
                format!("<{what}> must be empty; its content was ignored"),
            );
        }
        Ok(())
    }

    /// Skips the rest of an element whose start was just read.
    fn skip(&mut self, empty: bool) -> Result<(), Error> {
        if empty {
            return Ok(());
        }
        let target = self.depth - 1;
        loop {
            match self.next_tok()? {
                Tok::End { .. } if self.depth == target => return Ok(()),
                Tok::Eof { pos } => {
                    return Err(self.err_malformed(pos, "unexpected end of document"));
                }
                _ => {}
            }
        }
    }

    /// Reads the text content of an element whose start was just read.
    fn text(&mut self, empty: bool, what: &str) -> Result<String, Error> {
        if empty {
            return Ok(String::new());
        }
        self.in_text = true;
        let r = self.text_inner(what);
        self.in_text = false;
        r
    }

    fn text_inner(&mut self, what: &str) -> Result<String, Error> {
        let mut out = String::new();
        loop {
            match self.next_tok()? {
                Tok::Text { text, pos } => {
                    if out.len() as u64 + text.len() as u64 > self.opts.max_token_bytes {
                        return Err(Error::Limit {
                            doc: self.doc.clone(),
                            pos,
                            limit: LimitKind::TokenBytes,
                            max: self.opts.max_token_bytes,
                        });
                    }
                    if out.is_empty() {
                        out = text;
                    } else {
                        out.push_str(&text);
                    }
                }
                Tok::End { .. } => return Ok(out),
                Tok::Start {
                    empty, qname, pos, ..
                } => {
                    self.findings.push(
                        rules::SM_TEXT,
                        pos,
                        format!("element <{qname}> inside <{what}> ignored"),
                    );
                    self.skip(empty)?;
                }
                Tok::Other | Tok::Space => {}
                Tok::Decl { pos, .. } => {
                    return Err(self.err_malformed(pos, "misplaced XML declaration"));
                }
                Tok::Eof { pos } => {
                    return Err(self.err_malformed(pos, "unexpected end of document"));
                }
            }
        }
    }

    /// The namespace a prefix will have in written documents: the Sitemap namespace by default,
    /// ResourceSync's for `rs`, and the root's other declarations.
    fn written_binding(&self, prefix: &str) -> Option<&str> {
        match prefix {
            "" => Some(SITEMAP_NS),
            "rs" => Some(RS_NS),
            "xml" => Some("http://www.w3.org/XML/1998/namespace"),
            p => self
                .header
                .namespaces
                .iter()
                .find(|(q, _)| q == p)
                .map(|(_, u)| u.as_str()),
        }
    }

    /// Serializes an extension element whose start was just read, with the end tag, and with
    /// declarations for the prefixes it uses whose binding written documents would not give
    /// them (declared below the root, or rebinding `rs` or the default namespace), so that it
    /// means the same wherever it is written.
    fn capture(&mut self, start: Tok) -> Result<String, Error> {
        let Tok::Start {
            raw,
            empty,
            qname,
            ns,
            attrs,
            decls,
            ..
        } = start
        else {
            return Ok(String::new());
        };
        let raw = raw.unwrap_or_default();
        let own_decls: Vec<String> = decls.into_iter().map(|(p, _)| p).collect();
        let mut needed: Vec<(String, String)> = Vec::new();
        self.note_bindings(&qname, ns.as_deref(), &attrs, &own_decls, &mut needed);
        let mut body = String::new();
        let mut result = Ok(());
        if !empty {
            let was = std::mem::replace(&mut self.capturing, true);
            let target = self.depth - 1;
            let mut stack: Vec<String> = vec![qname.to_string()];
            result = loop {
                let tok = match self.next_tok() {
                    Ok(t) => t,
                    Err(e) => break Err(e),
                };
                match tok {
                    Tok::Start {
                        raw,
                        empty,
                        qname,
                        ns,
                        attrs,
                        ..
                    } => {
                        self.note_bindings(&qname, ns.as_deref(), &attrs, &own_decls, &mut needed);
                        body.push_str(&raw.unwrap_or_default());
                        if empty {
                            body.push_str("/>");
                        } else {
                            body.push('>');
                            stack.push(qname.into_owned());
                        }
                    }
                    Tok::End { .. } => {
                        let q = stack.pop().unwrap_or_default();
                        body.push_str("</");
                        body.push_str(&q);
                        body.push('>');
                        if self.depth == target {
                            break Ok(());
                        }
                    }
                    Tok::Text { text, .. } => escape_text_into(&text, &mut body),
                    Tok::Other | Tok::Space | Tok::Decl { .. } => {}
                    Tok::Eof { pos } => {
                        break Err(self.err_malformed(pos, "unexpected end of document"));
                    }
                }
                if body.len() as u64 > self.opts.max_token_bytes {
                    break Err(Error::Limit {
                        doc: self.doc.clone(),
                        pos: self.here(),
                        limit: LimitKind::TokenBytes,
                        max: self.opts.max_token_bytes,
                    });
                }
            };
            self.capturing = was;
        }
        result?;
        // `<qname` + injected declarations + the raw attributes.
        let mut out = String::with_capacity(raw.len() + body.len() + 64);
        let head_len = 1 + qname.len();
        out.push_str(raw.get(..head_len).unwrap_or(&raw));
        for (p, u) in &needed {
            out.push_str(if p.is_empty() { " xmlns" } else { " xmlns:" });
            out.push_str(p);
            out.push_str("=\"");
            for c in u.chars() {
                match c {
                    '&' => out.push_str("&amp;"),
                    '<' => out.push_str("&lt;"),
                    '"' => out.push_str("&quot;"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push_str(raw.get(head_len..).unwrap_or(""));
        if empty {
            out.push_str("/>");
        } else {
            out.push('>');
            out.push_str(&body);
        }
        Ok(out)
    }

    /// Records the bindings an element of a captured fragment relies on that written documents
    /// would not provide.
    fn note_bindings(
        &self,
        qname: &str,
        ns: Option<&str>,
        attrs: &[Attr],
        own_decls: &[String],
        needed: &mut Vec<(String, String)>,
    ) {
        let prefix = qname.split_once(':').map(|(p, _)| p).unwrap_or("");
        let mut uses: Vec<(&str, &str)> = Vec::new();
        if let Some(u) = ns {
            uses.push((prefix, u));
        }
        for a in attrs {
            if let (Some(p), Some(u)) = (a.prefix.as_deref(), a.ns.as_deref()) {
                uses.push((p, u));
            }
        }
        for (p, u) in uses {
            if p == "xml" || p == "xmlns" {
                continue;
            }
            if self.written_binding(p) == Some(u)
                || own_decls.iter().any(|d| d == p)
                || needed.iter().any(|(q, _)| q == p)
            {
                continue;
            }
            needed.push((p.to_owned(), u.to_owned()));
        }
    }

    /// Turns an attribute outside ResourceSync's set into an extension attribute, or reports it.
    fn foreign_attr(&mut self, a: Attr, pos: Position, element: &str) -> Option<ExtAttr> {
        let qname = a.qname();
        match a.ns {
            Some(ns) if ns == RS_NS => {
                self.findings.push(
                    rules::RS_ATTR_FOREIGN,
                    pos,
                    format!("attribute {qname} is not defined on {element}"),
                );
                None
            }
            Some(ns) => Some(ExtAttr {
                name: qname,
                namespace: ns,
                value: a.value,
            }),
            None => {
                // Unprefixed attributes on Sitemap elements (e.g. xsi-less schemaLocation) have
                // no defined meaning; report them, never keep them in the ResourceSync space.
                self.findings.push(
                    rules::RS_ATTR_FOREIGN,
                    pos,
                    format!(
                        "attribute {} on {element} is not defined; extensions must use their own namespace prefix",
                        a.qname()
                    ),
                );
                None
            }
        }
    }

    /// The name of an attribute of `<rs:md>` / `<rs:ln>`, after checking it is unprefixed.
    /// Returns `None` for attributes in other namespaces (handled as extensions).
    fn rs_attr_name(&mut self, a: &Attr, pos: Position) -> Option<()> {
        match &a.ns {
            None => Some(()),
            Some(ns) if ns == RS_NS => {
                self.findings.push(
                    rules::RS_ATTR_UNPREFIXED,
                    pos,
                    format!("attribute {} must not have a namespace prefix", a.qname()),
                );
                Some(())
            }
            Some(_) => None,
        }
    }

    fn datetime(&mut self, a: &Attr, pos: Position) -> Option<W3cDateTime> {
        match W3cDateTime::parse(a.value.trim()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.findings
                    .push(rules::RS_DATETIME, pos, format!("{}: {}", a.local, e));
                None
            }
        }
    }

    fn hashes(&mut self, a: &Attr, pos: Position) -> Option<Hashes> {
        let (h, bad) = Hashes::parse(&a.value);
        for b in bad {
            self.findings
                .push(rules::RS_HASH_SYNTAX, pos, b.to_string());
        }
        for d in &h.0 {
            if let Some(p) = d.syntax_problem() {
                self.findings.push(rules::RS_HASH_SYNTAX, pos, p);
            }
        }
        if h.is_empty() {
            if a.value.trim().is_empty() {
                self.findings
                    .push(rules::RS_HASH_SYNTAX, pos, "empty hash attribute");
            }
            None
        } else {
            Some(h)
        }
    }

    fn length(&mut self, a: &Attr, pos: Position) -> Option<u64> {
        match a.value.trim().parse::<u64>() {
            Ok(v) if !a.value.trim().starts_with('+') => Some(v),
            _ => {
                let v: String = a.value.chars().take(40).collect();
                self.findings.push(
                    rules::RS_LENGTH,
                    pos,
                    format!("length {v:?} is not a non-negative integer"),
                );
                None
            }
        }
    }

    fn metadata(&mut self, attrs: Vec<Attr>, pos: Position) -> Metadata {
        let mut md = Metadata::default();
        for a in attrs {
            if self.rs_attr_name(&a, pos).is_none() {
                if let Some(x) = self.foreign_attr(a, pos, "rs:md") {
                    md.extra.push(x);
                }
                continue;
            }
            match a.local.as_ref() {
                "capability" => md.capability = Some(Capability::parse(a.value.trim())),
                "at" => {
                    md.at = self.datetime(&a, pos);
                    unreadable(&mut md.invalid, "at", md.at.is_none());
                }
                "completed" => {
                    md.completed = self.datetime(&a, pos);
                    unreadable(&mut md.invalid, "completed", md.completed.is_none());
                }
                "from" => {
                    md.from = self.datetime(&a, pos);
                    unreadable(&mut md.invalid, "from", md.from.is_none());
                }
                "until" => {
                    md.until = self.datetime(&a, pos);
                    unreadable(&mut md.invalid, "until", md.until.is_none());
                }
                "datetime" => {
                    md.datetime = self.datetime(&a, pos);
                    unreadable(&mut md.invalid, "datetime", md.datetime.is_none());
                }
                "change" => md.change = Some(Change::parse(a.value.trim())),
                "hash" => {
                    md.hash = self.hashes(&a, pos);
                    unreadable(&mut md.invalid, "hash", md.hash.is_none());
                }
                "length" => {
                    md.length = self.length(&a, pos);
                    unreadable(&mut md.invalid, "length", md.length.is_none());
                }
                "type" => md.mime_type = Some(a.value),
                "encoding" => md.encoding = Some(a.value),
                "path" => md.path = Some(a.value),
                _ => {
                    self.findings.push(
                        rules::RS_ATTR_FOREIGN,
                        pos,
                        format!(
                            "attribute {} is not defined on <rs:md>; extensions must use their own namespace",
                            a.qname()
                        ),
                    );
                }
            }
        }
        md
    }

    fn link(&mut self, attrs: Vec<Attr>, pos: Position) -> Option<Link> {
        let mut l = Link::default();
        let (mut has_rel, mut has_href) = (false, false);
        for a in attrs {
            if self.rs_attr_name(&a, pos).is_none() {
                if let Some(x) = self.foreign_attr(a, pos, "rs:ln") {
                    l.extra.push(x);
                }
                continue;
            }
            match a.local.as_ref() {
                "rel" => {
                    has_rel = true;
                    l.rel = a.value.trim().to_owned();
                }
                "href" => {
                    has_href = true;
                    l.href = a.value.trim().to_owned();
                }
                "pri" => match a.value.trim().parse::<u32>() {
                    Ok(p) if (1..=999_999).contains(&p) && !a.value.trim().starts_with('+') => {
                        l.pri = Some(p)
                    }
                    _ => {
                        let v: String = a.value.chars().take(40).collect();
                        self.findings.push(
                            rules::RS_LN_PRI,
                            pos,
                            format!("pri {v:?} is not an integer from 1 to 999999"),
                        );
                    }
                },
                "modified" => l.modified = self.datetime(&a, pos),
                "hash" => l.hash = self.hashes(&a, pos),
                "length" => l.length = self.length(&a, pos),
                "type" => l.mime_type = Some(a.value),
                "encoding" => l.encoding = Some(a.value),
                "path" => l.path = Some(a.value),
                "profile" => l.profile = Some(a.value),
                _ => {
                    self.findings.push(
                        rules::RS_ATTR_FOREIGN,
                        pos,
                        format!(
                            "attribute {} is not defined on <rs:ln>; extensions must use their own namespace",
                            a.qname()
                        ),
                    );
                }
            }
        }
        if !has_rel || l.rel.is_empty() {
            self.findings
                .push(rules::RS_LN_REL, pos, "<rs:ln> without a rel attribute");
        }
        if !has_href || l.href.is_empty() {
            self.findings
                .push(rules::RS_LN_HREF, pos, "<rs:ln> without an href attribute");
        }
        Some(l)
    }

    /// The next entry, or `None` at the end of the document.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, Error> {
        if self.failed {
            return Ok(None);
        }
        let r = self.next_entry_inner();
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn next_entry_inner(&mut self) -> Result<Option<Entry>, Error> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::AtEntry { pos, empty } => {
                    self.state = State::InRoot;
                    let e = self.entry(pos, empty)?;
                    self.entries += 1;
                    return Ok(Some(e));
                }
                State::InRoot => match self.next_tok()? {
                    Tok::Start {
                        name,
                        empty,
                        qname,
                        pos,
                        raw,
                        attrs,
                        decls,
                        ns: ens,
                    } => match name {
                        Name::Url | Name::Sitemap => {
                            self.check_entry_element(&name, pos);
                            self.state = State::AtEntry { pos, empty };
                        }
                        Name::RsMd if self.header.md.is_none() && self.late_root_md.is_none() => {
                            // The document's <rs:md>, in the wrong place: one fault, named as
                            // such (not also as a missing <rs:md>, see `root_md_after_entries`).
                            self.late_root_md = Some(pos);
                            self.findings.push(
                                rules::RS_MD_POSITION,
                                pos,
                                format!(
                                    "the root's <rs:md> comes after the first entry: move it before the first <{}>; until then the document is read as a plain Sitemap",
                                    self.header.root.entry_element()
                                ),
                            );
                            self.skip(empty)?;
                        }
                        Name::RsMd | Name::RsLn => {
                            self.findings.push(
                                rules::RS_MD_POSITION,
                                pos,
                                format!(
                                    "<{qname}> of the root after the first entry: the root's <rs:md> and <rs:ln> come before the first <{}>",
                                    self.header.root.entry_element()
                                ),
                            );
                            self.skip(empty)?;
                        }
                        Name::Foreign(ns) => {
                            // Extensions between entries have nowhere to go; keep reading.
                            self.capture(Tok::Start {
                                name: Name::Foreign(ns),
                                empty,
                                attrs,
                                decls,
                                raw,
                                ns: ens,
                                qname,
                                pos,
                            })?;
                        }
                        other => {
                            self.unknown_element(&other, &qname, pos);
                            self.skip(empty)?;
                        }
                    },
                    Tok::End { .. } => {
                        self.state = State::Done;
                        self.finish_root()?;
                    }
                    Tok::Text { text, pos } => self.stray_text(&text, pos),
                    Tok::Decl { pos, .. } => {
                        return Err(self.err_malformed(pos, "misplaced XML declaration"));
                    }
                    Tok::Other | Tok::Space => {}
                    Tok::Eof { pos } => {
                        return Err(
                            self.err_malformed(pos, "document ends inside the root element")
                        );
                    }
                },
            }
        }
    }

    fn entry(&mut self, pos: Position, empty: bool) -> Result<Entry, Error> {
        let mut e = Entry {
            position: pos,
            ..Entry::default()
        };
        let mut seen_loc = false;
        let mut children = 0usize;
        if !empty {
            loop {
                match self.next_tok()? {
                    Tok::Start {
                        name,
                        empty,
                        attrs,
                        raw,
                        qname,
                        pos: cpos,
                        decls,
                        ns: ens,
                    } => match name {
                        Name::Loc => {
                            let t = self.text(empty, "loc")?;
                            if seen_loc {
                                self.findings.push(
                                    rules::SM_DUPLICATE_CHILD,
                                    cpos,
                                    "more than one <loc> in an entry",
                                );
                            } else {
                                e.loc = trim_owned(t);
                                seen_loc = true;
                            }
                        }
                        Name::Lastmod => {
                            let t = self.text(empty, "lastmod")?;
                            if e.lastmod.is_some() {
                                self.findings.push(
                                    rules::SM_DUPLICATE_CHILD,
                                    cpos,
                                    "more than one <lastmod> in an entry",
                                );
                            }
                            match W3cDateTime::parse(t.trim()) {
                                Ok(v) => e.lastmod = Some(v),
                                Err(err) => self.findings.push(
                                    rules::SM_LASTMOD,
                                    cpos,
                                    format!("<lastmod>: {err}"),
                                ),
                            }
                        }
                        Name::Changefreq => {
                            let t = self.text(empty, "changefreq")?;
                            let cf = ChangeFreq::parse(&t);
                            if let ChangeFreq::Other(v) = &cf {
                                let v: String = v.chars().take(40).collect();
                                self.findings.push(
                                    rules::SM_CHANGEFREQ,
                                    cpos,
                                    format!("<changefreq> {v:?} is not a defined value"),
                                );
                            }
                            e.changefreq = Some(cf);
                        }
                        Name::Priority => {
                            let t = self.text(empty, "priority")?;
                            e.priority = Some(t.trim().to_owned());
                        }
                        Name::RsMd => {
                            let md = self.metadata(attrs, cpos);
                            if e.md.is_some() {
                                self.findings.push(
                                    rules::SM_DUPLICATE_CHILD,
                                    cpos,
                                    "<rs:md> is not repeatable",
                                );
                            } else {
                                e.md = Some(md);
                            }
                            self.expect_empty(empty, cpos, "rs:md")?;
                        }
                        Name::RsLn => {
                            children += 1;
                            self.check_children(children, cpos)?;
                            if let Some(l) = self.link(attrs, cpos) {
                                e.links.push(l);
                            }
                            self.expect_empty(empty, cpos, "rs:ln")?;
                        }
                        Name::Foreign(ns) => {
                            children += 1;
                            self.check_children(children, cpos)?;
                            let xml = self.capture(Tok::Start {
                                name: Name::Foreign(ns.clone()),
                                empty,
                                attrs,
                                decls,
                                raw,
                                ns: ens,
                                qname,
                                pos: cpos,
                            })?;
                            e.extensions.push(ExtElement { namespace: ns, xml });
                        }
                        other => {
                            self.unknown_element(&other, &qname, cpos);
                            self.skip(empty)?;
                        }
                    },
                    Tok::End { .. } => break,
                    Tok::Text { text, pos } => self.stray_text(&text, pos),
                    Tok::Other | Tok::Space => {}
                    Tok::Decl { pos, .. } => {
                        return Err(self.err_malformed(pos, "misplaced XML declaration"));
                    }
                    Tok::Eof { pos } => {
                        return Err(self.err_malformed(pos, "document ends inside an entry"));
                    }
                }
            }
        }
        if e.loc.is_empty() {
            self.findings
                .push(rules::SM_LOC_MANDATORY, pos, "entry without a <loc>");
        }
        Ok(e)
    }
}

impl<R: Read> Iterator for DocumentReader<R> {
    type Item = Result<Entry, Error>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }
}

/// The attribute names ResourceSync defines, shared rather than allocated per attribute.
const ATTR_NAMES: &[&str] = &[
    "capability",
    "at",
    "completed",
    "from",
    "until",
    "change",
    "datetime",
    "hash",
    "length",
    "type",
    "encoding",
    "path",
    "rel",
    "href",
    "pri",
    "modified",
    "profile",
];

fn intern_attr(local: &str) -> Cow<'static, str> {
    match ATTR_NAMES.iter().find(|n| **n == local) {
        Some(n) => Cow::Borrowed(n),
        None => Cow::Owned(local.to_owned()),
    }
}

/// Records that a ResourceSync attribute was present but its value could not be read (the
/// finding saying why is already recorded), so that the validator does not also report it
/// missing: one finding per fault. (An attribute appears once per element: XML 1.0 §3.1.)
#[inline]
fn unreadable(invalid: &mut Unreadable, name: &'static str, failed: bool) {
    if failed {
        invalid.insert(name);
    }
}

/// Trims XML white space, reusing the string when there is none to trim.
fn trim_owned(s: String) -> String {
    let t = s.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
    if t.len() == s.len() { s } else { t.to_owned() }
}

fn capture_all(capturing: bool, name: &Name) -> bool {
    capturing || matches!(name, Name::Unknown(_) | Name::Foreign(_))
}

impl Name {
    /// The local name of a defined element (for messages).
    fn static_name(&self) -> &'static str {
        match self {
            Name::UrlSet => "urlset",
            Name::SitemapIndex => "sitemapindex",
            Name::Url => "url",
            Name::Sitemap => "sitemap",
            Name::Loc => "loc",
            Name::Lastmod => "lastmod",
            Name::Changefreq => "changefreq",
            Name::Priority => "priority",
            Name::RsMd => "rs:md",
            Name::RsLn => "rs:ln",
            Name::Unknown(_) | Name::Foreign(_) => "?",
        }
    }
}

/// A namespace name as the resolver holds it (the raw attribute value) after the
/// attribute-value normalization XML 1.0 §3.3.3 applies: references replaced, white space
/// characters turned into spaces. Borrowed in the common case of a plain URI.
fn ns_value(raw: &str) -> Cow<'_, str> {
    // Branch-free test (this runs for every element): `&` or a control character.
    let special = raw
        .as_bytes()
        .iter()
        .fold(false, |acc, &b| acc | (b == b'&') | (b < 0x20));
    if !special {
        return Cow::Borrowed(raw);
    }
    let unescaped = quick_xml::escape::unescape(raw)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| raw.to_owned());
    Cow::Owned(
        unescaped
            .replace("\r\n", " ")
            .replace(['\t', '\n', '\r'], " "),
    )
}

/// Whether the raw attribute text of a tag is well-formed in the two ways the XML parser does
/// not check: no raw `<` inside a value (XML 1.0 §3.1, AttValue) and white space between
/// attributes (§3.1, production STag).
fn attributes_well_formed(raw: &str) -> bool {
    let b = raw.as_bytes();
    let mut i = 0;
    // Jump from quote to quote: values are scanned with memchr, not byte by byte.
    while let Some(open) = memchr::memchr2(b'"', b'\'', &b[i..]) {
        let open = i + open;
        let q = b[open];
        let Some(len) = memchr::memchr(q, &b[open + 1..]) else {
            return true; // unterminated: the XML parser reports it
        };
        let close = open + 1 + len;
        if memchr::memchr(b'<', &b[open + 1..close]).is_some() {
            return false;
        }
        if let Some(&next) = b.get(close + 1) {
            if !matches!(next, b' ' | b'\t' | b'\r' | b'\n' | b'/') {
                return false;
            }
        }
        i = close + 1;
    }
    true
}

fn classify(ns: &ResolveResult<'_>, local: &str, qname: &str) -> Name {
    let uri = match ns {
        ResolveResult::Bound(n) => ns_value(n.as_ref()),
        _ => Cow::Borrowed(""),
    };
    match ns {
        ResolveResult::Bound(_) if uri == SITEMAP_NS => match local {
            "urlset" => Name::UrlSet,
            "sitemapindex" => Name::SitemapIndex,
            "url" => Name::Url,
            "sitemap" => Name::Sitemap,
            "loc" => Name::Loc,
            "lastmod" => Name::Lastmod,
            "changefreq" => Name::Changefreq,
            "priority" => Name::Priority,
            _ => Name::Unknown(qname.to_owned()),
        },
        ResolveResult::Bound(_) if uri == RS_NS => match local {
            "md" => Name::RsMd,
            "ln" => Name::RsLn,
            _ => Name::Unknown(qname.to_owned()),
        },
        ResolveResult::Bound(_) => Name::Foreign(uri.into_owned()),
        ResolveResult::Unbound | ResolveResult::Unknown(_) => Name::Unknown(qname.to_owned()),
    }
}

/// The position of byte `at` of the text of a `<?...?>` token that was the first of the
/// document and ends at byte `end`: the token starts at the first byte, or after a byte order
/// mark, on line 1.
fn position_in_first_token(end: u64, text: &str, at: usize) -> Position {
    let start = end.saturating_sub(text.len() as u64 + 4);
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    match memchr::memrchr(b'\n', before) {
        None => Position {
            line: 1,
            column: start + 2 + at as u64 + 1,
        },
        Some(nl) => Position {
            line: 1 + memchr::memchr_iter(b'\n', before).count() as u64,
            column: (at - nl) as u64,
        },
    }
}

/// What is wrong with a root element that is not a Sitemap's: its name and namespace, and the
/// ones expected (Z39.99-2014 §7).
fn root_message(qname: &str, ns: Option<&str>) -> String {
    let local = qname.rsplit(':').next().unwrap_or(qname);
    let found = match ns {
        Some(u) => format!("the namespace {u}"),
        None => "no namespace".to_owned(),
    };
    let hint = match ns.and_then(|u| near_miss(u, SITEMAP_NS)) {
        Some(d) if matches!(local, "urlset" | "sitemapindex") => {
            format!(" (the namespace differs from the Sitemap namespace by {d})")
        }
        _ => String::new(),
    };
    format!(
        "the root element is <{qname}> in {found}; a Sitemap's root is <urlset> or \
         <sitemapindex> in the namespace {SITEMAP_NS}{hint}"
    )
}

/// How `uri` differs from `expected` when it is a near miss (a trailing slash, `https` for
/// `http`, letter case): the common ways a namespace name is mistyped. Namespace names are
/// compared as strings (Namespaces in XML 1.0 §2.3), so a near miss is another namespace.
pub(crate) fn near_miss(uri: &str, expected: &str) -> Option<&'static str> {
    if uri == expected {
        return None;
    }
    let strip = |s: &str| {
        let s = s.trim_end_matches('/');
        s.strip_prefix("https://")
            .or_else(|| s.strip_prefix("http://"))
            .unwrap_or(s)
            .to_owned()
    };
    let (a, b) = (strip(uri), strip(expected));
    if a != b {
        return if uri.eq_ignore_ascii_case(expected) {
            Some("letter case")
        } else {
            None
        };
    }
    let slash = |s: &str| s.ends_with('/');
    if slash(uri) != slash(expected) {
        Some(if slash(expected) {
            "its missing trailing slash"
        } else {
            "a trailing slash"
        })
    } else {
        Some("its scheme")
    }
}

/// The first character XML 1.0 §2.2 does not allow (C0 controls other than tab, LF, CR;
/// U+FFFE, U+FFFF), if any. Runs over every text and attribute value, so it scans bytes.
fn forbidden_char(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    // Branch-free first pass (vectorizes); the exact search only when something is there.
    let control = b.iter().fold(false, |acc, &c| acc | (c < 0x20));
    if control {
        if let Some(&c) = b
            .iter()
            .find(|&&c| c < 0x20 && c != b'\t' && c != b'\n' && c != b'\r')
        {
            return Some(u32::from(c));
        }
    }
    if memchr::memchr(0xEF, b).is_some() {
        return s
            .chars()
            .find(|&c| c == '\u{FFFE}' || c == '\u{FFFF}')
            .map(|c| c as u32);
    }
    None
}

fn is_xml_space(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// Escapes character data for re-serialization.
pub(crate) fn escape_text_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}
