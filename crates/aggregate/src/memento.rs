//! Memento (RFC 7089) for the copies the aggregator keeps: each Source `NAME` is an archive
//! (pywb's collection) under `/memento/NAME/`, answered by
//! [`resourcesync_source::serve::memento`] over the versions its state records
//! (`sync --versions`, `versions = true`; `resourcesync_store::VersionRecord`):
//!
//! | path | what |
//! | --- | --- |
//! | `/memento/NAME/timemap/link/{URI-R}` | the TimeMap of the original resource `URI-R` (RFC 7089 §5) |
//! | `/memento/NAME/timegate/{URI-R}` | its TimeGate (§4.1): 302 by `Accept-Datetime` |
//! | `/memento/NAME/{YYYYMMDDhhmmss}/{URI-R}` | a memento (its body as kept then) |
//!
//! The URI-R is the original's URI (the `<loc>` the Source listed), looked up in the Source's
//! state, never fetched. A version's `Memento-Datetime` is the Source's time for it (the
//! change's `datetime`, or the `<lastmod>`), else when this Destination first saw it. Bodies
//! are read from the store by digest (`VersionBodies`: a hard link under the Source's
//! `.resourcesync/versions/` in a folder, an object in a bucket).
//!
//! The state is opened for each request, read-only, and closed with it: a request never holds
//! a Source's state while its sync writes.

use std::io;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use resourcesync_source::serve::memento::{Archive, Memento};
use resourcesync_store::VersionRecord;

use crate::service::Aggregator;
use crate::shared::Shared;

/// The path under the aggregator's base URL where the archives are: `memento/NAME/`. Apart from
/// the page's routes and the republished Sources' `rs/`.
pub const PREFIX: &str = "memento";

/// The routes of the archives, over `agg`.
pub fn router(agg: Arc<Aggregator>) -> Router {
    Router::new()
        .route(&format!("/{PREFIX}/{{name}}/{{*rest}}"), get(archive_path))
        .with_state(agg)
        .layer(axum::middleware::map_response(crate::published::untrusted))
}

/// The Memento URL space of the Source `name` under `base` (the aggregator's base URL).
pub fn archive_base(base: &str, name: &str) -> String {
    format!("{base}{PREFIX}/{name}/")
}

async fn archive_path(State(agg): State<Arc<Aggregator>>, req: Request) -> Response {
    // The raw path and query (not the router's decoded capture): a URI-R is taken verbatim.
    let path = req.uri().path();
    let Some((name, rest)) = path
        .strip_prefix(&format!("/{PREFIX}/"))
        .and_then(|r| r.split_once('/'))
    else {
        return not_found();
    };
    if agg.status().get(name).is_none() {
        return not_found();
    }
    let mut rest = rest.to_owned();
    if let Some(q) = req.uri().query() {
        rest.push('?');
        rest.push_str(q);
    }
    let base = match agg.republish() {
        Some(r) => r.base_url.clone(),
        None => match req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
        {
            Some(host) => format!("http://{host}/"),
            None => return (StatusCode::BAD_REQUEST, "no Host header\n").into_response(),
        },
    };
    let archive: Arc<dyn Archive> = Arc::new(SourceArchive {
        shared: agg.shared().clone(),
        name: name.to_owned(),
    });
    let base = archive_base(&base, name);
    resourcesync_source::serve::memento::respond(archive, &base, &rest, req.method(), req.headers())
        .await
        .unwrap_or_else(not_found)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

/// The versions of one Source: its state and its store.
struct SourceArchive {
    shared: Arc<Shared>,
    name: String,
}

/// A version as a memento: its datetime the Source's, else when it was first seen.
fn memento_of(v: VersionRecord) -> Memento {
    Memento {
        seq: v.seq,
        datetime: v.datetime.unwrap_or(v.first_seen).timestamp(),
        length: v.length,
        digest: v.digest,
    }
}

impl Archive for SourceArchive {
    fn mementos(
        &self,
        uri_r: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<Memento>, String> {
        let Some(state) = crate::history::open(&self.shared, &self.name)
            .map_err(|e| format!("the state of {}: {e}", self.name))?
        else {
            return Ok(Vec::new());
        };
        let err = |e: resourcesync_store::Error| format!("the versions of {uri_r}: {e}");
        // The versions are recorded under the Source's key, which its copy's row names; a
        // resource whose row was removed (deleted with `--delete`) is looked for under the
        // configured URL.
        let source = match state.resource(uri_r).map_err(err)? {
            Some(r) => r.source,
            None => match self
                .shared
                .sources()
                .into_iter()
                .find(|s| s.name == self.name)
            {
                Some(s) => s.url,
                None => return Ok(Vec::new()),
            },
        };
        Ok(state
            .versions_of(&source, uri_r, after, limit)
            .map_err(err)?
            .into_iter()
            .map(memento_of)
            .collect())
    }

    fn open(&self, _uri_r: &str, m: &Memento) -> Result<Option<Box<dyn io::Read + Send>>, String> {
        let err = |e: crate::Error| format!("the store of {}: {e}", self.name);
        let (store, _) = self.shared.store_of(&self.name, false).map_err(err)?;
        let Some(bodies) = store.features().versions else {
            return Ok(None);
        };
        bodies
            .open_version(&m.digest)
            .map_err(|e| format!("the body {} of {}: {e}", m.digest, self.name))
    }
}
