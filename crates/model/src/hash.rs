//! Fixity: the `hash` attribute of `<rs:md>` and `<rs:ln>` (Z39.99-2014 §7).
//!
//! "The attribute value is expressed in the form of a whitespace-delimited list of hash values.
//! Each hash value is represented by a hex-encoded digest and is preceded by a token that
//! identifies the utilized hash algorithm, e.g., md5:, sha-256:."
//!
//! Known algorithms are computed in one pass over a reader; unknown ones are kept as written.

use std::fmt;
use std::io::{self, Read};

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest as _, Sha256};

/// A hash algorithm token.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HashAlg {
    /// `md5`
    Md5,
    /// `sha-1`
    Sha1,
    /// `sha-256`
    Sha256,
    /// Any other token, kept as written.
    Other(String),
}

impl HashAlg {
    /// Reads an algorithm token. Known tokens are matched without regard to case.
    pub fn from_token(token: &str) -> Self {
        if token.eq_ignore_ascii_case("md5") {
            HashAlg::Md5
        } else if token.eq_ignore_ascii_case("sha-1") {
            HashAlg::Sha1
        } else if token.eq_ignore_ascii_case("sha-256") {
            HashAlg::Sha256
        } else {
            HashAlg::Other(token.to_owned())
        }
    }

    /// The token as written in documents.
    pub fn token(&self) -> &str {
        match self {
            HashAlg::Md5 => "md5",
            HashAlg::Sha1 => "sha-1",
            HashAlg::Sha256 => "sha-256",
            HashAlg::Other(t) => t,
        }
    }

    /// Length in hex digits of a digest of this algorithm, if known.
    pub fn hex_len(&self) -> Option<usize> {
        match self {
            HashAlg::Md5 => Some(32),
            HashAlg::Sha1 => Some(40),
            HashAlg::Sha256 => Some(64),
            HashAlg::Other(_) => None,
        }
    }

    /// Whether this crate can compute the algorithm.
    pub fn is_known(&self) -> bool {
        !matches!(self, HashAlg::Other(_))
    }
}

impl fmt::Display for HashAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// One `alg:hex` value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest {
    /// The algorithm.
    pub alg: HashAlg,
    /// The digest as written (hex for the known algorithms).
    pub value: String,
}

impl Digest {
    /// What is wrong with the digest's syntax, if anything: every digest is hex-encoded, of
    /// any algorithm (Z39.99-2014 §7: "Each hash value is represented by a hex-encoded
    /// digest"), and a known algorithm's has that algorithm's length.
    pub fn syntax_problem(&self) -> Option<String> {
        if self.value.is_empty() {
            return Some(format!("empty digest for {}", self.alg));
        }
        if !is_hex(self.value.as_bytes()) {
            let mut v: String = self.value.chars().take(72).collect();
            if v.len() < self.value.len() {
                v.push_str("...");
            }
            return Some(format!(
                "{} digest is not hexadecimal: {v:?} (every hash value is a hex-encoded digest)",
                self.alg
            ));
        }
        if let Some(n) = self.alg.hex_len() {
            if self.value.len() != n {
                return Some(format!(
                    "{} digest has {} hex digits, expected {n}",
                    self.alg,
                    self.value.len()
                ));
            }
        }
        None
    }

    /// Whether two digests of the same algorithm agree (hex compared without regard to case).
    pub fn matches(&self, other: &Digest) -> bool {
        self.alg == other.alg && self.value.eq_ignore_ascii_case(&other.value)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.alg, self.value)
    }
}

/// A whitespace-separated list of digests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Hashes(pub Vec<Digest>);

/// Why a `hash` attribute could not be fully read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hash token {token:?} is not of the form alg:hex")]
pub struct HashSyntaxError {
    /// The offending token (cut to 64 characters).
    pub token: String,
}

impl Hashes {
    /// Parses a `hash` attribute. Tokens without an `alg:` prefix are reported in the error list
    /// and left out; all others are kept, including unknown algorithms.
    pub fn parse(s: &str) -> (Hashes, Vec<HashSyntaxError>) {
        let mut h = Hashes::default();
        let mut bad = Vec::new();
        h.parse_into(s, &mut bad);
        (h, bad)
    }

    /// [`parse`](Self::parse) into this list, replacing what it held: its digests' buffers
    /// are reused (the reader's, from one entry to the next). One pass over the bytes: tokens
    /// are split at ASCII white space (as `split_ascii_whitespace`) eight bytes at a time, and
    /// each at its first `:`.
    pub(crate) fn parse_into(&mut self, s: &str, bad: &mut Vec<HashSyntaxError>) {
        let b = s.as_bytes();
        let mut kept = 0;
        let mut i = 0;
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i == b.len() {
                break;
            }
            let start = i;
            let mut colon = None;
            // The algorithm: up to the first `:` (or the token's end).
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b':' {
                    colon = Some(i);
                    break;
                }
                i += 1;
            }
            if colon.is_some() {
                i = token_end(b, i + 1);
            }
            // White space is ASCII: `start`, `i` and `colon` are character boundaries.
            match colon {
                Some(c) if c > start => {
                    let (alg, value) = (&s[start..c], &s[c + 1..i]);
                    match self.0.get_mut(kept) {
                        Some(d) => {
                            if d.alg.token() != alg {
                                d.alg = HashAlg::from_token(alg);
                            }
                            d.value.clear();
                            d.value.push_str(value);
                        }
                        None => self.0.push(Digest {
                            alg: HashAlg::from_token(alg),
                            value: value.to_owned(),
                        }),
                    }
                    kept += 1;
                }
                _ => bad.push(HashSyntaxError {
                    token: s[start..i].chars().take(64).collect(),
                }),
            }
        }
        self.0.truncate(kept);
    }

    /// A list of the known algorithms' digests, from their values (as kept in one column per
    /// algorithm), in the order md5, sha-1, sha-256.
    pub fn from_known(md5: Option<String>, sha1: Option<String>, sha256: Option<String>) -> Self {
        let v = [
            (HashAlg::Md5, md5),
            (HashAlg::Sha1, sha1),
            (HashAlg::Sha256, sha256),
        ]
        .into_iter()
        .filter_map(|(alg, value)| value.map(|value| Digest { alg, value }))
        .collect();
        Hashes(v)
    }

    /// The digest value for an algorithm, lower-case, if present.
    pub fn value_of(&self, alg: &HashAlg) -> Option<String> {
        self.get(alg).map(|d| d.value.to_ascii_lowercase())
    }

    /// The digest for an algorithm, if present.
    pub fn get(&self, alg: &HashAlg) -> Option<&Digest> {
        self.0.iter().find(|d| &d.alg == alg)
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The known algorithms present, in the order given.
    pub fn known_algs(&self) -> Vec<HashAlg> {
        self.0
            .iter()
            .map(|d| d.alg.clone())
            .filter(HashAlg::is_known)
            .collect()
    }

    /// Compares with computed digests: `Some(true)` when every algorithm both lists have agrees,
    /// `Some(false)` when one disagrees, `None` when they share no algorithm.
    pub fn agrees_with(&self, computed: &Hashes) -> Option<bool> {
        let mut shared = false;
        for d in &self.0 {
            if let Some(c) = computed.get(&d.alg) {
                shared = true;
                if !d.matches(c) {
                    return Some(false);
                }
            }
        }
        shared.then_some(true)
    }
}

impl fmt::Display for Hashes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Computes several digests in one pass.
#[derive(Debug, Clone, Default)]
pub struct MultiHasher {
    md5: Option<Md5>,
    sha1: Option<Sha1>,
    sha256: Option<Sha256>,
    length: u64,
}

impl MultiHasher {
    /// A hasher for the known algorithms among `algs` (unknown ones are ignored).
    pub fn new<'a>(algs: impl IntoIterator<Item = &'a HashAlg>) -> Self {
        let mut h = MultiHasher::default();
        for alg in algs {
            match alg {
                HashAlg::Md5 => h.md5 = Some(Md5::new()),
                HashAlg::Sha1 => h.sha1 = Some(Sha1::new()),
                HashAlg::Sha256 => h.sha256 = Some(Sha256::new()),
                HashAlg::Other(_) => {}
            }
        }
        h
    }

    /// Feeds bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.length += data.len() as u64;
        if let Some(h) = &mut self.md5 {
            h.update(data);
        }
        if let Some(h) = &mut self.sha1 {
            h.update(data);
        }
        if let Some(h) = &mut self.sha256 {
            h.update(data);
        }
    }

    /// Bytes fed so far.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// The digests, in the order md5, sha-1, sha-256, lower-case hex.
    pub fn finish(self) -> Hashes {
        let mut out = Vec::new();
        if let Some(h) = self.md5 {
            out.push(Digest {
                alg: HashAlg::Md5,
                value: to_hex(&h.finalize()),
            });
        }
        if let Some(h) = self.sha1 {
            out.push(Digest {
                alg: HashAlg::Sha1,
                value: to_hex(&h.finalize()),
            });
        }
        if let Some(h) = self.sha256 {
            out.push(Digest {
                alg: HashAlg::Sha256,
                value: to_hex(&h.finalize()),
            });
        }
        Hashes(out)
    }

    /// Reads `r` to its end, returning its length and digests.
    pub fn hash_reader<R: Read>(mut self, mut r: R) -> io::Result<(u64, Hashes)> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.update(&buf[..n]);
        }
        let len = self.length;
        Ok((len, self.finish()))
    }
}

/// Where the token from `i` ends: the first ASCII white space byte, else the end. Eight bytes
/// at a time while none is a control or a space (every white space byte is), then by byte.
fn token_end(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(w) = b.get(i..i + 8) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        let v = u64::from_le_bytes(a);
        // Non-zero when a byte is below 0x21 (the classic SWAR test).
        if v.wrapping_sub(ONES * 0x21) & !v & HIGHS != 0 {
            break;
        }
        i += 8;
    }
    while i < b.len() && !b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Whether every byte is an ASCII hex digit (branch-free per byte; this runs for every digest
/// of every entry read).
fn is_hex(bytes: &[u8]) -> bool {
    bytes.iter().fold(true, |ok, &b| {
        let lower = b | 0x20;
        ok & (b.is_ascii_digit() | (b'a'..=b'f').contains(&lower))
    })
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn computes_known_vectors_in_one_pass() {
        let algs = [HashAlg::Md5, HashAlg::Sha1, HashAlg::Sha256];
        let (len, h) = MultiHasher::new(&algs).hash_reader(&b"abc"[..]).unwrap();
        assert_eq!(len, 3);
        assert_eq!(
            h.to_string(),
            "md5:900150983cd24fb0d6963f7d28e17f72 \
             sha-1:a9993e364706816aba3e25717850c26c9cd0d89d \
             sha-256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parses_lists_and_keeps_unknown_algorithms() {
        let (h, bad) =
            Hashes::parse("  md5:1584abdf8ebdc9802ac0c6a7402c03b6\n sha-512:abcd  nocolon ");
        assert_eq!(h.0.len(), 2);
        assert_eq!(h.0[1].alg, HashAlg::Other("sha-512".into()));
        assert_eq!(bad.len(), 1);
        assert_eq!(
            h.to_string(),
            "md5:1584abdf8ebdc9802ac0c6a7402c03b6 sha-512:abcd"
        );
    }

    #[test]
    fn parsing_into_a_used_list_is_parsing_anew() {
        // The reader parses each entry's `hash` into the buffers of the previous one's.
        let values = [
            "md5:1584abdf8ebdc9802ac0c6a7402c03b6 sha-256:abcd",
            "  SHA-256:00\t\tmd5:11\n x:y:z ",
            "nocolon :x md5: sha-1:ab\r\x0csha-1:cd",
            "",
            "md5:0123456789abcdef0123456789abcdef",
            "a\u{e9}:\u{e9}\u{e9} b:1\u{1}2 c:3",
            "sha-256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0 k",
        ];
        let mut used = Hashes::default();
        for (i, v) in values.iter().cycle().take(3 * values.len()).enumerate() {
            let mut bad = Vec::new();
            used.parse_into(v, &mut bad);
            let (fresh, fresh_bad) = Hashes::parse(v);
            assert_eq!(used, fresh, "{i}: {v:?}");
            assert_eq!(bad, fresh_bad, "{i}: {v:?}");
            assert_eq!((fresh, fresh_bad), reference(v), "{i}: {v:?}");
        }
    }

    /// `Hashes::parse` by the standard library's splitting: what the one pass must equal.
    fn reference(s: &str) -> (Hashes, Vec<HashSyntaxError>) {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        for token in s.split_ascii_whitespace() {
            match token.split_once(':') {
                Some((alg, value)) if !alg.is_empty() => out.push(Digest {
                    alg: HashAlg::from_token(alg),
                    value: value.to_owned(),
                }),
                _ => bad.push(HashSyntaxError {
                    token: token.chars().take(64).collect(),
                }),
            }
        }
        (Hashes(out), bad)
    }

    #[test]
    fn syntax_problems_are_found() {
        let (h, _) = Hashes::parse("md5:xyz sha-1:abc sha-256:");
        assert!(h.0.iter().all(|d| d.syntax_problem().is_some()));
        let (h, _) = Hashes::parse("MD5:1584ABDF8EBDC9802AC0C6A7402C03B6");
        assert_eq!(h.0[0].alg, HashAlg::Md5);
        assert!(h.0[0].syntax_problem().is_none());
    }

    #[test]
    fn unknown_algorithms_need_hex_too() {
        // Z39.99-2014 §7: every hash value is a hex-encoded digest, whatever the algorithm;
        // only the length is unknown.
        let (h, _) = Hashes::parse("sha-512:f4OxZX_x-DFG blake3:0123456789abcdefABCDEF");
        assert!(h.0[0].syntax_problem().is_some());
        assert!(h.0[1].syntax_problem().is_none());
    }

    #[test]
    fn agreement_uses_shared_algorithms_only() {
        let (published, _) = Hashes::parse("md5:900150983CD24FB0D6963F7D28E17F72 foo:1");
        let (len, computed) = MultiHasher::new(&[HashAlg::Md5])
            .hash_reader(&b"abc"[..])
            .unwrap();
        assert_eq!(len, 3);
        assert_eq!(published.agrees_with(&computed), Some(true));
        let (other, _) = Hashes::parse("sha-1:a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(other.agrees_with(&computed), None);
        let (wrong, _) = Hashes::parse("md5:00000000000000000000000000000000");
        assert_eq!(wrong.agrees_with(&computed), Some(false));
    }
}
