//! Change Notification payloads (Change Notification 1.0.1 §3: what a WebSub hub delivers to a
//! subscribed Destination) through the model's reader and validator, with the `Link` header of
//! the delivery (RFC 8288; `rel="self"`, `rel="hub"`, `rel="resourcesync"`, Change
//! Notification §5).
//!
//! The first line of the input is the `Link` header (its links are parsed; targets and relation
//! types must come from it, whole); the rest is the payload, as is (first byte
//! even) or between a fixed `change-notification` prolog and `</urlset>` (first byte odd, so
//! that mutations work on entries). Must never panic, hang or allocate without bound; the
//! report must count what was read; and a payload the validator finds valid must have what
//! Change Notification §3 requires: `from` and `until`, an absolute `<loc>` and a `change` on
//! every entry, entries in forward chronological order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resourcesync_model::discovery::{link_header_links, link_header_targets};
use resourcesync_model::validate::{is_absolute_uri, validate_each};
use resourcesync_model::{Capability, DocumentReader, ReadOptions, W3cDateTime};

const PROLOG: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
<rs:ln rel="up" href="http://example.com/dataset1/capabilitylist.xml"/>
<rs:md capability="change-notification" from="2013-01-03T00:00:00Z" until="2013-01-03T00:10:00Z"/>
"#;

fn opts() -> ReadOptions {
    ReadOptions {
        max_document_bytes: 1024 * 1024,
        max_token_bytes: 64 * 1024,
        max_depth: 16,
        max_namespace_bindings: 32,
        max_children: 256,
        max_findings: 64,
        ..ReadOptions::named("notification.xml")
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (link, body) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let link = String::from_utf8_lossy(link);
    let links = link_header_links(&link);
    for (target, rels) in &links {
        assert!(link.contains(target.as_str()), "{target:?} not in the header");
        assert!(!target.contains(['<', '>']), "{target:?}");
        for r in rels {
            assert!(!r.is_empty() && !r.contains(|c: char| c.is_ascii_whitespace()), "{r:?}");
            assert_eq!(*r, r.to_ascii_lowercase());
        }
    }
    let rs = link_header_targets(&link);
    assert_eq!(
        rs.len(),
        links
            .iter()
            .filter(|(_, r)| r.iter().any(|r| r == "resourcesync"))
            .count()
    );
    let doc = if mode % 2 == 0 {
        body.to_vec()
    } else {
        [PROLOG.as_bytes(), body, b"</urlset>\n"].concat()
    };
    let reader = match DocumentReader::open(std::io::Cursor::new(doc), opts()) {
        Ok(r) => r,
        Err(e) => {
            assert!(e.to_string().contains("notification.xml"), "{e}");
            return;
        }
    };
    let header = reader.header().clone();
    let mut entries = Vec::new();
    let report = match validate_each(reader, |e| entries.push(e.clone())) {
        Ok(r) => r,
        Err(e) => {
            assert!(e.to_string().contains("notification.xml"), "{e}");
            return;
        }
    };
    assert_eq!(report.entries, entries.len() as u64, "entries counted");
    assert_eq!(report.capability.as_ref(), header.capability());
    if report.is_valid() && header.capability() == Some(&Capability::ChangeNotification) {
        let md = header.md.as_ref().expect("valid: <rs:md>");
        assert!(
            md.from.is_some() && md.until.is_some(),
            "valid without from/until"
        );
        let mut prev: Option<W3cDateTime> = None;
        for e in &entries {
            assert!(is_absolute_uri(&e.loc), "valid with <loc> {:?}", e.loc);
            assert!(e.change().is_some(), "valid without change: {}", e.loc);
            if let Some(t) = e.change_time() {
                if let Some(p) = &prev {
                    assert!(
                        p.cmp_instant(t) != std::cmp::Ordering::Greater,
                        "valid with entries going back in time"
                    );
                }
                prev = Some(*t);
            }
        }
    }
});
