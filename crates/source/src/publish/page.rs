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
            "{} <a href=\"{u}\">{u}</a> at {}",
            esc(c.change.as_str()),
            esc(&c.datetime.to_string()),
            u = esc(&c.uri)
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
        at = esc(&p.snapshot_at.to_string()),
        cl = p.change_lists,
    )
}
