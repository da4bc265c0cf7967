//! Credentials taken out of URLs and of texts that carry URLs, before they are shown: on a
//! page, in a JSON API, in a log line, in `--print-config`. The one place that decides what
//! a secret in a URL looks like; every rendering of a configured URL or of an error text that
//! may hold one goes through it.
//!
//! What is replaced by [`REDACTED`]:
//!
//! - the password of the user information (`scheme://USER:PASSWORD@host`: `s3://KEY:SECRET@`,
//!   `postgres://user:PASSWORD@`), or the user name when it comes alone (`https://TOKEN@host`,
//!   a token given as a user name);
//! - the value of each query (and fragment) parameter whose name looks like a key
//!   ([`secret_key`]: `api_key`, `token`, `access_token`, `secret`, `password`, `sig`,
//!   `signature`, `X-Amz-Credential`, …, case insensitive).
//!
//! Everything else is left as it was written, byte for byte: a text with nothing to redact is
//! returned borrowed. The work is one pass over the text: no allocation beyond the result.

use std::borrow::Cow;

/// What a secret is replaced with.
pub const REDACTED: &str = "REDACTED";

/// Whether a query parameter named `name` (percent-encoded as written) carries a secret:
/// its name, lower-cased without `-`, `_`, `.` and spaces, is one of `key`, `sig`, `pwd`,
/// `pass`, `auth`, `code`, ends with `key`, contains `token`, `secret`, `password`,
/// `passwd`, `signature`, `credential`, `session` or `auth`, or starts with `xamz` or `xgoog`
/// (the signed URLs of S3 and Google Cloud Storage). Generous on purpose: hiding a harmless
/// value costs nothing, showing a key costs the key.
pub fn secret_key(name: &str) -> bool {
    let decoded = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
    let n: String = decoded
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | '.' | ' ' | '+'))
        .flat_map(char::to_lowercase)
        .collect();
    matches!(n.as_str(), "key" | "sig" | "pwd" | "pass" | "auth" | "code")
        || n.ends_with("key")
        || [
            "token",
            "secret",
            "password",
            "passwd",
            "signature",
            "credential",
            "session",
            "auth",
        ]
        .iter()
        .any(|w| n.contains(w))
        || n.starts_with("xamz")
        || n.starts_with("xgoog")
}

/// `u` (one URL, or a value that may be one) with its credentials replaced (see the module's
/// documentation). A value that is not a URL is returned as it is.
pub fn url(u: &str) -> Cow<'_, str> {
    match u.find("://") {
        Some(at) if scheme_start(u.as_bytes(), at) < at => text(u),
        _ => Cow::Borrowed(u),
    }
}

/// `t` with the credentials of every URL in it replaced (see the module's documentation): a
/// URL is a scheme (`http`, `s3`, `postgres`, …) followed by `://`, up to the first space,
/// quote, `<`, `>` or control character, without the punctuation that ends a sentence or a
/// parenthesis (`)`, `,`, `.`, `;`, `:`, `]`).
pub fn text(t: &str) -> Cow<'_, str> {
    let b = t.as_bytes();
    let mut out: Option<String> = None;
    // Bytes of `t` already copied to `out` (or known to need no change).
    let mut done = 0;
    let mut from = 0;
    while let Some(rel) = memchr::memmem::find(&b[from..], b"://") {
        let sep = from + rel;
        let start = scheme_start(b, sep).max(done);
        let mut end = sep + 3;
        while end < b.len() && !ends_url(b[end]) {
            end += 1;
        }
        while end > sep + 3 && matches!(b[end - 1], b')' | b',' | b'.' | b';' | b':' | b']') {
            end -= 1;
        }
        from = end.max(sep + 3);
        if start == sep {
            continue;
        }
        let one = &t[start..end];
        if let Some(clean) = redact_one(one, sep - start) {
            let o = out.get_or_insert_with(|| String::with_capacity(t.len()));
            o.push_str(&t[done..start]);
            o.push_str(&clean);
            done = end;
        }
    }
    match out {
        None => Cow::Borrowed(t),
        Some(mut o) => {
            o.push_str(&t[done..]);
            Cow::Owned(o)
        }
    }
}

/// Where the scheme ending at `sep` (the index of its `://`) starts: `sep` when there is none.
fn scheme_start(b: &[u8], sep: usize) -> usize {
    let mut s = sep;
    while s > 0 && (b[s - 1].is_ascii_alphanumeric() || matches!(b[s - 1], b'+' | b'-' | b'.')) {
        s -= 1;
    }
    // A scheme starts with a letter.
    while s < sep && !b[s].is_ascii_alphabetic() {
        s += 1;
    }
    s
}

fn ends_url(c: u8) -> bool {
    c.is_ascii_whitespace()
        || c.is_ascii_control()
        || matches!(
            c,
            b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\' | b'{' | b'}' | b'|'
        )
}

/// One URL (`u`, its `://` at `sep`) with its credentials replaced; `None` when it has none.
fn redact_one(u: &str, sep: usize) -> Option<String> {
    let rest_at = sep + 3;
    let rest = &u[rest_at..];
    let auth_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..auth_len];
    let mut out = String::with_capacity(u.len());
    let mut changed = false;
    out.push_str(&u[..rest_at]);
    match authority.rfind('@') {
        Some(at) => {
            let info = &authority[..at];
            if let Some((user, _)) = info.split_once(':') {
                out.push_str(user);
                out.push(':');
            }
            out.push_str(REDACTED);
            out.push_str(&authority[at..]);
            changed = true;
        }
        None => out.push_str(authority),
    }
    let after = &rest[auth_len..];
    let (path, params) = match after.find(['?', '#']) {
        Some(q) => (&after[..q], &after[q..]),
        None => (after, ""),
    };
    out.push_str(path);
    // `?a=1&b=2#c=3`: each parameter of the query and of the fragment.
    let mut seg = 0;
    for (i, c) in params
        .char_indices()
        .chain(std::iter::once((params.len(), '&')))
    {
        if !matches!(c, '?' | '#' | '&' | ';') {
            continue;
        }
        let pair = &params[seg..i];
        match pair.split_once('=') {
            Some((k, v)) if !v.is_empty() && secret_key(k) => {
                out.push_str(k);
                out.push('=');
                out.push_str(REDACTED);
                changed = true;
            }
            _ => out.push_str(pair),
        }
        if i < params.len() {
            out.push(c);
        }
        seg = i + 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_lone_user_names() {
        assert_eq!(
            url("s3://KEYID:SEC%2Fret@127.0.0.1:3900/bucket/p?region=garage"),
            "s3://KEYID:REDACTED@127.0.0.1:3900/bucket/p?region=garage"
        );
        assert_eq!(url("postgres://u:PASS@db/x"), "postgres://u:REDACTED@db/x");
        assert_eq!(
            url("https://ghp_abc@github.com/"),
            "https://REDACTED@github.com/"
        );
        // An `@` in the path is not user information.
        assert_eq!(url("http://h/a@b"), "http://h/a@b");
    }

    #[test]
    fn query_and_fragment_keys() {
        assert_eq!(
            url("http://h/p?api_key=S1&x=1&Token=S2&X-Amz-Signature=S3#access_token=S4"),
            "http://h/p?api_key=REDACTED&x=1&Token=REDACTED&X-Amz-Signature=REDACTED\
             #access_token=REDACTED"
        );
        assert_eq!(
            url("http://h/p?sig=S&page=2"),
            "http://h/p?sig=REDACTED&page=2"
        );
        assert_eq!(url("http://h/p?q=a&page=2"), "http://h/p?q=a&page=2");
        for k in [
            "key",
            "KEY",
            "apikey",
            "api-key",
            "client_secret",
            "password",
            "X-Goog-Credential",
        ] {
            assert!(secret_key(k), "{k}");
        }
        for k in ["page", "q", "from", "set", "verb"] {
            assert!(!secret_key(k), "{k}");
        }
    }

    #[test]
    fn urls_inside_texts() {
        let t = "error sending request for url (http://a:PASS@h:8/x?api_key=S), then \
                 'https://h/y?token=T'. And http://plain/ stays.";
        assert_eq!(
            text(t),
            "error sending request for url (http://a:REDACTED@h:8/x?api_key=REDACTED), then \
             'https://h/y?token=REDACTED'. And http://plain/ stays."
        );
        assert!(matches!(
            text("nothing here: http://h/p?q=1"),
            Cow::Borrowed(_)
        ));
        // Not URLs, and odd ends: nothing panics, nothing changes.
        for t in [
            "://",
            "a://",
            "://@?key=1",
            "x ://h?key=v",
            "é://h",
            "a://é@h?é=é&key=é",
        ] {
            let _ = text(t);
        }
        assert_eq!(text("a://é@h?é=é&key=é"), "a://REDACTED@h?é=é&key=REDACTED");
    }
}
