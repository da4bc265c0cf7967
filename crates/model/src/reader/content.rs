//! Element content shared by the header and the entries: text content, elements skipped, the
//! findings about misplaced elements and text, and the per-element children limit.

use std::io::Read;

use super::DocumentReader;
use super::tokens::{Name, Tok, is_xml_space, qname_of};
use crate::document::{Position, Root};
use crate::error::{Error, LimitKind};
use crate::rules;

impl<R: Read> DocumentReader<R> {
    pub(super) fn check_children(&self, n: usize, pos: Position) -> Result<(), Error> {
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

    pub(super) fn check_entry_element(&mut self, name: &Name, pos: Position) {
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

    pub(super) fn unknown_element(&mut self, name: &Name, qname: &str, pos: Position) {
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

    pub(super) fn stray_text(&mut self, text: &str, pos: Position) {
        if !is_xml_space(text) {
            let snippet: String = text.trim().chars().take(40).collect();
            self.findings
                .push(rules::SM_TEXT, pos, format!("unexpected text {snippet:?}"));
        }
    }

    pub(super) fn expect_empty(
        &mut self,
        empty: bool,
        pos: Position,
        what: &str,
    ) -> Result<(), Error> {
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
    pub(super) fn skip(&mut self, empty: bool) -> Result<(), Error> {
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
    pub(super) fn text(&mut self, empty: bool, what: &str) -> Result<String, Error> {
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
                    name,
                    empty,
                    extra,
                    pos,
                    ..
                } => {
                    let qname = qname_of(&name, &extra);
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
}

/// Trims XML white space (XML 1.0 §2.3 [3]).
pub(super) fn trim_xml(s: &str) -> &str {
    s.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'))
}
