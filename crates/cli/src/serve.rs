//! `resourcesync serve`: one process serving a directory's resources and its documents, live.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use resourcesync_source::scan::ScanProgress;
use resourcesync_source::server::{self, ServeOptions};
use resourcesync_source::watch::WatchOptions;

use crate::EXIT_OK;
use crate::publish::SourceArgs;

#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    source: SourceArgs,
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// Address to listen on (port 0 picks a free port). The default --base-url is
    /// http://LISTEN/ with the port actually bound; a Source served without --base-url follows
    /// that address from run to run (its state moves with it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: String,
    /// Where to write the documents (default: DIR/.resourcesync/www, or STATE-www next to
    /// --state), so that DIR itself is never written to.
    #[arg(long, value_name = "OUTDIR")]
    out: Option<PathBuf>,
    /// Regenerate the Resource List at most this often; Change Lists are updated on every
    /// change.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    resourcelist_interval: u64,
    /// Rescan the whole directory this often, as a safety net for missed watcher events.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    rescan_interval: u64,
    /// Do not use a file-system watcher: find changes by the periodic rescan only.
    #[arg(long)]
    no_watch: bool,
    /// With an inventory that has a change feed (PostgreSQL, OAI-PMH): list every resource at
    /// startup and then at least this often, to find resources removed without a trace the
    /// feed sees (a row deleted from the table); the rescans in between read the feed.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    full_every: u64,
    /// Push Change Notifications and Framework Notifications over WebSub through this hub: a
    /// hub URL, or `embedded` to run one in this process at BASE/resourcesync/hub. The
    /// Capability List then advertises the topics.
    #[arg(long, value_name = "URL|embedded")]
    hub: Option<String>,
    /// Quiet time after a file-system event before changes are scanned, in milliseconds
    /// (default 200, or 10 with --hub, where notification latency matters).
    #[arg(long, value_name = "MS")]
    debounce_ms: Option<u64>,
    /// With --hub embedded: whether the hub sends verifications and deliveries to private
    /// addresses (loopback, RFC 1918, link-local, …); `auto` does when `--listen` is a loopback
    /// or private address (see `resourcesync hub --help`).
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = crate::hub::PrivateAddresses::Auto)]
    hub_private_addresses: crate::hub::PrivateAddresses,
    /// Serve over TLS with this PEM certificate chain (the server's certificate first), offering
    /// HTTP/2 and HTTP/1.1 by ALPN; the default --base-url becomes https://LISTEN/. Needs
    /// --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

pub(crate) fn run(a: &ServeArgs) -> anyhow::Result<u8> {
    crate::out::init_logging();
    let rt = crate::rt::runtime()?;
    let args = a.clone();
    let result = crate::rt::block_on(&rt, async move { serve(&args).await });
    // A scan still running after the grace period is not waited for.
    rt.shutdown_timeout(Duration::from_secs(5));
    result
}

async fn serve(a: &ServeArgs) -> anyhow::Result<u8> {
    // Before binding: a certificate or key that cannot be used is a configuration error.
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(server::tls::Tls::from_pem_files(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let listener = server::bind(&a.listen).await?;
    let addr = listener.local_addr()?;
    let mut cfg = a
        .source
        .config(a.out.clone(), Some(format!("{scheme}://{addr}/")))?;
    if a.source.base_url.is_none() && addr.ip().is_unspecified() {
        tracing::warn!(
            "listening on {addr}; documents will name {scheme}://{addr}/: use --base-url for the URL clients reach"
        );
    }
    server::prepare_config(&mut cfg);
    cfg.scan.full_every = Duration::from_secs(a.full_every);
    let progress = std::sync::Arc::new(ScanProgress::default());
    cfg.scan.progress = Some(progress.clone());
    let spec = a.source.inventory.clone();
    let source =
        tokio::task::spawn_blocking(move || crate::publish::open_source(spec.as_deref(), cfg))
            .await??;
    if let Some(m) = source.moved() {
        let why = if a.source.move_base {
            ""
        } else {
            " (it follows its listen address: no --base-url)"
        };
        tracing::info!("{}", crate::publish::moved_message(m, why));
    }
    let hub = hub_choice(a.hub.as_deref())?;
    let opts = serve_options(a, hub.is_some());
    // The first scan and publish, drawn on a terminal once they have taken two seconds (see
    // crate::progress).
    let display =
        crate::progress::ScanDisplay::start(progress, format!("serve {}", a.source.dir.display()));
    let running = server::start_tls(source, listener, opts, hub, tls).await;
    display.finish();
    let running = running?;
    // Caught from before the line that says the server is ready.
    let mut signals = crate::signal::Signals::new();
    say_serving(a, &running)?;
    let handle = running.shutdown_handle();
    tokio::spawn(async move {
        signals.next().await;
        tracing::info!("shutting down");
        handle.shutdown();
    });
    running.wait().await?;
    Ok(EXIT_OK)
}

/// The hub of `--hub`: none, the embedded one, or one at an http(s) URL.
fn hub_choice(hub: Option<&str>) -> anyhow::Result<Option<server::HubChoice>> {
    Ok(match hub {
        None => None,
        Some("embedded") => Some(server::HubChoice::Embedded),
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            Some(server::HubChoice::Url(u.to_owned()))
        }
        Some(u) => anyhow::bail!("--hub {u:?}: give an http(s) URL or `embedded`"),
    })
}

/// The server's options from the flags (a shorter debounce with a hub: subscribers hear of
/// changes sooner).
fn serve_options(a: &ServeArgs, hub: bool) -> ServeOptions {
    let debounce = a.debounce_ms.unwrap_or(if hub { 10 } else { 200 });
    ServeOptions {
        watch: WatchOptions {
            rescan_interval: Duration::from_secs(a.rescan_interval.max(1)),
            resourcelist_interval: Duration::from_secs(a.resourcelist_interval),
            use_watcher: !a.no_watch,
            debounce: Duration::from_millis(debounce),
            ..WatchOptions::default()
        },
        hub_private_addresses: a.hub_private_addresses.choice(),
        ..ServeOptions::default()
    }
}

/// The lines that say the server is ready (and the same in the log).
fn say_serving(a: &ServeArgs, running: &server::Running) -> anyhow::Result<()> {
    {
        let mut out = crate::out::stdout();
        writeln!(
            out,
            "serving {} at {}",
            a.source.dir.display(),
            running.source_description_url()
        )?;
        let scan = &running.first_batch().scan;
        let unit = crate::publish::read_unit(a.source.inventory.as_deref());
        if !crate::out::quiet() {
            writeln!(
                out,
                "{}, {} (first scan: {} read, {})",
                crate::units::count(scan.resources, "resource", "resources"),
                crate::units::bytes(scan.bytes),
                crate::units::count(scan.hashed, unit.0, unit.1),
                crate::units::bytes(scan.bytes_hashed),
            )?;
        }
        if let Some(n) = running.publisher().notifier() {
            writeln!(
                out,
                "change notifications: topic {} via hub {}",
                n.channels().change_topic,
                n.channels().hub
            )?;
        }
        out.flush()?;
    }
    // The same in the log (with --log-file or --log-format json, collectors see the start).
    tracing::info!(
        dir = %a.source.dir.display(),
        url = %running.source_description_url(),
        resources = running.first_batch().scan.resources,
        "serving {} at {}",
        a.source.dir.display(),
        running.source_description_url()
    );
    Ok(())
}
