//! Buffers reused from one element to the next: the attribute lists and the strings of
//! attribute values and text that were read and dropped, so that reading an entry allocates
//! only what the entry keeps. Bounded: a few buffers, none larger than a typical value, so a
//! hostile document cannot make the reader hold more than a few kilobytes here.

use super::tokens::Attr;

/// Most strings kept for reuse.
const MAX_STRINGS: usize = 16;
/// Largest string (capacity, bytes) kept for reuse; larger ones are freed.
const MAX_STRING_BYTES: usize = 512;
/// Largest attribute list (capacity) kept for reuse.
const MAX_ATTRS: usize = 16;

#[derive(Debug, Default)]
pub(super) struct Pool {
    strings: Vec<String>,
    attrs: Vec<Attr>,
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
