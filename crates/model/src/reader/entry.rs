//! The entries: `<url>` (or `<sitemap>`) elements one at a time, and what may come between
//! them inside the root.

use std::io::Read;

use super::content::trim_xml;
use super::tokens::{Attr, Name, Tok, qname_of};
use super::{DocumentReader, State};
use crate::datetime::W3cDateTime;
use crate::document::{ChangeFreq, Entry, ExtElement, Metadata, Position};
use crate::error::Error;
use crate::rules;

impl<R: Read> DocumentReader<R> {
    /// Reads the next entry into `e` (reset first, its `<loc>` buffer kept); `false` at the
    /// end of the document.
    pub(super) fn next_entry_inner(&mut self, e: &mut Entry) -> Result<bool, Error> {
        loop {
            if self.state == State::InRoot && self.fast_entry(e)? {
                self.entries += 1;
                return Ok(true);
            }
            match self.state {
                State::Done => return Ok(false),
                State::AtEntry { pos, empty } => {
                    self.state = State::InRoot;
                    self.reset_entry(e, pos);
                    self.entry(e, empty)?;
                    self.entries += 1;
                    return Ok(true);
                }
                State::InRoot => match self.next_tok()? {
                    Tok::Start {
                        name,
                        empty,
                        pos,
                        attrs,
                        extra,
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
                            let qname = qname_of(&name, &extra);
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
                                extra,
                                pos,
                            })?;
                        }
                        other => {
                            self.unknown_element(&other, qname_of(&other, &extra), pos);
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

    fn entry(&mut self, e: &mut Entry, empty: bool) -> Result<(), Error> {
        let mut seen_loc = false;
        let mut children = 0usize;
        if !empty {
            loop {
                match self.next_tok()? {
                    Tok::Start {
                        name,
                        empty,
                        attrs,
                        extra,
                        pos: cpos,
                    } => match name {
                        Name::Loc => {
                            let t = self.text(empty, "loc")?;
                            self.entry_loc(e, &t, cpos, &mut seen_loc);
                            self.pool.give_string(t);
                        }
                        Name::Lastmod => {
                            let t = self.text(empty, "lastmod")?;
                            self.entry_lastmod(e, &t, cpos);
                            self.pool.give_string(t);
                        }
                        Name::Changefreq => {
                            let t = self.text(empty, "changefreq")?;
                            self.entry_changefreq(e, &t, cpos);
                        }
                        Name::Priority => {
                            let t = self.text(empty, "priority")?;
                            e.priority = Some(t.trim().to_owned());
                        }
                        Name::RsMd => {
                            self.entry_md(e, attrs, cpos);
                            self.expect_empty(empty, cpos, "rs:md")?;
                        }
                        Name::RsLn => {
                            children += 1;
                            self.check_children(children, cpos)?;
                            self.entry_ln(e, attrs, cpos);
                            self.expect_empty(empty, cpos, "rs:ln")?;
                        }
                        Name::Foreign(ns) => {
                            children += 1;
                            self.check_children(children, cpos)?;
                            let xml = self.capture(Tok::Start {
                                name: Name::Foreign(ns.clone()),
                                empty,
                                attrs,
                                extra,
                                pos: cpos,
                            })?;
                            e.extensions.push(ExtElement { namespace: ns, xml });
                        }
                        other => {
                            self.unknown_element(&other, qname_of(&other, &extra), cpos);
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
        self.entry_end(e);
        Ok(())
    }

    /// Empties `e` for the entry at `pos`: its `<loc>` buffer kept, those of its `<rs:md>`
    /// given to the pool for the next one's.
    pub(super) fn reset_entry(&mut self, e: &mut Entry, pos: Position) {
        let mut loc = std::mem::take(&mut e.loc);
        loc.clear();
        if let Some(md) = e.md.as_mut() {
            self.pool.give_metadata(md);
        }
        *e = Entry {
            loc,
            position: pos,
            ..Entry::default()
        };
    }

    // The handling of each child once read, shared by `entry` and the fast path (`fast`), so
    // that both turn the same child into the same fields and findings.

    /// An entry's `<loc>` text.
    pub(super) fn entry_loc(&mut self, e: &mut Entry, t: &str, cpos: Position, seen: &mut bool) {
        if *seen {
            self.findings.push(
                rules::SM_DUPLICATE_CHILD,
                cpos,
                "more than one <loc> in an entry",
            );
        } else {
            let t = trim_xml(t);
            match self
                .opts
                .iris_as_uris
                .then(|| crate::mapping::iri_to_uri(t))
                .flatten()
            {
                Some(uri) => {
                    e.loc.push_str(&uri);
                    self.iris += 1;
                }
                None => e.loc.push_str(t),
            }
            *seen = true;
        }
    }

    /// An entry's `<lastmod>` text.
    pub(super) fn entry_lastmod(&mut self, e: &mut Entry, t: &str, cpos: Position) {
        if e.lastmod.is_some() {
            self.findings.push(
                rules::SM_DUPLICATE_CHILD,
                cpos,
                "more than one <lastmod> in an entry",
            );
        }
        match W3cDateTime::parse(t.trim()) {
            Ok(v) => e.lastmod = Some(v),
            Err(err) => self
                .findings
                .push(rules::SM_LASTMOD, cpos, format!("<lastmod>: {err}")),
        }
    }

    /// An entry's `<changefreq>` text.
    pub(super) fn entry_changefreq(&mut self, e: &mut Entry, t: &str, cpos: Position) {
        let cf = ChangeFreq::parse(t);
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

    /// An entry's `<rs:md>` attributes.
    pub(super) fn entry_md(&mut self, e: &mut Entry, attrs: Vec<Attr>, cpos: Position) {
        if e.md.is_some() {
            // Read for its findings, then dropped.
            self.metadata(attrs, cpos);
            self.findings
                .push(rules::SM_DUPLICATE_CHILD, cpos, "<rs:md> is not repeatable");
        } else {
            let md = e.md.insert(Metadata::default());
            self.metadata_into(md, attrs, cpos);
        }
    }

    /// An entry's `<rs:ln>` attributes (its count already checked).
    pub(super) fn entry_ln(&mut self, e: &mut Entry, attrs: Vec<Attr>, cpos: Position) {
        if let Some(l) = self.link(attrs, cpos) {
            e.links.push(l);
        }
    }

    /// The entry has ended.
    pub(super) fn entry_end(&mut self, e: &Entry) {
        if e.loc.is_empty() {
            self.findings
                .push(rules::SM_LOC_MANDATORY, e.position, "entry without a <loc>");
        }
    }
}
