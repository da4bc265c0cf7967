//! The service's web face (`--serve ADDR`): a page for people at `/` (summary counts over every
//! Source, then the Sources, failing ones first, a page of them at a time, filtered by name and
//! state with a GET form: see [`crate::listing`]; each with its state, last and next sync,
//! resources, bytes, lag, last error; no JavaScript; reloaded every N s only when asked with
//! `?refresh=N`), one page per Source at `/sources/NAME` (its recent syncs and failures), the
//! same as JSON at `/api/sources` (the same parameters) and `/api/sources/NAME`, the versions
//! kept of a resource at `/api/sources/NAME/versions?uri=URI` ([`crate::history`]), and Prometheus
//! metrics at `/metrics`; and the
//! republished Sources (`/.well-known/resourcesync`, `/rs/…`: [`crate::published`]).
//!
//! Every response is sent with `X-Content-Type-Options: nosniff`; the pages with a
//! `Content-Security-Policy` that lets their inline style apply and nothing else
//! ([`PAGE_CSP`]), everything else (the copies of what the Sources wrote, above all) with
//! `Content-Security-Policy: sandbox`: an HTML or SVG copy runs no script on this origin.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use resourcesync_source::page::{PAGE_CSP, SANDBOX_CSP, esc};

use crate::listing::{ListQuery, Listing, StateFilter};
use crate::service::Aggregator;
use crate::status::{Phase, SourceView};

/// The routes, over `agg`; with those of the republished Sources when it republishes (see
/// [`crate::published`]: `/.well-known/resourcesync` and `/rs/…`).
pub fn router(agg: Arc<Aggregator>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/sources/{name}", get(source_page))
        .route("/api/sources", get(api_sources))
        .route("/api/sources/{name}", get(api_source))
        .route("/api/sources/{name}/versions", get(api_versions))
        .route("/metrics", get(metrics))
        // For load balancers and service managers: the process answers (as `serve` and `hub`).
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(agg.clone())
        .merge(crate::memento::router(agg.clone()))
        .merge(crate::published::router(agg))
        .layer(axum::middleware::map_response(hardened))
}

/// Every response: no type sniffing, and `Content-Security-Policy: sandbox` unless it has a
/// policy of its own (the pages: [`PAGE_CSP`]).
async fn hardened(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(SANDBOX_CSP),
        );
    }
    res
}

fn html(body: String) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(PAGE_CSP),
            ),
        ],
        body,
    )
        .into_response()
}

fn json<T: serde::Serialize>(v: &T) -> Response {
    match serde_json::to_string_pretty(v) {
        Ok(s) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            s,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;width:100%}\
td,th{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
th{background:#f4f4f4;white-space:nowrap}.failing{color:#b00020;font-weight:bold}\
.following{color:#1b5e20}.baselining{color:#0d47a1}.elsewhere{color:#666}\
td.n{text-align:right;font-variant-numeric:tabular-nums}td.t{white-space:nowrap;font-size:90%}\
small{color:#666;overflow-wrap:anywhere}.err{color:#b00020;overflow-wrap:anywhere;font-size:90%}\
.sum td{border:0;padding:.1em .8em .1em 0}form{margin:1em 0}nav{margin:.6em 0}";

/// An RFC 3339 time as the page shows it: `2026-11-26 02:37:35` (the header says UTC).
fn when(t: Option<&str>) -> String {
    t.map_or_else(
        || "–".to_owned(),
        |t| t.replacen('T', " ", 1).trim_end_matches('Z').to_owned(),
    )
}

fn phase_text(v: &SourceView) -> String {
    let p = match v.phase {
        Phase::Baselining => "baselining",
        Phase::Following => "following",
        Phase::Failing => "failing",
        Phase::Elsewhere => "held by another worker",
    };
    match (&v.phase, &v.failing_since) {
        (Phase::Failing, Some(since)) => format!("{p} since {}", when(Some(since))),
        _ if v.running => format!("{p} (syncing)"),
        _ => p.to_owned(),
    }
}

fn phase_class(v: &SourceView) -> &'static str {
    match v.phase {
        Phase::Baselining => "baselining",
        Phase::Following => "following",
        Phase::Failing => "failing",
        Phase::Elsewhere => "elsewhere",
    }
}

fn lag_text(v: &SourceView) -> String {
    v.lag_seconds
        .map(|s| {
            let s = s as u64;
            match s {
                0..=119 => format!("{s} s"),
                120..=7199 => format!("{} min", s / 60),
                _ => format!("{} h", s / 3600),
            }
        })
        .unwrap_or_else(|| "–".into())
}

/// A page; reloaded by the browser every `refresh` seconds when given.
/// A figure, or `–` when there is none (a Source that keeps no versions).
fn or_dash(n: Option<u64>) -> String {
    n.map_or_else(|| "–".to_owned(), |n| n.to_string())
}

fn page(title: &str, body: &str, refresh: Option<u32>) -> String {
    let reload = refresh.map_or_else(String::new, |r| {
        format!("<meta http-equiv=\"refresh\" content=\"{r}\">")
    });
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">{reload}\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>\n",
        esc(title)
    )
}

/// The answer that refuses a request's list parameters (400, saying which and why).
fn bad_list(e: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        format!("{e} (the list takes q, state, page, per_page and refresh)\n"),
    )
        .into_response()
}

/// Longest last error shown in a row of the list (the Source's page shows it whole).
const ROW_ERROR: usize = 300;

fn cut(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

async fn index(
    State(agg): State<Arc<Aggregator>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let q = match ListQuery::parse(&params) {
        Ok(q) => q,
        Err(e) => return bad_list(&e),
    };
    html(index_page(agg.status().snapshot(), &q))
}

/// The list page (`/`) of `sources` as `q` asks for it: the summary, the filter form, the page
/// of Sources, the links to the pages before and after.
pub fn index_page(sources: Vec<SourceView>, q: &ListQuery) -> String {
    let l = crate::listing::list(sources, q);
    page("ResourceSync aggregator", &index_body(&l, q), q.refresh)
}

fn index_body(l: &Listing, q: &ListQuery) -> String {
    let s = &l.summary;
    let mut b = String::new();
    let _ = write!(
        b,
        "<h1>ResourceSync aggregator</h1><table class=\"sum\"><tr><td>{} Sources, {} failing</td>\
         <td class=\"following\">{} ok</td><td>{} syncing</td><td>{} baselining</td>\
         <td>{} held by another worker</td><td>{} resources</td><td>{} bytes</td></tr></table>\
         <p>JSON: <a href=\"api/sources\">api/sources</a>; metrics: <a href=\"metrics\">metrics</a>.",
        s.sources, s.failing, s.ok, s.syncing, s.baselining, s.elsewhere, s.resources, s.bytes
    );
    match q.refresh {
        Some(r) => {
            let off = ListQuery {
                refresh: None,
                ..q.clone()
            };
            let _ = write!(
                b,
                " Reloads every {r} s: <a href=\"?{}\">stop</a>.",
                esc(&off.to_query(l.page))
            );
        }
        None => {
            let on = ListQuery {
                refresh: Some(10),
                ..q.clone()
            };
            let _ = write!(
                b,
                " <a href=\"?{}\">Reload every 10 s</a>.",
                esc(&on.to_query(l.page))
            );
        }
    }
    b.push_str("</p><form method=\"get\" action=\"\"><label>name <input name=\"q\" value=\"");
    b.push_str(&esc(&q.q));
    b.push_str("\"></label> <label>state <select name=\"state\">");
    for (name, f) in StateFilter::ALL {
        let _ = write!(
            b,
            "<option{}>{name}</option>",
            if f == q.state { " selected" } else { "" }
        );
    }
    b.push_str("</select></label>");
    if q.per_page != crate::listing::PER_PAGE {
        let _ = write!(
            b,
            "<input type=\"hidden\" name=\"per_page\" value=\"{}\">",
            q.per_page
        );
    }
    if let Some(r) = q.refresh {
        let _ = write!(b, "<input type=\"hidden\" name=\"refresh\" value=\"{r}\">");
    }
    b.push_str(" <button>show</button></form>");
    let nav = nav(l, q);
    b.push_str(&nav);
    b.push_str(
        "<table><thead><tr><th>Source</th><th>state</th><th>mode</th><th>last sync (UTC)</th>\
         <th>next sync (UTC)</th><th>resources</th><th>bytes</th><th>versions</th>\
         <th>bytes of versions</th><th>lag</th><th>last error</th></tr>\
         </thead><tbody>",
    );
    for v in &l.sources {
        let _ = write!(
            b,
            "<tr><td><a href=\"sources/{n}\">{n}</a><br><small>{u}</small></td>\
             <td class=\"{c}\">{p}</td><td>{sch}</td><td class=\"t\">{last}</td><td class=\"t\">{next}</td>\
             <td class=\"n\">{r}</td><td class=\"n\">{by}</td><td class=\"n\">{vn}</td>\
             <td class=\"n\">{vb}</td><td class=\"n\">{lag}</td><td class=\"err\">{e}</td></tr>",
            n = esc(&v.name),
            u = esc(&v.url),
            c = phase_class(v),
            p = esc(&phase_text(v)),
            sch = esc(&v.mode),
            last = esc(&when(v.last_sync.as_deref())),
            next = esc(&when(v.next_sync.as_deref())),
            r = v.resources,
            by = v.bytes,
            vn = or_dash(v.versions),
            vb = or_dash(v.version_bytes),
            lag = lag_text(v),
            e = esc(&cut(v.last_error.as_deref().unwrap_or(""), ROW_ERROR)),
        );
    }
    b.push_str("</tbody></table>");
    if l.pages > 1 {
        b.push_str(&nav);
    }
    b
}

/// "Sources 101–200 of 1800 (page 2 of 18)", with links to the pages before and after.
fn nav(l: &Listing, q: &ListQuery) -> String {
    let first = (l.page - 1) * l.per_page;
    let mut n = format!(
        "<nav>Sources {}–{} of {} (page {} of {})",
        if l.matching == 0 { 0 } else { first + 1 },
        first + l.sources.len(),
        l.matching,
        l.page,
        l.pages
    );
    if l.page > 1 {
        let _ = write!(
            n,
            " <a rel=\"prev\" href=\"?{}\">previous</a>",
            esc(&q.to_query(l.page - 1))
        );
    }
    if l.page < l.pages {
        let _ = write!(
            n,
            " <a rel=\"next\" href=\"?{}\">next</a>",
            esc(&q.to_query(l.page + 1))
        );
    }
    n.push_str("</nav>");
    n
}

async fn source_page(
    State(agg): State<Arc<Aggregator>>,
    Path(name): Path<String>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let refresh = match ListQuery::parse(&params) {
        Ok(q) => q.refresh,
        Err(e) => return bad_list(&e),
    };
    let Some(v) = agg.status().get(&name) else {
        return (StatusCode::NOT_FOUND, "no such Source\n").into_response();
    };
    let mut b = String::new();
    let _ = write!(
        b,
        "<p><a href=\"../\">all Sources</a></p><h1>{n}</h1><table>\
         <tr><th>URL</th><td>{u}</td></tr><tr><th>state</th><td class=\"{c}\">{p}</td></tr>\
         <tr><th>schedule</th><td>{sch}</td></tr><tr><th>mode</th><td>{mode}</td></tr>\
         <tr><th>last sync</th><td>{last}</td></tr>\
         <tr><th>last success</th><td>{ok}</td></tr><tr><th>next sync</th><td>{next}</td></tr>\
         <tr><th>resources</th><td>{r}</td></tr><tr><th>bytes of copies</th><td>{by}</td></tr>\
         <tr><th>versions kept</th><td>{vn}</td></tr><tr><th>bytes of versions</th><td>{vb}</td></tr>\
         <tr><th>bytes fetched since start</th><td>{fb}</td></tr><tr><th>lag</th><td>{lag}</td></tr>\
         <tr><th>syncs / polls / notifications / failed</th><td>{s} / {po} / {no} / {f}</td></tr>\
         <tr><th>last error</th><td class=\"err\">{e}</td></tr></table>\
         <h2>Recent syncs and failures</h2><table><thead><tr><th>when</th><th>what</th>\
         <th></th></tr></thead><tbody>",
        n = esc(&v.name),
        u = esc(&v.url),
        c = phase_class(&v),
        p = esc(&phase_text(&v)),
        sch = esc(&v.schedule),
        mode = esc(&v.mode),
        last = esc(v.last_sync.as_deref().unwrap_or("–")),
        ok = esc(v.last_success.as_deref().unwrap_or("–")),
        next = esc(v.next_sync.as_deref().unwrap_or("–")),
        r = v.resources,
        by = v.bytes,
        fb = v.fetched_bytes,
        vn = or_dash(v.versions),
        vb = or_dash(v.version_bytes),
        lag = lag_text(&v),
        s = v.syncs,
        po = v.polls,
        no = v.notifications,
        f = v.failures,
        e = esc(v.last_error.as_deref().unwrap_or("")),
    );
    for e in &v.recent {
        let _ = write!(
            b,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            esc(&e.at),
            if e.kind == "failure" {
                "failing"
            } else {
                "following"
            },
            e.kind,
            esc(&e.summary)
        );
    }
    b.push_str("</tbody></table>");
    html(page(
        &format!("{} — ResourceSync aggregator", v.name),
        &b,
        refresh,
    ))
}

/// Without parameters, every Source by name (the answer of earlier versions); with any of
/// `q`, `state`, `page`, `per_page`, a [`Listing`]: the summary and that page of Sources.
async fn api_sources(
    State(agg): State<Arc<Aggregator>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let q = match ListQuery::parse(&params) {
        Ok(q) => q,
        Err(e) => return bad_list(&e),
    };
    let all = agg.status().snapshot();
    if !q.given {
        return json(&all);
    }
    json(&crate::listing::list(all, &q))
}

async fn api_source(State(agg): State<Arc<Aggregator>>, Path(name): Path<String>) -> Response {
    match agg.status().get(&name) {
        Some(v) => json(&v),
        None => (StatusCode::NOT_FOUND, "no such Source\n").into_response(),
    }
}

/// The query of `/api/sources/NAME/versions`: the resource, and optionally the key its rows
/// are under, the version after which to start, and how many.
#[derive(Debug, serde::Deserialize)]
struct VersionsQuery {
    uri: String,
    key: Option<String>,
    after: Option<u64>,
    limit: Option<usize>,
}

/// The versions the Source `name` keeps of a resource (`versions = true`; `docs/history.md`),
/// a page of at most `limit` (100 unless asked) in time order.
async fn api_versions(
    State(agg): State<Arc<Aggregator>>,
    Path(name): Path<String>,
    Query(q): Query<VersionsQuery>,
) -> Response {
    let r = tokio::task::spawn_blocking(move || {
        agg.versions(
            &name,
            &q.uri,
            q.key.as_deref(),
            q.after,
            q.limit.unwrap_or(100),
        )
    })
    .await;
    match r {
        Ok(Ok(Some(v))) => json(&v),
        Ok(Ok(None)) => (
            StatusCode::NOT_FOUND,
            "no such Source, or no row of that resource (one removed with delete = true: \
             give its Source's key as key=)\n",
        )
            .into_response(),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// A label value in the Prometheus text format: `\`, `"` and newlines escaped.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text exposition format (version 0.0.4), written from the status snapshot:
/// a handful of gauges and counters per Source, no registry to keep in step with it.
pub fn metrics_text(sources: &[SourceView]) -> String {
    let mut m = String::new();
    let mut family =
        |name: &str, kind: &str, help: &str, value: &dyn Fn(&SourceView) -> Option<f64>| {
            let _ = writeln!(m, "# HELP resourcesync_aggregate_{name} {help}");
            let _ = writeln!(m, "# TYPE resourcesync_aggregate_{name} {kind}");
            for v in sources {
                if let Some(x) = value(v) {
                    let _ = writeln!(
                        m,
                        "resourcesync_aggregate_{name}{{source=\"{}\"}} {x}",
                        label(&v.name)
                    );
                }
            }
        };
    family(
        "up",
        "gauge",
        "1 when the Source's last sync succeeded, 0 when it is failing.",
        &|v| Some(if v.phase == Phase::Failing { 0.0 } else { 1.0 }),
    );
    family(
        "syncing",
        "gauge",
        "1 while a sync of the Source runs.",
        &|v| Some(if v.running { 1.0 } else { 0.0 }),
    );
    family(
        "resources",
        "gauge",
        "Copies of the Source's resources, as its state records them.",
        &|v| Some(v.resources as f64),
    );
    family(
        "bytes",
        "gauge",
        "Bytes of the copies of the Source's resources, as its state records them.",
        &|v| Some(v.bytes as f64),
    );
    family(
        "versions",
        "gauge",
        "Versions its state keeps of the Source's resources (versions = true).",
        &|v| v.versions.map(|n| n as f64),
    );
    family(
        "version_bytes",
        "gauge",
        "Bytes of the versions its state keeps (the sum of their lengths).",
        &|v| v.version_bytes.map(|n| n as f64),
    );
    family(
        "fetched_bytes_total",
        "counter",
        "Bytes fetched from the Source by this process.",
        &|v| Some(v.fetched_bytes as f64),
    );
    family(
        "syncs_total",
        "counter",
        "Syncs of the Source completed.",
        &|v| Some(v.syncs as f64),
    );
    family(
        "polls_total",
        "counter",
        "Polls of the Change Lists of a push Source that has no hub, completed.",
        &|v| Some(v.polls as f64),
    );
    family(
        "notifications_total",
        "counter",
        "Change notifications of the Source applied.",
        &|v| Some(v.notifications as f64),
    );
    family(
        "push_polling",
        "gauge",
        "1 for a Source configured for push that advertises no hub, polled instead.",
        &|v| (v.schedule == "push").then(|| f64::from(u8::from(v.mode != "push"))),
    );
    family(
        "sync_failures_total",
        "counter",
        "Syncs of the Source that failed.",
        &|v| Some(v.failures as f64),
    );
    family(
        "shared_copies_total",
        "counter",
        "Copies this worker fetched from the Source's shared work queue (PostgreSQL state).",
        &|v| Some(v.shared_copies as f64),
    );
    family(
        "shared_failures_total",
        "counter",
        "Fetches from the Source's shared work queue that failed on this worker (kept as pending).",
        &|v| Some(v.shared_failures as f64),
    );
    family(
        "lag_seconds",
        "gauge",
        "Seconds since the Source's last successful sync started.",
        &|v| v.lag_seconds,
    );
    m
}

async fn metrics(State(agg): State<Arc<Aggregator>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        metrics_text(&agg.status().snapshot()),
    )
        .into_response()
}
