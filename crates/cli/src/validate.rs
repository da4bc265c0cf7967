//! `resourcesync validate` and `resourcesync inspect`.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use resourcesync_model::document::Header;
use resourcesync_model::validate::{Report, validate};
use resourcesync_model::{DocumentReader, Error, ReadOptions, Severity, rules};
use serde_json::{Value, json};

use crate::printable::printable;
use crate::units::count;
use crate::{EXIT_DIFFERENCES, EXIT_ERROR, EXIT_OK, input};

/// Options shared by the commands that read documents.
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// Largest document accepted, in bytes after decompression.
    #[arg(long, value_name = "BYTES", default_value_t = ReadOptions::default().max_document_bytes)]
    max_bytes: u64,
    /// Timeout for fetching a URL, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    timeout: u64,
}

#[derive(Debug, Args)]
pub(crate) struct ValidateArgs {
    /// Documents: paths, http(s) URLs, or - for standard input. Gzip is detected.
    #[arg(value_name = "FILE|URL", required_unless_present = "rules")]
    inputs: Vec<String>,
    /// Print a JSON report instead of text.
    #[arg(long)]
    json: bool,
    /// List every rule with its id, severity and section, and exit.
    #[arg(long)]
    rules: bool,
    /// Most findings reported per document (the rest are counted).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_findings: usize,
    #[command(flatten)]
    read: ReadArgs,
}

#[derive(Debug, Args)]
pub(crate) struct InspectArgs {
    /// Document: a path, an http(s) URL, or - for standard input.
    #[arg(value_name = "FILE|URL")]
    input: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    read: ReadArgs,
}

enum Outcome {
    Report(Report),
    /// The document could be read but is not acceptable (malformed, refused, not a Sitemap).
    Rejected(Error),
    /// It could not be read at all.
    Unreadable(String),
}

fn check(spec: &str, read: &ReadArgs, max_findings: usize) -> Outcome {
    let input = match input::open(spec, Duration::from_secs(read.timeout)) {
        Ok(i) => i,
        Err(e) => return Outcome::Unreadable(format!("{e:#}")),
    };
    let opts = ReadOptions {
        max_document_bytes: read.max_bytes,
        max_findings,
        ..ReadOptions::named(spec)
    };
    match DocumentReader::open(input, opts).and_then(validate) {
        Ok(r) => Outcome::Report(r),
        Err(e) if e.is_invalid_input() => Outcome::Rejected(e),
        Err(e) => Outcome::Unreadable(e.to_string()),
    }
}

fn findings_json(r: &Report, quiet: bool) -> Vec<Value> {
    r.findings
        .as_slice()
        .iter()
        .filter(|f| !quiet || f.severity() == Severity::Error)
        .map(|f| {
            json!({
                "line": f.position.line,
                "column": f.position.column,
                "severity": f.severity(),
                "rule": f.rule.id,
                "section": f.rule.section,
                "message": f.message,
            })
        })
        .collect()
}

fn report_json(r: &Report) -> Value {
    json!({
        "kind": r.kind,
        "root": r.root,
        "capability": r.capability.as_ref().map(|c| c.as_str()),
        "entries": r.entries,
        "bytes": r.bytes,
        "time_span": r.time_span.map(|(a, b)| json!({"from": a.to_string(), "until": b.to_string()})),
        "digests": r.digests.iter().map(|(a, n)| json!({"algorithm": a, "entries": n})).collect::<Vec<_>>(),
        "changes": r.changes.iter().map(|(c, n)| json!({"change": c, "entries": n})).collect::<Vec<_>>(),
    })
}

pub(crate) fn run_validate(a: &ValidateArgs) -> anyhow::Result<u8> {
    let mut out = crate::out::stdout();
    if a.rules {
        write_rules(&mut out, a.json)?;
        return Ok(EXIT_OK);
    }
    let mut worst = EXIT_OK;
    let mut docs = Vec::new();
    for spec in &a.inputs {
        match check(spec, &a.read, a.max_findings) {
            Outcome::Report(r) => {
                if !r.is_valid() {
                    worst = worst.max(EXIT_DIFFERENCES);
                }
                if a.json {
                    docs.push(validated_json(spec, &r));
                } else {
                    write_validated(&mut out, spec, &r)?;
                }
            }
            Outcome::Rejected(e) => {
                worst = worst.max(EXIT_DIFFERENCES);
                if a.json {
                    docs.push(rejected_json(spec, &e));
                } else {
                    writeln!(out, "{}", printable(&e.to_string()))?;
                    writeln!(
                        out,
                        "{spec}: invalid (not readable as a ResourceSync document)"
                    )?;
                }
            }
            Outcome::Unreadable(msg) => {
                worst = EXIT_ERROR;
                if a.json {
                    docs.push(json!({"name": spec, "valid": false, "unreadable": msg}));
                } else {
                    crate::out::say!("resourcesync: {spec}: {}", printable(&msg));
                }
            }
        }
    }
    if a.json {
        let all_valid = worst == EXIT_OK;
        serde_json::to_writer_pretty(&mut out, &json!({"valid": all_valid, "documents": docs}))?;
        writeln!(out)?;
    }
    Ok(worst)
}

/// `validate --rules`: every rule, as JSON or a line each.
fn write_rules(out: &mut impl Write, json: bool) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, rules::ALL)?;
        writeln!(out)?;
    } else {
        for r in rules::ALL {
            writeln!(
                out,
                "{:<34} {:<7} {}  [{}]",
                r.id, r.severity, r.summary, r.section
            )?;
        }
    }
    Ok(())
}

/// The JSON of a document validated, named `spec`.
fn validated_json(spec: &str, r: &Report) -> Value {
    let mut d = report_json(r);
    d["name"] = json!(spec);
    d["valid"] = json!(r.is_valid());
    d["errors"] = json!(r.findings.error_count());
    d["warnings"] = json!(r.findings.warning_count());
    d["findings_not_shown"] = json!(r.findings.dropped());
    d["findings"] = json!(findings_json(r, crate::out::quiet()));
    d
}

/// A document validated, as text: a line per finding (errors only with -q), then its verdict.
fn write_validated(out: &mut impl Write, spec: &str, r: &Report) -> std::io::Result<()> {
    for f in r.findings.as_slice() {
        if crate::out::quiet() && f.severity() != Severity::Error {
            continue;
        }
        writeln!(
            out,
            "{spec}:{}:{}: {}[{}]: {} ({})",
            f.position.line,
            f.position.column,
            f.severity(),
            f.rule.id,
            printable(&f.message),
            f.rule.section
        )?;
    }
    if r.findings.dropped() > 0 {
        writeln!(
            out,
            "{spec}: {} not shown",
            count(r.findings.dropped(), "more finding", "more findings")
        )?;
    }
    writeln!(
        out,
        "{spec}: {} ({}, {}, {}, {})",
        if r.is_valid() { "valid" } else { "invalid" },
        r.kind,
        count(r.entries, "entry", "entries"),
        count(r.findings.error_count(), "error", "errors"),
        count(r.findings.warning_count(), "warning", "warnings")
    )
}

/// The JSON of a document not readable as a ResourceSync document: one error, its rule.
fn rejected_json(spec: &str, e: &Error) -> Value {
    let pos = e.position().unwrap_or_default();
    json!({
        "name": spec,
        "valid": false,
        "errors": 1,
        "warnings": 0,
        "findings": [{
            "line": pos.line,
            "column": pos.column,
            "severity": "error",
            "rule": e.rule(),
            "section": rules::by_id(e.rule()).map(|r| r.section),
            "message": e.to_string(),
        }],
    })
}

/// The exit status of a document `inspect` could not read or validate.
fn unread_exit(e: &Error) -> u8 {
    crate::out::say!("{e}");
    if e.is_invalid_input() {
        EXIT_DIFFERENCES
    } else {
        EXIT_ERROR
    }
}

pub(crate) fn run_inspect(a: &InspectArgs) -> anyhow::Result<u8> {
    let mut out = crate::out::stdout();
    let input = input::open(&a.input, Duration::from_secs(a.read.timeout))?;
    let opts = ReadOptions {
        max_document_bytes: a.read.max_bytes,
        ..ReadOptions::named(&a.input)
    };
    let reader = match DocumentReader::open(input, opts) {
        Ok(r) => r,
        Err(e) => return Ok(unread_exit(&e)),
    };
    let header = reader.header().clone();
    let r = match validate(reader) {
        Ok(r) => r,
        Err(e) => return Ok(unread_exit(&e)),
    };
    if a.json {
        serde_json::to_writer_pretty(&mut out, &inspected_json(&a.input, &r, &header))?;
        writeln!(out)?;
    } else {
        write_inspected(&mut out, &a.input, &r, &header)?;
    }
    Ok(if r.is_valid() {
        EXIT_OK
    } else {
        EXIT_DIFFERENCES
    })
}

/// The JSON of `inspect`: the report, the document's metadata and links.
fn inspected_json(input: &str, r: &Report, header: &Header) -> Value {
    let md = header.md.clone().unwrap_or_default();
    let links: Vec<Value> = header
        .links
        .iter()
        .map(|l| json!({"rel": l.rel, "href": l.href}))
        .collect();
    let mut d = report_json(r);
    d["name"] = json!(input);
    d["valid"] = json!(r.is_valid());
    d["errors"] = json!(r.findings.error_count());
    d["warnings"] = json!(r.findings.warning_count());
    d["at"] = json!(md.at.map(|v| v.to_string()));
    d["completed"] = json!(md.completed.map(|v| v.to_string()));
    d["from"] = json!(md.from.map(|v| v.to_string()));
    d["until"] = json!(md.until.map(|v| v.to_string()));
    d["links"] = json!(links);
    d
}

/// `inspect` as text: a line per fact about the document.
fn write_inspected(
    out: &mut impl Write,
    input: &str,
    r: &Report,
    header: &Header,
) -> std::io::Result<()> {
    let md = header.md.clone().unwrap_or_default();
    writeln!(out, "document:   {input}")?;
    writeln!(out, "kind:       {} (<{}>)", r.kind, r.root.element())?;
    for (name, v) in [
        ("at", md.at),
        ("completed", md.completed),
        ("from", md.from),
        ("until", md.until),
    ] {
        if let Some(v) = v {
            writeln!(out, "{name:<11} {v}")?;
        }
    }
    for l in &header.links {
        writeln!(out, "link:       {} -> {}", l.rel, l.href)?;
    }
    writeln!(out, "entries:    {}", r.entries)?;
    writeln!(out, "bytes:      {}", r.bytes)?;
    match r.time_span {
        Some((a, b)) => writeln!(out, "time span:  {a} .. {b}")?,
        None => writeln!(out, "time span:  (no entry times)")?,
    }
    if r.digests.is_empty() {
        writeln!(out, "digests:    none")?;
    } else {
        let d: Vec<String> = r
            .digests
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        writeln!(out, "digests:    {}", d.join(", "))?;
    }
    if !r.changes.is_empty() {
        let c: Vec<String> = r
            .changes
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        writeln!(out, "changes:    {}", c.join(", "))?;
    }
    writeln!(
        out,
        "validity:   {} ({}, {}; run `resourcesync validate` for details)",
        if r.is_valid() { "valid" } else { "invalid" },
        count(r.findings.error_count(), "error", "errors"),
        count(r.findings.warning_count(), "warning", "warnings")
    )
}
