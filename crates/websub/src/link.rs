//! `Link` headers (RFC 8288): what WebSub discovery reads (WebSub §4: rel=hub and rel=self) and
//! what the publisher and the hub write (Change Notification 1.0.1 §4.1, §4.3).
//!
//! Written by hand: the grammar needed is small (`<uri>; rel="a b"` items separated by commas)
//! and the crates that parse it pull in far more than this.

/// Most bytes of a `Link` header value considered.
const MAX_LINK_HEADER: usize = 16 * 1024;

/// The targets of every link whose `rel` includes `rel` (case-insensitive), in order, across
/// all the given header values.
pub fn targets<'a>(values: impl IntoIterator<Item = &'a str>, rel: &str) -> Vec<String> {
    let mut out = Vec::new();
    for value in values {
        let value = &value[..floor_char_boundary(value, MAX_LINK_HEADER)];
        let mut rest = value;
        while let Some(start) = rest.find('<') {
            let Some(end) = rest[start..].find('>') else {
                break;
            };
            let target = rest[start + 1..start + end].trim();
            let after = &rest[start + end + 1..];
            let params_end = after.find('<').unwrap_or(after.len());
            let params = &after[..params_end];
            let matches = params.split(';').any(|p| {
                let p = p.trim().trim_end_matches(',').trim();
                p.split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("rel")
                        && v.trim()
                            .trim_matches('"')
                            .split_ascii_whitespace()
                            .any(|r| r.eq_ignore_ascii_case(rel))
                })
            });
            if matches {
                out.push(target.to_owned());
            }
            rest = after;
        }
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
