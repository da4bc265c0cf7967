//! The fast path (`fast`) against the general path alone: the same header, entries (with their
//! positions), findings, bytes read and errors (kind, document, line, column and message), on
//! every fixture document of the repository, seeded mutations of them (byte flips, truncations,
//! deletions, insertions of markup, references, quotes, NULs, CRs, invalid UTF-8 and
//! U+FFFE), large generated documents, input arriving in small pieces, and tight limits. (The
//! validator's reports over both paths: `validate::differential`.)

use std::fmt::Write as _;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::{DocumentReader, ReadOptions};
use crate::document::{Capability, ChangeFreq, Entry, Header, Link, Metadata, Root};
use crate::{DocumentWriter, HashAlg, MultiHasher, W3cDateTime};

/// A reader handing out at most `chunk` bytes per call (varied), so that entries straddle the
/// reader's buffer fills.
struct Chunked {
    data: Vec<u8>,
    at: usize,
    rng: Rng,
    max: usize,
}

impl Read for Chunked {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = (1 + self.rng.below(self.max))
            .min(out.len())
            .min(self.data.len() - self.at);
        out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// xorshift64*: seeded, reproducible, no dependency.
#[derive(Clone)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Everything observable of one reading, as text: header, each entry with its position,
/// the error that ended it (its full message), findings, bytes and entries read.
/// With the number of entries the fast path took.
pub(crate) fn reading(
    input: Box<dyn Read + Send>,
    opts: &ReadOptions,
    fast: bool,
) -> (String, u64) {
    let mut out = String::new();
    let mut r = match DocumentReader::open(input, opts.clone()) {
        Ok(r) => r,
        Err(e) => return (format!("open error: {e} / {e:?}"), 0),
    };
    r.fast.enabled = fast;
    let _ = writeln!(out, "header {:?} at {:?}", r.header(), r.header_position());
    let mut e = Entry::default();
    loop {
        match r.next_entry_into(&mut e) {
            Ok(true) => {
                let _ = writeln!(out, "{e:?}");
            }
            Ok(false) => break,
            Err(err) => {
                let _ = writeln!(out, "error: {err} / {err:?}");
                break;
            }
        }
    }
    let _ = writeln!(
        out,
        "findings {:?}\nlate md {:?}\nbytes {} entries {}",
        r.findings(),
        r.root_md_after_entries(),
        r.bytes_read(),
        r.entries_read()
    );
    (out, r.fast.taken)
}

/// Both paths on `doc` with `opts`, read whole and (when `chunk` is set) in pieces.
fn assert_same(doc: &[u8], opts: &ReadOptions, chunk: Option<(u64, usize)>, what: &str) {
    let input = |seed: Option<(u64, usize)>| -> Box<dyn Read + Send> {
        match seed {
            None => Box::new(io::Cursor::new(doc.to_vec())),
            Some((s, max)) => Box::new(Chunked {
                data: doc.to_vec(),
                at: 0,
                rng: Rng(s),
                max,
            }),
        }
    };
    let general = reading(input(chunk), opts, false).0;
    let fast = reading(input(chunk), opts, true).0;
    if general != fast {
        panic!(
            "{what} ({opts:?}, chunks {chunk:?}): the paths differ\n--- general\n{general}\n--- fast\n{fast}\n--- document\n{}",
            String::from_utf8_lossy(doc)
        );
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for f in rd.flatten() {
        let p = f.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Every document of the repository's fixtures and fuzz seeds, decompressed.
pub(crate) fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    files(&root.join("tests/fixtures"), &mut paths);
    files(&root.join("../../fuzz/seeds"), &mut paths);
    paths.sort();
    let mut out = Vec::new();
    for p in paths {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut d = Vec::new();
            match flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_end(&mut d) {
                Ok(_) => d,
                Err(_) => bytes,
            }
        } else {
            bytes
        };
        if bytes.windows(4).any(|w| w == b"<url" || w == b"<sit") {
            out.push((p.display().to_string(), bytes));
        }
    }
    out
}

/// A generated document of `n` entries using every child the fast path takes, and some it
/// leaves to the general path, with varied spacing.
pub(crate) fn generated(n: usize, index: bool, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut md = Metadata::with_capability(if index {
        Capability::ResourceList
    } else {
        Capability::ChangeList
    });
    md.at = W3cDateTime::parse("2013-01-03T09:00:00Z").ok();
    let root = if index {
        Root::SitemapIndex
    } else {
        Root::UrlSet
    };
    let mut header = Header::new(root, md);
    header
        .links
        .push(Link::new("up", "http://example.com/capabilitylist.xml"));
    let mut w = DocumentWriter::new(Vec::new(), "gen", &header).expect("header");
    let lastmod = W3cDateTime::parse("2013-01-02T13:00:00+01:00").expect("datetime");
    for i in 0..n {
        // A reference now and then (`&amp;` in the document): the general path's.
        let query = if rng.below(8) == 0 { "?a=1&b=2" } else { "" };
        let mut e = Entry::new(format!("http://example.com/r\u{e9}s/{i:07}{query}"));
        if rng.below(4) != 0 {
            e.lastmod = Some(lastmod);
        }
        if rng.below(5) == 0 {
            e.changefreq = Some(ChangeFreq::parse(if rng.below(2) == 0 {
                "daily"
            } else {
                "sometimes"
            }));
        }
        if rng.below(6) == 0 {
            e.priority = Some("0.5".into());
        }
        if rng.below(5) != 0 {
            let mut h = MultiHasher::new(&[HashAlg::Md5, HashAlg::Sha256]);
            h.update(format!("resource {i}").as_bytes());
            let md = e.md_mut();
            md.hash = Some(h.finish());
            md.length = Some(512 + (i as u64 % 1000));
            md.mime_type = Some("text/plain".into());
            if !index && rng.below(2) == 0 {
                md.change = Some(crate::document::Change::Updated);
            }
        }
        for _ in 0..rng.below(3) {
            let href = if rng.below(4) == 0 {
                "http://a/\"q\""
            } else {
                "http://a/m"
            };
            e.links.push(Link::new("alternate", href));
        }
        w.write_entry(&e).expect("entry");
    }
    let doc = w.finish().expect("finish");
    // Varied white space between the markup: the writer's, none, or CR LF and tabs.
    let text = String::from_utf8(doc).expect("utf-8");
    match seed % 3 {
        0 => text.into_bytes(),
        1 => text.replace("\n", "").into_bytes(),
        _ => text.replace("\n", "\r\n\t").into_bytes(),
    }
}

const INSERTS: &[&[u8]] = &[
    b"<",
    b"&",
    b"]]>",
    b"\"",
    b"'",
    b"\0",
    b"\xff",
    b"\xef\xbf\xbe",
    b"\r",
    b">",
    b"/",
    b" ",
    b"\n",
    b"<!-- c -->",
    b"<![CDATA[x]]>",
    b"&amp;",
    b"&#1;",
    b"&#x20AC;",
    b"&lt;",
    b" xmlns:rs=\"http://example.com/other\"",
    b" xmlns=\"http://example.com/other\"",
    b" a=\"1\"",
    b"<?pi x?>",
    b"<!DOCTYPE x>",
    b"<loc>x</loc>",
    b"<rs:ln rel=\"a\" href=\"b\"/>",
    b"</url>",
    b"<url>",
    b"rs:",
    b"\xc3",
];

pub(crate) fn mutate(doc: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut d = doc.to_vec();
    let rounds = 1 + rng.below(3);
    for _ in 0..rounds {
        let at = rng.below(d.len() + 1);
        match rng.below(5) {
            0 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] ^= 1 << rng.below(8);
            }
            1 => d.truncate(at),
            2 => {
                let end = (at + 1 + rng.below(16)).min(d.len());
                d.drain(at.min(end)..end);
            }
            _ => {
                let ins = INSERTS[rng.below(INSERTS.len())];
                d.splice(at..at, ins.iter().copied());
            }
        }
    }
    d
}

/// Options that make limits trip around the fast path's entries.
pub(crate) fn options(doc_len: usize, rng: &mut Rng) -> ReadOptions {
    let mut o = ReadOptions::named("doc");
    match rng.below(8) {
        0 => o.max_token_bytes = 16 + rng.below(200) as u64,
        1 => o.max_document_bytes = rng.below(doc_len + 1) as u64,
        2 => o.max_children = rng.below(3),
        3 => o.max_depth = 1 + rng.below(3),
        4 => o.max_findings = rng.below(3),
        5 => o.max_namespace_bindings = rng.below(3),
        _ => {}
    }
    o
}

#[test]
fn fixtures_read_the_same_by_both_paths() {
    let docs = fixtures();
    assert!(docs.len() > 50, "fixtures found: {}", docs.len());
    for (name, doc) in &docs {
        assert_same(doc, &ReadOptions::named("doc"), None, name);
        assert_same(doc, &ReadOptions::named("doc"), Some((7, 40)), name);
    }
}

#[test]
fn mutated_fixtures_read_the_same_by_both_paths() {
    let docs = fixtures();
    let mut rng = Rng(0x5eed_0017);
    for (name, doc) in &docs {
        for k in 0..150 {
            let m = mutate(doc, &mut rng);
            let opts = options(m.len(), &mut rng);
            let chunk = (k % 5 == 0).then(|| (rng.next() | 1, 1 + rng.below(300)));
            assert_same(&m, &opts, chunk, &format!("{name}, mutation {k}"));
        }
    }
}

#[test]
fn generated_documents_read_the_same_by_both_paths() {
    for (seed, index) in [(1u64, false), (2, true), (3, false)] {
        let doc = generated(300, index, seed);
        assert_same(&doc, &ReadOptions::named("doc"), None, "generated");
        assert_same(
            &doc,
            &ReadOptions::named("doc"),
            Some((seed, 5000)),
            "generated",
        );
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for k in 0..300 {
            let m = mutate(&doc, &mut rng);
            let opts = options(m.len(), &mut rng);
            let chunk = (k % 4 == 0).then(|| (rng.next() | 1, 1 + rng.below(4000)));
            assert_same(&m, &opts, chunk, &format!("generated {seed}, mutation {k}"));
        }
    }
}

#[test]
fn the_fast_path_takes_the_common_entries() {
    // The comparisons above mean something only if the fast path runs: on a generated
    // document it takes nearly every entry (not the first, read with the header, nor those
    // with a reference, written as `&amp;` or `&quot;`).
    let doc = String::from_utf8(generated(300, false, 1))
        .expect("utf-8")
        .replace("&amp;", "")
        .replace("&quot;", "");
    let (_, taken) = reading(
        Box::new(io::Cursor::new(doc.into_bytes())),
        &ReadOptions::named("doc"),
        true,
    );
    // One entry straddles the end of the first 64 KiB buffer: the general path's.
    assert_eq!(taken, 298);
    let (_, taken) = reading(
        Box::new(io::Cursor::new(generated(300, false, 1))),
        &ReadOptions::named("doc"),
        true,
    );
    assert!(taken > 150, "{taken}");
    let (_, taken) = reading(
        Box::new(io::Cursor::new(generated(300, false, 1))),
        &ReadOptions::named("doc"),
        false,
    );
    assert_eq!(taken, 0);
}

#[test]
fn a_large_document_reads_the_same_by_both_paths() {
    // Over a megabyte: entries straddle the reader's 64 KiB buffer many times over.
    let doc = generated(6000, false, 4);
    assert!(doc.len() > 1 << 20);
    assert_same(&doc, &ReadOptions::named("doc"), None, "large");
    assert_same(&doc, &ReadOptions::named("doc"), Some((9, 70_000)), "large");
    let mut rng = Rng(44);
    for k in 0..6 {
        let m = mutate(&doc, &mut rng);
        assert_same(
            &m,
            &ReadOptions::named("doc"),
            None,
            &format!("large, mutation {k}"),
        );
    }
}
