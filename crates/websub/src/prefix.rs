//! URL prefixes compared as parsed URLs, for the hub's allow lists (`hub --allow-topic`, the
//! embedded hub's `BASE/resourcesync/`).
//!
//! A string prefix is not a boundary: `http://h:1/topics/` is a string prefix of
//! `http://h:1/topics/../admin/secret` (which names `/admin/secret`), of
//! `http://h:1/topics/%2e%2e/admin` (the same), of `http://h:1/topicsecret` and, with user
//! information, of `http://h:1@other:2/internal` (host `other`, port 2). A [`UrlPrefix`] matches
//! a URL only when
//!
//! - the scheme, host and port (the scheme's default when none is written) are the same;
//! - the URL has no user information (`user:password@`);
//! - the URL's path, as parsed (the URL Standard resolves `.` and `..` segments and their
//!   percent-encoded spellings `%2e`), starts with the prefix's path segment by segment,
//!   compared percent-decoded (`/topics` matches `/topics` and `/topics/x`, never `/topicsx`;
//!   `/topics/` matches `/topics/` and below);
//! - no segment of the URL's path decodes to `.`, `..`, or holds an encoded `/`, `\` or NUL (a
//!   server that decodes them before resolving dot segments would leave the prefix).

use percent_encoding::percent_decode_str;
use url::Url;

/// A parsed URL prefix (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlPrefix {
    scheme: String,
    host: String,
    port: Option<u16>,
    /// Path segments, percent-decoded; the last is empty when the prefix's path ends in `/`.
    segments: Vec<Vec<u8>>,
    text: String,
}

impl UrlPrefix {
    /// Parses `s`: an http(s) URL with a host, without user information, query or fragment.
    pub fn parse(s: &str) -> Result<Self, String> {
        let u = Url::parse(s).map_err(|e| format!("{s:?} is not a URL: {e}"))?;
        if !matches!(u.scheme(), "http" | "https") {
            return Err(format!("{s:?} is not an http(s) URL"));
        }
        let Some(host) = u.host_str() else {
            return Err(format!("{s:?} has no host"));
        };
        if has_user_info(&u) {
            return Err(format!("{s:?} has user information (user:password@)"));
        }
        if u.query().is_some() || u.fragment().is_some() {
            return Err(format!(
                "{s:?} has a query or a fragment: give a scheme, host, port and path"
            ));
        }
        let segments = match decoded_segments(&u) {
            Some(s) => s,
            None => {
                return Err(format!(
                    "{s:?} has a path segment with an encoded '/', '\\', NUL or dot segment"
                ));
            }
        };
        Ok(UrlPrefix {
            scheme: u.scheme().to_owned(),
            host: host.to_owned(),
            port: u.port_or_known_default(),
            segments,
            text: u.to_string(),
        })
    }

    /// Whether `url` lies under this prefix (see the module documentation).
    pub fn matches(&self, url: &Url) -> bool {
        if url.scheme() != self.scheme
            || url.host_str() != Some(self.host.as_str())
            || url.port_or_known_default() != self.port
            || has_user_info(url)
        {
            return false;
        }
        let Some(got) = decoded_segments(url) else {
            return false;
        };
        match self.segments.split_last() {
            // "/topics/": "/topics/" itself and everything below.
            Some((last, dir)) if last.is_empty() => got.len() > dir.len() && got.starts_with(dir),
            // "/topics": "/topics" and everything below it, never "/topicsx".
            _ => got.starts_with(&self.segments),
        }
    }

    /// The prefix as parsed.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Whether a URL carries `user:password@`.
pub(crate) fn has_user_info(u: &Url) -> bool {
    !u.username().is_empty() || u.password().is_some()
}

/// The path segments of `u`, percent-decoded; `None` when one is a dot segment once decoded or
/// holds an encoded separator or NUL.
fn decoded_segments(u: &Url) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for seg in u.path_segments()? {
        let d: Vec<u8> = percent_decode_str(seg).collect();
        if d == b"." || d == b".." || d.iter().any(|b| matches!(b, b'/' | b'\\' | 0)) {
            return None;
        }
        out.push(d);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(prefix: &str, url: &str) -> bool {
        UrlPrefix::parse(prefix)
            .expect("a prefix")
            .matches(&Url::parse(url).expect("a URL"))
    }

    #[test]
    fn paths_are_compared_parsed_and_segment_aligned() {
        let p = "http://127.0.0.1:8080/topics/";
        assert!(m(p, "http://127.0.0.1:8080/topics/"));
        assert!(m(p, "http://127.0.0.1:8080/topics/a/b.xml?x=1"));
        assert!(m(p, "HTTP://127.0.0.1:8080/topics/./a"));
        assert!(m(p, "http://127.0.0.1:8080/%74opics/a"));
        assert!(m(p, "http://127.0.0.1:8080/topics/a/../b"));
        for bad in [
            "http://127.0.0.1:8080/topics/../admin/secret",
            "http://127.0.0.1:8080/topics/%2e%2e/admin/x",
            "http://127.0.0.1:8080/topics/%2E%2E/admin/x",
            "http://127.0.0.1:8080/topics/.%2e/admin/x",
            "http://127.0.0.1:8080/topics/..%2fadmin",
            "http://127.0.0.1:8080/topics/..%5cadmin",
            "http://127.0.0.1:8080/topics/a%2f..%2f..%2fadmin",
            "http://127.0.0.1:8080/topics/a%00",
            "http://127.0.0.1:8080/topics\\..\\admin",
            "http://127.0.0.1:8080/topicsecret",
            "http://127.0.0.1:8080/topics",
            "http://127.0.0.1:8080@127.0.0.1:9090/internal",
            "http://u:p@127.0.0.1:8080/topics/a",
            "http://127.0.0.1:8081/topics/a",
            "http://127.0.0.2:8080/topics/a",
            "https://127.0.0.1:8080/topics/a",
        ] {
            let u = Url::parse(bad).expect("a URL");
            assert!(!m(p, bad), "{bad} (parsed: {u}) matched");
        }
        // Without a trailing slash: the segment itself and below, never a longer name.
        let p = "http://e.org/topics";
        assert!(m(p, "http://e.org/topics"));
        assert!(m(p, "http://e.org/topics/x"));
        assert!(!m(p, "http://e.org/topicsx"));
        // Default ports are the same as written ones; hosts compare case-insensitively.
        assert!(m("http://E.org:80/", "http://e.org/anything"));
        assert!(m("https://e.org/", "https://e.org:443/t"));
        assert!(!m("http://e.org/", "http://e.org.evil/t"));
    }

    #[test]
    fn prefixes_must_be_plain_http_urls() {
        for bad in [
            "/topics/",
            "ftp://e.org/",
            "http://u@e.org/",
            "http://e.org/?q=1",
            "http://e.org/#f",
            "http://e.org/a%2fb/",
        ] {
            assert!(UrlPrefix::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
