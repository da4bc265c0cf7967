//! Opening a document given as a path, a URL or `-` (standard input).

use std::fs::File;
use std::io::Read;
use std::time::Duration;

use anyhow::{Context, bail};

/// Where a document comes from.
pub(crate) fn open(spec: &str, timeout: Duration) -> anyhow::Result<Box<dyn Read + Send>> {
    if spec == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    if spec.starts_with("http://") || spec.starts_with("https://") {
        let client = reqwest::blocking::Client::builder()
            .user_agent(concat!("resourcesync/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::limited(10))
            .build()
            .context("building the HTTP client")?;
        let resp = client
            .get(spec)
            .send()
            .with_context(|| format!("fetching {spec}"))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("fetching {spec}: HTTP {status}");
        }
        return Ok(Box::new(resp));
    }
    let f = File::open(spec).with_context(|| format!("opening {spec}"))?;
    Ok(Box::new(f))
}
