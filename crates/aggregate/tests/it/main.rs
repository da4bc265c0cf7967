//! The aggregator's tests: one binary, one module per file.

/// The address of a test server that `scripts/test.sh` starts and exports in `var`
/// (`RESOURCESYNC_TEST_POSTGRES`, `RESOURCESYNC_TEST_S3`); a test without it fails loudly.
pub(crate) fn server_env(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => {
            panic!("{var} is not set: run the tests with scripts/test.sh, which starts the server")
        }
    }
}

/// Routes a Source written by hand on `s`: its Source Description
/// (`/.well-known/resourcesync`), its Capability List (`/caps.xml`) and one Resource List
/// (`/list.xml`) of the snapshot `at` whose entries are `urls` (`<url>` elements), Z39.99-2014
/// §8, §9 and §10 at their smallest.
pub(crate) fn route_source(s: &resourcesync_testkit::Server, at: &str, urls: &str) {
    use resourcesync_testkit::Reply;
    let b = &s.base;
    s.route(
        "/.well-known/resourcesync",
        Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:md capability="description"/>
  <url><loc>{b}caps.xml</loc><rs:md capability="capabilitylist"/></url>
</urlset>"#
        )),
    );
    s.route(
        "/caps.xml",
        Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:ln rel="up" href="{b}.well-known/resourcesync"/>
  <rs:md capability="capabilitylist"/>
  <url><loc>{b}list.xml</loc><rs:md capability="resourcelist"/></url>
</urlset>"#
        )),
    );
    s.route(
        "/list.xml",
        Reply::xml(format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/">
  <rs:ln rel="up" href="{b}caps.xml"/>
  <rs:md capability="resourcelist" at="{at}"/>
{urls}
</urlset>"#
        )),
    );
}

mod bad_sources;
mod config;
mod copies_conformance;
mod history;
mod limits;
mod logs;
mod many;
mod memento;
mod outage;
mod page;
mod push;
mod quota;
mod reach;
mod recorded;
mod republish;
mod republish_ranges;
mod republish_s3;
mod schedule_shared;
mod service;
mod share_alone;
mod share_newer;
mod share_renew;
mod share_sources;
mod shown;
