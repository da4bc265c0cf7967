//! Mapping between paths under the Source directory and URIs under the base URL, both ways.
//!
//! Each path segment is percent-encoded as its bytes (UTF-8 names as UTF-8, other bytes as they
//! are), leaving only RFC 3986 unreserved characters and a few sub-delimiters that are safe in a
//! path segment; `/` separates segments. The reverse mapping decodes and refuses anything that
//! could leave the directory: empty, `.` or `..` segments, encoded slashes or backslashes, NUL.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use percent_encoding::{percent_decode_str, percent_encode};

/// Longest base URL a Source is published under, in bytes: every URI of the Source starts with
/// it, and the sitemaps.org protocol keeps URLs under 2,048 characters.
pub const MAX_BASE_BYTES: usize = 1024;

/// Why a base URL (normalized, [`normalize_base`]) is not one to publish a Source under, or
/// `None`: it must be an http(s) URL that a Destination reads one way and can map (the reading
/// of `resourcesync_model::mapping::parse_uri`: no user information, which would be published
/// in every document; no backslash in the authority, no control character or space, a port in
/// range, a host) with a path that a Destination can map to folders (no empty, `.` or `..`
/// segment, also percent-encoded; no encoded `/`, `\` or NUL; UTF-8; segments of at most 255
/// bytes; no `.resourcesync`, the Destination's own folder), no query or fragment, no
/// character a URI cannot hold unencoded, and at most [`MAX_BASE_BYTES`].
pub fn base_problem(base: &str) -> Option<String> {
    if base.len() > MAX_BASE_BYTES {
        return Some(format!("it is longer than {MAX_BASE_BYTES} bytes"));
    }
    if base.contains(['?', '#']) {
        return Some("it has a query or a fragment".into());
    }
    if let Some(c) = base.chars().find(|c| "\"<>\\^`{|}".contains(*c)) {
        return Some(format!("{c:?} is not allowed unencoded in a URI"));
    }
    let parts = match resourcesync_model::mapping::parse_uri(base) {
        Ok(p) => p,
        Err(why) => return Some(why.to_owned()),
    };
    let path = parts.path.strip_prefix('/').unwrap_or(parts.path);
    let path = path.strip_suffix('/').unwrap_or(path);
    if path.is_empty() {
        return None;
    }
    for seg in path.split('/') {
        let bytes: Vec<u8> = percent_decode_str(seg).collect();
        let why = if seg.is_empty() {
            "an empty path segment (//)"
        } else if bytes == b"." || bytes == b".." {
            "a dot segment (. or ..), also percent-encoded"
        } else if bytes.iter().any(|b| matches!(b, b'/' | b'\\' | 0)) {
            "an encoded /, \\ or NUL in a path segment"
        } else if std::str::from_utf8(&bytes).is_err() {
            "a path segment that is not UTF-8 once percent-decoded"
        } else if bytes.len() > 255 {
            "a path segment longer than 255 bytes"
        } else if bytes.eq_ignore_ascii_case(b".resourcesync") {
            "a path segment .resourcesync (a Destination's own folder)"
        } else {
            continue;
        };
        return Some(why.to_owned());
    }
    None
}

/// Normalizes a base URL to end with exactly one `/`.
pub fn normalize_base(base: &str) -> String {
    let mut b = base.trim().trim_end_matches('/').to_owned();
    b.push('/');
    b
}

#[cfg(unix)]
fn os_bytes(s: &std::ffi::OsStr) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    s.as_bytes().to_vec()
}

#[cfg(not(unix))]
fn os_bytes(s: &std::ffi::OsStr) -> Vec<u8> {
    s.to_string_lossy().into_owned().into_bytes()
}

#[cfg(unix)]
fn os_from_bytes(b: Vec<u8>) -> Option<OsString> {
    use std::os::unix::ffi::OsStringExt;
    Some(OsString::from_vec(b))
}

#[cfg(not(unix))]
fn os_from_bytes(b: Vec<u8>) -> Option<OsString> {
    String::from_utf8(b).ok().map(OsString::from)
}

/// The URL path (relative, no leading slash) of a relative file path, percent-encoded.
/// Returns `None` for paths with components other than normal names.
pub fn encode_path(rel: &Path) -> Option<String> {
    let mut out = String::new();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return None;
        };
        if !out.is_empty() {
            out.push('/');
        }
        out.extend(percent_encode(
            &os_bytes(name),
            resourcesync_model::mapping::PATH_SEGMENT,
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// The URI of a relative file path under a base URL (normalized with [`normalize_base`]).
pub fn path_to_uri(base: &str, rel: &Path) -> Option<String> {
    encode_path(rel).map(|p| format!("{base}{p}"))
}

/// Why a URL path cannot map to a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnsafePath {
    /// A segment is empty, `.` or `..` (before or after decoding).
    #[error("path segment {0:?} is not allowed")]
    Segment(String),
    /// An encoded `/`, `\` or NUL, or a bare `\`.
    #[error("encoded separators, backslashes and NUL are not allowed")]
    Separator,
    /// A segment is longer than file systems allow.
    #[error("path segment longer than 255 bytes")]
    TooLong,
}

/// The relative file path of a percent-encoded URL path (without query or fragment), refusing
/// anything that could escape the directory.
pub fn decode_path(url_path: &str) -> Result<PathBuf, UnsafePath> {
    let mut out = PathBuf::new();
    for seg in url_path.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(UnsafePath::Segment(seg.chars().take(40).collect()));
        }
        let bytes: Vec<u8> = percent_decode_str(seg).collect();
        if bytes.iter().any(|&b| b == b'/' || b == b'\\' || b == 0) {
            return Err(UnsafePath::Separator);
        }
        if bytes == b"." || bytes == b".." {
            return Err(UnsafePath::Segment(
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
        if bytes.len() > 255 {
            return Err(UnsafePath::TooLong);
        }
        let name = os_from_bytes(bytes).ok_or(UnsafePath::Separator)?;
        out.push(name);
    }
    Ok(out)
}

/// The relative file path of a URI under a base URL, or `None` when it is not under it.
pub fn uri_to_path(base: &str, uri: &str) -> Option<Result<PathBuf, UnsafePath>> {
    let rest = uri.strip_prefix(base)?;
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    Some(decode_path(rest))
}

/// The bytes of a path (its text, lossily, off Unix).
pub(crate) fn path_bytes(p: &Path) -> std::borrow::Cow<'_, [u8]> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        std::borrow::Cow::Borrowed(p.as_os_str().as_bytes())
    }
    #[cfg(not(unix))]
    {
        std::borrow::Cow::Owned(p.to_string_lossy().into_owned().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_special_characters_and_back() {
        let base = normalize_base("http://example.com/data");
        for name in [
            "a b/c#d?e%f.txt",
            "naïve/日本語.txt",
            "plain/file-1_2~3.txt",
            "semi;colon=and+plus@at:colon.txt",
        ] {
            let uri = path_to_uri(&base, Path::new(name)).expect("uri");
            assert!(!uri[base.len()..].contains([' ', '#', '?']), "{uri}");
            let back = uri_to_path(&base, &uri).expect("under base").expect("safe");
            assert_eq!(back, Path::new(name));
        }
        assert_eq!(
            path_to_uri(&base, Path::new("a b/c#d?e%f.txt")).expect("uri"),
            "http://example.com/data/a%20b/c%23d%3Fe%25f.txt"
        );
    }

    #[test]
    fn refuses_traversal() {
        for bad in [
            "../etc/passwd",
            "a/../../b",
            "%2e%2e/x",
            "a/%2E%2E/b",
            "a%2fb",
            "a%5cb",
            "a%00b",
            "a\\b",
            "",
            "a//b",
            "./a",
        ] {
            // A literal backslash decodes to a backslash byte: refused too.
            assert!(decode_path(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(decode_path(&"a".repeat(256)), Err(UnsafePath::TooLong));
    }

    #[test]
    fn uris_outside_the_base_are_not_mapped() {
        let base = normalize_base("http://example.com/data/");
        assert!(uri_to_path(&base, "http://other.example.com/data/x").is_none());
        assert!(uri_to_path(&base, "http://example.com/datax").is_none());
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_names_round_trip() {
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
        let uri = path_to_uri("http://h/", Path::new(name)).expect("uri");
        assert_eq!(uri, "http://h/caf%E9.txt");
        let back = uri_to_path("http://h/", &uri).expect("base").expect("safe");
        assert_eq!(back.as_os_str(), name);
    }
}
