//! Remembered discovery: what discovery found, and the validators of the Change List
//! documents last read, are kept with the state ([`resourcesync_store::KnownDocument`], keyed by
//! the URL the user gave and `--set`). An incremental run then starts from them: the Capability
//! List, the Change List (or its index) and the open Change List are fetched at once, each with
//! a conditional GET (RFC 9110 §13.1), one round trip in all. Anything unexpected — an error, a
//! 404, a document of another kind, a Capability List that names other documents — falls back
//! to a full discovery ([`super::discover`]), never to fewer changes read.
//!
//! Why this skips no change (Z39.99-2014 §12.1, §12.2): a Change List Index that has not changed
//! lists the same Change Lists as when the last run read it; of those, only the open one (the
//! last, §12.2) can have grown, and every other was read then in full (the state holds the
//! changes that failed as pending). An index that changed (a new list, closed lists archived or
//! rewritten, §12.2) is walked as any run walks it, from the cursor; only a part that answers
//! 304 (read whole last run) is skipped. Validators too weak to tell a change within the same
//! second are never kept (see `docs::validators`).

use std::collections::HashMap;

use resourcesync_model::Capability;
use resourcesync_store::{KnownDocument, MAX_KNOWN_DOCUMENTS};

use crate::discover::docs::{DocFetcher, Fetched, Prefetched};
use crate::http::Conditional;
use crate::report::{NotificationChannel, SourceInfo};

const DESCRIPTION: &str = "description";
const CAPABILITY_LIST: &str = "capabilitylist";
const RESOURCE_LIST: &str = "resourcelist";
const CHANGE_LIST: &str = "changelist";
const RESOURCE_DUMP: &str = "resourcedump";
const CHANGE_DUMP: &str = "changedump";
const TOPIC: &str = "notification-topic";
const HUB: &str = "notification-hub";
const OFFERED: &str = "offered";
/// The top document a walk of the Change List read (its index, when it has one).
const CHANGE_LIST_TOP: &str = "changelist-top";
/// The last Change List the index lists: the open one (Z39.99-2014 §12.2).
const CHANGE_LIST_OPEN: &str = "changelist-open";

/// The key of the remembered documents: the URL discovery starts from, and `--set`.
pub(crate) fn start_key(url: &str, set: Option<&str>) -> String {
    match set {
        Some(s) => format!("{url} --set {s}"),
        None => url.to_owned(),
    }
}

/// A document and the validators of the copy last read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Validated {
    pub url: String,
    pub validators: Option<Conditional>,
}

/// What the Change List walks of a run read (filled by `sync::incremental`), to remember.
#[derive(Debug, Default)]
pub(crate) struct ListMemo {
    /// Documents fetched before the run, for the first walk of the Change List.
    pub prefetched: Option<Prefetched>,
    /// The top document of the last walk of the Change List.
    pub top: Option<Validated>,
    /// The open Change List of the last walk (the last part of its index).
    pub open: Option<Validated>,
}

/// What the state remembers of a Source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Known {
    pub info: SourceInfo,
    pub capability_list: Validated,
    pub top: Option<Validated>,
    pub open: Option<Validated>,
}

fn validated(d: &KnownDocument) -> Validated {
    let v = Conditional {
        etag: d.etag.clone(),
        last_modified: d.last_modified.clone(),
    };
    Validated {
        url: d.url.clone(),
        validators: (!v.is_empty()).then_some(v),
    }
}

fn row(role: &str, v: &Validated) -> KnownDocument {
    let c = v.validators.clone().unwrap_or_default();
    KnownDocument {
        role: role.to_owned(),
        url: v.url.clone(),
        etag: c.etag,
        last_modified: c.last_modified,
    }
}

impl Known {
    /// What to remember of a run; nothing unless the Source has a Capability List with a Change
    /// List (only an incremental from a Change List starts from them).
    pub(crate) fn remember(&self) -> Vec<KnownDocument> {
        let i = &self.info;
        let (Some(_), Some(_)) = (&i.capability_list, &i.change_list) else {
            return Vec::new();
        };
        let mut rows = vec![row(CAPABILITY_LIST, &self.capability_list)];
        for (role, url) in [
            (DESCRIPTION, &i.description),
            (RESOURCE_LIST, &i.resource_list),
            (CHANGE_LIST, &i.change_list),
            (RESOURCE_DUMP, &i.resource_dump),
            (CHANGE_DUMP, &i.change_dump),
        ] {
            if let Some(u) = url {
                rows.push(row(
                    role,
                    &Validated {
                        url: u.clone(),
                        validators: None,
                    },
                ));
            }
        }
        if let Some(n) = &i.change_notification {
            for (role, url) in [(TOPIC, &n.topic), (HUB, &n.hub)] {
                rows.push(row(
                    role,
                    &Validated {
                        url: url.clone(),
                        validators: None,
                    },
                ));
            }
        }
        for o in i.offered.iter().take(MAX_KNOWN_DOCUMENTS / 2) {
            rows.push(row(
                OFFERED,
                &Validated {
                    url: o.clone(),
                    validators: None,
                },
            ));
        }
        if let Some(t) = &self.top {
            rows.push(row(CHANGE_LIST_TOP, t));
        }
        if let Some(o) = &self.open {
            rows.push(row(CHANGE_LIST_OPEN, o));
        }
        rows
    }

    /// What the state remembered; `None` unless it names a Capability List and a Change List.
    pub(crate) fn recall(rows: &[KnownDocument]) -> Option<Known> {
        let one = |role: &str| rows.iter().find(|d| d.role == role);
        let url = |role: &str| one(role).map(|d| d.url.clone());
        let info = SourceInfo {
            description: url(DESCRIPTION),
            capability_list: Some(url(CAPABILITY_LIST)?),
            resource_list: url(RESOURCE_LIST),
            change_list: Some(url(CHANGE_LIST)?),
            resource_dump: url(RESOURCE_DUMP),
            change_dump: url(CHANGE_DUMP),
            change_notification: match (url(TOPIC), url(HUB)) {
                (Some(topic), Some(hub)) => Some(NotificationChannel { topic, hub }),
                _ => None,
            },
            offered: rows
                .iter()
                .filter(|d| d.role == OFFERED)
                .map(|d| d.url.clone())
                .collect(),
            plain_sitemap: false,
            warnings: Vec::new(),
        };
        Some(Known {
            info,
            capability_list: validated(one(CAPABILITY_LIST)?),
            top: one(CHANGE_LIST_TOP).map(validated),
            open: one(CHANGE_LIST_OPEN).map(validated),
        })
    }
}

/// Whether a Capability List read again names the Change List remembered (Z39.99-2014 §9):
/// the other documents it names (a Resource List published under a new name) are taken as
/// it names them now.
fn same_documents(a: &SourceInfo, b: &SourceInfo) -> bool {
    a.capability_list == b.capability_list && a.change_list == b.change_list
}

/// A quick start: the Source as remembered (its Capability List checked), and the Change List
/// documents fetched for the first walk.
#[derive(Debug)]
pub(crate) struct Quick {
    pub known: Known,
    pub prefetched: Prefetched,
}

/// The Capability List, the Change List's top document and its open list, fetched at once with
/// conditional GETs. `Err(reason)` when anything is unexpected: the caller discovers the Source
/// again.
pub(crate) async fn quick_start(f: &DocFetcher, mut known: Known) -> Result<Quick, String> {
    let cap_url = known.capability_list.url.clone();
    let top = known.top.clone().unwrap_or_else(|| Validated {
        url: known.info.change_list.clone().unwrap_or_default(),
        validators: None,
    });
    // The open list is asked for only when it is a part of the top document (an index).
    let open = known.open.clone().filter(|o| o.url != top.url);
    let (cap, top_got, open_got) = tokio::join!(
        f.fetch_if(&cap_url, known.capability_list.validators.as_ref()),
        f.fetch_if(&top.url, top.validators.as_ref()),
        async {
            match &open {
                Some(o) => Some(f.fetch_if(&o.url, o.validators.as_ref()).await),
                None => None,
            }
        }
    );
    // The Capability List: unchanged, or read again and naming the same documents (§9).
    match cap.map_err(|e| format!("{cap_url}: {e}"))? {
        Fetched::Unchanged => {}
        Fetched::Doc(d) => {
            let validators = d.validators.clone();
            if d.header.capability() != Some(&Capability::CapabilityList) {
                return Err(format!("{cap_url}: no longer a Capability List"));
            }
            let mut info = super::read_capability_list(f, *d)
                .await
                .map_err(|e| format!("{cap_url}: {e}"))?;
            if !same_documents(&info, &known.info) {
                return Err(format!(
                    "{cap_url}: names another Change List than last run"
                ));
            }
            if info.description.is_none() {
                info.description = known.info.description.take();
            }
            known.info = info;
            known.capability_list.validators = validators;
        }
    }
    let mut pre = Prefetched::default();
    let top_doc = match top_got.map_err(|e| format!("{}: {e}", top.url))? {
        Fetched::Unchanged => None,
        Fetched::Doc(d) => {
            if d.header.capability() != Some(&Capability::ChangeList) {
                return Err(format!("{}: no longer a Change List", top.url));
            }
            Some(*d)
        }
    };
    let open_doc = match (open_got, &open) {
        (Some(Ok(Fetched::Unchanged)), _) => Some(None),
        (Some(Ok(Fetched::Doc(d))), _) => {
            if d.header.capability() != Some(&Capability::ChangeList) || d.header.is_index() {
                return Err(format!("{}: no longer a Change List", d.url));
            }
            Some(Some(*d))
        }
        // The index changed: the walk reads whatever it lists now.
        (Some(Err(_)), _) if top_doc.is_some() => None,
        (Some(Err(e)), Some(o)) => return Err(format!("{}: {e}", o.url)),
        _ => None,
    };
    match (top_doc, open_doc, &open) {
        // The index changed: walked from it, the open list of last run skipped when unchanged
        // (Z39.99-2014 §12.2: it may now be closed, or archived).
        (Some(t), od, o) => {
            pre.top = Some(t);
            if let (Some(od), Some(o)) = (od, o) {
                pre.parts = HashMap::from([(o.url.clone(), od)]);
            }
        }
        // The index unchanged and the open list changed: the open list alone is read.
        (None, Some(Some(d)), _) => {
            pre.top = Some(d);
            pre.no_index_link = true;
        }
        // Nothing changed: no list is read.
        (None, Some(None), _) | (None, None, None) => {}
        (None, None, Some(_)) => return Err("the open Change List did not answer".into()),
    }
    Ok(Quick {
        known,
        prefetched: pre,
    })
}
