//! Reading OAI-PMH responses (OAI-PMH 2.0 §3.2): the envelope (`responseDate`, `error`), the
//! `Identify` answer, and `ListRecords` pages (records, `resumptionToken`).
//!
//! The response is held whole (its size is bounded by the client) and must be UTF-8
//! (OAI-PMH 2.0 §3.2.1). No DTD is accepted and no entity is expanded but XML's five and
//! character references: a document that declares or uses any other is refused. A record's
//! metadata is the one element inside `<metadata>`, cut from the response as it was written
//! and made a standalone document: an XML declaration, and on its root the namespace
//! declarations it inherited from the envelope that it uses: the prefixes of its element and
//! attribute names, the prefix of an `xsi:type` value (a QName naming a type, XML Schema Part
//! 1 §2.6.1; QNames in other attribute values or in text are not known without the schema, and
//! a record relying on one declares it itself), and the default namespace when an unprefixed
//! element name inside relies on it. The declarations in scope are a map from prefix to its
//! bindings, so a record costs what it holds, not what the envelope declares.
//!
//! Bytes are capped ([`Limits`]): one record's document, and the record documents of one
//! response together; past either, the response is refused (a [`XmlError`] with `limit`).

use std::collections::{HashMap, HashSet};

use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;

/// Deepest element nesting accepted.
const MAX_DEPTH: usize = 256;
/// Longest text kept of one field (identifier, datestamp, token, error message).
const MAX_FIELD: usize = 64 * 1024;
/// The namespace of `xsi:type` (XML Schema Part 1 §2.6).
const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// What the record documents of one response may take, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// One record's document (`maxRecordBytes`).
    pub(crate) record: u64,
    /// The record documents of one response together (`maxResponseBytes`).
    pub(crate) response: u64,
}

/// A response that cannot be read, with where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct XmlError {
    /// 1-based line (0 when not about a place).
    pub(crate) line: u64,
    /// 1-based column, in bytes.
    pub(crate) column: u64,
    /// What is wrong.
    pub(crate) message: String,
    /// A cap of [`Limits`] was reached (the message names it and how to raise it), rather than
    /// the document being broken.
    pub(crate) limit: bool,
}

impl std::fmt::Display for XmlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "line {}, column {}: {}",
                self.line, self.column, self.message
            )
        } else {
            f.write_str(&self.message)
        }
    }
}

/// An OAI-PMH error (§3.6): its code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OaiError {
    pub(crate) code: String,
    pub(crate) message: String,
}

/// One record of a `ListRecords` page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) identifier: String,
    pub(crate) datestamp: String,
    /// `<header status="deleted">` (§2.5.1).
    pub(crate) deleted: bool,
    /// The metadata as a standalone XML document (`None` for a deleted record, or when
    /// missing: see `problem`).
    pub(crate) metadata: Option<Vec<u8>>,
    /// Why the metadata could not be taken (no element, several), for a record not deleted.
    pub(crate) problem: Option<String>,
}

/// What a response says, whatever the verb.
#[derive(Debug, Default)]
pub(crate) struct Response {
    pub(crate) response_date: String,
    pub(crate) errors: Vec<OaiError>,
    pub(crate) records: Vec<Record>,
    /// The `resumptionToken`: `None` when absent, `Some("")` at the end of a list (§3.5).
    pub(crate) token: Option<String>,
    /// `Identify`: `granularity`, `deletedRecord`.
    pub(crate) granularity: Option<String>,
    pub(crate) deleted_record: Option<String>,
}

/// One namespace declaration: prefix (`""` for the default namespace) and URI (unescaped).
type Decl = (String, String);

/// Where the reader is, for the fields it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    None,
    ResponseDate,
    Error,
    Identifier,
    Datestamp,
    Token,
    Granularity,
    DeletedRecord,
}

fn position(body: &str, offset: u64) -> (u64, u64) {
    let upto = &body.as_bytes()[..(offset as usize).min(body.len())];
    let line = upto.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let start = upto.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    (line, (upto.len() - start) as u64 + 1)
}

fn err_at(body: &str, offset: u64, message: impl Into<String>) -> XmlError {
    let (line, column) = position(body, offset);
    XmlError {
        line,
        column,
        message: message.into(),
        limit: false,
    }
}

fn limit_err(message: String) -> XmlError {
    XmlError {
        line: 0,
        column: 0,
        message,
        limit: true,
    }
}

/// The namespace bindings in scope: per prefix (`""` for the default namespace), its URIs from
/// the outermost declaration to the innermost; per open element, the prefixes it declared,
/// taken off again when it ends. Looking a prefix up costs the same however many are declared.
#[derive(Debug, Default)]
struct Bindings {
    by_prefix: HashMap<String, Vec<String>>,
    declared: Vec<Vec<String>>,
}

impl Bindings {
    fn push(&mut self, decls: Vec<Decl>) {
        let mut prefixes = Vec::with_capacity(decls.len());
        for (p, uri) in decls {
            self.by_prefix.entry(p.clone()).or_default().push(uri);
            prefixes.push(p);
        }
        self.declared.push(prefixes);
    }

    fn pop(&mut self) {
        for p in self.declared.pop().unwrap_or_default() {
            if let Some(v) = self.by_prefix.get_mut(&p) {
                v.pop();
                if v.is_empty() {
                    self.by_prefix.remove(&p);
                }
            }
        }
    }

    /// The URI a prefix is bound to here.
    fn uri(&self, prefix: &str) -> Option<&str> {
        self.by_prefix
            .get(prefix)
            .and_then(|v| v.last())
            .map(String::as_str)
    }
}

/// The namespace declarations of a start tag, unescaped.
fn decls_of(e: &BytesStart<'_>) -> Result<Vec<Decl>, String> {
    let mut out = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|e| e.to_string())?;
        let key = a.key.0;
        let prefix = if key == "xmlns" {
            ""
        } else if let Some(p) = key.strip_prefix("xmlns:") {
            p
        } else {
            continue;
        };
        let v = a
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| e.to_string())?;
        out.push((prefix.to_owned(), v.into_owned()));
    }
    Ok(out)
}

fn attr(e: &BytesStart<'_>, name: &str) -> Result<Option<String>, String> {
    for a in e.attributes() {
        let a = a.map_err(|e| e.to_string())?;
        if a.key.local_name().into_inner() == name && a.key.prefix().is_none() {
            return Ok(Some(
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map_err(|e| e.to_string())?
                    .into_owned(),
            ));
        }
    }
    Ok(None)
}

fn local(name: &str) -> &str {
    name.rsplit_once(':').map_or(name, |(_, l)| l)
}

fn prefix_of(name: &str) -> Option<&str> {
    name.split_once(':').map(|(p, _)| p)
}

/// The subtree of a `<metadata>` element being cut out.
#[derive(Debug)]
struct Cut {
    /// Offset of its root's `<`, and the length of the root's name.
    start: usize,
    name_len: usize,
    /// Depth of the root (in the envelope's stack).
    depth: usize,
    /// The root's own declarations (prefixes).
    own: HashSet<String>,
    /// The prefixes used inside: of element and attribute names, and of `xsi:type` values.
    used: HashSet<String>,
    /// An unprefixed name inside relies on a default namespace declared outside.
    uses_outer_default: bool,
    /// Per depth inside the cut, whether a default namespace is declared at or above it.
    default_inside: Vec<bool>,
}

/// Notes the prefixes a start tag inside a metadata cut uses (see the module's documentation),
/// with `bindings` those in scope at it (its own declarations included).
fn note_used(
    used: &mut HashSet<String>,
    e: &BytesStart<'_>,
    bindings: &Bindings,
) -> Result<(), String> {
    let mut note = |p: &str| {
        if p != "xml" && p != "xmlns" && !used.contains(p) {
            used.insert(p.to_owned());
        }
    };
    if let Some(p) = prefix_of(e.name().0) {
        note(p);
    }
    for a in e.attributes() {
        let a = a.map_err(|e| e.to_string())?;
        let Some(p) = prefix_of(a.key.0) else {
            continue;
        };
        note(p);
        if local(a.key.0) == "type" && bindings.uri(p) == Some(XSI) {
            let v = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|e| e.to_string())?;
            if let Some(vp) = prefix_of(v.trim()) {
                note(vp);
            }
        }
    }
    Ok(())
}

/// Reads a response (see the module's documentation), its records' documents within `limits`.
pub(crate) fn parse(bytes: &[u8], limits: Limits) -> Result<Response, XmlError> {
    let body = utf8_body(bytes)?;
    let mut r = Reader::from_str(body);
    r.config_mut().check_end_names = true;
    let mut p = Parser::new(body, limits);
    loop {
        let before = r.buffer_position();
        let ev = r
            .read_event()
            .map_err(|e| err_at(body, r.error_position(), format!("malformed XML: {e}")))?;
        if matches!(ev, Event::Eof) {
            break;
        }
        p.event(&mut r, ev, before)?;
    }
    if !p.seen_root {
        return Err(err_at(body, 0, "empty response: no <OAI-PMH> element"));
    }
    Ok(p.out)
}

/// The response as text, without a byte order mark; refused unless UTF-8.
fn utf8_body(bytes: &[u8]) -> Result<&str, XmlError> {
    let body = std::str::from_utf8(bytes).map_err(|e| {
        let (line, column) = position(
            std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
            e.valid_up_to() as u64,
        );
        XmlError {
            line,
            column,
            message: "not UTF-8 (OAI-PMH responses are UTF-8)".into(),
            limit: false,
        }
    })?;
    Ok(body.strip_prefix('\u{feff}').unwrap_or(body))
}

/// The reader's state while it reads a response.
struct Parser<'a> {
    body: &'a str,
    limits: Limits,
    out: Response,
    /// Local names of the open elements, and the namespaces in scope.
    stack: Vec<String>,
    bindings: Bindings,
    /// Bytes of record documents made from this response so far.
    taken: u64,
    field: Field,
    text: String,
    record: Option<Record>,
    error_code: String,
    /// Depth of the `<metadata>` element open, if one is.
    in_metadata: Option<usize>,
    cut: Option<Cut>,
    seen_root: bool,
}

impl<'a> Parser<'a> {
    fn new(body: &'a str, limits: Limits) -> Self {
        Parser {
            body,
            limits,
            out: Response::default(),
            stack: Vec::new(),
            bindings: Bindings::default(),
            taken: 0,
            field: Field::None,
            text: String::new(),
            record: None,
            error_code: String::new(),
            in_metadata: None,
            cut: None,
            seen_root: false,
        }
    }

    /// Takes one event (not the end of the input) read from `before`.
    fn event(&mut self, r: &mut Reader<&[u8]>, ev: Event<'_>, before: u64) -> Result<(), XmlError> {
        let body = self.body;
        let fail = move |m: String| err_at(body, before, m);
        match ev {
            Event::Eof | Event::PI(_) | Event::Comment(_) => {}
            Event::Decl(d) => {
                if let Some(enc) = d.encoding() {
                    let enc = enc.map_err(|e| fail(e.to_string()))?;
                    if !enc.eq_ignore_ascii_case("utf-8") && !enc.eq_ignore_ascii_case("utf8") {
                        return Err(fail(format!(
                            "encoding {enc:?}: OAI-PMH responses are UTF-8"
                        )));
                    }
                }
            }
            Event::DocType(_) => {
                return Err(fail(
                    "a DTD: not accepted (no entity is expanded in OAI-PMH responses)".into(),
                ));
            }
            Event::Start(ref e) => self.start(r, e, before, false)?,
            Event::Empty(ref e) => self.start(r, e, before, true)?,
            Event::End(_) => self.end(r, self.stack.len())?,
            Event::Text(t) if self.wants_text() => {
                push_text(&mut self.text, &t.xml10_content()).map_err(fail)?;
            }
            Event::CData(t) if self.wants_text() => {
                push_text(&mut self.text, &t.xml10_content()).map_err(fail)?;
            }
            Event::Text(_) | Event::CData(_) => {}
            Event::GeneralRef(g) => {
                let resolved = resolve_ref(&g).map_err(fail)?;
                if self.wants_text() {
                    push_text(&mut self.text, &resolved).map_err(fail)?;
                }
            }
        }
        if self.record.is_some() && self.stack.len() < 2 {
            self.record = None;
        }
        Ok(())
    }

    /// Whether text is kept: that of a field being read (not inside a metadata cut).
    fn wants_text(&self) -> bool {
        self.field != Field::None && self.cut.is_none()
    }

    /// An element starts (and, `empty`, ends) at `before`: inside a metadata cut, the root of
    /// one, or an element of the envelope.
    fn start(
        &mut self,
        r: &mut Reader<&[u8]>,
        e: &BytesStart<'_>,
        before: u64,
        empty: bool,
    ) -> Result<(), XmlError> {
        let body = self.body;
        let fail = move |m: String| err_at(body, before, m);
        let qname = e.name().0;
        let name = local(qname).to_owned();
        let decls = decls_of(e).map_err(fail)?;
        self.check_nesting(qname, &name).map_err(fail)?;
        let depth = self.stack.len() + 1;
        let declares_default = decls.iter().any(|(p, _)| p.is_empty());
        let cut_starts = self.cut.is_none() && self.in_metadata == Some(depth - 1);
        let own: HashSet<String> = if cut_starts {
            decls.iter().map(|(p, _)| p.clone()).collect()
        } else {
            HashSet::new()
        };
        self.bindings.push(decls);
        if let Some(c) = self.cut.as_mut() {
            let inherited = *c.default_inside.last().unwrap_or(&false);
            let here = inherited || declares_default;
            if prefix_of(qname).is_none() && !here {
                c.uses_outer_default = true;
            }
            c.default_inside.push(here);
            note_used(&mut c.used, e, &self.bindings).map_err(fail)?;
        } else if cut_starts {
            self.start_cut(e, before, depth, own, declares_default)
                .map_err(fail)?;
        } else {
            self.start_envelope(e, &name, depth).map_err(fail)?;
        }
        self.stack.push(name);
        if empty {
            self.end(r, depth)?;
        }
        Ok(())
    }

    /// Refuses an element nested too deep, and a root that is not `<OAI-PMH>`.
    fn check_nesting(&mut self, qname: &str, name: &str) -> Result<(), String> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(format!("elements nested deeper than {MAX_DEPTH}"));
        }
        if self.stack.is_empty() {
            if self.seen_root || name != "OAI-PMH" {
                return Err(format!(
                    "the root element is <{qname}>, not <OAI-PMH>: not an OAI-PMH response (is \
                     the URL the repository's base URL?)"
                ));
            }
            self.seen_root = true;
        }
        Ok(())
    }

    /// The element that `<metadata>` holds starts: the subtree to cut out as the record's
    /// document.
    fn start_cut(
        &mut self,
        e: &BytesStart<'_>,
        before: u64,
        depth: usize,
        own: HashSet<String>,
        declares_default: bool,
    ) -> Result<(), String> {
        if let Some(rec) = self.record.as_mut() {
            if rec.metadata.is_some() {
                rec.problem = Some("<metadata> holds more than one element".into());
            }
        }
        let qname = e.name().0;
        let mut used = HashSet::new();
        note_used(&mut used, e, &self.bindings)?;
        self.cut = Some(Cut {
            start: before as usize,
            name_len: qname.len(),
            depth,
            own,
            used,
            uses_outer_default: prefix_of(qname).is_none() && !declares_default,
            default_inside: vec![declares_default],
        });
        Ok(())
    }

    /// An element of the envelope starts: the field whose text to keep, a record, its header.
    fn start_envelope(
        &mut self,
        e: &BytesStart<'_>,
        name: &str,
        depth: usize,
    ) -> Result<(), String> {
        let parent = self.stack.last().map(String::as_str).unwrap_or("");
        self.field = Field::None;
        self.text.clear();
        match (parent, name) {
            ("OAI-PMH", "responseDate") => self.field = Field::ResponseDate,
            ("OAI-PMH", "error") => {
                self.field = Field::Error;
                self.error_code = attr(e, "code")?.unwrap_or_default();
            }
            ("ListRecords" | "GetRecord", "record") => {
                self.record = Some(Record {
                    identifier: String::new(),
                    datestamp: String::new(),
                    deleted: false,
                    metadata: None,
                    problem: None,
                });
            }
            ("record", "header") => {
                if let Some(rec) = self.record.as_mut() {
                    rec.deleted = attr(e, "status")?.as_deref() == Some("deleted");
                }
            }
            ("header", "identifier") => self.field = Field::Identifier,
            ("header", "datestamp") => self.field = Field::Datestamp,
            ("record", "metadata") => self.in_metadata = Some(depth),
            ("ListRecords" | "ListIdentifiers", "resumptionToken") => {
                self.field = Field::Token;
            }
            ("Identify", "granularity") => self.field = Field::Granularity,
            ("Identify", "deletedRecord") => self.field = Field::DeletedRecord,
            _ => {}
        }
        Ok(())
    }

    /// The element at `depth` ends: popped (a metadata cut made a document), its field kept.
    fn end(&mut self, r: &mut Reader<&[u8]>, depth: usize) -> Result<(), XmlError> {
        let mut at = At {
            body: self.body,
            stack: &mut self.stack,
            bindings: &mut self.bindings,
            taken: &mut self.taken,
            limits: self.limits,
        };
        close(&mut at, r, &mut self.cut, &mut self.record)?;
        end_field(
            &mut self.field,
            &mut self.text,
            &mut self.out,
            &mut self.record,
            &self.error_code,
            &mut self.in_metadata,
            depth,
        );
        Ok(())
    }
}

/// The text of a character or entity reference: XML's five entities only.
fn resolve_ref(g: &quick_xml::events::BytesRef<'_>) -> Result<String, String> {
    match g.resolve_char_ref() {
        Ok(Some(c)) => Ok(c.to_string()),
        Ok(None) => match quick_xml::escape::resolve_predefined_entity(g) {
            Some(s) => Ok(s.to_owned()),
            None => Err(format!(
                "entity &{}; is not defined (no entity is expanded but XML's five)",
                &**g
            )),
        },
        Err(e) => Err(format!("character reference: {e}")),
    }
}

fn push_text(text: &mut String, s: &str) -> Result<(), String> {
    if text.len() + s.len() > MAX_FIELD {
        return Err(format!("a field longer than {MAX_FIELD} bytes"));
    }
    text.push_str(s);
    Ok(())
}

/// The reader's state [`close`] needs.
struct At<'a, 'b> {
    body: &'a str,
    stack: &'b mut Vec<String>,
    bindings: &'b mut Bindings,
    /// Bytes of record documents made from this response so far.
    taken: &'b mut u64,
    limits: Limits,
}

/// Pops the element just ended; when it is the root of a metadata cut, makes the document.
fn close(
    at: &mut At<'_, '_>,
    r: &mut Reader<&[u8]>,
    cut: &mut Option<Cut>,
    record: &mut Option<Record>,
) -> Result<(), XmlError> {
    let depth = at.stack.len();
    if let Some(c) = cut.as_mut() {
        c.default_inside.pop();
        if c.depth == depth {
            let c = cut
                .take()
                .ok_or_else(|| err_at(at.body, 0, "internal: no cut"))?;
            if record.as_ref().is_some_and(|r| r.deleted) {
                // A deleted record is a deletion whatever it carries (OAI-PMH 2.0 §2.5.1):
                // metadata sent with it is neither kept nor counted against the limits.
                at.stack.pop();
                at.bindings.pop();
                return Ok(());
            }
            let end = r.buffer_position() as usize;
            let doc = standalone(at, &c, end, record.as_ref())?;
            *at.taken += doc.len() as u64;
            if *at.taken > at.limits.response {
                return Err(limit_err(format!(
                    "the records of this response take more than maxResponseBytes={} bytes once \
                     made standalone documents (raise it, maxResponseBytes=N in the \
                     specification, if the repository's pages are that large)",
                    at.limits.response
                )));
            }
            if let Some(rec) = record.as_mut() {
                if rec.metadata.is_none() {
                    rec.metadata = Some(doc);
                }
            }
        }
    }
    at.stack.pop();
    at.bindings.pop();
    Ok(())
}

/// The standalone document of a cut ending at `end`: the declaration, the root's start with
/// the inherited declarations it uses (in prefix order, so a record unchanged gives the same
/// bytes), the rest as written; refused past the record cap before it is made whole.
fn standalone(
    at: &At<'_, '_>,
    c: &Cut,
    end: usize,
    record: Option<&Record>,
) -> Result<Vec<u8>, XmlError> {
    const DECL: &[u8] = b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    let max = at.limits.record;
    let too_large = || {
        let id = record.map_or("", |r| r.identifier.as_str());
        limit_err(format!(
            "the metadata of record {:?} is larger than maxRecordBytes={max} bytes as a \
             standalone document (raise it, maxRecordBytes=N in the specification, if the \
             repository's records are that large)",
            id.chars().take(200).collect::<String>()
        ))
    };
    let raw = &at.body.as_bytes()[c.start..end];
    if (DECL.len() + raw.len() + 1) as u64 > max {
        return Err(too_large());
    }
    // The declarations in scope at the root's end are the inherited ones but for the root's
    // own, which are left as written.
    let mut wanted: Vec<&str> = c
        .used
        .iter()
        .map(String::as_str)
        .filter(|p| !c.own.contains(*p))
        .collect();
    if c.uses_outer_default && !c.own.contains("") {
        wanted.push("");
    }
    wanted.sort_unstable();
    let mut doc = Vec::with_capacity(DECL.len() + raw.len() + 1);
    doc.extend_from_slice(DECL);
    doc.extend_from_slice(&raw[..1 + c.name_len]);
    for p in wanted {
        let Some(uri) = at.bindings.uri(p) else {
            continue;
        };
        let esc = quick_xml::escape::escape(uri);
        if p.is_empty() {
            doc.extend_from_slice(b" xmlns=\"");
        } else {
            doc.extend_from_slice(b" xmlns:");
            doc.extend_from_slice(p.as_bytes());
            doc.extend_from_slice(b"=\"");
        }
        doc.extend_from_slice(esc.as_bytes());
        doc.push(b'"');
        if (doc.len() + raw.len()) as u64 > max {
            return Err(too_large());
        }
    }
    doc.extend_from_slice(&raw[1 + c.name_len..]);
    doc.push(b'\n');
    Ok(doc)
}

/// Keeps the text of the field that ended at `depth`, or the record that ended.
fn end_field(
    field: &mut Field,
    text: &mut String,
    out: &mut Response,
    record: &mut Option<Record>,
    error_code: &str,
    in_metadata: &mut Option<usize>,
    depth: usize,
) {
    if *in_metadata == Some(depth) {
        *in_metadata = None;
        if let Some(rec) = record.as_mut() {
            if rec.metadata.is_none() && rec.problem.is_none() {
                rec.problem = Some("<metadata> holds no element".into());
            }
        }
    }
    let t = text.trim().to_owned();
    match std::mem::replace(field, Field::None) {
        Field::None => {}
        Field::ResponseDate => out.response_date = t,
        Field::Error => out.errors.push(OaiError {
            code: error_code.to_owned(),
            message: t,
        }),
        Field::Identifier => {
            if let Some(rec) = record.as_mut() {
                rec.identifier = t;
            }
        }
        Field::Datestamp => {
            if let Some(rec) = record.as_mut() {
                rec.datestamp = t;
            }
        }
        Field::Token => out.token = Some(t),
        Field::Granularity => out.granularity = Some(t),
        Field::DeletedRecord => out.deleted_record = Some(t),
    }
    text.clear();
    // A record ends at depth 3 (OAI-PMH / ListRecords / record).
    if depth == 3 {
        if let Some(rec) = record.take() {
            out.records.push(rec);
        }
    }
}

#[cfg(test)]
mod tests;
