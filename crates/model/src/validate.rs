//! The validator: checks a document, streamed, against the rules of the specifications
//! ([`crate::rules`]), per document kind.
//!
//! It accepts both 1.0 (Z39.99-2014) and 1.1 (Z39.99-2017) documents. Where the versions differ
//! (1.0 makes `<lastmod>` mandatory in Change Lists; 1.1 makes it optional and orders entries by
//! `datetime`), the validator applies the 1.1 rule and reports the 1.0 one as a warning, so that
//! a valid document of either version validates: entries that carry `datetime` are ordered by
//! it, and `<lastmod>` orders (and is expected on) the entries of documents without `datetime`
//! only (see `order`).
//!
//! Every finding is one the specifications support, once per fault: a present but unreadable
//! attribute is reported as such, not also as missing ([`Metadata::invalid`]).
//!
//! Memory is bounded: per document it keeps the previous entry's time, the capabilities seen
//! (Capability Lists), a set of 64-bit hashes of the first 50,001 `<loc>`s for duplicate
//! detection, and the `<lastmod>` findings held back until it is known whether a change document
//! uses `datetime`; findings are capped (see [`Findings`]).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;

use crate::datetime::{Precision, Tz, W3cDateTime};
use crate::document::{
    Capability, Change, Entry, Header, MAX_DOCUMENT_BYTES, MAX_ENTRIES, Metadata, Position,
    REL_PATCH, RS_NS, Root,
};
use crate::error::Error;
use crate::finding::Findings;
use crate::hash::HashAlg;
use crate::reader::{DocumentReader, near_miss};
use crate::rules::{self, Rule};

mod order;

use order::ChangeOrder;

/// What a document is and what was found in it.
#[derive(Debug, Clone)]
pub struct Report {
    /// The document's name.
    pub name: String,
    /// Root element.
    pub root: Root,
    /// The capability of the root `<rs:md>`, if any.
    pub capability: Option<Capability>,
    /// A readable kind, e.g. "Change List Index".
    pub kind: String,
    /// Number of entries.
    pub entries: u64,
    /// Bytes read (after decompression).
    pub bytes: u64,
    /// Earliest and latest entry time (change time, else `<lastmod>`).
    pub time_span: Option<(W3cDateTime, W3cDateTime)>,
    /// Hash algorithms used by entries, with counts.
    pub digests: Vec<(String, u64)>,
    /// Entries per change type (change documents).
    pub changes: Vec<(String, u64)>,
    /// The findings, in document order.
    pub findings: Findings,
}

impl Report {
    /// Whether no error was found (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.findings.error_count() == 0
    }
}

/// Checks documents entry by entry. Feed it the header, every entry, then [`finish`](Self::finish).
#[derive(Debug)]
pub struct Validator {
    header: Header,
    findings: Findings,
    entries: u64,
    prev_time: Option<W3cDateTime>,
    prev_key_pos: Position,
    caps_seen: HashSet<Capability>,
    locs: HashSet<u64, BuildHasherDefault<Identity>>,
    span: Option<(W3cDateTime, W3cDateTime)>,
    digests: Vec<(HashAlg, u64)>,
    changes: Vec<(Change, u64)>,
    open_entry: Option<Position>,
    prev_until: Option<W3cDateTime>,
    header_pos: Position,
    kind: std::sync::Arc<str>,
    from: Option<W3cDateTime>,
    until: Option<W3cDateTime>,
    /// Order of the entries of change documents (by datetime, else `<lastmod>`).
    change_order: ChangeOrder,
    /// The finding for a root without `<rs:md>`, reported at the end unless the reader found
    /// it after the entries (see [`Validator::root_md_after_entries`]).
    md_missing: Option<String>,
}

fn at_snapshot_kind(c: &Capability) -> bool {
    c.is_snapshot_kind()
}

fn is_change_doc(c: &Capability) -> bool {
    matches!(
        c,
        Capability::ChangeList
            | Capability::ChangeDump
            | Capability::ChangeDumpManifest
            | Capability::ChangeNotification
            | Capability::ChangeListNotification
    )
}

/// Whether `s` looks like an absolute URI (RFC 3986 scheme followed by `:`), with no white space.
pub fn is_absolute_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Link relation types registered with IANA that ResourceSync documents use, plus common ones.
const REGISTERED_RELS: &[&str] = &[
    "about",
    "alternate",
    "archives",
    "author",
    "canonical",
    "collection",
    "contents",
    "copyright",
    "describedby",
    "describes",
    "duplicate",
    "edit",
    "enclosure",
    "first",
    "help",
    "hub",
    "icon",
    "index",
    "item",
    "last",
    "latest-version",
    "license",
    "memento",
    "next",
    "original",
    "predecessor-version",
    "prev",
    "preview",
    "previous",
    "profile",
    "related",
    "replies",
    "resourcesync",
    "search",
    "self",
    "service",
    "successor-version",
    "timegate",
    "timemap",
    "type",
    "up",
    "version-history",
    "via",
    "working-copy",
    "working-copy-of",
];

impl Validator {
    /// Starts validating a document with this header.
    /// `header_pos` is where findings about the document as a whole are reported (the root
    /// `<rs:md>`, else the root element).
    pub fn new(header: &Header, header_pos: Position, max_findings: usize) -> Self {
        let mut v = Validator {
            header: header.clone(),
            findings: Findings::new(max_findings),
            entries: 0,
            prev_time: None,
            prev_key_pos: Position::default(),
            caps_seen: HashSet::new(),
            locs: HashSet::default(),
            span: None,
            digests: Vec::new(),
            changes: Vec::new(),
            open_entry: None,
            prev_until: None,
            header_pos,
            kind: header.kind_name().into(),
            from: header.md.as_ref().and_then(|m| m.from),
            until: header.md.as_ref().and_then(|m| m.until),
            change_order: ChangeOrder::new(max_findings),
            md_missing: None,
        };
        v.check_header();
        v
    }

    fn push(&mut self, rule: &'static Rule, pos: Position, msg: impl Into<String>) {
        self.findings.push(rule, pos, msg);
    }

    /// Tells the validator that the root's `<rs:md>` came after the first entry (the reader
    /// reports that as `RS-7-md-position`, see [`DocumentReader::root_md_after_entries`]), so
    /// that it is not also reported missing: one finding per fault.
    pub fn root_md_after_entries(&mut self) {
        self.md_missing = None;
    }

    /// Why the root has no `<rs:md>`: an `<rs:md>` in a namespace that is a near miss of
    /// ResourceSync's (read as an extension), or none at all.
    fn md_missing_message(&self) -> String {
        for x in &self.header.extensions {
            let name = x
                .xml
                .get(1..)
                .unwrap_or_default()
                .split(|c: char| c.is_ascii_whitespace() || c == '/' || c == '>')
                .next()
                .unwrap_or_default();
            let local = name.rsplit(':').next().unwrap_or(name);
            if local != "md" {
                continue;
            }
            if let Some(diff) = near_miss(&x.namespace, RS_NS) {
                return format!(
                    "the root's <{name}> is in the namespace {}, not ResourceSync's: it differs by {diff}; bind the prefix to {RS_NS}",
                    x.namespace
                );
            }
        }
        format!(
            "no <rs:md> on the root: this is a plain Sitemap, not a ResourceSync document (a ResourceSync document's root has <rs:md capability=\"...\">, with rs bound to {RS_NS})"
        )
    }

    fn check_header(&mut self) {
        let pos = self.header_pos;
        let kind = self.kind.clone();
        let Some(md) = self.header.md.clone() else {
            self.md_missing = Some(self.md_missing_message());
            return;
        };
        let Some(cap) = md.capability.clone() else {
            self.push(
                rules::RS_CAPABILITY_MANDATORY,
                pos,
                "the root <rs:md> has no capability attribute",
            );
            return;
        };
        if let Capability::Other(v) = &cap {
            self.push(
                rules::RS_CAPABILITY_VALUE,
                pos,
                format!("capability {v:?} is not defined by ResourceSync"),
            );
        }
        if cap == Capability::ChangeListNotification {
            self.push(
                rules::CN_DRAFT_NAME,
                pos,
                "capability changelist-notification is the draft name of change-notification",
            );
        }
        let index = self.header.is_index();
        // Kinds without an index form.
        if index {
            match cap {
                Capability::CapabilityList => self.push(
                    rules::RS_CAP_NO_INDEX,
                    pos,
                    "a Capability List should not be a <sitemapindex>",
                ),
                Capability::ResourceDumpManifest
                | Capability::ChangeDumpManifest
                | Capability::ChangeNotification
                | Capability::ChangeListNotification
                | Capability::FrameworkNotification => self.push(
                    rules::RS_INDEX_NOT_ALLOWED,
                    pos,
                    format!("a {kind} must be a <urlset>"),
                ),
                _ => {}
            }
        }
        // Time attributes (§7, Appendix A).
        let snapshot = at_snapshot_kind(&cap);
        let change = is_change_doc(&cap) || cap == Capability::FrameworkNotification;
        // A present but unreadable at/from is reported once, as a bad datetime (RS-7-datetime).
        if snapshot && md.at.is_none() && !md.invalid.contains("at") {
            self.push(
                rules::RS_AT_MANDATORY,
                pos,
                format!("the root <rs:md> of a {kind} must have an at attribute"),
            );
        }
        if matches!(
            cap,
            Capability::ChangeList | Capability::ChangeDump | Capability::ChangeDumpManifest
        ) && md.from.is_none()
            && !md.invalid.contains("from")
        {
            self.push(
                rules::RS_FROM_MANDATORY,
                pos,
                format!("the root <rs:md> of a {kind} must have a from attribute"),
            );
        }
        if matches!(
            cap,
            Capability::ChangeNotification | Capability::ChangeListNotification
        ) && ((md.from.is_none() && !md.invalid.contains("from"))
            || (md.until.is_none() && !md.invalid.contains("until")))
        {
            self.push(
                rules::CN_FROM_UNTIL,
                pos,
                "a change notification payload must have both from and until",
            );
        }
        if change && (md.at.is_some() || md.completed.is_some()) {
            self.push(
                rules::RS_AT_NOT_USED,
                pos,
                format!("at/completed are not used on a {kind}"),
            );
        }
        if snapshot && (md.from.is_some() || md.until.is_some()) {
            self.push(
                rules::RS_FROM_NOT_USED,
                pos,
                format!("from/until are not used on a {kind}"),
            );
        }
        for (name, d) in [
            ("at", &md.at),
            ("completed", &md.completed),
            ("from", &md.from),
            ("until", &md.until),
        ] {
            let Some(d) = d else { continue };
            if d.is_recommended_form() {
                continue;
            }
            // Z39.99-2014 §7: "the use of a complete date and time expressed in UTC using the
            // format YYYY-MM-DDThh:mm:ss[.s]Z is recommended". +00:00 is UTC all the same.
            let what = match (d.tz(), d.precision() >= Precision::Second) {
                (Tz::Offset(0), true) => "is UTC, written with +00:00 rather than Z".to_owned(),
                (Tz::Offset(_), true) => "is not in UTC".to_owned(),
                _ => "is not a complete date and time".to_owned(),
            };
            self.push(
                rules::RS_DATETIME_FORM,
                pos,
                format!("{name} {d} {what}: the recommended form is YYYY-MM-DDThh:mm:ss[.s]Z"),
            );
        }
        self.check_interval(md.from.as_ref(), md.until.as_ref(), pos);
        if let (Some(a), Some(c)) = (&md.at, &md.completed) {
            if c.cmp_instant(a).is_lt() {
                self.push(
                    rules::RS_COMPLETED_AFTER_AT,
                    pos,
                    format!("completed {c} is earlier than at {a}"),
                );
            }
        }
        if md.change.is_some() || md.path.is_some() || md.hash.is_some() {
            // Entry-level attributes on the root carry no meaning; report as foreign.
            self.push(
                rules::RS_ATTR_FOREIGN,
                pos,
                "change, path and hash are entry attributes, not document attributes",
            );
        }
        // Links (§6.2, §8, §9, §10-13, Archives).
        let needs_up = !matches!(
            cap,
            Capability::Description
                | Capability::ChangeNotification
                | Capability::ChangeListNotification
                | Capability::FrameworkNotification
                | Capability::Other(_)
        );
        if needs_up && self.header.link("up").is_none() {
            let target = if cap == Capability::CapabilityList {
                "the Source Description"
            } else {
                "its Capability List"
            };
            self.push(
                rules::RS_UP_MANDATORY,
                pos,
                format!("a {kind} must have <rs:ln rel=\"up\"> pointing to {target}"),
            );
        }
        // §8 and §9 recommend the link on the <urlset> of a Source Description and a Capability
        // List; a Source Description Index is not described there.
        if (cap == Capability::CapabilityList || (cap == Capability::Description && !index))
            && self.header.link("describedby").is_none()
        {
            self.push(
                rules::RS_DESCRIBEDBY,
                pos,
                format!("a {kind} should have <rs:ln rel=\"describedby\">"),
            );
        }
        let links = self.header.links.clone();
        for l in &links {
            self.check_link(l, pos);
        }
    }

    fn check_interval(
        &mut self,
        from: Option<&W3cDateTime>,
        until: Option<&W3cDateTime>,
        pos: Position,
    ) {
        if let (Some(f), Some(u)) = (from, until) {
            if u.cmp_instant(f).is_lt() {
                self.push(
                    rules::RS_UNTIL_AFTER_FROM,
                    pos,
                    format!("until {u} is earlier than from {f}"),
                );
            }
        }
    }

    fn check_link(&mut self, l: &crate::document::Link, pos: Position) {
        if !l.href.is_empty() && !is_absolute_uri(&l.href) {
            let h: String = l.href.chars().take(80).collect();
            self.push(
                rules::RS_LN_HREF_URI,
                pos,
                format!("href {h:?} is not an absolute URI"),
            );
        }
        for r in l.rel.split_ascii_whitespace() {
            // RFC 5988 §4.1: registered relation types are compared without regard to case.
            if !REGISTERED_RELS.iter().any(|x| x.eq_ignore_ascii_case(r)) && !is_absolute_uri(r) {
                let r: String = r.chars().take(80).collect();
                self.push(
                    rules::RS_LN_REL_REGISTERED,
                    pos,
                    format!("relation type {r:?} is neither IANA-registered nor a URI"),
                );
            }
        }
    }

    /// Checks one entry.
    pub fn entry(&mut self, e: &Entry) {
        self.entries += 1;
        let pos = e.position;
        let cap = self.header.capability().cloned();
        let index = self.header.is_index();
        let kind = self.kind.clone();
        // <loc> (§7; Sitemap protocol).
        if !e.loc.is_empty() {
            if !is_absolute_uri(&e.loc) {
                let l: String = e.loc.chars().take(80).collect();
                self.push(
                    rules::SM_LOC_URI,
                    pos,
                    format!("<loc> {l:?} is not an absolute URI"),
                );
            } else if e.loc.len() >= 2048 {
                self.push(
                    rules::SM_LOC_LENGTH,
                    pos,
                    format!("<loc> is {} characters long", e.loc.len()),
                );
            }
        }
        // Statistics.
        if let Some(t) = e.change_time().copied() {
            self.span = Some(match self.span {
                None => (t, t),
                Some((a, b)) => (
                    if t.cmp_instant(&a).is_lt() { t } else { a },
                    if t.cmp_instant(&b).is_gt() { t } else { b },
                ),
            });
        }
        if let Some(h) = e.hashes() {
            for d in &h.0 {
                match self.digests.iter_mut().find(|(a, _)| *a == d.alg) {
                    Some((_, n)) => *n += 1,
                    None => self.digests.push((d.alg.clone(), 1)),
                }
            }
        }
        if let Some(c) = e.change() {
            match self.changes.iter_mut().find(|(a, _)| a == c) {
                Some((_, n)) => *n += 1,
                None => self.changes.push((c.clone(), 1)),
            }
        }
        let no_md = Metadata::default();
        let md = e.md.as_ref().unwrap_or(&no_md);
        if let Some(Change::Other(v)) = &md.change {
            let v: String = v.chars().take(40).collect();
            self.push(
                rules::RS_CHANGE_VALUE,
                pos,
                format!("change {v:?} is not created, updated or deleted"),
            );
        }
        let links = &e.links;
        for l in links {
            self.check_link(l, pos);
        }
        let Some(cap) = cap else {
            return;
        };
        // Attribute contexts (§7, Appendix A).
        let entry_at_ok = matches!(cap, Capability::ResourceDump)
            || (index && matches!(cap, Capability::ResourceList | Capability::ResourceDump))
            || matches!(
                cap,
                Capability::ResourceListArchive | Capability::ResourceDumpArchive
            );
        let entry_from_ok = matches!(cap, Capability::ChangeDump)
            || (index && matches!(cap, Capability::ChangeList | Capability::ChangeDump))
            || matches!(
                cap,
                Capability::ChangeListArchive
                    | Capability::ChangeDumpArchive
                    | Capability::FrameworkNotification
            );
        if (md.at.is_some() || md.completed.is_some()) && !entry_at_ok {
            self.push(
                rules::RS_ENTRY_AT_NOT_USED,
                pos,
                format!("an entry's at/completed are not used in a {kind}"),
            );
        }
        if (md.from.is_some() || md.until.is_some()) && !entry_from_ok {
            self.push(
                rules::RS_ENTRY_FROM_NOT_USED,
                pos,
                format!("an entry's from/until are not used in a {kind}"),
            );
        }
        self.check_interval(md.from.as_ref(), md.until.as_ref(), pos);
        if let (Some(a), Some(c)) = (&md.at, &md.completed) {
            if c.cmp_instant(a).is_lt() {
                self.push(
                    rules::RS_COMPLETED_AFTER_AT,
                    pos,
                    format!("completed {c} is earlier than at {a}"),
                );
            }
        }
        let manifest = cap.is_manifest();
        if md.path.is_some() && !manifest {
            self.push(
                rules::RS_PATH_NOT_USED,
                pos,
                format!("path is not used in a {kind}"),
            );
        }
        let change_kind = matches!(
            cap,
            Capability::ChangeList
                | Capability::ChangeDumpManifest
                | Capability::ChangeNotification
                | Capability::ChangeListNotification
                | Capability::FrameworkNotification
        ) && !index;
        if md.change.is_some() && !change_kind {
            self.push(
                rules::RS_CHANGE_NOT_USED,
                pos,
                format!("change is not used in a {kind}"),
            );
        }
        if change_kind && md.change.is_none() {
            self.push(
                rules::RS_CHANGE_MANDATORY,
                pos,
                format!("every {kind} entry must have <rs:md change=\"...\">"),
            );
        }
        if md.datetime.is_some() && !change_kind {
            // Z39.99-2017 §7: datetime "may be used in Change Lists and Change Dump Manifests";
            // it forbids nothing elsewhere, like the other attributes used in some documents only.
            self.push(
                rules::RS_DATETIME_NOT_USED,
                pos,
                format!("datetime is used in Change Lists, Change Dump Manifests and notifications, not in a {kind}"),
            );
        }
        // datetime within the document's interval (1.1 §7).
        if let Some(dt) = md.datetime.as_ref() {
            if let Some(f) = self.from.as_ref() {
                if dt.cmp_instant(f).is_lt() {
                    self.push(
                        rules::RS_DATETIME_IN_RANGE,
                        pos,
                        format!("datetime {dt} is before the document's from {f}"),
                    );
                }
            }
            if let Some(u) = self.until.as_ref() {
                if dt.cmp_instant(u).is_gt() {
                    self.push(
                        rules::RS_DATETIME_IN_RANGE,
                        pos,
                        format!("datetime {dt} is after the document's until {u}"),
                    );
                }
            }
        }
        match (&cap, index) {
            (Capability::Description, false) => {
                // §8: "An optional <rs:md> child element must have a capability attribute with
                // a value of capabilitylist".
                if let Some(m) = &e.md {
                    let msg = match &m.capability {
                        None => "the entry's <rs:md> has no capability: in a Source Description it must say capability=\"capabilitylist\"".to_owned(),
                        Some(c) => format!("capability {c}: a Source Description lists Capability Lists, so an entry's <rs:md> must say capability=\"capabilitylist\""),
                    };
                    if m.capability != Some(Capability::CapabilityList) {
                        self.push(rules::RS_SD_ENTRY_CAPABILITY, pos, msg);
                    }
                }
                self.lastmod_omit(e);
            }
            // A Source Description Index lists Source Descriptions (§8), not Capability Lists.
            (Capability::Description, true) => {}
            (Capability::CapabilityList, _) => {
                match &md.capability {
                    None => self.push(
                        rules::RS_CAP_ENTRY_CAPABILITY,
                        pos,
                        "a Capability List entry must have <rs:md capability=\"...\">",
                    ),
                    Some(c) => {
                        let listed = matches!(
                            c,
                            Capability::ResourceList
                                | Capability::ResourceDump
                                | Capability::ChangeList
                                | Capability::ChangeDump
                        ) || c.is_archive()
                            || c.is_notification();
                        if !listed {
                            self.push(
                                rules::RS_CAP_ENTRY_VALUE,
                                pos,
                                format!(
                                    "capability {c} is not a capability a Capability List lists"
                                ),
                            );
                        }
                        if c.is_notification() && e.link("hub").is_none() {
                            self.push(
                                rules::CN_HUB_LINK,
                                pos,
                                format!("the {c} channel entry must have <rs:ln rel=\"hub\">"),
                            );
                        }
                        if !self.caps_seen.insert(c.clone()) {
                            self.push(
                                rules::RS_ONE_PER_CAPABILITY,
                                pos,
                                format!("a second entry with capability {c}"),
                            );
                        }
                    }
                }
                self.lastmod_omit(e);
            }
            (Capability::ResourceList, false) | (Capability::ResourceDumpManifest, _) => {
                if self.entries <= MAX_ENTRIES as u64 + 1
                    && !self.locs.insert(fnv1a(e.loc.as_bytes()))
                {
                    self.push(
                        rules::RS_LOC_DUPLICATE,
                        pos,
                        format!("{} is listed more than once", truncate(&e.loc)),
                    );
                }
                if cap == Capability::ResourceDumpManifest {
                    self.manifest_path(&md.path, pos, true);
                    if md.mime_type.is_none() {
                        self.push(
                            rules::RS_MANIFEST_TYPE,
                            pos,
                            "manifest entry without a type",
                        );
                    }
                }
            }
            (Capability::ResourceDump | Capability::ChangeDump, false) => {
                if md.mime_type.is_none() || (md.length.is_none() && !md.invalid.contains("length"))
                {
                    self.push(
                        rules::RS_DUMP_ENTRY_MD,
                        pos,
                        format!("a {kind} entry should give the package's type and length"),
                    );
                }
                if cap == Capability::ChangeDump {
                    let key = md.from.or(e.lastmod);
                    self.order(key.as_ref(), pos, rules::RS_CD_CHRONOLOGICAL);
                }
            }
            (Capability::ChangeList, true) | (Capability::ChangeDump, true) => {
                if md.from.is_none() && !md.invalid.contains("from") {
                    self.push(
                        rules::RS_CLI_ENTRY_MD,
                        pos,
                        format!("a {kind} entry should have <rs:md from=\"...\">"),
                    );
                }
                if let Some(open) = self.open_entry.take() {
                    self.push(
                        rules::RS_CLI_OPEN_LAST,
                        open,
                        "an entry without until is followed by another: only the last can be open",
                    );
                }
                if md.until.is_none() {
                    self.open_entry = Some(pos);
                }
                self.order(md.from.as_ref(), pos, rules::RS_CLI_CHRONOLOGICAL);
            }
            (Capability::ChangeList, false) | (Capability::ChangeDumpManifest, _) => {
                let manifest = cap == Capability::ChangeDumpManifest;
                let rule = if manifest {
                    rules::RS_CDM_CHRONOLOGICAL
                } else {
                    rules::RS_CL_CHRONOLOGICAL
                };
                self.change_order
                    .entry(e, rule, Some(&kind), &mut self.findings);
                if manifest {
                    let deleted = md.change == Some(Change::Deleted);
                    self.manifest_path(&md.path, pos, !deleted);
                    if md.mime_type.is_none() && !deleted {
                        self.push(
                            rules::RS_MANIFEST_TYPE,
                            pos,
                            "manifest entry without a type",
                        );
                    }
                    for l in links {
                        if l.has_rel(REL_PATCH) && l.path.is_none() {
                            self.push(
                                rules::RS_PATCH_PATH,
                                pos,
                                "a patch link in a Change Dump Manifest must have a path",
                            );
                        }
                    }
                }
                let memento = links
                    .iter()
                    .any(|l| l.has_rel("memento") || l.has_rel("timegate") || l.has_rel("timemap"));
                if memento && e.lastmod.is_none() {
                    self.push(
                        rules::RS_MEMENTO_LASTMOD,
                        pos,
                        "entry with memento/timegate/timemap links but no <lastmod>",
                    );
                }
            }
            (Capability::ChangeNotification | Capability::ChangeListNotification, _) => {
                self.change_order
                    .entry(e, rules::CN_CHRONOLOGICAL, None, &mut self.findings);
            }
            (Capability::FrameworkNotification, _) if md.capability.is_none() => {
                self.push(
                    rules::FN_ENTRY_CAPABILITY,
                    pos,
                    "a Framework Notification entry must have the capability of the changed document",
                );
            }
            (Capability::ChangeListArchive | Capability::ChangeDumpArchive, false) => {
                let key = md.from.or(md.until).or(e.lastmod);
                if let (Some(f), Some(prev_until)) = (md.from.as_ref(), self.prev_until.as_ref()) {
                    if f.cmp_instant(prev_until).is_lt() {
                        self.push(
                            rules::AR_CONSECUTIVE,
                            pos,
                            format!("from {f} is before the previous entry's until {prev_until}: the periods overlap"),
                        );
                    }
                }
                self.prev_until = md.until;
                self.order(key.as_ref(), pos, rules::AR_CHRONOLOGICAL);
            }
            _ => {}
        }
    }

    fn lastmod_omit(&mut self, e: &Entry) {
        if e.lastmod.is_some() {
            self.push(
                rules::RS_LASTMOD_OMIT,
                e.position,
                "<lastmod> should be omitted unless updated with every change of the listed document",
            );
        }
    }

    fn manifest_path(&mut self, path: &Option<String>, pos: Position, required: bool) {
        match path {
            None if required => self.push(
                rules::RS_MANIFEST_PATH,
                pos,
                "manifest entry without a path",
            ),
            Some(p) if !p.starts_with('/') => self.push(
                rules::RS_PATH_SLASH,
                pos,
                format!("path {:?} does not begin with a slash", truncate(p)),
            ),
            _ => {}
        }
    }

    fn order(&mut self, key: Option<&W3cDateTime>, pos: Position, rule: &'static Rule) {
        let Some(t) = key else {
            return;
        };
        if let Some(prev) = &self.prev_time {
            if t.cmp_instant(prev).is_lt() {
                let prev = *prev;
                let ppos = self.prev_key_pos;
                self.push(
                    rule,
                    pos,
                    format!(
                        "{t} is earlier than {prev} of the entry at line {}: entries must be in forward chronological order",
                        ppos.line
                    ),
                );
            }
        }
        self.prev_time = Some(*t);
        self.prev_key_pos = pos;
    }

    /// Completes validation of a document of `bytes` bytes.
    pub fn finish(mut self, name: &str, bytes: u64) -> Report {
        if let Some(msg) = self.md_missing.take() {
            self.push(rules::RS_MD_MANDATORY, self.header_pos, msg);
        }
        self.change_order.finish(&mut self.findings);
        if self.entries > MAX_ENTRIES as u64 {
            self.push(
                rules::SM_MAX_ENTRIES,
                self.header_pos,
                format!(
                    "{} entries; the limit is {MAX_ENTRIES}: split the document and add an index",
                    self.entries
                ),
            );
        }
        if bytes > MAX_DOCUMENT_BYTES {
            self.push(
                rules::SM_MAX_BYTES,
                self.header_pos,
                format!("{bytes} bytes; the limit is {MAX_DOCUMENT_BYTES}: split the document and add an index"),
            );
        }
        self.findings.sort();
        Report {
            name: name.to_owned(),
            root: self.header.root,
            capability: self.header.capability().cloned(),
            kind: self.header.kind_name(),
            entries: self.entries,
            bytes,
            time_span: self.span,
            digests: self
                .digests
                .into_iter()
                .map(|(a, n)| (a.token().to_owned(), n))
                .collect(),
            changes: self
                .changes
                .into_iter()
                .map(|(c, n)| (c.as_str().to_owned(), n))
                .collect(),
            findings: self.findings,
        }
    }
}

/// FNV-1a, 64 bits: a fast hash of `<loc>`s for duplicate detection (a collision can only
/// cause a spurious warning, never accept anything).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A hasher for keys that are hashes already.
#[derive(Debug, Default, Clone, Copy)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

fn truncate(s: &str) -> String {
    if s.chars().count() > 80 {
        let mut t: String = s.chars().take(77).collect();
        t.push_str("...");
        t
    } else {
        s.to_owned()
    }
}

/// Reads and validates a whole document. Reader findings and validator findings are merged in
/// document order. A fatal reader error is returned as `Err`.
pub fn validate<R: Read>(reader: DocumentReader<R>) -> Result<Report, Error> {
    validate_each(reader, |_| {})
}

/// [`validate`], handing every entry to `each` once it is checked (for callers that also use
/// the entries, e.g. to follow links, in the same single pass).
pub fn validate_each<R: Read>(
    mut reader: DocumentReader<R>,
    mut each: impl FnMut(&Entry),
) -> Result<Report, Error> {
    let max = reader.max_findings();
    let mut v = Validator::new(reader.header(), reader.header_position(), max);
    while let Some(e) = reader.next_entry()? {
        v.entry(&e);
        each(&e);
    }
    if reader.root_md_after_entries().is_some() {
        v.root_md_after_entries();
    }
    let bytes = reader.bytes_read();
    let name = reader.name().to_owned();
    let mut report = v.finish(&name, bytes);
    let mut all = reader.take_findings();
    all.extend(std::mem::take(&mut report.findings));
    all.sort();
    report.findings = all;
    Ok(report)
}
