//! The token layer: quick-xml events turned into owned tokens ([`Tok`]), with element names
//! classified by namespace ([`Name`]) and attributes resolved ([`Attr`]), and the checks the XML
//! parser does not make: characters XML 1.0 §2.2 forbids, raw `<` in attribute values, white
//! space between attributes, undefined entities, DTDs, the XML declaration and processing
//! instructions (see `prolog`), depth.

use std::borrow::Cow;
use std::io::Read;

use quick_xml::events::{BytesDecl, BytesRef, BytesStart, BytesText, Event};
use quick_xml::name::{PrefixDeclaration, ResolveResult};

use super::{DocumentReader, prolog};
use crate::document::{Position, RS_NS, SITEMAP_NS};
use crate::error::{Error, LimitKind};

/// What an element is, by namespace and local name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Name {
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
pub(super) struct Attr {
    /// The prefix as written, if any.
    pub(super) prefix: Option<String>,
    /// Namespace: `None` when unprefixed.
    pub(super) ns: Option<String>,
    /// Local name.
    pub(super) local: Cow<'static, str>,
    /// Unescaped, normalized value.
    pub(super) value: String,
}

impl Attr {
    pub(super) fn qname(&self) -> String {
        match &self.prefix {
            Some(p) => format!("{p}:{}", self.local),
            None => self.local.to_string(),
        }
    }
}

/// The parts of a start tag only some elements have (see [`Tok::Start`]).
#[derive(Debug, Default)]
pub(super) struct StartExtra {
    /// Namespace declarations on the element as (prefix, uri).
    pub(super) decls: Vec<(String, String)>,
    /// `<qname raw-attributes` for elements being captured.
    pub(super) raw: Option<String>,
    /// The element's namespace URI, for elements being captured and the root.
    pub(super) ns: Option<String>,
    /// The name as written, for elements not defined here and those being captured.
    pub(super) qname: Option<String>,
}

/// The name of an element as written: kept for the elements not defined here and those
/// being captured, the defined name otherwise.
pub(super) fn qname_of<'a>(name: &'a Name, extra: &'a Option<Box<StartExtra>>) -> &'a str {
    match extra.as_deref().and_then(|x| x.qname.as_deref()) {
        Some(q) => q,
        None => name.static_name(),
    }
}

#[derive(Debug)]
pub(super) enum Tok {
    Start {
        name: Name,
        empty: bool,
        attrs: Vec<Attr>,
        /// What few elements need (declarations, captured or unknown elements, the root),
        /// boxed so that the token every element and text run moves stays small.
        extra: Option<Box<StartExtra>>,
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

impl<R: Read> DocumentReader<R> {
    /// Reads the next token, converted to owned values.
    pub(super) fn next_tok(&mut self) -> Result<Tok, Error> {
        let pos = self.here();
        {
            let c = self.xml.get_mut();
            c.token_start = c.offset;
        }
        // The scope of the previous element, if it ended, closes before the next event.
        if self.pending_pop {
            self.ns.pop();
            self.pending_pop = false;
        }
        self.xml_between_markup = false;
        // The event borrows the buffer: it is out of `self` while the event is turned into a
        // token, and goes back (with its capacity) whatever the outcome.
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let tok = self.tok_from(&mut buf, pos);
        self.buf = buf;
        tok
    }

    /// Reads one event into `buf` and turns it into a token, one step per kind of event.
    #[inline]
    fn tok_from(&mut self, buf: &mut Vec<u8>, pos: Position) -> Result<Tok, Error> {
        let ev = match self.xml.read_event_into(buf) {
            Ok(ev) => ev,
            Err(e) => return Err(self.convert_xml_error(e, pos)),
        };
        // Whether this is the document's first token (only a byte order mark, which the XML
        // parser skips, may come before it): every token before it consumed at least one byte.
        let first = self.xml.get_ref().token_start == 0;
        match ev {
            Event::Start(e) => self.start_tok(&e, false, pos),
            Event::Empty(e) => self.start_tok(&e, true, pos),
            Event::End(_) => {
                self.xml_between_markup = true;
                self.pending_pop = true;
                self.depth = self.depth.saturating_sub(1);
                Ok(Tok::End { pos })
            }
            Event::Text(t) => self.text_tok(&t, pos),
            Event::CData(t) => {
                let text = t.xml_content(self.xml_version).into_owned();
                self.check_chars(&text, pos)?;
                Ok(Tok::Text { text, pos })
            }
            Event::GeneralRef(r) => self.reference_tok(&r, pos),
            Event::DocType(_) => Err(Error::Forbidden {
                doc: self.doc.clone(),
                pos,
                message: "document type declarations (<!DOCTYPE>) are not allowed; entities are never expanded".into(),
            }),
            Event::Decl(d) => self.decl_tok(&d, first, pos),
            Event::PI(p) => match prolog::check_pi_target(p.target(), first) {
                Ok(()) => Ok(Tok::Other),
                Err(message) => Err(self.err_malformed(pos, message)),
            },
            Event::Comment(_) => Ok(Tok::Other),
            Event::Eof => Ok(Tok::Eof { pos }),
        }
    }

    /// A start or empty-element tag: its namespace scope, its name, its attributes when they
    /// are wanted, the depth, and what only some elements keep ([`StartExtra`]).
    #[inline]
    fn start_tok(&mut self, e: &BytesStart<'_>, empty: bool, pos: Position) -> Result<Tok, Error> {
        self.xml_between_markup = true;
        self.open_scope(e, empty, pos)?;
        let (name, elem_ns) = self.element_name(e, pos)?;
        let qname = e.name();
        let keep_qname = capture_all(self.capturing, &name);
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
        let raw = capture.then(|| {
            let a = e.attributes_raw();
            format!("<{}{}", qname.as_ref(), a)
        });
        let mut attrs = Vec::new();
        let mut decls = Vec::new();
        if want_attrs && !is_xml_space(e.attributes_raw()) {
            attrs = self.pool.attrs();
            self.read_attributes(e, pos, &mut attrs, &mut decls)?;
        }
        self.enter(empty, pos)?;
        let extra =
            (keep_qname || !decls.is_empty() || raw.is_some() || elem_ns.is_some()).then(|| {
                Box::new(StartExtra {
                    decls,
                    raw,
                    ns: elem_ns,
                    qname: keep_qname.then(|| qname.as_ref().to_owned()),
                })
            });
        Ok(Tok::Start {
            name,
            empty,
            attrs,
            extra,
            pos,
        })
    }

    /// Opens the element's namespace scope (XML Namespaces 1.0 §6.1): its declarations are
    /// read from the attributes only when there is one, else the scope is empty. An empty
    /// element's scope closes before the next event.
    #[inline]
    fn open_scope(&mut self, e: &BytesStart<'_>, empty: bool, pos: Position) -> Result<(), Error> {
        let pushed = if declares_namespace(e.attributes_raw()) {
            self.ns_cache.declared();
            self.ns.push(e)
        } else {
            self.ns.push(&BytesStart::from_content("", 0))
        };
        self.pending_pop = empty;
        if let Err(err) = pushed {
            return Err(self.convert_xml_error(err.into(), pos));
        }
        Ok(())
    }

    /// The element's name resolved in the scope and classified, after the checks on its
    /// prefix and attribute text; and its namespace URI, kept for captured elements and for
    /// the root (named in SM-root errors).
    #[inline]
    fn element_name(
        &mut self,
        e: &BytesStart<'_>,
        pos: Position,
    ) -> Result<(Name, Option<String>), Error> {
        let qname = e.name();
        let (ns, local) = self.ns.resolve_element(qname);
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
        let class = match &ns {
            ResolveResult::Bound(n) => self.ns_cache.class(n.as_ref()),
            _ => NsClass::None,
        };
        let name = classify(class, &ns, local.as_ref(), qname.as_ref());
        let capture = self.capturing || matches!(name, Name::Foreign(_));
        let elem_ns = match (&ns, capture || self.depth == 0) {
            (ResolveResult::Bound(n), true) => Some(ns_value(n.as_ref()).into_owned()),
            _ => None,
        };
        Ok((name, elem_ns))
    }

    /// The attributes of a start tag: namespace declarations into `decls`, the others,
    /// resolved, into `attrs`; values normalized and checked for characters XML 1.0 forbids.
    fn read_attributes(
        &mut self,
        e: &BytesStart<'_>,
        pos: Position,
        attrs: &mut Vec<Attr>,
        decls: &mut Vec<(String, String)>,
    ) -> Result<(), Error> {
        for a in e.attributes() {
            let a = match a {
                Ok(a) => a,
                Err(err) => {
                    return Err(self.err_malformed(pos, format!("bad attribute: {err}")));
                }
            };
            let value = match a.normalized_value(self.xml_version) {
                Ok(Cow::Owned(v)) => v,
                Ok(Cow::Borrowed(v)) => self.pool.string_from(v),
                Err(err) => return Err(self.convert_xml_error(err, pos)),
            };
            self.check_chars(&value, pos)?;
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
            let (ans, alocal) = self.ns.resolve_attribute(a.key);
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
        Ok(())
    }

    /// One level deeper for a start tag that is not empty, within `max_depth`.
    #[inline]
    fn enter(&mut self, empty: bool, pos: Position) -> Result<(), Error> {
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
        Ok(())
    }

    /// Character data: white space between elements, or a text.
    #[inline]
    fn text_tok(&mut self, t: &BytesText<'_>, pos: Position) -> Result<Tok, Error> {
        let text = t.xml_content(self.xml_version);
        self.check_chars(&text, pos)?;
        if !self.capturing && !self.in_text && is_xml_space(&text) {
            Ok(Tok::Space)
        } else {
            let text = match text {
                Cow::Owned(t) => t,
                Cow::Borrowed(t) => self.pool.string_from(t),
            };
            Ok(Tok::Text { text, pos })
        }
    }

    /// A character reference or one of the five predefined entities, as text; any other
    /// entity is refused (no DTD defines one).
    fn reference_tok(&mut self, r: &BytesRef<'_>, pos: Position) -> Result<Tok, Error> {
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
            Ok(None) => match quick_xml::escape::resolve_predefined_entity(r) {
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
        Ok(Tok::Text { text, pos })
    }

    /// The XML declaration. XML 1.0 §2.8 [22], [23]: one declaration, first in the document
    /// (only a byte order mark may precede it), following its productions.
    fn decl_tok(&mut self, d: &BytesDecl<'_>, first: bool, pos: Position) -> Result<Tok, Error> {
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
        if let Err((at, message)) = prolog::check_declaration(d) {
            let pos = position_in_first_token(self.xml.get_ref().offset, d, at);
            return Err(self.err_malformed(pos, message));
        }
        if let Ok(v) = d.xml_version() {
            self.xml_version = v;
        }
        let encoding = d.encoding().and_then(Result::ok).map(|e| e.into_owned());
        Ok(Tok::Decl { encoding, pos })
    }

    /// No character XML 1.0 §2.2 forbids in a text or attribute value.
    #[inline]
    fn check_chars(&self, s: &str, pos: Position) -> Result<(), Error> {
        match forbidden_char(s) {
            None => Ok(()),
            Some(c) => Err(self.err_malformed(
                pos,
                format!("character U+{c:04X} is not allowed in XML 1.0 (§2.2)"),
            )),
        }
    }
}

/// The attribute names ResourceSync defines (Z39.99-2014 §7, Appendix A), shared rather than
/// allocated per attribute; one match, compiled to a dispatch on the bytes.
pub(super) fn intern_attr(local: &str) -> Cow<'static, str> {
    Cow::Borrowed(match local {
        "capability" => "capability",
        "at" => "at",
        "completed" => "completed",
        "from" => "from",
        "until" => "until",
        "change" => "change",
        "datetime" => "datetime",
        "hash" => "hash",
        "length" => "length",
        "type" => "type",
        "encoding" => "encoding",
        "path" => "path",
        "rel" => "rel",
        "href" => "href",
        "pri" => "pri",
        "modified" => "modified",
        "profile" => "profile",
        other => return Cow::Owned(other.to_owned()),
    })
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

/// Whether the raw attribute text of a tag may declare a namespace: it has `xmlns` in it
/// (every declaration's name starts so, XML Namespaces 1.0 §3). Most tags have no attributes.
fn declares_namespace(raw: &str) -> bool {
    let b = raw.as_bytes();
    memchr::memchr_iter(b'x', b).any(|i| b[i..].starts_with(b"xmlns"))
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

/// Which namespace an element is in, as far as the reader cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NsClass {
    /// No namespace, or an undeclared prefix.
    None,
    Sitemap,
    ResourceSync,
    Other,
}

/// Slots of [`NsCache`]: a document uses the Sitemap and ResourceSync namespaces and maybe an
/// extension or two.
const NS_SLOTS: usize = 4;

/// What the namespaces last resolved are, so that an element's namespace URI is normalized and
/// compared once per declaration rather than once per element (XML Namespaces 1.0 §6).
///
/// The resolver returns each namespace as a slice of its own buffer, which changes only when a
/// declaration is added: a slot is the slice's address and length, valid for the generation
/// of declarations it was made in (a scope closing truncates the buffer, which changes no
/// byte before the end).
#[derive(Debug, Default)]
pub(super) struct NsCache {
    generation: u64,
    slots: [Option<(u64, usize, usize, NsClass)>; NS_SLOTS],
    next: usize,
}

impl NsCache {
    /// Changes whenever a declaration is added.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// A declaration was added: every slot is stale.
    pub(super) fn declared(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// The class of a namespace URI as the resolver holds it.
    pub(super) fn class(&mut self, raw: &str) -> NsClass {
        let key = (self.generation, raw.as_ptr() as usize, raw.len());
        for (g, p, l, c) in self.slots.iter().flatten() {
            if (*g, *p, *l) == key {
                return *c;
            }
        }
        let uri = ns_value(raw);
        let class = if uri == SITEMAP_NS {
            NsClass::Sitemap
        } else if uri == RS_NS {
            NsClass::ResourceSync
        } else {
            NsClass::Other
        };
        self.slots[self.next] = Some((key.0, key.1, key.2, class));
        self.next = (self.next + 1) % NS_SLOTS;
        class
    }
}

fn classify(class: NsClass, ns: &ResolveResult<'_>, local: &str, qname: &str) -> Name {
    match class {
        NsClass::Sitemap => match local {
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
        NsClass::ResourceSync => match local {
            "md" => Name::RsMd,
            "ln" => Name::RsLn,
            _ => Name::Unknown(qname.to_owned()),
        },
        NsClass::Other => match ns {
            ResolveResult::Bound(n) => Name::Foreign(ns_value(n.as_ref()).into_owned()),
            _ => Name::Unknown(qname.to_owned()),
        },
        NsClass::None => Name::Unknown(qname.to_owned()),
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

/// The first character XML 1.0 §2.2 does not allow (C0 controls other than tab, LF, CR;
/// U+FFFE, U+FFFF), if any. Runs over every text and attribute value, so it scans bytes.
fn forbidden_char(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    // One branch-free pass (vectorizes) for both suspects, a control byte or the lead byte of
    // U+FFFE/U+FFFF; the exact search only when one is there.
    let (control, ef) = b.iter().fold((false, false), |(ctl, ef), &c| {
        (ctl | (c < 0x20), ef | (c == 0xEF))
    });
    if control {
        if let Some(&c) = b
            .iter()
            .find(|&&c| c < 0x20 && c != b'\t' && c != b'\n' && c != b'\r')
        {
            return Some(u32::from(c));
        }
    }
    if ef {
        return s
            .chars()
            .find(|&c| c == '\u{FFFE}' || c == '\u{FFFF}')
            .map(|c| c as u32);
    }
    None
}

pub(super) fn is_xml_space(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}
