//! `resourcesync hub`: a W3C WebSub hub (crate `resourcesync-websub`) on its own, for Sources
//! that publish Change Notifications to a hub they do not embed.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use resourcesync_websub::{Hub, HubOptions};

use crate::EXIT_OK;

#[derive(Debug, Clone, Args)]
pub(crate) struct HubArgs {
    #[command(flatten)]
    config: crate::config::ConfigArgs,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    listen: String,
    /// The hub's URL as publishers and subscribers reach it (default http://LISTEN/ with the
    /// port actually bound).
    #[arg(long, value_name = "URL")]
    public_url: Option<String>,
    /// The SQLite database of subscriptions and pending deliveries (survives restarts).
    #[arg(long, value_name = "PATH", default_value = "resourcesync-hub.sqlite")]
    state: PathBuf,
    /// Lease granted when the subscriber asks for none, in seconds (WebSub §8.2: 10 days).
    #[arg(long, value_name = "SECONDS", default_value_t = 864_000)]
    lease: u64,
    /// Shortest lease granted, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    min_lease: u64,
    /// Longest lease granted, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 2_678_400)]
    max_lease: u64,
    /// Relay only topics under this URL (repeatable; default: any topic). Compared as parsed
    /// URLs: the same scheme, host and port, and a path under this one's, whole segments only,
    /// after `.` and `..` (also percent-encoded) are resolved; URLs with user information
    /// (`user@`) are refused. `http://h/topics/` takes `http://h/topics/a`, not
    /// `http://h/topics/../admin` nor `http://h/topicsecret`.
    #[arg(long, value_name = "URL")]
    allow_topic: Vec<String>,
    /// Bytes of payloads kept for pending deliveries, in all (on disk, in --state): past it the
    /// oldest payloads are dropped with a log line (their subscribers, failing or slow, catch up
    /// from the Change List), and a payload larger than this is refused.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    max_pending_bytes: u64,
    /// Close a connection after this many seconds without reading or writing (an idle
    /// keep-alive connection, a stalled request head), as `serve` does.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    idle_timeout: u64,
    /// Whether the hub sends verifications, deliveries and topic fetches to private addresses
    /// (loopback, RFC 1918, link-local, …): `auto` does when the hub itself listens on a
    /// loopback or private address, not when it listens on a public address or on every
    /// interface, where strangers could make it call into its network.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = PrivateAddresses::Auto)]
    private_addresses: PrivateAddresses,
    /// Print the startup line as JSON.
    #[arg(long)]
    json: bool,
}

/// Whether a hub reaches private addresses (`hub --private-addresses`, `serve
/// --hub-private-addresses`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PrivateAddresses {
    /// When the hub listens on a loopback or private address.
    Auto,
    /// Always.
    Allow,
    /// Never.
    Deny,
}

impl PrivateAddresses {
    /// The choice made (`None`: decided by the listen address).
    pub(crate) fn choice(self) -> Option<bool> {
        match self {
            PrivateAddresses::Auto => None,
            PrivateAddresses::Allow => Some(true),
            PrivateAddresses::Deny => Some(false),
        }
    }
}

pub(crate) fn run(a: &HubArgs) -> anyhow::Result<u8> {
    crate::out::init_logging();
    let rt = crate::rt::runtime()?;
    let args = a.clone();
    let r = crate::rt::block_on(&rt, async move { hub(&args).await });
    rt.shutdown_timeout(Duration::from_secs(5));
    r
}

async fn hub(a: &HubArgs) -> anyhow::Result<u8> {
    // The listen backlog of `serve` (1,024): tokio's default (128) drops handshakes of a burst
    // of connections, which then wait a second or more for the SYN to be sent again.
    // Its error names the address and says its cause (once each).
    let listener = resourcesync_source::server::bind(&a.listen).await?;
    let addr = listener.local_addr()?;
    let url = a
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}/"));
    let mut opts = HubOptions::new(&url);
    opts.lease_default = Duration::from_secs(a.lease);
    opts.lease_min = Duration::from_secs(a.min_lease.max(1));
    opts.lease_max = Duration::from_secs(a.max_lease.max(a.min_lease.max(1)));
    opts.allowed_topics.clone_from(&a.allow_topic);
    opts.max_pending_bytes = a.max_pending_bytes;
    opts.private_addresses = a
        .private_addresses
        .choice()
        .unwrap_or_else(|| resourcesync_websub::reach::private_by_default(addr));
    let hub = Hub::start(opts, Some(&a.state))?;
    // Caught from before the line that says the hub is ready.
    let mut signals = crate::signal::Signals::new();
    {
        let mut out = crate::out::stdout();
        if a.json {
            let line = serde_json::json!({
                "hub": url,
                "listen": addr.to_string(),
                "state": a.state.display().to_string(),
                "subscriptions": hub.subscriptions()?.len(),
                "pending": hub.pending()?,
            });
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "WebSub hub at {url} ({}, {} pending; state {})",
                crate::units::count(
                    hub.subscriptions()?.len() as u64,
                    "subscription",
                    "subscriptions"
                ),
                crate::units::count(hub.pending()?, "delivery", "deliveries"),
                a.state.display()
            )?;
        }
        out.flush()?;
    }
    tracing::info!(hub = %url, listen = %addr, state = %a.state.display(), "WebSub hub at {url}");
    let router = hub.router();
    let listener = resourcesync_source::server::IdleListener::new(
        listener,
        Duration::from_secs(a.idle_timeout.max(1)),
    );
    // HTTP/1.1 only (crates/websub/src/server.rs): HTTP/2 would let one connection hold many
    // unread responses.
    resourcesync_websub::server::serve_http1(listener, router, async move {
        signals.next().await;
        tracing::info!("hub shutting down (pending deliveries are kept)");
    })
    .await;
    hub.shutdown();
    Ok(EXIT_OK)
}
