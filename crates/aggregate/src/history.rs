//! The versions a Source's state keeps of a resource (`versions = true`; `docs/history.md`),
//! for the JSON API (`/api/sources/NAME/versions?uri=URI`): each with the Source's time for it
//! and when this aggregator first saw it, when it stopped being current, and whether the
//! Source deleted it.

use std::sync::Arc;

use resourcesync_store::{MAX_VERSIONS_PAGE, PgState, Records, SqliteState, VersionRecord};

use crate::shared::{Shared, StateChoice, schema_of};

/// One version, as the API writes it (times as W3C Datetimes).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionView {
    /// Its number among the resource's versions (1 the first seen).
    pub seq: u64,
    /// The body's digest (`sha-256:…`).
    pub digest: String,
    /// The body's length.
    pub length: u64,
    /// The Source's time for it (the `<lastmod>` of its list entry).
    pub datetime: Option<String>,
    /// When this aggregator first saw it.
    pub first_seen: String,
    /// When it stopped being current (replaced or deleted); absent while it is current.
    pub until: Option<String>,
    /// It stopped being current because the Source deleted the resource.
    pub deleted: bool,
    /// The Source's time of the delete, when it gave one.
    pub deleted_datetime: Option<String>,
}

impl From<VersionRecord> for VersionView {
    fn from(v: VersionRecord) -> Self {
        VersionView {
            seq: v.seq,
            digest: v.digest,
            length: v.length,
            datetime: v.datetime.map(|d| d.to_string()),
            first_seen: v.first_seen.to_string(),
            until: v.until.map(|d| d.to_string()),
            deleted: v.deleted,
            deleted_datetime: v.deleted_datetime.map(|d| d.to_string()),
        }
    }
}

/// The versions of one resource of a Source, a page of them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Versions {
    /// The Source's name.
    pub source: String,
    /// The key its rows are recorded under (its Capability List URL).
    pub key: String,
    /// The resource.
    pub uri: String,
    /// Its versions after `after`, in time order.
    pub versions: Vec<VersionView>,
    /// The number to ask after for the next page (`after=`), when there may be more.
    pub next: Option<u64>,
}

/// Opens the state of the Source `name` to read it (none before its first sync).
pub(crate) fn open(
    shared: &Shared,
    name: &str,
) -> resourcesync_store::Result<Option<Arc<dyn Records>>> {
    match (&shared.opts.state, shared.sqlite_state(name)) {
        (StateChoice::Postgres(url), _) => Ok(Some(Arc::new(PgState::connect_schema(
            url,
            &schema_of(name),
        )?))),
        (_, Some(path)) => Ok(SqliteState::open_read_only_waiting(
            &path,
            crate::shared::STATE_WAIT,
        )?
        .map(|s| Arc::new(s) as Arc<dyn Records>)),
        _ => Ok(None),
    }
}

/// The versions of `uri` in the state of the Source `name`, recorded under `key` (by default
/// the key of the resource's row: a resource removed with `delete = true` has none, and is
/// asked for with its key), up to `limit` after version `after`. Blocks. `None`: no state,
/// or no key to read them under.
pub(crate) fn versions(
    shared: &Shared,
    name: &str,
    uri: &str,
    key: Option<&str>,
    after: Option<u64>,
    limit: usize,
) -> resourcesync_store::Result<Option<Versions>> {
    let Some(state) = open(shared, name)? else {
        return Ok(None);
    };
    let key = match key {
        Some(k) => k.to_owned(),
        None => match state.resource(uri)? {
            Some(r) => r.source,
            None => return Ok(None),
        },
    };
    let limit = limit.clamp(1, MAX_VERSIONS_PAGE);
    let page = state.versions_of(&key, uri, after, limit)?;
    let next = (page.len() == limit)
        .then(|| page.last().map(|v| v.seq))
        .flatten();
    Ok(Some(Versions {
        source: name.to_owned(),
        key,
        uri: uri.to_owned(),
        versions: page.into_iter().map(VersionView::from).collect(),
        next,
    }))
}
