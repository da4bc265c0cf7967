//! `<rs:ln>` links: an absolute `href`, and relation types registered with IANA or URIs
//! (RFC 8288 §2.1; Z39.99-2014 §7).

use super::Validator;
use crate::document::{Link, Position};
use crate::rules;

/// Whether `s` looks like an absolute URI (RFC 3986 scheme followed by `:`), with no white space.
pub fn is_absolute_uri(s: &str) -> bool {
    // The scheme, by bytes: a letter, then letters, digits, `+`, `-`, `.`, up to the first
    // `:` (which is none of them), and something after it.
    let b = s.as_bytes();
    if !b.first().is_some_and(u8::is_ascii_alphabetic) {
        return false;
    }
    let mut i = 1;
    while b
        .get(i)
        .is_some_and(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        i += 1;
    }
    b.get(i) == Some(&b':') && i + 1 < b.len() && !has_space_or_control(s)
}

/// Whether `s` has a white space or control character. Runs on every `<loc>`: ASCII text (the
/// usual case) is checked a byte at a time without branches (an ASCII byte is white space or
/// a control exactly when it is below `!` or DEL), the rest by character.
fn has_space_or_control(s: &str) -> bool {
    let (ascii_bad, non_ascii) = s.bytes().fold((false, false), |(bad, wide), b| {
        (bad | (b <= b' ') | (b == 0x7f), wide | (b >= 0x80))
    });
    ascii_bad || (non_ascii && s.chars().any(|c| c.is_whitespace() || c.is_control()))
}

/// Link relation types registered with IANA that ResourceSync documents use, plus common ones.
const REGISTERED_RELS: &[&str] = &[
    "about",
    "alternate",
    "archives",
    "author",
    "canonical",
    "collection",
    "contents",
    "copyright",
    "describedby",
    "describes",
    "duplicate",
    "edit",
    "enclosure",
    "first",
    "help",
    "hub",
    "icon",
    "index",
    "item",
    "last",
    "latest-version",
    "license",
    "memento",
    "next",
    "original",
    "predecessor-version",
    "prev",
    "preview",
    "previous",
    "profile",
    "related",
    "replies",
    "resourcesync",
    "search",
    "self",
    "service",
    "successor-version",
    "timegate",
    "timemap",
    "type",
    "up",
    "version-history",
    "via",
    "working-copy",
    "working-copy-of",
];

impl Validator {
    pub(super) fn check_link(&mut self, l: &Link, pos: Position) {
        if !l.href.is_empty() && !is_absolute_uri(&l.href) {
            let h: String = l.href.chars().take(80).collect();
            self.push(
                rules::RS_LN_HREF_URI,
                pos,
                format!("href {h:?} is not an absolute URI"),
            );
        }
        for r in l.rel.split_ascii_whitespace() {
            // RFC 5988 §4.1: registered relation types are compared without regard to case.
            if !REGISTERED_RELS.iter().any(|x| x.eq_ignore_ascii_case(r)) && !is_absolute_uri(r) {
                let r: String = r.chars().take(80).collect();
                self.push(
                    rules::RS_LN_REL_REGISTERED,
                    pos,
                    format!("relation type {r:?} is neither IANA-registered nor a URI"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte test agrees with the character definition on every ASCII character and on the
    /// white space and controls beyond ASCII.
    #[test]
    fn space_or_control_as_the_character_classes_say() {
        let by_char = |s: &str| s.chars().any(|c| c.is_whitespace() || c.is_control());
        for b in 0u8..0x80 {
            let s = format!("http://e.com/{}x", b as char);
            assert_eq!(has_space_or_control(&s), by_char(&s), "byte {b:#x}");
        }
        for c in [
            '\u{85}', '\u{a0}', '\u{9f}', '\u{2028}', '\u{3000}', 'é', '\u{fffd}',
        ] {
            let s = format!("http://e.com/{c}");
            assert_eq!(has_space_or_control(&s), by_char(&s), "{c:?}");
        }
        assert!(!is_absolute_uri("http://e.com/a\u{a0}b"));
        assert!(is_absolute_uri("http://e.com/caf\u{e9}"));
    }

    /// The scheme read by bytes agrees with its reading by `split_once` and characters, on
    /// every ASCII byte and a few others at each place of short candidates.
    #[test]
    fn absolute_uris_as_the_scheme_grammar_says() {
        let reference = |s: &str| {
            let Some((scheme, rest)) = s.split_once(':') else {
                return false;
            };
            let mut chars = scheme.chars();
            matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !rest.is_empty()
                && !has_space_or_control(s)
        };
        let others = ['\u{e9}', '\u{a0}', '\u{2028}'];
        let chars = (0u8..0x80).map(char::from).chain(others);
        for c in chars {
            for base in ["ab:c", "a+b-c.d:/x", "h:", ":x", "x", "", "1a:b", "urn:a:b"] {
                for at in 0..=base.len() {
                    let mut s = base.to_owned();
                    s.insert(at, c);
                    assert_eq!(is_absolute_uri(&s), reference(&s), "{s:?}");
                    s.remove(at);
                    if at < s.len() {
                        s.replace_range(at..at + 1, &c.to_string());
                        assert_eq!(is_absolute_uri(&s), reference(&s), "{s:?}");
                    }
                }
            }
        }
        assert!(is_absolute_uri("urn:a"));
        assert!(!is_absolute_uri("a:"));
    }
}
