//! `resourcesync demo`: the whole job on one machine, with nothing to set up. A sample Source is
//! created in a temporary directory and served in-process on 127.0.0.1 (an ephemeral port); it is
//! explored, a Destination is synced (baseline, Z39.99-2014 §5.2, §10.1), the Source changes, the
//! demo waits until the Source's Change List shows the changes (§12.1), syncs incrementally and
//! audits. Each step prints what it did, with figures; the exit status is 0 only when the final
//! audit finds the copy in sync.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use resourcesync_destination::{Mode, SyncOptions};
use resourcesync_source::server::{self, ServeOptions};
use resourcesync_source::watch::WatchOptions;
use resourcesync_source::{Source, SourceConfig};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{EXIT_DIFFERENCES, EXIT_OK};

mod steps;

#[derive(Debug, Clone, Args)]
pub(crate) struct DemoArgs {
    /// Keep the Source and the Destination, in DIR/source and DIR/destination (DIR is created;
    /// those two must not exist or be empty), and print their paths.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Print a JSON report of the steps instead of text.
    #[arg(long)]
    json: bool,
}

/// One step of the demo.
#[derive(Debug, Serialize)]
struct Step {
    /// A short name: source, serve, explore, baseline, change, publish, incremental, audit.
    step: &'static str,
    /// What it did, in a sentence.
    summary: String,
    /// Files concerned.
    files: u64,
    /// Bytes concerned.
    bytes: u64,
    /// Seconds taken.
    seconds: f64,
    /// Whether it went as expected.
    ok: bool,
    /// The figures behind the summary.
    details: Value,
}

#[derive(Debug, Serialize)]
struct DemoReport {
    /// Whether the final audit found the copy in sync.
    ok: bool,
    /// Where the Source was served.
    url: String,
    /// The Source directory.
    source_dir: String,
    /// The Destination directory.
    destination_dir: String,
    /// Whether the two directories are kept (`--keep`).
    kept: bool,
    steps: Vec<Step>,
    seconds: f64,
}

/// A directory removed on drop (unless kept).
struct WorkDir {
    path: PathBuf,
    remove: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

fn work_dir(keep: Option<&Path>) -> anyhow::Result<WorkDir> {
    if let Some(dir) = keep {
        for sub in ["source", "destination"] {
            let p = dir.join(sub);
            if p.exists()
                && std::fs::read_dir(&p)
                    .with_context(|| format!("reading {}", p.display()))?
                    .next()
                    .is_some()
            {
                bail!(
                    "{} exists and is not empty: choose another --keep DIR",
                    p.display()
                );
            }
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir
            .canonicalize()
            .with_context(|| format!("resolving {}", dir.display()))?;
        return Ok(WorkDir {
            path,
            remove: false,
        });
    }
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let path = base.join(format!(
        "resourcesync-demo-{}-{nanos:08x}",
        std::process::id()
    ));
    std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(WorkDir { path, remove: true })
}

/// Deterministic bytes (a linear congruential generator): binary content that does not compress
/// to nothing.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

/// The sample Source: nested folders, text and binary files, a name with a space and names
/// outside ASCII.
fn sample_files() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = vec![(
        "README.txt".into(),
        b"A sample ResourceSync Source, made by `resourcesync demo`.\n".to_vec(),
    )];
    for i in 1..=6 {
        let text = format!("# Chapter {i}\n\n")
            + &"Resources change; Destinations follow.\n".repeat(20 * i);
        v.push((format!("docs/guide/chapter-{i:02}.md"), text.into_bytes()));
    }
    v.push((
        "docs/notes/meeting notes 2024.txt".into(),
        b"Agreed: publish a Change List.\n".to_vec(),
    ));
    v.push((
        "docs/résumé naïve.txt".into(),
        "Un résumé, naïvement accentué.\n".as_bytes().to_vec(),
    ));
    v.push((
        "données/été/température.csv".into(),
        "jour,°C\n1,21\n2,23\n".as_bytes().to_vec(),
    ));
    for (y, q) in [2023, 2024]
        .iter()
        .flat_map(|y| (1..=4).map(move |q| (*y, q)))
    {
        let rows: String = (1..=30)
            .map(|d| format!("{y}-{:02}-{d:02},{}\n", q * 3, (d * 37 + q * 11) % 100))
            .collect();
        v.push((
            format!("data/{y}/q{q}.csv"),
            format!("date,value\n{rows}").into_bytes(),
        ));
    }
    for i in 1..=8u64 {
        v.push((
            format!("images/pixel-{i:02}.bin"),
            noise(i, 1024 * (i as usize) * 2),
        ));
    }
    for i in 1..=10 {
        v.push((
            format!("src/lib/module_{i:02}.rs"),
            format!("//! Module {i}.\n\npub fn value() -> u32 {{\n    {i}\n}}\n").into_bytes(),
        ));
    }
    v.push(("archive/large.bin".into(), noise(99, 256 * 1024)));
    v
}

fn write(root: &Path, rel: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&p, bytes).with_context(|| format!("writing {}", p.display()))
}

/// Prints as the steps go (text mode), or collects them (JSON).
struct Out {
    json: bool,
    steps: Vec<Step>,
}

impl Out {
    fn step(&mut self, s: Step, extra: &[String]) -> anyhow::Result<()> {
        // -q: the steps go unsaid; only a failure is.
        if !self.json && !crate::out::quiet() {
            let mut out = crate::out::stdout();
            writeln!(
                out,
                "{}. {:<12} {} ({:.2} s)",
                self.steps.len() + 1,
                s.step,
                s.summary,
                s.seconds
            )?;
            for line in extra {
                writeln!(out, "   {line}")?;
            }
            out.flush()?;
        }
        self.steps.push(s);
        Ok(())
    }
}

fn sync_opts(url: &str, dest: &Path) -> SyncOptions {
    let mut o = SyncOptions::new(url, dest);
    o.delete = true;
    o.concurrency = 8;
    o.http.retries = 2;
    o
}

fn mode(m: Mode) -> &'static str {
    crate::printable::mode_name(m)
}

pub(crate) fn run(a: &DemoArgs) -> anyhow::Result<u8> {
    let work = work_dir(a.keep.as_deref())?;
    let rt = crate::rt::runtime()?;
    let (args, path) = (a.clone(), work.path.clone());
    let result = crate::rt::block_on(&rt, async move { demo(&args, &path).await });
    rt.shutdown_timeout(Duration::from_secs(5));
    result
}

async fn demo(a: &DemoArgs, work: &Path) -> anyhow::Result<u8> {
    let started = Instant::now();
    let src = work.join("source");
    let dest = work.join("destination");
    let mut out = Out {
        json: a.json,
        steps: Vec::new(),
    };
    if !a.json && !crate::out::quiet() {
        crate::out::say_out!(
            "resourcesync demo: a Source and a Destination on this machine, over 127.0.0.1\n"
        );
    }
    let files = make_source(&mut out, &src)?;
    let (running, base) = serve_source(&mut out, &src, &files).await?;
    let result = steps::run(&mut out, &src, &dest, &base, &files).await;
    let stopped = running.shutdown().await;
    let ok = result?;
    stopped?;

    let r = DemoReport {
        ok,
        url: base,
        source_dir: src.display().to_string(),
        destination_dir: dest.display().to_string(),
        kept: a.keep.is_some(),
        steps: out.steps,
        seconds: started.elapsed().as_secs_f64(),
    };
    if a.json {
        let text = serde_json::to_string_pretty(&r)?;
        crate::out::say_out!("{text}");
    } else {
        say_outcome(&r);
    }
    Ok(if ok { EXIT_OK } else { EXIT_DIFFERENCES })
}

/// Step 1: a sample Source written under `src`; its files.
fn make_source(out: &mut Out, src: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let t = Instant::now();
    let files = sample_files();
    for (rel, bytes) in &files {
        write(src, rel, bytes)?;
    }
    let total_bytes = files_bytes(&files);
    let folders: std::collections::BTreeSet<&str> = files
        .iter()
        .filter_map(|(p, _)| p.rsplit_once('/').map(|(d, _)| d))
        .collect();
    out.step(
        Step {
            step: "source",
            summary: format!(
                "created a sample Source: {}, {}, in {}",
                crate::units::count(files.len() as u64, "file", "files"),
                crate::units::bytes(total_bytes),
                crate::units::count(folders.len() as u64, "folder", "folders")
            ),
            files: files.len() as u64,
            bytes: total_bytes,
            seconds: t.elapsed().as_secs_f64(),
            ok: true,
            details: json!({ "dir": src.display().to_string() }),
        },
        &[format!("at {}", src.display())],
    )?;
    Ok(files)
}

/// Bytes of the sample files.
fn files_bytes(files: &[(String, Vec<u8>)]) -> u64 {
    files.iter().map(|(_, b)| b.len() as u64).sum()
}

/// Step 2: `src` served in-process on an ephemeral loopback port; the server and its base URL.
async fn serve_source(
    out: &mut Out,
    src: &Path,
    files: &[(String, Vec<u8>)],
) -> anyhow::Result<(server::Running, String)> {
    let t = Instant::now();
    let listener = server::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let base = format!("http://{addr}/");
    let mut cfg = SourceConfig::new(src, &base);
    server::prepare_config(&mut cfg);
    let source = tokio::task::spawn_blocking(move || Source::open(cfg)).await??;
    let opts = ServeOptions {
        watch: WatchOptions {
            // The file-system watcher notices changes; the rescan is the safety net where it
            // cannot (Change Lists are republished after every batch, §12.1).
            rescan_interval: Duration::from_secs(2),
            ..WatchOptions::default()
        },
        ..ServeOptions::default()
    };
    let running = server::start(source, listener, opts).await?;
    let well_known = running.source_description_url().to_owned();
    out.step(
        Step {
            step: "serve",
            summary: format!("serving the Source at {base}"),
            files: files.len() as u64,
            bytes: files_bytes(files),
            seconds: t.elapsed().as_secs_f64(),
            ok: true,
            details: json!({ "url": base, "source_description": well_known }),
        },
        &[format!("Source Description: {well_known}")],
    )?;
    Ok((running, base))
}

/// The closing lines of the text output: where the directories were kept, and the outcome.
fn say_outcome(r: &DemoReport) {
    if !crate::out::quiet() {
        crate::out::say_stdout(format_args!(""));
    }
    if r.kept {
        crate::out::say_out!("kept: Source in {}", r.source_dir);
        crate::out::say_out!("      Destination in {}", r.destination_dir);
    }
    if r.ok {
        if !crate::out::quiet() {
            crate::out::say_out!(
                "demo succeeded: the Destination is in sync with the Source, in {:.2} s",
                r.seconds
            );
        }
    } else {
        crate::out::say_out!("demo FAILED: the final audit found differences");
    }
}

/// The URI the Source publishes for a relative path.
fn uri(base: &str, rel: &str) -> String {
    resourcesync_source::uri::path_to_uri(base, Path::new(rel)).unwrap_or_default()
}

/// Bytes of the files under a directory, its `.resourcesync` folder left out.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_name() == ".resourcesync" {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => total += e.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}
