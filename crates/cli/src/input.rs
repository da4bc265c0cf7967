//! Opening a document given as a path, a URL or `-` (standard input).

use std::fs::File;
use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};
use resourcesync_http::{BlockingHttp, HttpOptions};

/// Where a document comes from.
pub(crate) fn open(spec: &str, timeout: Duration) -> anyhow::Result<Box<dyn Read + Send>> {
    if spec == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    if spec.starts_with("http://") || spec.starts_with("https://") {
        // The project's one client layer (retries, redirects, user agent), blocking face.
        let client = BlockingHttp::new(HttpOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: timeout,
            max_redirects: 10,
            ..HttpOptions::default()
        })
        .context("building the HTTP client")?;
        return match client.get(spec, None, None) {
            Ok(resp) => Ok(Box::new(resp)),
            Err(resourcesync_http::Error::Status { status, .. }) => {
                let status = reqwest::StatusCode::from_u16(status)
                    .map_or_else(|_| status.to_string(), |s| s.to_string());
                bail!("fetching {spec}: HTTP {status}")
            }
            Err(e) => Err(e).with_context(|| format!("fetching {spec}")),
        };
    }
    let f = File::open(spec).with_context(|| match host_port(spec) {
        Some(url) => format!("opening {spec} (a file; for the URL write {url})"),
        None => format!("opening {spec}"),
    })?;
    Ok(Box::new(f))
}

/// `http://` and `spec`, when `spec` starts with a host and a port (`127.0.0.1:8181`,
/// `localhost:8080/rs.xml`, `[::1]:80`): a URL written without its scheme.
pub(crate) fn host_port(spec: &str) -> Option<String> {
    if spec.contains("://") {
        return None;
    }
    let authority = spec.split('/').next().unwrap_or_default();
    let (host, port) = authority.rsplit_once(':')?;
    let port_ok = !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.[]:".contains(&b));
    (port_ok && host_ok).then(|| format!("http://{spec}"))
}

/// The URL of `sync`, `audit` and `explore`: one without `scheme://` is refused with the URL
/// it probably means (`127.0.0.1:8181` → `http://127.0.0.1:8181`).
pub(crate) fn check_url(spec: &str) -> anyhow::Result<()> {
    if spec.contains("://") {
        return Ok(());
    }
    let meant = host_port(spec).unwrap_or_else(|| format!("http://{spec}"));
    bail!("{spec:?} is not a URL (it has no http:// or https://): did you mean {meant}?")
}

/// Refuses a `--state` that is a URL, rather than making a directory named after its scheme
/// (`postgres:/…`): these commands keep their state in a SQLite file; PostgreSQL state is the
/// aggregator's (`aggregate --state URL`). Checked here, not by the argument's parser, whose
/// message would repeat the value with its password.
pub(crate) fn check_state_path(state: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(s) = state.and_then(|p| p.to_str()) else {
        return Ok(());
    };
    if let Some((scheme, _)) = s.split_once("://")
        && !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        bail!(
            "--state {}: a URL, but this command keeps its state in a SQLite file: give its \
             path (a state in PostgreSQL is the aggregator's: `aggregate --state {scheme}://…`)",
            resourcesync_model::redact::url(s)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_its_scheme_is_told_what_it_means() {
        assert_eq!(
            host_port("127.0.0.1:8181").as_deref(),
            Some("http://127.0.0.1:8181")
        );
        assert_eq!(
            host_port("localhost:80/rs/capabilitylist.xml").as_deref(),
            Some("http://localhost:80/rs/capabilitylist.xml")
        );
        assert_eq!(host_port("docs/resourcelist.xml"), None);
        assert_eq!(host_port("http://127.0.0.1:8181/"), None);
        let e = check_url("127.0.0.1:8181")
            .expect_err("no scheme")
            .to_string();
        assert_eq!(
            e,
            "\"127.0.0.1:8181\" is not a URL (it has no http:// or https://): did you mean \
             http://127.0.0.1:8181?"
        );
        assert!(check_url("https://example.org/").is_ok());
    }
}
