//! The URI → path rule of the Destination (`resourcesync_model::mapping`) and the checked
//! relative path every file under DEST is named by (`resourcesync_model::path::RelPath`,
//! re-exported by `resourcesync_store`).
//!
//! By the first byte: a `RelPath` parsed from the rest; a resource URI mapped under a fixed
//! base; a base URL (first line) and a URI (the rest); the base-URL rule on four lines. Every
//! path produced must be relative, free of `.`/`..`/empty segments, NUL and backslashes, within
//! the length and depth limits, not inside `.resourcesync`, stay under the root it is joined to,
//! parse back to itself, and map back to itself from the URI made of its percent-encoded
//! segments (under the base, and under another host).
#![no_main]

use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use resourcesync_model::mapping::{UriMapper, base_url, parse_uri};
use resourcesync_model::path::{MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, RelPath};

/// Everything but RFC 3986 unreserved characters.
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

const BASE: &str = "http://example.org:8080/data/";

fn encoded(p: &RelPath) -> String {
    p.segments()
        .map(|s| utf8_percent_encode(s, ENCODE).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

fn check_rel(p: &RelPath) {
    let s = p.as_str();
    assert!(!s.is_empty(), "empty path");
    assert!(!s.starts_with('/'), "absolute: {s:?}");
    assert!(!s.contains('\0'), "NUL: {s:?}");
    assert!(!s.contains('\\'), "backslash: {s:?}");
    assert!(s.len() <= MAX_PATH_BYTES, "too long: {}", s.len());
    let segs: Vec<&str> = p.segments().collect();
    assert!(segs.len() <= MAX_DEPTH, "too deep: {}", segs.len());
    assert_ne!(segs[0], ".resourcesync", "inside the state folder: {s:?}");
    for seg in &segs {
        assert!(!seg.is_empty(), "empty segment: {s:?}");
        assert!(*seg != "." && *seg != "..", "dot segment: {s:?}");
        assert!(seg.len() <= MAX_SEGMENT_BYTES, "segment too long: {s:?}");
    }
    assert!(Path::new(s).is_relative());
    let root = Path::new("/dest/root");
    let under = p.under(root);
    let rest = under.strip_prefix(root).expect("under the root");
    let comps: Vec<Component<'_>> = rest.components().collect();
    assert_eq!(comps.len(), segs.len(), "components of {s:?}: {comps:?}");
    assert!(
        comps.iter().all(|c| matches!(c, Component::Normal(_))),
        "{s:?} joins as {comps:?}"
    );
    // Round trips.
    assert_eq!(
        RelPath::parse(s).ok().as_ref(),
        Some(p),
        "parse(as_str) differs"
    );
    assert_eq!(
        RelPath::from_segments(p.segments()).ok().as_ref(),
        Some(p),
        "from_segments(segments) differs"
    );
    let m = UriMapper::new(BASE).expect("mapper");
    let uri = format!("{BASE}{}", encoded(p));
    match m.map(&uri) {
        Ok(q) => assert_eq!(&q, p, "{uri} maps elsewhere"),
        Err(e) => panic!("{uri} (from {s:?}) does not map back: {e}"),
    }
    let other = format!("http://Other.ORG:81/{}", encoded(p));
    let want = RelPath::from_segments(std::iter::once("other.org_81").chain(p.segments()));
    match (m.map(&other), want) {
        (Ok(q), Ok(w)) => assert_eq!(q, w, "{other}"),
        (Err(_), Err(_)) => {}
        (got, want) => panic!("{other}: mapped {got:?}, expected {want:?}"),
    }
}

fn check_map(m: &UriMapper, uri: &str) {
    let parts = parse_uri(uri);
    let res = m.map(uri);
    if let Ok(parts) = &parts {
        assert!(!parts.host.is_empty());
        assert!(parts.path.is_empty() || parts.path.starts_with('/'));
        assert!(
            !parts.host.contains(['/', '?', '#']),
            "host {:?}",
            parts.host
        );
        assert!(parts.query.is_none_or(|q| !q.contains('#')));
        if res.is_ok() {
            // The URI is examined as written: no dot segment in its path.
            assert!(
                parts.path.split('/').all(|s| s != "." && s != ".."),
                "{uri} with a dot segment mapped"
            );
        }
    } else {
        assert!(res.is_err(), "{uri} mapped though it does not parse");
    }
    if let Ok(p) = res {
        check_rel(&p);
    }
}

fn non_empty(x: Option<&str>) -> Option<&str> {
    x.filter(|x| !x.is_empty())
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(s) = std::str::from_utf8(rest) else {
        return;
    };
    match mode % 4 {
        0 => {
            if let Ok(p) = RelPath::parse(s) {
                check_rel(&p);
            }
        }
        1 => check_map(&UriMapper::new(BASE).expect("mapper"), s),
        2 => {
            let (base, uri) = s.split_once('\n').unwrap_or((s, ""));
            if let Ok(m) = UriMapper::new(base) {
                check_map(&m, uri);
            }
        }
        _ => {
            let mut l = s.splitn(4, '\n');
            let (a, b, c, d) = (l.next(), l.next(), l.next(), l.next().unwrap_or(""));
            let b = base_url(non_empty(a), non_empty(b), non_empty(c), d);
            if let Some(given) = non_empty(a) {
                assert!(b.ends_with('/'), "given base {given:?} gave {b:?}");
            }
            if let Ok(m) = UriMapper::new(&b) {
                check_map(&m, d);
            }
        }
    }
});
