//! Reports and progress.

use resourcesync_model::Category;
use serde::Serialize;

/// Most items listed in a report per list (the rest are counted).
pub const MAX_LISTED: usize = 10_000;

/// Told about progress as a sync or audit goes (the command line draws bars from it).
pub trait Observer: Send + Sync {
    /// A phase begins ("discovery", "reading the Resource List", ...).
    fn phase(&self, _what: &str) {}
    /// A warning.
    fn warning(&self, _message: &str) {}
    /// More resources to go through.
    fn add_total(&self, _resources: u64) {}
    /// A resource is done (whatever the outcome).
    fn resource_done(&self) {}
    /// Bytes received.
    fn bytes(&self, _n: u64) {}
}

impl std::fmt::Debug for dyn Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Observer for Quiet {}

/// A resource that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Its URI.
    pub uri: String,
    /// Its path under DEST, when it maps to one.
    pub path: Option<String>,
    /// What went wrong.
    pub error: String,
    /// What kind of failure it is: `skip` (this resource only: reported, the change retried
    /// by the next run), `retry` (still failing after this run's own retries: a network
    /// failure, 429, 5xx) or `stop` (the run stopped there: a full or read-only disk).
    pub category: Category,
    /// What the failure says of the body the Source serves now.
    pub kind: FailureKind,
}

/// What a failed resource's error says of the body the Source serves now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// A length or digest other than the published one: most likely changed since it was
    /// listed.
    Changed,
    /// HTTP 404 or 410: most likely deleted (or moved) since it was listed.
    Gone,
    /// The store could not take the copy (an object store or a disk that failed): nothing
    /// said of the body served.
    Store,
    /// Anything else.
    Other,
}

/// Why a job failed, with what a caller can do about it: the error's message, its
/// [`Category`] and [`FailureKind`], kept apart so that no one matches on the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// The message, as reported.
    pub message: String,
    /// What a caller can do about it.
    pub category: Category,
    /// What it says of the body served.
    pub kind: FailureKind,
}

impl Failed {
    /// A failure known only by its message: it concerns this one item.
    pub fn other(message: impl Into<String>) -> Failed {
        Failed {
            message: message.into(),
            category: Category::Skip,
            kind: FailureKind::Other,
        }
    }
}

impl From<String> for Failed {
    fn from(message: String) -> Failed {
        Failed::other(message)
    }
}

impl Failure {
    /// A failure of `uri`; an `error` that starts by naming the URI (`URI: HTTP 404`,
    /// `refused URI: …`) does not name it again, since the failure does.
    pub(crate) fn new(uri: String, path: Option<String>, error: String) -> Failure {
        Failure::of(uri, path, Failed::other(error))
    }

    /// A failure of `uri` with its error's category and kind (see [`Failure::new`]).
    pub(crate) fn of(uri: String, path: Option<String>, failed: Failed) -> Failure {
        let Failed {
            message: error,
            category,
            kind,
        } = failed;
        let error = match error.strip_prefix(uri.as_str()) {
            Some(rest) if !uri.is_empty() && rest.starts_with(": ") => rest[2..].to_owned(),
            _ => match error
                .strip_prefix("refused ")
                .and_then(|r| r.strip_prefix(uri.as_str()))
            {
                Some(rest) if !uri.is_empty() && rest.starts_with(": ") => {
                    format!("refused: {}", &rest[2..])
                }
                _ => error,
            },
        };
        Failure {
            uri,
            path,
            error,
            category,
            kind,
        }
    }
}

/// `message` about `uri`, naming the URI once: as it is when it names it already (`URI: No
/// space left on device`, `refused URI: …`), else `URI: message`.
pub(crate) fn about(uri: &str, message: &str) -> String {
    if !uri.is_empty() && message.contains(uri) {
        message.to_owned()
    } else {
        format!("{uri}: {message}")
    }
}

/// An action a dry run would take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Planned {
    /// `create`, `update`, `delete` or `keep` (deleted at the Source, copy kept).
    pub action: &'static str,
    /// The URI.
    pub uri: String,
    /// The path under DEST.
    pub path: String,
}

/// How the run synchronized (Z39.99-2014 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// First run: from the Resource List.
    Baseline,
    /// From Change Lists after the cursor.
    Incremental,
    /// A diff of the state against the current Resource List (no usable change history).
    BaselineDiff,
    /// The changes of a pushed Change Notification (Change Notification 1.0.1 §3).
    Notification,
}

/// What a sync did.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    /// What discovery found.
    pub source: SourceInfo,
    /// The base URL resources are mapped under.
    pub base_url: String,
    /// How.
    pub mode: Mode,
    /// Nothing was fetched, written or removed.
    pub dry_run: bool,
    /// Copies created.
    pub created: u64,
    /// Copies updated.
    pub updated: u64,
    /// Copies removed (`--delete`) of resources the Source deleted.
    pub deleted: u64,
    /// Files under DEST that no resource maps to, removed by `--delete` (listed by a dry run;
    /// `crate::sync::extras`): not resources, so not in the identity of
    /// [`SyncReport::accounted`].
    pub extra_deleted: u64,
    /// Resources deleted at the Source whose copy was kept (no `--delete`).
    pub kept: u64,
    /// Resources already up to date.
    pub unchanged: u64,
    /// Resources left out by the include/exclude patterns ([`crate::filter`]): not fetched,
    /// their copies neither updated nor deleted.
    pub filtered: u64,
    /// Copies found damaged on disk (missing, another length, other content) and fetched
    /// again ([`crate::fetch::repair`]; not counted in `created` or `updated`).
    pub repaired: u64,
    /// Resources that failed.
    pub failed: u64,
    /// Bytes received for resources.
    pub bytes: u64,
    /// Dump packages applied (Z39.99-2014 §11, §13).
    pub packages: u64,
    /// Copies created or updated from dump packages (counted in `created` and `updated` too).
    pub from_packages: u64,
    /// Copies updated by applying a patch (Z39.99-2014 §14.4; counted in `updated` too).
    pub patched: u64,
    /// Fetches handed to the workers sharing the state ([`crate::share`]): done by
    /// any of them, each counted by the worker that did it, not in `created` or `updated`.
    #[serde(skip_serializing_if = "is_zero")]
    pub shared: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// The cursor after the run.
    pub cursor: Option<String>,
    /// Failed resources (at most [`MAX_LISTED`]).
    pub failures: Vec<Failure>,
    /// URIs deleted at the Source whose copy was kept (at most [`MAX_LISTED`]).
    pub kept_uris: Vec<String>,
    /// What a dry run would do (at most [`MAX_LISTED`]).
    pub planned: Vec<Planned>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// The versions this run kept (`--versions`; `docs/history.md`); absent without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<VersionsKept>,
}

/// What a run with `--versions` kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct VersionsKept {
    /// Versions recorded: one per copy put in place (a copy repaired with the body it had
    /// records none).
    pub versions: u64,
    /// Bodies stored anew (a body kept already, by this resource or another, is not stored
    /// again).
    pub bodies: u64,
    /// Their bytes.
    pub bytes: u64,
    /// What the run's prune removed ([`crate::retention`]; nothing when every version is
    /// kept).
    pub pruned: crate::retention::Pruned,
}

impl VersionsKept {
    /// From the committer's figures.
    pub(crate) fn of(kept: Option<(u64, u64, u64)>) -> Option<Self> {
        kept.map(|(versions, bodies, bytes)| VersionsKept {
            versions,
            bodies,
            bytes,
            pruned: crate::retention::Pruned::default(),
        })
    }
}

impl SyncReport {
    /// The resources of the Source this run went through: `created + updated + unchanged +
    /// failed + filtered`, each counted once, whatever the mode (a baseline, a resumed one, a
    /// dump, an incremental run's changes). `deleted`, `kept`, `repaired` and `extra_deleted`
    /// are counted apart.
    pub fn accounted(&self) -> u64 {
        self.created + self.updated + self.unchanged + self.failed + self.filtered
    }
}

/// How a copy differs from the Source's description of it (the diff engine's reasons).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditDifference {
    /// The URI.
    pub uri: String,
    /// The path under DEST.
    pub path: Option<String>,
    /// `length`, `digest`, `lastmod`, or why the resource cannot be checked.
    pub why: String,
}

/// What an audit found (Z39.99-2014 §5.2 Audit: coverage and accuracy).
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// What discovery found.
    pub source: SourceInfo,
    /// The base URL resources are mapped under.
    pub base_url: String,
    /// Resources at the Source (Resource List plus later changes).
    pub resources: u64,
    /// Copies that agree.
    pub in_sync_count: u64,
    /// Resources without a copy.
    pub missing: Vec<AuditDifference>,
    /// Copies without a resource (deleted at the Source, or never listed).
    pub extra: Vec<AuditDifference>,
    /// Copies that differ.
    pub different: Vec<AuditDifference>,
    /// Counts of the three lists (which are cut at [`MAX_LISTED`]).
    pub missing_count: u64,
    /// See `missing_count`.
    pub extra_count: u64,
    /// See `missing_count`.
    pub different_count: u64,
    /// Whether the copies agree with the Source entirely.
    pub in_sync: bool,
    /// Seconds taken.
    pub seconds: f64,
    /// Warnings.
    pub warnings: Vec<String>,
}

pub(crate) fn push_capped<T>(v: &mut Vec<T>, item: T) {
    if v.len() < MAX_LISTED {
        v.push(item);
    }
}

/// What discovery found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceInfo {
    /// The Source Description, if found (or named by the Capability List's `up` link).
    pub description: Option<String>,
    /// The Capability List of the set synced, if any.
    pub capability_list: Option<String>,
    /// The Resource List (or its index).
    pub resource_list: Option<String>,
    /// The Change List (or its index).
    pub change_list: Option<String>,
    /// The Resource Dump.
    pub resource_dump: Option<String>,
    /// The Change Dump.
    pub change_dump: Option<String>,
    /// The capabilities the Capability List lists, in its order (empty without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub offered: Vec<String>,
    /// The Change Notification channel the Capability List advertises (Change Notification
    /// 1.0.1 §5): its topic and hub.
    pub change_notification: Option<NotificationChannel>,
    /// The list is a plain Sitemap, without `<rs:md>`.
    pub plain_sitemap: bool,
    /// Warnings.
    pub warnings: Vec<String>,
}

/// A WebSub topic and its hub (Change Notification 1.0.1 §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotificationChannel {
    /// The topic URI (`<loc>`).
    pub topic: String,
    /// The hub URI (`<rs:ln rel="hub">`).
    pub hub: String,
}

impl SourceInfo {
    /// The key of the Source in the state: its Capability List, else its list.
    pub fn key(&self) -> String {
        self.capability_list
            .clone()
            .or_else(|| self.resource_list.clone())
            .unwrap_or_default()
    }
}

/// Whether a count is 0 (left out of the JSON form).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::about;

    #[test]
    fn a_message_about_a_uri_names_it_once() {
        let uri = "http://127.0.0.1:8181/a.txt";
        let full = format!("{uri}: No space left on device (os error 28)");
        assert_eq!(about(uri, &full), full);
        assert_eq!(about(uri, "No space left on device (os error 28)"), full);
        let refused = format!("refused {uri}: too long");
        assert_eq!(about(uri, &refused), refused);
    }
}
