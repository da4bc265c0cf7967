//! The model crate's error type.

use std::io;

use crate::category::Category;
use std::sync::Arc;

use crate::document::Position;

/// A limit the reader enforces on hostile input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    /// Bytes in the (decompressed) document.
    DocumentBytes,
    /// Bytes in one markup token: a tag with its attributes, or a run of text.
    TokenBytes,
    /// Element nesting depth.
    Depth,
    /// Namespace bindings in scope.
    NamespaceBindings,
    /// Links and extension elements in one entry or header.
    Children,
}

impl LimitKind {
    /// The rule id under which the limit is reported.
    pub fn rule(self) -> &'static str {
        match self {
            LimitKind::DocumentBytes => "LIMIT-document-bytes",
            LimitKind::TokenBytes => "LIMIT-token-bytes",
            LimitKind::Depth => "LIMIT-depth",
            LimitKind::NamespaceBindings => "LIMIT-namespaces",
            LimitKind::Children => "LIMIT-children",
        }
    }

    fn what(self) -> &'static str {
        match self {
            LimitKind::DocumentBytes => "document larger than",
            LimitKind::TokenBytes => "markup token or text run larger than",
            LimitKind::Depth => "elements nested deeper than",
            LimitKind::NamespaceBindings => "more namespace bindings than",
            LimitKind::Children => "more links and extension elements in one entry than",
        }
    }
}

/// Everything that can go wrong reading or writing documents.
///
/// Every variant that concerns a document names it (`doc`) and, where known, the line and
/// column, and the rule it breaks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document is not well-formed XML (or not UTF-8).
    #[error("{doc}:{pos}: error[XML-wellformed]: {message}")]
    Malformed {
        /// Document name.
        doc: Arc<str>,
        /// Where.
        pos: Position,
        /// What the XML parser said.
        message: String,
    },
    /// The document uses a feature refused for safety: a DTD, or an entity that is not one of
    /// XML's five predefined ones (no entity is ever expanded, no external resource loaded).
    #[error("{doc}:{pos}: error[XML-no-dtd]: {message}")]
    Forbidden {
        /// Document name.
        doc: Arc<str>,
        /// Where.
        pos: Position,
        /// What was refused.
        message: String,
    },
    /// A configured limit was exceeded.
    #[error("{doc}:{pos}: error[{}]: {} {max}", .limit.rule(), .limit.what())]
    Limit {
        /// Document name.
        doc: Arc<str>,
        /// Where.
        pos: Position,
        /// Which limit.
        limit: LimitKind,
        /// Its value.
        max: u64,
    },
    /// The document is XML but not a Sitemap or ResourceSync document.
    #[error("{doc}:{pos}: error[{rule}]: {message}")]
    NotSitemap {
        /// Document name.
        doc: Arc<str>,
        /// Where.
        pos: Position,
        /// The rule broken.
        rule: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Reading the document failed.
    #[error("{doc}: error[IO]: {source}")]
    Io {
        /// Document name.
        doc: Arc<str>,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Writing a document failed.
    #[error("writing {doc}: {source}")]
    Write {
        /// Document name (or part).
        doc: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A value cannot be written as asked (e.g. an empty `<loc>`).
    #[error("cannot write {doc}: {message}")]
    Unwritable {
        /// Document name.
        doc: String,
        /// Why.
        message: String,
    },
    /// A path that could leave the destination directory, or that no file system accepts
    /// ([`crate::path::RelPath`]).
    #[error("unsafe path {path:?}: {reason}")]
    UnsafePath {
        /// The path (or segment) refused, cut to 80 characters.
        path: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A URI that cannot be mapped to a path under the destination ([`crate::mapping`]).
    #[error("refused {uri}: {reason}")]
    Unmappable {
        /// The URI, cut to 200 characters.
        uri: String,
        /// Why.
        reason: String,
    },
}

impl Error {
    /// The rule id this error reports, as printed (`XML-wellformed`, `LIMIT-depth`, ...).
    pub fn rule(&self) -> &'static str {
        match self {
            Error::Malformed { .. } => "XML-wellformed",
            Error::Forbidden { .. } => "XML-no-dtd",
            Error::Limit { limit, .. } => limit.rule(),
            Error::NotSitemap { rule, .. } => rule,
            Error::Io { .. } | Error::Write { .. } => "IO",
            Error::Unwritable { .. } => "WRITE",
            Error::UnsafePath { .. } | Error::Unmappable { .. } => "PATH",
        }
    }

    /// Where in the document, when known.
    pub fn position(&self) -> Option<Position> {
        match self {
            Error::Malformed { pos, .. }
            | Error::Forbidden { pos, .. }
            | Error::Limit { pos, .. }
            | Error::NotSitemap { pos, .. } => Some(*pos),
            _ => None,
        }
    }

    /// What a caller can do about it: a document that is invalid or too large is skipped
    /// (reported, the run goes on and ends with status 1); reading it again may help when its
    /// stream failed; a document that cannot be written stops the run when storage is full or
    /// read-only (see [`Category::of_io`]).
    pub fn category(&self) -> Category {
        match self {
            Error::Io { source, .. } => match Category::of_io(source) {
                Category::Stop => Category::Stop,
                _ => Category::Retry,
            },
            Error::Write { source, .. } => Category::of_io(source),
            Error::Malformed { .. }
            | Error::Forbidden { .. }
            | Error::Limit { .. }
            | Error::NotSitemap { .. }
            | Error::Unwritable { .. }
            | Error::UnsafePath { .. }
            | Error::Unmappable { .. } => Category::Skip,
        }
    }

    /// Whether the error is about the input itself (as opposed to I/O).
    pub fn is_invalid_input(&self) -> bool {
        !matches!(self, Error::Io { .. } | Error::Write { .. })
    }
}
