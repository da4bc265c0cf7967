//! Explore: the tree of a Source's documents, each validated.
//!
//! From any URL, discovery ([`crate::discover()`], Z39.99-2014 §6.3) finds the Source
//! Description (§8) or the Capability List (§9); from there the documents are followed down:
//!
//! - a Source Description lists Capability Lists (§8), a Capability List lists one document per
//!   capability (§9), including archives (Archives 0.9.1 §2.1);
//! - an index (`<sitemapindex>`) lists its parts (§10.2, §12.2): at most
//!   [`ExploreOptions::max_parts`] are read, the rest are counted;
//! - a Resource Dump or Change Dump lists packages (§11.1, §13.1), listed but not fetched; the
//!   `contents` link of each leads to its manifest (§11.2, §13.2), which is read;
//! - an archive lists earlier documents of one kind (Archives §3–§6);
//! - any document's `archives` link (Archives §2.2), and a list's `index` link (§10.2, §12.1), lead
//!   to documents not reached otherwise.
//!
//! Every document is downloaded to a temporary file by the [`DocFetcher`] and streamed once: the
//! model's [`Validator`](resourcesync_model::Validator) (what [`resourcesync_model::validate::validate`] runs) checks every entry
//! while the links to follow are collected. A document is also checked against what its parent
//! said it is (an entry's `capability`, an index's capability, §9, §10.2). The walk is bounded: a
//! visited set (a document listed twice is shown once), a depth limit, and a limit on documents
//! read.
//!
//! [`DocFetcher`]: crate::discover::docs::DocFetcher

use std::sync::Arc;
use std::time::Duration;

use resourcesync_model::W3cDateTime;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::http::HttpOptions;
use crate::options::DEFAULT_MAX_DOCUMENT_BYTES;
use crate::report::Observer;
use crate::report::SourceInfo;

/// Default most documents read: 10,000.
pub const DEFAULT_MAX_DOCUMENTS: usize = 10_000;
/// Default most parts of an index (or packages of a dump, entries of an archive) followed.
pub const DEFAULT_MAX_PARTS: usize = 100;
/// Default deepest level followed (the Source Description is level 0).
pub const DEFAULT_MAX_DEPTH: usize = 8;
/// Default findings quoted per document.
pub const DEFAULT_MAX_MESSAGES: usize = 3;

/// How to explore.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    /// Where discovery starts: a site root, a page, or any ResourceSync document.
    pub url: String,
    /// The HTTP client.
    pub http: HttpOptions,
    /// Most bytes of a document.
    pub max_document_bytes: u64,
    /// Most documents read (fetch attempts); past it, documents are listed as skipped.
    pub max_documents: usize,
    /// Most children followed per document (index parts, dump packages, archive entries); the
    /// rest are counted in [`ExploreNode::more`].
    pub max_parts: usize,
    /// Deepest level followed (the first document is level 0).
    pub max_depth: usize,
    /// Findings quoted per document.
    pub max_messages: usize,
    /// Time limit for the whole run.
    pub deadline: Option<Duration>,
}

impl ExploreOptions {
    /// Defaults for a URL.
    pub fn new(url: impl Into<String>) -> Self {
        ExploreOptions {
            url: url.into(),
            http: HttpOptions::default(),
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            max_documents: DEFAULT_MAX_DOCUMENTS,
            max_parts: DEFAULT_MAX_PARTS,
            max_depth: DEFAULT_MAX_DEPTH,
            max_messages: DEFAULT_MAX_MESSAGES,
            deadline: None,
        }
    }
}

/// What became of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeStatus {
    /// Read, no error (warnings allowed).
    Valid,
    /// Read, with errors.
    Invalid,
    /// Could not be fetched or read at all.
    Unreadable,
    /// Already shown elsewhere in the tree.
    Repeated,
    /// Not read: a limit (documents, depth) was reached.
    Skipped,
    /// A package of a dump: listed, not fetched.
    Package,
}

/// Earliest and latest entry time (change time, else `<lastmod>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    /// The earliest.
    pub first: W3cDateTime,
    /// The latest.
    pub last: W3cDateTime,
}

/// One document (or package) of the tree.
#[derive(Debug, Clone, Serialize)]
pub struct ExploreNode {
    /// Its URL.
    pub url: String,
    /// How its parent leads to it: `start`, `entry`, `part`, `package`, `contents`, `index`,
    /// `archives`.
    pub via: &'static str,
    /// Its kind, e.g. "Change List Index", "Resource Dump Manifest", "package".
    pub kind: String,
    /// The capability of its root `<rs:md>`, if any.
    pub capability: Option<String>,
    /// What became of it.
    pub status: NodeStatus,
    /// Entries read.
    pub entries: Option<u64>,
    /// Bytes read (after decompression), or the length published for a package.
    pub bytes: Option<u64>,
    /// `at` of the root `<rs:md>` (snapshot documents), or of the package.
    pub at: Option<W3cDateTime>,
    /// `completed` of the root `<rs:md>`, or of the package.
    pub completed: Option<W3cDateTime>,
    /// `from` of the root `<rs:md>` (change documents).
    pub from: Option<W3cDateTime>,
    /// `until` of the root `<rs:md>`.
    pub until: Option<W3cDateTime>,
    /// The entries' time span.
    pub span: Option<Span>,
    /// Errors found (the document is invalid when there is any).
    pub errors: u64,
    /// Warnings found.
    pub warnings: u64,
    /// The first findings, errors first (`line:column: severity[rule]: message (section)`), or
    /// why the document could not be read.
    pub messages: Vec<String>,
    /// Documents it leads to.
    pub children: Vec<ExploreNode>,
    /// Children listed in it but not followed ([`ExploreOptions::max_parts`]).
    pub more: u64,
}

impl ExploreNode {
    fn new(url: &str, via: &'static str, status: NodeStatus) -> Self {
        ExploreNode {
            url: url.to_owned(),
            via,
            kind: String::new(),
            capability: None,
            status,
            entries: None,
            bytes: None,
            at: None,
            completed: None,
            from: None,
            until: None,
            span: None,
            errors: 0,
            warnings: 0,
            messages: Vec::new(),
            children: Vec::new(),
            more: 0,
        }
    }

    /// Visits this node and every node below it, depth first.
    pub fn for_each(&self, f: &mut impl FnMut(&ExploreNode)) {
        f(self);
        for c in &self.children {
            c.for_each(f);
        }
    }
}

/// What an exploration found.
#[derive(Debug, Clone, Serialize)]
pub struct ExploreReport {
    /// Where it started.
    pub url: String,
    /// What discovery found.
    pub source: SourceInfo,
    /// The trees: usually one, from the Source Description (several when there is none and
    /// discovery found several Capability Lists, or when a document is not reachable from the
    /// top).
    pub roots: Vec<ExploreNode>,
    /// Documents read.
    pub documents: u64,
    /// Documents without errors.
    pub valid: u64,
    /// Documents with errors.
    pub invalid: u64,
    /// Documents that could not be fetched or read.
    pub unreadable: u64,
    /// Errors in all documents.
    pub errors: u64,
    /// Warnings in all documents.
    pub warnings: u64,
    /// Children not followed ([`ExploreOptions::max_parts`]).
    pub not_expanded: u64,
    /// Documents not read because of the document or depth limit.
    pub skipped: u64,
    /// Seconds taken.
    pub seconds: f64,
    /// Notes (discovery warnings, limits reached).
    pub notes: Vec<String>,
}

impl ExploreReport {
    /// Whether every document read is valid (warnings allowed) and none was unreadable.
    pub fn is_valid(&self) -> bool {
        self.invalid == 0 && self.unreadable == 0
    }
}

/// Explores a Source from any URL (see the module docs). Errors are fatal: discovery found
/// nothing, or the time limit was reached; documents that cannot be read are reported in the
/// tree.
pub async fn explore(opts: &ExploreOptions, obs: Arc<dyn Observer>) -> Result<ExploreReport> {
    match opts.deadline {
        Some(d) => tokio::time::timeout(d, explore_inner(opts, obs))
            .await
            .map_err(|_| Error::Deadline(d))?,
        None => explore_inner(opts, obs).await,
    }
}

mod scan;
mod walk;
use walk::explore_inner;

#[cfg(test)]
mod tests;
