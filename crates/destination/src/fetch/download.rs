//! The download of one copy (a fetch job, [`crate::fetch::exec`]): the state and the file in
//! place consulted first (a change already applied, a copy adopted), a JSON Patch tried for an
//! update that links one (Z39.99-2014 §14.4), then the candidates (the mirrors, then the
//! resource, Z39.99-2014 §14.2) downloaded with a conditional GET into a temporary file capped
//! at the published length, verified, and queued for the committer ([`crate::commit`]).

use std::path::PathBuf;
use std::sync::Arc;

use reqwest::header::{ETAG, LAST_MODIFIED};
use resourcesync_diff::{Difference, Item, needs_update};
use resourcesync_model::Change;
use resourcesync_store::{At, Expect, ObjectMeta, RelPath, ResourceRecord};
use tokio::sync::OwnedSemaphorePermit;

use crate::commit::{Origin, Pending, Write};
use crate::error::{Error, Result};
use crate::fetch::ctx::{Ctx, blocking};
use crate::http::{Conditional, header};
use crate::job::{Made, Outcome, Reason, Started};
use crate::march::{Kind, change_verdict};
use crate::plan::current::record_item;
use crate::plan::staging::StagedItem;
use crate::report::{Failed, Planned};

/// What a download came to.
pub(crate) enum Fetched {
    /// Downloaded and verified, to be put in place by the committer.
    Verified(Box<Pending>),
    /// The copy in place is current (RFC 9110 §15.4.5): its row, to be recorded.
    NotModified(Box<ResourceRecord>),
}

/// Fetches the copy of `item` at `rel` (unless the state or the file in place shows it current),
/// puts it in place through the committer and says what was done; `Err` says why every
/// candidate (the mirrors, then the resource) failed. `looked`: what a look just made found at
/// `rel` ([`At::Free`]: nothing, so no [`resourcesync_store::Store::head`] is asked).
pub(crate) async fn fetch(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
    reason: Reason,
    permit: &mut Option<OwnedSemaphorePermit>,
    looked: Option<At>,
) -> std::result::Result<Started, Failed> {
    let target = item.item();
    let (change, repair) = (reason == Reason::Change, reason == Reason::Repair);
    // A create the diff found no row for: no lookup (at most a row kept after a delete, which
    // tells nothing about the copy).
    let prior = if reason == Reason::New {
        None
    } else {
        ctx.ports.state.resource(&item.uri)?
    };
    let existing = if looked == Some(At::Free) {
        None
    } else {
        ctx.ports.store.head(rel)?
    };
    let existing = existing.as_ref();
    // A change the state already shows applied (a resumed run, or a change seen twice).
    if change && change_verdict(item, prior.as_ref(), existing) == Kind::Same {
        return Ok(Started::Done(Outcome::Unchanged));
    }
    // A file at the path that is another URI's (crate::commit::owner) is neither adopted nor replaced.
    if existing.is_some() {
        crate::commit::owner::check(ctx.ports.state.as_ref(), &item.uri, &ctx.key, rel)?;
    }
    if adopt(ctx, item, rel, prior.as_ref(), existing).await? {
        return Ok(Started::Done(Outcome::Unchanged));
    }
    let is_update = existing.is_some() || prior.as_ref().is_some_and(|p| !p.gone);
    if ctx.dry_run {
        return Ok(Started::Done(Outcome::Planned(Planned {
            action: if is_update { "update" } else { "create" },
            uri: item.uri.clone(),
            path: rel.to_string(),
        })));
    }
    // Z39.99-2014 §14.4: an update with a patch link is applied to the copy the state records;
    // on any failure (type, copy, patch, result) the resource is fetched whole.
    if change && item.change == Some(Change::Updated) && item.patch.is_some() {
        let copy = prior
            .as_ref()
            .filter(|p| !p.gone && existing.is_some_and(|m| m.regular));
        if let Some(p) = copy {
            match crate::fetch::patch::try_patch(ctx, item, rel, p).await {
                Ok(n) => return Ok(Started::Done(Outcome::Patched(n))),
                Err(e) => tracing::info!("{}: {e}: fetching it whole", item.uri),
            }
        }
    }
    let cond = conditional(prior.as_ref(), existing, repair, &target);
    let mut errors: Vec<String> = Vec::new();
    // The category and kind are the first candidate's (the resource's own URI).
    let mut first: Option<Failed> = None;
    let new_path = existing.is_none();
    for cand in candidates(item) {
        let c = if cand == item.uri {
            cond.as_ref()
        } else {
            None
        };
        let r = ctx
            .ports
            .http
            .with_retries(|| download(ctx, cand, item, rel, c, prior.as_ref(), new_path))
            .await;
        match r {
            Ok(Fetched::Verified(p)) => {
                let receipt = ctx.ports.committer.enqueue(*p).await?;
                // Queued: the next download may start while this copy waits for its batch (the
                // queue is bounded, so downloads cannot outrun the commits).
                drop(permit.take());
                let made = if repair {
                    Made::Repaired
                } else if is_update {
                    Made::Updated
                } else {
                    Made::Created
                };
                return Ok(Started::Queued(receipt, made));
            }
            Ok(Fetched::NotModified(row)) => {
                ctx.ports.committer.write(vec![Write::Row(*row)]).await?;
                return Ok(Started::Done(Outcome::Unchanged));
            }
            Err(e) => {
                let msg = e.to_string();
                first.get_or_insert_with(|| Failed::from(e));
                errors.push(if msg.contains(cand) {
                    msg
                } else {
                    format!("{cand}: {msg}")
                });
            }
        }
    }
    let message = errors.join("; ");
    Err(match first {
        Some(f) => Failed { message, ..f },
        None => Failed::other(message),
    })
}

/// A file already in place with the published digest (a run killed between the rename and the
/// state row, or a destination filled by other means): adopted (recorded), not fetched again.
/// (Not worth reading for an update whose stored digest already differs.)
async fn adopt(
    ctx: &Arc<Ctx>,
    item: &StagedItem,
    rel: &RelPath,
    prior: Option<&ResourceRecord>,
    existing: Option<&ObjectMeta>,
) -> std::result::Result<bool, Failed> {
    let worth_hashing =
        prior.is_none_or(|p| p.gone || item.hashes.agrees_with(&p.hashes).is_none());
    let Some(m) = existing.filter(|_| worth_hashing) else {
        return Ok(false);
    };
    let mut algs = item.hashes.known_algs();
    if !m.regular || algs.is_empty() || item.length.is_some_and(|l| l != m.length) {
        return Ok(false);
    }
    // The name of its version too (`--versions`): the committer keeps an adopted copy's body.
    if ctx.versions && !algs.contains(&resourcesync_model::HashAlg::Sha256) {
        algs.push(resourcesync_model::HashAlg::Sha256);
    }
    let store = ctx.ports.store.clone();
    let r = rel.clone();
    let (len, hashes) = blocking(move || Ok(store.hash(&r, &algs)?)).await?;
    let expect = Expect {
        length: item.length,
        hashes: item.hashes.clone(),
        max_bytes: ctx.max_resource_bytes,
        modified: None,
        uri: None,
        sha256: false,
    };
    if expect.verify(len, &hashes).is_err() {
        return Ok(false);
    }
    if !ctx.dry_run {
        let rec = ResourceRecord {
            uri: item.uri.clone(),
            source: ctx.key.clone(),
            path: rel.to_string(),
            length: Some(len),
            hashes,
            lastmod: item.lastmod,
            etag: prior.and_then(|p| p.etag.clone()),
            last_modified: prior.and_then(|p| p.last_modified.clone()),
            gone: false,
        };
        ctx.ports.committer.write(vec![Write::Row(rec)]).await?;
    }
    Ok(true)
}

/// The validators of a conditional GET, only when the list does not already prove the copy
/// stale (a length or digest differs): a server's second-granularity Last-Modified could
/// otherwise answer 304. (Not for a copy being repaired: the server would answer that it is
/// current.)
fn conditional(
    prior: Option<&ResourceRecord>,
    existing: Option<&ObjectMeta>,
    repair: bool,
    target: &Item,
) -> Option<Conditional> {
    prior
        .filter(|p| !repair && !p.gone && existing.is_some())
        .filter(|p| {
            !matches!(
                needs_update(&record_item(p), target),
                Some(Difference::Length | Difference::Digest)
            )
        })
        .map(|p| Conditional {
            etag: p.etag.clone(),
            last_modified: p.last_modified.clone(),
        })
        .filter(|c| !c.is_empty())
}

/// Where to fetch `item` from: Z39.99-2014 §14.2: mirrors in `pri` order (1 first), then the
/// resource itself.
fn candidates(item: &StagedItem) -> Vec<&str> {
    let mut mirrors: Vec<&(u32, String)> = item
        .duplicates
        .iter()
        .filter(|(_, h)| h.starts_with("http://") || h.starts_with("https://"))
        .collect();
    mirrors.sort_by_key(|(p, _)| *p);
    mirrors
        .iter()
        .map(|(_, h)| h.as_str())
        .chain(std::iter::once(item.uri.as_str()))
        .collect()
}

pub(crate) async fn download(
    ctx: &Arc<Ctx>,
    url: &str,
    item: &StagedItem,
    rel: &RelPath,
    cond: Option<&Conditional>,
    prior: Option<&ResourceRecord>,
    new_path: bool,
) -> Result<Fetched> {
    let mut resp = ctx.ports.http.get_once(url, cond).await?;
    if resp.status().as_u16() == 304 {
        // RFC 9110 §15.4.5: the stored copy is current, if what the Source publishes agrees.
        if let Some(p) = prior {
            if needs_update(&record_item(p), &item.item()).is_none() {
                let mut rec = p.clone();
                rec.lastmod = item.lastmod.or(p.lastmod);
                return Ok(Fetched::NotModified(Box::new(rec)));
            }
        }
        resp = ctx.ports.http.get_once(url, None).await?;
        if resp.status().as_u16() == 304 {
            return Err(Error::Http(resourcesync_http::Error::Transport {
                url: url.to_owned(),
                message: "304 Not Modified to an unconditional request".into(),
                transient: false,
            }));
        }
    }
    let etag = header(&resp, ETAG);
    let last_modified = header(&resp, LAST_MODIFIED);
    let expect = Expect {
        length: item.length,
        hashes: item.hashes.clone(),
        max_bytes: ctx.max_resource_bytes,
        modified: crate::fetch::mtime::copy_time(item.lastmod.as_ref(), last_modified.as_deref()),
        // Kept with the copy where the store can (an object's metadata).
        uri: Some(item.uri.clone()),
        // The name of the version kept of it (`--versions`).
        sha256: ctx.versions,
    };
    let (limit, what) = expect.limit();
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(resourcesync_store::Error::TooLong { limit, what }.into());
    }
    // Where nothing was seen (most copies of a baseline), the store may take its faster path
    // for new objects (a directory: an unnamed file in its final directory, linked into place
    // by the committer instead of renamed; see `Store::begin_new`).
    let mut tmp = if new_path {
        ctx.ports.store.begin_new(rel, expect)?
    } else {
        ctx.ports.store.begin(rel, expect)?
    };
    while let Some(chunk) = ctx.ports.http.chunk(&mut resp, url).await? {
        if crate::crashpoint::fails("download") {
            return Err(Error::Store(resourcesync_store::Error::Io {
                path: PathBuf::from(rel.as_str()),
                cause: std::io::Error::from_raw_os_error(28),
            }));
        }
        tmp.write(&chunk)?;
        crate::crashpoint::point("download");
        ctx.ports.obs.bytes(chunk.len() as u64);
    }
    drop(resp);
    crate::crashpoint::point("before-rename");
    // Checked here (length, every published digest); synced, renamed and recorded by the
    // committer, the row only after the file is in place (crate::commit).
    let body = if ctx.ports.store.features().finish_blocks {
        tokio::task::spawn_blocking(move || tmp.finish()).await??
    } else {
        // A write of what is buffered and the digests' last block: no waiting for the disk.
        tmp.finish()?
    };
    Ok(Fetched::Verified(Box::new(Pending {
        body,
        row: ResourceRecord {
            uri: item.uri.clone(),
            source: ctx.key.clone(),
            path: rel.to_string(),
            length: None,
            hashes: Default::default(),
            lastmod: item.lastmod,
            etag,
            last_modified,
            gone: false,
        },
        origin: Origin::Download,
        fresh: prior.is_none(),
        datetime: item.ctime.or(item.lastmod),
    })))
}
