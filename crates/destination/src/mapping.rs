//! URI → path under DEST: the rule is the model's ([`resourcesync_model::mapping`], sans I/O,
//! fuzzed there); [`UriMapper`] here gives its refusals as this crate's [`Error`]s: a base URL
//! the rule cannot use is an [`Error::Config`], a resource URI it refuses an
//! [`Error::Unmappable`] (a per-resource failure, never written).

use resourcesync_model::mapping as model;
pub use resourcesync_model::mapping::{UriParts, base_url, parse_uri};
use resourcesync_store::RelPath;

use crate::error::{Error, Result};

/// Maps resource URIs to paths under DEST (see [`resourcesync_model::mapping`] for the rule).
#[derive(Debug, Clone)]
pub struct UriMapper(model::UriMapper);

impl UriMapper {
    /// A mapper for a base URL.
    pub fn new(base: &str) -> Result<Self> {
        model::UriMapper::new(base)
            .map(UriMapper)
            .map_err(|e| match e {
                resourcesync_model::Error::Unmappable { reason, .. } => {
                    Error::Config(format!("base URL {base:?}: {reason}"))
                }
                other => Error::Config(format!("base URL {base:?}: {other}")),
            })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        self.0.base()
    }

    /// The path of a resource under DEST, or why it has none.
    pub fn map(&self, uri: &str) -> Result<RelPath> {
        self.0.map(uri).map_err(|e| match e {
            resourcesync_model::Error::Unmappable { uri, reason } => {
                Error::Unmappable { uri, reason }
            }
            other => Error::Unmappable {
                uri: uri.chars().take(200).collect(),
                reason: other.to_string(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_this_crates_errors() {
        assert!(
            matches!(UriMapper::new("ftp://e.org/"), Err(Error::Config(m)) if m.contains("only http and https"))
        );
        let m = UriMapper::new("http://e.org/data/").expect("mapper");
        assert_eq!(m.base(), "http://e.org/data/");
        assert_eq!(
            m.map("http://e.org/data/a/b.txt").expect("maps").as_str(),
            "a/b.txt"
        );
        match m.map("http://e.org/data/../x") {
            Err(Error::Unmappable { uri, reason }) => {
                assert_eq!(uri, "http://e.org/data/../x");
                assert!(reason.contains("dot segment"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
