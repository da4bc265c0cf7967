//! The ResourceSync document model (ANSI/NISO Z39.99-2014 and Z39.99-2017), sans I/O.
//!
//! - [`document`]: types for every document kind, root and entry.
//! - [`reader`]: a streaming reader that yields the header, then entries one at a time, in
//!   bounded memory, refusing DTDs and entity expansion.
//! - [`writer`]: a deterministic streaming writer that splits into numbered parts and an index
//!   past 50,000 entries or 50 MB.
//! - [`datetime`]: W3C Datetimes kept at their precision.
//! - [`hash`]: the `hash` attribute and one-pass md5 / sha-1 / sha-256.
//! - [`mod@validate`]: every rule of the specifications, with stable ids ([`rules`]).
//! - [`path`]: [`RelPath`](path::RelPath), a checked relative path under a destination
//!   directory; [`mapping`]: the rule from resource URIs to such paths (a Destination's layout).
//! - [`package`]: the checks of a dump package that need no I/O (Z39.99-2014 §11.2, §13.2):
//!   manifest `path`s against "ZIP slip", ZIP entries against zip bombs, manifest entries against
//!   ZIP entries.
//! - [`discovery`]: the parsers of Source discovery (Z39.99-2014 §6.3): `Link` headers
//!   (RFC 8288), HTML `<link>` and `robots.txt` `Sitemap:` lines.
//! - [`redact`]: credentials taken out of URLs, and out of texts that carry them, before they are
//!   shown (pages, APIs, logs, printed configurations).
//! - [`category`]: [`Category`], what a caller can do about an error (retry, skip, stop),
//!   which every crate's error type answers.
//!
//! Nothing here opens a socket or a file by itself: readers and writers work over
//! [`std::io::BufRead`] and [`std::io::Write`], the discovery parsers over text.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod category;
pub mod datetime;
pub mod discovery;
pub mod document;
pub mod error;
pub mod finding;
pub mod hash;
pub mod mapping;
pub mod package;
pub mod path;
pub mod reader;
pub mod redact;
pub mod rules;
pub mod validate;
pub mod writer;

pub use category::Category;
pub use datetime::{Precision, W3cDateTime};
pub use document::{
    Capability, Change, ChangeFreq, Entry, ExtAttr, ExtElement, Header, Link, Metadata, Position,
    Root, Unreadable,
};
pub use error::{Error, LimitKind};
pub use finding::{Finding, Findings, Severity};
pub use hash::{Digest, HashAlg, Hashes, MultiHasher};
pub use reader::{DocumentReader, ReadOptions};
pub use validate::{Report, Validator, validate};
pub use writer::{DocumentWriter, PartSink, SplitLimits, SplitWriter, Target};
