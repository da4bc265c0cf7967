//! The Change List read beside a first baseline, and asked for again conditionally for the
//! catch-up (issue 36; docs/wide-area.md, "The catch-up after a baseline").
//!
//! A first baseline catches up from the Change Lists after the Resource List's `at`
//! ([`crate::sync::catch_up`], Z39.99-2014 §5.2, §12.1). Read only once the downloads had
//! ended, the Change List and its index cost two round trips in sequence after the last
//! download's (the list, then the index its `index` link names). Instead:
//!
//! 1. as soon as the Capability List names the Change List, its documents are read beside the
//!    Resource List and the downloads ([`Ahead::start`]): the list, the index it links to (or
//!    the index itself) and the index's last part, the open list (§12.2), unless it is the
//!    list read already;
//! 2. once every download of the baseline is under way (the last ones have their slots), each
//!    of them is asked for again at once with the validators of the copy read (`If-None-Match`,
//!    `If-Modified-Since`, RFC 9110 §13.1): one round trip, beside the last downloads' and
//!    while the last copies are made durable ([`Ahead::current`]). A 304 says the copy read in
//!    1 is the Source's current one; a 200 brings the current one. A document without
//!    validators strong enough (see `discover::docs::validators`) is asked for unconditionally.
//!    A baseline from a Resource Dump asks as its packages are asked for ([`Ahead::ask_now`]):
//!    its bodies are as old as the dump whenever they arrive, so the round trip goes beside the
//!    packages' download and their unpacking rather than after them (the resources the
//!    Resource List adds after the dump are fetched at their current version, as below).
//!
//! The catch-up's first reading then walks those documents, as current as when the last
//! downloads were asked for. No change is missed by reading them then rather than after the
//! last body arrived: a change the Source made before it answered them is listed in them and
//! applied (§12.1); one it made after is later than every change they list, so later than the
//! cursor the catch-up sets, and the next run applies it; a resource that changed between the
//! two answers is fetched at its new version already, and when that no longer matches its
//! listing the catch-up reads the Change List again for it as before (`catch_up`, 2 and 3). A
//! document that could not be read in 1 or 2, or that a rewritten index names anew, is fetched
//! by the walk as always.

use std::collections::HashMap;

use resourcesync_model::Capability;
use tokio_util::task::AbortOnDropHandle;

use crate::discover::docs::{Doc, DocFetcher, Fetched, Prefetched, is_the_open_list};

/// The Change List's documents being read beside the baseline ([`Ahead::start`]), then asked
/// for again ([`Ahead::ask_now`]).
pub(super) struct Ahead {
    cl: String,
    /// The documents' first reading, until they are asked for again.
    reading: Option<AbortOnDropHandle<Vec<Doc>>>,
    /// Asked for again: the documents for the catch-up's first walk.
    asked: Option<AbortOnDropHandle<Option<Prefetched>>>,
}

impl Ahead {
    /// Starts reading the documents of the Change List `cl` (see the module docs, 1).
    pub(super) fn start(fetcher: &DocFetcher, cl: &str) -> Ahead {
        let f = fetcher.clone();
        let url = cl.to_owned();
        Ahead {
            cl: cl.to_owned(),
            reading: Some(AbortOnDropHandle::new(tokio::spawn(async move {
                read(&f, &url).await
            }))),
            asked: None,
        }
    }

    /// Asks for the documents read again now, in a task of their own (see the module docs, 2),
    /// once their first reading ends; [`Ahead::current`] then waits for the answers. Asked
    /// once: a second call does nothing.
    pub(super) fn ask_now(&mut self, fetcher: &DocFetcher) {
        if let Some(reading) = self.reading.take() {
            let (f, cl) = (fetcher.clone(), self.cl.clone());
            self.asked = Some(AbortOnDropHandle::new(tokio::spawn(async move {
                ask_again(&f, &cl, reading).await
            })));
        }
    }

    /// The documents read asked for again, each with the validators of its copy, all at once
    /// (see the module docs, 2; now, unless [`Ahead::ask_now`] did already): the documents for
    /// the catch-up's first walk, `None` when the Change List itself could not be read (the
    /// walk then fetches everything, saying what failed).
    pub(super) async fn current(mut self, fetcher: &DocFetcher) -> Option<Prefetched> {
        self.ask_now(fetcher);
        let mut asked = self.asked?;
        // A task that failed (it panicked, or was cancelled) read nothing.
        (&mut asked).await.ok().flatten()
    }
}

/// The documents of `reading`, once read, asked for again (see [`Ahead::current`]).
async fn ask_again(
    fetcher: &DocFetcher,
    cl: &str,
    mut reading: AbortOnDropHandle<Vec<Doc>>,
) -> Option<Prefetched> {
    // A task that failed (it panicked, or was cancelled) read nothing.
    let docs = (&mut reading).await.unwrap_or_default();
    let asked: Vec<_> = docs
        .into_iter()
        .map(|d| {
            let f = fetcher.clone();
            AbortOnDropHandle::new(tokio::spawn(async move {
                match f.fetch_if(&d.url, d.validators.as_ref()).await {
                    Ok(Fetched::Unchanged) => Some(d),
                    Ok(Fetched::Doc(n)) => Some(*n),
                    Err(e) => {
                        tracing::info!("{}: {e}: read again by the catch-up", d.url);
                        None
                    }
                }
            }))
        })
        .collect();
    let mut fetched = HashMap::new();
    for mut a in asked {
        if let Ok(Some(d)) = (&mut a).await {
            fetched.insert(d.url.clone(), d);
        }
    }
    let top = fetched.remove(cl)?;
    Some(Prefetched {
        top: Some(top),
        fetched,
        ..Prefetched::default()
    })
}

/// The documents the catch-up's walk of the Change List `cl` would fetch first: the list, the
/// index it links to (or the index it is), and the index's last part unless it is the list
/// (`discover::docs::walk_with` reads that one from the list). What cannot be read is left to
/// the walk.
async fn read(f: &DocFetcher, cl: &str) -> Vec<Doc> {
    let is_cl = |d: &Doc| d.header.capability() == Some(&Capability::ChangeList);
    let mut docs = Vec::new();
    let top = match f.document(cl).await {
        Ok(d) if is_cl(&d) => d,
        _ => return docs,
    };
    // The index: the top itself, or the one its `index` link names (Z39.99-2014 §12.1).
    let (list, index) = if top.header.is_index() {
        (None, top)
    } else {
        let link = top.header.link("index").map(|l| l.href.clone());
        let got = match link.filter(|ix| ix != cl) {
            Some(ix) => f.document(&ix).await.ok(),
            None => None,
        };
        match got.filter(|d| d.header.is_index() && is_cl(d)) {
            Some(index) => (Some(top), index),
            None => {
                docs.push(top);
                return docs;
            }
        }
    };
    // Its last part, the open list (§12.2), unless the walk reads it from the list.
    let last = index.last_entry().await.ok().flatten();
    let open =
        last.filter(|e| e.loc != cl && !list.as_ref().is_some_and(|l| is_the_open_list(l, e)));
    docs.extend(list);
    docs.push(index);
    if let Some(e) = open {
        if let Ok(d) = f.document(&e.loc).await {
            if is_cl(&d) && !d.header.is_index() {
                docs.push(d);
            }
        }
    }
    docs
}
