//! Discovery: from any URL a user has to the Capability List of the set of resources to sync
//! (Z39.99-2014 §6.3; §6.2 navigation).
//!
//! 1. The URL itself, when it is a ResourceSync document: a Source Description (§8) lists the
//!    Capability Lists; a Capability List (§9) is the goal; any other capability document is
//!    followed up its `up` link (else its `index` link) (§6.2). A plain Sitemap is read as a
//!    Resource List, with a warning.
//! 2. Otherwise, for a page that is not a site root: its `Link: <...>; rel="resourcesync"`
//!    header or HTML `<link rel="resourcesync" href>` (§6.3.3), which is specific to it.
//! 3. The well-known URI `/.well-known/resourcesync` of the URL's site (§6.3.2).
//! 4. The `Sitemap:` lines of the site's `robots.txt` (§6.3.4).
//! 5. For a site root, the links of step 2.
//!
//! Several Capability Lists: the one chosen with `--set URL`, else an error listing them.

pub mod docs;
pub(crate) mod known;

use std::collections::{BTreeMap, HashSet};

use reqwest::Url;
use resourcesync_model::Capability;
use resourcesync_model::discovery::{html_link_targets, link_header_targets, robots_sitemaps};

use crate::discover::docs::{Doc, DocFetcher};
use crate::error::{Error, Result};
use crate::report::{NotificationChannel, SourceInfo};

/// Most capabilities of a Capability List named in [`SourceInfo::offered`].
const MAX_OFFERED: usize = 20;
/// Most `up`/`index` links followed.
const MAX_HOPS: usize = 8;
/// Most bytes of an HTML page or `robots.txt` read.
const MAX_PAGE_BYTES: usize = 1024 * 1024;

struct Discovery<'a> {
    f: &'a DocFetcher,
    set: Option<&'a str>,
    visited: HashSet<String>,
    warnings: Vec<String>,
}

fn origin(url: &Url) -> String {
    let mut o = url.clone();
    o.set_path("/");
    o.set_query(None);
    o.set_fragment(None);
    o.to_string()
}

fn read_text(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let cut = &bytes[..bytes.len().min(MAX_PAGE_BYTES)];
    String::from_utf8_lossy(cut).into_owned()
}

fn resolve(base: &str, href: &str) -> Option<String> {
    Url::parse(base)
        .ok()?
        .join(href.trim())
        .ok()
        .map(|u| u.to_string())
}

impl Discovery<'_> {
    async fn resolve_url(&mut self, url: &str, hops: usize) -> Result<SourceInfo> {
        // A document a link names (hops > 0) says, when it cannot be fetched, what to do.
        let doc = match self.f.document(url).await {
            Ok(d) => d,
            Err(e) if hops > 0 => return Err(crate::discover::docs::named(e)),
            Err(e) => return Err(e),
        };
        Box::pin(self.resolve_doc(doc, hops)).await
    }

    async fn resolve_doc(&mut self, doc: Doc, hops: usize) -> Result<SourceInfo> {
        if hops > MAX_HOPS {
            return Err(Error::BadDocument {
                url: doc.url,
                message: format!(
                    "more than {MAX_HOPS} up/index links followed (Z39.99-2014 §6.2): give the \
                     URL of the Capability List"
                ),
            });
        }
        if !self.visited.insert(doc.url.clone()) {
            return Err(Error::BadDocument {
                url: doc.url,
                message: "up/index links lead in a circle (Z39.99-2014 §6.2): give the URL of \
                          the Capability List, and tell the Source's maintainer"
                    .into(),
            });
        }
        let url = doc.url.clone();
        match doc.header.capability().cloned() {
            Some(Capability::Description) => self.resolve_description(doc, url, hops).await,
            Some(Capability::CapabilityList) => self.resolve_capability_list(doc, url).await,
            Some(other) => self.resolve_other(doc, other, url, hops).await,
            None => {
                self.warnings.push(format!(
                    "{url}: a plain Sitemap (no <rs:md>): read as a Resource List, without \
                     Change Lists (each sync diffs against it)"
                ));
                Ok(SourceInfo {
                    resource_list: Some(url),
                    plain_sitemap: true,
                    warnings: std::mem::take(&mut self.warnings),
                    ..SourceInfo::default()
                })
            }
        }
    }

    /// A Source Description (Z39.99-2014 §8): the Capability List of the set chosen.
    async fn resolve_description(
        &mut self,
        doc: Doc,
        url: String,
        hops: usize,
    ) -> Result<SourceInfo> {
        let entries = doc.entries().await?;
        let lists: Vec<String> = entries
            .iter()
            .filter(|e| {
                e.md.as_ref()
                    .and_then(|m| m.capability.as_ref())
                    .is_none_or(|c| *c == Capability::CapabilityList)
            })
            .map(|e| e.loc.clone())
            .collect();
        let chosen = match (self.set, lists.as_slice()) {
            (Some(s), _) if lists.iter().any(|l| l == s) => s.to_owned(),
            (Some(s), _) => {
                return Err(Error::Discovery {
                    url,
                    message: format!(
                        "--set {s} is not among its Capability Lists:\n  {}",
                        lists.join("\n  ")
                    ),
                });
            }
            (None, [one]) => one.clone(),
            (None, []) => {
                return Err(Error::BadDocument {
                    url,
                    message: "the Source Description lists no Capability List \
                              (Z39.99-2014 §8): give the URL of a Capability List, or \
                              tell the Source's maintainer"
                        .into(),
                });
            }
            (None, _) => return Err(Error::SeveralSets { url, found: lists }),
        };
        let mut info = Box::pin(self.resolve_url(&chosen, hops + 1)).await?;
        if info.capability_list.as_deref() == Some(chosen.as_str()) {
            info.description = Some(url);
        }
        Ok(info)
    }

    /// A Capability List (Z39.99-2014 §9): what it offers, and its notification channel.
    async fn resolve_capability_list(&mut self, doc: Doc, url: String) -> Result<SourceInfo> {
        let up = doc.header.link("up").map(|l| l.href.clone());
        let entries = doc.entries().await?;
        let mut caps: BTreeMap<String, String> = BTreeMap::new();
        let mut offered: Vec<String> = Vec::new();
        let mut change_notification = None;
        for e in &entries {
            // Change Notification 1.0.1 §5: the topic in <loc>, the hub in
            // <rs:ln rel="hub">.
            let is_cn =
                e.md.as_ref()
                    .and_then(|m| m.capability.as_ref())
                    .is_some_and(|c| {
                        matches!(
                            c,
                            Capability::ChangeNotification | Capability::ChangeListNotification
                        )
                    });
            if let (true, None, Some(h)) = (is_cn, &change_notification, e.link("hub")) {
                change_notification = Some(NotificationChannel {
                    topic: e.loc.clone(),
                    hub: h.href.clone(),
                });
            }
            if let Some(c) = e.md.as_ref().and_then(|m| m.capability.as_ref()) {
                if !caps.contains_key(c.as_str()) && offered.len() < MAX_OFFERED {
                    offered.push(c.as_str().chars().take(100).collect());
                }
                caps.entry(c.as_str().to_owned())
                    .or_insert_with(|| e.loc.clone());
            }
        }
        Ok(SourceInfo {
            description: up,
            capability_list: Some(url),
            resource_list: caps.get("resourcelist").cloned(),
            change_list: caps.get("changelist").cloned(),
            resource_dump: caps.get("resourcedump").cloned(),
            change_dump: caps.get("changedump").cloned(),
            change_notification,
            offered,
            plain_sitemap: false,
            warnings: std::mem::take(&mut self.warnings),
        })
    }

    /// Another document: its `up` (or `index`) link followed (Z39.99-2014 §6.2); a Resource
    /// List without one is synced on its own.
    async fn resolve_other(
        &mut self,
        doc: Doc,
        other: Capability,
        url: String,
        hops: usize,
    ) -> Result<SourceInfo> {
        // Z39.99-2014 §6.2: `up` leads to the Capability List; `index` to the index,
        // whose `up` does.
        let next = doc
            .header
            .link("up")
            .or_else(|| doc.header.link("index"))
            .map(|l| l.href.clone());
        match next {
            Some(n) => Box::pin(self.resolve_url(&n, hops + 1)).await,
            None if other == Capability::ResourceList => {
                // A Resource List on its own: synced without a Capability List.
                self.warnings.push(format!(
                    "{url}: a Resource List without an up link to a Capability List \
                     (Z39.99-2014 §6.2): synced on its own, without Change Lists (each \
                     sync diffs against it)"
                ));
                Ok(SourceInfo {
                    resource_list: Some(url),
                    warnings: std::mem::take(&mut self.warnings),
                    ..SourceInfo::default()
                })
            }
            None => Err(Error::BadDocument {
                url,
                message: format!(
                    "a {other} document without an up link to its Capability List \
                     (Z39.99-2014 §6.2): give the URL of the Capability List"
                ),
            }),
        }
    }

    async fn try_links(&mut self, links: &[String], tried: &mut Vec<String>) -> Option<SourceInfo> {
        for l in links {
            match self.resolve_url(l, 1).await {
                Ok(i) => return Some(i),
                Err(e) => tried.push(tried_line("resourcesync link", l, &e)),
            }
        }
        None
    }

    async fn try_robots(
        &mut self,
        origin: &str,
        tried: &mut Vec<String>,
    ) -> Result<Option<SourceInfo>> {
        let robots = format!("{origin}robots.txt");
        let d = match self.f.download(&robots).await {
            Ok(d) => d,
            Err(e) => {
                tried.push(tried_line("", &robots, &e));
                return Ok(None);
            }
        };
        let sitemaps = robots_sitemaps(&read_text(&d.file));
        if sitemaps.is_empty() {
            tried.push(format!("{robots}: no Sitemap line"));
            return Ok(None);
        }
        let mut sets: Vec<SourceInfo> = Vec::new();
        let mut plain: Vec<SourceInfo> = Vec::new();
        for s in &sitemaps {
            self.visited.clear();
            match self.resolve_url(s, 1).await {
                Ok(i) if i.plain_sitemap => plain.push(i),
                Ok(i) => {
                    if !sets.iter().any(|x| x.capability_list == i.capability_list) {
                        sets.push(i);
                    }
                }
                Err(e) => tried.push(tried_line("Sitemap (robots.txt)", s, &e)),
            }
        }
        let pick = |v: Vec<SourceInfo>,
                    key: fn(&SourceInfo) -> Option<String>|
         -> Result<Option<SourceInfo>> {
            if v.len() <= 1 {
                return Ok(v.into_iter().next());
            }
            if let Some(s) = self.set {
                if let Some(i) = v.iter().find(|i| key(i).as_deref() == Some(s)) {
                    return Ok(Some(i.clone()));
                }
            }
            Err(Error::SeveralSets {
                url: robots.clone(),
                found: v.iter().filter_map(key).collect(),
            })
        };
        if !sets.is_empty() {
            return pick(sets, |i| i.capability_list.clone());
        }
        pick(plain, |i| i.resource_list.clone())
    }
}

impl SourceInfo {
    /// Whether the Source offers something to sync from (Z39.99-2014 §5.2): a Resource List, a
    /// Change List, a Resource Dump (unless `use_dumps` is off) or a Change Dump; and, for a
    /// first run (`baseline`), a Resource List or a Resource Dump to start the copy from. The
    /// error names the Capability List, what it offers, and what the user can do.
    pub(crate) fn check_usable(&self, use_dumps: bool, baseline: bool) -> Result<()> {
        let rl = self.resource_list.is_some();
        let rd = self.resource_dump.is_some();
        let lists = rl || self.change_list.is_some();
        let dumps = rd || self.change_dump.is_some();
        let url = self.capability_list.clone().unwrap_or_default();
        let offers = if self.offered.is_empty() {
            "nothing".to_owned()
        } else {
            self.offered.join(", ")
        };
        let message = if !lists && !dumps {
            format!(
                "the Capability List offers nothing a Destination can sync from (it lists: \
                 {offers}); a Destination needs a Resource List or a Resource Dump to start a \
                 copy from, then Change Lists or Change Dumps (Z39.99-2014 §5.2, §9): check that \
                 this is the Capability List of the set you want, or tell the Source's maintainer"
            )
        } else if !lists && !use_dumps {
            format!(
                "the Capability List offers only dumps (it lists: {offers}), and --no-dump turns \
                 them off: run without --no-dump"
            )
        } else if baseline && !rl && !(rd && use_dumps) {
            format!(
                "the Capability List offers no Resource List{} to start a copy from (it lists: \
                 {offers}; Z39.99-2014 §5.2): {}",
                if use_dumps { " or Resource Dump" } else { "" },
                if rd {
                    "run without --no-dump to start from its Resource Dump"
                } else {
                    "tell the Source's maintainer"
                }
            )
        } else {
            return Ok(());
        };
        Err(Error::BadDocument { url, message })
    }
}

/// What a Capability List (Z39.99-2014 §9) offers, read from a document fetched already.
pub(crate) async fn read_capability_list(f: &DocFetcher, doc: Doc) -> Result<SourceInfo> {
    let mut d = Discovery {
        f,
        set: None,
        visited: HashSet::new(),
        warnings: Vec::new(),
    };
    let url = doc.url.clone();
    d.resolve_capability_list(doc, url).await
}

fn is_site_root(url: &Url) -> bool {
    url.path() == "/" && url.query().is_none()
}

/// The error of a start URL that does not answer (or answers with an HTTP error status): why,
/// and what the user can do.
fn no_place_to_start(url: &str, e: &Error) -> Error {
    let said = e.to_string();
    let cause = said
        .strip_prefix(url)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(&said);
    let hint = if matches!(e, Error::Http(resourcesync_http::Error::Status { .. })) {
        "nothing to discover from: give the URL of a ResourceSync document, of a page that \
         links to one, or the site root"
    } else {
        "the Source could not be reached: check the URL and that its server is running"
    };
    Error::Discovery {
        url: url.to_owned(),
        message: format!("{cause}; {hint}"),
    }
}

/// Finds the Capability List (or list) to sync from any URL (see the module docs).
pub async fn discover(f: &DocFetcher, url: &str, set: Option<&str>) -> Result<SourceInfo> {
    let parsed =
        Url::parse(url).map_err(|e| Error::Config(format!("{url:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Error::Config(format!("{url}: only http and https URLs")));
    }
    f.http.trust_host_of(url);
    let mut d = Discovery {
        f,
        set,
        visited: HashSet::new(),
        warnings: Vec::new(),
    };
    let mut tried: Vec<String> = Vec::new();
    let mut page_links: Vec<String> = Vec::new();
    let root = is_site_root(&parsed);
    let origin = origin(&parsed);
    let well_known = format!("{origin}.well-known/resourcesync");
    // A site root is seldom a ResourceSync document itself, and its discovery goes on to the
    // well-known URI (Z39.99-2014 §6.3.2) when it is not: both are asked for together, one
    // round trip instead of two; the well-known answer is used only as step 3 would use it.
    let (first, well_known_doc) = if root && well_known != url {
        let (a, b) = tokio::join!(f.download(url), f.document(&well_known));
        (a, Some(b))
    } else {
        (f.download(url).await, None)
    };
    match first {
        Ok(dl) => {
            if let Some(h) = &dl.link_header {
                page_links.extend(
                    link_header_targets(h)
                        .iter()
                        .filter_map(|t| resolve(url, t)),
                );
            }
            let html = dl
                .content_type
                .as_deref()
                .is_some_and(|c| c.to_ascii_lowercase().contains("html"));
            let text = html.then(|| read_text(&dl.file));
            match f.parse(dl).await {
                Ok(doc) => return d.resolve_doc(doc, 0).await,
                Err(e) => {
                    let text = text.unwrap_or_default();
                    page_links.extend(
                        html_link_targets(&text)
                            .iter()
                            .filter_map(|t| resolve(url, t)),
                    );
                    if page_links.is_empty() {
                        // The reader's own words (which name the line): a page that is not a
                        // document is no fault of the Source's.
                        let e = match e {
                            Error::Document { cause } => cause.to_string(),
                            other => other.to_string(),
                        };
                        tried.push(format!("{url}: not a ResourceSync document ({e})"));
                    }
                }
            }
        }
        Err(e @ Error::SeveralSets { .. }) => return Err(e),
        // A URL that does not answer is no place to discover from (a 404 is most often a
        // mistyped URL, not a request for the whole site): refused, naming its status. Only a
        // site root that answers with an HTTP error status goes on to the host's well-known
        // URI (Z39.99-2014 §6.3.2), where the discovery of a host starts anyway.
        Err(e)
            if !(is_site_root(&parsed)
                && matches!(e, Error::Http(resourcesync_http::Error::Status { .. }))) =>
        {
            return Err(no_place_to_start(url, &e));
        }
        Err(e) => tried.push(tried_line("", url, &e)),
    }
    if !root {
        if let Some(i) = d.try_links(&page_links, &mut tried).await {
            return Ok(i);
        }
    }
    if well_known != url {
        d.visited.clear();
        let found = match well_known_doc {
            Some(Ok(doc)) => d.resolve_doc(doc, 0).await,
            Some(Err(e)) => Err(e),
            None => d.resolve_url(&well_known, 0).await,
        };
        match found {
            Ok(i) => return Ok(i),
            Err(e @ (Error::SeveralSets { .. } | Error::Discovery { .. })) => return Err(e),
            Err(e) => tried.push(tried_line("", &well_known, &e)),
        }
    }
    if let Some(i) = d.try_robots(&origin, &mut tried).await? {
        return Ok(i);
    }
    if root {
        d.visited.clear();
        if let Some(i) = d.try_links(&page_links, &mut tried).await {
            return Ok(i);
        }
    }
    Err(Error::Discovery {
        url: url.to_owned(),
        message: format!(
            "no ResourceSync document found; tried:\n  {}",
            tried.join("\n  ")
        ),
    })
}

/// One line of what discovery tried: `what URL: error`, without saying the URL twice when the
/// error starts with it (most errors name the document they are about).
fn tried_line(what: &str, url: &str, e: &Error) -> String {
    let e = e.to_string();
    let what = if what.is_empty() {
        String::new()
    } else {
        format!("{what} ")
    };
    match e.strip_prefix(url) {
        Some(rest) if rest.starts_with(':') => format!("{what}{url}{rest}"),
        _ => format!("{what}{url}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_tried_names_each_url_once() {
        let u = "http://h/robots.txt";
        let same = Error::Http(resourcesync_http::Error::Status {
            url: u.into(),
            status: 404,
            retry_after: None,
        });
        assert_eq!(tried_line("", u, &same), "http://h/robots.txt: HTTP 404");
        let other = Error::Http(resourcesync_http::Error::Status {
            url: "http://h/cl.xml".into(),
            status: 500,
            retry_after: None,
        });
        assert_eq!(
            tried_line("Sitemap (robots.txt)", "http://h/rl.xml", &other),
            "Sitemap (robots.txt) http://h/rl.xml: http://h/cl.xml: HTTP 500"
        );
    }
}
