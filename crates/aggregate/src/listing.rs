//! The list of Sources as the page and the JSON API show it: summary counts over every Source,
//! then the Sources that match a filter (by name, by state), failing ones first, a page at a
//! time. An aggregator of 1,800 Sources serves pages of [`PER_PAGE`] rows, not one table of all.
//!
//! The parameters come from the query string (`?q=museum&state=failing&page=2&per_page=50`):
//! hostile input like any other, so each is bounded and a wrong one is refused with a message
//! that names it and says what it takes ([`ListQuery::parse`]).

use std::collections::HashMap;

use serde::Serialize;

use crate::status::{Phase, SourceView};

/// Rows per page unless `per_page` says otherwise.
pub const PER_PAGE: usize = 100;
/// Most rows per page.
pub const MAX_PER_PAGE: usize = 500;
/// Longest name filter kept (characters).
pub const MAX_QUERY: usize = 200;
/// Shortest and longest self-reload interval of the page (`refresh`, seconds).
pub const REFRESH: std::ops::RangeInclusive<u32> = 5..=3600;

/// Which Sources a state filter keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateFilter {
    /// Every Source.
    All,
    /// Synced, and its last sync succeeded ([`Phase::Following`]).
    Ok,
    /// Its last sync failed.
    Failing,
    /// A sync of it runs now.
    Syncing,
    /// Never synced yet.
    Baselining,
    /// Held by another worker.
    Elsewhere,
}

impl StateFilter {
    /// Every filter, as the query string and the form name them.
    pub const ALL: [(&'static str, StateFilter); 6] = [
        ("all", StateFilter::All),
        ("ok", StateFilter::Ok),
        ("failing", StateFilter::Failing),
        ("syncing", StateFilter::Syncing),
        ("baselining", StateFilter::Baselining),
        ("elsewhere", StateFilter::Elsewhere),
    ];

    fn keeps(self, v: &SourceView) -> bool {
        match self {
            StateFilter::All => true,
            StateFilter::Ok => v.phase == Phase::Following,
            StateFilter::Failing => v.phase == Phase::Failing,
            StateFilter::Syncing => v.running,
            StateFilter::Baselining => v.phase == Phase::Baselining,
            StateFilter::Elsewhere => v.phase == Phase::Elsewhere,
        }
    }

    /// Its name in the query string.
    pub fn name(self) -> &'static str {
        StateFilter::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("all", |(n, _)| n)
    }
}

/// What the query string asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Sources whose name (or URL) contains this, case-insensitively.
    pub q: String,
    /// Sources in this state.
    pub state: StateFilter,
    /// The page, from 1.
    pub page: usize,
    /// Rows per page.
    pub per_page: usize,
    /// The page reloads itself every this many seconds (the page only; off unless asked).
    pub refresh: Option<u32>,
    /// Whether any list parameter was given (the JSON API answers the old way without one).
    pub given: bool,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            q: String::new(),
            state: StateFilter::All,
            page: 1,
            per_page: PER_PAGE,
            refresh: None,
            given: false,
        }
    }
}

impl ListQuery {
    /// The parameters of a query string; an error names the one that is wrong and what it
    /// takes. Unknown parameters are ignored (as links with tracking tags carry them).
    pub fn parse(params: &HashMap<String, String>) -> Result<ListQuery, String> {
        let mut l = ListQuery::default();
        let number = |key: &str, v: &str, range: std::ops::RangeInclusive<usize>| {
            v.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    format!(
                        "`{key}={}`: give a whole number from {} to {}",
                        v.chars().take(20).collect::<String>(),
                        range.start(),
                        range.end()
                    )
                })
        };
        if let Some(q) = params.get("q") {
            l.q = q.trim().chars().take(MAX_QUERY).collect();
            l.given = true;
        }
        if let Some(s) = params.get("state").filter(|s| !s.is_empty()) {
            l.state = StateFilter::ALL
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(s.trim()))
                .map(|(_, f)| *f)
                .ok_or_else(|| {
                    let names: Vec<&str> = StateFilter::ALL.iter().map(|(n, _)| *n).collect();
                    format!(
                        "`state={}`: give one of {}",
                        s.chars().take(20).collect::<String>(),
                        names.join(", ")
                    )
                })?;
            l.given = true;
        }
        if let Some(p) = params.get("page") {
            l.page = number("page", p, 1..=1_000_000)?;
            l.given = true;
        }
        if let Some(p) = params.get("per_page") {
            l.per_page = number("per_page", p, 1..=MAX_PER_PAGE)?;
            l.given = true;
        }
        if let Some(r) = params.get("refresh").filter(|r| !r.is_empty() && *r != "0") {
            let range = *REFRESH.start() as usize..=*REFRESH.end() as usize;
            l.refresh = Some(number("refresh", r, range)? as u32);
        }
        Ok(l)
    }

    /// The query string of this query at `page` (`q=…&state=…&page=…`), parameters at their
    /// defaults left out.
    pub fn to_query(&self, page: usize) -> String {
        let mut s = url::form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            s.append_pair("q", &self.q);
        }
        if self.state != StateFilter::All {
            s.append_pair("state", self.state.name());
        }
        if page != 1 {
            s.append_pair("page", &page.to_string());
        }
        if self.per_page != PER_PAGE {
            s.append_pair("per_page", &self.per_page.to_string());
        }
        if let Some(r) = self.refresh {
            s.append_pair("refresh", &r.to_string());
        }
        s.finish()
    }
}

/// Counts over every Source (the filter aside).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Sources followed.
    pub sources: usize,
    /// Synced, last sync succeeded.
    pub ok: usize,
    /// Last sync failed.
    pub failing: usize,
    /// A sync runs now.
    pub syncing: usize,
    /// Never synced yet.
    pub baselining: usize,
    /// Held by another worker.
    pub elsewhere: usize,
    /// Copies, over every Source, as their states record them.
    pub resources: u64,
    /// Bytes of those copies.
    pub bytes: u64,
}

/// One page of the list.
#[derive(Debug, Clone, Serialize)]
pub struct Listing {
    /// Counts over every Source.
    pub summary: Summary,
    /// Sources that match the filter.
    pub matching: usize,
    /// This page, from 1.
    pub page: usize,
    /// Pages of matching Sources (at least 1).
    pub pages: usize,
    /// Rows per page.
    pub per_page: usize,
    /// This page's Sources: failing ones first (longest failing first), then by name.
    pub sources: Vec<SourceView>,
}

/// The page `q` asks for of `all`.
pub fn list(all: Vec<SourceView>, q: &ListQuery) -> Listing {
    let mut summary = Summary {
        sources: all.len(),
        ..Summary::default()
    };
    for v in &all {
        match v.phase {
            Phase::Following => summary.ok += 1,
            Phase::Failing => summary.failing += 1,
            Phase::Baselining => summary.baselining += 1,
            Phase::Elsewhere => summary.elsewhere += 1,
        }
        summary.syncing += usize::from(v.running);
        summary.resources = summary.resources.saturating_add(v.resources);
        summary.bytes = summary.bytes.saturating_add(v.bytes);
    }
    let needle = q.q.to_lowercase();
    let mut keep: Vec<SourceView> = all
        .into_iter()
        .filter(|v| q.state.keeps(v))
        .filter(|v| {
            needle.is_empty()
                || v.name.to_lowercase().contains(&needle)
                || v.url.to_lowercase().contains(&needle)
        })
        .collect();
    // Failing first, the longest failing at the top (RFC 3339 UTC times sort as text).
    keep.sort_by(|a, b| {
        let fa = (a.phase != Phase::Failing, a.failing_since.as_deref());
        let fb = (b.phase != Phase::Failing, b.failing_since.as_deref());
        fa.cmp(&fb).then_with(|| a.name.cmp(&b.name))
    });
    let matching = keep.len();
    let per_page = q.per_page.clamp(1, MAX_PER_PAGE);
    let pages = matching.div_ceil(per_page).max(1);
    let page = q.page.clamp(1, pages);
    let sources = keep
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    Listing {
        summary,
        matching,
        page,
        pages,
        per_page,
        sources,
    }
}
