//! The page for people (`GET /`, and `resourcesync/index.html` in a static publish): what the
//! Source offers, how much, how recent, with a link to every document.

use resourcesync_model::W3cDateTime;

use crate::state::ChangeRecord;

/// What the page shows.
#[derive(Debug, Clone)]
pub struct PageInfo {
    /// The base URL.
    pub base: String,
    /// Resources in the newest snapshot.
    pub resources: u64,
    /// When the newest snapshot began.
    pub snapshot_at: W3cDateTime,
    /// The most recent change, if any.
    pub last_change: Option<ChangeRecord>,
    /// Number of Change Lists.
    pub change_lists: usize,
    /// (title, URL) of every document.
    pub documents: Vec<(String, String)>,
}

/// The `Content-Security-Policy` of the pages for people that a server writes itself (the
/// Source's page of `serve`, the aggregator's pages): their inline style, nothing else loaded,
/// no script, no form, not framed. What a hostile name or URL could slip past the escaping
/// ([`esc`]) cannot run.
pub const PAGE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; \
                            base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The `Content-Security-Policy` of the bytes a server sends but did not write (the resources
/// `serve` serves, the copies an aggregator republishes): `sandbox`, so that an HTML or SVG
/// file runs no script and reaches no cookie or storage of the server's origin (a unique
/// origin), sent with `X-Content-Type-Options: nosniff`.
pub const SANDBOX_CSP: &str = "sandbox";

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// How the pages show every time: in UTC, to the second (`2024-05-01 12:00:00 UTC`), whatever
/// the offset and precision the document or the state wrote it with.
const TIME_FORMAT: &str = "%Y-%m-%d %H:%M:%S UTC";

/// A time as the pages show it ([`TIME_FORMAT`]).
pub(crate) fn when(t: &resourcesync_model::W3cDateTime) -> String {
    stamp(t.timestamp())
}

/// An instant as the pages show it ([`TIME_FORMAT`]).
pub(crate) fn stamp(t: jiff::Timestamp) -> String {
    t.strftime(TIME_FORMAT).to_string()
}

/// A URI as people write it: under the Source's base URL its name relative to it, each path
/// segment percent-decoded (`ü 1.txt`, not `%C3%BC%201.txt`; RFC 3986 §2.1). A segment stays
/// as written when its decoded form is not UTF-8, or would read as another structure or
/// mislead the eye (a `/`, `?` or `#`, a control or bidirectional formatting character).
/// The caller escapes the result for HTML.
pub(crate) fn name_shown(base: &str, uri: &str) -> String {
    let rest = match uri.strip_prefix(base) {
        Some(r) if !r.is_empty() && base.ends_with('/') => r,
        _ => uri,
    };
    rest.split('/')
        .map(|seg| {
            let decoded = percent_encoding::percent_decode_str(seg).decode_utf8();
            match decoded {
                Ok(d) if !d.chars().any(misleading) => d.into_owned(),
                _ => seg.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Whether a decoded character would change how a name reads: a separator, a control
/// character, or a bidirectional formatting character (which reorders what follows it).
fn misleading(c: char) -> bool {
    matches!(c, '/' | '?' | '#')
        || c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Renders the page.
pub fn render(p: &PageInfo) -> String {
    let mut docs = String::new();
    for (title, url) in &p.documents {
        docs.push_str(&format!(
            "<li><a href=\"{u}\">{t}</a> <code>{u}</code></li>\n",
            u = esc(url),
            t = esc(title)
        ));
    }
    let last = match &p.last_change {
        Some(c) => format!(
            "{} <a href=\"{u}\">{n}</a> at {}",
            esc(c.change.as_str()),
            esc(&when(&c.datetime)),
            u = esc(&c.uri),
            n = esc(&name_shown(&p.base, &c.uri))
        ),
        None => "none yet".into(),
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>ResourceSync Source {base}</title>\
         <link rel=\"resourcesync\" href=\"{cap}\">\
         <style>body{{font-family:sans-serif;max-width:50em;margin:2em auto;padding:0 1em}}code{{color:#555}}</style>\
         </head><body>\n<h1>ResourceSync Source</h1>\n<p><code>{base}</code></p>\n\
         <table><tr><th align=left>Resources</th><td>{n}</td></tr>\
         <tr><th align=left>Snapshot</th><td>{at}</td></tr>\
         <tr><th align=left>Change Lists</th><td>{cl}</td></tr>\
         <tr><th align=left>Last change</th><td>{last}</td></tr></table>\n\
         <h2>Documents</h2>\n<ul>\n{docs}</ul>\n\
         <p>Synchronize with any ResourceSync Destination, e.g. <code>resourcesync sync {base} DEST</code>.</p>\n\
         </body></html>\n",
        base = esc(&p.base),
        cap = esc(p
            .documents
            .iter()
            .find(|(t, _)| t == "Capability List")
            .map(|(_, u)| u.as_str())
            .unwrap_or("")),
        n = p.resources,
        at = esc(&when(&p.snapshot_at)),
        cl = p.change_lists,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shown_decoded_as_people_write_them() {
        let base = "http://127.0.0.1:8080/";
        assert_eq!(
            name_shown(base, "http://127.0.0.1:8080/d%C3%BCr/%C3%BC%201.txt"),
            "dür/ü 1.txt"
        );
        // Outside the base: the whole URI, decoded the same way.
        assert_eq!(
            name_shown(base, "http://other.example/a%20b"),
            "http://other.example/a b"
        );
        // Not UTF-8, or decoded into something else than a name: as written.
        for kept in [
            "caf%E9",
            "a%2Fb",
            "a%3Fb",
            "a%23b",
            "a%0Ab",
            "a%E2%80%AEgpj.exe",
            "%ZZ",
        ] {
            assert_eq!(name_shown(base, &format!("{base}{kept}")), kept);
        }
        assert_eq!(name_shown(base, base), base);
        // Escaped for HTML by the caller.
        assert_eq!(
            esc(&name_shown(base, &format!("{base}%3Cb%3E%26"))),
            "&lt;b&gt;&amp;"
        );
    }

    #[test]
    fn every_time_is_shown_in_one_format() {
        for (written, shown) in [
            ("2024-05-01T12:00:00Z", "2024-05-01 12:00:00 UTC"),
            (
                "2024-05-01T14:00:00.123456+02:00",
                "2024-05-01 12:00:00 UTC",
            ),
            ("2024-05-01", "2024-05-01 00:00:00 UTC"),
        ] {
            let t = W3cDateTime::parse(written).expect("a time");
            assert_eq!(when(&t), shown, "{written}");
        }
        let lease = jiff::Timestamp::from_second(1_714_564_800).expect("instant");
        assert_eq!(stamp(lease), "2024-05-01 12:00:00 UTC");
    }
}
