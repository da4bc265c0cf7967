//! At least one invalid document per rule: each case must produce a finding (or a fatal error)
//! with that rule's id, and every rule in `rules::ALL` must have a case.

use std::collections::BTreeSet;

use crate::common::heavy;
use resourcesync_model::validate::validate;
use resourcesync_model::{DocumentReader, ReadOptions, rules};

const NS: &str = r#"xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/""#;
const UP: &str = r#"<rs:ln rel="up" href="http://example.com/capabilitylist.xml"/>"#;
const AT: &str = r#"at="2013-01-03T09:00:00Z""#;
const FROM: &str = r#"from="2013-01-03T00:00:00Z""#;

fn urlset(inner: &str) -> String {
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset {NS}>\n{inner}\n</urlset>\n")
}

fn index(inner: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex {NS}>\n{inner}\n</sitemapindex>\n"
    )
}

/// A Resource List with the given entries.
fn rl(entries: &str) -> String {
    urlset(&format!(
        r#"<rs:md capability="resourcelist" {AT}/>{UP}{entries}"#
    ))
}

/// A Change List with the given entries.
fn cl(entries: &str) -> String {
    urlset(&format!(
        r#"<rs:md capability="changelist" {FROM}/>{UP}{entries}"#
    ))
}

fn doc_with(cap: &str, attrs: &str, entries: &str) -> String {
    urlset(&format!(
        r#"<rs:md capability="{cap}" {attrs}/>{UP}{entries}"#
    ))
}

fn url(loc: &str, inner: &str) -> String {
    format!("<url><loc>{loc}</loc>{inner}</url>\n")
}

fn change(loc: &str, time: &str, kind: &str) -> String {
    url(
        loc,
        &format!(r#"<lastmod>{time}</lastmod><rs:md change="{kind}"/>"#),
    )
}

/// The rule ids a document produces: findings, or the fatal error's rule.
fn rule_ids(doc: &[u8], opts: ReadOptions) -> BTreeSet<String> {
    match DocumentReader::new(doc, opts).and_then(validate) {
        Ok(r) => r
            .findings
            .as_slice()
            .iter()
            .map(|f| f.rule.id.to_owned())
            .collect(),
        Err(e) => [e.rule().to_owned()].into(),
    }
}

struct Case {
    rule: &'static str,
    doc: Vec<u8>,
    opts: ReadOptions,
}

fn case(rule: &'static str, doc: impl Into<Vec<u8>>) -> Case {
    Case {
        rule,
        doc: doc.into(),
        opts: ReadOptions::named(rule),
    }
}

fn with(rule: &'static str, doc: impl Into<Vec<u8>>, f: impl FnOnce(&mut ReadOptions)) -> Case {
    let mut c = case(rule, doc);
    f(&mut c.opts);
    c
}

fn many_entries(n: usize, loc_len: usize) -> String {
    let pad = "x".repeat(loc_len);
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "<url><loc>http://example.com/{pad}/{i}</loc></url>\n"
        ));
    }
    rl(&s)
}

/// A Resource List entry that breaks no rule.
fn ok_url() -> String {
    url("http://example.com/res1", "")
}

/// The head of a valid Capability List.
const CAP_HEAD: &str = r#"<rs:md capability="capabilitylist"/><rs:ln rel="up" href="http://example.com/.well-known/resourcesync"/><rs:ln rel="describedby" href="http://example.com/info"/>"#;

/// A Capability List entry for capability `c`.
fn cap_entry(c: &str) -> String {
    url(
        &format!("http://example.com/{c}.xml"),
        &format!(r#"<rs:md capability="{c}"/>"#),
    )
}

/// Every case, one group per part of the specifications.
fn cases() -> Vec<Case> {
    [
        xml_and_limit_cases(),
        sitemap_cases(),
        md_and_attribute_cases(),
        attribute_context_cases(),
        description_and_capability_cases(),
        resource_and_dump_cases(),
        change_cases(),
        notification_and_archive_cases(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Well-formedness and the reader's limits.
fn xml_and_limit_cases() -> Vec<Case> {
    let ok_url = ok_url();
    vec![
        case("XML-wellformed", format!("<urlset {NS}><url></urlset>")),
        case(
            "XML-no-dtd",
            format!("<!DOCTYPE urlset [<!ENTITY a \"b\">]><urlset {NS}></urlset>"),
        ),
        with("LIMIT-document-bytes", rl(&ok_url), |o| {
            o.max_document_bytes = 100
        }),
        with(
            "LIMIT-token-bytes",
            rl(&url(&format!("http://example.com/{}", "a".repeat(200)), "")),
            |o| o.max_token_bytes = 64,
        ),
        with(
            "LIMIT-depth",
            rl(&url(
                "http://example.com/",
                r#"<x:a xmlns:x="urn:x"><x:a><x:a><x:a><x:a><x:a/></x:a></x:a></x:a></x:a></x:a>"#,
            )),
            |o| o.max_depth = 5,
        ),
        with(
            "LIMIT-namespaces",
            rl(&url(
                "http://example.com/",
                r#"<x:a xmlns:x="urn:x" xmlns:y="urn:y" xmlns:z="urn:z"/>"#,
            )),
            |o| o.max_namespace_bindings = 3,
        ),
        with(
            "LIMIT-children",
            rl(&url(
                "http://example.com/",
                &r#"<rs:ln rel="duplicate" href="http://m.example.com/"/>"#.repeat(3),
            )),
            |o| o.max_children = 2,
        ),
    ]
}

/// The Sitemap protocol: root, elements, `<loc>`, `<lastmod>`, size limits.
fn sitemap_cases() -> Vec<Case> {
    let ok_url = ok_url();
    vec![
        case("SM-root", "<html><body/></html>"),
        case(
            "SM-utf8",
            rl(&ok_url).replace("encoding=\"UTF-8\"", "encoding=\"ISO-8859-1\""),
        ),
        case(
            "SM-entry-element",
            rl("<sitemap><loc>http://example.com/a</loc></sitemap>"),
        ),
        case(
            "SM-unknown-element",
            rl(&url(
                "http://example.com/a",
                "<lastmodified>2013</lastmodified>",
            )),
        ),
        case(
            "SM-text",
            rl("<url>stray<loc>http://example.com/a</loc></url>"),
        ),
        case(
            "SM-loc-mandatory",
            rl("<url><lastmod>2013-01-01</lastmod></url>"),
        ),
        case("SM-loc-uri", rl(&url("res1.html", ""))),
        case(
            "SM-loc-length",
            rl(&url(
                &format!("http://example.com/{}", "a".repeat(2100)),
                "",
            )),
        ),
        case(
            "SM-lastmod",
            rl(&url("http://example.com/a", "<lastmod>yesterday</lastmod>")),
        ),
        case(
            "SM-changefreq",
            rl(&url(
                "http://example.com/a",
                "<changefreq>sometimes</changefreq>",
            )),
        ),
        case(
            "SM-duplicate-child",
            rl(&url(
                "http://example.com/a",
                "<loc>http://example.com/b</loc>",
            )),
        ),
        case("SM-max-entries", many_entries(50_001, 0)),
        case("SM-max-bytes", many_entries(26_000, 2_000)),
    ]
}

/// Z39.99-2014 §7: the root's `<rs:md>`, attribute values and `<rs:ln>`.
fn md_and_attribute_cases() -> Vec<Case> {
    let ok_url = ok_url();
    vec![
        case("RS-7-md-mandatory", urlset(&ok_url)),
        case(
            "RS-7-md-position",
            urlset(&format!(
                r#"{UP}{ok_url}<rs:md capability="resourcelist" {AT}/>"#
            )),
        ),
        case(
            "RS-7-capability-mandatory",
            urlset(&format!(r#"<rs:md {AT}/>{UP}{ok_url}"#)),
        ),
        case(
            "RS-7-capability-value",
            doc_with("resourcelisting", AT, &ok_url),
        ),
        case(
            "RS-7-attr-unprefixed",
            urlset(&format!(
                r#"<rs:md capability="resourcelist" rs:at="2013-01-03T09:00:00Z"/>{UP}"#
            )),
        ),
        case(
            "RS-7-attr-foreign",
            doc_with("resourcelist", &format!(r#"{AT} size="3""#), ""),
        ),
        case(
            "RS-7-datetime",
            doc_with("resourcelist", r#"at="3 January 2013""#, ""),
        ),
        case(
            "RS-7-datetime-form",
            doc_with("resourcelist", r#"at="2013-01-03""#, ""),
        ),
        case(
            "RS-7-hash-syntax",
            rl(&url("http://example.com/a", r#"<rs:md hash="md5:xyz"/>"#)),
        ),
        case(
            "RS-7-length",
            rl(&url("http://example.com/a", r#"<rs:md length="-1"/>"#)),
        ),
        case(
            "RS-7-change-value",
            cl(&change(
                "http://example.com/a",
                "2013-01-03T10:00:00Z",
                "modified",
            )),
        ),
        case(
            "RS-7-ln-rel",
            rl(&url(
                "http://example.com/a",
                r#"<rs:ln href="http://m.example.com/a"/>"#,
            )),
        ),
        case(
            "RS-7-ln-href",
            rl(&url("http://example.com/a", r#"<rs:ln rel="duplicate"/>"#)),
        ),
        case(
            "RS-7-ln-pri",
            rl(&url(
                "http://example.com/a",
                r#"<rs:ln rel="duplicate" pri="0" href="http://m.example.com/a"/>"#,
            )),
        ),
        case(
            "RS-7-rel-registered",
            rl(&url(
                "http://example.com/a",
                r#"<rs:ln rel="mirror" href="http://m.example.com/a"/>"#,
            )),
        ),
        case(
            "RS-7-empty-element",
            urlset(&format!(
                r#"<rs:md capability="resourcelist" {AT}>text</rs:md>{UP}"#
            )),
        ),
        case(
            "RS-7-href-uri",
            urlset(&format!(
                r#"<rs:md capability="resourcelist" {AT}/><rs:ln rel="up" href="capabilitylist.xml"/>"#
            )),
        ),
    ]
}

/// Z39.99-2014 §7, Appendix A: which attributes each document kind uses, and their order in time.
fn attribute_context_cases() -> Vec<Case> {
    vec![
        case(
            "RS-7-at-not-used",
            doc_with("changelist", &format!("{FROM} {AT}"), ""),
        ),
        case(
            "RS-7-from-not-used",
            doc_with("resourcelist", &format!("{FROM} {AT}"), ""),
        ),
        case(
            "RS-7-entry-at-not-used",
            rl(&url("http://example.com/a", &format!("<rs:md {AT}/>"))),
        ),
        case(
            "RS-7-entry-from-not-used",
            rl(&url("http://example.com/a", &format!("<rs:md {FROM}/>"))),
        ),
        case(
            "RS-7-path-not-used",
            rl(&url("http://example.com/a", r#"<rs:md path="/a"/>"#)),
        ),
        case(
            "RS-7-datetime-not-used",
            rl(&url(
                "http://example.com/a",
                r#"<rs:md datetime="2013-01-02T13:00:00Z"/>"#,
            )),
        ),
        case(
            "RS-7-change-not-used",
            rl(&url("http://example.com/a", r#"<rs:md change="created"/>"#)),
        ),
        case(
            "RS-7-until-after-from",
            doc_with(
                "changelist",
                r#"from="2013-01-03T00:00:00Z" until="2013-01-02T00:00:00Z""#,
                "",
            ),
        ),
        case(
            "RS-7-completed-after-at",
            doc_with(
                "resourcelist",
                r#"at="2013-01-03T09:00:00Z" completed="2013-01-03T08:00:00Z""#,
                "",
            ),
        ),
        case(
            "RS-7-datetime-in-range",
            cl(&url(
                "http://example.com/a",
                r#"<rs:md change="created" datetime="2013-01-02T10:00:00Z"/>"#,
            )),
        ),
    ]
}

/// Z39.99-2014 Appendix A, §6.2, §8, §9: mandatory attributes and links, Source Descriptions and Capability Lists.
fn description_and_capability_cases() -> Vec<Case> {
    let ok_url = ok_url();
    let sd_entry = url(
        "http://example.com/capabilitylist.xml",
        r#"<rs:md capability="capabilitylist"/>"#,
    );
    let cap_head = CAP_HEAD;
    vec![
        case("RS-A-at-mandatory", doc_with("resourcelist", "", &ok_url)),
        case("RS-A-from-mandatory", doc_with("changelist", "", "")),
        case(
            "RS-6.2-up-mandatory",
            urlset(&format!(
                r#"<rs:md capability="resourcelist" {AT}/>{ok_url}"#
            )),
        ),
        case(
            "RS-9-describedby",
            urlset(&format!(
                r#"<rs:md capability="capabilitylist"/><rs:ln rel="up" href="http://example.com/.well-known/resourcesync"/>{}"#,
                cap_entry("resourcelist")
            )),
        ),
        case(
            "RS-9-lastmod-omit",
            urlset(&format!(
                "{cap_head}{}",
                url(
                    "http://example.com/rl.xml",
                    r#"<lastmod>2013-01-01T00:00:00Z</lastmod><rs:md capability="resourcelist"/>"#
                )
            )),
        ),
        case(
            // The entry's <rs:md> is optional (§8); a present one must say capabilitylist.
            "RS-8-entry-capability",
            urlset(&format!(
                r#"<rs:md capability="description"/>{}"#,
                url(
                    "http://example.com/resourcelist.xml",
                    r#"<rs:md capability="resourcelist"/>"#
                )
            )),
        ),
        case(
            "RS-9-entry-capability",
            urlset(&format!("{cap_head}{ok_url}")),
        ),
        case(
            "RS-9-entry-capability-value",
            urlset(&format!("{cap_head}{}", cap_entry("description"))),
        ),
        case(
            "RS-9-one-entry-per-capability",
            urlset(&format!(
                "{cap_head}{}{}",
                cap_entry("resourcelist"),
                cap_entry("resourcelist")
            )),
        ),
        case(
            "RS-9-no-index",
            index(&format!(
                "{cap_head}{}",
                sd_entry.replace("url>", "sitemap>")
            )),
        ),
        case(
            "RS-7-index-not-allowed",
            index(&format!(
                r#"<rs:md capability="resourcedump-manifest" {AT}/>{UP}"#
            )),
        ),
    ]
}

/// Z39.99-2014 §10, §11: Resource Lists, Resource Dumps and their Manifests.
fn resource_and_dump_cases() -> Vec<Case> {
    let ok_url = ok_url();
    vec![
        case("RS-10.1-url-per-resource", rl(&format!("{ok_url}{ok_url}"))),
        case(
            "RS-11.1-entry-md",
            doc_with("resourcedump", AT, &url("http://example.com/dump.zip", "")),
        ),
        case(
            "RS-11.2-path",
            doc_with(
                "resourcedump-manifest",
                AT,
                &url("http://example.com/a", r#"<rs:md type="text/plain"/>"#),
            ),
        ),
        case(
            "RS-11.2-path-leading-slash",
            doc_with(
                "resourcedump-manifest",
                AT,
                &url(
                    "http://example.com/a",
                    r#"<rs:md type="text/plain" path="a"/>"#,
                ),
            ),
        ),
        case(
            "RS-11.2-type",
            doc_with(
                "resourcedump-manifest",
                AT,
                &url("http://example.com/a", r#"<rs:md path="/a"/>"#),
            ),
        ),
    ]
}

/// Z39.99-2014 §12, §13, §14: Change Lists, their indexes, Change Dumps and their Manifests.
fn change_cases() -> Vec<Case> {
    vec![
        case(
            "RS-12.1-change-mandatory",
            cl(&url(
                "http://example.com/a",
                "<lastmod>2013-01-03T10:00:00Z</lastmod>",
            )),
        ),
        case(
            // An entry without <lastmod> among entries ordered by <lastmod> (no datetime).
            "RS-12.1-lastmod",
            cl(&format!(
                "{}{}",
                change("http://example.com/a", "2013-01-03T12:00:00Z", "created"),
                url("http://example.com/b", r#"<rs:md change="created"/>"#)
            )),
        ),
        case(
            "RS-12.1-chronological",
            cl(&format!(
                "{}{}",
                change("http://example.com/a", "2013-01-03T12:00:00Z", "created"),
                change("http://example.com/b", "2013-01-03T11:00:00Z", "created")
            )),
        ),
        case(
            "RS-12.2-chronological",
            index(&format!(
                r#"<rs:md capability="changelist" {FROM}/>{UP}<sitemap><loc>http://example.com/cl2.xml</loc><rs:md from="2013-01-04T00:00:00Z" until="2013-01-05T00:00:00Z"/></sitemap><sitemap><loc>http://example.com/cl1.xml</loc><rs:md from="2013-01-03T00:00:00Z" until="2013-01-04T00:00:00Z"/></sitemap>"#
            )),
        ),
        case(
            "RS-12.2-open-last",
            index(&format!(
                r#"<rs:md capability="changelist" {FROM}/>{UP}<sitemap><loc>http://example.com/cl1.xml</loc><rs:md from="2013-01-03T00:00:00Z"/></sitemap><sitemap><loc>http://example.com/cl2.xml</loc><rs:md from="2013-01-04T00:00:00Z"/></sitemap>"#
            )),
        ),
        case(
            "RS-12.2-entry-md",
            index(&format!(
                r#"<rs:md capability="changelist" {FROM}/>{UP}<sitemap><loc>http://example.com/cl1.xml</loc></sitemap>"#
            )),
        ),
        case(
            "RS-13.1-chronological",
            doc_with(
                "changedump",
                FROM,
                r#"<url><loc>http://example.com/2.zip</loc><rs:md type="application/zip" length="10" from="2013-01-04T00:00:00Z"/></url><url><loc>http://example.com/1.zip</loc><rs:md type="application/zip" length="10" from="2013-01-03T00:00:00Z"/></url>"#,
            ),
        ),
        case(
            "RS-13.2-chronological",
            doc_with(
                "changedump-manifest",
                FROM,
                &format!(
                    "{}{}",
                    url(
                        "http://example.com/a",
                        r#"<lastmod>2013-01-03T12:00:00Z</lastmod><rs:md change="created" type="text/plain" path="/a"/>"#
                    ),
                    url(
                        "http://example.com/b",
                        r#"<lastmod>2013-01-03T11:00:00Z</lastmod><rs:md change="created" type="text/plain" path="/b"/>"#
                    )
                ),
            ),
        ),
        case(
            "RS-14.4-patch-path",
            doc_with(
                "changedump-manifest",
                FROM,
                &url(
                    "http://example.com/a",
                    r#"<lastmod>2013-01-03T12:00:00Z</lastmod><rs:md change="updated" type="text/plain" path="/a"/><rs:ln rel="http://www.openarchives.org/rs/terms/patch" href="http://example.com/a.patch" type="application/json-patch+json"/>"#,
                ),
            ),
        ),
        case(
            "RS-14.6-lastmod",
            cl(&url(
                "http://example.com/a",
                r#"<rs:md change="updated" datetime="2013-01-03T12:00:00Z"/><rs:ln rel="memento" href="http://example.com/20130103/a"/>"#,
            )),
        ),
    ]
}

/// Change and Framework Notifications, and Archives.
fn notification_and_archive_cases() -> Vec<Case> {
    let ok_url = ok_url();
    let cap_head = CAP_HEAD;
    vec![
        case(
            "CN-3-from-until",
            urlset(&format!(
                r#"<rs:md capability="change-notification" {FROM}/>{ok_url}"#
            )),
        ),
        case(
            "CN-3-capability-name",
            urlset(
                r#"<rs:md capability="changelist-notification" from="2013-01-03T00:00:00Z" until="2013-01-03T01:00:00Z"/>"#,
            ),
        ),
        case(
            "CN-3-chronological",
            urlset(&format!(
                r#"<rs:md capability="change-notification" from="2013-01-03T00:00:00Z" until="2013-01-03T23:00:00Z"/>{}{}"#,
                url(
                    "http://example.com/a",
                    r#"<rs:md change="created" datetime="2013-01-03T12:00:00Z"/>"#
                ),
                url(
                    "http://example.com/b",
                    r#"<rs:md change="created" datetime="2013-01-03T11:00:00Z"/>"#
                )
            )),
        ),
        case(
            "CN-5-hub-link",
            urlset(&format!("{cap_head}{}", cap_entry("change-notification"))),
        ),
        case(
            "FN-3-entry-capability",
            urlset(&format!(
                r#"<rs:md capability="framework-notification"/>{}"#,
                url("http://example.com/rl.xml", r#"<rs:md change="updated"/>"#)
            )),
        ),
        case(
            "AR-5-consecutive",
            doc_with(
                "changelist-archive",
                "",
                r#"<url><loc>http://example.com/cl1.xml</loc><rs:md from="2013-01-01T00:00:00Z" until="2013-01-03T00:00:00Z"/></url><url><loc>http://example.com/cl2.xml</loc><rs:md from="2013-01-02T00:00:00Z" until="2013-01-04T00:00:00Z"/></url>"#,
            ),
        ),
        case(
            "AR-5-chronological",
            doc_with(
                "changelist-archive",
                "",
                r#"<url><loc>http://example.com/cl2.xml</loc><rs:md from="2013-01-02T00:00:00Z" until="2013-01-03T00:00:00Z"/></url><url><loc>http://example.com/cl1.xml</loc><rs:md from="2013-01-01T00:00:00Z" until="2013-01-02T00:00:00Z"/></url>"#,
            ),
        ),
    ]
}

#[test]
fn each_invalid_fixture_breaks_its_rule() {
    // `cases()` builds documents of 50 MB: not while another test measures its peak RSS.
    let _g = heavy();
    let mut failures = Vec::new();
    for c in cases() {
        assert!(
            rules::by_id(c.rule).is_some(),
            "case for unknown rule {}",
            c.rule
        );
        let found = rule_ids(&c.doc, c.opts);
        if !found.contains(c.rule) {
            failures.push(format!("{}: found {:?}", c.rule, found));
        }
    }
    assert!(
        failures.is_empty(),
        "rules not reported:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_rule_has_an_invalid_fixture() {
    // `cases()` builds documents of 50 MB: not while another test measures its peak RSS.
    let _g = heavy();
    let covered: BTreeSet<&str> = cases().iter().map(|c| c.rule).collect();
    let missing: Vec<&str> = rules::ALL
        .iter()
        .map(|r| r.id)
        .filter(|id| !covered.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "rules without an invalid fixture: {missing:?}"
    );
}

#[test]
fn rule_ids_are_unique_and_well_formed() {
    let mut seen = BTreeSet::new();
    for r in rules::ALL {
        assert!(seen.insert(r.id), "duplicate rule id {}", r.id);
        let prefix = r.id.split('-').next().unwrap_or_default();
        assert!(
            ["XML", "LIMIT", "SM", "RS", "CN", "FN", "AR"].contains(&prefix),
            "bad prefix in {}",
            r.id
        );
        assert!(!r.summary.is_empty() && !r.section.is_empty());
    }
}

#[test]
fn a_minimal_valid_document_has_no_findings() {
    // The baseline the cases above break: a complete Resource List and Change List.
    let rl = rl(&url(
        "http://example.com/res1",
        r#"<lastmod>2013-01-02T13:00:00Z</lastmod><rs:md hash="md5:1584abdf8ebdc9802ac0c6a7402c03b6" length="8876" type="text/html"/>"#,
    ));
    assert_eq!(
        rule_ids(rl.as_bytes(), ReadOptions::named("rl")),
        BTreeSet::new()
    );
    let cl = cl(&format!(
        "{}{}",
        change("http://example.com/a", "2013-01-03T11:00:00Z", "created"),
        change("http://example.com/b", "2013-01-03T12:00:00Z", "deleted")
    ));
    assert_eq!(
        rule_ids(cl.as_bytes(), ReadOptions::named("cl")),
        BTreeSet::new()
    );
}
