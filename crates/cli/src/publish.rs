//! `resourcesync publish`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use resourcesync_source::layout::Layout;
use resourcesync_source::publish::sink::{BucketSink, DocSink};
use resourcesync_source::publish::{PublishOptions, PublishReport, publish_to};
use resourcesync_source::scan::{ScanOptions, ScanProgress, ScanReport};
use resourcesync_source::source::parse_algs;
use resourcesync_source::state::{Moved, Rotation};
use resourcesync_source::{BaseOrigin, Source, SourceConfig};
use serde_json::json;

use crate::EXIT_OK;
use crate::printable::printable;
use crate::units::{bytes, count};

/// Options that describe a Source (shared by `publish` and `serve`).
#[derive(Debug, Clone, Args)]
pub(crate) struct SourceArgs {
    /// The directory of resources; with --inventory, the working directory where documents
    /// and state are kept.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Publish the resources of another inventory instead of DIR's files:
    /// postgres://USER@HOST:PORT/DB?table=T, s3://…, oai-pmh:URL (see docs/inventories.md).
    #[arg(long, value_name = "SPEC")]
    pub inventory: Option<String>,
    /// The URL the directory is served at (resources map to BASE/relative/path).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The state database (default DIR/.resourcesync/state.sqlite).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// Move the Source to --base-url (for `serve`, by default, its listen address) when its
    /// state was published under another URL: every resource and the change history are
    /// carried over to the new URLs, and every document is written again under them.
    /// Destinations then sync from the new URL.
    #[arg(long = "move")]
    pub move_base: bool,
    /// Digests to publish, comma-separated: md5, sha-1, sha-256.
    #[arg(long = "hash", value_name = "ALGS", default_value = "md5")]
    pub hash: String,
    /// Leave out paths matching a glob (gitignore syntax); repeatable.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Publish dotfiles and dot-directories too.
    #[arg(long)]
    pub include_hidden: bool,
    /// Split documents into an index past this many entries (Sitemap limit: 50000).
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pub max_entries: usize,
    /// Close the open Change List after this many changes.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub changelist_max_entries: u64,
    /// Close the open Change List after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub changelist_max_age: i64,
    /// Earlier Resource Lists to keep in the Resource List Archive.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub keep_resource_lists: usize,
    /// Also offer a Resource Dump (ZIP packages of every resource) and Change Dumps (one per
    /// closed Change List).
    #[arg(long)]
    pub dumps: bool,
    /// Largest dump package, in bytes (uncompressed content).
    #[arg(long, value_name = "BYTES", default_value_t = resourcesync_source::dump::DEFAULT_MAX_BYTES)]
    pub dump_max_bytes: u64,
    /// Most files in one dump package (at most 50000; fewer per package means a re-publish
    /// rewrites fewer of them).
    #[arg(long, value_name = "N", default_value_t = resourcesync_source::dump::DEFAULT_MAX_FILES)]
    pub dump_max_files: usize,
    /// Keep the Resource Dump of an earlier snapshot while the resources changed since are at
    /// most this percentage of those it holds (the changes reach Destinations through the
    /// Change Lists and Change Dumps); past it, a new one is written. 0: a new Resource Dump
    /// for every snapshot.
    #[arg(long, value_name = "PERCENT", default_value_t = resourcesync_source::dump::DEFAULT_REBUILD_AFTER,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub dump_rebuild_after: u32,
}

impl SourceArgs {
    pub(crate) fn config(
        &self,
        out: Option<PathBuf>,
        default_base: Option<String>,
    ) -> anyhow::Result<SourceConfig> {
        let origin = if self.base_url.is_some() {
            BaseOrigin::Given
        } else {
            BaseOrigin::Listen
        };
        let base = self
            .base_url
            .clone()
            .or(default_base)
            .context("--base-url is required")?;
        crate::input::check_state_path(self.state.as_deref())?;
        let mut cfg = SourceConfig::new(&self.dir, &base);
        cfg.base_origin = origin;
        cfg.move_base = self.move_base;
        cfg.out = out;
        cfg.state = self.state.clone();
        cfg.excludes = self.exclude.clone();
        cfg.include_hidden = self.include_hidden;
        cfg.scan = ScanOptions {
            algs: parse_algs(&self.hash)?,
            rotation: Rotation {
                max_entries: self.changelist_max_entries.max(1),
                max_age_secs: self.changelist_max_age.max(1),
            },
            ..ScanOptions::default()
        };
        let split = resourcesync_model::writer::SplitLimits {
            max_entries: self.max_entries.clamp(1, 50_000),
            ..Default::default()
        };
        cfg.publish = PublishOptions {
            split,
            keep_resource_lists: self.keep_resource_lists,
            dumps: self.dumps,
            notifications: None,
            archive: None,
        };
        cfg.dump = resourcesync_source::dump::DumpOptions {
            max_bytes: self.dump_max_bytes.max(1),
            max_files: self.dump_max_files.clamp(1, 50_000),
            rebuild_after: self.dump_rebuild_after,
        };
        Ok(cfg)
    }
}

#[derive(Debug, Args)]
pub(crate) struct PublishArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// Where to write the documents (default: DIR itself, under DIR/resourcesync/ and
    /// DIR/.well-known/resourcesync), or a bucket:
    /// s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R (see docs/inventories.md).
    #[arg(long, value_name = "OUTDIR")]
    out: Option<PathBuf>,
    /// Print a JSON report.
    #[arg(long)]
    json: bool,
}

/// Opens the Source `cfg` describes: over its directory, or over the inventory `spec` (the
/// directory then its working directory, made when missing).
pub(crate) fn open_source(spec: Option<&str>, cfg: SourceConfig) -> anyhow::Result<Source> {
    Ok(match spec {
        None => Source::open(cfg)?,
        Some(spec) => {
            std::fs::create_dir_all(&cfg.dir)
                .with_context(|| format!("creating {}", cfg.dir.display()))?;
            {
                let inventory = resourcesync_source::inventory::open::open(spec, &cfg.dir)?;
                Source::open_with(cfg, inventory)?
            }
        }
    })
}

/// What a scan reads, as the summaries count it: a PostgreSQL inventory's rows, else files.
pub(crate) fn read_unit(spec: Option<&str>) -> (&'static str, &'static str) {
    match spec {
        Some(s) if s.starts_with("postgres://") || s.starts_with("postgresql://") => {
            ("row", "rows")
        }
        _ => ("file", "files"),
    }
}

/// Says that the Source moved to another base URL, and what it means for Destinations.
pub(crate) fn say_moved(m: &resourcesync_source::state::Moved, why: &str) {
    crate::out::say!("resourcesync: {}", moved_message(m, why));
}

/// The line of [`say_moved`], without the program's name (`serve` logs it).
pub(crate) fn moved_message(m: &resourcesync_source::state::Moved, why: &str) -> String {
    format!(
        "moved the Source from {} to {}{why}: {} and {} carried over; Destinations \
         following the old URL now sync from the new one",
        printable(&m.from),
        printable(&m.to),
        count(m.resources, "resource", "resources"),
        count(m.changes, "change", "changes"),
    )
}

/// `--out s3://…`: the bucket the documents go to. Refused with `--dumps` (dumps are written
/// as local files), and inside the `--inventory s3://…` prefix but not at it (the documents
/// would be listed as resources; at the prefix itself their places are left out).
fn bucket_out(a: &PublishArgs) -> anyhow::Result<Option<BucketSink>> {
    let Some(url) = a
        .out
        .as_ref()
        .and_then(|p| p.to_str())
        .filter(|s| s.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("s3://")))
    else {
        return Ok(None);
    };
    if a.source.dumps {
        anyhow::bail!("--dumps with --out s3://…: dump packages are written as local files only");
    }
    let sink = BucketSink::open(url)?;
    if let Some(spec) = a
        .source
        .inventory
        .as_deref()
        .filter(|s| s.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("s3://")))
    {
        let inv = resourcesync_source::inventory::S3Inventory::from_spec(spec)?;
        let (i, o) = (inv.bucket().config(), sink.bucket().config());
        if i.endpoint == o.endpoint
            && i.bucket == o.bucket
            && o.prefix.starts_with(&i.prefix)
            && o.prefix != i.prefix
        {
            anyhow::bail!(
                "--out {} is inside the inventory's prefix {}: the documents would be listed as \
                 resources. Publish them at the inventory's prefix itself (their places, \
                 resourcesync/ and .well-known/resourcesync, are not resources) or outside it",
                o.location(),
                i.location()
            );
        }
    }
    Ok(Some(sink))
}

pub(crate) fn run(a: &PublishArgs) -> anyhow::Result<u8> {
    let bucket = bucket_out(a)?;
    let dir_out = if bucket.is_some() {
        None
    } else {
        a.out.clone()
    };
    let mut cfg = a.source.config(dir_out, None)?;
    let progress = std::sync::Arc::new(ScanProgress::default());
    cfg.scan.progress = Some(progress.clone());
    let started = std::time::Instant::now();
    let mut source = open_source(a.source.inventory.as_deref(), cfg)?;
    if let Some(m) = source.moved() {
        say_moved(m, "");
    }
    // Drawn on a terminal once the work has taken two seconds (see crate::progress).
    let display = crate::progress::ScanDisplay::start(
        progress,
        format!("publish {}", a.source.dir.display()),
    );
    let scan = source.scan()?;
    display.writing();
    let (publish, layout) = publish_documents(&mut source, bucket.as_ref())?;
    display.finish();
    for s in &scan.skipped {
        crate::out::say!(
            "resourcesync: skipped {}: {}",
            printable(&s.path.display().to_string()),
            printable(&s.reason.to_string())
        );
    }
    let summary = Summary {
        scan: &scan,
        publish: &publish,
        layout: &layout,
        moved: source.moved(),
        unit: read_unit(a.source.inventory.as_deref()),
        secs: started.elapsed().as_secs_f64(),
    };
    let mut out = crate::out::stdout();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &summary.json())?;
        writeln!(out)?;
    } else if crate::out::quiet() {
        // -q: no summary (skipped files are said above, on standard error).
    } else {
        summary.say(&mut out)?;
    }
    Ok(EXIT_OK)
}

/// Writes the documents of the scanned Source: into its output directory, or into the bucket
/// of `--out s3://`. The report, and the layout the documents were written to.
fn publish_documents(
    source: &mut Source,
    bucket: Option<&BucketSink>,
) -> anyhow::Result<(PublishReport, Layout)> {
    Ok(match bucket {
        None => (source.publish()?, source.layout().clone()),
        Some(sink) => {
            // The documents' keys in the bucket are their paths under an output directory;
            // the layout's `out` names the bucket (what the published documents are recorded
            // against).
            let layout = Layout::new(PathBuf::from(sink.location()), &source.layout().base);
            if source.moved().is_some() {
                // As for a directory: the Resource Lists under the old URL go.
                sink.delete_prefix(&layout.doc_prefix("resourcelists/"))?;
            }
            let opts = source.config().publish.clone();
            (publish_to(sink, &layout, source.state(), &opts)?, layout)
        }
    })
}

/// What a `publish` run did, as it is reported.
struct Summary<'a> {
    scan: &'a ScanReport,
    publish: &'a PublishReport,
    layout: &'a Layout,
    moved: Option<&'a Moved>,
    /// What the scan read, singular and plural (files, objects, rows, records).
    unit: (&'static str, &'static str),
    secs: f64,
}

impl Summary<'_> {
    /// The report of `--json`.
    fn json(&self) -> serde_json::Value {
        let (scan, publish, layout) = (self.scan, self.publish, self.layout);
        json!({
            "resources": scan.resources,
            "baseline": scan.baseline,
            "created": scan.created,
            "updated": scan.updated,
            "deleted": scan.deleted,
            "hashed": scan.hashed,
            "bytes_hashed": scan.bytes_hashed,
            "bytes": scan.bytes,
            "skipped": scan.skipped.iter().map(|s| json!({"path": s.path.display().to_string(), "reason": s.reason})).collect::<Vec<_>>(),
            "resource_list_parts": publish.resource_list_parts,
            "change_lists": publish.change_lists,
            "documents_written": publish.written.len(),
            "source_description": layout.well_known_url(),
            "capability_list": layout.doc_url("capabilitylist.xml"),
            "out": layout.out.display().to_string(),
            "moved": self.moved.map(|m| json!({
                "from": m.from, "to": m.to, "resources": m.resources, "changes": m.changes,
            })),
            "seconds": self.secs,
        })
    }

    /// The text summary: what the scan found, what was written, where the Source is described.
    fn say(&self, out: &mut impl Write) -> std::io::Result<()> {
        let (scan, publish, layout, unit) = (self.scan, self.publish, self.layout, self.unit);
        // The first snapshot is the baseline: it records no changes (Z39.99-2017 §5.1, §7).
        let what = if scan.baseline {
            "baseline, the first snapshot: no changes recorded".to_owned()
        } else {
            format!(
                "{} created, {} updated, {} deleted",
                scan.created, scan.updated, scan.deleted
            )
        };
        writeln!(
            out,
            "{}, {} ({what}; {} read, {}) in {:.2} s",
            count(scan.resources, "resource", "resources"),
            bytes(scan.bytes),
            count(scan.hashed, unit.0, unit.1),
            bytes(scan.bytes_hashed),
            self.secs
        )?;
        writeln!(
            out,
            "Resource List in {}, {}; {} written under {}",
            count(publish.resource_list_parts as u64, "part", "parts"),
            count(publish.change_lists as u64, "Change List", "Change Lists"),
            count(publish.written.len() as u64, "document", "documents"),
            printable(&layout.out.display().to_string())
        )?;
        if crate::out::verbose() {
            for d in &publish.written {
                writeln!(out, "  {}", printable(&d.display().to_string()))?;
            }
        }
        writeln!(
            out,
            "Source Description: {}",
            printable(&layout.well_known_url())
        )?;
        if !scan.skipped.is_empty() {
            writeln!(
                out,
                "{} skipped (listed on stderr)",
                count(scan.skipped.len() as u64, unit.0, unit.1)
            )?;
        }
        Ok(())
    }
}
