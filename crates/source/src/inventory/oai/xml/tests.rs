//! Unit tests of the response reader.

use super::*;

const WIDE: Limits = Limits {
    record: 1 << 20,
    response: 1 << 20,
};

const PAGE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/"
     xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <responseDate>2026-01-02T03:04:05Z</responseDate>
  <request verb="ListRecords">http://x/oai</request>
  <ListRecords>
<record>
  <header><identifier>oai:x:1</identifier><datestamp>2026-01-01</datestamp></header>
  <metadata><oai_dc:dc xmlns:oai_dc="http://www.openarchives.org/OAI/2.0/oai_dc/"
      xmlns:dc="http://purl.org/dc/elements/1.1/"
      xsi:schemaLocation="a b"><dc:title>A &amp; B &#233;</dc:title></oai_dc:dc></metadata>
</record>
<record>
  <header status="deleted"><identifier>oai:x:2</identifier><datestamp>2026-01-02</datestamp></header>
</record>
<record>
  <header><identifier>oai:x:3</identifier><datestamp>2026-01-03</datestamp></header>
  <metadata><plain><child/></plain></metadata>
</record>
<resumptionToken cursor="0">tok&amp;1</resumptionToken>
  </ListRecords>
</OAI-PMH>"#;

#[test]
fn a_page_gives_records_token_and_standalone_metadata() {
    let p = parse(PAGE.as_bytes(), WIDE).expect("parse");
    assert_eq!(p.response_date, "2026-01-02T03:04:05Z");
    assert_eq!(p.token.as_deref(), Some("tok&1"));
    assert_eq!(p.records.len(), 3);
    let r = &p.records[0];
    assert_eq!((r.identifier.as_str(), r.deleted), ("oai:x:1", false));
    let md = String::from_utf8(r.metadata.clone().expect("metadata")).expect("utf8");
    assert!(md.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<oai_dc:dc"));
    // The xsi prefix the record uses was declared on the envelope: declared again here;
    // the envelope's default namespace is not used inside, so it is left out.
    assert!(md.contains("xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\""));
    assert!(!md.contains("xmlns=\""), "{md}");
    assert!(md.contains("<dc:title>A &amp; B &#233;</dc:title></oai_dc:dc>"));
    assert!(p.records[1].deleted && p.records[1].metadata.is_none());
    let plain = String::from_utf8(p.records[2].metadata.clone().expect("md")).expect("u");
    assert!(
        plain.contains("<plain xmlns=\"http://www.openarchives.org/OAI/2.0/\""),
        "an unprefixed name keeps the namespace it had: {plain}"
    );
}

#[test]
fn hostile_documents_are_refused_with_a_place() {
    let dtd = "<?xml version=\"1.0\"?>\n<!DOCTYPE x [<!ENTITY a \"aaaa\">]>\n<OAI-PMH/>";
    let e = parse(dtd.as_bytes(), WIDE).expect_err("dtd");
    assert!(e.message.contains("DTD") && e.line == 2, "{e}");
    let ent = "<OAI-PMH>\n<responseDate>&lol;</responseDate></OAI-PMH>";
    let e = parse(ent.as_bytes(), WIDE).expect_err("entity");
    assert!(e.message.contains("&lol;") && e.line == 2, "{e}");
    let broken = "<OAI-PMH>\n<ListRecords>\n<record></ListRecords></OAI-PMH>";
    let e = parse(broken.as_bytes(), WIDE).expect_err("malformed");
    assert!(e.message.contains("malformed") && e.line == 3, "{e}");
    let other = "<html><body>hello</body></html>";
    assert!(
        parse(other.as_bytes(), WIDE)
            .expect_err("html")
            .message
            .contains("not an OAI-PMH")
    );
    assert!(parse(b"\xff\xfe", WIDE).is_err());
    let deep = format!("<OAI-PMH>{}", "<a>".repeat(300));
    assert!(
        parse(deep.as_bytes(), WIDE)
            .expect_err("deep")
            .message
            .contains("deeper")
    );
}

#[test]
fn errors_and_identify_are_read() {
    let e = parse(
        b"<OAI-PMH><responseDate>2026-01-01T00:00:00Z</responseDate>\
          <error code=\"noRecordsMatch\">none</error></OAI-PMH>",
        WIDE,
    )
    .expect("parse");
    assert_eq!(
        e.errors,
        [OaiError {
            code: "noRecordsMatch".into(),
            message: "none".into()
        }]
    );
    let i = parse(
        b"<OAI-PMH><Identify><granularity>YYYY-MM-DD</granularity>\
          <deletedRecord>persistent</deletedRecord></Identify></OAI-PMH>",
        WIDE,
    )
    .expect("parse");
    assert_eq!(i.granularity.as_deref(), Some("YYYY-MM-DD"));
    assert_eq!(i.deleted_record.as_deref(), Some("persistent"));
}

/// A page whose envelope declares `n` prefixes beside those a record uses.
fn flooded(n: usize, metadata: &str) -> String {
    let decls: String = (0..n).map(|i| format!(" xmlns:n{i}=\"u:{i}\"")).collect();
    format!(
        "<OAI-PMH xmlns=\"http://www.openarchives.org/OAI/2.0/\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"{decls}>\
         <ListRecords><record><header><identifier>i</identifier>\
         <datestamp>2026-01-01</datestamp></header><metadata>{metadata}</metadata>\
         </record></ListRecords></OAI-PMH>"
    )
}

fn metadata(page: &str, limits: Limits) -> String {
    let p = parse(page.as_bytes(), limits).expect("parse");
    String::from_utf8(p.records[0].metadata.clone().expect("md")).expect("utf-8")
}

#[test]
fn only_the_declarations_a_record_uses_are_copied_into_it() {
    // Element and attribute prefixes, and the prefix of an xsi:type value; n2 is declared
    // again inside (the envelope's is still copied for the root, harmlessly); n4 is the
    // record's own; n9 appears only in text (not a name: not copied).
    let md = metadata(
        &flooded(
            1000,
            "<n1:r xmlns:n4=\"own\" n3:a=\"v\" xsi:type=\"n5:T\"><n2:c xmlns:n2=\"in\"/>\
             <n4:d>n9:text</n4:d><plain/></n1:r>",
        ),
        WIDE,
    );
    let root = md
        .lines()
        .nth(1)
        .and_then(|l| l.split('>').next())
        .expect("root");
    let mut copied: Vec<&str> = root.split(' ').filter(|a| a.starts_with("xmlns")).collect();
    copied.sort_unstable();
    assert_eq!(
        copied,
        [
            "xmlns:n1=\"u:1\"",
            "xmlns:n2=\"u:2\"",
            "xmlns:n3=\"u:3\"",
            "xmlns:n4=\"own\"",
            "xmlns:n5=\"u:5\"",
            "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"",
            "xmlns=\"http://www.openarchives.org/OAI/2.0/\"",
        ],
        "{md}"
    );
    assert!(md.len() < 400, "{} bytes: {md}", md.len());
    // The same record in a response declaring ten times as many: the same bytes.
    let md2 = metadata(
        &flooded(
            10_000,
            "<n1:r xmlns:n4=\"own\" n3:a=\"v\" xsi:type=\"n5:T\"><n2:c xmlns:n2=\"in\"/>\
             <n4:d>n9:text</n4:d><plain/></n1:r>",
        ),
        WIDE,
    );
    assert_eq!(md, md2);
}

#[test]
fn record_and_response_bytes_are_capped() {
    let big = format!("<r>{}</r>", "x".repeat(500));
    let e = parse(
        flooded(0, &big).as_bytes(),
        Limits {
            record: 400,
            response: 1 << 20,
        },
    )
    .expect_err("record cap");
    assert!(e.limit && e.message.contains("maxRecordBytes=400"), "{e}");
    assert!(e.message.contains("\"i\""), "names the record: {e}");
    // The declarations copied count: a small record using a long URI.
    let page = flooded(0, "<n:r/>").replace(
        "<OAI-PMH ",
        &format!("<OAI-PMH xmlns:n=\"{}\" ", "u".repeat(1000)),
    );
    let e = parse(
        page.as_bytes(),
        Limits {
            record: 400,
            response: 1 << 20,
        },
    )
    .expect_err("record cap");
    assert!(e.limit && e.message.contains("maxRecordBytes"), "{e}");
    let e = parse(
        flooded(0, &big).as_bytes(),
        Limits {
            record: 1 << 20,
            response: 300,
        },
    )
    .expect_err("response cap");
    assert!(e.limit && e.message.contains("maxResponseBytes=300"), "{e}");
}
