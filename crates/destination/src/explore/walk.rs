//! The walk down a Source's documents: from discovery's starting points, each document
//! visited once, depth first, within the limits; header links followed once the entries are
//! done; the report's totals.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use resourcesync_model::{Capability, Header};

use super::scan::{ChildRef, Follow, Package, describe, follow, scan};
use super::{ExploreNode, ExploreOptions, ExploreReport, NodeStatus};
use crate::discover::discover;
use crate::discover::docs::DocFetcher;
use crate::error::{Error, Result};
use crate::http::Http;
use crate::report::{Observer, SourceInfo};

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

pub(super) fn kind_of(c: &Capability) -> String {
    Header::new(
        resourcesync_model::Root::UrlSet,
        resourcesync_model::Metadata::with_capability(c.clone()),
    )
    .kind_name()
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

pub(super) async fn explore_inner(
    opts: &ExploreOptions,
    obs: Arc<dyn Observer>,
) -> Result<ExploreReport> {
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
