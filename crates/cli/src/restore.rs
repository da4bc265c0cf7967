//! `restore URL DEST OUT --at DATETIME` and `audit URL DEST --at DATETIME` (issue 37 item 4;
//! docs/history.md): the copies as they were at a time of this Destination's clock, from the
//! versions `sync --versions` kept (the engine is `resourcesync_destination::attime`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use resourcesync_destination::attime::{self, AtAuditReport, RestoreReport};
use resourcesync_destination::options::default_state_path;
use resourcesync_destination::{HttpOptions, Ports};
use resourcesync_model::W3cDateTime;

use crate::printable::printable;
use crate::{EXIT_DIFFERENCES, EXIT_OK};

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// The Source: the Capability List URL its versions are kept under (nothing is fetched),
    /// or any URL `sync` was given (the Source is then discovered to find it).
    #[arg(value_name = "URL")]
    url: String,
    /// The destination directory whose kept versions are read (never written).
    #[arg(value_name = "DEST")]
    dest: PathBuf,
    /// The directory to write the copies of that time into: created, and refused when it is
    /// not empty (unless --force) or is DEST or inside it.
    #[arg(value_name = "OUT")]
    out: PathBuf,
    /// The time (a W3C Datetime such as 2026-12-01T10:00:00Z), by this Destination's own
    /// timeline: each resource as the version it held then (first seen at or before DATETIME,
    /// not yet replaced or deleted); a resource it did not hold then is not written. The
    /// Source's datetimes are in the --json report.
    #[arg(long, value_name = "DATETIME")]
    at: String,
    /// The state database (default DEST/.resourcesync/state.sqlite).
    #[arg(long, value_name = "PATH")]
    state: Option<PathBuf>,
    /// The Capability List to use when the Source has several.
    #[arg(long, value_name = "URL")]
    set: Option<String>,
    /// The Source's base URL, for the paths of resources whose row a `--delete` removed
    /// (default: the one the remaining rows show).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Write into OUT even when it is not empty (files of the time replace those at their
    /// paths; nothing else is removed).
    #[arg(long)]
    force: bool,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

/// A W3C Datetime given on the command line.
pub(crate) fn parse_at(at: &str) -> anyhow::Result<W3cDateTime> {
    W3cDateTime::parse(at).map_err(|e| {
        anyhow::anyhow!("--at {at:?}: {e} (give a W3C Datetime such as 2026-12-01T10:00:00Z)")
    })
}

/// The ports of DEST, read only, and the Source's key.
fn open(
    url: &str,
    dest: &Path,
    state: Option<&Path>,
    set: Option<&str>,
    http: HttpOptions,
) -> anyhow::Result<(Ports, String)> {
    if !dest.is_dir() {
        bail!(
            "{}: not a directory (give the directory `sync --versions` kept)",
            dest.display()
        );
    }
    let state = state.map_or_else(|| default_state_path(dest), Path::to_path_buf);
    let (ports, found) = Ports::directory_read_only(dest, &state)?;
    if !found {
        bail!(
            "{}: no state database: nothing was kept here (give --state if it is elsewhere)",
            state.display()
        );
    }
    let key = crate::rt::runtime()?.block_on(attime::source_key(&ports, url, set, http))?;
    Ok((ports, key))
}

/// `audit --at` (called by `audit`).
pub(crate) fn audit_at(
    url: &str,
    dest: &Path,
    state: Option<&Path>,
    set: Option<&str>,
    base_url: Option<&str>,
    http: HttpOptions,
    t: &W3cDateTime,
) -> anyhow::Result<AtAuditReport> {
    let (ports, key) = open(url, dest, state, set, http)?;
    Ok(attime::audit_at(&ports, &key, t, base_url)?)
}

/// Prints an `audit --at` report; the exit code.
pub(crate) fn report_audit_at(r: &AtAuditReport, json: bool) -> anyhow::Result<u8> {
    if json {
        let mut out = crate::out::stdout();
        serde_json::to_writer_pretty(&mut out, r)?;
        writeln!(out)?;
    } else if !crate::out::quiet() || !r.in_sync {
        let mut out: Box<dyn Write> = if crate::out::quiet() {
            Box::new(crate::out::stderr())
        } else {
            Box::new(crate::out::stdout())
        };
        writeln!(
            out,
            "{} at {}: {} with versions ({} then), {} as then, {} missing, {} extra, {} different ({:.2} s)",
            if r.in_sync { "in sync" } else { "differences" },
            r.at,
            crate::units::count(r.resources, "resource", "resources"),
            r.existed,
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
                let then = match &d.version {
                    Some(v) => format!(
                        "version {} (Source's datetime {}, here from {})",
                        v.seq,
                        v.datetime.as_deref().unwrap_or("none"),
                        v.first_seen
                    ),
                    None => "did not exist then".to_owned(),
                };
                writeln!(
                    out,
                    "  {what} {} {}: {then}",
                    printable(&d.path),
                    printable(&d.uri)
                )?;
            }
        }
        for w in &r.warnings {
            writeln!(out, "  warning: {}", printable(w))?;
        }
    }
    Ok(if r.in_sync { EXIT_OK } else { EXIT_DIFFERENCES })
}

/// Refuses an OUT that is DEST or inside it, or (without `force`) one that is not empty.
fn check_out(dest: &Path, out: &Path, force: bool) -> anyhow::Result<()> {
    let dest = dest
        .canonicalize()
        .with_context(|| format!("{}", dest.display()))?;
    // The nearest existing ancestor of OUT, resolved, then the rest as given.
    let mut existing = out.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(p), Some(n)) => {
                rest.push(n.to_owned());
                existing = if p.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    p.to_path_buf()
                };
            }
            _ => break,
        }
    }
    let mut resolved = existing
        .canonicalize()
        .with_context(|| format!("{}", existing.display()))?;
    resolved.extend(rest.iter().rev());
    if resolved.starts_with(&dest) {
        bail!(
            "{}: inside the destination directory {}: restore into a directory of its own",
            out.display(),
            dest.display()
        );
    }
    if out.exists() {
        if !out.is_dir() {
            bail!("{}: not a directory", out.display());
        }
        let mut entries = std::fs::read_dir(out).with_context(|| format!("{}", out.display()))?;
        if !force && entries.next().is_some() {
            bail!(
                "{}: not empty: give a new or empty directory (or --force to write into it)",
                out.display()
            );
        }
    }
    Ok(())
}

pub(crate) fn run(a: &RestoreArgs) -> anyhow::Result<u8> {
    crate::input::check_url(&a.url)?;
    let t = parse_at(&a.at)?;
    crate::input::check_state_path(a.state.as_deref())?;
    check_out(&a.dest, &a.out, a.force)?;
    let (ports, key) = open(
        &a.url,
        &a.dest,
        a.state.as_deref(),
        a.set.as_deref(),
        HttpOptions::default(),
    )?;
    let r = attime::restore_into(&ports, &key, &t, a.base_url.as_deref(), &a.out)?;
    print_restore(&r, a.json)?;
    Ok(if r.failed_count == 0 {
        EXIT_OK
    } else {
        EXIT_DIFFERENCES
    })
}

fn print_restore(r: &RestoreReport, json: bool) -> anyhow::Result<()> {
    if json {
        let mut out = crate::out::stdout();
        serde_json::to_writer_pretty(&mut out, r)?;
        writeln!(out)?;
        return Ok(());
    }
    let failed = r.failed_count > 0;
    if crate::out::quiet() && !failed {
        return Ok(());
    }
    let mut out: Box<dyn Write> = if crate::out::quiet() {
        Box::new(crate::out::stderr())
    } else {
        Box::new(crate::out::stdout())
    };
    writeln!(
        out,
        "restored at {}: {} ({}), {} absent then, {} failed ({:.2} s)",
        r.at,
        crate::units::count(r.restored, "file", "files"),
        crate::units::bytes(r.bytes),
        r.absent,
        r.failed_count,
        r.seconds
    )?;
    for f in &r.failed {
        writeln!(
            out,
            "  failed {} {}: version {}: {}",
            printable(&f.path),
            printable(&f.uri),
            f.version.seq,
            printable(&f.error)
        )?;
    }
    for w in &r.warnings {
        writeln!(out, "  warning: {}", printable(w))?;
    }
    Ok(())
}
