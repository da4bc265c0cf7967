//! Buffers reused from one element to the next: the attribute lists and the strings of
//! attribute values and text that were read and dropped, so that reading an entry allocates
//! only what the entry keeps. Bounded: a few buffers, none larger than a typical value, so a
//! hostile document cannot make the reader hold more than a few kilobytes here.

use super::tokens::Attr;
use crate::document::Metadata;
use crate::hash::Hashes;

/// Most strings kept for reuse.
const MAX_STRINGS: usize = 16;
/// Largest string (capacity, bytes) kept for reuse; larger ones are freed.
const MAX_STRING_BYTES: usize = 512;
/// Largest attribute list (capacity) kept for reuse.
const MAX_ATTRS: usize = 16;
/// Most digests (capacity) of a list kept for reuse.
const MAX_DIGESTS: usize = 4;

#[derive(Debug, Default)]
pub(super) struct Pool {
    strings: Vec<String>,
    attrs: Vec<Attr>,
    /// A `hash` attribute's digests, whose value buffers are refilled by the next one.
    hashes: Hashes,
}

impl Pool {
    /// An empty string, reused when one was given back.
    #[inline]
    pub(super) fn string(&mut self) -> String {
        self.strings.pop().unwrap_or_default()
    }

    /// A copy of `s` in a reused string.
    #[inline]
    pub(super) fn string_from(&mut self, s: &str) -> String {
        let mut out = self.string();
        out.push_str(s);
        out
    }

    /// Gives a string back for reuse.
    #[inline]
    pub(super) fn give_string(&mut self, mut s: String) {
        if s.capacity() != 0 && s.capacity() <= MAX_STRING_BYTES && self.strings.len() < MAX_STRINGS
        {
            s.clear();
            self.strings.push(s);
        }
    }

    /// A list of digests to parse into, with the buffers of one given back (if any).
    #[inline]
    pub(super) fn hashes(&mut self) -> Hashes {
        std::mem::take(&mut self.hashes)
    }

    /// Gives a list of digests back for reuse: kept when small (at most [`MAX_DIGESTS`],
    /// none over [`MAX_STRING_BYTES`]), and when none is kept already.
    pub(super) fn give_hashes(&mut self, h: Hashes) {
        if self.hashes.0.capacity() == 0
            && h.0.capacity() <= MAX_DIGESTS
            && h.0.iter().all(|d| d.value.capacity() <= MAX_STRING_BYTES)
        {
            self.hashes = h;
        }
    }

    /// Takes back the buffers of an entry's `<rs:md>` that is done with (its strings and
    /// digests), leaving it empty.
    pub(super) fn give_metadata(&mut self, md: &mut Metadata) {
        for s in [md.mime_type.take(), md.encoding.take(), md.path.take()]
            .into_iter()
            .flatten()
        {
            self.give_string(s);
        }
        if let Some(h) = md.hash.take() {
            self.give_hashes(h);
        }
    }

    /// An empty attribute list, reused when one was given back.
    #[inline]
    pub(super) fn attrs(&mut self) -> Vec<Attr> {
        std::mem::take(&mut self.attrs)
    }

    /// Gives an attribute list back for reuse, with the strings of the attributes left in it.
    pub(super) fn give_attrs(&mut self, mut attrs: Vec<Attr>) {
        for a in attrs.drain(..) {
            self.give_string(a.value);
        }
        if attrs.capacity() <= MAX_ATTRS && self.attrs.capacity() == 0 {
            self.attrs = attrs;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_one_small_list_of_digests() {
        let mut p = Pool::default();
        let (big, _) = Hashes::parse(&format!("a:{} b:1", "0".repeat(MAX_STRING_BYTES + 1)));
        p.give_hashes(big);
        assert_eq!(p.hashes().0.capacity(), 0, "a value too large is not kept");
        let many = (0..=MAX_DIGESTS)
            .map(|i| format!("a{i}:0"))
            .collect::<Vec<_>>();
        p.give_hashes(Hashes::parse(&many.join(" ")).0);
        assert_eq!(p.hashes().0.capacity(), 0, "too many digests are not kept");
        p.give_hashes(Hashes::parse("md5:00 sha-1:11").0);
        p.give_hashes(Hashes::parse("md5:22").0);
        assert_eq!(
            p.hashes(),
            Hashes::parse("md5:00 sha-1:11").0,
            "the first is kept"
        );
        let mut md = Metadata {
            mime_type: Some("text/plain".into()),
            hash: Some(Hashes::parse("md5:00").0),
            ..Metadata::default()
        };
        p.give_metadata(&mut md);
        assert_eq!(md, Metadata::default());
        assert_eq!(p.strings.len(), 1);
    }

    #[test]
    fn keeps_few_small_strings() {
        let mut p = Pool::default();
        for _ in 0..100 {
            p.give_string(String::with_capacity(32));
        }
        assert_eq!(p.strings.len(), MAX_STRINGS);
        p.give_string(String::new()); // nothing to reuse
        let before = p.strings.len();
        let mut big = Pool::default();
        big.give_string(String::with_capacity(MAX_STRING_BYTES + 1));
        assert!(big.strings.is_empty());
        assert_eq!(p.strings.len(), before);
        let s = p.string_from("abc");
        assert_eq!(s, "abc");
        assert!(s.capacity() >= 32);
    }
}
