//! The parsers of discovery (Z39.99-2014 §6.3): the `Link` header (RFC 8288), HTML
//! `<link rel="resourcesync">` (§6.3.3) and the `Sitemap:` lines of `robots.txt` (§6.3.4).
//!
//! By the first byte: each parser on the rest as text (no panic; what they return is taken from
//! the input and bounded), or a `Link` header rendered from structured links (targets, and
//! parameters as tokens or quoted strings, RFC 8288 §3) whose `rel="resourcesync"` targets must
//! be exactly those found.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use resourcesync_model::discovery::{html_link_targets, link_header_targets, robots_sitemaps};

#[derive(Arbitrary, Debug)]
struct Param {
    name: String,
    value: Option<(bool, String)>,
}

#[derive(Arbitrary, Debug)]
struct Link {
    target: String,
    params: Vec<Param>,
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// The header, and the targets it links with `rel` "resourcesync".
fn render(links: &[Link]) -> (String, Vec<String>) {
    let mut parts = Vec::new();
    let mut want = Vec::new();
    for l in links {
        let target: String = l
            .target
            .chars()
            .filter(|c| c.is_ascii_graphic() && !"<>".contains(*c))
            .collect();
        let mut s = format!("<{target}>");
        let mut rel_seen = false;
        let mut is_rs = false;
        for p in &l.params {
            let name: String = p.name.chars().filter(|c| is_tchar(*c)).collect();
            if name.is_empty() {
                continue;
            }
            s.push_str("; ");
            s.push_str(&name);
            let value = match &p.value {
                None => None,
                Some((true, v)) => {
                    // quoted-string: qdtext, with `"` and `\` as quoted-pairs.
                    let v: String = v
                        .chars()
                        .filter(|c| *c == '\t' || *c == ' ' || c.is_ascii_graphic())
                        .collect();
                    let mut q = String::from("\"");
                    for c in v.chars() {
                        if c == '"' || c == '\\' {
                            q.push('\\');
                        }
                        q.push(c);
                    }
                    q.push('"');
                    s.push('=');
                    s.push_str(&q);
                    Some(v)
                }
                Some((false, v)) => {
                    let v: String = v.chars().filter(|c| is_tchar(*c)).collect();
                    if v.is_empty() {
                        None
                    } else {
                        s.push('=');
                        s.push_str(&v);
                        Some(v)
                    }
                }
            };
            // RFC 8288 §3.3: occurrences of `rel` after the first are ignored.
            if name.eq_ignore_ascii_case("rel") && !rel_seen {
                rel_seen = true;
                is_rs = value.is_some_and(|v| {
                    v.split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("resourcesync"))
                });
            }
        }
        if is_rs {
            want.push(target);
        }
        parts.push(s);
    }
    (parts.join(", "), want)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 4 == 3 {
        let Ok(links) = Vec::<Link>::arbitrary_take_rest(Unstructured::new(rest)) else {
            return;
        };
        let (header, want) = render(&links);
        assert_eq!(link_header_targets(&header), want, "Link: {header}");
        return;
    }
    let s = String::from_utf8_lossy(rest);
    match mode % 4 {
        0 => {
            let t = link_header_targets(&s);
            assert!(t.len() <= s.matches('<').count());
            for x in &t {
                assert!(s.contains(x.as_str()), "{x:?} not in the header");
                assert!(!x.contains(['<', '>']), "{x:?}");
            }
        }
        1 => {
            let t = html_link_targets(&s);
            assert!(t.len() <= s.to_ascii_lowercase().matches("<link").count());
            for x in &t {
                assert!(x.len() <= s.len(), "{x:?}");
            }
        }
        _ => {
            let t = robots_sitemaps(&s);
            assert!(t.len() <= 50);
            for x in &t {
                assert!(!x.is_empty());
                assert_eq!(x.trim(), x);
                assert!(!x.contains('\n'));
                assert!(s.contains(x.as_str()), "{x:?} not in robots.txt");
            }
        }
    }
});
