//! The attributes of `<rs:md>` and `<rs:ln>` (Z39.99-2014 §7, Appendix A), read into
//! [`Metadata`] and [`Link`]; values that cannot be read become findings, and extension
//! attributes are kept with their namespace.

use std::io::Read;

use super::DocumentReader;
use super::tokens::Attr;
use crate::datetime::W3cDateTime;
use crate::document::{Capability, Change, ExtAttr, Link, Metadata, Position, RS_NS, Unreadable};
use crate::hash::Hashes;
use crate::rules;

impl<R: Read> DocumentReader<R> {
    /// Turns an attribute outside ResourceSync's set into an extension attribute, or reports it.
    pub(super) fn foreign_attr(
        &mut self,
        a: Attr,
        pos: Position,
        element: &str,
    ) -> Option<ExtAttr> {
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
        // The digests' buffers of an earlier entry, reused (see `pool`).
        let mut h = self.pool.hashes();
        let mut bad = Vec::new();
        h.parse_into(&a.value, &mut bad);
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
            self.pool.give_hashes(h);
            None
        } else {
            Some(h)
        }
    }

    fn length(&mut self, a: &Attr, pos: Position) -> Option<u64> {
        // The usual value, digits only and short enough not to overflow, read by bytes.
        let b = a.value.as_bytes();
        if (1..=19).contains(&b.len()) && b.iter().all(u8::is_ascii_digit) {
            return Some(b.iter().fold(0, |n, &d| n * 10 + u64::from(d - b'0')));
        }
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

    pub(super) fn metadata(&mut self, attrs: Vec<Attr>, pos: Position) -> Metadata {
        let mut md = Metadata::default();
        self.metadata_into(&mut md, attrs, pos);
        md
    }

    /// [`metadata`](Self::metadata) into an empty `Metadata` the caller holds (an entry's,
    /// filled in place rather than moved into it).
    pub(super) fn metadata_into(&mut self, md: &mut Metadata, mut attrs: Vec<Attr>, pos: Position) {
        for mut a in attrs.drain(..) {
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
                "type" => md.mime_type = Some(std::mem::take(&mut a.value)),
                "encoding" => md.encoding = Some(std::mem::take(&mut a.value)),
                "path" => md.path = Some(std::mem::take(&mut a.value)),
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
            self.pool.give_string(a.value);
        }
        self.pool.give_attrs(attrs);
    }

    pub(super) fn link(&mut self, mut attrs: Vec<Attr>, pos: Position) -> Option<Link> {
        let mut l = Link::default();
        let (mut has_rel, mut has_href) = (false, false);
        for mut a in attrs.drain(..) {
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
                "type" => l.mime_type = Some(std::mem::take(&mut a.value)),
                "encoding" => l.encoding = Some(std::mem::take(&mut a.value)),
                "path" => l.path = Some(std::mem::take(&mut a.value)),
                "profile" => l.profile = Some(std::mem::take(&mut a.value)),
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
            self.pool.give_string(a.value);
        }
        self.pool.give_attrs(attrs);
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

#[cfg(test)]
mod tests {
    use crate::{DocumentReader, ReadOptions};

    /// `length`, digits read by bytes or by `parse`: the value, or a finding and none.
    #[test]
    fn lengths_are_non_negative_integers() {
        for (v, want) in [
            ("0", Some(0)),
            ("007", Some(7)),
            ("9999999999999999999", Some(9_999_999_999_999_999_999)),
            ("18446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            (" 5 ", Some(5)),
            ("+5", None),
            ("-1", None),
            ("", None),
            ("5x", None),
            ("\u{663}", None),
        ] {
            let doc = format!(
                "<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9' \
                 xmlns:rs='http://www.openarchives.org/rs/terms/'>\
                 <rs:md capability='resourcelist'/>\
                 <url><loc>http://e.com/a</loc><rs:md length='{v}'/></url></urlset>"
            );
            let mut r =
                DocumentReader::new(doc.as_bytes(), ReadOptions::named("d")).expect("header");
            let e = r.next_entry().expect("entry").expect("an entry");
            assert_eq!(e.length(), want, "{v:?}");
            assert_eq!(r.findings().is_empty(), want.is_some(), "{v:?}");
        }
    }
}
