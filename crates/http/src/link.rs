//! `Link` headers (RFC 8288): what discovery reads (Z39.99-2014 §6.3.3 rel=resourcesync;
//! WebSub §4 rel=hub and rel=self) and what the publisher and the hub write (Change
//! Notification 1.0.1 §4.1, §4.3).
//!
//! Read with the project's one `Link` parser, [`resourcesync_model::discovery::link_header_links`]
//! (RFC 8288 §3: quoted parameter values, the first `rel` of a link only), over at most
//! [`MAX_LINK_HEADER`] bytes of each value.

use resourcesync_model::discovery::link_header_links;

/// Most bytes of a `Link` header value considered.
pub const MAX_LINK_HEADER: usize = 16 * 1024;

/// The targets of every link whose relation types include `rel` (case-insensitive), in order,
/// across all the given header values.
pub fn targets<'a>(values: impl IntoIterator<Item = &'a str>, rel: &str) -> Vec<String> {
    let rel = rel.to_ascii_lowercase();
    let mut out = Vec::new();
    for value in values {
        let value = &value[..floor_char_boundary(value, MAX_LINK_HEADER)];
        out.extend(
            link_header_links(value)
                .into_iter()
                .filter(|(_, rels)| rels.contains(&rel))
                .map(|(target, _)| target),
        );
    }
    out
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    let mut i = max;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The first target of a link with relation `rel`.
pub fn first<'a>(values: impl IntoIterator<Item = &'a str>, rel: &str) -> Option<String> {
    targets(values, rel).into_iter().next()
}

/// The `Link` value of a notification: `<topic>; rel="self", <hub>; rel="hub"` (WebSub §7: the
/// hub SHOULD combine them in one header), plus `<cap>; rel="resourcesync"` when given
/// (Change Notification 1.0.1 §4.1, Example 2).
pub fn notification_links(topic: &str, hub: &str, capability_list: Option<&str>) -> String {
    let mut s = format!("<{topic}>; rel=\"self\", <{hub}>; rel=\"hub\"");
    if let Some(c) = capability_list {
        s.push_str(&format!(", <{c}>; rel=\"resourcesync\""));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_combined_and_separate_headers() {
        let v = "<http://e.org/t>; rel=\"self\", <http://h.org/>; rel=\"hub\"";
        assert_eq!(first([v], "hub").as_deref(), Some("http://h.org/"));
        assert_eq!(first([v], "self").as_deref(), Some("http://e.org/t"));
        let vs = [
            "<http://a/>; rel=hub",
            "<http://b/> ; rel=\"alternate self\"",
        ];
        assert_eq!(first(vs, "self").as_deref(), Some("http://b/"));
        assert_eq!(targets(vs, "hub"), vec!["http://a/".to_owned()]);
        assert!(first(["garbage <"], "hub").is_none());
    }

    /// RFC 8288 §3: a quoted parameter value may hold `<`, `>`, `;` and `,`; §3.3: only the
    /// first `rel` of a link counts. The naive parser took `<http://evil/>` inside a quoted
    /// `title` for a link with the `rel` that follows it, and a quoted `; rel=hub` for a
    /// relation.
    #[test]
    fn quoted_parameters_and_second_rels_are_not_relations() {
        let v = "<http://a/>; title=\"<http://evil/>\"; rel=hub";
        assert_eq!(targets([v], "hub"), vec!["http://a/".to_owned()]);
        assert!(first(["<http://a/>; title=\"x; rel=hub\""], "hub").is_none());
        assert!(first(["<http://a/>; rel=next; rel=hub"], "hub").is_none());
        assert_eq!(
            first(["<http://a/>; REL=\"Next HUB\""], "Hub").as_deref(),
            Some("http://a/")
        );
    }

    #[test]
    fn writes_what_it_reads() {
        let v = notification_links("http://s/t", "http://h/", Some("http://s/cl.xml"));
        assert_eq!(first([v.as_str()], "self").as_deref(), Some("http://s/t"));
        assert_eq!(first([v.as_str()], "hub").as_deref(), Some("http://h/"));
        assert_eq!(
            first([v.as_str()], "resourcesync").as_deref(),
            Some("http://s/cl.xml")
        );
    }
}
