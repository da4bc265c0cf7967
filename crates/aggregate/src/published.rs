//! The republished Sources over HTTP (see [`crate::republish`]): the aggregator's Source
//! Description, and per Source `NAME` its documents and its copies under `/rs/NAME/`.
//!
//! | path | what |
//! | --- | --- |
//! | `/.well-known/resourcesync`, `/rs/.well-known/resourcesync` | the aggregator's Source Description (Z39.99-2014 §6.3.2, §8): one Capability List per republished Source |
//! | `/rs/NAME/.well-known/resourcesync` | the Source Description of `NAME` alone (its Capability List's `up`) |
//! | `/rs/NAME/resourcesync/...` | its documents (Capability List, Resource Lists, Change Lists, archives) |
//! | `/rs/NAME/PATH` | the copy at `PATH`, when its republished Resource List lists it |
//!
//! The paths of the page for operators (`/`, `/sources/…`, `/api/…`, `/metrics`) are apart
//! from these: `/rs/` is the one prefix they take.
//!
//! Files are sent by `tower-http`'s `ServeFile`: `Last-Modified`, `HEAD`, single byte ranges
//! (206, 416) and the date preconditions (`If-Modified-Since`, `If-Unmodified-Since`); copies
//! kept in a bucket by [`crate::bucket_copy`], with single byte ranges too (the range read
//! from the object store, not the whole object), without the date preconditions. A path is
//! decoded as the Source's server decodes it ([`decode_path`]: no `.` or `..` segment, no
//! encoded slash or NUL); a copy is served only when the republished Source's state records
//! it (the newest snapshot), so nothing else in the folder (the Destination's state, files it
//! does not know) is ever sent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use resourcesync_source::state::Reader;
use resourcesync_source::uri::decode_path;

use crate::republish::{self, Copies, PREFIX};
use crate::service::Aggregator;

/// The media type of the documents (Z39.99-2014 §7: Sitemaps).
const XML: &str = "application/xml";

#[derive(Debug)]
struct Shared {
    agg: Arc<Aggregator>,
    /// Read connections to each republished Source's state, by name (one per Source followed:
    /// bounded by the configuration).
    readers: Mutex<HashMap<String, Arc<Reader>>>,
}

/// The routes of the republished Sources, over `agg` (none when it does not republish).
pub fn router(agg: Arc<Aggregator>) -> Router {
    if agg.republish().is_none() {
        return Router::new();
    }
    let shared = Arc::new(Shared {
        agg,
        readers: Mutex::new(HashMap::new()),
    });
    Router::new()
        .route("/.well-known/resourcesync", get(description))
        .route(
            &format!("/{PREFIX}/.well-known/resourcesync"),
            get(description),
        )
        .route(&format!("/{PREFIX}/{{name}}/{{*rest}}"), get(source_path))
        .with_state(shared)
        .layer(axum::middleware::map_response(untrusted))
}

/// Every response here carries what a Source wrote (a copy, whatever its type: HTML, SVG):
/// sent with `X-Content-Type-Options: nosniff` and `Content-Security-Policy: sandbox`, it runs
/// no script on the origin of the operators' page and API.
pub(crate) async fn untrusted(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(resourcesync_source::page::SANDBOX_CSP),
    );
    res
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "not found\n").into_response()
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the copy cannot be read now\n",
    )
        .into_response()
}

/// The aggregator's Source Description: the Sources followed now whose copies have been
/// published at least once.
async fn description(State(s): State<Arc<Shared>>) -> Response {
    let Some(at) = s.agg.republish().cloned() else {
        return not_found();
    };
    let store = s.agg.store().to_owned();
    let names: Vec<String> = s
        .agg
        .status()
        .snapshot()
        .into_iter()
        .map(|v| v.name)
        .collect();
    let doc = tokio::task::spawn_blocking(move || {
        let published: Vec<String> = names
            .into_iter()
            .filter(|n| republish::is_published(&store.join(n)))
            .collect();
        republish::description(&at, &published)
    })
    .await;
    match doc {
        Ok(Ok(bytes)) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static(XML))],
            bytes,
        )
            .into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "no Source Description\n").into_response(),
    }
}

impl Shared {
    fn reader(&self, name: &str, folder: &Path) -> Arc<Reader> {
        let mut g = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(name.to_owned())
            .or_insert_with(|| Arc::new(Reader::new(&republish::state_path(folder))))
            .clone()
    }
}

/// What a path under `/rs/NAME/` is.
enum Target {
    /// A document of the republished Source (a file under its output directory).
    Document(PathBuf),
    /// A copy, to be checked against the republished state.
    Copy(PathBuf),
}

async fn source_path(State(s): State<Arc<Shared>>, req: Request) -> Response {
    // The raw path (not the router's decoded capture): decoded once, and checked, here.
    let path = req.uri().path().to_owned();
    let Some(rest) = path.strip_prefix(&format!("/{PREFIX}/")) else {
        return not_found();
    };
    let Some((name, rest)) = rest.split_once('/') else {
        return not_found();
    };
    if s.agg.status().get(name).is_none() {
        return not_found();
    }
    let rel = match decode_path(rest) {
        Ok(p) if !p.as_os_str().is_empty() => p,
        Ok(_) => return not_found(),
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad path: {e}\n")).into_response(),
    };
    let folder = s.agg.store().join(name);
    let docs = republish::docs_dir(&folder);
    let target = if rest == ".well-known/resourcesync" {
        Target::Document(docs.join(".well-known").join("resourcesync"))
    } else if rest.starts_with("resourcesync/") {
        Target::Document(docs.join(&rel))
    } else {
        Target::Copy(rel)
    };
    let file = match target {
        Target::Document(p) => p,
        Target::Copy(rel) => {
            let reader = s.reader(name, &folder);
            let key = rel.to_string_lossy().into_owned();
            let recorded =
                tokio::task::spawn_blocking(move || reader.recorded(key.as_bytes())).await;
            match recorded {
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => return not_found(),
                // No state yet (never published), or it could not be read.
                _ => return not_found(),
            }
            match s.agg.copies(name) {
                Ok(Copies::Folder) => folder.join(rel),
                Ok(Copies::Bucket(cfg)) => {
                    let range = req.headers().get(header::RANGE).cloned();
                    return crate::bucket_copy::serve(*cfg, rel, range).await;
                }
                Err(e) => {
                    tracing::warn!("serving a copy of {name}: {e}");
                    return unavailable();
                }
            }
        }
    };
    let is_doc = file.starts_with(&docs);
    let mut res = match tower_http::services::ServeFile::new(&file)
        .try_call(req)
        .await
    {
        Ok(r) => r.map(Body::new),
        Err(_) => return not_found(),
    };
    if is_doc
        && res.status().is_success()
        && (file.extension().is_some_and(|e| e == "xml")
            || file.ends_with(".well-known/resourcesync"))
    {
        res.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(XML));
    }
    res
}
