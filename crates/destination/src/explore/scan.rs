//! One document read: streamed once through the model's validation while the links to follow
//! from it are collected ([`scan`]), and what its node in the tree says of it ([`describe`]).

use std::fs::File;
use std::sync::Arc;

use resourcesync_model::validate::validate_each;
use resourcesync_model::{
    Capability, DocumentReader, Error as ModelError, Header, ReadOptions, Severity, W3cDateTime,
};

use super::{ExploreNode, Span};

/// Most findings counted in detail per document (the rest are counted only).
const MAX_FINDINGS: usize = 1000;

/// A link to follow, from a parent document.
#[derive(Debug, Clone)]
pub(super) struct ChildRef {
    pub(super) url: String,
    pub(super) via: &'static str,
    /// What the parent says the document is (§9 entry `capability`; an index's parts share its
    /// capability, §10.2, §12.2; a dump's `contents` is its manifest, §11.1, §13.1).
    pub(super) expected: Option<Capability>,
    /// For a dump's package: what its entry says about it.
    pub(super) package: Option<Package>,
}

#[derive(Debug, Clone)]
pub(super) struct Package {
    pub(super) length: Option<u64>,
    pub(super) mime_type: Option<String>,
    pub(super) at: Option<W3cDateTime>,
    pub(super) completed: Option<W3cDateTime>,
    pub(super) contents: Option<String>,
}

/// What reading one document gave.
#[derive(Debug)]
pub(super) struct Scanned {
    pub(super) header: Header,
    entries: u64,
    bytes: u64,
    span: Option<(W3cDateTime, W3cDateTime)>,
    errors: u64,
    warnings: u64,
    messages: Vec<String>,
    pub(super) children: Vec<ChildRef>,
    more: u64,
}

/// How the entries of a document lead on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Follow {
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

pub(super) fn follow(h: &Header) -> Follow {
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

/// What a node says of the document scanned (its messages taken).
pub(super) fn describe(n: &mut ExploreNode, s: &mut Scanned) {
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

/// Reads a downloaded document once: validates it and collects the links to follow (at most
/// `max_parts` of an index, dump or archive, `max_listed` of other documents; the rest are
/// counted).
pub(super) fn scan(
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
