//! Which of a Source's resources a Destination copies: include and exclude patterns over
//! resource URIs ([`UriFilter`]).
//!
//! The specification leaves a Destination free to keep a subset (Z39.99-2014 §5.2: it
//! "may" synchronize with a Source; nothing obliges it to copy every resource). The choices
//! here follow what users know from rsync and rclone:
//!
//! - A pattern is matched against the whole URI (`https://host/path`): `*` is any run of
//!   characters (`/` included), `?` one character, `[abc]` a class, `{pdf,txt}` alternatives.
//!   `*.pdf` keeps every PDF; `https://host/images/*` everything under a folder.
//! - With include patterns, only URIs matching one of them are copied; exclude patterns then
//!   leave out those matching any of them (exclude wins).
//! - A resource left out is left alone: it is not fetched, and a copy of it made before the
//!   patterns changed is neither updated nor deleted (rsync's default; delete it by hand, or
//!   sync it once without the pattern).

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::{Error, Result};

/// Include and exclude patterns over resource URIs. The default keeps every resource.
#[derive(Debug, Clone, Default)]
pub struct UriFilter {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    patterns: (Vec<String>, Vec<String>),
}

impl UriFilter {
    /// The filter of these patterns; an [`Error::Config`] naming a pattern that does not parse.
    pub fn new(include: &[String], exclude: &[String]) -> Result<UriFilter> {
        Ok(UriFilter {
            include: set(include, "include")?,
            exclude: set(exclude, "exclude")?,
            patterns: (include.to_vec(), exclude.to_vec()),
        })
    }

    /// Whether the resource at `uri` is copied.
    pub fn wants(&self, uri: &str) -> bool {
        self.include.as_ref().is_none_or(|s| s.is_match(uri))
            && !self.exclude.as_ref().is_some_and(|s| s.is_match(uri))
    }

    /// Whether every resource is copied (no pattern given).
    pub fn is_all(&self) -> bool {
        self.include.is_none() && self.exclude.is_none()
    }

    /// The include patterns, as given.
    pub fn include(&self) -> &[String] {
        &self.patterns.0
    }

    /// The exclude patterns, as given.
    pub fn exclude(&self) -> &[String] {
        &self.patterns.1
    }
}

fn set(patterns: &[String], what: &str) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let g = GlobBuilder::new(p)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|e| Error::Config(format!("{what} pattern {p:?}: {}", e.kind())))?;
        b.add(g);
    }
    b.build()
        .map(Some)
        .map_err(|e| Error::Config(format!("{what} patterns: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(include: &[&str], exclude: &[&str]) -> UriFilter {
        let v = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        UriFilter::new(&v(include), &v(exclude)).expect("patterns")
    }

    #[test]
    fn no_pattern_keeps_everything() {
        let all = UriFilter::default();
        assert!(all.is_all());
        assert!(all.wants("http://h/a"));
        assert!(f(&[], &[]).wants("http://h/x/y.pdf"));
    }

    #[test]
    fn include_keeps_only_matches_and_star_crosses_folders() {
        let pdf = f(&["*.pdf"], &[]);
        assert!(pdf.wants("http://h/a/b/c.pdf"));
        assert!(!pdf.wants("http://h/a/b/c.txt"));
        let folder = f(&["http://h/images/*", "http://h/*.{txt,csv}"], &[]);
        assert!(folder.wants("http://h/images/a/b.png"));
        assert!(folder.wants("http://h/notes/x.csv"));
        assert!(!folder.wants("http://h/docs/a.png"));
    }

    #[test]
    fn exclude_wins_over_include() {
        let x = f(
            &["http://h/images/*"],
            &["*.tmp", "http://h/images/private/*"],
        );
        assert!(x.wants("http://h/images/a.png"));
        assert!(!x.wants("http://h/images/a.tmp"));
        assert!(!x.wants("http://h/images/private/b.png"));
        assert!(f(&[], &["*secret=*"]).wants("http://h/a"));
        assert!(!f(&[], &["*secret=*"]).wants("http://h/a?secret=1"));
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let e = UriFilter::new(&["http://h/[a".into()], &[]).expect_err("unclosed class");
        let m = e.to_string();
        assert!(m.contains("include pattern \"http://h/[a\""), "{m}");
    }
}
