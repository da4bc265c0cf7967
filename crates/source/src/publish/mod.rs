//! Writing every capability document from the state: Source Description, Capability List,
//! Resource List (split into an index past the limits), Change Lists (one per period, grouped in a
//! Change List Index; the open one also as the Change List the Capability List names), the
//! archives, and a page for people.
//!
//! Every document goes through the model crate's writer and is written durably; documents that
//! cannot have changed (closed Change Lists, the Resource List of an unchanged snapshot) are not
//! written again.

pub mod channels;
pub mod dump;
pub mod layout;
pub mod page;
pub mod sink;

use std::path::PathBuf;

use resourcesync_model::path::RelPath;
use resourcesync_model::writer::{SplitLimits, SplitSummary, SplitWriter};
use resourcesync_model::{
    Capability, DocumentWriter, Entry, Header, Link, Metadata, Root, W3cDateTime,
};

use crate::error::{Error, Result};
use crate::publish::layout::{Layout, WELL_KNOWN_KEY};
use crate::publish::sink::{DirSink, DocSink, SinkParts};
use crate::state::{ChangeRecord, Period, Resource, State};

/// How to publish.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// When to split documents into an index (default: the Sitemap limits).
    pub split: SplitLimits,
    /// Earlier Resource Lists kept and listed in the Resource List Archive.
    pub keep_resource_lists: usize,
    /// Whether a Resource Dump and Change Dumps are offered (written by [`crate::publish::dump`]).
    pub dumps: bool,
    /// Notification channels advertised in the Capability List (Change Notification 1.0.1 §5,
    /// Framework Notification 1.0.1 §5).
    pub notifications: Option<channels::Channels>,
    /// The Memento archive of the resources' originals (RFC 7089), when there is one: the
    /// base of its URL space (`BASE/memento/NAME/`, the aggregator's). Each entry of the
    /// Resource Lists and Change Lists with a `via` link (a republished resource, Z39.99-2014
    /// §14.8) then also links its original's TimeMap and its memento ([`archive_links`]).
    pub archive: Option<String>,
}

impl Default for PublishOptions {
    fn default() -> Self {
        PublishOptions {
            split: SplitLimits::default(),
            keep_resource_lists: 5,
            dumps: false,
            notifications: None,
            archive: None,
        }
    }
}

/// What was published.
#[derive(Debug, Clone, Default)]
pub struct PublishReport {
    /// Resources in the Resource List.
    pub resources: u64,
    /// Parts of the Resource List (1 when not split).
    pub resource_list_parts: usize,
    /// Change Lists (periods).
    pub change_lists: usize,
    /// Documents written this time.
    pub written: Vec<PathBuf>,
}

/// Name of the Resource List of a snapshot (relative to the documents folder, without `.xml`).
pub fn resource_list_name(snapshot: i64) -> String {
    format!("resourcelists/{snapshot:06}/resourcelist")
}

/// What the Capability List names as the Change List (relative to the documents folder): the
/// open Change List while it fits in one document, the Change List Index otherwise.
pub const CHANGE_LIST: &str = "changelist.xml";

/// The Change List Index, of every period's Change List (relative to the documents folder).
pub const CHANGE_LIST_INDEX: &str = "changelist-index.xml";

/// The open period's Change List as published at [`CHANGE_LIST`], when it fits in one
/// document under `split`; `None` when there is no open period or it does not fit.
fn open_change_list(
    layout: &Layout,
    state: &State,
    periods: &[Period],
    split: &SplitLimits,
    archive: Option<&str>,
) -> Result<Option<Vec<u8>>> {
    let Some(open) = periods.last().filter(|p| p.until.is_none()) else {
        return Ok(None);
    };
    if usize::try_from(open.count).map_or(true, |n| n > split.max_entries) {
        return Ok(None);
    }
    let mut md = Metadata::with_capability(Capability::ChangeList);
    md.from = Some(open.from);
    let mut header = Header::new(Root::UrlSet, md);
    header.links.push(up(layout));
    header
        .links
        .push(Link::new("index", layout.doc_url(CHANGE_LIST_INDEX)));
    header.links.push(Link::new(
        "archives",
        layout.doc_url("changelist-archive.xml"),
    ));
    let mut w = DocumentWriter::new(Vec::new(), CHANGE_LIST, &header)?;
    let mut entries = 0usize;
    let mut too_big = false;
    state.for_each_change(open.id, |c| {
        entries += 1;
        if entries > split.max_entries {
            too_big = true;
        } else if !too_big {
            w.write_entry(&in_archive(change_entry(&c), archive))?;
        }
        Ok(())
    })?;
    let bytes = w.finish()?;
    if too_big || bytes.len() as u64 > split.max_bytes {
        return Ok(None);
    }
    Ok(Some(bytes))
}

/// Name of the Change List of a period.
pub fn change_list_name(period: i64) -> String {
    format!("changelists/{period:05}")
}

fn up(layout: &Layout) -> Link {
    Link::new("up", layout.doc_url("capabilitylist.xml"))
}

/// What is reported as written for a key: the file, where the sink has files.
fn written(sink: &dyn DocSink, key: &RelPath) -> PathBuf {
    sink.local_path(key)
        .unwrap_or_else(|| PathBuf::from(key.as_str()))
}

fn write_doc(
    sink: &dyn DocSink,
    layout: &Layout,
    name: &str,
    header: &Header,
    entries: &[Entry],
) -> Result<PathBuf> {
    let mut w = DocumentWriter::new(Vec::new(), name, header)?;
    for e in entries {
        w.write_entry(e)?;
    }
    let bytes = w.finish()?;
    let key = if name == WELL_KNOWN_KEY {
        layout.well_known_key()?
    } else {
        layout.doc_key(name)?
    };
    sink.put(&key, &bytes)?;
    Ok(written(sink, &key))
}

/// An entry of the Resource List for a resource.
pub fn resource_entry(r: &Resource) -> Entry {
    let mut e = Entry::new(r.uri.clone());
    e.lastmod = Some(r.lastmod);
    let md = e.md_mut();
    if !r.hashes.is_empty() {
        md.hash = Some(r.hashes.clone());
    }
    md.length = Some(r.length);
    md.mime_type = r.mime_type.clone();
    // Z39.99-2014 §14.8: a republished resource's original.
    e.links.extend(r.via.as_deref().cloned());
    e
}

/// Adds to `e`, an entry with a `via` link to its original (Z39.99-2014 §14.8), the links of
/// that original in the Memento archive whose URL space is `archive` (Z39.99-2014 §12's link
/// relations, RFC 7089): `rel="timemap"` to its TimeMap (`type="application/link-format"`),
/// and, when the original's time is known (`modified`), `rel="memento"` to its memento then,
/// `modified` its datetime. An entry without a `via` link is left as it is.
pub fn archive_links(e: &mut Entry, archive: &str) {
    use crate::serve::memento::{LINK_FORMAT, format_14, uri_for_headers};
    let Some(via) = e.links.iter().find(|l| l.rel == crate::state::VIA) else {
        return;
    };
    let (uri_r, modified) = (uri_for_headers(&via.href), via.modified);
    let mut timemap = Link::new("timemap", format!("{archive}timemap/link/{uri_r}"));
    timemap.mime_type = Some(LINK_FORMAT.to_owned());
    e.links.push(timemap);
    if let Some(m) = modified {
        let mut memento = Link::new(
            "memento",
            format!("{archive}{}/{uri_r}", format_14(m.timestamp())),
        );
        memento.modified = Some(m);
        e.links.push(memento);
    }
}

/// `e` with [`archive_links`] when there is an archive.
fn in_archive(mut e: Entry, archive: Option<&str>) -> Entry {
    if let Some(a) = archive {
        archive_links(&mut e, a);
    }
    e
}

/// An entry of a Change List for a change (Z39.99-2017 §12.1: `datetime` is the change event).
pub fn change_entry(c: &ChangeRecord) -> Entry {
    let mut e = Entry::new(c.uri.clone());
    e.lastmod = c.lastmod;
    let md = e.md_mut();
    md.change = Some(c.change.clone());
    md.datetime = Some(c.datetime);
    if !c.hashes.is_empty() {
        md.hash = Some(c.hashes.clone());
    }
    md.length = c.length;
    md.mime_type = c.mime_type.clone();
    e.links.extend(c.via.as_deref().cloned());
    e
}

/// Writes the Resource List of the newest snapshot, unless it exists already.
fn publish_resource_list(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    opts: &PublishOptions,
    snapshot: (i64, W3cDateTime, W3cDateTime, u64),
    report: &mut PublishReport,
) -> Result<String> {
    let (id, at, completed, _) = snapshot;
    let name = resource_list_name(id);
    let done_key = format!("resourcelist:{id}");
    if let Some(url) = state.meta(&done_key)? {
        if resource_list_in_layout(sink, layout, state, id, &url)? {
            report.resources = state.resource_count()?;
            report.resource_list_parts = state
                .meta(&format!("{done_key}:parts"))?
                .and_then(|p| p.parse().ok())
                .unwrap_or(1);
            return Ok(url);
        }
        // Written into another output directory, or under another base URL (a move): written
        // again here, where the Capability List about to name it is served from.
    }
    let mut md = Metadata::with_capability(Capability::ResourceList);
    md.at = Some(at);
    md.completed = Some(completed);
    let mut header = Header::new(Root::UrlSet, md);
    header.links.push(up(layout));
    // Archives §2.2: the core document links to its archive.
    header.links.push(Link::new(
        "archives",
        layout.doc_url("resourcelist-archive.xml"),
    ));
    let parts = SinkParts::new(sink, layout, &name);
    let mut w = SplitWriter::new(parts, name.clone(), header, opts.split)?;
    // Entries in path order (Z39.99-2017 §10.1 sets none): serialized by the scan that
    // recorded this snapshot when it kept them, else read from the state.
    let mut n = 0u64;
    // Entries rendered by the scan carry no archive links: with an archive, from the state.
    let rendered = match opts.archive {
        None => state.take_rendered(id),
        Some(_) => None,
    };
    if let Some(lines) = rendered {
        lines.for_each_line(|line| {
            n += 1;
            w.write_serialized(line, None).map_err(Error::from)
        })?;
    } else {
        state.for_each_resource(|r| {
            n += 1;
            w.write_entry(&in_archive(resource_entry(&r), opts.archive.as_deref()))
                .map_err(Error::from)
        })?;
    }
    let (parts, summary): (SinkParts<'_>, SplitSummary) = w.finish()?;
    report
        .written
        .extend(parts.written.iter().map(|k| written(sink, k)));
    report.resources = n;
    report.resource_list_parts = summary.parts;
    let url = layout.doc_url(&format!("{name}.xml"));
    state.set_meta(&format!("{done_key}:parts"), &summary.parts.to_string())?;
    state.set_meta(&done_key, &url)?;
    Ok(url)
}

/// Whether the Resource List of snapshot `id`, recorded as published at `url`, is in this
/// layout: the URL is this layout's and its file (with every part of an index) is there.
///
/// The state records what was published, not where: `publish --out OUT` and `serve` (which
/// writes under the state folder) may share one state, and a Source may move to another base
/// URL. A document recorded by one of them is taken as published by another only where it is
/// (conformance issue, item 4: every document a Capability List names is served).
fn resource_list_in_layout(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    id: i64,
    url: &str,
) -> Result<bool> {
    let name = resource_list_name(id);
    if url.is_empty() || url != layout.doc_url(&format!("{name}.xml")) {
        return Ok(false);
    }
    if !sink.exists(&layout.doc_key(&format!("{name}.xml"))?)? {
        return Ok(false);
    }
    let parts: usize = state
        .meta(&format!("resourcelist:{id}:parts"))?
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    for n in 1..=parts {
        if parts > 1 && !sink.exists(&layout.doc_key(&format!("{name}-{n:05}.xml"))?)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Removes Resource Lists of snapshots older than the kept ones, returning the kept earlier
/// ones (for the archive) as (id, at, completed, url): those in this layout (see
/// [`resource_list_in_layout`]).
fn prune_resource_lists(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    keep: usize,
    current: i64,
) -> Result<Vec<(i64, W3cDateTime, W3cDateTime, String)>> {
    let mut published = Vec::new();
    for (id, at, completed, _) in state.snapshots()? {
        if id == current {
            continue;
        }
        if let Some(url) = state.meta(&format!("resourcelist:{id}"))? {
            published.push((id, at, completed, url));
        }
    }
    let cut = published.len().saturating_sub(keep);
    for (id, ..) in published.drain(..cut) {
        // The snapshot's folder, `resourcelists/NNNNNN/`, whole.
        let name = resource_list_name(id);
        let folder = &name[..name.rfind('/').map_or(0, |i| i + 1)];
        let _ = sink.delete_prefix(&layout.doc_prefix(folder));
        state.set_meta(&format!("resourcelist:{id}"), "")?;
    }
    let mut kept = Vec::with_capacity(published.len());
    for (id, at, completed, url) in published {
        if resource_list_in_layout(sink, layout, state, id, &url)? {
            kept.push((id, at, completed, url));
        }
    }
    Ok(kept)
}

fn publish_change_lists(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    periods: &[Period],
    opts: &PublishOptions,
    report: &mut PublishReport,
) -> Result<()> {
    let (split, archive) = (&opts.split, opts.archive.as_deref());
    write_period_lists(sink, layout, state, periods, archive, report)?;
    // The index, in forward chronological order.
    let mut md = Metadata::with_capability(Capability::ChangeList);
    md.from = periods.first().map(|p| p.from);
    let mut index_header = Header::new(Root::SitemapIndex, md);
    index_header.links.push(up(layout));
    index_header.links.push(Link::new(
        "archives",
        layout.doc_url("changelist-archive.xml"),
    ));
    let index_entries: Vec<Entry> = periods.iter().map(|p| period_entry(layout, p)).collect();
    report.written.push(write_doc(
        sink,
        layout,
        CHANGE_LIST_INDEX,
        &index_header,
        &index_entries,
    )?);
    // What the Capability List names: the open Change List itself while it fits in one
    // document (Z39.99-2014 §12.1; earlier changes through its `index` and `archives` links),
    // the index when the open period alone exceeds the Sitemap limits (§12.2).
    let key = layout.doc_key(CHANGE_LIST)?;
    match open_change_list(layout, state, periods, split, archive)? {
        Some(bytes) => sink.put(&key, &bytes)?,
        None => {
            write_doc(sink, layout, CHANGE_LIST, &index_header, &index_entries)?;
        }
    }
    report.written.push(written(sink, &key));
    report
        .written
        .push(write_change_list_archive(sink, layout, periods)?);
    report.change_lists = periods.len();
    Ok(())
}

/// The Change List of each period (a closed one only once per layout), a few written at once.
fn write_period_lists(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    periods: &[Period],
    archive: Option<&str>,
    report: &mut PublishReport,
) -> Result<()> {
    let index_url = layout.doc_url(CHANGE_LIST_INDEX);
    // Each document is synced before it is renamed into place: a few are written at once, so
    // that their syncs overlap (at most WRITERS documents in memory).
    const WRITERS: usize = 4;
    std::thread::scope(|s| -> Result<()> {
        let mut in_flight = std::collections::VecDeque::new();
        let finish = |(closed, h): (
            Option<(String, String)>,
            std::thread::ScopedJoinHandle<'_, Result<PathBuf>>,
        ),
                      report: &mut PublishReport|
         -> Result<()> {
            let path = h
                .join()
                .map_err(|_| Error::Task("writing a Change List panicked".into()))??;
            report.written.push(path);
            if let Some((k, url)) = closed {
                state.set_meta(&k, &url)?;
            }
            Ok(())
        };
        for p in periods {
            let name = change_list_name(p.id);
            let closed_key = format!("changelist:{}:closed", p.id);
            let url = layout.doc_url(&format!("{name}.xml"));
            // A closed Change List never changes: written once per layout (the marker holds
            // its URL; see `resource_list_in_layout`).
            if p.until.is_some()
                && state.meta(&closed_key)?.as_deref() == Some(url.as_str())
                && sink.exists(&layout.doc_key(&format!("{name}.xml"))?)?
            {
                continue;
            }
            let mut md = Metadata::with_capability(Capability::ChangeList);
            md.from = Some(p.from);
            md.until = p.until;
            let mut header = Header::new(Root::UrlSet, md);
            header.links.push(up(layout));
            header.links.push(Link::new("index", index_url.clone()));
            let mut entries = Vec::new();
            state.for_each_change(p.id, |c| {
                entries.push(in_archive(change_entry(&c), archive));
                Ok(())
            })?;
            let h =
                s.spawn(move || write_doc(sink, layout, &format!("{name}.xml"), &header, &entries));
            in_flight.push_back((p.until.is_some().then_some((closed_key, url)), h));
            if in_flight.len() >= WRITERS {
                if let Some(job) = in_flight.pop_front() {
                    finish(job, report)?;
                }
            }
        }
        while let Some(job) = in_flight.pop_front() {
            finish(job, report)?;
        }
        Ok(())
    })
}

/// The entry of a period's Change List in the index and the archive.
fn period_entry(layout: &Layout, p: &Period) -> Entry {
    let mut e = Entry::new(layout.doc_url(&format!("{}.xml", change_list_name(p.id))));
    let md = e.md_mut();
    md.from = Some(p.from);
    md.until = p.until;
    e
}

/// The archive of closed Change Lists (Archives §5).
fn write_change_list_archive(
    sink: &dyn DocSink,
    layout: &Layout,
    periods: &[Period],
) -> Result<PathBuf> {
    let mut md = Metadata::with_capability(Capability::ChangeListArchive);
    md.from = None;
    let mut header = Header::new(Root::UrlSet, md);
    header.links.push(up(layout));
    let entries: Vec<Entry> = periods
        .iter()
        .filter(|p| p.until.is_some())
        .map(|p| period_entry(layout, p))
        .collect();
    write_doc(sink, layout, "changelist-archive.xml", &header, &entries)
}

/// Publishes every document for the newest snapshot in `state`, as files under `layout.out`
/// (see [`publish_to`]).
pub fn publish(layout: &Layout, state: &State, opts: &PublishOptions) -> Result<PublishReport> {
    publish_to(&DirSink::new(&layout.out), layout, state, opts)
}

/// Publishes every document for the newest snapshot in `state` through `sink`, named and
/// linked as `layout` says. `publish` and `serve` both publish this way.
pub fn publish_to(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    opts: &PublishOptions,
) -> Result<PublishReport> {
    let mut report = PublishReport::default();
    let snapshot = state
        .last_snapshot()?
        .ok_or_else(|| Error::Config("nothing to publish: no scan recorded yet".into()))?;
    let current = snapshot.0;
    // Every document is a function of the state and the options: when neither changed since
    // the last publish to this layout and its documents are there, there is nothing to write.
    let periods = state.periods()?;
    let fingerprint = format!(
        "{current} {} {:?} {} {} {:?} {} {} {CHANGE_LIST_INDEX}",
        state.last_seq()?,
        periods
            .iter()
            .map(|p| (p.id, p.until.map(|u| u.to_string()), p.count))
            .collect::<Vec<_>>(),
        opts.keep_resource_lists,
        opts.dumps,
        opts.split,
        layout.out.display(),
        layout.base,
    );
    let published = state.meta(PUBLISHED_KEY)?;
    if published.as_deref() == Some(fingerprint.as_str())
        && sink.exists(&layout.doc_key("capabilitylist.xml")?)?
        && sink.exists(&layout.well_known_key()?)?
    {
        report.resources = snapshot.3;
        report.resource_list_parts = state
            .meta(&format!("resourcelist:{current}:parts"))?
            .and_then(|p| p.parse().ok())
            .unwrap_or(1);
        report.change_lists = periods.len();
        return Ok(report);
    }
    let rl_url = publish_resource_list(sink, layout, state, opts, snapshot, &mut report)?;
    let earlier = prune_resource_lists(sink, layout, state, opts.keep_resource_lists, current)?;

    // Resource List Archive (Archives §3).
    let mut header = Header::new(
        Root::UrlSet,
        Metadata::with_capability(Capability::ResourceListArchive),
    );
    header.links.push(up(layout));
    let entries: Vec<Entry> = earlier
        .iter()
        .map(|(_, at, completed, url)| {
            let mut e = Entry::new(url.clone());
            let md = e.md_mut();
            md.at = Some(*at);
            md.completed = Some(*completed);
            e
        })
        .collect();
    report.written.push(write_doc(
        sink,
        layout,
        "resourcelist-archive.xml",
        &header,
        &entries,
    )?);

    publish_change_lists(sink, layout, state, &periods, opts, &mut report)?;

    let listed = (rl_url.as_str(), snapshot.1, report.resources);
    write_capability_list_and_page(sink, layout, state, opts, listed, &mut report)?;

    // Source Description (§8), at the well-known URI (§6.3.2).
    let mut header = Header::new(
        Root::UrlSet,
        Metadata::with_capability(Capability::Description),
    );
    header
        .links
        .push(Link::new("describedby", layout.doc_url("index.html")));
    let mut e = Entry::new(layout.doc_url("capabilitylist.xml"));
    e.md = Some(Metadata::with_capability(Capability::CapabilityList));
    report
        .written
        .push(write_doc(sink, layout, WELL_KNOWN_KEY, &header, &[e])?);
    state.set_meta(PUBLISHED_KEY, &fingerprint)?;
    Ok(report)
}

/// The meta key of what the documents were last fully published from (see [`publish`]).
const PUBLISHED_KEY: &str = "published";

/// The newest Resource List that has been published in `layout` (and not pruned), if any:
/// (snapshot id, snapshot `at`, resources in the snapshot, URL). Snapshots are searched newest
/// first, so this is quick when the newest snapshots are published.
pub fn published_resource_list(
    layout: &Layout,
    state: &State,
) -> Result<Option<(i64, W3cDateTime, u64, String)>> {
    published_resource_list_in(&DirSink::new(&layout.out), layout, state)
}

/// [`published_resource_list`] in `sink`.
pub fn published_resource_list_in(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
) -> Result<Option<(i64, W3cDateTime, u64, String)>> {
    for (id, at, _, count) in state.snapshots()?.into_iter().rev() {
        match state.meta(&format!("resourcelist:{id}"))? {
            Some(url) if resource_list_in_layout(sink, layout, state, id, &url)? => {
                return Ok(Some((id, at, count, url)));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Republishes only what changes between Resource Lists: every open (or not yet written) Change
/// List, the Change List Index and Archive, the Capability List and the page for people. The
/// Capability List points at the newest *published* Resource List (§9: it must list a Resource
/// List; an earlier complete one is still a valid inventory as of its `at`, Z39.99-2014 §10), so
/// a live Source can regenerate the costly Resource List less often than its Change Lists
/// (§12.1: Change Lists are what make changes known promptly).
///
/// Falls back to [`publish`] when no Resource List has been published yet. The Capability List
/// and page written here mirror those of [`publish`] and must be kept in step with it.
pub fn publish_changes(
    layout: &Layout,
    state: &State,
    opts: &PublishOptions,
) -> Result<PublishReport> {
    publish_changes_to(&DirSink::new(&layout.out), layout, state, opts)
}

/// [`publish_changes`] through `sink`.
pub fn publish_changes_to(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    opts: &PublishOptions,
) -> Result<PublishReport> {
    let Some((_, snapshot_at, count, rl_url)) = published_resource_list_in(sink, layout, state)?
    else {
        return publish_to(sink, layout, state, opts);
    };
    let mut report = PublishReport {
        resources: count,
        resource_list_parts: 0,
        ..PublishReport::default()
    };
    // What is written now no longer matches a full publish's fingerprint.
    state.set_meta(PUBLISHED_KEY, "")?;
    let periods = state.periods()?;
    publish_change_lists(sink, layout, state, &periods, opts, &mut report)?;

    let listed = (rl_url.as_str(), snapshot_at, count);
    write_capability_list_and_page(sink, layout, state, opts, listed, &mut report)?;
    Ok(report)
}

/// Writes the Capability List (§9) and the page for people, for the published Resource List
/// `listed`: (URL, snapshot `at`, entries).
fn write_capability_list_and_page(
    sink: &dyn DocSink,
    layout: &Layout,
    state: &State,
    opts: &PublishOptions,
    listed: (&str, W3cDateTime, u64),
    report: &mut PublishReport,
) -> Result<()> {
    let (rl_url, snapshot_at, resources) = listed;
    let mut header = Header::new(
        Root::UrlSet,
        Metadata::with_capability(Capability::CapabilityList),
    );
    header.links.push(Link::new("up", layout.well_known_url()));
    header
        .links
        .push(Link::new("describedby", layout.doc_url("index.html")));
    // (title, document name or URL, capability) of everything offered, in one place for the
    // Capability List and the page.
    let mut offered: Vec<(&str, String, Capability)> = vec![
        ("Resource List", rl_url.to_owned(), Capability::ResourceList),
        (
            "Change List",
            layout.doc_url(CHANGE_LIST),
            Capability::ChangeList,
        ),
    ];
    if opts.dumps {
        offered.push((
            "Resource Dump",
            layout.doc_url("resourcedump.xml"),
            Capability::ResourceDump,
        ));
        offered.push((
            "Change Dump",
            layout.doc_url("changedump.xml"),
            Capability::ChangeDump,
        ));
    }
    offered.push((
        "Resource List Archive",
        layout.doc_url("resourcelist-archive.xml"),
        Capability::ResourceListArchive,
    ));
    offered.push((
        "Change List Archive",
        layout.doc_url("changelist-archive.xml"),
        Capability::ChangeListArchive,
    ));
    let mut entries: Vec<Entry> = offered
        .iter()
        .map(|(_, loc, c)| {
            let mut e = Entry::new(loc.clone());
            e.md = Some(Metadata::with_capability(c.clone()));
            e
        })
        .collect();
    // Change Notification 1.0.1 §5, Example 7; Framework Notification 1.0.1 §5, Example 8: the
    // topic in <loc>, the hub in <rs:ln rel="hub">.
    if let Some(ch) = &opts.notifications {
        for (topic, c) in [
            (&ch.change_topic, Capability::ChangeNotification),
            (&ch.framework_topic, Capability::FrameworkNotification),
        ] {
            let mut e = Entry::new(topic.clone());
            e.links.push(Link::new("hub", ch.hub.clone()));
            e.md = Some(Metadata::with_capability(c));
            entries.push(e);
        }
    }
    report.written.push(write_doc(
        sink,
        layout,
        "capabilitylist.xml",
        &header,
        &entries,
    )?);
    let mut documents: Vec<(String, String)> = vec![
        ("Source Description".into(), layout.well_known_url()),
        (
            "Capability List".into(),
            layout.doc_url("capabilitylist.xml"),
        ),
    ];
    documents.extend(offered.into_iter().map(|(t, u, _)| (t.to_owned(), u)));
    let page = crate::publish::page::render(&crate::publish::page::PageInfo {
        base: layout.base.clone(),
        resources,
        snapshot_at,
        last_change: state.changes_after(state.last_seq()? - 1, 1)?.pop(),
        change_lists: report.change_lists,
        documents,
    });
    let page_key = layout.doc_key("index.html")?;
    sink.put(&page_key, page.as_bytes())?;
    report.written.push(written(sink, &page_key));
    Ok(())
}
