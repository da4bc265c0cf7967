//! Unit tests of the module.

use super::*;

#[test]
fn ranges() {
    assert_eq!(parse_range("bytes=0-4", 10), Range::Part(0, 4));
    assert_eq!(parse_range("bytes=5-", 10), Range::Part(5, 9));
    assert_eq!(parse_range("bytes=-3", 10), Range::Part(7, 9));
    assert_eq!(parse_range("bytes=-30", 10), Range::Part(0, 9));
    assert_eq!(parse_range("bytes=2-100", 10), Range::Part(2, 9));
    assert_eq!(parse_range("BYTES=1-1", 10), Range::Part(1, 1));
    assert_eq!(parse_range("bytes=10-", 10), Range::Unsatisfiable);
    assert_eq!(parse_range("bytes=-0", 10), Range::Unsatisfiable);
    assert_eq!(parse_range("bytes=0-", 0), Range::Unsatisfiable);
    assert_eq!(parse_range("bytes=0-1,3-4", 10), Range::Whole);
    assert_eq!(parse_range("bytes=5-2", 10), Range::Whole);
    assert_eq!(parse_range("bytes=+1-2", 10), Range::Whole);
    assert_eq!(parse_range("items=0-1", 10), Range::Whole);
    assert_eq!(parse_range("bytes", 10), Range::Whole);
}

#[test]
fn entity_tags() {
    let t = "\"md5-abc\"";
    let v = |s: &'static str| HeaderValue::from_static(s);
    assert!(tag_list_matches(&v("\"md5-abc\""), t, true));
    assert!(tag_list_matches(&v("W/\"md5-abc\""), t, true));
    assert!(!tag_list_matches(&v("W/\"md5-abc\""), t, false));
    assert!(tag_list_matches(&v("\"x\", \"md5-abc-gzip\""), t, true));
    assert!(tag_list_matches(&v("*"), t, false));
    assert!(!tag_list_matches(&v("\"md5-abd\""), t, true));
}

#[test]
fn dates_and_codings() {
    let d = http_date(784_111_777).expect("date");
    assert_eq!(d, "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(
        parse_http_date(&HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT")),
        Some(784_111_777)
    );
    let mut h = HeaderMap::new();
    h.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("br, gzip;q=0.5"),
    );
    assert!(accepts_gzip(&h));
    h.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("gzip;q=0, br"),
    );
    assert!(!accepts_gzip(&h));
    assert_eq!(base_path("http://h:1/"), "/");
    assert_eq!(base_path("https://h/data/"), "/data/");
}
