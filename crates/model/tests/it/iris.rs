//! `<loc>`s that are IRIs (spaces, non-ASCII letters): read as their percent-encoded URIs when
//! a Destination asks (`ReadOptions::iris_as_uris`), by the fast path and the general one
//! alike; as written, and reported as invalid URIs (Z39.99-2014 §7), when validated.

use resourcesync_model::validate::validate;
use resourcesync_model::{DocumentReader, ReadOptions};

const DOC: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\
<rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>\
<url><loc>http://e.com/data/sub dir/\u{fc} 1.txt</loc></url>\
<url><!-- the general path --><loc> http://e.com/data/50% off.txt </loc></url>\
<url><loc>http://e.com/data/a%20b.txt</loc></url>\
<url><loc>http://e.com/data/a\tb.txt</loc></url>\
</urlset>";

fn locs(iris_as_uris: bool) -> (Vec<String>, u64) {
    let opts = ReadOptions {
        iris_as_uris,
        ..ReadOptions::named("rl.xml")
    };
    let mut r = DocumentReader::new(DOC.as_bytes(), opts).expect("header");
    let mut locs = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        locs.push(e.loc);
    }
    (locs, r.iris_read())
}

#[test]
fn a_destination_reads_iris_as_their_uris_and_counts_them() {
    let (got, n) = locs(true);
    assert_eq!(
        got,
        [
            "http://e.com/data/sub%20dir/%C3%BC%201.txt",
            "http://e.com/data/50%25%20off.txt",
            "http://e.com/data/a%20b.txt",
            // A tab is not encoded (the HTTP client would strip it): the mapping refuses it.
            "http://e.com/data/a\tb.txt",
        ]
    );
    assert_eq!(n, 2);
}

#[test]
fn the_validator_still_reports_them_as_invalid_uris() {
    let (got, n) = locs(false);
    assert_eq!(got[0], "http://e.com/data/sub dir/\u{fc} 1.txt");
    assert_eq!(n, 0);
    let r = DocumentReader::new(DOC.as_bytes(), ReadOptions::named("rl.xml")).expect("header");
    let report = validate(r).expect("read");
    let bad: Vec<_> = report
        .findings
        .as_slice()
        .iter()
        .filter(|f| f.rule.id == "SM-loc-uri")
        .collect();
    assert_eq!(bad.len(), 3, "{:?}", report.findings);
}
