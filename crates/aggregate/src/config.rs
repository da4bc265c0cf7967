//! The configuration file (TOML): the Sources to follow and the limits shared by all.
//!
//! ```toml
//! [limits]
//! concurrency = 8      # syncs running at once, over every Source
//! per_host = 2         # syncs running at once against one host (politeness)
//! timeout = "1h"       # longest sync; a Source that hangs is stopped there and backs off
//! backoff_max = "1h"   # longest wait after repeated failures
//! lease = "60s"        # with --state postgres://: a dead worker's Sources are taken over after it
//! bandwidth = "10MB/s" # bodies received per second, over every Source (MB, MiB, Mbit, ...)
//! max_bytes_per_source = "100GiB"  # most bytes of copies of one Source (B, kB, MB, GB, TB,
//!                      # KiB, MiB, GiB, TiB); a Source's `max_bytes` overrides it
//! share_above = 500    # with --state postgres://: a sync with more fetches shares them with
//!                      # every worker (a queue per Source), fewer it does itself; unset: off
//!                      # (each fetch shared costs PostgreSQL work: worth it for workers on
//!                      # several machines, not for two on one); a worker alone does them itself
//!
//! [[source]]
//! name = "museum"                       # a-z, 0-9, `-`, `_`: its folder and its key
//! url = "https://museum.example/.well-known/resourcesync"
//! schedule = "5m"                       # an interval ("30s", "5m", "1h"), or "push"
//! delete = true                         # remove copies of deleted resources
//! set = "https://museum.example/capabilitylist.xml"  # which Capability List, if several
//! token = "…"                           # bearer token for this Source
//! rate = 10.0                           # requests per second to its host
//! concurrency = 8                       # downloads in flight for this Source
//! include = ["https://museum.example/objects/*"]  # copy only resources matching one of these
//! exclude = ["*.tif", "*/private/*"]      # and none of these: names under the folder, decoded,
//!                                         # or URIs with http(s):// (resourcesync_destination::filter)
//! allow_hosts = ["cdn.museum.example", "*.museum.example", "https://files.example:8443"]
//! max_bytes = "1TB"                     # most bytes of its copies (past it, its sync fails)
//! versions = true                       # keep every earlier version of each copy (docs/history.md)
//! keep_versions = 10                    # and of those the last 10 of each resource, or
//! # keep_versions_for = "30d"           # those current within 30 days (not both; default all)
//! ```
//!
//! `allow_hosts`: the aggregator fetches for a Source only from the origin (scheme, host, port)
//! of its `url` (and of its `set`), and from the hosts this list allows: every request made
//! for the Source (documents, resources, dumps, redirects, fetches shared through the work
//! queue, the WebSub topic and hub of a pushed Source) is checked, and one elsewhere is refused, never retried, and counted as that
//! resource's failure. An entry is `[http:// or https://]HOST[:PORT]`: `HOST` a name, an IPv4
//! address or a bracketed IPv6 address, `*.example.org` every name under `example.org` (not
//! `example.org` itself), `*` any host; `PORT` a number or `*` (any), left out the default port
//! of the scheme; the scheme left out, `http` and `https`. A host named exactly may be at a
//! private address (the operator named it); a host allowed only through `*` or `*.domain` is
//! reached only at public addresses, checked after DNS resolution (so `"*"` is "any public host
//! on ports 80 and 443"). See [`resourcesync_http::reach`].
//!
//! Every problem is an [`Error::Config`] naming the file and line: unknown keys, duplicate
//! names, URLs that are not http(s), schedules that do not parse.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use resourcesync_destination::UriFilter;
use resourcesync_http::Bandwidth;
use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, Result};

/// What the aggregator follows, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Limits shared by every Source.
    pub limits: Limits,
    /// The Sources, in the file's order.
    pub sources: Vec<SourceSpec>,
}

/// Limits shared by every Source.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Syncs running at once, over every Source.
    pub concurrency: usize,
    /// Syncs running at once against one host.
    pub per_host: usize,
    /// Longest sync.
    pub timeout: Duration,
    /// Longest wait between tries of a failing Source.
    pub backoff_max: Duration,
    /// With a shared PostgreSQL state: how long a worker's hold on a Source lasts unless
    /// renewed (it is renewed every third of it while the worker syncs): a worker that dies
    /// has its Sources taken over after this.
    pub lease: Duration,
    /// Bytes of bodies received per second, over every Source (`None`: unlimited).
    pub bandwidth: Option<u64>,
    /// With a shared PostgreSQL state: a sync with more fetches than this hands them to
    /// every worker through the Source's queue (see [`crate::work`]); with fewer, the worker
    /// holding the Source does them itself, as it does any page of 1,000 while no other
    /// worker watching the Source is alive. `None` (the default): never shared.
    pub share_above: Option<usize>,
    /// Most bytes of the copies of one Source, unless the Source sets its own `max_bytes`.
    pub max_bytes_per_source: u64,
}

/// The default of [`Limits::max_bytes_per_source`]: 100 GiB.
pub const DEFAULT_MAX_BYTES_PER_SOURCE: u64 = 100 << 30;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            concurrency: 8,
            per_host: 2,
            timeout: Duration::from_secs(3600),
            backoff_max: Duration::from_secs(3600),
            lease: Duration::from_secs(60),
            bandwidth: None,
            share_above: None,
            max_bytes_per_source: DEFAULT_MAX_BYTES_PER_SOURCE,
        }
    }
}

/// When a Source is synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Every interval, from the end of the previous sync.
    Every(Duration),
    /// By WebSub push (Change Notification 1.0.1), caught up from the Change Lists.
    Push,
}

/// One Source to follow.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// Its name: its folder under the store and its key in the state.
    pub name: String,
    /// Where discovery starts (Z39.99-2014 §6.3).
    pub url: String,
    /// The Capability List to follow when the Source has several.
    pub set: Option<String>,
    /// When it is synced.
    pub schedule: Schedule,
    /// Remove copies of resources it deletes.
    pub delete: bool,
    /// A bearer token for its requests.
    pub token: Option<String>,
    /// Requests per second to its host.
    pub rate: Option<f64>,
    /// Downloads in flight.
    pub concurrency: usize,
    /// Include patterns over the resources' decoded paths under the Source's folder, or URIs
    /// for patterns starting with `http(s)://` (none: every resource;
    /// resourcesync_destination::filter).
    pub include: Vec<String>,
    /// Exclude patterns, as `include`.
    pub exclude: Vec<String>,
    /// Origins fetched from for this Source besides its own (`allow_hosts`).
    pub allow_hosts: Vec<resourcesync_http::HostRule>,
    /// Most bytes of its copies (`None`: [`Limits::max_bytes_per_source`]).
    pub max_bytes: Option<u64>,
    /// Keep every earlier version of each copy, with when each was current (`versions =
    /// true`; `sync --versions`, `docs/history.md`).
    pub versions: bool,
    /// Which of its versions are kept (`keep_versions = N`, `keep_versions_for = "30d"`;
    /// default all): the others are pruned after each of its syncs
    /// (resourcesync_destination::retention).
    pub keep_versions: resourcesync_destination::retention::Retention,
}

impl SourceSpec {
    /// Its include and exclude patterns as a filter (checked when the file was read).
    pub fn filter(&self) -> UriFilter {
        UriFilter::new(&self.include, &self.exclude).unwrap_or_default()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    limits: RawLimits,
    #[serde(default, rename = "source")]
    sources: Vec<Spanned<RawSource>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    concurrency: Option<Spanned<usize>>,
    per_host: Option<Spanned<usize>>,
    timeout: Option<Spanned<String>>,
    backoff_max: Option<Spanned<String>>,
    lease: Option<Spanned<String>>,
    bandwidth: Option<Spanned<String>>,
    share_above: Option<Spanned<usize>>,
    max_bytes_per_source: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    name: Spanned<String>,
    url: Spanned<String>,
    set: Option<String>,
    schedule: Option<Spanned<String>>,
    #[serde(default)]
    delete: bool,
    token: Option<String>,
    rate: Option<Spanned<f64>>,
    concurrency: Option<Spanned<usize>>,
    include: Option<Spanned<Vec<String>>>,
    exclude: Option<Spanned<Vec<String>>>,
    allow_hosts: Option<Spanned<Vec<String>>>,
    max_bytes: Option<Spanned<String>>,
    #[serde(default)]
    versions: bool,
    keep_versions: Option<Spanned<usize>>,
    keep_versions_for: Option<Spanned<String>>,
}

/// The default schedule: every five minutes.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(300);
/// Shortest interval accepted (a Source is not polled in a busy loop).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

impl Config {
    /// Reads and checks the configuration file at `path`.
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Config::parse(&text, path)
    }

    /// Checks the configuration `text` (of the file `file`, for messages).
    pub fn parse(text: &str, file: &Path) -> Result<Config> {
        let err = |span: Option<std::ops::Range<usize>>, message: String| Error::Config {
            file: file.to_owned(),
            line: span.map(|s| line_of(text, s.start)),
            message,
        };
        // Top-level keys that are not tables are the command's flags (`store = "…"`), which
        // the command line checks (crates/cli/src/config.rs): left out here, the lines kept.
        let own = without_flags(text);
        let raw: RawConfig = toml::from_str(&own).map_err(|e| err(e.span(), e.message().into()))?;
        let limits = limits_of(&raw.limits, &err)?;
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut sources = Vec::with_capacity(raw.sources.len());
        for s in raw.sources {
            sources.push(source_of(s, text, &mut seen, &err)?);
        }
        Ok(Config { limits, sources })
    }
}

/// The `[limits]` table, checked; the defaults for what it leaves out.
fn limits_of(
    raw: &RawLimits,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<Limits> {
    let mut limits = Limits::default();
    if let Some(c) = &raw.concurrency {
        limits.concurrency = positive(c, "limits.concurrency", err)?;
    }
    if let Some(c) = &raw.per_host {
        limits.per_host = positive(c, "limits.per_host", err)?;
    }
    if let Some(t) = &raw.timeout {
        limits.timeout = duration(t, "limits.timeout", err)?;
    }
    if let Some(t) = &raw.backoff_max {
        limits.backoff_max = duration(t, "limits.backoff_max", err)?;
    }
    if let Some(t) = &raw.lease {
        limits.lease = duration(t, "limits.lease", err)?;
    }
    if let Some(n) = &raw.share_above {
        limits.share_above = Some(*n.get_ref());
    }
    if let Some(b) = &raw.bandwidth {
        limits.bandwidth = Some(Bandwidth::parse_rate(b.get_ref()).ok_or_else(|| {
            err(
                Some(b.span()),
                format!(
                    "limits.bandwidth {:?} is not a rate: write it as 10MB/s, 500KiB/s or \
                     100Mbit/s",
                    b.get_ref()
                ),
            )
        })?);
    }
    if let Some(b) = &raw.max_bytes_per_source {
        limits.max_bytes_per_source = size(b, "limits.max_bytes_per_source", err)?;
    }
    Ok(limits)
}

/// One `[[source]]`, checked: its name (valid, not seen before), URL, schedule, rate,
/// concurrency, filters, hosts and size.
fn source_of(
    s: Spanned<RawSource>,
    text: &str,
    seen: &mut HashMap<String, usize>,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<SourceSpec> {
    let span = s.span();
    let s = s.into_inner();
    let name = s.name.get_ref().clone();
    if !valid_name(&name) {
        return Err(err(
            Some(s.name.span()),
            format!(
                "source name {name:?}: use 1 to 63 of a-z, 0-9, `-` and `_`, starting with \
                 a letter or digit (it names the Source's folder)"
            ),
        ));
    }
    if let Some(first) = seen.insert(name.clone(), line_of(text, span.start)) {
        return Err(err(
            Some(s.name.span()),
            format!(
                "source name {name:?} is used twice (first on line {first}): names must differ"
            ),
        ));
    }
    let url = url_of(&name, &s.url, err)?;
    let schedule = schedule_of(&name, s.schedule.as_ref(), err)?;
    let rate = rate_of(&name, s.rate.as_ref(), err)?;
    let concurrency = match &s.concurrency {
        Some(c) => positive(c, "concurrency", err)?,
        None => 8,
    };
    check_filters(&name, &s, err)?;
    let allow_hosts = allow_hosts(&name, s.allow_hosts.as_ref(), err)?;
    let max_bytes = match &s.max_bytes {
        Some(b) => Some(size(b, &format!("source {name:?}: max_bytes"), err)?),
        None => None,
    };
    let keep_versions = keep_versions(&name, &s, err)?;
    Ok(SourceSpec {
        name,
        url,
        set: s.set,
        schedule,
        delete: s.delete,
        token: s.token,
        rate,
        concurrency,
        include: s.include.map(Spanned::into_inner).unwrap_or_default(),
        exclude: s.exclude.map(Spanned::into_inner).unwrap_or_default(),
        allow_hosts,
        max_bytes,
        versions: s.versions,
        keep_versions,
    })
}

/// A Source's retention of versions (`keep_versions`, `keep_versions_for`): one of them, with
/// `versions = true`.
fn keep_versions(
    name: &str,
    s: &RawSource,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<resourcesync_destination::retention::Retention> {
    use resourcesync_destination::retention::Retention;
    let keep = match (&s.keep_versions, &s.keep_versions_for) {
        (Some(_), Some(f)) => {
            return Err(err(
                Some(f.span()),
                format!("source {name:?}: keep_versions and keep_versions_for: give one of them"),
            ));
        }
        (Some(n), None) => {
            Retention::Last(positive(n, &format!("source {name:?}: keep_versions"), err)? as u64)
        }
        (None, Some(f)) => Retention::For(
            resourcesync_destination::retention::parse_duration(f.get_ref()).ok_or_else(|| {
                err(
                    Some(f.span()),
                    format!(
                        "source {name:?}: keep_versions_for {:?} is not a duration: write it as \
                     30m, 12h or 30d",
                        f.get_ref()
                    ),
                )
            })?,
        ),
        (None, None) => Retention::All,
    };
    if keep.prunes() && !s.versions {
        let span = s
            .keep_versions
            .as_ref()
            .map(Spanned::span)
            .or_else(|| s.keep_versions_for.as_ref().map(Spanned::span));
        return Err(err(
            span,
            format!("source {name:?}: keep_versions and keep_versions_for need versions = true"),
        ));
    }
    Ok(keep)
}

/// A Source's URL: http(s), with a host, and no credential in it (a credential belongs in
/// `token`).
fn url_of(
    name: &str,
    url: &Spanned<String>,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<String> {
    let text = url.get_ref().trim().to_owned();
    match url::Url::parse(&text) {
        // Shown on the page and in the API, and sent on every redirect: a credential
        // belongs in `token`.
        Ok(u) if !u.username().is_empty() || u.password().is_some() => {
            return Err(err(
                Some(url.span()),
                format!(
                    "source {name:?}: url {:?} has a user name or password in it: give \
                     the credential as `token = \"…\"` (sent as a bearer token, never \
                     shown)",
                    resourcesync_model::redact::url(&text)
                ),
            ));
        }
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
        _ => {
            return Err(err(
                Some(url.span()),
                format!("source {name:?}: url {text:?} is not an http(s) URL"),
            ));
        }
    }
    Ok(text)
}

/// A Source's schedule: `push`, or an interval of at least [`MIN_INTERVAL`] (default
/// [`DEFAULT_INTERVAL`]).
fn schedule_of(
    name: &str,
    schedule: Option<&Spanned<String>>,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<Schedule> {
    Ok(match schedule {
        None => Schedule::Every(DEFAULT_INTERVAL),
        Some(v) if v.get_ref().trim().eq_ignore_ascii_case("push") => Schedule::Push,
        Some(v) => {
            let d = duration(v, "schedule", err)?;
            if d < MIN_INTERVAL {
                return Err(err(
                    Some(v.span()),
                    format!("source {name:?}: schedule {:?} is below 1s", v.get_ref()),
                ));
            }
            Schedule::Every(d)
        }
    })
}

/// A Source's rate: a positive number of requests per second, when given.
fn rate_of(
    name: &str,
    rate: Option<&Spanned<f64>>,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<Option<f64>> {
    Ok(match rate {
        Some(r) if !(r.get_ref().is_finite() && *r.get_ref() > 0.0) => {
            return Err(err(
                Some(r.span()),
                format!("source {name:?}: rate must be a positive number of requests per second"),
            ));
        }
        r => r.map(|r| *r.get_ref()),
    })
}

/// A Source's `include` and `exclude` lists, each checked on its own, for the line of the one
/// that is wrong.
fn check_filters(
    name: &str,
    s: &RawSource,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<()> {
    for (list, include) in [(&s.include, true), (&s.exclude, false)] {
        let Some(list) = list else { continue };
        let (inc, exc): (&[String], &[String]) = match include {
            true => (list.get_ref(), &[]),
            false => (&[], list.get_ref()),
        };
        if let Err(e) = UriFilter::new(inc, exc) {
            return Err(err(Some(list.span()), format!("source {name:?}: {e}")));
        }
    }
    Ok(())
}

/// `text` with its top-level keys that are neither tables nor arrays of tables blanked out
/// (spaces, newlines kept: lines and columns stay where they were). A text that does not
/// parse is returned as it is, for the parser to say where.
fn without_flags(text: &str) -> std::borrow::Cow<'_, str> {
    let Ok(table) = toml::de::DeTable::parse(text) else {
        return text.into();
    };
    let mut spans: Vec<std::ops::Range<usize>> = Vec::new();
    for (k, v) in table.get_ref() {
        let is_table = match v.get_ref() {
            toml::de::DeValue::Table(_) => true,
            toml::de::DeValue::Array(a) => {
                !a.is_empty()
                    && a.iter()
                        .all(|i| matches!(i.get_ref(), toml::de::DeValue::Table(_)))
            }
            _ => false,
        };
        if !is_table {
            spans.push(k.span().start..v.span().end);
        }
    }
    if spans.is_empty() {
        return text.into();
    }
    let mut b = text.as_bytes().to_vec();
    for s in spans {
        for c in b.get_mut(s).into_iter().flatten() {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    // Only ASCII spaces replaced whole keys and values: still UTF-8, but be safe.
    String::from_utf8(b).map_or_else(|_| text.into(), Into::into)
}

/// Whether `name` may name a Source (and its folder).
pub fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'_')
}

/// The 1-based line of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn positive(
    v: &Spanned<usize>,
    what: &str,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<usize> {
    match *v.get_ref() {
        0 => Err(err(Some(v.span()), format!("{what} must be at least 1"))),
        n => Ok(n),
    }
}

/// The rules of a Source's `allow_hosts` (see the module documentation).
fn allow_hosts(
    name: &str,
    list: Option<&Spanned<Vec<String>>>,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<Vec<resourcesync_http::HostRule>> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    list.get_ref()
        .iter()
        .map(|e| {
            resourcesync_http::HostRule::parse(e).map_err(|why| {
                err(
                    Some(list.span()),
                    format!(
                        "source {name:?}: allow_hosts entry {why} (write [https://]HOST[:PORT], \
                         HOST a name, *.domain or *)"
                    ),
                )
            })
        })
        .collect()
}

/// A duration as people write it: `30s`, `5m`, `1h30m`, `2 hours`.
fn duration(
    v: &Spanned<String>,
    what: &str,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<Duration> {
    parse_duration(v.get_ref()).ok_or_else(|| {
        err(
            Some(v.span()),
            format!(
                "{what} {:?} is not a duration: write it as 30s, 5m, 1h or 1h30m",
                v.get_ref()
            ),
        )
    })
}

/// A size as people write it: `500MB`, `100GiB`, `2TB`, `1048576` (bytes).
fn size(
    v: &Spanned<String>,
    what: &str,
    err: &impl Fn(Option<std::ops::Range<usize>>, String) -> Error,
) -> Result<u64> {
    parse_size(v.get_ref()).ok_or_else(|| {
        err(
            Some(v.span()),
            format!(
                "{what} {:?} is not a size: write it as 500MB, 100GiB or 2TB",
                v.get_ref()
            ),
        )
    })
}

/// Parses a size in bytes: a number and a unit of bytes (B, kB, MB, GB, TB, KiB, MiB, GiB,
/// TiB; none: bytes), as `limits.bandwidth` writes its rates without the `/s` (no bits);
/// `None` for anything else, or zero.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.contains('/') || s.contains("bit") {
        return None;
    }
    let (num, factor) = if let Some(n) = s.strip_suffix("TiB") {
        (n, 1024.0 * 1024.0 * 1024.0 * 1024.0)
    } else if let Some(n) = s.strip_suffix("TB") {
        (n, 1e12)
    } else {
        return Bandwidth::parse_rate(s);
    };
    let num: f64 = num.trim().parse().ok()?;
    let v = num * factor;
    (v.is_finite() && v >= 1.0 && v < u64::MAX as f64).then_some(v as u64)
}

/// Parses `30s`, `5m`, `1h30m`, `2 hours`, `7d` (the one parser of durations:
/// [`resourcesync_destination::retention::parse_duration`]); `None` for anything else,
/// negative or zero.
pub fn parse_duration(s: &str) -> Option<Duration> {
    resourcesync_destination::retention::parse_duration(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0s"), None);
        assert_eq!(parse_duration("-5m"), None);
        assert_eq!(parse_duration("soon"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("500MB"), Some(500_000_000));
        assert_eq!(parse_size("100GiB"), Some(100 << 30));
        assert_eq!(parse_size("2TB"), Some(2_000_000_000_000));
        assert_eq!(parse_size("1 TiB"), Some(1 << 40));
        assert_eq!(parse_size("4096"), Some(4096));
        for bad in ["", "0", "10MB/s", "8Mbit", "lots", "-1GB"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn retention_of_versions() {
        use resourcesync_destination::retention::Retention;
        let parse = |extra: &str| {
            let text = format!("[[source]]\nname = \"m\"\nurl = \"https://m.example/\"\n{extra}\n");
            Config::parse(&text, Path::new("aggregate.toml")).map(|c| c.sources[0].keep_versions)
        };
        assert_eq!(parse("versions = true").expect("ok"), Retention::All);
        assert_eq!(
            parse("versions = true\nkeep_versions = 3").expect("ok"),
            Retention::Last(3)
        );
        assert_eq!(
            parse("versions = true\nkeep_versions_for = \"30d\"").expect("ok"),
            Retention::For(Duration::from_secs(30 * 86_400))
        );
        for (bad, says) in [
            ("versions = true\nkeep_versions = 0", "at least 1"),
            ("keep_versions = 3", "need versions = true"),
            (
                "versions = true\nkeep_versions_for = \"soon\"",
                "not a duration",
            ),
            (
                "versions = true\nkeep_versions = 3\nkeep_versions_for = \"1d\"",
                "give one of them",
            ),
        ] {
            let e = parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn names() {
        for ok in ["a", "museum-1", "x_y", "0abc"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "A", "a/b", "..", "a b", &"a".repeat(64)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
