//! The reader's limits: depth, token, document size (gzip bombs included), children, namespaces, findings.

use super::*;

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
