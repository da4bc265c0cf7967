//! Fuzz regressions and known bugs: never a panic, and what is read is written back the same.

use super::*;

// --- Fuzz regressions and known bugs -------------------------------------------------------

fn regression(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz-regressions")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Reads, writes back, reads again: both readings must be equal (positions and the values
/// noted unreadable aside: neither is written), or the reader or writer must refuse with an
/// error.
fn assert_round_trip(name: &str, bytes: &[u8]) {
    let read = |bytes: &[u8]| -> Result<(Header, Vec<Entry>), Error> {
        let mut r =
            DocumentReader::open(io::Cursor::new(bytes.to_vec()), ReadOptions::named(name))?;
        let mut h = r.header().clone();
        if let Some(md) = h.md.as_mut() {
            md.invalid = resourcesync_model::Unreadable::default();
        }
        let mut es = Vec::new();
        while let Some(mut e) = r.next_entry()? {
            e.position = Position::default();
            if let Some(md) = e.md.as_mut() {
                md.invalid = resourcesync_model::Unreadable::default();
            }
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
fn fuzz_unreadable_values_round_trip() {
    // A value the reader cannot read is left unset and noted in `Metadata::invalid`, which is
    // never written: the document written back has no such attribute, and reads the same.
    let doc = format!(
        "<urlset xmlns=\"{SM}\" xmlns:rs=\"{RS}\"><rs:md capability=\"changelist\" from=\"x\"/>\
         <url><loc>http://example.com/a</loc><rs:md change=\"created\" length=\"88'76\" \
         hash=\"\" datetime=\"2013\"/></url></urlset>"
    );
    assert_round_trip("unreadable.xml", doc.as_bytes());
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
