//! Hostile input: every attack yields a clear [`Error`] (variant, rule, document name, line and
//! column), never a panic, and memory stays bounded however large the input.
#![allow(clippy::unwrap_used)]

use std::io::{self, BufReader, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use crate::common::heavy;
use resourcesync_model::{
    DocumentReader, DocumentWriter, Entry, Error, Header, LimitKind, Position, ReadOptions,
};

const SM: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";
const RS: &str = "http://www.openarchives.org/rs/terms/";

fn urlset_open() -> String {
    format!("<urlset xmlns=\"{SM}\" xmlns:rs=\"{RS}\">")
}

/// Reads the header and every entry; returns the first error. Panics if the document reads.
fn read_err_with(input: impl Read + Send + 'static, opts: ReadOptions) -> Error {
    let mut r = match DocumentReader::open(input, opts) {
        Ok(r) => r,
        Err(e) => return e,
    };
    loop {
        match r.next_entry() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("document read without error"),
            Err(e) => {
                // After an error the reader stays finished.
                assert!(
                    matches!(r.next_entry(), Ok(None)),
                    "reader continues after {e}"
                );
                return e;
            }
        }
    }
}

fn read_err(name: &str, bytes: impl Into<Vec<u8>>) -> Error {
    read_err_with(io::Cursor::new(bytes.into()), ReadOptions::named(name))
}

/// Checks the message names the document and the position the error reports, and returns it.
fn check_message(err: &Error, name: &str) -> Position {
    let pos = err
        .position()
        .unwrap_or_else(|| panic!("no position in {err:?}"));
    assert!(pos.line >= 1 && pos.column >= 1, "position {pos} in {err}");
    let msg = err.to_string();
    let prefix = format!("{name}:{}:{}: error[{}]", pos.line, pos.column, err.rule());
    assert!(
        msg.starts_with(&prefix),
        "message {msg:?} does not start with {prefix:?}"
    );
    assert!(err.is_invalid_input());
    pos
}

fn assert_limit(err: &Error, name: &str, kind: LimitKind, max: u64) -> Position {
    match err {
        Error::Limit { limit, max: m, .. } => {
            assert_eq!(*limit, kind, "{err}");
            assert_eq!(*m, max, "{err}");
        }
        other => panic!("expected a {kind:?} limit, got {other:?}"),
    }
    assert_eq!(err.rule(), kind.rule());
    check_message(err, name)
}

fn assert_forbidden(err: &Error, name: &str) -> Position {
    assert!(
        matches!(err, Error::Forbidden { .. }),
        "expected Forbidden, got {err:?}"
    );
    assert_eq!(err.rule(), "XML-no-dtd");
    check_message(err, name)
}

fn assert_malformed(err: &Error, name: &str) -> Position {
    assert!(
        matches!(err, Error::Malformed { .. }),
        "expected Malformed, got {err:?}"
    );
    assert_eq!(err.rule(), "XML-wellformed");
    check_message(err, name)
}

fn assert_not_sitemap(err: &Error, name: &str) -> Position {
    assert!(
        matches!(err, Error::NotSitemap { .. }),
        "expected NotSitemap, got {err:?}"
    );
    assert_eq!(err.rule(), "SM-root");
    check_message(err, name)
}

/// Peak resident set size of the process, in bytes (Linux; `None` elsewhere).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

// --- DTDs and entities ----------------------------------------------------------------------

#[test]
fn billion_laughs_is_forbidden() {
    let mut doc =
        String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE urlset [\n  <!ENTITY lol \"lol\">\n");
    for i in 1..=9 {
        let prev = if i == 1 {
            "lol".to_owned()
        } else {
            format!("lol{}", i - 1)
        };
        doc.push_str(&format!(
            "  <!ENTITY lol{i} \"{}\">\n",
            format!("&{prev};").repeat(10)
        ));
    }
    doc.push_str("]>\n");
    doc.push_str(&urlset_open());
    doc.push_str("<url><loc>http://example.com/&lol9;</loc></url></urlset>\n");
    let err = read_err("laughs.xml", doc);
    let pos = assert_forbidden(&err, "laughs.xml");
    assert_eq!(pos, Position { line: 2, column: 1 }, "{err}");
    assert!(err.to_string().contains("DOCTYPE"), "{err}");
}

#[test]
fn external_entity_is_forbidden() {
    let doc = format!(
        "<?xml version=\"1.0\"?>\n<!DOCTYPE urlset [ <!ENTITY xxe SYSTEM \"file:///etc/passwd\"> ]>\n\
         {}<url><loc>&xxe;</loc></url></urlset>",
        urlset_open()
    );
    let err = read_err("xxe.xml", doc);
    let pos = assert_forbidden(&err, "xxe.xml");
    assert_eq!(pos, Position { line: 2, column: 1 });
    assert!(
        !err.to_string().contains("root:"),
        "leaked file content: {err}"
    );
}

#[test]
fn external_dtd_is_forbidden() {
    let doc = format!(
        "<!DOCTYPE urlset SYSTEM \"http://attacker.invalid/evil.dtd\">{}</urlset>",
        urlset_open()
    );
    let err = read_err("extdtd.xml", doc);
    assert_eq!(
        assert_forbidden(&err, "extdtd.xml"),
        Position { line: 1, column: 1 }
    );
}

#[test]
fn undefined_entity_without_dtd_is_forbidden() {
    let doc = format!("{}\n<url><loc>&xxe;</loc></url></urlset>", urlset_open());
    let err = read_err("undef.xml", doc);
    let pos = assert_forbidden(&err, "undef.xml");
    assert_eq!(
        pos,
        Position {
            line: 2,
            column: 11
        },
        "{err}"
    );
    assert!(err.to_string().contains("&xxe;"), "{err}");
}

#[test]
fn undefined_entity_in_attribute_is_forbidden() {
    let doc = format!(
        "{}\n<url><loc>http://example.com/</loc><rs:md type=\"&xxe;\"/></url></urlset>",
        urlset_open()
    );
    let err = read_err("undef-attr.xml", doc);
    let pos = assert_forbidden(&err, "undef-attr.xml");
    assert_eq!(pos.line, 2, "{err}");
}

#[test]
fn predefined_and_character_entities_are_fine() {
    let doc = format!(
        "{}<url><loc>http://example.com/?a=1&amp;b=&lt;&#x41;&#66;&gt;&quot;&apos;</loc></url></urlset>",
        urlset_open()
    );
    let mut r = DocumentReader::new(doc.as_bytes(), ReadOptions::named("ok.xml")).expect("header");
    let e = r.next_entry().expect("entry").expect("one entry");
    assert_eq!(e.loc, "http://example.com/?a=1&b=<AB>\"'");
}

// --- Encoding and well-formedness --------------------------------------------------------

#[test]
fn invalid_utf8_in_loc_is_malformed() {
    let mut doc = format!("{}\n<url><loc>http://example.com/", urlset_open()).into_bytes();
    doc.extend_from_slice(b"caf\xe9\xff</loc></url></urlset>\n");
    let err = read_err("utf8-loc.xml", doc);
    let pos = assert_malformed(&err, "utf8-loc.xml");
    // The position is the start of the text run holding the bad bytes (or the bytes themselves).
    assert_eq!(pos.line, 2, "{err}");
    assert!((11..=33).contains(&pos.column), "{err}");
    assert!(err.to_string().contains("UTF-8"), "{err}");
}

#[test]
fn invalid_utf8_in_attribute_is_malformed() {
    let mut doc = format!(
        "{}\n<url><loc>http://example.com/</loc>\n  <rs:md type=\"text/",
        urlset_open()
    )
    .into_bytes();
    doc.extend_from_slice(b"\xc3\x28\"/></url></urlset>\n");
    let err = read_err("utf8-attr.xml", doc);
    let pos = assert_malformed(&err, "utf8-attr.xml");
    assert_eq!(pos.line, 3, "{err}");
    assert!((3..=21).contains(&pos.column), "{err}");
}

#[test]
fn invalid_utf8_in_root_attribute_is_malformed() {
    let mut doc = format!("<urlset xmlns=\"{SM}\" xmlns:ex=\"http://ex.org/").into_bytes();
    doc.extend_from_slice(b"\xfe\"></urlset>");
    let err = read_err("utf8-root.xml", doc);
    assert_eq!(assert_malformed(&err, "utf8-root.xml").line, 1);
}

#[test]
fn control_characters_are_malformed() {
    // XML 1.0 §2.2 (production Char) and WFC Legal Character: U+0000 and the C0 controls
    // other than tab, CR and LF are not characters of any document, raw or as references.
    let mut accepted = Vec::new();
    for (what, body) in [
        (
            "raw U+0000 in <loc>",
            "<url><loc>http://example.com/\u{0}</loc></url>",
        ),
        (
            "raw U+0001 in <loc>",
            "<url><loc>http://example.com/\u{1}</loc></url>",
        ),
        (
            "raw U+001F in an attribute",
            "<url><loc>http://example.com/</loc><rs:md type=\"a\u{1f}\"/></url>",
        ),
        (
            "&#0; in <loc>",
            "<url><loc>http://example.com/&#0;</loc></url>",
        ),
        (
            "&#1; in <loc>",
            "<url><loc>http://example.com/&#1;</loc></url>",
        ),
        (
            "&#x1; in an attribute",
            "<url><loc>http://example.com/</loc><rs:md type=\"a&#x1;\"/></url>",
        ),
    ] {
        let doc = format!("{}\n{body}</urlset>", urlset_open());
        let mut r =
            DocumentReader::new(doc.as_bytes(), ReadOptions::named("ctl.xml")).expect("header");
        match r.next_entry() {
            Err(err) => {
                assert_malformed(&err, "ctl.xml");
                assert_eq!(err.position().map(|p| p.line), Some(2), "{what}: {err}");
            }
            Ok(e) => accepted.push(format!("{what}: {e:?}")),
        }
    }
    assert!(accepted.is_empty(), "accepted:\n{}", accepted.join("\n"));
}

#[test]
fn truncated_in_the_middle_of_an_entry_is_malformed() {
    let doc = format!(
        "{}\n<url><loc>http://example.com/a</loc></url>\n<url><loc>http://exa",
        urlset_open()
    );
    let name = "cut-entry.xml";
    let mut r = DocumentReader::new(doc.as_bytes(), ReadOptions::named(name)).expect("header");
    assert_eq!(
        r.next_entry().expect("first").expect("first").loc,
        "http://example.com/a"
    );
    let err = r.next_entry().expect_err("second entry is cut");
    assert_eq!(assert_malformed(&err, name).line, 3, "{err}");
}

#[test]
fn truncated_inside_a_tag_is_malformed() {
    for (i, tail) in [
        "<url><lo",
        "<url><loc>x</loc><rs:md length=\"1",
        "<url><loc>x</loc></ur",
        "<",
    ]
    .iter()
    .enumerate()
    {
        let name = format!("cut-tag-{i}.xml");
        let doc = format!(
            "{}\n<url><loc>http://example.com/a</loc></url>\n{tail}",
            urlset_open()
        );
        let err = read_err(&name, doc);
        assert_eq!(assert_malformed(&err, &name).line, 3, "{err}");
    }
}

#[test]
fn truncated_before_the_root_ends_is_malformed() {
    for (i, doc) in [
        format!(
            "{}\n<url><loc>http://example.com/a</loc></url>\n",
            urlset_open()
        ),
        format!("{}<rs:md capability=\"resourcelist\"/>", urlset_open()),
        format!("<urlset xmlns=\"{SM}\""),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("cut-root-{i}.xml");
        let err = read_err(&name, doc);
        assert_malformed(&err, &name);
    }
}

#[test]
fn empty_document_is_not_a_sitemap() {
    let err = read_err("empty.xml", "");
    assert_not_sitemap(&err, "empty.xml");
    let err = read_err("blank.xml", "<?xml version=\"1.0\"?>\n  \n");
    assert_not_sitemap(&err, "blank.xml");
}

#[test]
fn mismatched_end_tag_is_malformed() {
    let doc = format!("{}\n<url><loc>x</lox></url></urlset>", urlset_open());
    let err = read_err("mismatch.xml", doc);
    assert_eq!(
        assert_malformed(&err, "mismatch.xml"),
        Position {
            line: 2,
            column: 12
        }
    );
}

// --- Positions ---------------------------------------------------------------------------

#[test]
fn error_position_is_exact() {
    // Each document has its error starting at line 3, column 5.
    let root = urlset_open();
    let mut bad_utf8 =
        format!("{root}\n<rs:md capability=\"resourcelist\"/>\n    <rs:ln href=\"").into_bytes();
    bad_utf8.extend_from_slice(b"\xff\"/></urlset>");
    type Check = fn(&Error, &str) -> Position;
    let cases: Vec<(&str, Vec<u8>, usize, Check)> = vec![
        (
            "pos-end.xml",
            format!("{root}\n<url><loc>a</loc></url>\n    </x></urlset>").into_bytes(),
            32,
            assert_malformed,
        ),
        (
            "pos-entity.xml",
            format!("{root}\n<url><loc>a</loc></url>\n    &bogus;</urlset>").into_bytes(),
            32,
            assert_forbidden,
        ),
        (
            "pos-doctype.xml",
            b"<?xml version=\"1.0\"?>\n\n    <!DOCTYPE x>".to_vec(),
            32,
            assert_forbidden,
        ),
        (
            "pos-depth.xml",
            format!("{root}\n\n    <u><v/></u></urlset>").into_bytes(),
            1,
            |e, n| assert_limit(e, n, LimitKind::Depth, 1),
        ),
        ("pos-utf8.xml", bad_utf8, 32, assert_malformed),
        (
            "pos-root.xml",
            b"<?xml version=\"1.0\"?>\n<!-- x -->\n    <feed/>".to_vec(),
            32,
            assert_not_sitemap,
        ),
    ];
    for (name, doc, max_depth, check) in cases {
        let opts = ReadOptions {
            max_depth,
            ..ReadOptions::named(name)
        };
        let err = read_err_with(io::Cursor::new(doc.clone()), opts);
        let pos = check(&err, name);
        assert_eq!(
            pos,
            Position { line: 3, column: 5 },
            "{name}: {err}\n{}",
            String::from_utf8_lossy(&doc)
        );
        assert!(
            err.to_string().starts_with(&format!("{name}:3:5: ")),
            "{err}"
        );
    }
}

#[test]
fn columns_count_bytes_and_lines_count_crlf() {
    // Column in bytes: "é" is two bytes. CRLF line ends count as one line each.
    let doc = format!(
        "{}\r\n<url><loc>é</loc></url>\r\n<url><loc>&x;</loc></url></urlset>",
        urlset_open()
    );
    let err = read_err("crlf.xml", doc);
    assert_eq!(
        assert_forbidden(&err, "crlf.xml"),
        Position {
            line: 3,
            column: 11
        }
    );
}

// --- Not a Sitemap ------------------------------------------------------------------------

#[test]
fn wrong_root_namespace_is_not_a_sitemap() {
    let doc = "<?xml version=\"1.0\"?>\n<urlset xmlns=\"http://example.com/\"><url><loc>http://example.com/</loc></url></urlset>";
    let err = read_err("wrong-ns.xml", doc);
    assert_eq!(
        assert_not_sitemap(&err, "wrong-ns.xml"),
        Position { line: 2, column: 1 }
    );
    assert!(err.to_string().contains(SM), "{err}");
}

#[test]
fn root_without_namespace_is_not_a_sitemap() {
    let err = read_err("no-ns.xml", "<urlset><url><loc>x</loc></url></urlset>");
    assert_not_sitemap(&err, "no-ns.xml");
}

#[test]
fn html_root_is_not_a_sitemap() {
    let doc =
        "<!-- a web page -->\n<html><head><title>404</title></head><body>Not found</body></html>";
    let err = read_err("page.html", doc);
    assert_eq!(
        assert_not_sitemap(&err, "page.html"),
        Position { line: 2, column: 1 }
    );
    assert!(err.to_string().contains("<html>"), "{err}");
}

#[test]
fn text_before_root_is_malformed() {
    let err = read_err("json.xml", "{\"urlset\": []}");
    assert_malformed(&err, "json.xml");
}

// --- Limits ------------------------------------------------------------------------------

#[test]
fn deep_nesting_in_an_entry_hits_the_depth_limit() {
    let n = 10_000;
    let doc = format!(
        "{}\n<url><loc>http://example.com/</loc>{}{}</url></urlset>",
        urlset_open(),
        "<a>".repeat(n),
        "</a>".repeat(n)
    );
    let err = read_err("deep.xml", doc);
    let pos = assert_limit(&err, "deep.xml", LimitKind::Depth, 32);
    // <urlset> and <url> are depth 1 and 2: the 31st <a> is the 33rd level.
    let col = "<url><loc>http://example.com/</loc>".len() as u64 + 30 * 3 + 1;
    assert_eq!(
        pos,
        Position {
            line: 2,
            column: col
        },
        "{err}"
    );
}

#[test]
fn deep_nesting_in_an_extension_hits_the_depth_limit() {
    let n = 10_000;
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://example.org/ext\"><url><loc>x</loc>{}{}</url></urlset>",
        "<ex:a>".repeat(n),
        "</ex:a>".repeat(n)
    );
    let err = read_err("deep-ext.xml", doc);
    assert_limit(&err, "deep-ext.xml", LimitKind::Depth, 32);
}

#[test]
fn deep_nesting_in_the_header_hits_the_depth_limit() {
    let n = 10_000;
    let doc = format!(
        "{}{}{}</urlset>",
        urlset_open(),
        "<b>".repeat(n),
        "</b>".repeat(n)
    );
    let err = read_err("deep-head.xml", doc);
    assert_limit(&err, "deep-head.xml", LimitKind::Depth, 32);
}

#[test]
fn huge_text_node_hits_the_token_limit() {
    let doc = format!(
        "{}\n<url><loc>http://example.com/{}</loc></url></urlset>",
        urlset_open(),
        "a".repeat(2 * 1024 * 1024)
    );
    let err = read_err("bigtext.xml", doc);
    assert_limit(&err, "bigtext.xml", LimitKind::TokenBytes, 1024 * 1024);
}

#[test]
fn huge_text_node_with_entities_hits_the_token_limit() {
    // Many short tokens (`&amp;` is its own token) must not add up past the limit either.
    let doc = format!(
        "{}\n<url><loc>{}</loc></url></urlset>",
        urlset_open(),
        "a&amp;".repeat(600_000)
    );
    let err = read_err("bigtext-amp.xml", doc);
    assert_limit(&err, "bigtext-amp.xml", LimitKind::TokenBytes, 1024 * 1024);
}

#[test]
fn huge_attribute_hits_the_token_limit() {
    let doc = format!(
        "{}\n<url><loc>x</loc><rs:md type=\"{}\"/></url></urlset>",
        urlset_open(),
        "t".repeat(2 * 1024 * 1024)
    );
    let err = read_err("bigattr.xml", doc);
    let pos = assert_limit(&err, "bigattr.xml", LimitKind::TokenBytes, 1024 * 1024);
    assert_eq!(pos.line, 2);
}

#[test]
fn huge_text_between_entries_hits_the_token_limit() {
    let doc = format!(
        "{}\n<url><loc>x</loc></url>{}</urlset>",
        urlset_open(),
        " ".repeat(2 * 1024 * 1024)
    );
    let err = read_err("bigspace.xml", doc);
    assert_limit(&err, "bigspace.xml", LimitKind::TokenBytes, 1024 * 1024);
}

#[test]
fn huge_extension_element_hits_the_token_limit() {
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://example.org/ext\"><url><loc>x</loc><ex:a>{}</ex:a></url></urlset>",
        "<ex:b>t</ex:b>".repeat(100_000)
    );
    let err = read_err("bigext.xml", doc);
    assert_limit(&err, "bigext.xml", LimitKind::TokenBytes, 1024 * 1024);
}

#[test]
fn huge_comment_hits_the_token_limit() {
    let doc = format!(
        "{}<!--{}--></urlset>",
        urlset_open(),
        "c".repeat(2 * 1024 * 1024)
    );
    let err = read_err("bigcomment.xml", doc);
    assert_limit(&err, "bigcomment.xml", LimitKind::TokenBytes, 1024 * 1024);
}

#[test]
fn document_larger_than_the_limit_is_refused() {
    let mut doc = urlset_open();
    for i in 0..1000 {
        doc.push_str(&format!("\n<url><loc>http://example.com/{i}</loc></url>"));
    }
    doc.push_str("</urlset>");
    let opts = ReadOptions {
        max_document_bytes: 10_000,
        ..ReadOptions::named("big.xml")
    };
    let mut r = DocumentReader::new(doc.as_bytes(), opts).expect("header");
    let mut n = 0;
    let err = loop {
        match r.next_entry() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("read past the limit"),
            Err(e) => break e,
        }
    };
    assert_limit(&err, "big.xml", LimitKind::DocumentBytes, 10_000);
    assert!(r.bytes_read() <= 10_000, "{} bytes read", r.bytes_read());
    assert!((200..300).contains(&n), "{n} entries before the limit");
}

#[test]
fn document_at_exactly_the_limit_is_fine() {
    let doc = format!("{}<url><loc>x</loc></url></urlset>", urlset_open());
    let opts = ReadOptions {
        max_document_bytes: doc.len() as u64,
        ..ReadOptions::named("exact.xml")
    };
    let r = DocumentReader::new(doc.as_bytes(), opts).expect("header");
    assert_eq!(r.count(), 1);
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(data).expect("write");
    gz.finish().expect("gzip")
}

/// A gzip file (RFC 1952) of `head`, `chunk` repeated `times` times, and `tail`: one member for
/// the head, the chunk's member repeated (compressed once, so a 100 MB bomb takes no time to
/// build in a debug build), and one for the tail. Readers must treat concatenated members as
/// one stream, as `gzip -d` does.
fn gzip_repeated(head: &[u8], chunk: &[u8], times: usize, tail: &[u8]) -> Vec<u8> {
    let member = gzip(chunk);
    let mut out = gzip(head);
    for _ in 0..times {
        out.extend_from_slice(&member);
    }
    out.extend_from_slice(&gzip(tail));
    out
}

/// `<urlset>`, 100 MB of spaces, `</urlset>`, gzipped to about 100 KB.
fn gzip_bomb() -> Vec<u8> {
    gzip_repeated(
        urlset_open().as_bytes(),
        &[b' '; 1024 * 1024],
        100,
        b"</urlset>",
    )
}

#[test]
fn gzip_bomb_in_one_member_stops_at_the_document_limit() {
    let _g = heavy();
    // A single deflate stream: 30 MB of spaces.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(urlset_open().as_bytes()).expect("write");
    let chunk = vec![b' '; 1024 * 1024];
    for _ in 0..30 {
        gz.write_all(&chunk).expect("write");
    }
    gz.write_all(b"</urlset>").expect("write");
    let gz = gz.finish().expect("gzip");
    assert!(gz.len() < 1024 * 1024, "bomb is {} bytes", gz.len());
    let opts = ReadOptions {
        max_document_bytes: 10 * 1024 * 1024,
        max_token_bytes: 64 * 1024 * 1024,
        ..ReadOptions::named("bomb1.xml.gz")
    };
    let err = read_err_with(io::Cursor::new(gz), opts);
    assert_limit(
        &err,
        "bomb1.xml.gz",
        LimitKind::DocumentBytes,
        10 * 1024 * 1024,
    );
}

#[test]
fn gzip_bomb_stops_at_the_document_limit() {
    let _g = heavy();
    let gz = gzip_bomb();
    assert!(gz.len() < 1024 * 1024, "bomb is {} bytes", gz.len());
    let before = peak_rss();
    let opts = ReadOptions {
        max_document_bytes: 10 * 1024 * 1024,
        // Spaces between elements are one text token: allow it to grow to the document limit.
        max_token_bytes: 64 * 1024 * 1024,
        ..ReadOptions::named("bomb.xml.gz")
    };
    let t = Instant::now();
    let err = read_err_with(io::Cursor::new(gz), opts);
    eprintln!("gzip bomb: refused in {:?}", t.elapsed());
    assert_limit(
        &err,
        "bomb.xml.gz",
        LimitKind::DocumentBytes,
        10 * 1024 * 1024,
    );
    if let (Some(b), Some(a)) = (before, peak_rss()) {
        // The text token may be buffered up to the document limit, no further.
        assert!(
            a.saturating_sub(b) < 50 * 1024 * 1024,
            "peak RSS grew by {} bytes",
            a - b
        );
    }
}

#[test]
fn gzip_bomb_with_default_token_limit_stops_at_the_token_limit() {
    let _g = heavy();
    let gz = gzip_bomb();
    let opts = ReadOptions {
        max_document_bytes: 10 * 1024 * 1024,
        ..ReadOptions::named("bomb2.xml.gz")
    };
    let err = read_err_with(io::Cursor::new(gz), opts);
    assert_limit(&err, "bomb2.xml.gz", LimitKind::TokenBytes, 1024 * 1024);
}

#[test]
fn gzip_bomb_of_entries_stops_at_the_document_limit() {
    let _g = heavy();
    // 100 MB of entries; refused after 2 MB.
    let line = b"<url><loc>http://example.com/</loc></url>\n".repeat(25_000);
    let gz = gzip_repeated(urlset_open().as_bytes(), &line, 100, b"</urlset>");
    assert!(gz.len() < 1024 * 1024, "bomb is {} bytes", gz.len());
    let opts = ReadOptions {
        max_document_bytes: 2 * 1024 * 1024,
        ..ReadOptions::named("bomb3.xml.gz")
    };
    let err = read_err_with(io::Cursor::new(gz), opts);
    assert_limit(
        &err,
        "bomb3.xml.gz",
        LimitKind::DocumentBytes,
        2 * 1024 * 1024,
    );
}

#[test]
fn truncated_gzip_is_an_error_not_a_panic() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(
        format!(
            "{}<url><loc>http://example.com/</loc></url></urlset>",
            urlset_open()
        )
        .as_bytes(),
    )
    .expect("write");
    let gz = gz.finish().expect("gzip");
    for cut in [3, 10, gz.len() / 2, gz.len() - 4] {
        let err = read_err_with(
            io::Cursor::new(gz[..cut].to_vec()),
            ReadOptions::named("cut.xml.gz"),
        );
        assert!(err.to_string().starts_with("cut.xml.gz:"), "{err}");
    }
    // Garbage after the magic bytes.
    let err = read_err_with(
        io::Cursor::new(b"\x1f\x8bnot really gzip".to_vec()),
        ReadOptions::named("junk.xml.gz"),
    );
    assert!(err.to_string().starts_with("junk.xml.gz:"), "{err}");
}

#[test]
fn many_links_in_one_entry_hit_the_children_limit() {
    let doc = format!(
        "{}\n<url><loc>http://example.com/</loc>\n{}</url></urlset>",
        urlset_open(),
        "<rs:ln rel=\"alternate\" href=\"http://example.com/x\"/>\n".repeat(5000)
    );
    let err = read_err("links.xml", doc);
    let pos = assert_limit(&err, "links.xml", LimitKind::Children, 1024);
    // The 1,025th link is on line 3 + 1024.
    assert_eq!(
        pos,
        Position {
            line: 3 + 1024,
            column: 1
        },
        "{err}"
    );
}

#[test]
fn many_extension_elements_in_one_entry_hit_the_children_limit() {
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://example.org/ext\"><url><loc>x</loc>{}</url></urlset>",
        "<ex:e/>".repeat(5000)
    );
    let err = read_err("exts.xml", doc);
    assert_limit(&err, "exts.xml", LimitKind::Children, 1024);
}

#[test]
fn many_links_in_the_header_hit_the_children_limit() {
    let doc = format!(
        "{}{}</urlset>",
        urlset_open(),
        "<rs:ln rel=\"alternate\" href=\"http://example.com/x\"/>".repeat(5000)
    );
    let err = read_err("head-links.xml", doc);
    assert_limit(&err, "head-links.xml", LimitKind::Children, 1024);
}

#[test]
fn children_limit_counts_per_entry() {
    // 1,000 links in each of 10 entries is fine with a limit of 1,024.
    let entry = format!(
        "<url><loc>x</loc>{}</url>\n",
        "<rs:ln rel=\"a\" href=\"h\"/>".repeat(1000)
    );
    let doc = format!("{}{}</urlset>", urlset_open(), entry.repeat(10));
    let r = DocumentReader::new(doc.as_bytes(), ReadOptions::named("ok.xml")).expect("header");
    let entries: Vec<Entry> = r.map(|e| e.expect("entry")).collect();
    assert_eq!(entries.len(), 10);
    assert!(entries.iter().all(|e| e.links.len() == 1000));
}

#[test]
fn many_namespace_declarations_hit_the_namespace_limit() {
    let decls: String = (0..1000)
        .map(|i| format!(" xmlns:p{i}=\"http://example.org/ns/{i}\""))
        .collect();
    let doc = format!("<urlset xmlns=\"{SM}\"{decls}><url><loc>x</loc></url></urlset>");
    let err = read_err("ns.xml", doc);
    assert_limit(&err, "ns.xml", LimitKind::NamespaceBindings, 64);
}

#[test]
fn namespace_declarations_on_nested_elements_hit_the_namespace_limit() {
    // 20 bindings per element, nested 10 deep (within the depth limit): 200 in scope.
    let mut open = String::new();
    let mut close = String::new();
    for d in 0..10 {
        let decls: String = (0..20)
            .map(|i| format!(" xmlns:p{d}x{i}=\"http://example.org/{d}/{i}\""))
            .collect();
        open.push_str(&format!("<ex:a{decls}>"));
        close.push_str("</ex:a>");
    }
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://example.org/ext\"><url><loc>x</loc>{open}{close}</url></urlset>"
    );
    let err = read_err("ns-nested.xml", doc);
    assert_limit(&err, "ns-nested.xml", LimitKind::NamespaceBindings, 64);
}

#[test]
fn namespace_bindings_are_released_at_element_end() {
    // 1,000 sibling elements each declaring 20 bindings: never more than 21 in scope.
    let decls: String = (0..20)
        .map(|i| format!(" xmlns:q{i}=\"http://example.org/{i}\""))
        .collect();
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://example.org/ext\">{}</urlset>",
        format!("<url><loc>x</loc><ex:a{decls}/></url>").repeat(1000)
    );
    let r = DocumentReader::new(doc.as_bytes(), ReadOptions::named("ok.xml")).expect("header");
    let entries: Vec<Entry> = r.map(|e| e.expect("entry")).collect();
    assert_eq!(entries.len(), 1000);
}

/// Produces `head`, then `n` entries made by `entry`, then `tail`, on the fly.
struct Generated<F: FnMut(u64, &mut Vec<u8>)> {
    head: Vec<u8>,
    tail: Vec<u8>,
    n: u64,
    next: u64,
    entry: F,
    buf: Vec<u8>,
    at: usize,
    stage: u8,
    produced: u64,
}

impl<F: FnMut(u64, &mut Vec<u8>)> Generated<F> {
    fn new(head: impl Into<Vec<u8>>, n: u64, tail: impl Into<Vec<u8>>, entry: F) -> Self {
        Generated {
            head: head.into(),
            tail: tail.into(),
            n,
            next: 0,
            entry,
            buf: Vec::with_capacity(64 * 1024),
            at: 0,
            stage: 0,
            produced: 0,
        }
    }

    fn refill(&mut self) {
        self.buf.clear();
        self.at = 0;
        match self.stage {
            0 => {
                self.buf.extend_from_slice(&self.head);
                self.stage = 1;
            }
            1 => {
                while self.next < self.n && self.buf.len() < 60 * 1024 {
                    (self.entry)(self.next, &mut self.buf);
                    self.next += 1;
                }
                if self.next == self.n {
                    self.stage = 2;
                }
            }
            2 => {
                self.buf.extend_from_slice(&self.tail);
                self.stage = 3;
            }
            _ => {}
        }
    }
}

impl<F: FnMut(u64, &mut Vec<u8>)> Read for Generated<F> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.buf.len() {
            if self.stage == 3 {
                return Ok(0);
            }
            self.refill();
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        self.produced += n as u64;
        Ok(n)
    }
}

#[test]
fn million_bad_entries_keep_bounded_findings() {
    let _g = heavy();
    let n = 1_000_000u64;
    let input = Generated::new(urlset_open(), n, "</urlset>\n", |_, buf| {
        buf.extend_from_slice(b"<url/>\n");
    });
    let opts = ReadOptions {
        max_findings: 100,
        ..ReadOptions::named("bad.xml")
    };
    let before = peak_rss();
    let mut r = DocumentReader::new(BufReader::new(input), opts).expect("header");
    let mut count = 0u64;
    while let Some(e) = r.next_entry().expect("entry") {
        assert!(e.loc.is_empty());
        count += 1;
    }
    assert_eq!(count, n);
    let f = r.findings();
    assert_eq!(f.as_slice().len(), 100);
    assert!(f.as_slice().iter().all(|x| x.rule.id == "SM-loc-mandatory"));
    assert_eq!(f.error_count(), n);
    assert_eq!(f.dropped(), n - 100);
    assert_eq!(
        f.as_slice()[99].position,
        Position {
            line: 100,
            column: 1
        }
    );
    if let (Some(b), Some(a)) = (before, peak_rss()) {
        assert!(
            a.saturating_sub(b) < 20 * 1024 * 1024,
            "peak RSS grew by {} bytes",
            a - b
        );
    }
}

// --- Streaming -----------------------------------------------------------------------------

fn change_entry(i: u64, buf: &mut Vec<u8>) {
    let _ = writeln!(
        buf,
        "<url><loc>http://example.com/res/{i}</loc><lastmod>2013-01-02T13:{:02}:{:02}Z</lastmod>\
         <rs:md change=\"updated\" length=\"{}\" type=\"text/plain\" \
         hash=\"md5:1584abdf8ebdc9802ac0c6a7402c03b6\"/>\
         <rs:ln rel=\"duplicate\" href=\"http://mirror.example.com/res/{i}\"/></url>",
        (i / 60) % 60,
        i % 60,
        i * 7
    );
}

/// Streams a generated Change List of about `bytes` bytes; returns (entries, seconds, peak RSS
/// growth).
fn stream(bytes: u64) -> (u64, f64, Option<u64>) {
    let mut sample = Vec::new();
    change_entry(5_000_000, &mut sample);
    let n = bytes / sample.len() as u64;
    let head = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}\n<rs:md capability=\"changelist\" from=\"2013-01-02T00:00:00Z\"/>\n\
         <rs:ln rel=\"up\" href=\"http://example.com/capabilitylist.xml\"/>\n",
        urlset_open()
    );
    let input = Generated::new(head, n, "</urlset>\n", change_entry);
    let opts = ReadOptions {
        max_document_bytes: bytes + 1024 * 1024,
        ..ReadOptions::named("stream.xml")
    };
    let before = peak_rss();
    let t = Instant::now();
    let mut r = DocumentReader::open(input, opts).expect("header");
    assert_eq!(r.header().links.len(), 1);
    let mut count = 0u64;
    while let Some(e) = r.next_entry().expect("entry") {
        if count % 100_003 == 0 {
            assert_eq!(e.loc, format!("http://example.com/res/{count}"));
            assert_eq!(e.length(), Some(count * 7));
            assert_eq!(e.links.len(), 1);
        }
        count += 1;
    }
    assert!(
        r.findings().is_empty(),
        "{:?}",
        r.findings().as_slice().first()
    );
    assert!(r.bytes_read() > bytes / 2, "{} bytes read", r.bytes_read());
    let secs = t.elapsed().as_secs_f64();
    let growth = match (before, peak_rss()) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    eprintln!(
        "streamed {} bytes, {count} entries in {secs:.1} s ({:.1} MB/s), peak RSS growth {growth:?}",
        r.bytes_read(),
        r.bytes_read() as f64 / secs / 1e6
    );
    assert_eq!(count, n);
    (count, secs, growth)
}

/// Gzipped documents of several members read as one (the members here split a tag).
#[test]
fn multi_member_gzip_reads_as_one_document() {
    let doc = format!(
        "{}<url><loc>http://example.com/a</loc></url></urlset>",
        urlset_open()
    );
    let (a, b) = doc.as_bytes().split_at(doc.len() / 2);
    let gz = gzip_repeated(a, b"", 3, b);
    let r = DocumentReader::open(io::Cursor::new(gz), ReadOptions::named("multi.xml.gz"))
        .expect("header");
    let locs: Vec<String> = r.map(|e| e.expect("entry").loc).collect();
    assert_eq!(locs, ["http://example.com/a"]);
}

#[test]
fn streams_a_generated_20_mb_document() {
    let _g = heavy();
    let (n, _secs, growth) = stream(20 * 1000 * 1000);
    assert!(n > 50_000);
    if let Some(g) = growth {
        assert!(g < 50 * 1024 * 1024, "peak RSS grew by {g} bytes");
    }
}

#[test]
#[ignore = "slow: 100 MB (about 40 s in a debug build: the default run streams 20 MB)"]
fn streams_a_generated_100_mb_document() {
    let _g = heavy();
    let (_n, _secs, growth) = stream(100 * 1000 * 1000);
    if let Some(g) = growth {
        assert!(g < 50 * 1024 * 1024, "peak RSS grew by {g} bytes");
    }
}

#[test]
#[ignore = "slow: 1 GB"]
fn streams_a_generated_1_gb_document_in_bounded_memory() {
    let _g = heavy();
    let (n, _secs, growth) = stream(1000 * 1000 * 1000);
    assert!(n > 3_500_000, "{n} entries");
    let g = growth.expect("VmHWM from /proc/self/status");
    assert!(g < 50 * 1024 * 1024, "peak RSS grew by {g} bytes");
}

// --- Fuzz regressions and known bugs -------------------------------------------------------

fn regression(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz-regressions")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Reads, writes back, reads again: both readings must be equal (positions aside), or the
/// reader or writer must refuse with an error.
fn assert_round_trip(name: &str, bytes: &[u8]) {
    let read = |bytes: &[u8]| -> Result<(Header, Vec<Entry>), Error> {
        let mut r =
            DocumentReader::open(io::Cursor::new(bytes.to_vec()), ReadOptions::named(name))?;
        let h = r.header().clone();
        let mut es = Vec::new();
        while let Some(mut e) = r.next_entry()? {
            e.position = Position::default();
            es.push(e);
        }
        Ok((h, es))
    };
    let Ok((h, es)) = read(bytes) else { return };
    let write = |h: &Header, es: &[Entry]| -> Result<Vec<u8>, Error> {
        let mut w = DocumentWriter::new(Vec::new(), name, h)?;
        for e in es {
            w.write_entry(e)?;
        }
        w.finish()
    };
    let Ok(out) = write(&h, &es) else { return };
    let text = String::from_utf8_lossy(&out).into_owned();
    let (h2, es2) =
        read(&out).unwrap_or_else(|e| panic!("written document does not read: {e}\n{text}"));
    assert_eq!(h, h2, "header differs after round trip\n{text}");
    assert_eq!(es, es2, "entries differ after round trip\n{text}");
    assert_eq!(
        out,
        write(&h2, &es2).expect("second write"),
        "writing is not a fixed point"
    );
}

#[test]
fn fuzz_regressions_do_not_panic() {
    // Every saved fuzz input reads to a result or an error, never a panic.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fuzz-regressions");
    let mut n = 0;
    for f in std::fs::read_dir(&dir).expect("fuzz-regressions") {
        let p = f.expect("entry").path();
        let bytes = std::fs::read(&p).expect("read");
        if let Ok(r) = DocumentReader::open(io::Cursor::new(bytes), ReadOptions::named("f")) {
            for e in r {
                if e.is_err() {
                    break;
                }
            }
        }
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn fuzz_rs_prefix_rebound_round_trips() {
    assert_round_trip("rs-prefix.xml", &regression("rs-prefix-rebound.xml"));
}

#[test]
fn rs_prefix_bound_elsewhere_round_trips() {
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:rs=\"http://example.org/not-rs\"><rs:md capability=\"resourcelist\"/>\
         <url><loc>http://example.com/a</loc></url></urlset>"
    );
    assert_round_trip("rs-elsewhere.xml", doc.as_bytes());
}

#[test]
fn default_namespace_bound_elsewhere_round_trips() {
    let doc = format!(
        "<sm:urlset xmlns:sm=\"{SM}\" xmlns=\"http://example.org/ext\" xmlns:rs=\"{RS}\">\
         <sm:url><sm:loc>http://example.com/a</sm:loc><foo/></sm:url></sm:urlset>"
    );
    assert_round_trip("default-elsewhere.xml", doc.as_bytes());
}

#[test]
fn non_empty_extension_element_keeps_its_end_tag() {
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://example.org/ext\"><url><loc>http://example.com/a</loc>\
         <ex:foo a=\"1\">text &amp; more<ex:bar/></ex:foo></url></urlset>"
    );
    let mut r = DocumentReader::new(doc.as_bytes(), ReadOptions::named("ext.xml")).expect("header");
    let e = r.next_entry().expect("entry").expect("entry");
    assert_eq!(e.extensions.len(), 1);
    assert_eq!(e.extensions[0].namespace, "http://example.org/ext");
    assert_eq!(
        e.extensions[0].xml,
        "<ex:foo a=\"1\">text &amp; more<ex:bar/></ex:foo>"
    );
    assert_round_trip("ext.xml", doc.as_bytes());
}

#[test]
fn namespace_declared_on_an_entry_round_trips() {
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:rs=\"{RS}\"><url xmlns:ex=\"http://example.org/ext\">\
         <loc>http://example.com/a</loc><rs:md length=\"1\" ex:a=\"v\"/><ex:foo/></url></urlset>"
    );
    assert_round_trip("inner-ns.xml", doc.as_bytes());
}

#[test]
fn fuzz_unbound_prefix_attribute_round_trips() {
    assert_round_trip(
        "unbound-prefix.xml",
        &regression("unbound-prefix-root-attr.xml"),
    );
    let doc = format!("<urlset xmlns=\"{SM}\" n:a=\"1\"><url><loc>x</loc></url></urlset>");
    assert_round_trip("unbound-prefix-2.xml", doc.as_bytes());
}

#[test]
fn fuzz_empty_prefix_attribute_round_trips() {
    assert_round_trip(
        "empty-prefix.xml",
        &regression("empty-prefix-root-attr.xml"),
    );
    let doc = format!("<urlset xmlns=\"{SM}\" :=\"//\"><url><loc>x</loc></url></urlset>");
    assert_round_trip("colon.xml", doc.as_bytes());
}

#[test]
fn fuzz_lt_in_namespace_uri_round_trips() {
    assert_round_trip("lt-in-ns.xml", &regression("lt-in-namespace-uri.xml"));
}

#[test]
fn namespace_uri_with_an_entity_round_trips() {
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:ex=\"http://e.org/a&amp;b\" ex:z=\"1\">\
         <url><loc>x</loc><ex:b/></url></urlset>"
    );
    let mut r =
        DocumentReader::new(doc.as_bytes(), ReadOptions::named("amp-ns.xml")).expect("header");
    assert_eq!(
        r.header().namespaces,
        [("ex".to_owned(), "http://e.org/a&b".to_owned())]
    );
    assert_eq!(r.header().extra[0].namespace, "http://e.org/a&b");
    let e = r.next_entry().expect("entry").expect("entry");
    assert_eq!(e.extensions[0].namespace, "http://e.org/a&b");
    assert_round_trip("amp-ns.xml", doc.as_bytes());
}

#[test]
fn not_well_formed_attributes_are_malformed() {
    let mut accepted = Vec::new();
    for (what, md) in [
        ("raw < in a value", "<rs:md type=\"a<b\"/>"),
        (
            "no white space between attributes",
            "<rs:md length=\"1\"type=\"a\"/>",
        ),
    ] {
        let doc = format!("{}\n<url><loc>x</loc>{md}</url></urlset>", urlset_open());
        let mut r =
            DocumentReader::new(doc.as_bytes(), ReadOptions::named("attr.xml")).expect("header");
        match r.next_entry() {
            Err(err) => {
                assert_malformed(&err, "attr.xml");
            }
            Ok(e) => accepted.push(format!("{what}: {e:?}")),
        }
    }
    assert!(accepted.is_empty(), "accepted:\n{}", accepted.join("\n"));
}

#[test]
fn fuzz_sentinel_namespace_round_trips() {
    assert_round_trip("sentinel.xml", &regression("rs-bound-to-sentinel-uri.xml"));
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:rs=\"urn:unbound-prefix:x\"><rs:md capability=\"resourcelist\"/>\
         <url><loc>x</loc></url></urlset>"
    );
    assert_round_trip("sentinel-2.xml", doc.as_bytes());
}
