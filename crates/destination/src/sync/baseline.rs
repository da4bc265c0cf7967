//! Baseline (Z39.99-2014 §10.1, §10.2): the Resource List staged on disk, then merged with the
//! state in URI order by the diff engine; what differs becomes jobs for the executor. After a
//! Resource Dump (§11), the list is diffed unless it is older than the dump.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

use resourcesync_diff::{Item, Page, pages};
use resourcesync_model::{Capability, Entry, W3cDateTime};

use crate::commit::is_placeholder;
use crate::discover::docs::{DocFetcher, ListSink, WalkInfo, walk};
use crate::error::{Error, Result};
use crate::fetch::ctx::Ctx;
use crate::fetch::exec::Exec;
use crate::job::Outcome;
use crate::march::{Kind, job, judge, march};
use crate::plan::after;
use crate::plan::current::record_item;
use crate::plan::staging::{StagedItem, Staging};
use crate::report::SourceInfo;

use super::incremental::incremental;

/// Stages every entry of a Resource List.
pub(super) struct ResourceListSink {
    staging: Staging,
}

impl ListSink for ResourceListSink {
    fn entry(&mut self, e: Entry) -> Result<()> {
        self.staging.upsert(&StagedItem::from_entry(&e))
    }
}

/// A Resource List read whole into a staging database, and what its walk found.
#[derive(Debug)]
pub(crate) struct StagedList {
    staging: Staging,
    info: WalkInfo,
}

/// Reads a Resource List (every part of its index) into a new staging database.
pub(super) async fn stage_list(fetcher: DocFetcher, rl: String) -> Result<StagedList> {
    let staging = Staging::create(&fetcher.dir)?;
    let (mut sink, info) = walk(
        &fetcher,
        &rl,
        Capability::ResourceList,
        ResourceListSink { staging },
    )
    .await?;
    sink.staging.flush()?;
    Ok(StagedList {
        staging: sink.staging,
        info,
    })
}

/// Whether a URI is among those a dump package put in place during this run, asked in
/// ascending URI order: read along in the same order, a page at a time, instead of one lookup
/// per URI. A read that fails is the answer to the next question.
pub(super) struct DumpedSet<'a> {
    uris: Option<std::iter::Peekable<Box<dyn Iterator<Item = Result<Item>> + Send + 'a>>>,
}

impl<'a> DumpedSet<'a> {
    fn new(staging: Option<&'a Mutex<Staging>>) -> Self {
        let uris = staging.map(|s| {
            let it: Box<dyn Iterator<Item = Result<Item>> + Send + 'a> =
                Box::new(pages(move |after| {
                    let page = s
                        .lock()
                        .map_err(|_| Error::Task("staging lock poisoned".into()))?
                        .page_by_uri(after, 1000)?;
                    Ok::<_, Error>(Page {
                        last: page.last().map(|r| r.uri.clone()),
                        items: page.iter().map(StagedItem::item).collect(),
                    })
                }));
            it.peekable()
        });
        DumpedSet { uris }
    }

    /// Whether `uri` is in the set; every URI asked must be greater than the one before.
    fn contains(&mut self, uri: &str) -> Result<bool> {
        let Some(it) = self.uris.as_mut() else {
            return Ok(false);
        };
        while it
            .next_if(|i| i.as_ref().is_ok_and(|i| i.uri.as_str() < uri))
            .is_some()
        {}
        match it.peek() {
            Some(Ok(i)) => Ok(i.uri == uri),
            Some(Err(_)) => match it.next() {
                Some(Err(e)) => Err(e),
                _ => Ok(false),
            },
            None => Ok(false),
        }
    }
}

pub(super) fn staged(staging: &Mutex<Staging>, uri: &str) -> Result<Option<StagedItem>> {
    staging
        .lock()
        .map_err(|_| Error::Task("staging lock poisoned".into()))?
        .get(uri)
}

/// Baseline (or baseline diff): returns the Resource List's `at`.
pub(super) async fn baseline(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    rl: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<W3cDateTime>> {
    baseline_with(ctx, fetcher, exec, rl, warnings, None, None).await
}

/// Baseline (or baseline diff) from the Resource List `rl`, or from `read`, the result of
/// reading it already; refused with [`Error::ListOlderThanDump`] before anything is done when
/// the list's `at` is before `not_before`. Returns the Resource List's `at`.
pub(super) async fn baseline_with(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    rl: &str,
    warnings: &mut Vec<String>,
    not_before: Option<W3cDateTime>,
    read: Option<Result<StagedList>>,
) -> Result<Option<W3cDateTime>> {
    ctx.ports.obs.phase("reading the Resource List");
    let StagedList { staging, info } = match read {
        Some(s) => s?,
        None => stage_list(fetcher.clone(), rl.to_owned()).await?,
    };
    let at = info.top.md.as_ref().and_then(|m| m.at);
    not_older(at, not_before)?;
    warnings.extend(info.warnings);
    let staging = Mutex::new(staging);
    let total = staging
        .lock()
        .map_err(|_| Error::Task("staging lock poisoned".into()))?
        .count()?;
    ctx.ports.obs.add_total(total);
    ctx.ports.obs.phase("syncing");
    // The copy: state rows, skipping copies kept after a delete; the placeholders of copies a
    // killed run may have put in place without recording them (crate::commit) are in it, so
    // that one the Source no longer lists is deleted, and noted, so that one it lists is
    // fetched (adopted when the file in place has the published digest).
    let placeholders: Mutex<BTreeSet<String>> = Mutex::default();
    let copy = pages(|after| copy_page(ctx, &placeholders, after));
    let placeholder = |uri: &str| -> Result<bool> {
        Ok(placeholders
            .lock()
            .map_err(|_| Error::Task("placeholder lock poisoned".into()))?
            .remove(uri))
    };
    // The original: the staged Resource List. The staged entries read are kept (in `read`)
    // until the diff has passed them, for the jobs: no second lookup per entry.
    let read: Mutex<ReadAhead> = Mutex::new(ReadAhead::default());
    let original = pages(|after| original_page(&staging, &read, after));
    let lock_read = || {
        read.lock()
            .map_err(|_| Error::Task("staging lock poisoned".into()))
    };
    // The staged entry of a URI of the diff (asked in ascending order).
    let entry = |uri: &str| -> Result<Option<StagedItem>> {
        if let Some(i) = lock_read()?.take(uri) {
            return Ok(Some(i));
        }
        staged(&staging, uri)
    };
    // The URIs dump packages put in place during this run, in the same order as the march's.
    let mut dumped = DumpedSet::new(ctx.memo.dumped.as_ref());
    for step in march(copy, original) {
        // A list or state read that failed ends the plan: stop before acting on a plan built
        // from half an inventory.
        let step = step?;
        // The entries before this one are of no more use, whether or not a job took them (a
        // baseline after a Resource Dump takes none: every entry is the same as the state's).
        lock_read()?.pass(&step.uri);
        // Left out by the include/exclude patterns: neither fetched, nor updated, nor deleted.
        if !ctx.filter.wants_mapped(&step.uri, &ctx.mapper) {
            exec.done_inline(Outcome::Filtered);
            continue;
        }
        let Some(verdict) = judge(&step.uri, step.row.as_ref(), step.published.as_ref()) else {
            continue;
        };
        let kind = match verdict.kind {
            // A placeholder has no length, digest or date: it agrees with any entry, and its
            // content is not known.
            Kind::Same if placeholder(&verdict.uri)? => Kind::Update(None),
            // A copy a dump package put in place during this run is counted already.
            Kind::Same if dumped.contains(&verdict.uri)? => {
                exec.done_inline(Outcome::Counted);
                continue;
            }
            // The state says current; check the file is still there.
            Kind::Same => match step
                .published
                .as_ref()
                .map(|o| intact(ctx, o))
                .transpose()?
            {
                Some(false) => Kind::Damaged("missing, or not of the listed length".into()),
                _ => Kind::Same,
            },
            k => k,
        };
        let item = match (&kind, step.published) {
            (Kind::Delete, _) => {
                ctx.ports.obs.add_total(1);
                StagedItem {
                    uri: verdict.uri,
                    ..StagedItem::default()
                }
            }
            (Kind::Same, _) => {
                exec.done_inline(Outcome::Unchanged);
                continue;
            }
            (_, Some(o)) => entry(&o.uri)?.unwrap_or_else(|| StagedItem {
                uri: o.uri.clone(),
                length: o.length,
                hashes: o.hashes.clone(),
                lastmod: o.lastmod,
                ..StagedItem::default()
            }),
            (_, None) => continue,
        };
        if let Some(job) = job(&kind, item) {
            exec.submit(job).await?;
        }
    }
    Ok(at)
}

/// A page of the copy for the diff: the state's rows after `after`, but copies kept after a
/// delete; the placeholders among them noted in `placeholders`.
fn copy_page(
    ctx: &Ctx,
    placeholders: &Mutex<BTreeSet<String>>,
    after: Option<&str>,
) -> Result<Page<Item>> {
    let page = ctx.ports.state.resources_page(&ctx.key, after, 1000)?;
    let mut marked = placeholders
        .lock()
        .map_err(|_| Error::Task("placeholder lock poisoned".into()))?;
    marked.extend(
        page.iter()
            .filter(|r| is_placeholder(r))
            .map(|r| r.uri.clone()),
    );
    Ok(Page {
        last: page.last().map(|r| r.uri.clone()),
        items: page
            .iter()
            .filter(|r| !r.gone || is_placeholder(r))
            .map(record_item)
            .collect(),
    })
}

/// A page of the original for the diff: the staged Resource List's entries after `after`,
/// kept in `read` for the jobs.
fn original_page(
    staging: &Mutex<Staging>,
    read: &Mutex<ReadAhead>,
    after: Option<&str>,
) -> Result<Page<Item>> {
    let page = staging
        .lock()
        .map_err(|_| Error::Task("staging lock poisoned".into()))?
        .page_by_uri(after, 1000)?;
    let last = page.last().map(|r| r.uri.clone());
    let items = page.iter().map(StagedItem::item).collect();
    read.lock()
        .map_err(|_| Error::Task("staging lock poisoned".into()))?
        .extend(page);
    Ok(Page { items, last })
}

/// The staged entries the diff has read and not passed yet, in ascending URI order: about a
/// page or two (the diff reads a page ahead), since every URI the diff reaches drops those
/// before it ([`ReadAhead::pass`]), taken for a job or not.
#[derive(Debug, Default)]
struct ReadAhead(VecDeque<StagedItem>);

impl ReadAhead {
    /// Adds a page read (after those read before: ascending order).
    fn extend(&mut self, page: Vec<StagedItem>) {
        self.0.extend(page);
    }

    /// Drops the entries before `uri`, which the diff has passed.
    fn pass(&mut self, uri: &str) {
        while self.0.front().is_some_and(|i| i.uri.as_str() < uri) {
            self.0.pop_front();
        }
    }

    /// The entry of `uri`, taken out; the entries before it are dropped.
    fn take(&mut self, uri: &str) -> Option<StagedItem> {
        self.pass(uri);
        if self.0.front().is_some_and(|i| i.uri == uri) {
            return self.0.pop_front();
        }
        None
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Refuses a Resource List whose `at` is before `not_before` (the Resource Dump's): Z39.99-2014
/// §10.1, §11.1: both `at`s say when their snapshot started.
fn not_older(at: Option<W3cDateTime>, not_before: Option<W3cDateTime>) -> Result<()> {
    if let (Some(dump_at), Some(at)) = (not_before, at) {
        if after(&dump_at, &at) {
            return Err(Error::ListOlderThanDump {
                at: at.to_string(),
                dump_at: dump_at.to_string(),
            });
        }
    }
    Ok(())
}

/// Whether the copy the state says current is still in place: a file of the listed length (a
/// copy removed or truncated by hand is fetched again; crate::fetch::repair checks the rest
/// later). A URI with no path counts as intact.
fn intact(ctx: &Ctx, o: &Item) -> Result<bool> {
    Ok(match ctx.mapper.map(&o.uri) {
        Ok(rel) => ctx
            .ports
            .store
            .head(&rel)?
            .is_some_and(|m| m.regular && o.length.is_none_or(|l| l == m.length)),
        Err(_) => true,
    })
}

/// After a Resource Dump of `dump_at` was applied (Z39.99-2014 §11; see [`crate::dump`]): the
/// Resource List is diffed unless it is older than the dump, in which case the Change Lists are
/// read from the dump's `at`. Returns the new cursor.
pub(super) async fn after_dump(
    ctx: &Arc<Ctx>,
    fetcher: &DocFetcher,
    exec: &mut Exec,
    info: &SourceInfo,
    dump_at: W3cDateTime,
    w: &mut Vec<String>,
    staged: Option<Result<StagedList>>,
) -> Result<Option<W3cDateTime>> {
    // A Source with a Resource Dump and no Resource List: the dump is the baseline.
    let Some(rl) = &info.resource_list else {
        return Ok(Some(dump_at));
    };
    match baseline_with(ctx, fetcher, exec, rl, w, Some(dump_at), staged).await {
        Ok(at) => return Ok(at.or(Some(dump_at))),
        Err(Error::ListOlderThanDump { at, .. }) => w.push(format!(
            "the Resource List ({at}) is older than the Resource Dump ({dump_at}): not diffed; changes since the dump from the Change Lists"
        )),
        Err(e) => return Err(e),
    }
    let Some(cl) = &info.change_list else {
        return Ok(Some(dump_at));
    };
    match incremental(ctx, fetcher, exec, cl, dump_at, w).await {
        Ok(last) => Ok(Some(last.filter(|l| after(l, &dump_at)).unwrap_or(dump_at))),
        // Diffing against the older list would undo what the dump brought: a later run diffs
        // against a newer one.
        Err(e @ Error::HistoryGap { .. }) => {
            w.push(format!("{e}: the Resource Dump is the baseline"));
            Ok(Some(dump_at))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(from: usize, n: usize) -> Vec<StagedItem> {
        (from..from + n)
            .map(|i| StagedItem {
                uri: format!("http://example.com/r{i:07}"),
                ..StagedItem::default()
            })
            .collect()
    }

    /// A baseline after a Resource Dump takes no entry for a job (all the same as the state's):
    /// the entries passed must still go, or the whole Resource List ends up in memory.
    #[test]
    fn read_ahead_holds_about_a_page_when_nothing_is_taken() {
        let mut r = ReadAhead::default();
        let mut most = 0;
        for p in 0..50 {
            r.extend(page(p * 1000, 1000));
            // The diff reaches the entries of the page before while this one is read.
            for i in (p * 1000).saturating_sub(1000)..p * 1000 {
                r.pass(&format!("http://example.com/r{i:07}"));
            }
            most = most.max(r.len());
        }
        assert!(most <= 2000, "{most} entries held");
    }

    #[test]
    fn read_ahead_takes_the_entry_asked_and_drops_those_before() {
        let mut r = ReadAhead::default();
        r.extend(page(0, 10));
        let t = r.take("http://example.com/r0000004").map(|i| i.uri);
        assert_eq!(t.as_deref(), Some("http://example.com/r0000004"));
        assert_eq!(r.len(), 5);
        assert!(r.take("http://example.com/r0000004").is_none());
        r.pass("http://example.com/r0000009");
        assert_eq!(r.len(), 1);
    }
}
