//! The copies as they were at a time (issue 37 item 4; `docs/history.md`): `audit --at` and
//! `restore --at`, read from the kept versions alone (nothing is fetched from the Source).
//!
//! **Which time.** A time `T` is this Destination's: a resource's version at `T` is the one
//! with `first_seen ≤ T < until` (`until` none: still current), the timeline the Destination
//! itself kept, so that "the copy as it was at T" is what it held then. A resource none of
//! whose versions was current at `T` (not yet seen, or deleted before) has none. The Source's
//! times (`datetime`, `deleted_datetime`) are shown with each version, never used to choose.
//!
//! Memory is flat in the number of resources: the Source's versions are read a page
//! ([`PAGE`]) at a time in (URI, number) order ([`Records::versions_page`]), keeping one
//! resource's choice at a time; the lists of a report are cut at [`MAX_LISTED`].
//!
//! Only resources with versions are considered: copies made before `--versions` was on, and
//! files no resource maps to, are outside a time's state (a plain `audit` finds those).

use std::io::Read;
use std::time::{Instant, SystemTime};

use resourcesync_model::{HashAlg, Hashes, W3cDateTime};
use resourcesync_store::{Expect, Finished, RelPath, Store, VersionRecord};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::mapping::UriMapper;
use crate::ports::Ports;
use crate::report::MAX_LISTED;

/// Versions read from the state at a time.
pub const PAGE: usize = 1000;
/// Restored files made durable together (one [`Store::publish`]).
const BATCH: usize = 256;

/// One version, as a report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtVersion {
    /// Its number among the resource's versions.
    pub seq: u64,
    /// Its body's digest (`sha-256:HEX`).
    pub digest: String,
    /// Its body's length.
    pub length: u64,
    /// The Source's time for it (Z39.99-2014 §12.1 `datetime`, else §10.1 `<lastmod>`).
    pub datetime: Option<String>,
    /// When this Destination first saw it.
    pub first_seen: String,
    /// When it stopped being current here; none while current.
    pub until: Option<String>,
}

impl From<&VersionRecord> for AtVersion {
    fn from(v: &VersionRecord) -> Self {
        AtVersion {
            seq: v.seq,
            digest: v.digest.clone(),
            length: v.length,
            datetime: v.datetime.as_ref().map(ToString::to_string),
            first_seen: v.first_seen.to_string(),
            until: v.until.as_ref().map(ToString::to_string),
        }
    }
}

/// A copy that is not what the resource was at the time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AtDifference {
    /// The resource.
    pub uri: String,
    /// Its copy's path under DEST.
    pub path: String,
    /// The version current at the time; none: the resource did not exist then.
    pub version: Option<AtVersion>,
    /// The copy's length, when there is one.
    pub found_length: Option<u64>,
}

/// What `audit --at` found.
#[derive(Debug, Clone, Serialize)]
pub struct AtAuditReport {
    /// The Source's key (its Capability List URL).
    pub source: String,
    /// The time audited against (this Destination's clock).
    pub at: String,
    /// Resources with versions.
    pub resources: u64,
    /// Of those, current at the time.
    pub existed: u64,
    /// Copies as they were at the time (or absent, as the resource was).
    pub in_sync_count: u64,
    /// Resources current at the time without a copy (at most [`MAX_LISTED`]).
    pub missing: Vec<AtDifference>,
    /// Copies of resources that did not exist at the time (at most [`MAX_LISTED`]).
    pub extra: Vec<AtDifference>,
    /// Copies whose length or sha-256 is not the version's (at most [`MAX_LISTED`]).
    pub different: Vec<AtDifference>,
    /// How many are missing.
    pub missing_count: u64,
    /// How many are extra.
    pub extra_count: u64,
    /// How many differ.
    pub different_count: u64,
    /// No copy differs from the time's state.
    pub in_sync: bool,
    /// Resources whose path could not be found (no row, no base URL that maps them).
    pub warnings: Vec<String>,
    /// Seconds taken.
    pub seconds: f64,
}

/// A version that could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoreFailure {
    /// The resource.
    pub uri: String,
    /// Its path under OUT.
    pub path: String,
    /// The version.
    pub version: AtVersion,
    /// Why.
    pub error: String,
}

/// What `restore --at` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreReport {
    /// The Source's key (its Capability List URL).
    pub source: String,
    /// The time restored (this Destination's clock).
    pub at: String,
    /// Resources with versions.
    pub resources: u64,
    /// Files written: the resources current at the time.
    pub restored: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Resources that did not exist at the time (nothing written).
    pub absent: u64,
    /// Versions not restored (at most [`MAX_LISTED`]): a body missing or not its digest.
    pub failed: Vec<RestoreFailure>,
    /// How many failed.
    pub failed_count: u64,
    /// Resources whose path could not be found.
    pub warnings: Vec<String>,
    /// Seconds taken.
    pub seconds: f64,
}

/// Whether `v` was current at `t` by this Destination's clock: `first_seen ≤ t < until`.
pub fn current_at(v: &VersionRecord, t: &W3cDateTime) -> bool {
    use std::cmp::Ordering::{Greater, Less};
    v.first_seen.cmp_instant(t) != Greater
        && v.until.as_ref().is_none_or(|u| t.cmp_instant(u) == Less)
}

/// Calls `f` with each resource of `source` that has versions, in URI order, and its version
/// current at `t` (if any), reading the versions a page at a time.
pub fn for_each_at(
    ports: &Ports,
    source: &str,
    t: &W3cDateTime,
    mut f: impl FnMut(&str, Option<&VersionRecord>) -> Result<()>,
) -> Result<()> {
    let mut after: Option<(String, u64)> = None;
    let mut uri: Option<String> = None;
    let mut chosen: Option<VersionRecord> = None;
    loop {
        let page = ports.state.versions_page(
            source,
            after.as_ref().map(|(u, s)| (u.as_str(), *s)),
            PAGE,
        )?;
        let Some(last) = page.last() else { break };
        after = Some((last.uri.clone(), last.seq));
        for v in page {
            if uri.as_deref() != Some(v.uri.as_str()) {
                if let Some(u) = uri.take() {
                    f(&u, chosen.take().as_ref())?;
                }
                uri = Some(v.uri.clone());
            }
            if current_at(&v, t) {
                chosen = Some(v);
            }
        }
    }
    if let Some(u) = uri {
        f(&u, chosen.as_ref())?;
    }
    Ok(())
}

/// Where a resource's copy is: its row's path, else the path `mapper` gives it.
struct Paths<'a> {
    ports: &'a Ports,
    source: &'a str,
    mapper: Option<UriMapper>,
}

impl<'a> Paths<'a> {
    /// With the base URL given, else the one the Source's rows show (a row whose URI ends
    /// with its path), else none (only resources with rows are found).
    fn new(ports: &'a Ports, source: &'a str, base_url: Option<&str>) -> Result<Self> {
        let base = match base_url {
            Some(b) => Some(b.to_owned()),
            None => ports
                .state
                .resources_page(source, None, 100)?
                .into_iter()
                .find_map(|r| {
                    r.uri
                        .strip_suffix(r.path.as_str())
                        .filter(|b| b.ends_with('/'))
                        .map(str::to_owned)
                }),
        };
        let mapper = base.map(|b| UriMapper::new(&b)).transpose()?;
        Ok(Paths {
            ports,
            source,
            mapper,
        })
    }

    fn path(&self, uri: &str) -> Result<std::result::Result<RelPath, String>> {
        if let Some(r) = self.ports.state.resource(uri)?
            && r.source == self.source
        {
            return Ok(RelPath::parse(&r.path).map_err(|e| format!("{uri}: its row's path: {e}")));
        }
        Ok(match &self.mapper {
            Some(m) => m.map(uri).map_err(|e| e.to_string()),
            None => Err(format!(
                "{uri}: no row says where its copy is, and no base URL maps it (give --base-url)"
            )),
        })
    }
}

fn push<T>(list: &mut Vec<T>, item: T) {
    if list.len() < MAX_LISTED {
        list.push(item);
    }
}

/// Audits the copies in `ports` against the state of `source` at `t` (see the module docs):
/// a copy must have the length and sha-256 of the version current then, and there must be no
/// copy of a resource none of whose versions was. Blocks (reads the state and the copies).
pub fn audit_at(
    ports: &Ports,
    source: &str,
    t: &W3cDateTime,
    base_url: Option<&str>,
) -> Result<AtAuditReport> {
    let started = Instant::now();
    let paths = Paths::new(ports, source, base_url)?;
    let store = ports.store.as_ref();
    let mut r = AtAuditReport {
        source: source.to_owned(),
        at: t.to_string(),
        resources: 0,
        existed: 0,
        in_sync_count: 0,
        missing: Vec::new(),
        extra: Vec::new(),
        different: Vec::new(),
        missing_count: 0,
        extra_count: 0,
        different_count: 0,
        in_sync: true,
        warnings: Vec::new(),
        seconds: 0.0,
    };
    for_each_at(ports, source, t, |uri, v| {
        r.resources += 1;
        r.existed += u64::from(v.is_some());
        let path = match paths.path(uri)? {
            Ok(p) => p,
            Err(w) => {
                push(&mut r.warnings, w);
                return Ok(());
            }
        };
        let found = store.head(&path)?.map(|m| m.length);
        let diff = |found_length| AtDifference {
            uri: uri.to_owned(),
            path: path.as_str().to_owned(),
            version: v.map(AtVersion::from),
            found_length,
        };
        match (v, found) {
            (None, None) => r.in_sync_count += 1,
            (None, Some(n)) => {
                r.extra_count += 1;
                push(&mut r.extra, diff(Some(n)));
            }
            (Some(_), None) => {
                r.missing_count += 1;
                push(&mut r.missing, diff(None));
            }
            (Some(v), Some(n)) => {
                let same = n == v.length && {
                    let (len, hashes) = store.hash(&path, &[HashAlg::Sha256])?;
                    len == v.length
                        && resourcesync_store::version_digest(&hashes)
                            .is_some_and(|d| d.eq_ignore_ascii_case(&v.digest))
                };
                if same {
                    r.in_sync_count += 1;
                } else {
                    r.different_count += 1;
                    push(&mut r.different, diff(Some(n)));
                }
            }
        }
        Ok(())
    })?;
    r.in_sync = r.missing_count == 0 && r.extra_count == 0 && r.different_count == 0;
    r.seconds = started.elapsed().as_secs_f64();
    Ok(r)
}

/// Writes the state of `source` at `t` into `out` (see the module docs): for each resource
/// current then, the body of its version, from the version store of `ports`, at its path. A
/// body is verified against its length and sha-256 before it is visible (the store's
/// [`Expect`]), written as copies are (a temporary file renamed into place, made durable a
/// batch at a time); nothing is written for a resource that did not exist then. `out` is only
/// ever written at the resources' paths ([`RelPath`]s: never outside it). Blocks.
pub fn restore_at(
    ports: &Ports,
    source: &str,
    t: &W3cDateTime,
    base_url: Option<&str>,
    out: &dyn Store,
) -> Result<RestoreReport> {
    let started = Instant::now();
    let paths = Paths::new(ports, source, base_url)?;
    let features = ports.store.features();
    let bodies = features.versions.ok_or_else(|| {
        Error::Config("the store of these copies keeps no versions: nothing to restore".into())
    })?;
    let mut r = RestoreReport {
        source: source.to_owned(),
        at: t.to_string(),
        resources: 0,
        restored: 0,
        bytes: 0,
        absent: 0,
        failed: Vec::new(),
        failed_count: 0,
        warnings: Vec::new(),
        seconds: 0.0,
    };
    // Finished uploads not yet placed, with what to report of each.
    let mut batch: Vec<(Finished, String, VersionRecord)> = Vec::new();
    let publish =
        |batch: &mut Vec<(Finished, String, VersionRecord)>, r: &mut RestoreReport| -> Result<()> {
            let (finished, rest): (Vec<_>, Vec<_>) =
                batch.drain(..).map(|(f, uri, v)| (f, (uri, v))).unzip();
            for (placed, (uri, v)) in out.publish(finished)?.into_iter().zip(rest) {
                match placed {
                    Ok(p) => {
                        r.restored += 1;
                        r.bytes += p.committed.length;
                    }
                    Err(e) => fail(r, &uri, &paths, &v, e.to_string()),
                }
            }
            Ok(())
        };
    for_each_at(ports, source, t, |uri, v| {
        r.resources += 1;
        let Some(v) = v else {
            r.absent += 1;
            return Ok(());
        };
        let path = match paths.path(uri)? {
            Ok(p) => p,
            Err(w) => {
                push(&mut r.warnings, w);
                return Ok(());
            }
        };
        match write_version(bodies, out, &path, uri, v) {
            Ok(f) => batch.push((f, uri.to_owned(), v.clone())),
            Err(e) => fail(&mut r, uri, &paths, v, e.to_string()),
        }
        if batch.len() >= BATCH {
            publish(&mut batch, &mut r)?;
        }
        Ok(())
    })?;
    publish(&mut batch, &mut r)?;
    r.seconds = started.elapsed().as_secs_f64();
    Ok(r)
}

fn fail(r: &mut RestoreReport, uri: &str, paths: &Paths<'_>, v: &VersionRecord, error: String) {
    r.failed_count += 1;
    let path = match paths.path(uri) {
        Ok(Ok(p)) => p.as_str().to_owned(),
        _ => String::new(),
    };
    push(
        &mut r.failed,
        RestoreFailure {
            uri: uri.to_owned(),
            path,
            version: AtVersion::from(v),
            error,
        },
    );
}

/// Receives the body of `v` into `out` at `path`, checked against its length and sha-256.
fn write_version(
    bodies: &dyn resourcesync_store::VersionBodies,
    out: &dyn Store,
    path: &RelPath,
    uri: &str,
    v: &VersionRecord,
) -> Result<Finished> {
    let hex = v
        .digest
        .strip_prefix("sha-256:")
        .ok_or_else(|| Error::Config(format!("version {} of {uri}: not a sha-256", v.seq)))?;
    let mut body = bodies.open_version(&v.digest)?.ok_or_else(|| {
        Error::Config(format!(
            "version {} of {uri}: its body {} is not in the version store",
            v.seq, v.digest
        ))
    })?;
    let expect = Expect {
        length: Some(v.length),
        hashes: Hashes::from_known(None, None, Some(hex.to_ascii_lowercase())),
        max_bytes: v.length,
        modified: v.datetime.as_ref().map(|d| SystemTime::from(d.timestamp())),
        uri: Some(uri.to_owned()),
        sha256: true,
    };
    let mut up = out.begin(path, expect)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = body.read(&mut buf).map_err(|e| Error::Io {
            what: format!("reading the body {} of {uri}", v.digest),
            cause: e,
        })?;
        if n == 0 {
            break;
        }
        up.write(&buf[..n])?;
    }
    Ok(up.finish()?)
}

/// The key the state keeps a Source's versions under, for a URL a user gives: the URL itself
/// when the state has versions under it (a Capability List URL: nothing is fetched, so a
/// Source gone offline can still be audited and restored), else the Capability List its
/// discovery finds (Z39.99-2014 §8; `set` picks one of several).
pub async fn source_key(
    ports: &Ports,
    url: &str,
    set: Option<&str>,
    http: crate::http::HttpOptions,
) -> Result<String> {
    let (state, u) = (ports.state.clone(), url.to_owned());
    let known = tokio::task::spawn_blocking(move || state.versions_page(&u, None, 1))
        .await
        .map_err(|e| Error::Task(e.to_string()))??;
    if !known.is_empty() {
        return Ok(url.to_owned());
    }
    let fetcher = crate::discover::docs::DocFetcher {
        http: std::sync::Arc::new(crate::http::Http::new(http)?),
        dir: ports.scratch.clone(),
        max_bytes: crate::options::DEFAULT_MAX_DOCUMENT_BYTES,
    };
    let info = crate::discover::discover(&fetcher, url, set).await?;
    Ok(info.key())
}

/// [`restore_at`] into the directory `out` (created as needed; the caller checks it is new or
/// empty). The store's own folder is left out of `out` when nothing is in it. Blocks.
pub fn restore_into(
    ports: &Ports,
    source: &str,
    t: &W3cDateTime,
    base_url: Option<&str>,
    out: &std::path::Path,
) -> Result<RestoreReport> {
    let store = resourcesync_store::FsStore::open(out)?;
    let report = restore_at(ports, source, t, base_url, &store);
    let own = out.join(resourcesync_store::STATE_DIR);
    let _ = std::fs::remove_dir(own.join("tmp"));
    let _ = std::fs::remove_dir(&own);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> W3cDateTime {
        W3cDateTime::parse(s).expect("datetime")
    }

    #[test]
    fn a_version_is_current_from_its_first_sight_until_its_end_exclusive() {
        let v = VersionRecord {
            source: "s".into(),
            uri: "u".into(),
            seq: 1,
            digest: String::new(),
            length: 0,
            datetime: Some(at("2020-01-01T00:00:00Z")),
            first_seen: at("2026-12-01T09:00:00.5Z"),
            until: Some(at("2026-12-01T10:00:00Z")),
            deleted: false,
            deleted_datetime: None,
        };
        // The Source's datetime is never what chooses.
        assert!(!current_at(&v, &at("2026-12-01T09:00:00Z")));
        assert!(current_at(&v, &at("2026-12-01T09:00:00.5Z")));
        assert!(current_at(&v, &at("2026-12-01T09:59:59.999Z")));
        assert!(
            !current_at(&v, &at("2026-12-01T10:00:00Z")),
            "the next one's"
        );
        // Another zone, the same instant.
        assert!(!current_at(&v, &at("2026-12-01T11:00:00+01:00")));
        let current = VersionRecord { until: None, ..v };
        assert!(current_at(&current, &at("2999-01-01T00:00:00Z")));
    }
}
