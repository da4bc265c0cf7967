//! What the reader's speed-ups must not change: namespace resolution when a declaration is
//! replaced by another of the same length in a sibling scope (the resolver's cache), and the
//! validator's reused entry, which must not carry one entry's values into the next.

use resourcesync_model::validate::validate_each;
use resourcesync_model::{DocumentReader, Entry, ReadOptions};

const RS: &str = "http://www.openarchives.org/rs/terms/";
/// Not ResourceSync's namespace, and of the same length as it.
const LOOKALIKE: &str = "http://www.openarchives.org/rs/termz/";

fn doc(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" xmlns:rs=\"{RS}\"><rs:md capability=\"resourcelist\" at=\"2013-01-03T09:00:00Z\"/>{body}</urlset>"
    )
}

fn entries(xml: &str) -> Vec<Entry> {
    let r = DocumentReader::new(xml.as_bytes(), ReadOptions::named("t")).expect("header");
    r.map(|e| e.expect("entry")).collect()
}

#[test]
fn a_prefix_rebound_in_a_sibling_scope_resolves_to_its_new_namespace() {
    // Each <url> binds q; the second binding takes the place of the first in the resolver
    // (same prefix, same length), to another namespace: q:md is ResourceSync's <rs:md> in the
    // first entry and an extension in the second, then ResourceSync's again in the third.
    let xml = doc(&format!(
        "<url xmlns:q=\"{RS}\"><loc>http://e.com/1</loc><q:md length=\"1\"/></url>\
         <url xmlns:q=\"{LOOKALIKE}\"><loc>http://e.com/2</loc><q:md length=\"2\"/></url>\
         <url xmlns:q=\"{RS}\"><loc>http://e.com/3</loc><q:md length=\"3\"/></url>"
    ));
    let es = entries(&xml);
    assert_eq!(es.len(), 3);
    assert_eq!(es[0].length(), Some(1));
    assert!(es[0].extensions.is_empty());
    assert_eq!(
        es[1].md, None,
        "q:md of the look-alike namespace is not <rs:md>"
    );
    assert_eq!(es[1].extensions.len(), 1);
    assert_eq!(es[1].extensions[0].namespace, LOOKALIKE);
    assert_eq!(es[2].length(), Some(3));
    assert!(es[2].extensions.is_empty());
}

#[test]
fn the_default_namespace_rebound_on_an_entry_ends_with_it() {
    // The second entry's children are in another namespace (not Sitemap elements); the third
    // entry is back in the Sitemap namespace.
    let xml = doc("<url><loc>http://e.com/1</loc></url>\
         <url><loc>http://e.com/2</loc><x xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.8\"><loc>no</loc></x></url>\
         <url><loc>http://e.com/3</loc></url>");
    let es = entries(&xml);
    assert_eq!(es.len(), 3);
    assert_eq!(es[1].loc, "http://e.com/2");
    assert_eq!(es[1].extensions.len(), 1);
    assert_eq!(es[2].loc, "http://e.com/3");
    assert!(es[2].extensions.is_empty());
}

#[test]
fn the_validators_entries_carry_nothing_from_the_entry_before() {
    let xml = doc(
        "<url><loc> http://e.com/full </loc><lastmod>2013-01-02T13:00:00Z</lastmod>\
         <changefreq>daily</changefreq><priority>0.5</priority>\
         <rs:md hash=\"md5:1e0d5cb8ef6ba40c99b14c0237be735e\" length=\"8\" type=\"text/plain\"/>\
         <rs:ln rel=\"describedby\" href=\"http://e.com/d\"/></url>\
         <url><loc>http://e.com/bare</loc></url>\
         <url><loc>http://e.com/x</loc><loc>http://e.com/second-loc</loc></url>",
    );
    let mut seen: Vec<Entry> = Vec::new();
    let report = validate_each(
        DocumentReader::new(xml.as_bytes(), ReadOptions::named("t")).expect("header"),
        |e| seen.push(e.clone()),
    )
    .expect("report");
    assert_eq!(report.entries, 3);
    // What `next_entry` returns, entry by entry, is what the validator's reused entry held.
    assert_eq!(seen, entries(&xml));
    assert_eq!(seen[0].loc, "http://e.com/full");
    assert!(seen[0].md.is_some() && seen[0].lastmod.is_some() && !seen[0].links.is_empty());
    let bare = &seen[1];
    assert_eq!(bare.loc, "http://e.com/bare");
    assert_eq!(bare.lastmod, None);
    assert_eq!(bare.changefreq, None);
    assert_eq!(bare.priority, None);
    assert_eq!(bare.md, None);
    assert!(bare.links.is_empty() && bare.extensions.is_empty());
    assert_ne!(bare.position, seen[0].position);
    // A second <loc> is a finding, not a replacement of the first.
    assert_eq!(seen[2].loc, "http://e.com/x");
}
