//! Options of a sync and an audit.

use std::path::PathBuf;
use std::time::Duration;

use resourcesync_model::package::DumpLimits;
use resourcesync_store::STATE_DIR;

use crate::filter::UriFilter;
use crate::http::HttpOptions;

/// Default most bytes of a resource when no `length` is published: 1 GiB.
pub const DEFAULT_MAX_RESOURCE_BYTES: u64 = 1 << 30;
/// Default time between two checks of every copy ([`SyncOptions::check_every`]): a day.
pub const DEFAULT_CHECK_EVERY: Duration = Duration::from_secs(24 * 3600);
/// Default most bytes of a document: 256 MiB (five times the Sitemap limit of 50 MB, §7).
pub const DEFAULT_MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// How to sync.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Where discovery starts: a site root, a page, a Source Description, a Capability List or
    /// any capability document.
    pub url: String,
    /// The destination directory.
    pub dest: PathBuf,
    /// The state database (default `DEST/.resourcesync/state.sqlite`).
    pub state: Option<PathBuf>,
    /// The Capability List to sync when the Source has several.
    pub set: Option<String>,
    /// The Source's base URL, overriding the rule of [`crate::mapping`].
    pub base_url: Option<String>,
    /// Remove copies of resources the Source deleted.
    pub delete: bool,
    /// With `delete`, also remove the files under DEST that no resource maps to, after the run
    /// (rsync's `--delete`; `crate::sync::extras`): a walk of the whole store each run.
    pub delete_extra: bool,
    /// Report what would be done; fetch no resource, write nothing.
    pub dry_run: bool,
    /// The most downloads in flight (per host: [`sync()`](crate::sync()) also caps
    /// `http.max_in_flight` with it); the number in flight adapts below it, from 32 (more when the
    /// first round trips are long), to what the Source answers (`resourcesync_http::adaptive`).
    /// Default 256.
    pub concurrency: usize,
    /// The HTTP client.
    pub http: HttpOptions,
    /// Most bytes of a resource without a published `length`.
    pub max_resource_bytes: u64,
    /// Most bytes of a document.
    pub max_document_bytes: u64,
    /// Time limit for the whole run.
    pub deadline: Option<Duration>,
    /// Baseline from the Resource Dump when the Source offers one (Z39.99-2014 §11; default
    /// `true`, `--no-dump` turns it off).
    pub use_dumps: bool,
    /// Apply the Change Dump's packages before reading the Change Lists (Z39.99-2014 §13;
    /// `--prefer-dumps`).
    pub prefer_dumps: bool,
    /// Bounds on dump packages.
    pub dump_limits: DumpLimits,
    /// How the copies on disk are checked against the state when a run checks them
    /// ([`crate::fetch::repair`]; default quick, `--checksum` hashes every copy; `Off`: never).
    pub check_copies: CheckCopies,
    /// How often every copy is checked: a run checks them when the last completed check the
    /// state records (`SourceCursor::checked_at`) is older than this, or when none is recorded
    /// (`Duration::ZERO`: every run). `None`: only when `check_now` asks. Default a day
    /// ([`DEFAULT_CHECK_EVERY`]). Between checks a run reads and checks only what changed.
    pub check_every: Option<Duration>,
    /// Check every copy in this run, whatever `check_every` says (`--check`; `--checksum`).
    pub check_now: bool,
    /// After a baseline, read the Change Lists from the Resource List's `at` in the same run
    /// ([`crate::sync::catch_up`]; default `true`).
    pub catch_up: bool,
    /// Which resources are copied (default every one; see [`crate::filter`]).
    pub filter: UriFilter,
    /// The most bytes of copies of the Source this Destination holds (default none).
    pub quota: Option<Quota>,
    /// Keep every earlier version of each copy beside it, content-addressed by sha-256, with
    /// when each was current (`--versions`; `docs/history.md`): the store must keep versions
    /// (a directory, an S3 bucket).
    pub versions: bool,
    /// Which kept versions stay (`--keep-versions N`, `--keep-versions-for DURATION`; default
    /// all): the others are pruned at the end of each run with `versions`
    /// ([`crate::retention`]).
    pub keep_versions: crate::retention::Retention,
}

/// A budget of bytes for the copies of one Source: the lengths its state records when the run
/// starts, plus those of the copies the run puts in place (a copy replaced is counted once
/// the budget is near: its old length is then taken off). Checked before a copy is put in
/// place ([`crate::commit`]): a copy that would pass it is not put in place, and the run stops
/// with [`Quota::hint`] in its error; the copies already in place stay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// The most bytes.
    pub bytes: u64,
    /// What the user can do, for the error (`raise max_bytes of the Source "museum" in
    /// aggregate.toml`).
    pub hint: String,
}

impl SyncOptions {
    /// Defaults for a URL and a destination directory.
    pub fn new(url: impl Into<String>, dest: impl Into<PathBuf>) -> Self {
        SyncOptions {
            url: url.into(),
            dest: dest.into(),
            state: None,
            set: None,
            base_url: None,
            delete: false,
            delete_extra: false,
            dry_run: false,
            concurrency: resourcesync_http::adaptive::DEFAULT_CEILING,
            http: HttpOptions::default(),
            max_resource_bytes: DEFAULT_MAX_RESOURCE_BYTES,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            deadline: None,
            use_dumps: true,
            prefer_dumps: false,
            dump_limits: DumpLimits::default(),
            check_copies: CheckCopies::default(),
            check_every: Some(DEFAULT_CHECK_EVERY),
            check_now: false,
            catch_up: true,
            filter: UriFilter::default(),
            quota: None,
            versions: false,
            keep_versions: crate::retention::Retention::All,
        }
    }

    /// The state database's path.
    pub fn state_path(&self) -> PathBuf {
        self.state
            .clone()
            .unwrap_or_else(|| default_state_path(&self.dest))
    }
}

/// `DEST/.resourcesync/state.sqlite`.
pub fn default_state_path(dest: &std::path::Path) -> PathBuf {
    dest.join(STATE_DIR).join("state.sqlite")
}

/// How to audit.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Where discovery starts.
    pub url: String,
    /// The destination directory.
    pub dest: PathBuf,
    /// The state database (default `DEST/.resourcesync/state.sqlite`).
    pub state: Option<PathBuf>,
    /// The Capability List when the Source has several.
    pub set: Option<String>,
    /// The Source's base URL, overriding the rule of [`crate::mapping`].
    pub base_url: Option<String>,
    /// The HTTP client.
    pub http: HttpOptions,
    /// Most bytes of a document.
    pub max_document_bytes: u64,
    /// Time limit for the whole run.
    pub deadline: Option<Duration>,
    /// Do not read the copies: a copy whose size is its recorded length is compared by the
    /// digests recorded when it was written (see [`crate::audit()`]); one of another size is
    /// hashed when the Source publishes a digest. Default: every copy the Source publishes a
    /// digest for is hashed.
    pub fast: bool,
}

impl AuditOptions {
    /// Defaults for a URL and a destination directory.
    pub fn new(url: impl Into<String>, dest: impl Into<PathBuf>) -> Self {
        AuditOptions {
            url: url.into(),
            dest: dest.into(),
            state: None,
            set: None,
            base_url: None,
            http: HttpOptions::default(),
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            deadline: None,
            fast: false,
        }
    }
}

/// How the copies are checked against the state before a run ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CheckCopies {
    /// Not checked.
    Off,
    /// Presence, length and modification time; a copy whose time differs is hashed.
    #[default]
    Quick,
    /// Every copy hashed as well (`--checksum`).
    Checksum,
}
