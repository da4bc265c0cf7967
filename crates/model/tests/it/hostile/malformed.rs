//! Malformed input: DTDs and entities, encoding and well-formedness, error positions, documents that are not Sitemaps.

use super::*;

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
