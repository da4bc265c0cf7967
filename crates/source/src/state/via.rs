//! A resource's provenance link (`<rs:ln rel="via">`, Z39.99-2014 §14.8: the URI of the
//! resource at the original Source, and the original's `modified`, `hash`, `length` and
//! `type`), as the state keeps it: one text column, its fields on lines of their own
//! (`href`, `modified`, `length`, `hash`, `type`; an absent one empty). None of them holds a
//! line break (a URI, a W3C datetime, digits, `alg:hex` tokens, a media type), and one that
//! would is left out rather than kept garbled.

use resourcesync_model::{Hashes, Link, W3cDateTime};

/// The relation of a provenance link (Z39.99-2014 §7, §14.8).
pub const VIA: &str = "via";

fn clean(s: &str) -> &str {
    if s.contains(['\n', '\r']) { "" } else { s }
}

/// The text kept for a provenance link.
pub fn via_text(l: &Link) -> String {
    let modified = l.modified.map(|m| m.to_string()).unwrap_or_default();
    let length = l.length.map(|n| n.to_string()).unwrap_or_default();
    let hash = l.hash.as_ref().map(|h| h.to_string()).unwrap_or_default();
    format!(
        "{}\n{}\n{}\n{}\n{}",
        clean(&l.href),
        modified,
        length,
        clean(&hash),
        clean(l.mime_type.as_deref().unwrap_or_default())
    )
}

/// The provenance link of a kept text (`None` for one without a `href`).
pub fn via_link(s: &str) -> Option<Box<Link>> {
    let mut f = s.split('\n');
    let href = f.next().filter(|h| !h.is_empty())?;
    let mut l = Link::new(VIA, href);
    l.modified = f.next().and_then(|m| W3cDateTime::parse(m).ok());
    l.length = f.next().and_then(|n| n.parse().ok());
    l.hash = f
        .next()
        .filter(|h| !h.is_empty())
        .map(|h| Hashes::parse(h).0)
        .filter(|h| !h.is_empty());
    l.mime_type = f.next().filter(|t| !t.is_empty()).map(str::to_owned);
    Some(Box::new(l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_comes_back_as_kept() {
        let mut l = Link::new(VIA, "http://original.example/a b");
        l.modified = W3cDateTime::parse("2013-01-03T07:00:00Z").ok();
        l.length = Some(8876);
        l.hash = Some(Hashes::parse("md5:1584abdf8ebdc9802ac0c6a7402c03b6").0);
        l.mime_type = Some("text/html".into());
        let back = via_link(&via_text(&l)).expect("link");
        assert_eq!(*back, l);
        let bare = Link::new(VIA, "http://o.example/x");
        assert_eq!(*via_link(&via_text(&bare)).expect("link"), bare);
        assert!(via_link("\n\n\n\n").is_none());
        assert!(via_link("").is_none());
    }
}
