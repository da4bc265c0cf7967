//! The entry fast path: a hand-written one-pass scanner for the entries nearly every document is
//! made of, run on the bytes already buffered before the XML parser is asked for anything.
//!
//! Why hand-written, and why beside quick-xml rather than instead of it: measured on the
//! 50,000-entry Resource List of `benches/parse_write.rs`, quick-xml's tokenizing alone is 17 ms
//! and the general path on top of it (events turned into tokens, attributes resolved and
//! checked, namespaces, dispatch) 107 ms, 6× the floor; no crate tokenizes and checks in one
//! pass at that speed. An entry like
//!
//! ```xml
//! <url><loc>http://example.com/a</loc><lastmod>2013-01-02T13:00:00Z</lastmod>
//!   <rs:md hash="md5:..." length="512" type="text/plain"/></url>
//! ```
//!
//! is recognized here by byte comparisons (the end of each text and value found with `memchr`,
//! the bytes before it checked in one branch-free pass), its UTF-8 checked once, with no
//! per-token allocation.
//!
//! The scanner accepts only a strict subset of XML, every document in it well-formed with one
//! meaning, and hands anything else to the general path (quick-xml and `tokens`) untouched:
//! the whole entry, `<url>` (or `<sitemap>`) to its end tag, must be in the buffer and within
//! the byte limits; its children only `<loc>`, `<lastmod>`, `<changefreq>`, `<priority>`
//! (unprefixed, in the Sitemap namespace as the root declared it, no attributes, text without
//! `&`, `]`, CR, control characters, U+FFFE/U+FFFF or invalid UTF-8) and empty `<rs:md .../>` /
//! `<rs:ln .../>` (the `rs` prefix bound to ResourceSync; unprefixed, distinct attributes not
//! named `xml...`, quoted values without `<`, `>`, `&`, control characters, U+FFFE/U+FFFF or
//! invalid UTF-8, white space between them), separated by XML white space. Nothing is consumed
//! until the whole entry has been recognized; then its children go, in document order and with
//! the same positions, through the handlers the general path uses (`entry_loc`, `entry_md`...).
//! So every error, limit, DTD refusal, entity, CDATA section, comment, namespace declaration and
//! encoding question is the general path's, by construction; `reader::differential` tests
//! that both paths give the same entries, findings and errors on the fixtures, mutations of
//! them and large generated documents.
//!
//! The scanner runs only where the XML parser is between markup (after a start or end tag, so
//! that the bytes it skips leave the parser's state as the entry's end tag would), directly
//! inside the root (whose namespace scope is then the one in force), outside text and capture,
//! in an XML 1.0 document (1.1 normalizes more line ends).

use std::io::{BufRead, Read};

use quick_xml::XmlVersion;
use quick_xml::name::{QName, ResolveResult};

use super::DocumentReader;
use super::tokens::{Attr, Name, NsClass, intern_attr};
use crate::document::Entry;
use crate::error::Error;

/// Most children of one entry the scanner takes (more: the general path).
const MAX_CHILDREN: usize = 64;
/// Most attributes of one `<rs:md>` or `<rs:ln>` the scanner takes.
const MAX_ATTRS: usize = 16;
/// Largest entry text (capacity, bytes) kept from one entry to the next.
const MAX_KEPT_TEXT: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Loc,
    Lastmod,
    Changefreq,
    Priority,
    Md,
    Ln,
}

/// One child recognized: where its `<` is, and its text (`Loc`...) or its attributes (`Md`,
/// `Ln`: indexes into [`Scratch::attrs`]).
#[derive(Debug, Clone, Copy)]
struct Child {
    kind: Kind,
    at: usize,
    start: usize,
    end: usize,
    /// Just after the child's last tag.
    close: usize,
}

/// One attribute recognized: name and value, as byte ranges of the buffer.
#[derive(Debug, Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

/// The scanner's record of one entry, reused from entry to entry (bounded by [`MAX_CHILDREN`]
/// and [`MAX_ATTRS`]), and what it knows of the namespaces in force.
#[derive(Debug)]
pub(super) struct Scratch {
    /// Off only in tests (the general path alone, to compare with).
    pub(super) enabled: bool,
    /// Entries read by the fast path (tests check it is taken).
    pub(super) taken: u64,
    children: Vec<Child>,
    attrs: Vec<Span>,
    /// The entry's bytes as text.
    text: String,
    /// For the namespace generation (see `tokens::NsCache`) it was computed in: whether
    /// unprefixed elements are in the Sitemap namespace, and `rs:` in ResourceSync's.
    ns: Option<(u64, bool, bool)>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            enabled: true,
            taken: 0,
            children: Vec::new(),
            attrs: Vec::new(),
            text: String::new(),
            ns: None,
        }
    }
}

/// What the scanner found: the entry element, where its `<` is and where its end tag ends.
struct Found {
    sitemap: bool,
    at: usize,
    end: usize,
}

impl<R: Read> DocumentReader<R> {
    /// Reads the next entry by the fast path into `e` when it can (`true`: read, counted as
    /// the general path would); `false` with nothing consumed and nothing changed otherwise.
    pub(super) fn fast_entry(&mut self, e: &mut Entry) -> Result<bool, Error> {
        if !self.fast.enabled
            || !self.xml_between_markup
            || self.capturing
            || self.in_text
            || self.depth != 1
            || self.opts.max_depth < 3
            || matches!(self.xml_version, XmlVersion::Explicit1_1)
        {
            return Ok(false);
        }
        // The scope of the entry just ended closes now rather than before the next token: the
        // same scope either way (`next_tok` would do it first thing).
        if self.pending_pop {
            self.ns.pop();
            self.pending_pop = false;
        }
        let (sitemap_default, rs_prefix) = self.fast_namespaces();
        if !sitemap_default {
            return Ok(false);
        }
        let found = {
            let c = self.xml.get_ref();
            // Only what is buffered and within the limits: the scanner never reads, so it
            // never trips a limit or meets an I/O error (the general path does, at its place).
            let doc_left = c.max_doc.saturating_sub(c.offset);
            let allowed = doc_left.min(c.max_token);
            let n = usize::try_from(allowed)
                .unwrap_or(usize::MAX)
                .min(c.filled - c.pos);
            scan(&c.buf[c.pos..c.pos + n], rs_prefix, &mut self.fast)
        };
        let Some(found) = found else {
            return Ok(false);
        };
        // The entry as text, its UTF-8 checked once (the scanner left that to here): offsets
        // below are relative to `found.at`. Invalid UTF-8: the general path's.
        let mut text = std::mem::take(&mut self.fast.text);
        text.clear();
        {
            let c = self.xml.get_ref();
            match std::str::from_utf8(&c.buf[c.pos + found.at..c.pos + found.end]) {
                Ok(s) => text.push_str(s),
                Err(_) => {
                    self.fast.text = text;
                    return Ok(false);
                }
            }
        }
        let r = self.fast_replay(e, &found, &text);
        if text.capacity() <= MAX_KEPT_TEXT {
            self.fast.text = text;
        }
        r.map(|()| true)
    }

    /// The entry recognized, its children in document order through the general path's
    /// handlers, with their positions.
    fn fast_replay(&mut self, e: &mut Entry, found: &Found, text: &str) -> Result<(), Error> {
        let at = found.at;
        self.xml.get_mut().consume(at);
        let pos = self.here();
        let name = if found.sitemap {
            Name::Sitemap
        } else {
            Name::Url
        };
        self.check_entry_element(&name, pos);
        self.reset_entry(e, pos);
        let mut seen_loc = false;
        let mut links = 0usize;
        let mut done = at;
        for i in 0..self.fast.children.len() {
            let ch = self.fast.children[i];
            self.xml.get_mut().consume(ch.at - done);
            done = ch.at;
            let cpos = self.here();
            match ch.kind {
                Kind::Md | Kind::Ln => {
                    let mut attrs = self.pool.attrs();
                    for s in &self.fast.attrs[ch.start..ch.end] {
                        attrs.push(Attr {
                            prefix: None,
                            ns: None,
                            local: intern_attr(&text[s.name.0 - at..s.name.1 - at]),
                            value: self.pool.string_from(&text[s.value.0 - at..s.value.1 - at]),
                        });
                    }
                    if ch.kind == Kind::Md {
                        self.entry_md(e, attrs, cpos);
                    } else {
                        links += 1;
                        if let Err(err) = self.check_children(links, cpos) {
                            // Where the general path stands when it finds the limit: past
                            // the tag.
                            self.xml.get_mut().consume(ch.close - done);
                            return Err(err);
                        }
                        self.entry_ln(e, attrs, cpos);
                    }
                }
                kind => {
                    let t = &text[ch.start - at..ch.end - at];
                    match kind {
                        Kind::Loc => self.entry_loc(e, t, cpos, &mut seen_loc),
                        Kind::Lastmod => self.entry_lastmod(e, t, cpos),
                        Kind::Changefreq => self.entry_changefreq(e, t, cpos),
                        _ => e.priority = Some(t.trim().to_owned()),
                    }
                }
            }
        }
        self.xml.get_mut().consume(found.end - done);
        self.entry_end(e);
        self.fast.taken += 1;
        Ok(())
    }

    /// Whether unprefixed elements are in the Sitemap namespace and `rs:` elements in
    /// ResourceSync's, in the scope in force (the root's), once per namespace generation.
    fn fast_namespaces(&mut self) -> (bool, bool) {
        let generation = self.ns_cache.generation();
        if let Some((g, sm, rs)) = self.fast.ns {
            if g == generation {
                return (sm, rs);
            }
        }
        let mut class = |name: &str| match self.ns.resolve_element(QName(name)).0 {
            ResolveResult::Bound(n) => self.ns_cache.class(n.as_ref()),
            _ => NsClass::None,
        };
        let sm = class("url") == NsClass::Sitemap;
        let rs = class("rs:md") == NsClass::ResourceSync;
        self.fast.ns = Some((generation, sm, rs));
        (sm, rs)
    }
}

/// Recognizes one entry at the start of `b` (after white space), recording its children in
/// `s`; `None` for anything outside the subset the module describes.
fn scan(b: &[u8], rs_prefix: bool, s: &mut Scratch) -> Option<Found> {
    s.children.clear();
    s.attrs.clear();
    let at = skip_space(b, 0);
    let rest = b.get(at..)?;
    let (sitemap, mut i) = if rest.starts_with(b"<url>") {
        (false, at + 5)
    } else if rest.starts_with(b"<sitemap>") {
        (true, at + 9)
    } else {
        return None;
    };
    loop {
        i = skip_space(b, i);
        if *b.get(i)? != b'<' {
            return None;
        }
        let tag = b.get(i + 1..)?;
        if tag.first() == Some(&b'/') {
            let close: &[u8] = if sitemap { b"/sitemap>" } else { b"/url>" };
            if !tag.starts_with(close) {
                return None;
            }
            let end = i + 1 + close.len();
            // One byte past the end tag is buffered too: the general path would not have
            // needed to read further to end the entry.
            return (end < b.len()).then_some(Found { sitemap, at, end });
        }
        if s.children.len() == MAX_CHILDREN {
            return None;
        }
        if let Some((kind, name)) = text_child(tag) {
            let at = i;
            let start = i + 2 + name.len();
            let lt = text_end(b, start)?;
            // `</name>`
            let after = &b[lt..];
            let n = name.len();
            if after.len() < n + 3
                || after[1] != b'/'
                || &after[2..2 + n] != name
                || after[2 + n] != b'>'
            {
                return None;
            }
            i = lt + 3 + n;
            s.children.push(Child {
                kind,
                at,
                start,
                end: lt,
                close: i,
            });
            continue;
        }
        let kind = if rs_prefix && tag.starts_with(b"rs:md") {
            Kind::Md
        } else if rs_prefix && tag.starts_with(b"rs:ln") {
            Kind::Ln
        } else {
            return None;
        };
        let first = s.attrs.len();
        let at = i;
        // `<rs:md` / `<rs:ln`: 6 bytes.
        i = attributes(b, i + 6, s)?;
        s.children.push(Child {
            kind,
            at,
            start: first,
            end: s.attrs.len(),
            close: i,
        });
    }
}

/// `loc>`, `lastmod>`, `changefreq>` or `priority>` at the start of `tag`.
fn text_child(tag: &[u8]) -> Option<(Kind, &'static [u8])> {
    let (kind, name): (Kind, &'static [u8]) = match tag.first()? {
        b'l' if tag.starts_with(b"loc>") => (Kind::Loc, b"loc"),
        b'l' if tag.starts_with(b"lastmod>") => (Kind::Lastmod, b"lastmod"),
        b'c' if tag.starts_with(b"changefreq>") => (Kind::Changefreq, b"changefreq"),
        b'p' if tag.starts_with(b"priority>") => (Kind::Priority, b"priority"),
        _ => return None,
    };
    Some((kind, name))
}

/// The attributes of an empty-element tag from `i` (just after its name) to its `/>`;
/// returns the index after the tag.
fn attributes(b: &[u8], mut i: usize, s: &mut Scratch) -> Option<usize> {
    let first = s.attrs.len();
    loop {
        let before = i;
        i = skip_space(b, i);
        let rest = b.get(i..)?;
        if rest.starts_with(b"/>") {
            return Some(i + 2);
        }
        // An attribute follows white space (XML 1.0 §3.1 [40], [44]).
        if i == before || s.attrs.len() - first == MAX_ATTRS {
            return None;
        }
        let name_start = i;
        if !matches!(rest.first()?, b'a'..=b'z' | b'A'..=b'Z' | b'_') {
            return None;
        }
        i += 1;
        while matches!(b.get(i)?, b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-') {
            i += 1;
        }
        let name = &b[name_start..i];
        // `xmlns` declares a namespace; other `xml...` names are reserved (Namespaces §3).
        if name.len() >= 3 && name[..3].eq_ignore_ascii_case(b"xml") {
            return None;
        }
        if *b.get(i)? != b'=' {
            return None;
        }
        let q = *b.get(i + 1)?;
        if q != b'"' && q != b'\'' {
            return None;
        }
        let vstart = i + 2;
        let vend = value_end(b, vstart, q)?;
        // Attributes are distinct (XML 1.0 §3.1, Unique Att Spec).
        if s.attrs[first..]
            .iter()
            .any(|a| &b[a.name.0..a.name.1] == name)
        {
            return None;
        }
        s.attrs.push(Span {
            name: (name_start, name_start + name.len()),
            value: (vstart, vend),
        });
        i = vend + 1;
    }
}

fn skip_space(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        i += 1;
    }
    i
}

/// The `<` ending plain text from `i`: text the general path would return as it is, with no
/// reference, no `]` (so no `]]>`), no CR (line ends are normalized), no character XML 1.0
/// §2.2 forbids (C0 controls but tab and LF; U+FFFE/U+FFFF, whose UTF-8 starts with 0xEF, the
/// rare other characters starting so included). UTF-8 is checked over the whole entry
/// afterwards. The `<` is found with `memchr`, the text checked in one branch-free pass.
fn text_end(b: &[u8], i: usize) -> Option<usize> {
    let t = b.get(i..)?;
    let n = memchr::memchr(b'<', t)?;
    let bad = t[..n].iter().fold(false, |bad, &c| {
        bad | ((c < 0x20) & (c != b'\t') & (c != b'\n')) | (c == b'&') | (c == b']') | (c == 0xEF)
    });
    (!bad).then_some(i + n)
}

/// The quote `q` ending a plain attribute value from `i`: one the general path would return
/// as it is, with no reference, no white space character to normalize (XML 1.0 §3.3.3), no
/// markup character, no forbidden character (as [`text_end`]).
fn value_end(b: &[u8], i: usize, q: u8) -> Option<usize> {
    let v = b.get(i..)?;
    let n = memchr::memchr(q, v)?;
    let bad = v[..n].iter().fold(false, |bad, &c| {
        bad | (c < 0x20) | (c == b'&') | (c == b'<') | (c == b'>') | (c == 0xEF)
    });
    (!bad).then_some(i + n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_str(s: &str) -> Option<(usize, Vec<Kind>)> {
        let mut sc = Scratch::default();
        scan(s.as_bytes(), true, &mut sc)
            .map(|f| (f.end, sc.children.iter().map(|c| c.kind).collect()))
    }

    #[test]
    fn texts_and_values_end_where_read_byte_by_byte() {
        // Every byte, at every place of texts and values of every length: the end found, or
        // none, as a reading byte by byte finds it.
        for n in 0..40 {
            for c in 0..=255u8 {
                let at = n / 2;
                let mut t = vec![b'x'; n];
                t.extend_from_slice(b"</loc>");
                if n > 0 {
                    t[at] = c;
                }
                let text_ok =
                    |c: u8| !(b"&]\xef".contains(&c) || (c < 0x20 && c != b'\t' && c != b'\n'));
                let want = match n {
                    0 => Some(0),
                    _ if c == b'<' => Some(at),
                    _ if text_ok(c) => Some(n),
                    _ => None,
                };
                assert_eq!(text_end(&t, 0), want, "text {n} with {c} at {at}");
                let mut v = vec![b'x'; n];
                v.extend_from_slice(b"\"/>");
                if n > 0 {
                    v[at] = c;
                }
                let want = match n {
                    0 => Some(0),
                    _ if c == b'"' => Some(at),
                    _ if c >= 0x20 && !b"&<>\xef".contains(&c) => Some(n),
                    _ => None,
                };
                assert_eq!(value_end(&v, 0, b'"'), want, "value {n} with {c} at {at}");
            }
        }
        assert_eq!(text_end(b"abc", 0), None, "no end buffered");
        assert_eq!(value_end(b"abc", 0, b'\''), None, "no end buffered");
    }

    #[test]
    fn takes_the_common_entry() {
        let doc = "\n <url><loc>http://a/b</loc><lastmod>2013-01-02T13:00:00Z</lastmod>\
                   <rs:md hash=\"md5:x\" length='5'/><rs:ln rel=\"up\" href=\"http://a/\"/></url>\n";
        let (end, kinds) = scan_str(doc).expect("scanned");
        assert_eq!(&doc[end - 6..end], "</url>");
        assert_eq!(kinds, [Kind::Loc, Kind::Lastmod, Kind::Md, Kind::Ln]);
    }

    #[test]
    fn leaves_anything_else_to_the_general_path() {
        for doc in [
            "<url><loc>a&amp;b</loc></url> ",
            "<url><loc>a]]>b</loc></url> ",
            "<url><loc>a\rb</loc></url> ",
            "<url><loc>a\u{1}b</loc></url> ",
            "<url><loc>a\u{FFFE}</loc></url> ",
            "<url><loc>a</loc ></url> ",
            "<url><loc>a</lastmod></url> ",
            "<url><loc/></url> ",
            "<url><loc>a</loc><!-- c --></url> ",
            "<url><loc><![CDATA[a]]></loc></url> ",
            "<url><rs:md a='1'b='2'/></url> ",
            "<url><rs:md a='1' a='2'/></url> ",
            "<url><rs:md a='<'/></url> ",
            "<url><rs:md a='x\ty'/></url> ",
            "<url><rs:md xmlns:x='y'/></url> ",
            "<url><rs:md x:a='y'/></url> ",
            "<url><rs:md a = 'y'/></url> ",
            "<url><rs:md a='y'></rs:md></url> ",
            "<url><rs:mdx/></url> ",
            "<url><x/></url> ",
            "<url>text<loc>a</loc></url> ",
            "<url a='b'><loc>a</loc></url> ",
            "<url><loc>a</loc></url>", // nothing buffered past the end tag
            "<url><loc>a</loc>",
        ] {
            assert!(scan_str(doc).is_none(), "{doc:?}");
        }
        let mut sc = Scratch::default();
        assert!(scan(b"<url><rs:md a='1'/></url> ", false, &mut sc).is_none());
    }
}
