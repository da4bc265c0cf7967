//! A Source: configuration, scan and publish in one place, over a directory or any other
//! [`Inventory`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use resourcesync_model::HashAlg;

use crate::error::{Error, Result};
use crate::inventory::own::OwnPaths;
use crate::inventory::{DirInventory, Inventory};
use crate::publish::dump::{DumpOptions, write_change_dumps, write_resource_dump};
use crate::publish::layout::{DOCS_DIR, Layout};
use crate::publish::sink::{DirSink, DocSink};
use crate::publish::{PublishOptions, PublishReport, publish_changes_to, publish_to};
use crate::scan::{ScanOptions, ScanReport, scan};
use crate::state::{Moved, State};
use crate::uri::normalize_base;

pub use crate::inventory::own::STATE_DIR;

/// How a directory (or another inventory) is published.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// The directory of resources; for a Source over another inventory
    /// ([`Source::open_with`]), the working directory of its documents and state.
    pub dir: PathBuf,
    /// The URL the directory is served at.
    pub base_url: String,
    /// Where documents are written (default: the directory itself).
    pub out: Option<PathBuf>,
    /// The state database (default `DIR/.resourcesync/state.sqlite`).
    pub state: Option<PathBuf>,
    /// Globs of paths to leave out.
    pub excludes: Vec<String>,
    /// Publish dotfiles too.
    pub include_hidden: bool,
    /// Scanning.
    pub scan: ScanOptions,
    /// Publishing.
    pub publish: PublishOptions,
    /// Dump packaging (used when `publish.dumps` is set).
    pub dump: DumpOptions,
    /// Where `base_url` comes from: given by the user, or the address a server listens on.
    pub base_origin: BaseOrigin,
    /// Move the Source to `base_url` when its state was published under another one (see
    /// [`Source::open`]).
    pub move_base: bool,
}

/// Where a Source's base URL comes from, which decides whether the Source follows it when it
/// changes (see [`Source::open`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BaseOrigin {
    /// Given by the user (`--base-url`): another one is a move, made only when asked.
    #[default]
    Given,
    /// The address a server listens on (`serve` without `--base-url`): a Source published
    /// under such a URL follows it to the next one, since nobody chose it.
    Listen,
}

impl BaseOrigin {
    fn as_str(self) -> &'static str {
        match self {
            BaseOrigin::Given => "given",
            BaseOrigin::Listen => "listen",
        }
    }
}

/// The meta key of the recorded base URL's origin.
const BASE_ORIGIN_KEY: &str = "base_url_origin";

/// Whether `base` is what a server listening without `--base-url` publishes under,
/// `http://ADDRESS:PORT/` (for states recorded before the origin was).
fn looks_like_a_listen_address(base: &str) -> bool {
    base.strip_prefix("http://")
        .and_then(|r| r.strip_suffix('/'))
        .is_some_and(|a| a.parse::<std::net::SocketAddr>().is_ok())
}

impl SourceConfig {
    /// A configuration with defaults for a directory and base URL.
    pub fn new(dir: impl Into<PathBuf>, base_url: &str) -> Self {
        SourceConfig {
            dir: dir.into(),
            base_url: base_url.to_owned(),
            out: None,
            state: None,
            excludes: Vec::new(),
            include_hidden: false,
            scan: ScanOptions::default(),
            publish: PublishOptions::default(),
            dump: DumpOptions::default(),
            base_origin: BaseOrigin::Given,
            move_base: false,
        }
    }
}

/// A Source: its inventory, state and document layout.
#[derive(Debug)]
pub struct Source {
    cfg: SourceConfig,
    layout: Layout,
    /// Where documents are published (the output directory, as files).
    sink: Arc<dyn DocSink>,
    inventory: Arc<dyn Inventory>,
    state: State,
    state_path: PathBuf,
    own: OwnPaths,
    moved: Option<Moved>,
    /// When the last scan that listed everything started (none yet: the next one lists).
    last_listing: Option<std::time::Instant>,
}

fn check_base(base: &str) -> Result<()> {
    match crate::uri::base_problem(base) {
        None => Ok(()),
        Some(why) => Err(Error::Config(format!(
            "--base-url {:?}: {why}; give the http(s) URL the Source is served at, written so \
             that every Destination reads it one way and can map it to folders",
            base.chars().take(200).collect::<String>()
        ))),
    }
}

impl Source {
    /// Opens a Source: checks the configuration and opens (creating) its state.
    ///
    /// A state published under another base URL is moved to the configured one (its resources
    /// and change history carried over, see [`State::rebase`]) when `move_base` is set, or
    /// when both URLs are a server's listen address (a `serve` without `--base-url` follows
    /// the address it listens on: with `--listen 127.0.0.1:0` it changes on every run).
    /// Otherwise it is refused with an error that says how to move it.
    pub fn open(cfg: SourceConfig) -> Result<Self> {
        Self::open_inner(cfg, |dir, cfg, own| {
            let skip = own.paths().map(Path::to_owned).collect();
            let inv = DirInventory::new(dir, cfg.excludes.clone(), cfg.include_hidden, skip)?;
            Ok(Arc::new(inv))
        })
    }

    /// Opens a Source over `inventory` (a database table, a bucket, an OAI-PMH repository):
    /// as [`Source::open`], with `cfg.dir` the working directory where documents (unless
    /// `cfg.out` says elsewhere) and the state (unless `cfg.state` does) are kept. Excludes
    /// and hidden files are the inventory's business here.
    pub fn open_with(cfg: SourceConfig, inventory: Arc<dyn Inventory>) -> Result<Self> {
        Self::open_inner(cfg, move |_, _, _| Ok(inventory))
    }

    fn open_inner(
        cfg: SourceConfig,
        inventory: impl FnOnce(&Path, &SourceConfig, &OwnPaths) -> Result<Arc<dyn Inventory>>,
    ) -> Result<Self> {
        let base = normalize_base(&cfg.base_url);
        check_base(&base)?;
        let dir = &cfg.dir;
        if !dir.is_dir() {
            return Err(Error::Config(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        if cfg.scan.algs.is_empty() || cfg.scan.algs.iter().any(|a| !a.is_known()) {
            return Err(Error::Config(
                "--hash takes md5, sha-1 and sha-256 (one or more)".into(),
            ));
        }
        let out = cfg.out.clone().unwrap_or_else(|| dir.clone());
        let state_path = cfg
            .state
            .clone()
            .unwrap_or_else(|| dir.join(STATE_DIR).join("state.sqlite"));
        let mut state = State::open(&state_path)?;
        let origin = cfg.base_origin;
        let mut moved = None;
        match state.meta("base_url")? {
            None => {
                state.set_meta("base_url", &base)?;
                state.set_meta(BASE_ORIGIN_KEY, origin.as_str())?;
            }
            Some(old) if old == base => {
                // A URL given once stays given (a server listening there does not make it its
                // own).
                if origin == BaseOrigin::Given {
                    state.set_meta(BASE_ORIGIN_KEY, origin.as_str())?;
                }
            }
            Some(old) => {
                let old_from_listen = match state.meta(BASE_ORIGIN_KEY)?.as_deref() {
                    Some(o) => o == BaseOrigin::Listen.as_str(),
                    None => looks_like_a_listen_address(&old),
                };
                let follow = origin == BaseOrigin::Listen && old_from_listen;
                if !(cfg.move_base || follow) {
                    return Err(Error::Config(format!(
                        "the state at {} was published under {old}, not {base}: give --move to \
                         move the Source to {base} keeping its change history (Destinations \
                         then sync from the new URL), --base-url {old} to keep the old URL, or \
                         another --state to start a new Source",
                        state_path.display()
                    )));
                }
                moved = Some(state.rebase(&old, &base)?);
                state.set_meta(BASE_ORIGIN_KEY, origin.as_str())?;
                // The Resource Lists written under the old URL (the archive starts afresh:
                // earlier snapshots' lists cannot be written again).
                DirSink::new(&out).delete_prefix(&format!("{DOCS_DIR}/resourcelists/"))?;
            }
        }
        std::fs::create_dir_all(out.join(DOCS_DIR)).map_err(|e| Error::io(&out, e))?;
        // What this program writes (databases with their SQLite companions, documents) is never
        // published, wherever it is: see `own`.
        let canonical_dir = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
        let own = OwnPaths::new(&canonical_dir, &out, &state_path);
        let inventory = inventory(dir, &cfg, &own)?;
        Ok(Source {
            sink: Arc::new(DirSink::new(&out)),
            layout: Layout::new(out, &base),
            inventory,
            state,
            state_path,
            own,
            cfg,
            moved,
            last_listing: None,
        })
    }

    /// The move this opening made, when the state was published under another base URL (see
    /// [`Source::open`]).
    pub fn moved(&self) -> Option<&Moved> {
        self.moved.as_ref()
    }

    /// Scans the inventory and records changes. With an inventory's change feed, the first
    /// scan of this Source and then one at least every [`ScanOptions::full_every`] list
    /// everything, so that resources removed without a trace the feed can see (a row deleted
    /// from a table) are recorded as deleted (Z39.99-2017 §12.1).
    pub fn scan(&mut self) -> Result<ScanReport> {
        let started = std::time::Instant::now();
        let due = self
            .last_listing
            .is_none_or(|t| started.duration_since(t) >= self.cfg.scan.full_every);
        let report = if due && !self.cfg.scan.full {
            let opts = ScanOptions {
                full: true,
                ..self.cfg.scan.clone()
            };
            scan(&*self.inventory, &mut self.state, &self.layout.base, &opts)?
        } else {
            scan(
                &*self.inventory,
                &mut self.state,
                &self.layout.base,
                &self.cfg.scan,
            )?
        };
        if !report.from_feed {
            self.last_listing = Some(started);
        }
        Ok(report)
    }

    /// Writes every document for the newest scan; with dumps enabled, the Resource Dump and
    /// Change Dumps first, so that the Capability List never points at a dump not yet written.
    pub fn publish(&mut self) -> Result<PublishReport> {
        let mut dumped = Vec::new();
        if self.cfg.publish.dumps {
            let r =
                write_resource_dump(&self.layout, &self.state, &*self.inventory, &self.cfg.dump)?;
            dumped.extend(r.written);
            let c =
                write_change_dumps(&self.layout, &self.state, &*self.inventory, &self.cfg.dump)?;
            dumped.extend(c.written);
        }
        let mut report = publish_to(&*self.sink, &self.layout, &self.state, &self.cfg.publish)?;
        report.written.extend(dumped);
        Ok(report)
    }

    /// Writes what changes between Resource Lists (see [`crate::publish::publish_changes`]).
    pub fn publish_changes(&self) -> Result<PublishReport> {
        publish_changes_to(&*self.sink, &self.layout, &self.state, &self.cfg.publish)
    }

    /// Where documents are published.
    pub fn sink(&self) -> &dyn DocSink {
        &*self.sink
    }

    /// The document layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The state.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The state, for recording.
    pub fn state_mut(&mut self) -> &mut State {
        &mut self.state
    }

    /// Where the state database is.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// The embedded hub's database (`hub.sqlite` beside the state's), used with
    /// `serve --hub embedded`.
    pub fn hub_state_path(&self) -> PathBuf {
        crate::inventory::own::hub_state_path(&self.state_path)
    }

    /// What this Source writes itself, and never publishes nor serves.
    pub fn own_paths(&self) -> &OwnPaths {
        &self.own
    }

    /// The inventory.
    pub fn inventory(&self) -> &dyn Inventory {
        &*self.inventory
    }

    /// The inventory, shared (for a server answering requests beside the Source).
    pub fn shared_inventory(&self) -> Arc<dyn Inventory> {
        self.inventory.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &SourceConfig {
        &self.cfg
    }

    /// Advertises notification channels in the Capability List from the next publish on
    /// (Change Notification 1.0.1 §5), or stops advertising them.
    pub fn set_notification_channels(&mut self, c: Option<crate::publish::channels::Channels>) {
        self.cfg.publish.notifications = c;
    }
}

/// Parses a `--hash` list (`md5,sha-256`).
pub fn parse_algs(list: &str) -> Result<Vec<HashAlg>> {
    let mut out = Vec::new();
    for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let a = HashAlg::from_token(t);
        if !a.is_known() {
            return Err(Error::Config(format!(
                "unknown hash algorithm {t:?}: use md5, sha-1 or sha-256"
            )));
        }
        if !out.contains(&a) {
            out.push(a);
        }
    }
    Ok(out)
}
