//! URI → path under DEST.
//!
//! The rule (Z39.99-2014 §6.3.2 puts the Source Description at the well-known
//! URI of the Source's site):
//!
//! 1. The Source's **base URL** is, in order: the one given (`--base-url`); else, when the
//!    Source Description is at `PREFIX/.well-known/resourcesync`, `PREFIX/`; else the directory
//!    of the Source Description's URL; else the origin (`scheme://host[:port]/`) of the
//!    Capability List, or of the list synced when there is no Capability List.
//! 2. A resource whose URI is under the base URL (same host and port, path starting with the
//!    base's path) maps to the rest of its path: `BASE/a/b.txt` → `DEST/a/b.txt`.
//! 3. Any other resource maps to `DEST/<host>/<path>`, with `<host>_<port>` when the port is not
//!    the scheme's default: `http://mirror.example.org:8080/x` → `DEST/mirror.example.org_8080/x`.
//! 4. Each path segment is percent-decoded on its own, and refused (a per-resource error, never
//!    written) when it is empty (`a//b`, a trailing `/`), `.` or `..` before or after decoding,
//!    contains `/`, `\` or NUL after decoding, is not UTF-8 after decoding, or is longer than
//!    255 bytes; see [`RelPath`]. A query is kept in the last segment
//!    (`page?id=1`, with `/` in it encoded as `%2F`); a fragment is dropped.
//!
//! A `<loc>` that is an IRI (spaces, non-ASCII letters) is read as its URI, percent-encoded as
//! browsers do ([`iri_to_uri`]), where the Destination reads the document: the state, the
//! diff, the fetch and this rule see the encoded form only, so `a b.txt` and `a%20b.txt` are
//! one resource at one path.
//!
//! The URI is examined as written, before any normalization, so `http://host/../x` is refused
//! rather than silently turned into `http://host/x`.
//!
//! The rule is not one to one: `BASE/other.example/x` and `http://other.example/x` map to one
//! path, as do `%41` and `A`. The Destination gives a path to one URI only (the one whose copy
//! its state records there) and refuses the others (`resourcesync_destination`'s `owner`
//! module; SECURITY.md).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str};
use url::Url;

use crate::error::Error;
use crate::path::RelPath;

/// The bytes percent-encoded in a path segment of a URI: all but RFC 3986's `pchar`
/// characters (unreserved `-._~`, the sub-delimiters `!$&'()*+,;=`, `:` and `@`), so `%`, `#`,
/// `?`, space, `/` and every non-ASCII byte are. The one set every crate encodes paths with.
pub const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// What [`UriMapper`] returns.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The parts of an http(s) URI the mapping needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriParts<'a> {
    /// `http` or `https`, lower case.
    pub scheme: String,
    /// The host, lower case, without user information or port.
    pub host: String,
    /// The port, the scheme's default when absent.
    pub port: u16,
    /// Whether the port is the scheme's default.
    pub default_port: bool,
    /// The path as written (starts with `/`, or is empty).
    pub path: &'a str,
    /// The query as written, without `?`.
    pub query: Option<&'a str>,
}

/// Splits an absolute http(s) URI without normalizing its path.
///
/// The host and port are the HTTP client's own reading of the URI (the WHATWG URL parser that
/// fetches it), so that a copy is always stored under the host it was fetched from: a host
/// written percent-encoded, in another IPv4 notation (`0x7f.1`) or as an IDN maps to the host
/// the request goes to. What the two readings could disagree on is refused: user information
/// (`user@host`) and backslashes in the authority (`http://a\@b/` is `a` for the client and
/// `b` for a reader of RFC 3986), and controls or spaces anywhere (the client strips tabs and
/// line breaks: `http://exa<TAB>mple.com/` is `example.com`).
pub fn parse_uri(uri: &str) -> Result<UriParts<'_>, &'static str> {
    if uri.bytes().any(|b| b <= b' ' || b == 0x7f)
        || (!uri.is_ascii() && uri.chars().any(char::is_control))
    {
        return Err(
            "a control character or a space in the URI (tabs and line breaks are refused, not \
             stripped as browsers do)",
        );
    }
    let (scheme, rest) = uri.split_once("://").ok_or("not an absolute URI")?;
    let scheme = scheme.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err("only http and https URIs are synced"),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(auth_end);
    if authority.contains('@') {
        return Err("user information (user@host) in the authority");
    }
    if authority.contains('\\') {
        return Err("a backslash in the authority");
    }
    // RFC 3986's reading of the authority, checked against the client's below.
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6.split_once(']').ok_or("bad IPv6 host")?;
        (h, p.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host");
    }
    let port = match port {
        None | Some("") => default,
        Some(p) => p.parse().map_err(|_| "bad port")?,
    };
    let url = Url::parse(uri).map_err(|_| "not a URL the HTTP client can fetch")?;
    let host = url.host_str().ok_or("no host")?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if url.port_or_known_default() != Some(port) {
        return Err("the port is read two ways");
    }
    let (path, query) = match after.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (after, None),
    };
    Ok(UriParts {
        scheme,
        host: host.to_ascii_lowercase(),
        port,
        default_port: port == default,
        path,
        query,
    })
}

/// The URI of an IRI read in a `<loc>`: `None` when `loc` is not one the Destination rewrites
/// (left as written), else `loc` with every space and non-ASCII character after the authority
/// percent-encoded as its UTF-8 bytes (RFC 3987 §3.1; the WHATWG URL parser's path and query
/// rules, the way browsers, wget and rclone fetch such links), and every `%` there that does
/// not start a percent-encoded octet as `%25` (the byte the mapping reads it as, so that the
/// Source's own encoded form is the same URI and a server that refuses a stray `%` serves it).
///
/// A `<loc>` must be a URI (Z39.99-2014 §7, after the Sitemap protocol; RFC 3986 §2 has no
/// space nor non-ASCII character), and `resourcesync validate` still says so; but Sources built
/// by hand or with Python resync (which writes file names as they are) publish IRIs, and a
/// Destination that refused them would miss every such file.
///
/// Not rewritten, so that [`parse_uri`] refuses them: a `loc` with a control character
/// anywhere (a tab, a line break: the WHATWG parser strips those silently, fetching another
/// URI than the one written), and one with nothing to encode after the authority (the host is
/// the HTTP client's to read, [`parse_uri`], and an ASCII URI is kept as the Source wrote it).
pub fn iri_to_uri(loc: &str) -> Option<String> {
    let start = loc.find("://").map_or(0, |i| i + 3);
    let at = loc[start..]
        .find(['/', '?', '#'])
        .map_or(loc.len(), |i| start + i);
    let (head, tail) = loc.split_at(at);
    if !tail.bytes().any(|b| b == b' ' || b >= 0x80) || loc.chars().any(char::is_control) {
        return None;
    }
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(loc.len() + tail.len() * 2);
    out.push_str(head);
    let bytes = tail.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let stray = b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit));
        if b == b' ' || b >= 0x80 || stray {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        } else {
            out.push(char::from(b));
        }
    }
    Some(out)
}

/// The Source's base URL from what discovery found (rule 1 of the module docs).
pub fn base_url(
    given: Option<&str>,
    description: Option<&str>,
    capability_list: Option<&str>,
    list: &str,
) -> String {
    if let Some(b) = given {
        let mut b = b.trim().to_owned();
        if !b.ends_with('/') {
            b.push('/');
        }
        return b;
    }
    if let Some(d) = description {
        let d = d.split(['?', '#']).next().unwrap_or_default();
        if let Some(prefix) = d.strip_suffix(".well-known/resourcesync") {
            if prefix.ends_with('/') {
                return prefix.to_owned();
            }
        }
        if let Some(i) = d.rfind('/') {
            if i > d.find("://").map_or(0, |s| s + 2) {
                return d[..=i].to_owned();
            }
        }
    }
    origin(capability_list.unwrap_or(list))
}

fn origin(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            format!("{scheme}://{}/", &rest[..end])
        }
        None => url.to_owned(),
    }
}

/// Maps resource URIs to paths under DEST (see the module docs for the rule).
#[derive(Debug, Clone)]
pub struct UriMapper {
    base: String,
    host: String,
    port: u16,
    path: String,
}

impl UriMapper {
    /// A mapper for a base URL; [`Error::Unmappable`] when it is not an http(s) URL the rule can
    /// use.
    pub fn new(base: &str) -> Result<Self> {
        let p = parse_uri(base).map_err(|reason| Error::Unmappable {
            uri: base.chars().take(200).collect(),
            reason: reason.to_owned(),
        })?;
        let mut path = p.path.to_owned();
        if !path.ends_with('/') {
            path.push('/');
        }
        Ok(UriMapper {
            base: base.to_owned(),
            host: p.host,
            port: p.port,
            path,
        })
    }

    /// The base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The path of a resource under DEST, or why it has none ([`Error::Unmappable`]).
    pub fn map(&self, uri: &str) -> Result<RelPath> {
        let refuse = |reason: String| Error::Unmappable {
            uri: uri.chars().take(200).collect(),
            reason,
        };
        let p = parse_uri(uri).map_err(|r| refuse(r.to_owned()))?;
        let mut raw: Vec<&str> = Vec::new();
        let host_seg;
        let rest = if p.host == self.host && p.port == self.port && p.path.starts_with(&self.path) {
            &p.path[self.path.len()..]
        } else {
            host_seg = if p.default_port {
                p.host.clone()
            } else {
                format!("{}_{}", p.host, p.port)
            };
            raw.push(&host_seg);
            p.path.strip_prefix('/').unwrap_or(p.path)
        };
        if rest.is_empty() {
            return Err(refuse(
                "names a directory (the base URL itself), not a file".into(),
            ));
        }
        raw.extend(rest.split('/'));
        let n = raw.len();
        let mut segs: Vec<String> = Vec::with_capacity(n);
        for (i, seg) in raw.into_iter().enumerate() {
            if seg.is_empty() {
                return Err(refuse(if i + 1 == n {
                    "ends with / (names a directory, not a file)".into()
                } else {
                    "empty path segment (//)".into()
                }));
            }
            if seg == "." || seg == ".." {
                return Err(refuse(format!("dot segment {seg:?} in the path")));
            }
            // Names that are not UTF-8 are refused rather than written as raw bytes (README,
            // "Choices where the specification is open"): the state, the reports and the
            // paths of other platforms are text, and a lossy or re-encoded name would be a
            // different file from the one the Source has.
            let decoded = percent_decode_str(seg).decode_utf8().map_err(|_| {
                refuse(format!(
                    "path segment {:?} is not UTF-8 after percent-decoding (such names are refused, not renamed)",
                    seg.chars().take(80).collect::<String>()
                ))
            })?;
            segs.push(decoded.into_owned());
        }
        if let (Some(q), Some(last)) = (p.query.filter(|q| !q.is_empty()), segs.last_mut()) {
            last.push('?');
            last.push_str(&q.replace('/', "%2F"));
        }
        RelPath::from_segments(&segs).map_err(|e| refuse(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> UriMapper {
        UriMapper::new("http://Example.com:8080/data/").expect("mapper")
    }

    #[test]
    fn base_rule() {
        assert_eq!(
            base_url(
                None,
                Some("http://h/x/.well-known/resourcesync"),
                None,
                "http://h/rl.xml"
            ),
            "http://h/x/"
        );
        assert_eq!(
            base_url(None, Some("http://h/a/desc.xml"), None, "http://h/rl.xml"),
            "http://h/a/"
        );
        assert_eq!(
            base_url(None, None, Some("http://h:81/a/cap.xml"), "http://h/rl.xml"),
            "http://h:81/"
        );
        assert_eq!(base_url(Some("http://b/x"), None, None, "u"), "http://b/x/");
    }

    #[test]
    fn maps_under_the_base_and_other_hosts() {
        let m = m();
        assert_eq!(
            m.map("http://example.com:8080/data/a/b%20c.txt")
                .expect("ok")
                .as_str(),
            "a/b c.txt"
        );
        assert_eq!(
            m.map("http://other.org/x/y.txt").expect("ok").as_str(),
            "other.org/x/y.txt"
        );
        assert_eq!(
            m.map("https://other.org:9443/y").expect("ok").as_str(),
            "other.org_9443/y"
        );
        assert_eq!(
            m.map("http://example.com:8080/elsewhere/z")
                .expect("ok")
                .as_str(),
            "example.com_8080/elsewhere/z"
        );
        assert_eq!(
            m.map("http://example.com:8080/data/p?id=1/2#frag")
                .expect("ok")
                .as_str(),
            "p?id=1%2F2"
        );
    }

    #[test]
    fn iris_are_read_as_their_percent_encoded_uris() {
        let m = m();
        for (iri, uri, path) in [
            (
                "http://example.com:8080/data/sub dir/\u{fc} 1.txt",
                "http://example.com:8080/data/sub%20dir/%C3%BC%201.txt",
                "sub dir/\u{fc} 1.txt",
            ),
            (
                "http://example.com:8080/data/\u{65e5}\u{672c}\u{8a9e}/a b.txt",
                "http://example.com:8080/data/%E6%97%A5%E6%9C%AC%E8%AA%9E/a%20b.txt",
                "\u{65e5}\u{672c}\u{8a9e}/a b.txt",
            ),
            // `%` kept where it starts an octet, `%25` where it does not: the mapping reads
            // both the same way, and so does a server.
            (
                "http://example.com:8080/data/50% off %41.txt",
                "http://example.com:8080/data/50%25%20off%20%41.txt",
                "50% off A.txt",
            ),
            (
                "http://example.com:8080/data/q b?x=\u{e9} 1#fr ag",
                "http://example.com:8080/data/q%20b?x=%C3%A9%201#fr%20ag",
                "q b?x=%C3%A9%201",
            ),
        ] {
            let got = iri_to_uri(iri);
            assert_eq!(got.as_deref(), Some(uri), "{iri}");
            // The HTTP client sends it as it is; and it is how the client's parser encodes the
            // IRI, but for the stray `%` that parser leaves alone.
            assert_eq!(Url::parse(uri).expect("parses").as_str(), uri, "{uri}");
            if !iri.contains('%') {
                assert_eq!(Url::parse(iri).expect("parses").as_str(), uri, "{iri}");
            }
            assert_eq!(m.map(uri).expect("maps").as_str(), path, "{uri}");
        }
        // URIs are left as written: nothing to encode, or the host (the client's to read).
        for kept in [
            "http://example.com:8080/data/a%20b.txt",
            "http://example.com:8080/data/50%.txt",
            "http://b\u{fc}cher.example/x.txt",
        ] {
            assert_eq!(iri_to_uri(kept), None, "{kept}");
        }
        // Control characters are not encoded (the WHATWG parser strips tabs and line breaks,
        // fetching another URI): left for the mapping to refuse.
        for bad in [
            "http://example.com:8080/data/a b\tc.txt",
            "http://example.com:8080/data/\u{fc}\nx.txt",
            "http://example.com:8080/data/\u{fc}\rx.txt",
            "http://example.com:8080/data/\u{fc}\u{0}x.txt",
            "http://example.com:8080/data/\u{fc}\u{85}x.txt",
            "http://example.com:8080/data/\u{fc}\u{7f}x.txt",
        ] {
            assert_eq!(iri_to_uri(bad), None, "{bad:?}");
            let e = m.map(bad).expect_err(bad);
            assert!(e.to_string().contains("control character"), "{e}");
        }
        // A tab alone: the client would fetch `ab.txt`; refused, not stripped.
        assert_eq!(
            Url::parse("http://example.com:8080/data/a\tb.txt")
                .expect("parses")
                .path(),
            "/data/ab.txt"
        );
        assert!(m.map("http://example.com:8080/data/a\tb.txt").is_err());
    }

    #[test]
    fn refuses_traversal_and_oddities() {
        let m = m();
        for bad in [
            "http://example.com:8080/data/../x",
            "http://example.com:8080/../x",
            "http://example.com:8080/data/%2e%2e/x",
            "http://example.com:8080/data/a/%2E%2E/%2E%2E/x",
            "http://example.com:8080/data/a%2f..%2f..%2fx",
            "http://example.com:8080/data/a%5c..%5cx",
            "http://example.com:8080/data/a%00b",
            "http://example.com:8080/data/dir/",
            "http://example.com:8080/data/",
            "http://example.com:8080/data/a//b",
            "http://example.com:8080/data/caf%E9",
            "http://example.com:8080/data/.resourcesync/state.sqlite",
            "ftp://example.com/x",
            // The authority read two ways (security issue, item 9): the client fetches from
            // 127.0.0.1 what a reader of RFC 3986 would store under other.example, and back.
            "http://127.0.0.1:8080\\@other.example/x.txt",
            "http://other.example\\@127.0.0.1:8080/x.txt",
            "http://user@example.com:8080/data/x",
            "http://example.com:8080@127.0.0.1:9/x",
            "http://exa\tmple.com/x",
            "http://example.com:8080/data/a\nb",
            "http://example.com:8080/data/a b",
            "/etc/passwd",
            "file:///etc/passwd",
        ] {
            assert!(m.map(bad).is_err(), "{bad} accepted");
        }
        // Hosts are the client's: stored under the host the request goes to.
        for (uri, path) in [
            ("http://%31%32%37.0.0.1/x.txt", "127.0.0.1/x.txt"),
            ("http://0x7f.1/x.txt", "127.0.0.1/x.txt"),
            ("http://EXAMPLE.org/x.txt", "example.org/x.txt"),
            (
                "http://b\u{fc}cher.example/x.txt",
                "xn--bcher-kva.example/x.txt",
            ),
            ("http://[::1]:81/x.txt", "::1_81/x.txt"),
        ] {
            assert_eq!(
                m.map(uri).map(|p| p.to_string()).ok().as_deref(),
                Some(path),
                "{uri}"
            );
        }
        let long = format!("http://example.com:8080/data/{}", "n".repeat(300));
        let e = m.map(&long).expect_err("long");
        assert!(e.to_string().contains("255"), "{e}");
    }
}
