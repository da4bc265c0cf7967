//! What a run did, counted: the outcome of each job, the tally of a run, what dump packages did.

use resourcesync_model::W3cDateTime;

use crate::report::{Failure, Planned, push_capped};

#[derive(Debug)]
pub(crate) enum Outcome {
    Created(u64),
    Updated(u64),
    /// A damaged copy fetched again (`crate::fetch::repair`).
    Repaired(u64),
    Unchanged,
    Deleted,
    Kept(String),
    Failed(Failure),
    Planned(Planned),
    /// Already counted (a copy a dump package put in place this run).
    Counted,
    /// Left out by the include/exclude patterns (`crate::filter`).
    Filtered,
    /// Updated by applying a patch (Z39.99-2014 §14.4).
    Patched(u64),
    /// Not tried yet: a file is where its directory goes, or a directory where it goes, which a
    /// delete of this run may take away (see `crate::fetch::exec::Exec`).
    Deferred,
    /// Bytes received for a resource counted already in this run ([`Outcome::again`]).
    Bytes(u64),
    /// A delete at the Source of a resource with no copy here: nothing done, and no resource
    /// of the Source to count.
    NoCopy,
}

impl Outcome {
    /// The outcome of a job for a resource this run counted already (a change the catch-up
    /// after a baseline applies to a copy the baseline made: `crate::sync::catch_up`): its
    /// bytes and its failure count, the rest does not (each resource once in a report).
    pub(crate) fn again(self) -> Outcome {
        match self {
            Outcome::Created(n) | Outcome::Updated(n) | Outcome::Patched(n) => Outcome::Bytes(n),
            Outcome::Unchanged | Outcome::Filtered => Outcome::Counted,
            o => o,
        }
    }

    /// [`Outcome::again`] when `again`.
    pub(crate) fn again_if(self, again: bool) -> Outcome {
        if again { self.again() } else { self }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) created: u64,
    pub(crate) updated: u64,
    pub(crate) deleted: u64,
    /// Files no resource maps to, removed by `--delete` (crate::sync::extras).
    pub(crate) extra_deleted: u64,
    pub(crate) kept: u64,
    pub(crate) filtered: u64,
    pub(crate) unchanged: u64,
    pub(crate) repaired: u64,
    pub(crate) failed: u64,
    pub(crate) bytes: u64,
    pub(crate) failures: Vec<Failure>,
    pub(crate) kept_uris: Vec<String>,
    pub(crate) planned: Vec<Planned>,
    pub(crate) packages: u64,
    pub(crate) from_packages: u64,
    pub(crate) patched: u64,
    /// Fetches handed to the workers sharing the state (crate::share).
    pub(crate) shared: u64,
}

impl Tally {
    /// Adds what dump packages did (Z39.99-2014 §11, §13).
    pub(crate) fn add_dumps(&mut self, d: &DumpStats) {
        // Failures only where no list fetches what the packages left out (crate::dump).
        self.failed += d.run_failed;
        for f in &d.failures {
            push_capped(&mut self.failures, f.clone());
        }
        self.created += d.created;
        self.updated += d.updated;
        self.deleted += d.deleted;
        self.unchanged += d.unchanged;
        self.bytes += d.bytes;
        self.packages += d.packages;
        self.from_packages += d.created + d.updated;
    }

    pub(crate) fn merge(&mut self, o: Tally) {
        self.created += o.created;
        self.updated += o.updated;
        self.deleted += o.deleted;
        self.extra_deleted += o.extra_deleted;
        self.kept += o.kept;
        self.filtered += o.filtered;
        self.unchanged += o.unchanged;
        self.repaired += o.repaired;
        self.failed += o.failed;
        self.bytes += o.bytes;
        self.packages += o.packages;
        self.from_packages += o.from_packages;
        self.patched += o.patched;
        self.shared += o.shared;
        for f in o.failures {
            push_capped(&mut self.failures, f);
        }
        for k in o.kept_uris {
            push_capped(&mut self.kept_uris, k);
        }
        for p in o.planned {
            push_capped(&mut self.planned, p);
        }
    }

    pub(crate) fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Created(n) => {
                self.created += 1;
                self.bytes += n;
            }
            Outcome::Updated(n) => {
                self.updated += 1;
                self.bytes += n;
            }
            Outcome::Repaired(n) => {
                self.repaired += 1;
                self.bytes += n;
            }
            Outcome::Unchanged => self.unchanged += 1,
            Outcome::Deleted => self.deleted += 1,
            Outcome::Kept(uri) => {
                self.kept += 1;
                push_capped(&mut self.kept_uris, uri);
            }
            Outcome::Failed(f) => {
                self.failed += 1;
                push_capped(&mut self.failures, f);
            }
            Outcome::Planned(p) => {
                match p.action {
                    "create" => self.created += 1,
                    "update" => self.updated += 1,
                    "delete" => self.deleted += 1,
                    _ => self.kept += 1,
                }
                push_capped(&mut self.planned, p);
            }
            Outcome::Filtered => self.filtered += 1,
            Outcome::Counted | Outcome::Deferred | Outcome::NoCopy => {}
            Outcome::Bytes(n) => self.bytes += n,
            Outcome::Patched(n) => {
                self.updated += 1;
                self.patched += 1;
                self.bytes += n;
            }
        }
    }
}

/// What applying dumps did.
#[derive(Debug, Clone, Default)]
pub(crate) struct DumpStats {
    /// Packages applied (possibly with some entries failed).
    pub packages: u64,
    /// Packages refused as a whole.
    pub refused: u64,
    /// Copies written that did not exist.
    pub created: u64,
    /// Copies replaced.
    pub updated: u64,
    /// Copies removed (Change Dumps, `--delete`).
    pub deleted: u64,
    /// Entries whose copy was already in place.
    pub unchanged: u64,
    /// Entries that failed.
    pub failed: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The Resource Dump's `at` (Z39.99-2014 §11.1).
    pub at: Option<W3cDateTime>,
    /// Whether the Source's lists fetch what the packages leave out (a Resource List after a
    /// Resource Dump, the Change Lists after a Change Dump): a failed entry or a refused
    /// package is then a warning; without them, a failure of the run (`crate::dump` `entry_failed`).
    pub lists: bool,
    /// Entries and packages that failed the run (without lists), all counted.
    pub run_failed: u64,
    /// Those failures (at most [`crate::report::MAX_LISTED`]).
    pub failures: Vec<Failure>,
    /// The latest change time of the Change Dump entries taken into account (applied, or
    /// failed and kept as pending).
    pub last: Option<W3cDateTime>,
    /// The `from` of the Change Dump package refused first, without lists: the packages after
    /// it are not applied, and the cursor does not move past it (Z39.99-2014 §13.1: forward
    /// chronological order).
    pub stopped: Option<W3cDateTime>,
}
