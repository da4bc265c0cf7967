//! The types of ResourceSync documents (Z39.99-2014 §7, Table 2 and Table 3; Z39.99-2017 §7;
//! Change Notification 1.0.1; Archives 0.9.1).

use std::fmt;

use crate::datetime::W3cDateTime;
use crate::hash::Hashes;

/// The Sitemap namespace.
pub const SITEMAP_NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";
/// The ResourceSync namespace (with its trailing slash).
pub const RS_NS: &str = "http://www.openarchives.org/rs/terms/";
/// The `patch` link relation (Z39.99-2014 §14.4, Example 27).
pub const REL_PATCH: &str = "http://www.openarchives.org/rs/terms/patch";

/// Sitemap limit on entries per document (Z39.99-2014 §7).
pub const MAX_ENTRIES: usize = 50_000;
/// Sitemap limit on the size of a document, in bytes (Z39.99-2014 §7: 50 MB).
pub const MAX_DOCUMENT_BYTES: u64 = 50 * 1024 * 1024;

/// The value of the `capability` attribute: what a document (on the root `<rs:md>`) or a linked
/// document (on an entry's `<rs:md>`) is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `description`: a Source Description (§8).
    Description,
    /// `capabilitylist` (§9).
    CapabilityList,
    /// `resourcelist` (§10.1); on a `<sitemapindex>`, a Resource List Index (§10.2).
    ResourceList,
    /// `resourcedump` (§11.1).
    ResourceDump,
    /// `resourcedump-manifest` (§11.2).
    ResourceDumpManifest,
    /// `changelist` (§12.1); on a `<sitemapindex>`, a Change List Index (§12.2).
    ChangeList,
    /// `changedump` (§13.1).
    ChangeDump,
    /// `changedump-manifest` (§13.2).
    ChangeDumpManifest,
    /// `resourcelist-archive` (Archives §3).
    ResourceListArchive,
    /// `resourcedump-archive` (Archives §4).
    ResourceDumpArchive,
    /// `changelist-archive` (Archives §5).
    ChangeListArchive,
    /// `changedump-archive` (Archives §6).
    ChangeDumpArchive,
    /// `change-notification` (Change Notification 1.0.1).
    ChangeNotification,
    /// `changelist-notification`: the draft name of `change-notification`, accepted on input.
    ChangeListNotification,
    /// `framework-notification` (Framework Notification 1.0.1).
    FrameworkNotification,
    /// Any other value, kept as written.
    Other(String),
}

impl Capability {
    /// Every defined capability, in the order of the specifications.
    pub const DEFINED: [Capability; 15] = [
        Capability::Description,
        Capability::CapabilityList,
        Capability::ResourceList,
        Capability::ResourceDump,
        Capability::ResourceDumpManifest,
        Capability::ChangeList,
        Capability::ChangeDump,
        Capability::ChangeDumpManifest,
        Capability::ResourceListArchive,
        Capability::ResourceDumpArchive,
        Capability::ChangeListArchive,
        Capability::ChangeDumpArchive,
        Capability::ChangeNotification,
        Capability::ChangeListNotification,
        Capability::FrameworkNotification,
    ];

    /// Reads a `capability` value.
    pub fn parse(s: &str) -> Self {
        Self::DEFINED
            .iter()
            .find(|c| c.as_str() == s)
            .cloned()
            .unwrap_or_else(|| Capability::Other(s.to_owned()))
    }

    /// The value as written.
    pub fn as_str(&self) -> &str {
        match self {
            Capability::Description => "description",
            Capability::CapabilityList => "capabilitylist",
            Capability::ResourceList => "resourcelist",
            Capability::ResourceDump => "resourcedump",
            Capability::ResourceDumpManifest => "resourcedump-manifest",
            Capability::ChangeList => "changelist",
            Capability::ChangeDump => "changedump",
            Capability::ChangeDumpManifest => "changedump-manifest",
            Capability::ResourceListArchive => "resourcelist-archive",
            Capability::ResourceDumpArchive => "resourcedump-archive",
            Capability::ChangeListArchive => "changelist-archive",
            Capability::ChangeDumpArchive => "changedump-archive",
            Capability::ChangeNotification => "change-notification",
            Capability::ChangeListNotification => "changelist-notification",
            Capability::FrameworkNotification => "framework-notification",
            Capability::Other(s) => s,
        }
    }

    /// Documents that describe changes and carry `from`/`until` (Z39.99-2014 §7, Appendix A).
    pub fn is_change_kind(&self) -> bool {
        matches!(
            self,
            Capability::ChangeList
                | Capability::ChangeDump
                | Capability::ChangeDumpManifest
                | Capability::ChangeNotification
                | Capability::ChangeListNotification
                | Capability::FrameworkNotification
        )
    }

    /// Documents that describe a snapshot and carry `at`/`completed` (Appendix A).
    pub fn is_snapshot_kind(&self) -> bool {
        matches!(
            self,
            Capability::ResourceList | Capability::ResourceDump | Capability::ResourceDumpManifest
        )
    }

    /// Archive documents (Archives 0.9.1).
    pub fn is_archive(&self) -> bool {
        matches!(
            self,
            Capability::ResourceListArchive
                | Capability::ResourceDumpArchive
                | Capability::ChangeListArchive
                | Capability::ChangeDumpArchive
        )
    }

    /// Notification payloads (Change Notification 1.0.1, Framework Notification 1.0.1).
    pub fn is_notification(&self) -> bool {
        matches!(
            self,
            Capability::ChangeNotification
                | Capability::ChangeListNotification
                | Capability::FrameworkNotification
        )
    }

    /// Manifests inside dump packages.
    pub fn is_manifest(&self) -> bool {
        matches!(
            self,
            Capability::ResourceDumpManifest | Capability::ChangeDumpManifest
        )
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The value of the `change` attribute (Z39.99-2014 §7).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Change {
    /// `created`
    Created,
    /// `updated`
    Updated,
    /// `deleted`
    Deleted,
    /// Any other value, kept as written.
    Other(String),
}

impl Change {
    /// Reads a `change` value.
    pub fn parse(s: &str) -> Self {
        match s {
            "created" => Change::Created,
            "updated" => Change::Updated,
            "deleted" => Change::Deleted,
            other => Change::Other(other.to_owned()),
        }
    }

    /// The value as written.
    pub fn as_str(&self) -> &str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Deleted => "deleted",
            Change::Other(s) => s,
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `<changefreq>` hint (Sitemap protocol; Z39.99-2014 §7).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChangeFreq {
    /// `always`
    Always,
    /// `hourly`
    Hourly,
    /// `daily`
    Daily,
    /// `weekly`
    Weekly,
    /// `monthly`
    Monthly,
    /// `yearly`
    Yearly,
    /// `never`
    Never,
    /// Any other value, kept as written.
    Other(String),
}

impl ChangeFreq {
    /// Reads a `<changefreq>` value (surrounding white space is ignored).
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "always" => ChangeFreq::Always,
            "hourly" => ChangeFreq::Hourly,
            "daily" => ChangeFreq::Daily,
            "weekly" => ChangeFreq::Weekly,
            "monthly" => ChangeFreq::Monthly,
            "yearly" => ChangeFreq::Yearly,
            "never" => ChangeFreq::Never,
            _ => ChangeFreq::Other(s.to_owned()),
        }
    }

    /// The value as written.
    pub fn as_str(&self) -> &str {
        match self {
            ChangeFreq::Always => "always",
            ChangeFreq::Hourly => "hourly",
            ChangeFreq::Daily => "daily",
            ChangeFreq::Weekly => "weekly",
            ChangeFreq::Monthly => "monthly",
            ChangeFreq::Yearly => "yearly",
            ChangeFreq::Never => "never",
            ChangeFreq::Other(s) => s,
        }
    }
}

/// An attribute in a namespace other than ResourceSync's, kept for a faithful round trip
/// (Z39.99-2014 §7: "Communities may introduce additional attributes ... must use an XML
/// Namespace other than that of ResourceSync").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtAttr {
    /// The qualified name as written (`prefix:local`).
    pub name: String,
    /// The namespace URI the prefix is bound to (empty when unbound).
    pub namespace: String,
    /// The unescaped value.
    pub value: String,
}

/// An element in a namespace other than Sitemap's and ResourceSync's, kept as serialized XML.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtElement {
    /// The namespace URI of the element.
    pub namespace: String,
    /// The element as XML text, with the qualified names it was written with.
    pub xml: String,
}

/// An `<rs:md>` element: metadata about the document (on the root) or a resource (in an entry).
///
/// The attribute names follow Z39.99-2014 Table 3 and Z39.99-2017 §7 (`datetime`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Metadata {
    /// `capability`
    pub capability: Option<Capability>,
    /// `at`: when the snapshot began.
    pub at: Option<W3cDateTime>,
    /// `completed`: when the snapshot ended.
    pub completed: Option<W3cDateTime>,
    /// `from`: start of the period covered.
    pub from: Option<W3cDateTime>,
    /// `until`: end of the period covered.
    pub until: Option<W3cDateTime>,
    /// `change`
    pub change: Option<Change>,
    /// `datetime`: when the change event happened (Z39.99-2017 §7).
    pub datetime: Option<W3cDateTime>,
    /// `hash`
    pub hash: Option<Hashes>,
    /// `length`
    pub length: Option<u64>,
    /// `type`: the media type.
    pub mime_type: Option<String>,
    /// `encoding`: the content coding.
    pub encoding: Option<String>,
    /// `path`: location of the bitstream in a dump package.
    pub path: Option<String>,
    /// Attributes in other namespaces.
    pub extra: Vec<ExtAttr>,
    /// ResourceSync attributes that were present but whose value could not be read (`at`,
    /// `hash`, ...): the reader reports each as a finding and leaves its field unset, and the
    /// validator does not report it missing as well. Never written.
    pub invalid: Unreadable,
}

/// A set of the `<rs:md>` attributes whose values can fail to read (`at`, `completed`, `from`,
/// `until`, `datetime`, `hash`, `length`), kept in one byte.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Unreadable(u8);

impl Unreadable {
    /// The attributes the set can hold, in the order of its bits.
    pub const NAMES: [&'static str; 7] = [
        "at",
        "completed",
        "from",
        "until",
        "datetime",
        "hash",
        "length",
    ];

    fn bit(name: &str) -> Option<u8> {
        Self::NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| 1u8 << i)
    }

    /// Adds an attribute (names outside [`Self::NAMES`] are ignored).
    pub fn insert(&mut self, name: &str) {
        if let Some(b) = Self::bit(name) {
            self.0 |= b;
        }
    }

    /// Whether the attribute is in the set.
    pub fn contains(&self, name: &str) -> bool {
        Self::bit(name).is_some_and(|b| self.0 & b != 0)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The attributes in the set.
    pub fn iter(&self) -> impl Iterator<Item = &'static str> + '_ {
        Self::NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

impl Metadata {
    /// Metadata with only a capability.
    pub fn with_capability(capability: Capability) -> Self {
        Metadata {
            capability: Some(capability),
            ..Metadata::default()
        }
    }

    /// Whether no attribute is set.
    pub fn is_empty(&self) -> bool {
        *self == Metadata::default()
    }
}

/// An `<rs:ln>` element: a link to a related resource or document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Link {
    /// `rel` (mandatory).
    pub rel: String,
    /// `href` (mandatory).
    pub href: String,
    /// `pri`: 1 (highest) to 999,999 (the default).
    pub pri: Option<u32>,
    /// `modified`
    pub modified: Option<W3cDateTime>,
    /// `hash`
    pub hash: Option<Hashes>,
    /// `length`
    pub length: Option<u64>,
    /// `type`
    pub mime_type: Option<String>,
    /// `encoding`
    pub encoding: Option<String>,
    /// `path`
    pub path: Option<String>,
    /// `profile`
    pub profile: Option<String>,
    /// Attributes in other namespaces.
    pub extra: Vec<ExtAttr>,
}

impl Link {
    /// A link with a relation and a target.
    pub fn new(rel: impl Into<String>, href: impl Into<String>) -> Self {
        Link {
            rel: rel.into(),
            href: href.into(),
            ..Link::default()
        }
    }

    /// Whether `rel` contains the relation type (a `rel` may list several, space-separated).
    /// Relation types are compared without regard to case (RFC 5988 §4.1, §4.2, cited by
    /// Z39.99-2014 §7).
    pub fn has_rel(&self, rel: &str) -> bool {
        self.rel
            .split_ascii_whitespace()
            .any(|r| r.eq_ignore_ascii_case(rel))
    }

    /// The priority, 999,999 when absent (Z39.99-2014 §7).
    pub fn priority(&self) -> u32 {
        self.pri.unwrap_or(999_999)
    }
}

/// The root element of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Root {
    /// `<urlset>`: a document listing resources.
    UrlSet,
    /// `<sitemapindex>`: an index listing documents.
    SitemapIndex,
}

impl Root {
    /// The root element's name.
    pub fn element(self) -> &'static str {
        match self {
            Root::UrlSet => "urlset",
            Root::SitemapIndex => "sitemapindex",
        }
    }

    /// The name of its entry elements.
    pub fn entry_element(self) -> &'static str {
        match self {
            Root::UrlSet => "url",
            Root::SitemapIndex => "sitemap",
        }
    }
}

/// A line and column in a document (1-based; the column counts bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Position {
    /// Line, from 1.
    pub line: u64,
    /// Column in bytes, from 1.
    pub column: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// What comes before the entries: the root, its `<rs:md>` and `<rs:ln>` children.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// The root element.
    pub root: Root,
    /// The root `<rs:md>`; mandatory in every ResourceSync document, absent in a plain Sitemap.
    pub md: Option<Metadata>,
    /// The root `<rs:ln>` elements.
    pub links: Vec<Link>,
    /// Namespace declarations on the root other than the Sitemap and ResourceSync ones, as
    /// `(prefix, uri)` (empty prefix for a default namespace), kept for extensions.
    pub namespaces: Vec<(String, String)>,
    /// Attributes of the root in other namespaces.
    pub extra: Vec<ExtAttr>,
    /// Extension elements among the root's children before the first entry.
    pub extensions: Vec<ExtElement>,
}

impl Header {
    /// A header for a document of a capability.
    pub fn new(root: Root, md: Metadata) -> Self {
        Header {
            root,
            md: Some(md),
            links: Vec::new(),
            namespaces: Vec::new(),
            extra: Vec::new(),
            extensions: Vec::new(),
        }
    }

    /// The document's capability, if its root `<rs:md>` has one.
    pub fn capability(&self) -> Option<&Capability> {
        self.md.as_ref().and_then(|m| m.capability.as_ref())
    }

    /// Whether the document is an index (`<sitemapindex>`).
    pub fn is_index(&self) -> bool {
        self.root == Root::SitemapIndex
    }

    /// The first root link with a relation.
    pub fn link(&self, rel: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.has_rel(rel))
    }

    /// A short name of the document kind, e.g. "Resource List Index".
    pub fn kind_name(&self) -> String {
        let base = match self.capability() {
            None => {
                return format!("Sitemap {}", if self.is_index() { "index" } else { "" })
                    .trim_end()
                    .to_owned();
            }
            Some(c) => match c {
                Capability::Description => "Source Description",
                Capability::CapabilityList => "Capability List",
                Capability::ResourceList => "Resource List",
                Capability::ResourceDump => "Resource Dump",
                Capability::ResourceDumpManifest => "Resource Dump Manifest",
                Capability::ChangeList => "Change List",
                Capability::ChangeDump => "Change Dump",
                Capability::ChangeDumpManifest => "Change Dump Manifest",
                Capability::ResourceListArchive => "Resource List Archive",
                Capability::ResourceDumpArchive => "Resource Dump Archive",
                Capability::ChangeListArchive => "Change List Archive",
                Capability::ChangeDumpArchive => "Change Dump Archive",
                Capability::ChangeNotification | Capability::ChangeListNotification => {
                    "Change Notification"
                }
                Capability::FrameworkNotification => "Framework Notification",
                Capability::Other(s) => return format!("unknown capability {s:?}"),
            },
        };
        if self.is_index() {
            format!("{base} Index")
        } else {
            base.to_owned()
        }
    }
}

/// A `<url>` or `<sitemap>` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Entry {
    /// `<loc>` (mandatory), white space trimmed.
    pub loc: String,
    /// `<lastmod>`
    pub lastmod: Option<W3cDateTime>,
    /// `<changefreq>`
    pub changefreq: Option<ChangeFreq>,
    /// `<priority>` of the Sitemap protocol, kept as written.
    pub priority: Option<String>,
    /// `<rs:md>` (not repeatable).
    pub md: Option<Metadata>,
    /// `<rs:ln>` elements.
    pub links: Vec<Link>,
    /// Extension elements (other namespaces), e.g. `<image:image>`.
    pub extensions: Vec<ExtElement>,
    /// Where the entry starts in the document it was read from (zero when built in code).
    pub position: Position,
}

impl Entry {
    /// An entry with only a `<loc>`.
    pub fn new(loc: impl Into<String>) -> Self {
        Entry {
            loc: loc.into(),
            ..Entry::default()
        }
    }

    /// The `<rs:md>` of the entry, created empty when absent.
    pub fn md_mut(&mut self) -> &mut Metadata {
        self.md.get_or_insert_with(Metadata::default)
    }

    /// The change recorded for the entry, if any.
    pub fn change(&self) -> Option<&Change> {
        self.md.as_ref().and_then(|m| m.change.as_ref())
    }

    /// The time of an entry of a change document: its 1.1 `datetime` when given, otherwise its
    /// `<lastmod>` (Z39.99-2017 §12.1; Z39.99-2014 §12.1). A `<lastmod>` need not agree with
    /// the `datetime`s of other entries (Z39.99-2017 §7), so the validator orders a document
    /// whose entries carry `datetime` by `datetime` alone.
    pub fn change_time(&self) -> Option<&W3cDateTime> {
        self.md
            .as_ref()
            .and_then(|m| m.datetime.as_ref())
            .or(self.lastmod.as_ref())
    }

    /// The length from `<rs:md>`.
    pub fn length(&self) -> Option<u64> {
        self.md.as_ref().and_then(|m| m.length)
    }

    /// The digests from `<rs:md>`.
    pub fn hashes(&self) -> Option<&Hashes> {
        self.md.as_ref().and_then(|m| m.hash.as_ref())
    }

    /// The first link with a relation.
    pub fn link(&self, rel: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.has_rel(rel))
    }
}
