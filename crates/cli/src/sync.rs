//! `resourcesync sync` and `resourcesync audit`: the Destination (crate
//! `resourcesync-destination`), with progress bars on a terminal and a summary or a JSON report.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{
    MultiProgress, ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle,
};
use resourcesync_destination::options::CheckCopies;
use resourcesync_destination::retention::Retention;
use resourcesync_destination::{
    AuditOptions, AuditReport, HttpOptions, Observer, SyncOptions, SyncReport,
};

use crate::printable::{printable, printable_message};
use crate::{EXIT_DIFFERENCES, EXIT_OK};

/// What each count of a `sync` summary (and its `--json` report) means: shown after
/// `sync --help`, and in the manual page.
pub(crate) const SYNC_COUNTS: &str = "\
The counts of the summary (and of --json), one resource of the Source each:
  created    copied for the first time
  updated    copied again: the Source changed it (or its copy, recorded, was older)
  unchanged  the copy was already current: not fetched
  failed     not copied in this run (listed; retried by the next run)
  filtered   left out by --include/--exclude
These add up to the resources the run went through: every resource of the Resource List
(and those created after it) for a baseline, the resources changed since the last run for an
incremental one. Counted apart:
  deleted    copies removed because the Source deleted the resource (--delete)
  kept       copies kept although the Source deleted the resource (no --delete)
  repaired   copies found damaged on disk and fetched again
  extra_deleted  files under DEST no resource maps to, removed by --delete
Exit status: 0 ok, 1 a resource failed, 2 error. With -q nothing is printed on success.";

/// Options shared by `sync` and `audit`.
#[derive(Debug, Args)]
pub(crate) struct RemoteArgs {
    /// Where to start: a site root, a page, a Source Description, a Capability List or any
    /// capability document.
    #[arg(value_name = "URL")]
    url: String,
    /// The destination directory.
    #[arg(value_name = "DEST")]
    dest: PathBuf,
    /// The state database (default DEST/.resourcesync/state.sqlite).
    #[arg(long, value_name = "PATH")]
    state: Option<PathBuf>,
    /// The Capability List to use when the Source has several.
    #[arg(long, value_name = "URL")]
    set: Option<String>,
    /// The Source's base URL: resources under it map to the same relative path under DEST
    /// (default: where the Source Description's /.well-known/ is, else the origin).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// A bearer token, sent to the host of URL only.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Requests per second per host.
    #[arg(long, value_name = "R")]
    rate: Option<f64>,
    /// Seconds without data before a request is abandoned (then retried).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
    /// Retries of a request after connection errors, timeouts, 429 and 5xx.
    #[arg(long, value_name = "N", default_value_t = 4)]
    retries: u32,
    /// Time limit for the whole run, in seconds (work done is kept).
    #[arg(long, value_name = "SECONDS")]
    max_time: Option<u64>,
    /// Speak HTTP/2 without asking first (h2c with prior knowledge on http://, RFC 9113 §3.3;
    /// only h2 offered on https://): for Sources known to serve it; HTTP/1-only servers then
    /// fail. Without it HTTP/2 is still used over https whenever the server offers it (ALPN).
    #[arg(long)]
    http2_prior_knowledge: bool,
    /// A PEM file of extra trusted root certificates, e.g. the private CA that signed a
    /// Source's certificate (`serve --tls-cert`); the system's roots stay trusted.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

impl RemoteArgs {
    fn http(&self, concurrency: usize) -> HttpOptions {
        HttpOptions {
            pool_per_host: concurrency.max(1),
            max_in_flight: concurrency.max(1),
            read_timeout: Duration::from_secs(self.timeout.max(1)),
            retries: self.retries,
            rate: self.rate,
            token: self.token.clone(),
            http2_prior_knowledge: self.http2_prior_knowledge,
            ca_cert: self.ca_cert.clone(),
            // The command line honours HTTP_PROXY and the others, as curl does; the library
            // reads them only when asked.
            proxy: resourcesync_destination::http::Proxy::FromEnvironment,
            ..HttpOptions::default()
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct SyncArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Remove what the Source does not have, as rsync --delete does: copies of resources the
    /// Source deleted (otherwise they are kept and reported), then the files under DEST that
    /// no resource maps to (the audit's "extra" files; directories left empty go too). Never
    /// DEST/.resourcesync nor a --state inside DEST, never outside DEST, never through a
    /// symbolic link (a link is removed, not followed); files that --include/--exclude leave
    /// out are protected. With --dry-run, listed ("would delete-extra") and not removed.
    /// "No resource maps to" means no row of the state database names the file: Sources synced
    /// into one DEST keep their copies when they share the state (the default), not when each
    /// has its own --state. Each run walks DEST once more (as `audit` does).
    #[arg(long)]
    delete: bool,
    /// The most downloads in flight per host: the number adapts below it, from 32 (more when the
    /// first round trips are long), to what the Source answers (grows while throughput grows,
    /// halves on 429/503; docs/wide-area.md).
    #[arg(long, value_name = "N", default_value_t = 256)]
    concurrency: usize,
    /// Report what would be done; fetch no resource, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Largest resource accepted when the Source publishes no length, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = resourcesync_destination::options::DEFAULT_MAX_RESOURCE_BYTES)]
    max_resource_size: u64,
    /// Do not baseline from the Source's Resource Dump: fetch every resource on its own.
    #[arg(long)]
    no_dump: bool,
    /// Apply the Source's Change Dump packages before reading its Change Lists.
    #[arg(long)]
    prefer_dumps: bool,
    /// Keep every earlier version of each copy beside it (in DEST/.resourcesync/versions, or
    /// under the bucket's prefix), each body once however many times it is listed
    /// (content-addressed by sha-256), with the Source's lastmod and when this Destination
    /// first saw it; a deleted resource keeps its versions and the time of the delete. Versions
    /// start with the bodies fetched while it is on. See docs/history.md.
    #[arg(long)]
    versions: bool,
    /// With --versions: keep the last N versions of each resource (at least 1: the current
    /// one is always kept); the others, and the bodies no version names any more, are removed
    /// at the end of each run. Default: every version.
    #[arg(long, value_name = "N", requires = "versions", conflicts_with = "keep_versions_for",
          value_parser = clap::value_parser!(u64).range(1..))]
    keep_versions: Option<u64>,
    /// With --versions: keep the versions current within this duration (30m, 12h, 30d)
    /// before each run's end, and each resource's last; the others, and the bodies no version
    /// names any more, are removed at the end of each run. Default: every version.
    #[arg(long, value_name = "DURATION", requires = "versions", value_parser = parse_keep_for)]
    keep_versions_for: Option<Duration>,
    /// Largest dump package downloaded, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = resourcesync_destination::dump::DEFAULT_MAX_PACKAGE_BYTES)]
    max_package_size: u64,
    /// Check every copy in this run, and hash it too, to find edits that kept its length and
    /// time (implies --check).
    #[arg(long, conflicts_with = "no_check")]
    checksum: bool,
    /// Check every copy on disk against the state in this run, whatever --check-every says:
    /// a copy missing, of another length or with another modification time than the sync gave
    /// it is fetched again.
    #[arg(long, conflicts_with = "no_check")]
    check: bool,
    /// How often every copy is checked against the state (as --check does): when the last
    /// completed check, recorded in the state, is older than this (30m, 12h, 7d; 0: every
    /// run; never: only with --check). Between checks a run costs what changed: a copy
    /// damaged on disk is found by the next check (or `audit`).
    #[arg(long, value_name = "INTERVAL", default_value = "24h", value_parser = parse_every)]
    check_every: CheckEvery,
    /// Never check the copies on disk against the state (not even with --check-every).
    #[arg(long)]
    no_check: bool,
    /// Copy only resources whose name matches PATTERN (repeatable), as written under DEST
    /// (decoded: 'b 1.txt', not 'b%201.txt'): without `/` the file name at any depth ('*.pdf');
    /// with `/` the path from DEST's top ('/docs/*', 'docs/*'), at any depth when it starts
    /// with `*` ('*/日本語/*'); starting with http:// or https:// the whole URI as published.
    /// `*` any characters, `/` included, `?` one, `{a,b}` either. Resources left out are left
    /// alone: not fetched, their earlier copies neither updated nor deleted, even by --delete.
    /// A pattern that matched no resource of a baseline is warned about.
    #[arg(long, value_name = "PATTERN")]
    include: Vec<String>,
    /// Leave out resources whose name matches PATTERN (as --include; repeatable; wins over
    /// --include).
    #[arg(long, value_name = "PATTERN")]
    exclude: Vec<String>,
    /// Most bytes of bodies received per second: 10MB/s, 500KiB/s, 100Mbit/s (a number
    /// alone is bytes).
    #[arg(long, visible_alias = "bwlimit", value_name = "RATE", value_parser = parse_rate)]
    bandwidth: Option<u64>,
    #[command(flatten)]
    watch: crate::watch::WatchArgs,
    #[command(flatten)]
    config: crate::config::ConfigArgs,
}

/// `--check-every`: an interval, or never.
#[derive(Debug, Clone, Copy)]
struct CheckEvery(Option<Duration>);

fn parse_keep_for(s: &str) -> Result<Duration, String> {
    resourcesync_destination::retention::parse_duration(s)
        .ok_or_else(|| format!("{s:?} is not a duration: write it as 30m, 12h or 30d"))
}

fn parse_every(s: &str) -> Result<CheckEvery, String> {
    match s.trim() {
        "never" | "off" => Ok(CheckEvery(None)),
        "0" => Ok(CheckEvery(Some(Duration::ZERO))),
        t => resourcesync_aggregate::config::parse_duration(t)
            .map(|d| CheckEvery(Some(d)))
            .ok_or_else(|| {
                format!("{s:?} is not an interval: write it as 30m, 12h, 7d, 0 or never")
            }),
    }
}

fn parse_rate(s: &str) -> Result<u64, String> {
    resourcesync_destination::http::Bandwidth::parse_rate(s)
        .ok_or_else(|| format!("{s:?} is not a rate: write it as 10MB/s, 500KiB/s or 100Mbit/s"))
}

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Do not read the copies: a copy whose size is the recorded length counts by the digests
    /// recorded when it was written (a copy changed in place without changing its size goes
    /// unnoticed). By default every copy the Source publishes a digest for is hashed.
    #[arg(long)]
    fast: bool,
    /// Audit against the state the Source had at DATETIME (a W3C Datetime such as
    /// 2026-12-01T10:00:00Z), read from the versions this Destination kept (`sync --versions`):
    /// by this Destination's own timeline, each resource as the version it held then (first
    /// seen at or before DATETIME, not yet replaced or deleted), the Source's datetimes shown.
    /// Only resources with versions are compared; nothing is fetched when URL is the
    /// Capability List the state keys them under (see docs/history.md).
    #[arg(long, value_name = "DATETIME")]
    at: Option<String>,
}

/// Progress bars on a terminal; warnings on standard error otherwise.
struct Bars {
    mp: Option<MultiProgress>,
    resources: ProgressBar,
    bytes: ProgressBar,
}

impl Bars {
    fn new(show: bool) -> Self {
        if !show {
            return Bars {
                mp: None,
                resources: ProgressBar::hidden(),
                bytes: ProgressBar::hidden(),
            };
        }
        let mp = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        // Cleared however the run ends (an error drops the bars): no line is left behind.
        let resources = mp.add(ProgressBar::new(0).with_finish(ProgressFinish::AndClear));
        resources.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg:24} [{bar:30}] {pos}/{len} resources  {rate}  ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&crate::units::per_second(s.per_sec()));
            })
            .progress_chars("=> "),
        );
        let bytes = mp.add(ProgressBar::new_spinner().with_finish(ProgressFinish::AndClear));
        bytes.set_style(
            ProgressStyle::with_template("  {received} received  {rate}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key(
                    "received",
                    |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = w.write_str(&crate::units::bytes(s.pos()));
                    },
                )
                .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&crate::units::bytes_per_second(s.per_sec()));
                }),
        );
        resources.enable_steady_tick(Duration::from_millis(200));
        crate::out::show_bars(Some(mp.clone()));
        Bars {
            mp: Some(mp),
            resources,
            bytes,
        }
    }

    fn clear(&self) {
        self.resources.finish_and_clear();
        self.bytes.finish_and_clear();
        if let Some(mp) = &self.mp {
            crate::out::show_bars(None);
            let _ = mp.clear();
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Observer for Bars {
    fn phase(&self, what: &str) {
        self.resources.set_message(what.to_owned());
    }
    fn warning(&self, message: &str) {
        match &self.mp {
            Some(mp) => {
                let _ = mp.println(format!(
                    "resourcesync: warning: {}",
                    printable_message(message)
                ));
            }
            None => crate::out::say!("resourcesync: warning: {}", printable_message(message)),
        }
    }
    fn add_total(&self, n: u64) {
        self.resources.inc_length(n);
    }
    fn resource_done(&self) {
        self.resources.inc(1);
    }
    fn bytes(&self, n: u64) {
        self.bytes.inc(n);
    }
}

/// How a round synchronized, in words (also used by `demo` and `sync --watch`).
fn print_sync(out: &mut impl Write, r: &SyncReport) -> std::io::Result<()> {
    let from = r
        .source
        .capability_list
        .as_deref()
        .or(r.source.resource_list.as_deref())
        .unwrap_or("?");
    let from = printable(from);
    writeln!(
        out,
        "{}{} from {from}",
        if r.dry_run { "dry run: " } else { "" },
        crate::printable::mode_name(r.mode)
    )?;
    writeln!(
        out,
        "{} created, {} updated, {} deleted, {} kept, {} unchanged, {} failed; {} in {:.2} s",
        r.created,
        r.updated,
        r.deleted,
        r.kept,
        r.unchanged,
        r.failed,
        crate::units::bytes(r.bytes),
        r.seconds
    )?;
    if r.filtered > 0 {
        writeln!(out, "  {} left out by --include/--exclude", r.filtered)?;
    }
    if r.extra_deleted > 0 {
        writeln!(
            out,
            "  {} {} no resource maps to {} (--delete)",
            r.extra_deleted,
            if r.extra_deleted == 1 {
                "file"
            } else {
                "files"
            },
            if r.dry_run {
                "would be removed"
            } else {
                "removed"
            }
        )?;
    }
    if r.repaired > 0 {
        writeln!(
            out,
            "  {} damaged {} fetched again (missing, another length or other content)",
            r.repaired,
            if r.repaired == 1 { "copy" } else { "copies" }
        )?;
    }
    if r.packages > 0 || r.patched > 0 {
        writeln!(
            out,
            "  {} from {} dump package(s), {} by patch",
            r.from_packages, r.packages, r.patched
        )?;
    }
    if let Some(v) = &r.versions {
        writeln!(
            out,
            "  {} version(s) kept, {} new {} ({}) in the version store (--versions)",
            v.versions,
            v.bodies,
            if v.bodies == 1 { "body" } else { "bodies" },
            crate::units::bytes(v.bytes)
        )?;
        let p = v.pruned;
        if p.versions > 0 || p.bodies > 0 {
            writeln!(
                out,
                "  {} version(s) pruned, {} {} ({}) removed from the version store",
                p.versions,
                p.bodies,
                if p.bodies == 1 { "body" } else { "bodies" },
                crate::units::bytes(p.bytes)
            )?;
        }
    }
    print_sync_items(out, r)
}

/// The resources a round names one by one: what a dry run would do, copies kept, failures.
fn print_sync_items(out: &mut impl Write, r: &SyncReport) -> std::io::Result<()> {
    for p in &r.planned {
        if p.uri.is_empty() {
            writeln!(out, "  would {} {}", p.action, printable(&p.path))?;
            continue;
        }
        writeln!(
            out,
            "  would {} {} -> {}",
            p.action,
            printable(&p.uri),
            printable(&p.path)
        )?;
    }
    for k in &r.kept_uris {
        writeln!(
            out,
            "  deleted at the Source, copy kept (no --delete): {}",
            printable(k)
        )?;
    }
    for f in &r.failures {
        match &f.path {
            Some(p) => writeln!(
                out,
                "  failed {} ({}): {}",
                printable(&f.uri),
                printable(p),
                printable(&f.error)
            )?,
            None => writeln!(
                out,
                "  failed {}: {}",
                printable(&f.uri),
                printable(&f.error)
            )?,
        }
    }
    if r.failed > r.failures.len() as u64 {
        writeln!(
            out,
            "  ... and {} more failures",
            r.failed - r.failures.len() as u64
        )?;
    }
    Ok(())
}

pub(crate) fn run_sync(a: &SyncArgs) -> anyhow::Result<u8> {
    let r = &a.remote;
    crate::input::check_url(&r.url)?;
    crate::input::check_state_path(r.state.as_deref())?;
    let mut o = SyncOptions::new(&r.url, &r.dest);
    o.state = r.state.clone();
    o.set = r.set.clone();
    o.base_url = r.base_url.clone();
    o.delete = a.delete;
    o.delete_extra = a.delete;
    o.dry_run = a.dry_run;
    o.concurrency = a.concurrency.max(1);
    o.http = r.http(o.concurrency);
    o.http.bandwidth = a
        .bandwidth
        .map(|b| Arc::new(resourcesync_destination::http::Bandwidth::new(b)));
    o.filter = resourcesync_destination::UriFilter::new(&a.include, &a.exclude)?;
    o.max_resource_bytes = a.max_resource_size;
    o.use_dumps = !a.no_dump;
    o.prefer_dumps = a.prefer_dumps;
    o.versions = a.versions;
    o.keep_versions = match (a.keep_versions, a.keep_versions_for) {
        (Some(n), _) => Retention::Last(n),
        (None, Some(d)) => Retention::For(d),
        (None, None) => Retention::All,
    };
    o.dump_limits.max_package_bytes = a.max_package_size;
    o.check_copies = if a.no_check {
        CheckCopies::Off
    } else if a.checksum {
        CheckCopies::Checksum
    } else {
        CheckCopies::Quick
    };
    o.check_every = a.check_every.0;
    o.check_now = a.check || a.checksum;
    o.deadline = r.max_time.map(Duration::from_secs);
    let bars = Arc::new(Bars::new(crate::out::progress_allowed() && !r.json));
    if a.watch.watch {
        let b = bars.clone();
        return crate::watch::run(&o, &a.watch, r.json, bars, move || b.clear());
    }
    let b: Arc<dyn Observer> = bars.clone();
    let report = crate::rt::block_on(&crate::rt::runtime()?, async move {
        resourcesync_destination::sync(&o, b).await
    });
    bars.clear();
    let report = report?;
    let failed = report.failed > 0;
    if r.json {
        let mut out = crate::out::stdout();
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        match summary_to(failed) {
            Summary::Stdout => print_sync(&mut crate::out::stdout(), &report)?,
            Summary::Stderr => print_sync(&mut crate::out::stderr(), &report)?,
            Summary::None => {}
        }
    }
    Ok(if failed { EXIT_DIFFERENCES } else { EXIT_OK })
}

/// Where a summary goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Summary {
    Stdout,
    /// `-q` and something to tell (failures, differences): standard error.
    Stderr,
    /// `-q` and nothing to tell.
    None,
}

/// Where the summary of `sync` or `audit` goes: standard output, or with `-q` nowhere on
/// success (cron mails only when there is something to read) and standard error otherwise.
/// `--json` is asked for explicitly and always printed.
fn summary_to(differences: bool) -> Summary {
    match (crate::out::quiet(), differences) {
        (false, _) => Summary::Stdout,
        (true, true) => Summary::Stderr,
        (true, false) => Summary::None,
    }
}

fn print_audit(out: &mut impl Write, r: &AuditReport) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {} at the Source, {} in sync, {} missing, {} extra, {} different ({:.2} s)",
        if r.in_sync { "in sync" } else { "differences" },
        crate::units::count(r.resources, "resource", "resources"),
        r.in_sync_count,
        r.missing_count,
        r.extra_count,
        r.different_count,
        r.seconds
    )?;
    for (what, list) in [
        ("missing", &r.missing),
        ("extra", &r.extra),
        ("different", &r.different),
    ] {
        for d in list {
            writeln!(
                out,
                "  {what} {} {}: {}",
                printable(d.path.as_deref().unwrap_or("-")),
                printable(if d.uri.is_empty() { "-" } else { &d.uri }),
                printable(&d.why)
            )?;
        }
    }
    Ok(())
}

pub(crate) fn run_audit(a: &AuditArgs) -> anyhow::Result<u8> {
    crate::input::check_url(&a.remote.url)?;
    let r = &a.remote;
    if let Some(at) = &a.at {
        let t = crate::restore::parse_at(at)?;
        let report = crate::restore::audit_at(
            &r.url,
            &r.dest,
            r.state.as_deref(),
            r.set.as_deref(),
            r.base_url.as_deref(),
            r.http(8),
            &t,
        )?;
        return crate::restore::report_audit_at(&report, r.json);
    }
    crate::input::check_state_path(r.state.as_deref())?;
    let mut o = AuditOptions::new(&r.url, &r.dest);
    o.state = r.state.clone();
    o.set = r.set.clone();
    o.base_url = r.base_url.clone();
    o.http = r.http(8);
    o.deadline = r.max_time.map(Duration::from_secs);
    o.fast = a.fast;
    let bars = Arc::new(Bars::new(crate::out::progress_allowed() && !r.json));
    let b: Arc<dyn Observer> = bars.clone();
    let report = crate::rt::block_on(&crate::rt::runtime()?, async move {
        resourcesync_destination::audit(&o, b).await
    });
    bars.clear();
    let report = report?;
    if r.json {
        let mut out = crate::out::stdout();
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        match summary_to(!report.in_sync) {
            Summary::Stdout => print_audit(&mut crate::out::stdout(), &report)?,
            Summary::Stderr => print_audit(&mut crate::out::stderr(), &report)?,
            Summary::None => {}
        }
    }
    Ok(if report.in_sync {
        EXIT_OK
    } else {
        EXIT_DIFFERENCES
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--check-every` takes what its help and its error name (7d was refused: days are not
    /// a fixed length to jiff's duration parser, so they are taken as 24 hours).
    #[test]
    fn check_every_takes_the_intervals_its_help_names() {
        let secs = |s| parse_every(s).map(|c| c.0.map(|d| d.as_secs()));
        assert_eq!(secs("30m"), Ok(Some(1800)));
        assert_eq!(secs("12h"), Ok(Some(12 * 3600)));
        assert_eq!(secs("7d"), Ok(Some(7 * 86_400)));
        assert_eq!(secs("0"), Ok(Some(0)));
        assert_eq!(secs("never"), Ok(None));
        assert!(parse_every("soon").is_err());
    }
}
