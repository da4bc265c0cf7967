//! `resourcesync explore URL`: the tree of a Source's documents, each validated (crate
//! `resourcesync-destination`, module `explore`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use resourcesync_destination::explore::{
    DEFAULT_MAX_DEPTH, DEFAULT_MAX_DOCUMENTS, DEFAULT_MAX_MESSAGES, DEFAULT_MAX_PARTS,
};
use resourcesync_destination::{
    ExploreNode, ExploreOptions, ExploreReport, HttpOptions, NodeStatus, Observer,
};

use crate::printable::printable;
use crate::{EXIT_DIFFERENCES, EXIT_OK};

#[derive(Debug, Clone, Args)]
pub(crate) struct ExploreArgs {
    /// Where to start: a site root, a page, or any ResourceSync document.
    #[arg(value_name = "URL")]
    url: String,
    /// Print the tree as JSON.
    #[arg(long)]
    json: bool,
    /// Most parts of an index (packages of a dump, entries of an archive) read per document;
    /// the rest are counted.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_PARTS)]
    max_parts: usize,
    /// Most documents read.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DOCUMENTS)]
    max_documents: usize,
    /// Deepest level followed (the first document is level 0).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    max_depth: usize,
    /// Findings quoted per document.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_MESSAGES)]
    messages: usize,
    /// A bearer token, sent to the host of URL only.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Seconds without data before a request is abandoned (then retried).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    timeout: u64,
    /// Retries of a request after connection errors, timeouts, 429 and 5xx.
    #[arg(long, value_name = "N", default_value_t = 2)]
    retries: u32,
    /// Time limit for the whole run, in seconds.
    #[arg(long, value_name = "SECONDS")]
    max_time: Option<u64>,
}

impl ExploreArgs {
    fn options(&self) -> ExploreOptions {
        let mut o = ExploreOptions::new(&self.url);
        o.http = HttpOptions {
            read_timeout: Duration::from_secs(self.timeout.max(1)),
            retries: self.retries,
            token: self.token.clone(),
            proxy: resourcesync_destination::http::Proxy::FromEnvironment,
            ..HttpOptions::default()
        };
        o.max_parts = self.max_parts;
        o.max_documents = self.max_documents.max(1);
        o.max_depth = self.max_depth;
        // -v: every finding.
        o.max_messages = if crate::out::verbose() {
            usize::MAX
        } else {
            self.messages
        };
        o.deadline = self.max_time.map(Duration::from_secs);
        o
    }
}

/// A spinner counting documents, on a terminal only.
pub(crate) struct Spinner(ProgressBar);

impl Spinner {
    pub(crate) fn new(show: bool) -> Self {
        if !show {
            return Spinner(ProgressBar::hidden());
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} {pos} documents")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        Spinner(pb)
    }

    pub(crate) fn clear(&self) {
        self.0.finish_and_clear();
    }
}

impl Observer for Spinner {
    fn phase(&self, what: &str) {
        self.0.set_message(what.to_owned());
    }
    fn resource_done(&self) {
        self.0.inc(1);
    }
}

pub(crate) fn plural(n: u64, one: &str) -> String {
    match (n, one.strip_suffix('y')) {
        (1, _) => format!("{n} {one}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {one}s"),
    }
}

/// The one-line description of a node: figures, time span, validity.
fn details(n: &ExploreNode) -> String {
    let mut parts: Vec<String> = Vec::new();
    match n.status {
        NodeStatus::Package => {
            if let Some(b) = n.bytes {
                parts.push(format!("{b} bytes"));
            }
        }
        _ => {
            if let Some(e) = n.entries {
                parts.push(plural(e, "entry"));
            }
        }
    }
    for (name, v) in [
        ("at", n.at),
        ("completed", n.completed),
        ("from", n.from),
        ("until", n.until),
    ] {
        if let Some(v) = v {
            parts.push(format!("{name} {v}"));
        }
    }
    if let Some(s) = n.span {
        if s.first == s.last {
            parts.push(format!("entries at {}", s.first));
        } else {
            parts.push(format!("entries {} .. {}", s.first, s.last));
        }
    }
    let verdict = match n.status {
        NodeStatus::Valid if n.warnings == 0 => "valid".to_owned(),
        NodeStatus::Valid => format!("valid, {}", plural(n.warnings, "warning")),
        NodeStatus::Invalid => format!(
            "INVALID: {}, {}",
            plural(n.errors, "error"),
            plural(n.warnings, "warning")
        ),
        NodeStatus::Unreadable => "UNREADABLE".to_owned(),
        NodeStatus::Repeated => "shown above".to_owned(),
        NodeStatus::Skipped => "not read".to_owned(),
        NodeStatus::Package => "package, not fetched".to_owned(),
    };
    parts.push(verdict);
    if n.more > 0 {
        parts.push(format!("{} more not followed (--max-parts)", n.more));
    }
    parts.join("; ")
}

/// Prints a tree: each node on one line (`kind  URL`), its details on the next, its first
/// findings below. `messages` false leaves the findings out.
pub(crate) fn print_tree(
    out: &mut impl Write,
    n: &ExploreNode,
    prefix: &str,
    last: bool,
    top: bool,
    messages: bool,
) -> std::io::Result<()> {
    let (branch, cont) = match (top, last) {
        (true, _) => ("", ""),
        (false, false) => ("├─ ", "│  "),
        (false, true) => ("└─ ", "   "),
    };
    let via = match n.via {
        "start" | "entry" | "part" | "package" => String::new(),
        v => format!(" ({v})"),
    };
    writeln!(
        out,
        "{prefix}{branch}{}{via}  {}",
        n.kind,
        printable(&n.url)
    )?;
    let inner = format!("{prefix}{cont}");
    let bar = if n.children.is_empty() { "  " } else { "│ " };
    writeln!(out, "{inner}{bar}{}", printable(&details(n)))?;
    if messages {
        for m in &n.messages {
            writeln!(out, "{inner}{bar}  ! {}", printable(m))?;
        }
    }
    let count = n.children.len();
    for (i, c) in n.children.iter().enumerate() {
        print_tree(out, c, &inner, i + 1 == count, false, messages)?;
    }
    Ok(())
}

/// The summary line.
pub(crate) fn summary(r: &ExploreReport) -> String {
    format!(
        "{}: {} read, {} valid, {} invalid, {} unreadable; {}, {} ({:.2} s)",
        if r.is_valid() { "valid" } else { "INVALID" },
        plural(r.documents, "document"),
        r.valid,
        r.invalid,
        r.unreadable,
        plural(r.errors, "error"),
        plural(r.warnings, "warning"),
        r.seconds
    )
}

pub(crate) fn print_report(
    out: &mut impl Write,
    r: &ExploreReport,
    messages: bool,
) -> std::io::Result<()> {
    for root in &r.roots {
        print_tree(out, root, "", true, true, messages)?;
    }
    for n in &r.notes {
        writeln!(out, "note: {}", printable(n))?;
    }
    writeln!(out, "{}", summary(r))
}

pub(crate) fn run(a: &ExploreArgs) -> anyhow::Result<u8> {
    crate::input::check_url(&a.url)?;
    let o = a.options();
    let spinner = Arc::new(Spinner::new(crate::out::progress_allowed() && !a.json));
    let rt = crate::rt::runtime()?;
    let s: Arc<dyn resourcesync_destination::Observer> = spinner.clone();
    let report = crate::rt::block_on(&rt, async move {
        resourcesync_destination::explore(&o, s).await
    });
    spinner.clear();
    let report = report?;
    let mut out = crate::out::stdout();
    if a.json {
        // Rendered first, so that a closed pipe is an I/O error (quietly ignored by main).
        let text = serde_json::to_string_pretty(&report)?;
        writeln!(out, "{text}")?;
    } else {
        print_report(&mut out, &report, true)?;
    }
    Ok(if report.is_valid() {
        EXIT_OK
    } else {
        EXIT_DIFFERENCES
    })
}
