//! Where an [`super::S3Store`] keeps its objects: an endpoint, a bucket, a prefix inside it,
//! a region and credentials, read from one URL
//! `s3://[KEY_ID:SECRET@]HOST[:PORT]/BUCKET[/PREFIX][?region=R&scheme=http|https]`.

use std::fmt;
use std::net::IpAddr;

use crate::error::{Error, Result};
use crate::path::RelPath;

/// The settings of an [`super::S3Store`].
#[derive(Clone)]
pub struct S3Config {
    /// The endpoint: `http(s)://HOST[:PORT]/` (path-style addressing: the bucket is the first
    /// segment of every request's path).
    pub endpoint: url::Url,
    /// The bucket.
    pub bucket: String,
    /// The prefix of every key of the store inside the bucket: empty, or checked segments
    /// ending with `/` (never `..`, never escaping: see [`RelPath`]).
    pub prefix: String,
    /// The region the requests are signed for (`us-east-1` unless given; Garage's is
    /// `garage`).
    pub region: String,
    /// The access key id.
    pub key_id: String,
    /// The secret access key (never printed).
    pub secret: String,
}

impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint.as_str())
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("region", &self.region)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

fn bad(what: &str, reason: impl Into<String>) -> Error {
    Error::Config {
        what: what.chars().take(200).collect(),
        reason: reason.into(),
    }
}

/// Whether a host is this machine (plain HTTP is allowed there without asking).
fn loopback(host: &url::Host<&str>) -> bool {
    match host {
        // An `s3:` URL's host is opaque to the URL parser: an address comes as a name.
        url::Host::Domain(d) => {
            d.eq_ignore_ascii_case("localhost")
                || d.trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|a| a.is_loopback())
        }
        url::Host::Ipv4(a) => IpAddr::V4(*a).is_loopback(),
        url::Host::Ipv6(a) => IpAddr::V6(*a).is_loopback(),
    }
}

/// Percent-decodes a part of the URL (credentials may hold `/`, `+`, `=`).
fn decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

impl S3Config {
    /// Reads `s3://[KEY_ID:SECRET@]HOST[:PORT]/BUCKET[/PREFIX][?region=R&scheme=S]`.
    ///
    /// Credentials missing from the URL come from `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY`; the region, when not given, from `AWS_REGION`, else
    /// `us-east-1`. The endpoint is reached over HTTPS, or plain HTTP for a loopback host
    /// (`127.0.0.0/8`, `::1`, `localhost`); `scheme=http` asks for plain HTTP elsewhere (the
    /// secret never travels, but the bodies and the signatures do, in clear).
    pub fn parse(s: &str) -> Result<S3Config> {
        let shown = redacted(s);
        let u = url::Url::parse(s).map_err(|e| bad(&shown, format!("not a URL: {e}")))?;
        if u.scheme() != "s3" {
            return Err(bad(&shown, "the scheme must be s3://"));
        }
        let host = u
            .host()
            .ok_or_else(|| bad(&shown, "no host: s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX"))?;
        let mut region = None;
        let mut scheme = None;
        for (k, v) in u.query_pairs() {
            match &*k {
                "region" if !v.is_empty() => region = Some(v.into_owned()),
                "scheme" if v == "http" || v == "https" => scheme = Some(v.into_owned()),
                other => {
                    return Err(bad(
                        &shown,
                        format!("unknown parameter {other:?} (known: region, scheme=http|https)"),
                    ));
                }
            }
        }
        let scheme = match scheme {
            Some(s) => s,
            None if loopback(&host) => "http".into(),
            None => "https".into(),
        };
        let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
        let endpoint = url::Url::parse(&format!("{scheme}://{host}{port}/"))
            .map_err(|e| bad(&shown, format!("endpoint: {e}")))?;
        let mut segs = u.path().trim_start_matches('/').splitn(2, '/');
        let bucket = decoded(segs.next().unwrap_or_default());
        if !valid_bucket(&bucket) {
            return Err(bad(
                &shown,
                format!(
                    "bucket {bucket:?}: 3 to 63 lower-case letters, digits, '-' and '.', after the host"
                ),
            ));
        }
        let prefix =
            prefix_of(&decoded(segs.next().unwrap_or_default())).map_err(|r| bad(&shown, r))?;
        let (mut key_id, mut secret) = (decoded(u.username()), decoded(u.password().unwrap_or("")));
        if key_id.is_empty() {
            key_id = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_default();
            secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_default();
        }
        if key_id.is_empty() || secret.is_empty() {
            return Err(bad(
                &shown,
                "no credentials: give KEY_ID:SECRET@ in the URL, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            ));
        }
        let region = region
            .or_else(|| std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty()))
            .unwrap_or_else(|| "us-east-1".into());
        Ok(S3Config {
            endpoint,
            bucket,
            prefix,
            region,
            key_id,
            secret,
        })
    }

    /// The same settings with another prefix (checked; empty for the whole bucket).
    pub fn with_prefix(mut self, prefix: &str) -> Result<S3Config> {
        self.prefix = prefix_of(prefix).map_err(|r| bad(prefix, r))?;
        Ok(self)
    }

    /// The store's place, for messages: `s3://HOST/BUCKET/PREFIX` (no credentials).
    pub fn location(&self) -> String {
        format!(
            "s3://{}/{}/{}",
            self.endpoint.host_str().unwrap_or_default(),
            self.bucket,
            self.prefix
        )
    }
}

/// The URL with its password replaced, for messages.
fn redacted(s: &str) -> String {
    match url::Url::parse(s) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("REDACTED"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "(an S3 URL that does not parse)".into(),
    }
}

/// S3's bucket names (path-style): 3 to 63 of `a-z0-9.-`, starting and ending with a letter
/// or digit.
fn valid_bucket(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && b.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && b.bytes().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// A prefix as stored: empty, or a checked relative path with a `/` at the end.
fn prefix_of(p: &str) -> std::result::Result<String, String> {
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        return Ok(String::new());
    }
    let rel = RelPath::parse(p).map_err(|e| format!("prefix {p:?}: {e}"))?;
    Ok(format!("{}/", rel.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_gives_endpoint_bucket_prefix_region_and_credentials() {
        let c =
            S3Config::parse("s3://AK:S%2Fx@127.0.0.1:3900/bkt/a/b/?region=garage").expect("parses");
        assert_eq!(c.endpoint.as_str(), "http://127.0.0.1:3900/");
        assert_eq!(
            (&*c.bucket, &*c.prefix, &*c.region),
            ("bkt", "a/b/", "garage")
        );
        assert_eq!((&*c.key_id, &*c.secret), ("AK", "S/x"));
        assert!(!format!("{c:?}").contains("S/x"), "the secret is printed");
        let c = S3Config::parse("s3://AK:S@[::1]:9000/bkt").expect("parses");
        assert_eq!(c.endpoint.as_str(), "http://[::1]:9000/");
        let c = S3Config::parse("s3://AK:S@127.0.0.2/bkt").expect("parses");
        assert_eq!(c.endpoint.scheme(), "http");
        let c = S3Config::parse("s3://AK:S@s3.example.org/bkt").expect("parses");
        assert_eq!(c.endpoint.as_str(), "https://s3.example.org/");
        assert_eq!(c.prefix, "");
        let c = S3Config::parse("s3://AK:S@s3.example.org/bkt?scheme=http").expect("parses");
        assert_eq!(c.endpoint.scheme(), "http");
    }

    #[test]
    fn bad_urls_are_refused_without_the_secret() {
        for bad in [
            "http://AK:S@h/bkt",
            "s3://AK:SECRET@h/",
            "s3://AK:SECRET@h/B",
            "s3://AK:SECRET@h/bkt/../x",
            "s3://AK:SECRET@h/bkt/.resourcesync/x",
            "s3://AK:SECRET@h/bkt?regio=x",
        ] {
            let e = S3Config::parse(bad).expect_err(bad).to_string();
            assert!(!e.contains("SECRET"), "{bad}: {e}");
        }
    }
}
