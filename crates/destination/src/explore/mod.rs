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

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

use resourcesync_model::validate::validate_each;
use resourcesync_model::{
    Capability, DocumentReader, Error as ModelError, Header, ReadOptions, Severity, W3cDateTime,
};
use serde::Serialize;

use crate::discover::discover;
use crate::discover::docs::DocFetcher;
use crate::error::{Error, Result};
use crate::http::{Http, HttpOptions};
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
/// Most findings counted in detail per document (the rest are counted only).
const MAX_FINDINGS: usize = 1000;

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

/// A link to follow, from a parent document.
#[derive(Debug, Clone)]
struct ChildRef {
    url: String,
    via: &'static str,
    /// What the parent says the document is (§9 entry `capability`; an index's parts share its
    /// capability, §10.2, §12.2; a dump's `contents` is its manifest, §11.1, §13.1).
    expected: Option<Capability>,
    /// For a dump's package: what its entry says about it.
    package: Option<Package>,
}

#[derive(Debug, Clone)]
struct Package {
    length: Option<u64>,
    mime_type: Option<String>,
    at: Option<W3cDateTime>,
    completed: Option<W3cDateTime>,
    contents: Option<String>,
}

/// What reading one document gave.
#[derive(Debug)]
struct Scanned {
    header: Header,
    entries: u64,
    bytes: u64,
    span: Option<(W3cDateTime, W3cDateTime)>,
    errors: u64,
    warnings: u64,
    messages: Vec<String>,
    children: Vec<ChildRef>,
    more: u64,
}

/// How the entries of a document lead on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Follow {
    /// Entries are resources: nothing to follow.
    Nothing,
    /// Entries are documents (Source Description, Capability List, index, archive).
    Documents {
        via: &'static str,
        expected: Option<Capability>,
        bounded: bool,
    },
    /// Entries are packages whose `contents` link is a manifest (dumps).
    Packages { manifest: Capability },
}

fn follow(h: &Header) -> Follow {
    let cap = h.capability();
    if h.is_index() {
        // §10.2, §12.2 (and the same for dumps, §11.1, §13.1): the parts are documents of the
        // index's own capability.
        return Follow::Documents {
            via: "part",
            expected: cap.cloned(),
            bounded: true,
        };
    }
    match cap {
        Some(Capability::Description | Capability::CapabilityList) => Follow::Documents {
            via: "entry",
            expected: None,
            bounded: false,
        },
        Some(Capability::ResourceDump) => Follow::Packages {
            manifest: Capability::ResourceDumpManifest,
        },
        Some(Capability::ChangeDump) => Follow::Packages {
            manifest: Capability::ChangeDumpManifest,
        },
        // Archives 0.9.1 §3–§6: each archive lists documents of one kind.
        Some(Capability::ResourceListArchive) => archive(Capability::ResourceList),
        Some(Capability::ResourceDumpArchive) => archive(Capability::ResourceDump),
        Some(Capability::ChangeListArchive) => archive(Capability::ChangeList),
        Some(Capability::ChangeDumpArchive) => archive(Capability::ChangeDump),
        _ => Follow::Nothing,
    }
}

fn archive(kind: Capability) -> Follow {
    Follow::Documents {
        via: "entry",
        expected: Some(kind),
        bounded: true,
    }
}

/// Reads a downloaded document once: validates it and collects the links to follow (at most
/// `max_parts` of an index, dump or archive, `max_listed` of other documents; the rest are
/// counted).
/// What a node says of the document scanned (its messages taken).
fn describe(n: &mut ExploreNode, s: &mut Scanned) {
    let h = &s.header;
    n.kind = h.kind_name();
    n.capability = h.capability().map(|c| c.as_str().to_owned());
    n.entries = Some(s.entries);
    n.bytes = Some(s.bytes);
    if let Some(md) = &h.md {
        n.at = md.at;
        n.completed = md.completed;
        n.from = md.from;
        n.until = md.until;
    }
    n.span = s.span.map(|(first, last)| Span { first, last });
    n.errors = s.errors;
    n.warnings = s.warnings;
    n.messages = std::mem::take(&mut s.messages);
    n.more = s.more;
}

fn scan(
    path: &std::path::Path,
    url: &str,
    max_bytes: u64,
    max_parts: usize,
    max_listed: usize,
    max_messages: usize,
) -> std::result::Result<Scanned, ModelError> {
    let f = File::open(path).map_err(|source| ModelError::Io {
        doc: Arc::from(url),
        source,
    })?;
    let mut opts = ReadOptions::named(url);
    opts.max_document_bytes = max_bytes.max(1);
    opts.max_findings = MAX_FINDINGS;
    let r = DocumentReader::open(f, opts)?;
    let header = r.header().clone();
    let how = follow(&header);
    let mut children = Vec::new();
    let mut more = 0u64;
    // One pass: the model's validation, and the links to follow.
    let report = validate_each(r, |e| {
        let (limit, child) = match &how {
            Follow::Nothing => return,
            Follow::Documents {
                via,
                expected,
                bounded,
            } => {
                let listed = e.md.as_ref().and_then(|m| m.capability.clone());
                // Notifications are pushed (Change Notification 1.0.1 §3), not fetched.
                if listed.as_ref().is_some_and(Capability::is_notification) {
                    return;
                }
                // A Source Description or Capability List is followed in full, within the
                // document limit.
                let limit = if *bounded { max_parts } else { max_listed };
                (
                    limit,
                    ChildRef {
                        url: e.loc.clone(),
                        via,
                        expected: listed.or_else(|| expected.clone()),
                        package: None,
                    },
                )
            }
            Follow::Packages { .. } => {
                let md = e.md.as_ref();
                (
                    max_parts,
                    ChildRef {
                        url: e.loc.clone(),
                        via: "package",
                        expected: None,
                        package: Some(Package {
                            length: md.and_then(|m| m.length),
                            mime_type: md.and_then(|m| m.mime_type.clone()),
                            at: md.and_then(|m| m.at),
                            completed: md.and_then(|m| m.completed),
                            contents: e.link("contents").map(|l| l.href.clone()),
                        }),
                    },
                )
            }
        };
        if children.len() < limit {
            children.push(child);
        } else {
            more += 1;
        }
    })?;
    let bytes = report.bytes;
    let all = &report.findings;
    let kept = all.as_slice();
    let messages = kept
        .iter()
        .filter(|f| f.severity() == Severity::Error)
        .chain(kept.iter().filter(|f| f.severity() == Severity::Warning))
        .take(max_messages)
        .map(ToString::to_string)
        .collect();
    Ok(Scanned {
        entries: report.entries,
        bytes,
        span: report.time_span,
        errors: all.error_count(),
        warnings: all.warning_count(),
        messages,
        children,
        more,
        header,
    })
}

struct Explorer<'a> {
    f: &'a DocFetcher,
    opts: &'a ExploreOptions,
    obs: &'a dyn Observer,
    /// URL → the kind found (or expected) there.
    visited: HashMap<String, String>,
    fetched: usize,
    /// The path (child indexes from the root) of the node being read.
    path: Vec<usize>,
    /// Links of document headers (`archives`, `index`), followed once the entries are done so
    /// that a document appears where its parent lists it: (referrer's path, link, depth).
    later: VecDeque<(Vec<usize>, ChildRef, usize)>,
}

fn node_at<'a>(roots: &'a mut [ExploreNode], path: &[usize]) -> Option<&'a mut ExploreNode> {
    let (first, rest) = path.split_first()?;
    let mut n = roots.get_mut(*first)?;
    for i in rest {
        n = n.children.get_mut(*i)?;
    }
    Some(n)
}

impl Explorer<'_> {
    async fn visit(&mut self, c: ChildRef, depth: usize) -> ExploreNode {
        if let Some(p) = &c.package {
            return Box::pin(self.package(&c, p, depth)).await;
        }
        let expected = c
            .expected
            .as_ref()
            .map_or_else(|| "document".to_owned(), kind_of);
        if let Some(kind) = self.visited.get(&c.url) {
            let mut n = ExploreNode::new(&c.url, c.via, NodeStatus::Repeated);
            n.kind.clone_from(kind);
            return n;
        }
        self.visited.insert(c.url.clone(), expected.clone());
        let skip = if self.fetched >= self.opts.max_documents {
            Some(format!(
                "not read: {} documents read already",
                self.opts.max_documents
            ))
        } else if depth > self.opts.max_depth {
            Some(format!(
                "not read: deeper than {} levels",
                self.opts.max_depth
            ))
        } else {
            None
        };
        if let Some(why) = skip {
            let mut n = ExploreNode::new(&c.url, c.via, NodeStatus::Skipped);
            n.kind = expected;
            n.messages.push(why);
            return n;
        }
        self.fetched += 1;
        let (mut node, next) = self.read(&c, depth).await;
        self.obs.resource_done();
        self.visited.insert(c.url.clone(), node.kind.clone());
        for (i, child) in next.into_iter().enumerate() {
            self.path.push(i);
            let n = Box::pin(self.visit(child, depth + 1)).await;
            self.path.pop();
            node.children.push(n);
        }
        node
    }

    /// A package of a dump (§11.1, §13.1): listed with what its entry says; its manifest read.
    async fn package(&mut self, c: &ChildRef, p: &Package, depth: usize) -> ExploreNode {
        let mut n = ExploreNode::new(&c.url, "package", NodeStatus::Package);
        n.kind = match &p.mime_type {
            Some(t) => format!("package ({t})"),
            None => "package".to_owned(),
        };
        n.bytes = p.length;
        n.at = p.at;
        n.completed = p.completed;
        if let Some(m) = &p.contents {
            self.path.push(0);
            let node = self
                .visit(
                    ChildRef {
                        url: m.clone(),
                        via: "contents",
                        expected: c.expected.clone(),
                        package: None,
                    },
                    depth + 1,
                )
                .await;
            self.path.pop();
            n.children.push(node);
        }
        n
    }

    /// Fetches and reads one document; returns its node and the entries to follow (header links
    /// go to [`Self::later`]).
    async fn read(&mut self, c: &ChildRef, depth: usize) -> (ExploreNode, Vec<ChildRef>) {
        let mut n = ExploreNode::new(&c.url, c.via, NodeStatus::Unreadable);
        n.kind = c
            .expected
            .as_ref()
            .map_or_else(|| "document".to_owned(), kind_of);
        let dl = match self.f.download(&c.url).await {
            Ok(d) => d,
            Err(e) => {
                n.errors = 1;
                n.messages.push(e.to_string());
                return (n, Vec::new());
            }
        };
        let (url, max, parts, listed, msgs) = (
            c.url.clone(),
            self.f.max_bytes,
            self.opts.max_parts,
            self.opts.max_documents,
            self.opts.max_messages,
        );
        let scanned =
            tokio::task::spawn_blocking(move || scan(&dl.file, &url, max, parts, listed, msgs))
                .await;
        let mut s = match scanned {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                if e.is_invalid_input() {
                    // Not a well-formed Sitemap document (or refused: DTD, limits).
                    n.status = NodeStatus::Invalid;
                    n.kind = "not a ResourceSync document".to_owned();
                }
                n.errors = 1;
                n.messages.push(e.to_string());
                return (n, Vec::new());
            }
            Err(e) => {
                n.errors = 1;
                n.messages.push(format!("internal task failed: {e}"));
                return (n, Vec::new());
            }
        };
        describe(&mut n, &mut s);
        let h = &s.header;
        // What the parent said the document is (§9: an entry's `capability` is the linked
        // document's; §10.2, §12.2: an index lists documents of its capability).
        if let (Some(want), Some(got)) = (&c.expected, h.capability()) {
            if want != got {
                n.errors += 1;
                let msg = format!(
                    "listed as {want} (via {}), but its capability is {got} (Z39.99-2014 §9, §10.2)",
                    c.via
                );
                n.messages.insert(0, msg);
                n.messages.truncate(self.opts.max_messages.max(1));
            }
        }
        n.status = if n.errors == 0 {
            NodeStatus::Valid
        } else {
            NodeStatus::Invalid
        };
        let mut next = s.children;
        if let Follow::Packages { manifest } = follow(h) {
            for c in &mut next {
                c.expected = Some(manifest.clone());
            }
        }
        self.queue_header_links(h, depth);
        (n, next)
    }

    /// Queues the documents a header links to ([`Self::later`]): its archive, and the index of
    /// a list.
    fn queue_header_links(&mut self, h: &Header, depth: usize) {
        // Archives 0.9.1 §2.2: any document may link to its archive.
        if let Some(a) = h.link("archives") {
            self.later.push_back((
                self.path.clone(),
                ChildRef {
                    url: a.href.clone(),
                    via: "archives",
                    expected: None,
                    package: None,
                },
                depth + 1,
            ));
        }
        // §10.2, §12.1: a list links to its index, which may list documents not reached
        // otherwise (a Capability List naming the open Change List only).
        if !h.is_index() {
            if let (Some(ix), Some(cap)) = (h.link("index"), h.capability()) {
                self.later.push_back((
                    self.path.clone(),
                    ChildRef {
                        url: ix.href.clone(),
                        via: "index",
                        expected: Some(cap.clone()),
                        package: None,
                    },
                    depth + 1,
                ));
            }
        }
    }

    /// Follows the header links not reached through entries, attaching each document under the
    /// first document that links to it.
    async fn follow_later(&mut self, roots: &mut [ExploreNode]) {
        while let Some((path, c, depth)) = self.later.pop_front() {
            if self.visited.contains_key(&c.url) {
                continue;
            }
            let Some(at) = node_at(roots, &path).map(|p| p.children.len()) else {
                continue;
            };
            self.path.clone_from(&path);
            self.path.push(at);
            let node = self.visit(c, depth).await;
            if let Some(parent) = node_at(roots, &path) {
                parent.children.push(node);
            }
        }
    }
}

fn kind_of(c: &Capability) -> String {
    Header::new(
        resourcesync_model::Root::UrlSet,
        resourcesync_model::Metadata::with_capability(c.clone()),
    )
    .kind_name()
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

/// Where exploring starts: what discovery found from `url` (its Source Description, Capability
/// List and Resource List), or, when it found several sets, each of them (all are explored,
/// §8).
async fn starting_points(fetcher: &DocFetcher, url: &str) -> Result<(SourceInfo, Vec<String>)> {
    Ok(match discover(fetcher, url, None).await {
        Ok(info) => {
            let mut starts = Vec::new();
            starts.extend(info.description.clone());
            starts.extend(info.capability_list.clone());
            starts.extend(info.resource_list.clone());
            (info, starts)
        }
        // Several sets are no problem here: all are explored, from the Source Description
        // when discovery reached one (§8), else each Capability List.
        Err(Error::SeveralSets { url, found }) => {
            let mut starts = Vec::new();
            if !url.ends_with("/robots.txt") {
                starts.push(url.clone());
            }
            starts.extend(found);
            let info = SourceInfo {
                description: (!url.ends_with("/robots.txt")).then_some(url),
                ..SourceInfo::default()
            };
            (info, starts)
        }
        Err(e) => return Err(e),
    })
}

/// The report's totals over its nodes, and the notes they call for.
fn totals(r: &mut ExploreReport, opts: &ExploreOptions) {
    for root in &r.roots {
        root.for_each(&mut |n| {
            match n.status {
                NodeStatus::Valid => r.valid += 1,
                NodeStatus::Invalid => r.invalid += 1,
                NodeStatus::Unreadable => r.unreadable += 1,
                NodeStatus::Skipped => r.skipped += 1,
                NodeStatus::Repeated | NodeStatus::Package => {}
            }
            if matches!(
                n.status,
                NodeStatus::Valid | NodeStatus::Invalid | NodeStatus::Unreadable
            ) {
                r.documents += 1;
                r.errors += n.errors;
                r.warnings += n.warnings;
            }
            r.not_expanded += n.more;
        });
    }
    if r.not_expanded > 0 {
        r.notes.push(format!(
            "{} listed document(s) or package(s) not followed (at most {} per document)",
            r.not_expanded, opts.max_parts
        ));
    }
    if r.skipped > 0 {
        r.notes.push(format!(
            "{} document(s) not read (limits: {} documents, depth {})",
            r.skipped, opts.max_documents, opts.max_depth
        ));
    }
}

async fn explore_inner(opts: &ExploreOptions, obs: Arc<dyn Observer>) -> Result<ExploreReport> {
    let started = Instant::now();
    let http = Arc::new(Http::new(opts.http.clone())?);
    let scratch =
        tempfile::tempdir().map_err(|e| Error::io("creating a temporary directory", e))?;
    let fetcher = DocFetcher::new(http, scratch.path(), opts.max_document_bytes);
    obs.phase("discovery");
    let mut notes = Vec::new();
    let (source, starts) = starting_points(&fetcher, &opts.url).await?;
    notes.extend(source.warnings.iter().cloned());
    obs.phase("exploring");
    let mut ex = Explorer {
        f: &fetcher,
        opts,
        obs: obs.as_ref(),
        visited: HashMap::new(),
        fetched: 0,
        path: Vec::new(),
        later: VecDeque::new(),
    };
    let mut roots: Vec<ExploreNode> = Vec::new();
    for s in starts {
        if ex.visited.contains_key(&s) {
            continue;
        }
        if !roots.is_empty() {
            notes.push(format!(
                "{s}: not reachable from the documents above; explored on its own"
            ));
        }
        ex.path = vec![roots.len()];
        let node = ex
            .visit(
                ChildRef {
                    url: s,
                    via: "start",
                    expected: None,
                    package: None,
                },
                0,
            )
            .await;
        roots.push(node);
        ex.follow_later(&mut roots).await;
    }
    let mut r = ExploreReport {
        url: opts.url.clone(),
        source,
        roots,
        documents: 0,
        valid: 0,
        invalid: 0,
        unreadable: 0,
        errors: 0,
        warnings: 0,
        not_expanded: 0,
        skipped: 0,
        seconds: 0.0,
        notes,
    };
    totals(&mut r, opts);
    r.seconds = started.elapsed().as_secs_f64();
    Ok(r)
}

#[cfg(test)]
mod tests;
