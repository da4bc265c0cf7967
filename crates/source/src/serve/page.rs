//! The Source's page (`GET /` of `serve`, under the base path): what the Source publishes,
//! for people, in plain HTML (no script). The overview shows the resources, the recent
//! changes (from the state), every document, and the subscribers of the Source's topics when
//! the hub is embedded; `?doc=NAME` shows one document as a table of its entries, [`PAGE`] at
//! a time (`&page=N`). The overview carries the HTML discovery link (Z39.99-2014 §6.3.3).
//!
//! A document is read from the documents folder, streamed: only the page shown is kept. Only
//! names found in that folder are opened (no path from the query reaches the file system).

use std::fmt::Write as _;
use std::io::BufReader;
use std::path::Path;

use resourcesync_model::{DocumentReader, Entry, ReadOptions};

use super::*;
use crate::publish::page::{esc, name_shown, stamp, when};

/// Entries per page of a document.
pub(super) const PAGE: u64 = 100;

/// Recent changes shown on the overview.
const RECENT: usize = 20;

/// Documents listed on the overview at most (a long-running Source has many Change Lists).
const MAX_LISTED: usize = 500;

/// How deep the documents folder is walked (`resourcelists/000002/resourcelist.xml`).
const MAX_DEPTH: usize = 3;

/// The look of the aggregator's page (crates/aggregate/src/web.rs).
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;width:100%;margin-bottom:1em}\
td,th{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
th{background:#f4f4f4;white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}\
td.t{white-space:nowrap;font-size:90%}small,code{color:#555;overflow-wrap:anywhere}\
.created{color:#1b5e20}.updated{color:#0d47a1}.deleted{color:#b00020}nav a{margin-right:1em}";

/// What is escaped in a query value (a document's name keeps its `/`, `.`, `-` and `_`).
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'.')
    .remove(b'-')
    .remove(b'_');

/// The query of the page: `doc` and `page`.
#[derive(Debug, Default)]
struct Query {
    doc: Option<String>,
    page: u64,
}

fn parse_query(q: Option<&str>) -> Query {
    let mut out = Query::default();
    for pair in q.unwrap_or("").split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = percent_encoding::percent_decode_str(v)
            .decode_utf8_lossy()
            .into_owned();
        match k {
            "doc" => out.doc = Some(v),
            "page" => out.page = v.parse::<u64>().unwrap_or(1).saturating_sub(1),
            _ => {}
        }
    }
    out
}

/// Answers `GET`/`HEAD` of the page.
pub(super) async fn page(app: Arc<App>, query: Option<&str>, head: bool) -> Response {
    let q = parse_query(query);
    let html = tokio::task::spawn_blocking(move || match &q.doc {
        Some(d) => browse(&app, d, q.page),
        None => Some(overview(&app)),
    })
    .await
    .ok()
    .flatten();
    let Some(html) = html else {
        return not_found();
    };
    let len = html.len();
    let mut r = Response::new(if head {
        Body::empty()
    } else {
        Body::from(html)
    });
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(HTML));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::page::PAGE_CSP),
    );
    r
}

/// The documents under the documents folder: relative names with `/`, sorted.
fn documents(docs: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{rel}{name}");
            match e.file_type() {
                Ok(t) if t.is_dir() && depth < MAX_DEPTH => {
                    walk(&e.path(), &format!("{rel}/"), depth + 1, out);
                }
                Ok(t) if t.is_file() && name.ends_with(".xml") => out.push(rel),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(docs, "", 0, &mut out);
    // The Capability List, the other top-level documents, then the numbered ones, newest
    // first.
    let rank = |d: &str| (d != "capabilitylist.xml", d.contains('/'));
    out.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then_with(|| if a.contains('/') { b.cmp(a) } else { a.cmp(b) })
    });
    out
}

/// The page around `body`.
fn html(app: &App, title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{t}</title>\
         <link rel=\"resourcesync\" href=\"{cap}\">\
         <style>{STYLE}</style></head><body>\n{body}\n</body></html>\n",
        t = esc(title),
        cap = esc(&app.layout.doc_url("capabilitylist.xml")),
    )
}

/// The link to a document's page.
fn browse_link(app: &App, name: &str, page: u64) -> String {
    let mut q = format!(
        "{}?doc={}",
        app.prefix,
        percent_encoding::utf8_percent_encode(name, QUERY_VALUE)
    );
    if page > 0 {
        let _ = write!(q, "&amp;page={}", page + 1);
    }
    q
}

fn overview(app: &App) -> String {
    let mut b = String::new();
    let base = &app.layout.base;
    let _ = write!(
        b,
        "<h1>ResourceSync Source</h1>\n<p><code>{}</code> — synchronize with any ResourceSync \
         Destination, e.g. <code>resourcesync sync {} DEST</code></p>\n",
        esc(base),
        esc(base)
    );
    let (snapshot, recent) = match app.state.lock() {
        Ok(st) => (
            st.last_snapshot().ok().flatten(),
            st.recent_changes(RECENT).unwrap_or_default(),
        ),
        Err(_) => (None, Vec::new()),
    };
    b.push_str("<table>");
    if let Some((_, at, _, count)) = snapshot {
        let _ = write!(
            b,
            "<tr><th>Resources</th><td>{count}</td></tr>\
             <tr><th>Snapshot</th><td>{}</td></tr>",
            esc(&when(&at))
        );
    }
    if let Some(ch) = &app.channels {
        let _ = write!(
            b,
            "<tr><th>Change notifications</th><td>topic <code>{}</code> via hub \
             <code>{}</code></td></tr>",
            esc(&ch.change_topic),
            esc(&ch.hub)
        );
    }
    b.push_str("</table>\n");
    recent_changes(&mut b, base, &recent);
    documents_table(&mut b, app);
    if let Some(hub) = &app.hub {
        subscribers(&mut b, hub);
    }
    html(app, &format!("ResourceSync Source {base}"), &b)
}

/// The changes recorded last, newest first.
fn recent_changes(b: &mut String, base: &str, recent: &[crate::state::ChangeRecord]) {
    b.push_str("<h2>Recent changes</h2>\n");
    if recent.is_empty() {
        b.push_str("<p>None yet.</p>\n");
    } else {
        b.push_str(
            "<table><tr><th>When</th><th>Change</th><th>Resource</th><th>Length</th></tr>\n",
        );
        for c in recent {
            let ch = c.change.as_str();
            let _ = writeln!(
                b,
                "<tr><td class=t>{}</td><td class=\"{ch}\">{ch}</td>\
                 <td><a href=\"{u}\">{n}</a></td><td class=n>{}</td></tr>",
                esc(&when(&c.datetime)),
                c.length.map_or_else(String::new, |n| n.to_string()),
                u = esc(&c.uri),
                n = esc(&name_shown(base, &c.uri))
            );
        }
        b.push_str("</table>\n");
    }
}

/// The Source Description and the documents, each with the link to its page.
fn documents_table(b: &mut String, app: &App) {
    b.push_str("<h2>Documents</h2>\n<table><tr><th>Document (its entries)</th><th>XML</th></tr>\n");
    let sd = app.layout.well_known_url();
    let _ = writeln!(
        b,
        "<tr><td><a href=\"{p}\">Source Description</a></td>\
         <td><a href=\"{u}\">{u}</a></td></tr>",
        p = esc(&browse_link(app, WELL_KNOWN, 0)),
        u = esc(&sd)
    );
    let docs = documents(&app.docs);
    for name in docs.iter().take(MAX_LISTED) {
        let _ = writeln!(
            b,
            "<tr><td><a href=\"{p}\">{n}</a></td>\
             <td><a href=\"{u}\">{u}</a></td></tr>",
            n = esc(name),
            p = browse_link(app, name, 0),
            u = esc(&app.layout.doc_url(name))
        );
    }
    b.push_str("</table>\n");
    if docs.len() > MAX_LISTED {
        let _ = writeln!(
            b,
            "<p><small>and {} older documents, listed by the archives.</small></p>",
            docs.len() - MAX_LISTED
        );
    }
}

/// The subscribers to the Source's topics at its embedded hub (their callbacks shown without
/// query or user information).
fn subscribers(b: &mut String, hub: &resourcesync_websub::Hub) {
    b.push_str("<h2>Subscribers</h2>\n");
    let subs = hub.subscriptions().unwrap_or_default();
    if subs.is_empty() {
        b.push_str("<p>No subscriber to this Source's topics.</p>\n");
    } else {
        b.push_str(
            "<table><tr><th>Topic</th><th>Subscriber</th><th>Lease ends</th>\
             <th>Pending</th></tr>\n",
        );
        for s in &subs {
            let lease = Timestamp::from_second(s.lease_end)
                .map(stamp)
                .unwrap_or_default();
            let _ = writeln!(
                b,
                "<tr><td><code>{}</code></td><td><code>{}</code></td>\
                 <td class=t>{}</td><td class=n>{}</td></tr>",
                esc(&s.topic),
                esc(&callback_shown(&s.callback)),
                esc(&lease),
                s.pending
            );
        }
        b.push_str("</table>\n");
    }
}

/// A callback URL as shown to anyone: scheme, host and path (its query and user information
/// may carry a subscriber's token).
fn callback_shown(u: &str) -> String {
    let (u, query) = match u.split_once('?') {
        Some((u, _)) => (u, "?…"),
        None => (u, ""),
    };
    let Some((scheme, rest)) = u.split_once("://") else {
        return "(not a URL)".to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!("{scheme}://{host}{path}{query}")
}

/// The pseudo-name of the Source Description.
const WELL_KNOWN: &str = ".well-known/resourcesync";

/// One document as a table, page `page` (0-based); `None` when there is no such document.
fn browse(app: &App, name: &str, page: u64) -> Option<String> {
    let (path, url) = if name == WELL_KNOWN {
        (app.well_known.clone(), app.layout.well_known_url())
    } else {
        // Only a name the folder lists: nothing from the query reaches a path otherwise.
        let found = documents(&app.docs).into_iter().find(|d| d == name)?;
        (app.docs.join(&found), app.layout.doc_url(&found))
    };
    let file = std::fs::File::open(&path).ok()?;
    let opts = ReadOptions {
        name: url.clone(),
        ..ReadOptions::default()
    };
    let r = DocumentReader::new(BufReader::new(file), opts).ok()?;
    let header = r.header().clone();
    let (shown, total, broken) = entries_of_page(r, page);
    let mut b = String::new();
    let cap = header
        .md
        .as_ref()
        .and_then(|m| m.capability.as_ref())
        .map_or("document", |c| c.as_str());
    let _ = write!(
        b,
        "<nav><a href=\"{}\">← the Source</a></nav>\n<h1>{}</h1>\n<p><a href=\"{u}\">{u}</a></p>\n",
        esc(&app.prefix),
        esc(name),
        u = esc(&url)
    );
    header_rows(&mut b, cap, &header);
    let _ = writeln!(b, "<tr><th>Entries</th><td>{total}</td></tr></table>");
    if let Some(e) = broken {
        let _ = writeln!(b, "<p><small>Read up to an error: {}</small></p>", esc(&e));
    }
    entries_table(&mut b, app, &shown);
    b.push_str("</table>\n");
    let pages = total.div_ceil(PAGE).max(1);
    let _ = write!(b, "<nav>Page {} of {pages}", page + 1);
    if page > 0 {
        let _ = write!(
            b,
            " <a href=\"{}\">previous</a>",
            browse_link(app, name, page - 1)
        );
    }
    if page + 1 < pages {
        let _ = write!(
            b,
            " <a href=\"{}\">next</a>",
            browse_link(app, name, page + 1)
        );
    }
    b.push_str("</nav>\n");
    Some(html(app, &format!("{name} — ResourceSync Source"), &b))
}

/// The entries of page `page` (0-based) with their numbers, how many the document has, and
/// the error it ended with, if it did.
fn entries_of_page<R: std::io::BufRead>(
    mut r: DocumentReader<R>,
    page: u64,
) -> (Vec<(u64, Entry)>, u64, Option<String>) {
    let first = page.saturating_mul(PAGE);
    let mut shown: Vec<(u64, Entry)> = Vec::new();
    let mut total = 0u64;
    let mut broken = None;
    loop {
        match r.next_entry() {
            Ok(Some(e)) => {
                if total >= first && total < first + PAGE {
                    shown.push((total, e));
                }
                total += 1;
            }
            Ok(None) => break,
            Err(e) => {
                broken = Some(e.to_string());
                break;
            }
        }
    }
    (shown, total, broken)
}

/// The rows of a document's header: capability, times, links.
fn header_rows(b: &mut String, cap: &str, header: &resourcesync_model::Header) {
    b.push_str("<table>");
    let _ = write!(b, "<tr><th>Capability</th><td>{}</td></tr>", esc(cap));
    if let Some(md) = &header.md {
        for (k, v) in [
            ("At", &md.at),
            ("Completed", &md.completed),
            ("From", &md.from),
            ("Until", &md.until),
        ] {
            if let Some(v) = v {
                let _ = write!(b, "<tr><th>{k}</th><td>{}</td></tr>", esc(&when(v)));
            }
        }
    }
    for l in &header.links {
        let _ = write!(
            b,
            "<tr><th>Link {}</th><td><a href=\"{h}\">{h}</a></td></tr>",
            esc(&l.rel),
            h = esc(&l.href)
        );
    }
}

/// The entries shown, one row each.
fn entries_table(b: &mut String, app: &App, shown: &[(u64, Entry)]) {
    b.push_str(
        "<table><tr><th>#</th><th>Location</th><th>Last modified</th><th>Change</th>\
         <th>Length</th><th>Type</th><th>Hash</th></tr>\n",
    );
    for (i, e) in shown {
        let md = e.md.as_ref();
        let change = md.and_then(|m| m.change.as_ref()).map(|c| c.as_str());
        let hash = md
            .and_then(|m| m.hash.as_ref())
            .map(ToString::to_string)
            .unwrap_or_default();
        let _ = writeln!(
            b,
            "<tr><td class=n>{}</td><td><a href=\"{u}\">{n}</a></td><td class=t>{}</td>\
             <td class=\"{c}\">{c}</td><td class=n>{}</td><td>{}</td><td><small>{}</small></td></tr>",
            i + 1,
            e.lastmod
                .as_ref()
                .or(md.and_then(|m| m.datetime.as_ref()))
                .map(|t| esc(&when(t)))
                .unwrap_or_default(),
            md.and_then(|m| m.length)
                .map_or_else(String::new, |n| n.to_string()),
            esc(md.and_then(|m| m.mime_type.as_deref()).unwrap_or("")),
            esc(&hash),
            u = esc(&e.loc),
            n = esc(&name_shown(&app.layout.base, &e.loc)),
            c = esc(change.unwrap_or("")),
        );
    }
}

#[cfg(test)]
mod page_tests {
    use super::*;

    #[test]
    fn the_query_is_read_leniently() {
        let q = parse_query(Some("doc=changelists%2F00001.xml&page=3&x=1"));
        assert_eq!(q.doc.as_deref(), Some("changelists/00001.xml"));
        assert_eq!(q.page, 2);
        let q = parse_query(Some("page=zero"));
        assert_eq!((q.doc, q.page), (None, 0));
        assert_eq!(parse_query(Some("page=0")).page, 0);
    }

    #[test]
    fn a_callback_is_shown_without_its_secrets() {
        assert_eq!(
            callback_shown("https://u:p@sub.example/cb?token=s3cret"),
            "https://sub.example/cb?…"
        );
        assert_eq!(callback_shown("http://h/cb"), "http://h/cb");
    }
}
