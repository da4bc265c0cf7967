//! The pure parsers of Source discovery (Z39.99-2014 §6.3), sans I/O: the `Link` header
//! (RFC 8288 §3; §6.3.3), HTML `<link rel="resourcesync" href>` elements (§6.3.3, Example 9)
//! and the `Sitemap:` lines of `robots.txt` (§6.3.4, Example 11).
//!
//! The `Link` header parser is also the one WebSub discovery and Change Notification deliveries
//! are read with (`rel="hub"`, `rel="self"`: WebSub §4; Change Notification 1.0.1 §5). Every
//! result is taken from the input, and bounded by it (the `Sitemap:` lines to the first 50).
//! The callers fetch the text, resolve relative targets and decide what to follow.

/// Most `Sitemap:` lines of `robots.txt` returned by [`robots_sitemaps`].
const MAX_ROBOTS_SITEMAPS: usize = 50;

/// Whether `c` may appear in an RFC 9110 §5.6.2 token.
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn is_ows(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// The index of the next `,` at or after `i` outside a quoted string, or the end.
fn skip_to_comma(b: &[u8], mut i: usize) -> usize {
    let mut quoted = false;
    while i < b.len() {
        match b[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b',' if !quoted => return i,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// The links of a `Link` header (RFC 8288 §3), in order: each target (as written, trimmed) with
/// the relation types of its first `rel` parameter, lower case (§3.3: later `rel` parameters
/// are ignored). Parameter values are tokens or quoted strings (RFC 9110 §5.6.4), so a `,`, `;`
/// or `<` inside quotes belongs to the value. A link-value that does not start with `<` is
/// skipped up to the next `,`; a `<` before the `>` that ends a target starts the target
/// again (a URI-Reference has no `<`).
pub fn link_header_links(value: &str) -> Vec<(String, Vec<String>)> {
    let b = value.as_bytes();
    let skip_ows = |i: &mut usize| {
        while *i < b.len() && is_ows(b[*i]) {
            *i += 1;
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && (is_ows(b[i]) || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        if b[i] != b'<' {
            i = skip_to_comma(b, i);
            continue;
        }
        let Some(len) = value[i..].find('>') else {
            break;
        };
        // A `<` cannot be part of a URI-Reference: the target starts after the last one.
        let open = i + value[i..i + len].rfind('<').unwrap_or(0);
        let target = value[open + 1..i + len].trim().to_owned();
        i += len + 1;
        let mut rel: Option<Vec<String>> = None;
        loop {
            skip_ows(&mut i);
            if i >= b.len() || b[i] == b',' {
                break;
            }
            if b[i] != b';' {
                i = skip_to_comma(b, i);
                break;
            }
            i += 1;
            skip_ows(&mut i);
            let name_start = i;
            while i < b.len() && is_tchar(b[i]) {
                i += 1;
            }
            let name = &value[name_start..i];
            skip_ows(&mut i);
            let mut param = None;
            if i < b.len() && b[i] == b'=' {
                i += 1;
                skip_ows(&mut i);
                if i < b.len() && b[i] == b'"' {
                    // quoted-string, with quoted-pairs; unterminated: to the end.
                    let mut v = String::new();
                    let mut end = b.len();
                    let mut chars = value[i + 1..].char_indices();
                    while let Some((k, c)) = chars.next() {
                        match c {
                            '"' => {
                                end = i + 1 + k + 1;
                                break;
                            }
                            '\\' => v.extend(chars.next().map(|(_, c)| c)),
                            c => v.push(c),
                        }
                    }
                    i = end;
                    param = Some(v);
                } else {
                    let start = i;
                    while i < b.len() && !is_ows(b[i]) && b[i] != b';' && b[i] != b',' {
                        i += 1;
                    }
                    param = Some(value[start..i].to_owned());
                }
            }
            if rel.is_none() && name.eq_ignore_ascii_case("rel") {
                rel = Some(
                    param
                        .unwrap_or_default()
                        .split_ascii_whitespace()
                        .map(str::to_ascii_lowercase)
                        .collect(),
                );
            }
        }
        out.push((target, rel.unwrap_or_default()));
    }
    out
}

/// The targets of `rel="resourcesync"` links in a `Link` header (RFC 8288; Z39.99-2014
/// §6.3.3), see [`link_header_links`].
pub fn link_header_targets(value: &str) -> Vec<String> {
    link_header_links(value)
        .into_iter()
        .filter(|(_, rels)| rels.iter().any(|r| r == "resourcesync"))
        .map(|(target, _)| target)
        .collect()
}

/// The values of the `Sitemap:` lines of a `robots.txt` (Z39.99-2014 §6.3.4; the field name is
/// case-insensitive), trimmed, empty ones left out, at most the first 50.
pub fn robots_sitemaps(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("sitemap")
                .then(|| v.trim().to_owned())
        })
        .filter(|v| !v.is_empty())
        .take(MAX_ROBOTS_SITEMAPS)
        .collect()
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let at = from + i;
        from = at + name.len();
        let before_ok = at == 0
            || lower.as_bytes()[at - 1].is_ascii_whitespace()
            || lower.as_bytes()[at - 1] == b'<';
        let rest = lower[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let off = tag.len() - rest.len() + 1;
        let v = tag[off..].trim_start();
        return Some(match v.chars().next() {
            Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or_default(),
            _ => v
                .split(|c: char| c.is_ascii_whitespace() || c == '>')
                .next()
                .unwrap_or_default(),
        });
    }
    None
}

/// The targets of `<link rel="resourcesync" href="...">` elements in an HTML page
/// (Z39.99-2014 §6.3.3, Example 9).
pub fn html_link_targets(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("<link") {
        let start = from + i;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        let tag = &html[start..end];
        from = end;
        let is_rs = attr(tag, "rel").is_some_and(|r| {
            r.split_ascii_whitespace()
                .any(|r| r.eq_ignore_ascii_case("resourcesync"))
        });
        if let (true, Some(href)) = (is_rs, attr(tag, "href")) {
            out.push(href.replace("&amp;", "&"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers() {
        assert_eq!(
            link_header_targets(
                "<http://e.com/a.css>; rel=stylesheet, <http://e.com/cap.xml>;\n rel=\"resourcesync\""
            ),
            ["http://e.com/cap.xml"]
        );
        assert!(link_header_targets("<x>; rel=\"next\"").is_empty());
    }

    #[test]
    fn link_headers_of_a_websub_delivery() {
        // Change Notification 1.0.1 §5, Example 2.
        let h = "<http://example.com/dataset1/change/> ; rel=\"self\",\n <http://hub.example.org/websub/> ; rel=\"hub\",\n <http://www.example.com/dataset1/capabilitylist.xml> ; rel=\"resourcesync\"";
        assert_eq!(
            link_header_links(h),
            [
                (
                    "http://example.com/dataset1/change/".into(),
                    vec!["self".into()]
                ),
                ("http://hub.example.org/websub/".into(), vec!["hub".into()]),
                (
                    "http://www.example.com/dataset1/capabilitylist.xml".into(),
                    vec!["resourcesync".into()]
                ),
            ] as [(String, Vec<String>); 3]
        );
    }

    /// Fuzz target `discover` (artifact crash-quoted-rel): RFC 8288 §3 parameter values may be
    /// quoted strings holding `;`, `,`, `<`, `>` and white space: a quoted `rel` with several
    /// types is found, and a `<...>` inside a quoted value is not a link (splitting at `;` and
    /// `<` gets both wrong).
    #[test]
    fn fuzz_link_header_quoted_parameters() {
        assert_eq!(
            link_header_targets("<http://e/a>; rel=\">;(\tresourcesync\t\""),
            ["http://e/a"]
        );
        assert_eq!(
            link_header_targets("<http://e/a>; title=\"see <http://e/b>\"; rel=resourcesync"),
            ["http://e/a"]
        );
        assert!(link_header_targets("<http://e/a>; title=\";rel=resourcesync\"").is_empty());
        assert_eq!(
            link_header_targets(
                "<http://e/a>; title=\"a, \\\"b\\\", c\", <http://e/c>; REL=\"Next ResourceSync\""
            ),
            ["http://e/c"]
        );
        // RFC 8288 §3.3: a second `rel` is ignored.
        assert!(link_header_targets("<http://e/a>; rel=next; rel=resourcesync").is_empty());
        // Unterminated quotes and targets end the header without a panic.
        assert!(link_header_targets("<http://e/a>; rel=\"resourcesync").len() == 1);
        assert!(link_header_targets("<http://e/a; rel=resourcesync").is_empty());
    }

    /// Fuzz target `discover` (artifact crash-lt-in-target): a target holds no `<` (it is not
    /// everything between the first `<` and the next `>`).
    #[test]
    fn fuzz_link_header_target_has_no_lt() {
        assert_eq!(
            link_header_targets(
                "<http://e.com/a.cs<http://wtylesheet, <http://www.example.com/cap.xml>;\n rel=\"resourcesync\""
            ),
            ["http://www.example.com/cap.xml"]
        );
    }

    #[test]
    fn robots_sitemap_lines() {
        // Z39.99-2014 §6.3.4, Example 11; field names are case-insensitive.
        let t = "User-agent: *\r\nDisallow: /cgi-bin/\nSitemap: http://example.com/dataset1/resourcelist.xml\nsitemap:\nSITEMAP :  http://example.com/b.xml  \n";
        assert_eq!(
            robots_sitemaps(t),
            [
                "http://example.com/dataset1/resourcelist.xml",
                "http://example.com/b.xml"
            ]
        );
        let many = "Sitemap: http://e/x\n".repeat(80);
        assert_eq!(robots_sitemaps(&many).len(), MAX_ROBOTS_SITEMAPS);
    }

    #[test]
    fn html_links() {
        let page = r#"<html><HEAD><link rel="stylesheet" href="s.css">
            <LINK REL="resourcesync" HREF='http://www.example.com/dataset1/capabilitylist.xml'/>
            <link href=/cap2.xml rel=resourcesync></head></html>"#;
        assert_eq!(
            html_link_targets(page),
            [
                "http://www.example.com/dataset1/capabilitylist.xml",
                "/cap2.xml"
            ]
        );
    }
}
