//! [`RelPath`]: a checked relative path under the destination directory.
//!
//! Every file the Destination writes, reads or removes is named by a `RelPath`, and a `RelPath`
//! can only be built through [`RelPath::from_segments`] or [`RelPath::parse`], which refuse
//! anything that could leave the directory or that file systems do not accept:
//!
//! - empty segments, `.` and `..`;
//! - `/`, `\` or NUL inside a segment (so no absolute path and no Windows separator);
//! - segments longer than 255 bytes, paths longer than 4,000 bytes or deeper than 128;
//! - a first segment `.resourcesync`, the Destination's own folder (state and temporary files).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// The Destination's own folder under DEST: state database and temporary files.
pub const STATE_DIR: &str = ".resourcesync";

/// What [`RelPath`]'s constructors return.
pub type Result<T> = std::result::Result<T, Error>;

/// Longest segment, in bytes (the `NAME_MAX` of common file systems).
pub const MAX_SEGMENT_BYTES: usize = 255;
/// Longest path, in bytes (below `PATH_MAX` with room for the destination directory).
pub const MAX_PATH_BYTES: usize = 4000;
/// Deepest path, in segments.
pub const MAX_DEPTH: usize = 128;

/// A relative path of checked segments, written with `/`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(String);

fn cut(s: &str) -> String {
    s.chars().take(80).collect()
}

fn check_segment(seg: &str) -> Result<()> {
    let refuse = |reason| {
        Err(Error::UnsafePath {
            path: cut(seg),
            reason,
        })
    };
    if seg.is_empty() {
        return refuse("empty path segment");
    }
    if seg == "." || seg == ".." {
        return refuse("dot segment (. or ..)");
    }
    if seg.contains('/') {
        return refuse("slash inside a segment");
    }
    if seg.contains('\\') {
        return refuse("backslash");
    }
    if seg.contains('\0') {
        return refuse("NUL byte");
    }
    if seg.len() > MAX_SEGMENT_BYTES {
        return refuse("path segment longer than 255 bytes");
    }
    Ok(())
}

impl RelPath {
    /// A path from its segments (already percent-decoded), each checked.
    pub fn from_segments<I, S>(segments: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = String::new();
        let mut depth = 0usize;
        for seg in segments {
            let seg = seg.as_ref();
            check_segment(seg)?;
            // Any case: on a case-insensitive file system (macOS, Windows) `.ResourceSync` is
            // the same folder.
            if depth == 0 && seg.eq_ignore_ascii_case(STATE_DIR) {
                return Err(Error::UnsafePath {
                    path: cut(seg),
                    reason: "the destination's own .resourcesync folder",
                });
            }
            depth += 1;
            if depth > MAX_DEPTH {
                return Err(Error::UnsafePath {
                    path: cut(&out),
                    reason: "path deeper than 128 segments",
                });
            }
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(seg);
            if out.len() > MAX_PATH_BYTES {
                return Err(Error::UnsafePath {
                    path: cut(&out),
                    reason: "path longer than 4000 bytes",
                });
            }
        }
        if out.is_empty() {
            return Err(Error::UnsafePath {
                path: String::new(),
                reason: "empty path",
            });
        }
        Ok(RelPath(out))
    }

    /// A path written with `/` separators (no leading slash), each segment checked.
    pub fn parse(s: &str) -> Result<Self> {
        if s.starts_with('/') {
            return Err(Error::UnsafePath {
                path: cut(s),
                reason: "absolute path",
            });
        }
        RelPath::from_segments(s.split('/'))
    }

    /// The path with `/` separators.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The path under a root directory.
    pub fn under(&self, root: &Path) -> PathBuf {
        let mut p = root.to_path_buf();
        for s in self.segments() {
            p.push(s);
        }
        p
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for RelPath {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RelPath {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_paths() {
        let p = RelPath::parse("a/b c/d.txt").expect("ok");
        assert_eq!(p.segments().count(), 3);
        assert_eq!(p.under(Path::new("/d")), PathBuf::from("/d/a/b c/d.txt"));
        assert!(RelPath::parse("x/.resourcesync/y").is_ok());
        assert!(RelPath::parse(".well-known/resourcesync").is_ok());
    }

    #[test]
    fn refuses_what_could_escape() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "a\\..\\b",
            "a\0b",
            ".resourcesync/state.sqlite",
            ".ResourceSync/state.sqlite",
        ] {
            assert!(RelPath::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(RelPath::parse(&"n".repeat(256)).is_err());
        assert!(RelPath::parse(&"n".repeat(255)).is_ok());
        let deep = vec!["d"; 129].join("/");
        assert!(RelPath::parse(&deep).is_err());
    }
}
