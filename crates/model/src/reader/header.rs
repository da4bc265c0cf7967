//! The document header: the prolog up to the root element, the root (`<urlset>` or
//! `<sitemapindex>`, Z39.99-2014 §7), its `<rs:md>`, `<rs:ln>` and extension elements up to the
//! first entry; what may follow the root; and the error for a root that is not a Sitemap's.

use std::io::Read;

use super::tokens::{Attr, Name, StartExtra, Tok, is_xml_space, qname_of};
use super::{DocumentReader, State};
use crate::document::{ExtElement, Position, RS_NS, Root, SITEMAP_NS};
use crate::error::Error;
use crate::rules;

/// The root element's start tag, where the prolog ends.
struct RootStart {
    name: Name,
    attrs: Vec<Attr>,
    decls: Vec<(String, String)>,
    pos: Position,
    empty: bool,
    /// The name as written.
    qname: String,
    /// The namespace URI.
    ns: Option<String>,
}

impl<R: Read> DocumentReader<R> {
    /// Reads the header: the prolog, the root element, and its children up to the first entry
    /// (or the end of an entry-less root, and what follows it).
    pub(super) fn read_header(&mut self) -> Result<(), Error> {
        let root = self.read_prolog()?;
        let empty = root.empty;
        self.take_root(root)?;
        if empty {
            self.state = State::Done;
            self.finish_root()?;
            return Ok(());
        }
        self.read_root_children()
    }

    /// The prolog up to the root element: the XML declaration's encoding (documents are
    /// UTF-8), comments, processing instructions and white space.
    fn read_prolog(&mut self) -> Result<RootStart, Error> {
        loop {
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
                    pos,
                    empty,
                    extra,
                } => {
                    let qname = qname_of(&name, &extra).to_owned();
                    let x = extra.map(|x| *x).unwrap_or_default();
                    return Ok(RootStart {
                        name,
                        attrs,
                        decls: x.decls,
                        pos,
                        empty,
                        qname,
                        ns: x.ns,
                    });
                }
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
        }
    }

    /// The root element (Z39.99-2014 §7): `<urlset>` or `<sitemapindex>`, its namespace
    /// declarations and its attributes from other namespaces.
    fn take_root(&mut self, root: RootStart) -> Result<(), Error> {
        self.header.root = match root.name {
            Name::UrlSet => Root::UrlSet,
            Name::SitemapIndex => Root::SitemapIndex,
            _ => {
                let message = root_message(&root.qname, root.ns.as_deref());
                return Err(self.not_sitemap_rest(root.empty, root.pos, message));
            }
        };
        self.header_pos = root.pos;
        // Written documents always bind the default namespace to Sitemap's and `rs` to
        // ResourceSync's; other bindings of those two are carried by the fragments using them.
        self.header.namespaces = root
            .decls
            .into_iter()
            .filter(|(p, uri)| {
                uri != SITEMAP_NS && uri != RS_NS && !p.is_empty() && p != "rs" && p != "xmlns"
            })
            .collect();
        for a in root.attrs {
            if let Some(x) = self.foreign_attr(a, root.pos, "root") {
                self.header.extra.push(x);
            }
        }
        Ok(())
    }

    /// The root's children up to the first entry: its `<rs:md>`, `<rs:ln>`s and extension
    /// elements; or, for a root without entries, up to its end and what follows it.
    fn read_root_children(&mut self) -> Result<(), Error> {
        let mut children = 0usize;
        loop {
            match self.next_tok()? {
                Tok::Start {
                    name,
                    empty,
                    attrs,
                    extra,
                    pos,
                } => {
                    if matches!(name, Name::Url | Name::Sitemap) {
                        self.check_entry_element(&name, pos);
                        self.state = State::AtEntry { pos, empty };
                        return Ok(());
                    }
                    children = self.root_child(name, empty, attrs, extra, pos, children)?;
                }
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

    /// A child of the root before the first entry: its `<rs:md>` (one), an `<rs:ln>`, an
    /// extension element, or an element not defined there. Returns the count of children
    /// bounded by `max_children`.
    fn root_child(
        &mut self,
        name: Name,
        empty: bool,
        attrs: Vec<Attr>,
        extra: Option<Box<StartExtra>>,
        pos: Position,
        mut children: usize,
    ) -> Result<usize, Error> {
        match name {
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
            Name::Foreign(ns) => {
                children += 1;
                self.check_children(children, pos)?;
                let xml = self.capture(Tok::Start {
                    name: Name::Foreign(ns.clone()),
                    empty,
                    attrs,
                    extra,
                    pos,
                })?;
                self.header
                    .extensions
                    .push(ExtElement { namespace: ns, xml });
            }
            other => {
                self.unknown_element(&other, qname_of(&other, &extra), pos);
                self.skip(empty)?;
            }
        }
        Ok(children)
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
    pub(super) fn finish_root(&mut self) -> Result<(), Error> {
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
