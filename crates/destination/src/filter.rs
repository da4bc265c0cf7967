//! Which of a Source's resources a Destination copies: include and exclude patterns over
//! the names resources get under DEST ([`UriFilter`]).
//!
//! The specification leaves a Destination free to keep a subset (Z39.99-2014 §5.2: it
//! "may" synchronize with a Source; nothing obliges it to copy every resource). The choices
//! here follow what users know from rsync and rclone:
//!
//! - A pattern is matched against the name as people write it: the resource's path under DEST,
//!   percent-decoded (`b 1.txt`, `日本語/ü.txt`, `100%.txt`), not its percent-encoded URI.
//!   - A pattern without `/` is matched against the file's name alone, at any depth:
//!     `*.pdf`, `b 1*.txt`.
//!   - A pattern with `/` is matched against the whole path, written `/PATH`: `/docs/*` (or
//!     `docs/*`) is everything under the folder `docs` at the top of DEST; a pattern that
//!     starts with `*` may match at any depth (`*/日本語/*`, `*/private/*`).
//!   - A pattern that starts with `http://` or `https://` is matched against the whole URI as
//!     the Source publishes it (percent-encoded): `https://host/images/*`.
//! - `*` is any run of characters (`/` included), `?` one character, `[abc]` a class,
//!   `{pdf,txt}` alternatives, `\` escapes the next character.
//! - With include patterns, only resources matching one of them are copied; exclude patterns
//!   then leave out those matching any of them (exclude wins).
//! - A resource left out is left alone: it is not fetched, and a copy of it made before the
//!   patterns changed is neither updated nor deleted (rsync's default; delete it by hand, or
//!   sync it once without the pattern). `--delete` leaves files the patterns leave out alone
//!   too (rsync: excluded files are protected from deletion).
//! - A pattern that matched no resource of a run that went through every resource (a baseline)
//!   is said in a warning ([`UriFilter::unmatched`]): most likely a typo.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use globset::{GlobBuilder, GlobMatcher};
use percent_encoding::percent_decode_str;

use crate::error::{Error, Result};

/// What a pattern is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    /// The whole URI, as published.
    Uri,
    /// The file's name (the last segment of its path), decoded.
    Name,
    /// `/` and the path under DEST, decoded.
    Path,
}

#[derive(Debug, Clone)]
struct Pattern {
    subject: Subject,
    glob: GlobMatcher,
}

/// Include and exclude patterns over the resources' names (see the module docs). The default
/// keeps every resource. Clones share which patterns matched ([`UriFilter::unmatched`]).
#[derive(Debug, Clone, Default)]
pub struct UriFilter {
    include: Vec<Pattern>,
    exclude: Vec<Pattern>,
    patterns: (Vec<String>, Vec<String>),
    /// Whether each pattern matched a resource: the include patterns, then the exclude ones.
    hits: Arc<Vec<AtomicBool>>,
}

impl UriFilter {
    /// The filter of these patterns; an [`Error::Config`] naming a pattern that does not parse.
    pub fn new(include: &[String], exclude: &[String]) -> Result<UriFilter> {
        let hits = (0..include.len() + exclude.len())
            .map(|_| AtomicBool::new(false))
            .collect();
        Ok(UriFilter {
            include: compile(include, "include")?,
            exclude: compile(exclude, "exclude")?,
            patterns: (include.to_vec(), exclude.to_vec()),
            hits: Arc::new(hits),
        })
    }

    /// Whether the resource at `uri` is copied, its path under DEST taken as the URI's own
    /// path, percent-decoded (the Source's base URL being its origin). The engine gives the
    /// path the resource maps to ([`UriFilter::wants_at`]).
    pub fn wants(&self, uri: &str) -> bool {
        self.wants_at(uri, None)
    }

    /// Whether the resource at `uri`, whose path under DEST is `path` (decoded; `None`: the
    /// URI's own path), is copied.
    pub fn wants_at(&self, uri: &str, path: Option<&str>) -> bool {
        self.decide(uri, path, true)
    }

    /// Whether the patterns leave out the file at `path` under DEST (its URI: `base` and the
    /// path, percent-encoded), not counted as a match ([`UriFilter::unmatched`]): `--delete`
    /// leaves such a file alone.
    pub(crate) fn leaves_out_path(&self, base: &str, path: &str) -> bool {
        if self.is_all() {
            return false;
        }
        let encoded: Vec<String> = path
            .split('/')
            .map(|s| {
                percent_encoding::utf8_percent_encode(s, resourcesync_model::mapping::PATH_SEGMENT)
                    .to_string()
            })
            .collect();
        let uri = format!("{base}{}", encoded.join("/"));
        !self.decide(&uri, Some(path), false)
    }

    fn decide(&self, uri: &str, path: Option<&str>, record: bool) -> bool {
        if self.is_all() {
            return true;
        }
        let own;
        let path = match path {
            Some(p) => p,
            None => {
                own = uri_path(uri);
                own.as_str()
            }
        };
        let slashed = format!("/{}", path.trim_start_matches('/'));
        let name = path.rsplit('/').next().unwrap_or(path);
        let is = |p: &Pattern| match p.subject {
            Subject::Uri => p.glob.is_match(uri),
            Subject::Name => p.glob.is_match(name),
            Subject::Path => p.glob.is_match(&slashed),
        };
        let mut included = self.include.is_empty();
        for (i, p) in self.include.iter().enumerate() {
            if is(p) {
                included = true;
                if record {
                    self.hit(i);
                }
            }
        }
        let mut excluded = false;
        for (i, p) in self.exclude.iter().enumerate() {
            if is(p) {
                excluded = true;
                if record {
                    self.hit(self.include.len() + i);
                }
            }
        }
        included && !excluded
    }

    /// [`UriFilter::wants_at`] the path `mapper` gives the resource (its own path when it
    /// has none: it then fails as unmappable, unless left out).
    pub(crate) fn wants_mapped(&self, uri: &str, mapper: &crate::mapping::UriMapper) -> bool {
        if self.is_all() {
            return true;
        }
        let path = mapper.map(uri).ok();
        self.wants_at(uri, path.as_ref().map(|p| p.as_str()))
    }

    fn hit(&self, i: usize) {
        if let Some(h) = self.hits.get(i) {
            h.store(true, Ordering::Relaxed);
        }
    }

    /// The same patterns, none of them matched yet (one run's filter: clones of it share
    /// what matched, clones of the original do not).
    pub fn fresh(&self) -> UriFilter {
        UriFilter {
            hits: Arc::new(self.hits.iter().map(|_| AtomicBool::new(false)).collect()),
            ..self.clone()
        }
    }

    /// The patterns that matched no resource given to this filter or its clones since it was
    /// made ([`UriFilter::new`], [`UriFilter::fresh`]): `("include" or "exclude", pattern)`.
    pub fn unmatched(&self) -> Vec<(&'static str, &str)> {
        let inc = self.patterns.0.iter().map(|p| ("include", p.as_str()));
        let exc = self.patterns.1.iter().map(|p| ("exclude", p.as_str()));
        inc.chain(exc)
            .zip(self.hits.iter())
            .filter(|(_, h)| !h.load(Ordering::Relaxed))
            .map(|(p, _)| p)
            .collect()
    }

    /// One warning per pattern that matched no resource (see [`UriFilter::unmatched`]).
    pub fn unmatched_warnings(&self) -> Vec<String> {
        self.unmatched()
            .into_iter()
            .map(|(what, p)| {
                format!(
                    "{what} pattern {p:?} matched no resource: patterns match the path under \
                     DEST as written (`*.pdf`, `/docs/*`, `*/日本語/*`), or the whole URI when \
                     they start with http:// or https://; check it for a typo"
                )
            })
            .collect()
    }

    /// Whether every resource is copied (no pattern given).
    pub fn is_all(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
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

/// The path of a URI (after its authority, before `?` and `#`), percent-decoded, without its
/// leading `/`.
fn uri_path(uri: &str) -> String {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let rest = rest.split(['#', '?']).next().unwrap_or_default();
    let path = rest.find('/').map_or("", |i| &rest[i + 1..]);
    percent_decode_str(path).decode_utf8_lossy().into_owned()
}

fn compile(patterns: &[String], what: &str) -> Result<Vec<Pattern>> {
    patterns
        .iter()
        .map(|p| {
            let lower = p.get(..8).unwrap_or(p).to_ascii_lowercase();
            let (subject, text) = if lower.starts_with("http://") || lower.starts_with("https://") {
                (Subject::Uri, p.clone())
            } else if !p.contains('/') {
                (Subject::Name, p.clone())
            } else if p.starts_with('/') || p.starts_with('*') {
                (Subject::Path, p.clone())
            } else {
                (Subject::Path, format!("/{p}"))
            };
            let glob = GlobBuilder::new(&text)
                .literal_separator(false)
                .backslash_escape(true)
                .build()
                .map_err(|e| {
                    Error::Config(format!(
                        "{what} pattern {p:?}: {} (`*` any characters, `?` one, `[abc]` a \
                         class, `{{a,b}}` either, `\\` escapes)",
                        e.kind()
                    ))
                })?
                .compile_matcher();
            Ok(Pattern { subject, glob })
        })
        .collect()
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
        // The query is in the URI only.
        assert!(f(&[], &["http://*secret=*"]).wants("http://h/a"));
        assert!(!f(&[], &["http://*secret=*"]).wants("http://h/a?secret=1"));
    }

    #[test]
    fn names_are_matched_decoded_as_people_write_them() {
        let x = f(&[], &["b 1*.txt", "100%.txt"]);
        assert!(!x.wants("http://h/b%201.txt"));
        assert!(!x.wants("http://h/d/b%201%20copy.txt"));
        assert!(!x.wants("http://h/100%25.txt"));
        assert!(x.wants("http://h/b2.txt"));
        let jp = f(&["*/日本語/*"], &[]);
        assert!(jp.wants("http://h/%E6%97%A5%E6%9C%AC%E8%AA%9E/%C3%BC.txt"));
        assert!(jp.wants("http://h/a/%E6%97%A5%E6%9C%AC%E8%AA%9E/x"));
        assert!(!jp.wants("http://h/other/%C3%BC.txt"));
        // With a slash and no leading `*`: anchored at the top of DEST.
        let top = f(&["docs/*"], &[]);
        assert!(top.wants_at("http://h/base/docs/a", Some("docs/a")));
        assert!(!top.wants_at("http://h/base/x/docs/a", Some("x/docs/a")));
        assert!(f(&["/docs/*"], &[]).wants_at("http://h/base/docs/a", Some("docs/a")));
        // The path under DEST, not the URI's: the base URL is not part of it.
        assert!(!f(&["/base/*"], &[]).wants_at("http://h/base/docs/a", Some("docs/a")));
        // The percent-encoded URI still matches with a pattern that starts with http(s)://.
        assert!(!f(&[], &["http://h/b%201*"]).wants("http://h/b%201.txt"));
    }

    #[test]
    fn patterns_that_matched_nothing_are_told() {
        let x = f(&["*.txt", "*.pdf"], &["*secret*", "nothing-here"]);
        assert!(x.wants("http://h/a.txt"));
        assert!(!x.wants("http://h/secret.txt"));
        let clone = x.clone();
        assert_eq!(
            clone.unmatched(),
            vec![("include", "*.pdf"), ("exclude", "nothing-here")]
        );
        assert_eq!(x.unmatched_warnings().len(), 2);
        assert!(x.unmatched_warnings()[0].contains("\"*.pdf\" matched no resource"));
        assert_eq!(x.fresh().unmatched().len(), 4);
        assert!(UriFilter::default().unmatched().is_empty());
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let e = UriFilter::new(&["http://h/[a".into()], &[]).expect_err("unclosed class");
        let m = e.to_string();
        assert!(m.contains("include pattern \"http://h/[a\""), "{m}");
    }
}
