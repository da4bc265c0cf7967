//! The rules documents are checked against, each with a stable id, the section that states it
//! and a severity: error for MUST / MUST NOT / "mandatory", warning for SHOULD / "recommended".
//!
//! Ids are `PREFIX-SECTION-name`: `RS` for the framework (Z39.99-2014, with 1.1 additions
//! marked in the section), `CN` for Change Notification 1.0.1, `FN` for Framework Notification
//! 1.0.1, `AR` for the Archives draft, `SM` for the Sitemap protocol the framework builds on, and
//! `XML`/`LIMIT` for the reader's own refusals. Ids never change once released; `ALL` lists them
//! all (see `resourcesync validate --rules`).

use std::fmt;

/// A rule documents are checked against.
#[derive(Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Rule {
    /// Stable id, e.g. `RS-12.1-chronological`.
    pub id: &'static str,
    /// Error (MUST) or warning (SHOULD).
    pub severity: Severity,
    /// Where the rule is stated, e.g. `Z39.99-2014 §12.1`.
    pub section: &'static str,
    /// The rule in one sentence.
    pub summary: &'static str,
}

macro_rules! rules {
    ($( $name:ident = ($id:literal, $sev:ident, $section:literal, $summary:literal); )*) => {
        $(
            // The summary as plain text: summaries name elements (`<urlset>`), which rustdoc
            // would take for HTML.
            #[doc = concat!("`", $id, "` (", $section, "):\n\n```text\n", $summary, "\n```")]
            pub const $name: &Rule = &Rule {
                id: $id,
                severity: Severity::$sev,
                section: $section,
                summary: $summary,
            };
        )*
        /// Every rule, in the order of the specifications.
        pub const ALL: &[&Rule] = &[$($name),*];
    };
}

rules! {
    // --- The reader's refusals (fatal) -------------------------------------------------------
    XML_WELLFORMED = ("XML-wellformed", Error, "XML 1.0 §2.1, §2.6, §2.8",
        "The document must be well-formed XML encoded in UTF-8: at most one XML declaration, at the very start and following its grammar, and no processing instruction named xml in any case.");
    XML_NO_DTD = ("XML-no-dtd", Error, "SECURITY.md",
        "DTDs and entities other than the five predefined ones are refused, never expanded.");
    LIMIT_DOCUMENT_BYTES = ("LIMIT-document-bytes", Error, "SECURITY.md",
        "The document must not exceed the configured size.");
    LIMIT_TOKEN_BYTES = ("LIMIT-token-bytes", Error, "SECURITY.md",
        "A tag or text run must not exceed the configured size.");
    LIMIT_DEPTH = ("LIMIT-depth", Error, "SECURITY.md",
        "Elements must not nest deeper than the configured depth.");
    LIMIT_NAMESPACES = ("LIMIT-namespaces", Error, "SECURITY.md",
        "No more namespace bindings than the configured number may be in scope.");
    LIMIT_CHILDREN = ("LIMIT-children", Error, "SECURITY.md",
        "An entry must not have more links and extension elements than the configured number.");

    // --- Sitemap protocol as used by the framework -----------------------------------------
    SM_ROOT = ("SM-root", Error, "Z39.99-2014 §7",
        "The root element must be <urlset> or <sitemapindex> in the Sitemap namespace.");
    SM_UTF8 = ("SM-utf8", Error, "Sitemap protocol; Z39.99-2014 §7",
        "Documents must be UTF-8 encoded.");
    SM_ENTRY_ELEMENT = ("SM-entry-element", Error, "Z39.99-2014 §7",
        "<urlset> contains <url> entries and <sitemapindex> contains <sitemap> entries.");
    SM_UNKNOWN_ELEMENT = ("SM-unknown-element", Warning, "Z39.99-2014 §7",
        "Elements in the Sitemap or ResourceSync namespace must be ones the specifications define.");
    SM_TEXT = ("SM-text", Error, "Z39.99-2014 §7",
        "Text is only allowed inside <loc>, <lastmod>, <changefreq> and <priority>.");
    SM_LOC_MANDATORY = ("SM-loc-mandatory", Error, "Z39.99-2014 §7",
        "Every entry must have exactly one non-empty <loc>.");
    SM_LOC_URI = ("SM-loc-uri", Error, "Z39.99-2014 §7; Sitemap protocol",
        "<loc> must be an absolute URI.");
    SM_LOC_LENGTH = ("SM-loc-length", Warning, "Sitemap protocol",
        "<loc> should be shorter than 2,048 characters.");
    SM_LASTMOD = ("SM-lastmod", Error, "Z39.99-2014 §7",
        "<lastmod> must be a W3C Datetime.");
    SM_CHANGEFREQ = ("SM-changefreq", Error, "Z39.99-2014 §7",
        "<changefreq> must be always, hourly, daily, weekly, monthly, yearly or never.");
    SM_DUPLICATE_CHILD = ("SM-duplicate-child", Error, "Z39.99-2014 §7",
        "<loc>, <lastmod>, <changefreq> and <rs:md> appear at most once per entry.");
    SM_MAX_ENTRIES = ("SM-max-entries", Error, "Z39.99-2014 §7",
        "A document must not have more than 50,000 entries.");
    SM_MAX_BYTES = ("SM-max-bytes", Error, "Z39.99-2014 §7",
        "A document must not be larger than 50 MB.");

    // --- Framework: elements and attributes (§7, Table 3) -----------------------------------
    RS_MD_MANDATORY = ("RS-7-md-mandatory", Error, "Z39.99-2014 §4, §7",
        "The root must have an <rs:md> child, in the namespace http://www.openarchives.org/rs/terms/ (with its trailing slash); its use is mandatory.");
    RS_MD_POSITION = ("RS-7-md-position", Error, "Z39.99-2014 §7, Table 2",
        "The root's <rs:md> and <rs:ln> come before the first entry (a root <rs:md> after it leaves the document a plain Sitemap).");
    RS_CAPABILITY_MANDATORY = ("RS-7-capability-mandatory", Error, "Z39.99-2014 §7",
        "The root <rs:md> must have a capability attribute.");
    RS_CAPABILITY_VALUE = ("RS-7-capability-value", Warning, "Z39.99-2014 §7, §6.1",
        "capability should be a value defined by the framework or its extension specifications.");
    RS_ATTR_UNPREFIXED = ("RS-7-attr-unprefixed", Error, "Z39.99-2014 §7",
        "ResourceSync attributes must not have an XML Namespace prefix.");
    RS_ATTR_FOREIGN = ("RS-7-attr-foreign", Error, "Z39.99-2014 §7",
        "Attributes not defined by ResourceSync must be in another namespace, with a prefix.");
    RS_DATETIME = ("RS-7-datetime", Error, "Z39.99-2014 §7; Appendix A",
        "at, completed, from, until, datetime and modified must be W3C Datetimes.");
    RS_DATETIME_FORM = ("RS-7-datetime-form", Warning, "Z39.99-2014 §7",
        "at, completed, from and until should be complete datetimes in UTC written with Z (YYYY-MM-DDThh:mm:ss[.s]Z).");
    RS_HASH_SYNTAX = ("RS-7-hash-syntax", Error, "Z39.99-2014 §7",
        "hash is a whitespace-delimited list of alg:digest values; every digest is hex-encoded, of the algorithm's length for md5, sha-1 and sha-256.");
    RS_LENGTH = ("RS-7-length", Error, "Z39.99-2014 §7",
        "length must be a non-negative integer.");
    RS_CHANGE_VALUE = ("RS-7-change-value", Error, "Z39.99-2014 §7",
        "change must be created, updated or deleted.");
    RS_LN_REL = ("RS-7-ln-rel", Error, "Z39.99-2014 §7",
        "<rs:ln> must have a non-empty rel attribute.");
    RS_LN_HREF = ("RS-7-ln-href", Error, "Z39.99-2014 §7",
        "<rs:ln> must have a non-empty href attribute.");
    RS_LN_PRI = ("RS-7-ln-pri", Error, "Z39.99-2014 §7",
        "pri must be an integer between 1 and 999,999.");
    RS_LN_REL_REGISTERED = ("RS-7-rel-registered", Warning, "Z39.99-2014 §7; RFC 5988 §4.1, §4.2",
        "Relation types must be registered with IANA or be URIs (compared without regard to case).");
    RS_EMPTY_ELEMENT = ("RS-7-empty-element", Error, "Z39.99-2014 §7; resourcesync.xsd",
        "<rs:md> and <rs:ln> are empty elements.");
    RS_LN_HREF_URI = ("RS-7-href-uri", Warning, "Z39.99-2014 §7; RFC 4287",
        "href should be an absolute URI.");
    RS_AT_NOT_USED = ("RS-7-at-not-used", Warning, "Z39.99-2014 §7; Appendix A",
        "at and completed are not used on change documents (Change Lists, Change Dumps, their indexes and manifests).");
    RS_FROM_NOT_USED = ("RS-7-from-not-used", Warning, "Z39.99-2014 §7; Appendix A",
        "from and until are not used on snapshot documents (Resource Lists, Resource Dumps, their indexes and manifests).");
    RS_ENTRY_AT_NOT_USED = ("RS-7-entry-at-not-used", Warning, "Z39.99-2014 §7; Appendix A",
        "An entry's at and completed are only used in Resource List Indexes, Resource Dumps and their indexes, and archives.");
    RS_ENTRY_FROM_NOT_USED = ("RS-7-entry-from-not-used", Warning, "Z39.99-2014 §7; Appendix A",
        "An entry's from and until are only used in Change List Indexes, Change Dumps and their indexes, and archives.");
    RS_PATH_NOT_USED = ("RS-7-path-not-used", Warning, "Z39.99-2014 §7",
        "path is only used in Resource Dump Manifests and Change Dump Manifests.");
    RS_CHANGE_NOT_USED = ("RS-7-change-not-used", Warning, "Z39.99-2014 §7",
        "change is used in Change Lists, Change Dump Manifests and notifications.");
    RS_DATETIME_NOT_USED = ("RS-7-datetime-not-used", Warning, "Z39.99-2017 §7",
        "An entry's datetime is used in Change Lists, Change Dump Manifests and notifications.");
    RS_UNTIL_AFTER_FROM = ("RS-7-until-after-from", Error, "Z39.99-2014 §7; Appendix A",
        "until must not be earlier than from.");
    RS_COMPLETED_AFTER_AT = ("RS-7-completed-after-at", Warning, "Z39.99-2014 §7",
        "completed should not be earlier than at.");
    RS_DATETIME_IN_RANGE = ("RS-7-datetime-in-range", Error, "Z39.99-2017 §7",
        "An entry's datetime must be at or after the document's from and at or before its until.");
    RS_AT_MANDATORY = ("RS-A-at-mandatory", Error, "Z39.99-2014 §10.1, §10.2, §11.1, §11.2; Appendix A",
        "Resource Lists, Resource Dumps, their indexes and Resource Dump Manifests must have at on the root <rs:md>.");
    RS_FROM_MANDATORY = ("RS-A-from-mandatory", Error, "Z39.99-2014 §12.1, §12.2, §13.1, §13.2; Appendix A",
        "Change Lists, Change Dumps, their indexes and Change Dump Manifests must have from on the root <rs:md>.");
    RS_UP_MANDATORY = ("RS-6.2-up-mandatory", Error, "Z39.99-2014 §9, §10.1, §10.2, §11.1, §11.2, §12.1, §12.2, §13.1, §13.2; Archives §3-6",
        "Capability Lists and capability documents must have a root <rs:ln rel=\"up\"> (to the Source Description, respectively the Capability List).");
    RS_DESCRIBEDBY = ("RS-9-describedby", Warning, "Z39.99-2014 §8, §9",
        "Source Descriptions and Capability Lists should have a root <rs:ln rel=\"describedby\">.");
    RS_LASTMOD_OMIT = ("RS-9-lastmod-omit", Warning, "Z39.99-2014 §8, §9",
        "<lastmod> should be omitted in Source Descriptions and Capability Lists unless they are updated with every change of what they list.");
    RS_SD_ENTRY_CAPABILITY = ("RS-8-entry-capability", Error, "Z39.99-2014 §8",
        "A Source Description entry's <rs:md>, which is optional, must have capability=\"capabilitylist\" (a Source Description Index's entries are Source Descriptions).");
    RS_CAP_ENTRY_CAPABILITY = ("RS-9-entry-capability", Error, "Z39.99-2014 §7, §9",
        "Every Capability List entry must have an <rs:md> with the capability of the document it points to.");
    RS_CAP_ENTRY_VALUE = ("RS-9-entry-capability-value", Warning, "Z39.99-2014 §9; Archives §2.1; Change Notification §5",
        "A Capability List entry should point to a capability document (resourcelist, resourcedump, changelist, changedump, an archive or a notification channel).");
    RS_ONE_PER_CAPABILITY = ("RS-9-one-entry-per-capability", Error, "Z39.99-2014 §9; Archives §2.1",
        "A Capability List must have at most one entry per capability.");
    RS_CAP_NO_INDEX = ("RS-9-no-index", Warning, "Z39.99-2017 §9",
        "A Capability List should not be a <sitemapindex>.");
    RS_INDEX_NOT_ALLOWED = ("RS-7-index-not-allowed", Error, "Z39.99-2014 §11.2, §13.2; Change Notification §3; Framework Notification §3",
        "Manifests and notification payloads are <urlset> documents; they have no index form.");
    RS_LOC_DUPLICATE = ("RS-10.1-url-per-resource", Warning, "Z39.99-2014 §10.1, §11.2",
        "A Resource List or Resource Dump Manifest should have one entry per resource.");
    RS_DUMP_ENTRY_MD = ("RS-11.1-entry-md", Warning, "Z39.99-2014 §11.1, §13.1",
        "A Resource Dump or Change Dump entry should have <rs:md> with type and length of the package.");
    RS_MANIFEST_PATH = ("RS-11.2-path", Error, "Z39.99-2014 §5.1, §11.2, §13.2",
        "Every manifest entry must have a path (except deleted resources in a Change Dump Manifest).");
    RS_PATH_SLASH = ("RS-11.2-path-leading-slash", Error, "Z39.99-2014 §11.2, §13.2",
        "A manifest path must begin with a slash.");
    RS_MANIFEST_TYPE = ("RS-11.2-type", Warning, "Z39.99-2014 §11.2, §13.2",
        "A manifest entry should have a type.");
    RS_CHANGE_MANDATORY = ("RS-12.1-change-mandatory", Error, "Z39.99-2014 §5.1, §12.1, §13.2; Change Notification §3; Framework Notification §3",
        "Every entry of a Change List, Change Dump Manifest or notification must have <rs:md change=...>.");
    RS_CL_LASTMOD = ("RS-12.1-lastmod", Warning, "Z39.99-2014 §12.1, §13.2; Z39.99-2017 §7",
        "In a Change List or Change Dump Manifest ordered by <lastmod> (no entry has datetime), every entry needs <lastmod> (mandatory under 1.0, optional under 1.1).");
    RS_CL_CHRONOLOGICAL = ("RS-12.1-chronological", Error, "Z39.99-2014 §12.1; Z39.99-2017 §7, §12.1",
        "Change List entries must be in forward chronological order: by datetime where entries carry it, else (no entry has datetime) by <lastmod>.");
    RS_CLI_CHRONOLOGICAL = ("RS-12.2-chronological", Error, "Z39.99-2014 §12.2",
        "A Change List Index must list Change Lists in forward chronological order.");
    RS_CLI_OPEN_LAST = ("RS-12.2-open-last", Warning, "Z39.99-2014 §12.2",
        "Only the most recent Change List can be open (without until); earlier ones are closed and carry until.");
    RS_CLI_ENTRY_MD = ("RS-12.2-entry-md", Warning, "Z39.99-2014 §12.2; Appendix A",
        "A change document index entry should have <rs:md> with from (and until when closed).");
    RS_CD_CHRONOLOGICAL = ("RS-13.1-chronological", Warning, "Z39.99-2014 §13.1",
        "Change Dump entries should be in forward chronological order.");
    RS_CDM_CHRONOLOGICAL = ("RS-13.2-chronological", Error, "Z39.99-2014 §13.2; Z39.99-2017 §7",
        "Change Dump Manifest entries must be in forward chronological order: by datetime where entries carry it, else by <lastmod>.");
    RS_PATCH_PATH = ("RS-14.4-patch-path", Error, "Z39.99-2014 §14.4",
        "In a Change Dump Manifest a patch link must have a path.");
    RS_MEMENTO_LASTMOD = ("RS-14.6-lastmod", Warning, "Z39.99-2014 §14.6",
        "Entries with memento, timegate or timemap links need <lastmod> under 1.0.");
    CN_FROM_UNTIL = ("CN-3-from-until", Error, "Change Notification 1.0.1 §3",
        "A change notification payload must have from and until.");
    CN_DRAFT_NAME = ("CN-3-capability-name", Warning, "Change Notification 1.0.1 §3",
        "The capability is change-notification; changelist-notification is the draft name.");
    CN_CHRONOLOGICAL = ("CN-3-chronological", Error, "Change Notification 1.0.1 §3; Z39.99-2017 §7",
        "Notification entries must be in forward chronological order: by datetime where entries carry it, else by <lastmod>.");
    CN_HUB_LINK = ("CN-5-hub-link", Error, "Change Notification 1.0.1 §5; Framework Notification 1.0.1 §5",
        "A Capability List entry for a notification channel must have <rs:ln rel=\"hub\">.");
    FN_ENTRY_CAPABILITY = ("FN-3-entry-capability", Error, "Framework Notification 1.0.1 §3",
        "Every Framework Notification entry must have the capability of the document that changed.");
    AR_CONSECUTIVE = ("AR-5-consecutive", Warning, "Archives 0.9.1 §5, §6",
        "The periods of archived change documents should be consecutive, without overlap.");
    AR_CHRONOLOGICAL = ("AR-5-chronological", Error, "Archives 0.9.1 §5, §6",
        "Change List and Change Dump Archive entries must be in chronological order.");
}

/// Looks a rule up by id.
pub fn by_id(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.id == id)
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A SHOULD, a recommendation, or a suspicious construct: the document stays valid.
    Warning,
    /// A MUST or MUST NOT broken: the document is invalid.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}
