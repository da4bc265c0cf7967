//! Steps 3 to 8 of the demo, against the running Source: explore, baseline, change the Source,
//! wait for its Change List, incremental sync, audit.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use resourcesync_destination::{
    AuditOptions, ExploreOptions, HttpOptions, Mode, Quiet, SyncReport, changes_since,
};
use resourcesync_model::W3cDateTime;
use serde_json::json;

use super::{Out, Step, dir_bytes, mode, sync_opts, uri, write};
use crate::explore::{plural, print_tree, summary};

/// The files the demo creates at the Source (step 5).
const CREATED: [&str; 2] = ["docs/guide/chapter-07 (draft).md", "data/2025/q1.csv"];
/// The file the demo updates at the Source.
const UPDATED: &str = "docs/notes/meeting notes 2024.txt";
/// The file the demo deletes at the Source.
const DELETED: &str = "images/pixel-03.bin";
/// The contents of the two created files and of the updated one.
const CONTENTS: [&[u8]; 3] = [
    b"# Chapter 7\n\nNot finished.\n",
    b"date,value\n2025-01-01,42\n",
    b"Agreed: publish a Change List.\nDone: it is published.\n",
];

/// Steps 3 to 8, against the running Source. Returns whether the final audit is clean.
pub(super) async fn run(
    out: &mut Out,
    src: &Path,
    dest: &Path,
    base: &str,
    files: &[(String, Vec<u8>)],
) -> anyhow::Result<bool> {
    explore(out, base).await?;
    let r = baseline(out, base, dest, files.len() as u64).await?;
    // What the Change List shows already: the changes that made the sample (their times may
    // follow the Resource List's `at`, §10.1, §12.1). The demo waits for what comes after them.
    let http = HttpOptions {
        retries: 1,
        ..Default::default()
    };
    let cursor: Option<W3cDateTime> = r.cursor.as_deref().and_then(|c| c.parse().ok());
    let since = changes_since(base, &http, cursor.as_ref())
        .await?
        .iter()
        .filter_map(|c| c.time)
        .chain(cursor)
        .max();
    change(out, src)?;
    wait_published(out, base, &http, since.as_ref()).await?;
    incremental(out, base, dest).await?;
    audit(out, base, dest).await
}

/// Step 3. Explore: the documents, each validated (short: a few parts per index).
async fn explore(out: &mut Out, base: &str) -> anyhow::Result<()> {
    let t = Instant::now();
    let mut eo = ExploreOptions::new(base);
    eo.max_parts = 3;
    eo.max_messages = 1;
    let ex = resourcesync_destination::explore(&eo, Arc::new(Quiet)).await?;
    let mut tree = Vec::new();
    for root in &ex.roots {
        print_tree(&mut tree, root, "", true, true, !ex.is_valid())?;
    }
    let tree: Vec<String> = String::from_utf8_lossy(&tree)
        .lines()
        .map(str::to_owned)
        .collect();
    out.step(
        Step {
            step: "explore",
            summary: if ex.is_valid() {
                format!(
                    "explored the Source's documents: {} read, all valid ({}, {})",
                    ex.documents,
                    plural(ex.errors, "error"),
                    plural(ex.warnings, "warning")
                )
            } else {
                format!("explored the Source's documents: {}", summary(&ex))
            },
            files: ex.documents,
            bytes: 0,
            seconds: t.elapsed().as_secs_f64(),
            ok: ex.is_valid(),
            details: json!({
                "documents": ex.documents,
                "valid": ex.valid,
                "invalid": ex.invalid,
                "unreadable": ex.unreadable,
                "errors": ex.errors,
                "warnings": ex.warnings,
            }),
        },
        &tree,
    )
}

/// Step 4. Baseline: the Destination from the Resource List (`sample` files expected).
async fn baseline(
    out: &mut Out,
    base: &str,
    dest: &Path,
    sample: u64,
) -> anyhow::Result<SyncReport> {
    let t = Instant::now();
    let r = resourcesync_destination::sync(&sync_opts(base, dest), Arc::new(Quiet)).await?;
    out.step(
        Step {
            step: "baseline",
            summary: format!(
                "synced a Destination ({}): {} created, {} failed; {}",
                mode(r.mode),
                plural(r.created, "file"),
                r.failed,
                crate::units::bytes(r.bytes)
            ),
            files: r.created,
            bytes: r.bytes,
            seconds: t.elapsed().as_secs_f64(),
            ok: r.failed == 0 && r.created == sample,
            details: json!({ "mode": r.mode, "created": r.created, "failed": r.failed, "cursor": r.cursor, "dir": dest.display().to_string() }),
        },
        &[format!("into {}", dest.display())],
    )?;
    Ok(r)
}

/// Step 5. Change the Source: create, update, delete.
fn change(out: &mut Out, src: &Path) -> anyhow::Result<()> {
    let t = Instant::now();
    write(src, CREATED[0], CONTENTS[0])?;
    write(src, CREATED[1], CONTENTS[1])?;
    write(src, UPDATED, CONTENTS[2])?;
    std::fs::remove_file(src.join(DELETED)).context("deleting a file")?;
    let changed_bytes: u64 = CONTENTS.iter().map(|c| c.len() as u64).sum();
    out.step(
        Step {
            step: "change",
            summary: format!(
                "changed the Source: created {} and {}, updated {UPDATED}, deleted {DELETED}",
                CREATED[0], CREATED[1]
            ),
            files: 4,
            bytes: changed_bytes,
            seconds: t.elapsed().as_secs_f64(),
            ok: true,
            details: json!({ "created": CREATED, "updated": [UPDATED], "deleted": [DELETED] }),
        },
        &[],
    )
}

/// Step 6. Wait until the Source's Change List shows the four changes (its watcher publishes
/// them).
async fn wait_published(
    out: &mut Out,
    base: &str,
    http: &HttpOptions,
    since: Option<&W3cDateTime>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let expect: Vec<(String, &str)> = vec![
        (uri(base, CREATED[0]), "created"),
        (uri(base, CREATED[1]), "created"),
        (uri(base, UPDATED), "updated"),
        (uri(base, DELETED), "deleted"),
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let seen = changes_since(base, http, since).await?;
        let all = expect
            .iter()
            .all(|(u, c)| seen.iter().any(|s| s.uri == *u && s.change == *c));
        if all {
            break seen;
        }
        if Instant::now() > deadline {
            bail!(
                "the Source's Change List did not show the changes within 60 s (it shows {} new)",
                crate::units::count(seen.len() as u64, "change", "changes")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    out.step(
        Step {
            step: "publish",
            summary: format!(
                "the Source noticed the changes: its Change List shows {}",
                plural(seen.len() as u64, "change")
            ),
            files: seen.len() as u64,
            bytes: 0,
            seconds: t.elapsed().as_secs_f64(),
            ok: true,
            details: json!({ "changes": seen }),
        },
        &seen
            .iter()
            .map(|s| format!("{:<8} {}", s.change, s.uri))
            .collect::<Vec<_>>(),
    )
}

/// Step 7. Incremental: the changes from the Change List (§12.1).
async fn incremental(out: &mut Out, base: &str, dest: &Path) -> anyhow::Result<()> {
    let t = Instant::now();
    let r = resourcesync_destination::sync(&sync_opts(base, dest), Arc::new(Quiet)).await?;
    out.step(
        Step {
            step: "incremental",
            summary: format!(
                "synced the changes ({}): {} created, {} updated, {} deleted, {} unchanged, {} failed; {}",
                mode(r.mode),
                r.created,
                r.updated,
                r.deleted,
                r.unchanged,
                r.failed,
                crate::units::bytes(r.bytes)
            ),
            files: r.created + r.updated + r.deleted,
            bytes: r.bytes,
            seconds: t.elapsed().as_secs_f64(),
            ok: r.failed == 0 && r.mode == Mode::Incremental,
            details: json!({ "mode": r.mode, "created": r.created, "updated": r.updated, "deleted": r.deleted, "failed": r.failed }),
        },
        &[],
    )
}

/// Step 8. Audit: every copy against the Source's current state (§5.2). Whether it is in sync.
async fn audit(out: &mut Out, base: &str, dest: &Path) -> anyhow::Result<bool> {
    let t = Instant::now();
    let au =
        resourcesync_destination::audit(&AuditOptions::new(base, dest), Arc::new(Quiet)).await?;
    let mut lines = Vec::new();
    for (what, list) in [
        ("missing", &au.missing),
        ("extra", &au.extra),
        ("different", &au.different),
    ] {
        for d in list.iter().take(10) {
            lines.push(format!(
                "{what} {}: {}",
                d.path.as_deref().unwrap_or(&d.uri),
                d.why
            ));
        }
    }
    let dest_bytes = dir_bytes(dest);
    out.step(
        Step {
            step: "audit",
            summary: format!(
                "{}: {} at the Source, {} in sync, {} missing, {} extra, {} different",
                if au.in_sync { "in sync" } else { "NOT in sync" },
                plural(au.resources, "resource"),
                au.in_sync_count,
                au.missing_count,
                au.extra_count,
                au.different_count
            ),
            files: au.resources,
            bytes: dest_bytes,
            seconds: t.elapsed().as_secs_f64(),
            ok: au.in_sync,
            details: json!({
                "in_sync": au.in_sync,
                "resources": au.resources,
                "missing": au.missing_count,
                "extra": au.extra_count,
                "different": au.different_count,
            }),
        },
        &lines,
    )?;
    Ok(au.in_sync)
}
