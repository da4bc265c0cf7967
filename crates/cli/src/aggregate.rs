//! `resourcesync aggregate`: follow many Sources as one service (crate
//! `resourcesync-aggregate`), with a page, a JSON API and metrics on `--serve`.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use resourcesync_aggregate::republish::Republish;
use resourcesync_aggregate::{Aggregator, Config, Options, StateChoice};
use resourcesync_source::BaseOrigin;

use crate::EXIT_OK;

#[derive(Debug, Clone, Args)]
pub(crate) struct AggregateArgs {
    /// The configuration: the Sources to follow (`[[source]]` with name, url, schedule, …)
    /// and shared limits (see docs/aggregate.md). Read again on SIGHUP.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Where the copies go: a directory, one folder per Source named as the Source (default:
    /// `copies` beside the configuration file), or an S3-compatible bucket,
    /// s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R (each Source under PREFIX/NAME/;
    /// credentials also from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
    #[arg(long, value_name = "DIR|URL")]
    store: Option<String>,
    /// With an s3:// store: the local directory of each Source's scratch space and, by
    /// default, its state (default: `work` beside the configuration file).
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
    /// Where each Source's state goes: a directory of SQLite databases (NAME.sqlite), or
    /// postgres://USER@HOST:PORT/DB (a schema per Source). Default: SQLite inside each
    /// Source's folder.
    #[arg(long, value_name = "DIR|URL")]
    state: Option<String>,
    /// This worker's name among the processes sharing a PostgreSQL state (default: host,
    /// process id and a random suffix).
    #[arg(long, value_name = "NAME")]
    worker: Option<String>,
    /// Serve the page for operators, /api/sources (JSON) and /metrics (Prometheus) here, and
    /// republish the copies as a ResourceSync Source: a Source Description at
    /// /.well-known/resourcesync, each Source under /rs/NAME/ (see docs/aggregate.md); the
    /// versions of a Source with versions = true as a Memento archive (RFC 7089) under
    /// /memento/NAME/ (docs/history.md).
    #[arg(long, value_name = "ADDR")]
    serve: Option<String>,
    /// The URL the aggregator is reached at, which the republished documents name (default:
    /// http://ADDR/ of --serve).
    #[arg(long, value_name = "URL", requires = "serve")]
    base_url: Option<String>,
    /// On SIGTERM or SIGINT, how long running syncs may take to finish before they are
    /// stopped (a stopped sync loses only the downloads in flight).
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    grace: u64,
    /// Print the start line as JSON.
    #[arg(long)]
    json: bool,
    /// Print the effective flags as TOML (from the command line, RESOURCESYNC_*, the top-level
    /// keys of the configuration file, or the defaults), each with where it came from, and
    /// exit.
    #[arg(long)]
    print_config: bool,
}

pub(crate) fn run(a: &AggregateArgs) -> anyhow::Result<u8> {
    crate::out::init_logging();
    let rt = crate::rt::runtime()?;
    let args = a.clone();
    let r = crate::rt::block_on(&rt, async move { aggregate(&args).await });
    rt.shutdown_timeout(Duration::from_secs(5));
    r
}

fn state_choice(s: Option<&str>) -> StateChoice {
    match s {
        None => StateChoice::PerSource,
        Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
            StateChoice::Postgres(u.to_owned())
        }
        Some(d) => StateChoice::Directory(PathBuf::from(d)),
    }
}

/// Where the copies go: the local directory (the copies, or the work space beside an s3://
/// store), the s3:// URL if any, and how the start line names the store.
fn store_choice(a: &AggregateArgs) -> (PathBuf, Option<String>, String) {
    let beside = |name: &str| {
        a.config
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join(name)
    };
    let (store, object_store) = match a.store.as_deref() {
        Some(url) if url.starts_with("s3://") => (
            a.work.clone().unwrap_or_else(|| beside("work")),
            Some(url.to_owned()),
        ),
        Some(dir) => (PathBuf::from(dir), None),
        None => (beside("copies"), None),
    };
    let shown = object_store.as_deref().map_or_else(
        || store.display().to_string(),
        |u| {
            resourcesync_aggregate::S3Config::parse(u)
                .map(|c| c.location())
                .unwrap_or_else(|_| "an S3 bucket".into())
        },
    );
    (store, object_store, shown)
}

/// The base URL the republished documents name: `--base-url`, else that of the address
/// served; none without `--serve`.
fn republish_choice(base_url: Option<&str>, served: Option<SocketAddr>) -> Option<Republish> {
    match (base_url, served) {
        (Some(u), _) => Some(Republish {
            base_url: resourcesync_source::uri::normalize_base(u),
            origin: BaseOrigin::Given,
        }),
        (None, Some(addr)) => Some(Republish {
            base_url: format!("http://{addr}/"),
            origin: BaseOrigin::Listen,
        }),
        (None, None) => None,
    }
}

async fn aggregate(a: &AggregateArgs) -> anyhow::Result<u8> {
    let config = Config::load(&a.config)?;
    let (store, object_store, shown) = store_choice(a);
    let listener = match &a.serve {
        Some(addr) => Some(resourcesync_source::server::bind(addr).await?),
        None => None,
    };
    let addr = listener.as_ref().and_then(|l| l.local_addr().ok());
    let agg = Arc::new(Aggregator::start(
        &config,
        Options {
            store: store.clone(),
            object_store,
            state: state_choice(a.state.as_deref()),
            worker: a
                .worker
                .clone()
                .unwrap_or_else(resourcesync_aggregate::service::worker_name),
            republish: republish_choice(a.base_url.as_deref(), addr),
        },
    )?);
    // Caught from before the line that says the service is ready.
    let signals = crate::signal::Signals::new();
    #[cfg(unix)]
    let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    #[cfg(not(unix))]
    let hup = None;
    say_start(a.json, config.sources.len(), &shown, addr)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let web = listener.map(|l| {
        let router = resourcesync_aggregate::web::router(agg.clone());
        let listener = resourcesync_source::server::IdleListener::new(l, Duration::from_secs(60));
        tokio::spawn(resourcesync_websub::server::serve_http1(
            listener,
            router,
            async move {
                let _ = stopped.await;
            },
        ))
    });
    until_stopped(a, &agg, signals, hup).await;
    tracing::info!("draining (running syncs have {} s to finish)", a.grace);
    agg.drain(Duration::from_secs(a.grace)).await;
    let _ = stop.send(());
    if let Some(w) = web {
        let _ = w.await;
    }
    Ok(EXIT_OK)
}

/// The line that says the service is ready (text or JSON), and its log event.
fn say_start(
    json: bool,
    sources: usize,
    shown: &str,
    addr: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let mut out = crate::out::stdout();
    if json {
        let line = serde_json::json!({
            "sources": sources,
            "store": shown,
            "serve": addr.map(|a| format!("http://{a}/")),
        });
        writeln!(out, "{line}")?;
    } else {
        write!(
            out,
            "aggregating {} into {}",
            crate::units::count(sources as u64, "Source", "Sources"),
            shown
        )?;
        match addr {
            Some(addr) => writeln!(out, "; page at http://{addr}/")?,
            None => writeln!(out)?,
        }
    }
    out.flush()?;
    tracing::info!(
        sources,
        store = %shown,
        serve = ?addr.map(|a| format!("http://{a}/")),
        "aggregating {} into {shown}",
        crate::units::count(sources as u64, "Source", "Sources"),
    );
    Ok(())
}

/// SIGHUP where there is one (Unix).
#[cfg(unix)]
type Hangup = Option<tokio::signal::unix::Signal>;
/// SIGHUP where there is one (none here).
#[cfg(not(unix))]
type Hangup = Option<std::convert::Infallible>;

/// Until SIGINT or SIGTERM: on SIGHUP, the configuration is read again (and kept on error).
async fn until_stopped(
    a: &AggregateArgs,
    agg: &Aggregator,
    mut signals: crate::signal::Signals,
    mut hup: Hangup,
) {
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = {
            let _ = &mut hup;
            std::future::pending::<()>()
        };
        tokio::select! {
            () = signals.next() => break,
            () = hangup => {
                match Config::load(&a.config).and_then(|c| agg.reload(&c).map(|()| c)) {
                    Ok(c) => tracing::info!(
                        "configuration read again: {}",
                        crate::units::count(c.sources.len() as u64, "Source", "Sources")
                    ),
                    Err(e) => tracing::error!(
                        "configuration not read again, the previous one stays: {e}"
                    ),
                }
            }
        }
    }
}
