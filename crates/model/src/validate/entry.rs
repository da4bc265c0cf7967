//! One entry against the rules of its document kind: `<loc>`, the attributes of its `<rs:md>`
//! in context (Z39.99-2014 §7, Appendix A), what each kind requires of its entries, duplicate
//! `<loc>`s, and the statistics of the report.

use std::hash::Hasher;

use super::Validator;
use super::links::is_absolute_uri;
use crate::datetime::W3cDateTime;
use crate::document::{Capability, Change, Entry, MAX_ENTRIES, Metadata, Position, REL_PATCH};
use crate::rules::{self, Rule};

impl Validator {
    /// Checks one entry: its `<loc>`, the report's statistics, its `<rs:md>` and `<rs:ln>`s,
    /// then, when the document says what it is, the attributes in the context of its kind and
    /// what that kind requires of its entries.
    pub fn entry(&mut self, e: &Entry) {
        self.entries += 1;
        let pos = e.position;
        let cap = self.header.capability().cloned();
        let index = self.header.is_index();
        self.check_loc(&e.loc, pos);
        self.count(e);
        let no_md = Metadata::default();
        let md = e.md.as_ref().unwrap_or(&no_md);
        self.check_change_value(md, pos);
        for l in &e.links {
            self.check_link(l, pos);
        }
        let Some(cap) = cap else {
            return;
        };
        self.check_time_contexts(&cap, index, md, pos);
        self.check_change_contexts(&cap, index, md, pos);
        self.check_datetime_in_range(md, pos);
        self.check_for_kind(&cap, index, e, md);
    }

    /// `<loc>` (§7; Sitemap protocol): an absolute URI shorter than 2048 characters.
    fn check_loc(&mut self, loc: &str, pos: Position) {
        if loc.is_empty() {
            return;
        }
        if !is_absolute_uri(loc) {
            let l: String = loc.chars().take(80).collect();
            self.push(
                rules::SM_LOC_URI,
                pos,
                format!("<loc> {l:?} is not an absolute URI"),
            );
        } else if loc.len() >= 2048 {
            self.push(
                rules::SM_LOC_LENGTH,
                pos,
                format!("<loc> is {} characters long", loc.len()),
            );
        }
    }

    /// The report's statistics: the span of change times, digests and changes by kind.
    fn count(&mut self, e: &Entry) {
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
    }

    /// `change` is one of the three values §7 defines.
    fn check_change_value(&mut self, md: &Metadata, pos: Position) {
        if let Some(Change::Other(v)) = &md.change {
            let v: String = v.chars().take(40).collect();
            self.push(
                rules::RS_CHANGE_VALUE,
                pos,
                format!("change {v:?} is not created, updated or deleted"),
            );
        }
    }

    /// The time attributes in context (§7, Appendix A): `at`/`completed` and `from`/`until`
    /// where the document's kind uses them, in order.
    fn check_time_contexts(&mut self, cap: &Capability, index: bool, md: &Metadata, pos: Position) {
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
                format!(
                    "an entry's at/completed are not used in a {kind}",
                    kind = self.kind
                ),
            );
        }
        if (md.from.is_some() || md.until.is_some()) && !entry_from_ok {
            self.push(
                rules::RS_ENTRY_FROM_NOT_USED,
                pos,
                format!(
                    "an entry's from/until are not used in a {kind}",
                    kind = self.kind
                ),
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
    }

    /// `path`, `change` and `datetime` in context (§7, Appendix A): `path` in manifests,
    /// `change` (mandatory) and `datetime` in the change kinds.
    fn check_change_contexts(
        &mut self,
        cap: &Capability,
        index: bool,
        md: &Metadata,
        pos: Position,
    ) {
        if md.path.is_some() && !cap.is_manifest() {
            self.push(
                rules::RS_PATH_NOT_USED,
                pos,
                format!("path is not used in a {kind}", kind = self.kind),
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
                format!("change is not used in a {kind}", kind = self.kind),
            );
        }
        if change_kind && md.change.is_none() {
            self.push(
                rules::RS_CHANGE_MANDATORY,
                pos,
                format!(
                    "every {kind} entry must have <rs:md change=\"...\">",
                    kind = self.kind
                ),
            );
        }
        if md.datetime.is_some() && !change_kind {
            // Z39.99-2017 §7: datetime "may be used in Change Lists and Change Dump Manifests";
            // it forbids nothing elsewhere, like the other attributes used in some documents only.
            self.push(
                rules::RS_DATETIME_NOT_USED,
                pos,
                format!("datetime is used in Change Lists, Change Dump Manifests and notifications, not in a {kind}", kind = self.kind),
            );
        }
    }

    /// `datetime` within the document's interval (1.1 §7).
    fn check_datetime_in_range(&mut self, md: &Metadata, pos: Position) {
        let Some(dt) = md.datetime.as_ref() else {
            return;
        };
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

    /// What the document's kind requires of its entries.
    fn check_for_kind(&mut self, cap: &Capability, index: bool, e: &Entry, md: &Metadata) {
        let pos = e.position;
        match (cap, index) {
            (Capability::Description, false) => self.description_entry(e),
            // A Source Description Index lists Source Descriptions (§8), not Capability Lists.
            (Capability::Description, true) => {}
            (Capability::CapabilityList, _) => self.capability_list_entry(e, md),
            (Capability::ResourceList, false) | (Capability::ResourceDumpManifest, _) => {
                self.resource_list_entry(cap, e, md);
            }
            (Capability::ResourceDump | Capability::ChangeDump, false) => {
                self.dump_entry(cap, e, md);
            }
            (Capability::ChangeList, true) | (Capability::ChangeDump, true) => {
                self.change_list_index_entry(md, pos);
            }
            (Capability::ChangeList, false) | (Capability::ChangeDumpManifest, _) => {
                self.change_list_entry(cap, e, md);
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
                self.archive_entry(e, md);
            }
            _ => {}
        }
    }

    /// A Source Description's entry (§8): "An optional <rs:md> child element must have a
    /// capability attribute with a value of capabilitylist".
    fn description_entry(&mut self, e: &Entry) {
        if let Some(m) = &e.md {
            let msg = match &m.capability {
                None => "the entry's <rs:md> has no capability: in a Source Description it must say capability=\"capabilitylist\"".to_owned(),
                Some(c) => format!("capability {c}: a Source Description lists Capability Lists, so an entry's <rs:md> must say capability=\"capabilitylist\""),
            };
            if m.capability != Some(Capability::CapabilityList) {
                self.push(rules::RS_SD_ENTRY_CAPABILITY, e.position, msg);
            }
        }
        self.lastmod_omit(e);
    }

    /// A Capability List's entry (§9; Change Notification 1.0.1 §5): a capability it lists,
    /// once, and a hub link for a notification channel.
    fn capability_list_entry(&mut self, e: &Entry, md: &Metadata) {
        let pos = e.position;
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
                        format!("capability {c} is not a capability a Capability List lists"),
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

    /// A Resource List's or Resource Dump Manifest's entry (§10.1, §11.2): one per resource;
    /// a manifest's with a path and a type.
    fn resource_list_entry(&mut self, cap: &Capability, e: &Entry, md: &Metadata) {
        let pos = e.position;
        if self.entries <= MAX_ENTRIES as u64 + 1 && !self.locs.insert(fnv1a(e.loc.as_bytes())) {
            self.push(
                rules::RS_LOC_DUPLICATE,
                pos,
                format!("{} is listed more than once", truncate(&e.loc)),
            );
        }
        if *cap == Capability::ResourceDumpManifest {
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

    /// A Resource Dump's or Change Dump's entry (§11.1, §13.1): the package's type and length;
    /// a Change Dump's in forward chronological order.
    fn dump_entry(&mut self, cap: &Capability, e: &Entry, md: &Metadata) {
        let pos = e.position;
        if md.mime_type.is_none() || (md.length.is_none() && !md.invalid.contains("length")) {
            self.push(
                rules::RS_DUMP_ENTRY_MD,
                pos,
                format!(
                    "a {kind} entry should give the package's type and length",
                    kind = self.kind
                ),
            );
        }
        if *cap == Capability::ChangeDump {
            let key = md.from.or(e.lastmod);
            self.order(key.as_ref(), pos, rules::RS_CD_CHRONOLOGICAL);
        }
    }

    /// A Change List Index's or Change Dump Index's entry (§12.2): a `from`, only the last
    /// open, in forward chronological order.
    fn change_list_index_entry(&mut self, md: &Metadata, pos: Position) {
        if md.from.is_none() && !md.invalid.contains("from") {
            self.push(
                rules::RS_CLI_ENTRY_MD,
                pos,
                format!(
                    "a {kind} entry should have <rs:md from=\"...\">",
                    kind = self.kind
                ),
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

    /// A Change List's or Change Dump Manifest's entry (§12.1, §13.2, §14): forward
    /// chronological order; a manifest's path, type and patch paths; memento links with a
    /// `<lastmod>` (§14.6).
    fn change_list_entry(&mut self, cap: &Capability, e: &Entry, md: &Metadata) {
        let pos = e.position;
        let manifest = *cap == Capability::ChangeDumpManifest;
        let rule = if manifest {
            rules::RS_CDM_CHRONOLOGICAL
        } else {
            rules::RS_CL_CHRONOLOGICAL
        };
        self.change_order
            .entry(e, rule, Some(&self.kind), &mut self.findings);
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
            for l in &e.links {
                if l.has_rel(REL_PATCH) && l.path.is_none() {
                    self.push(
                        rules::RS_PATCH_PATH,
                        pos,
                        "a patch link in a Change Dump Manifest must have a path",
                    );
                }
            }
        }
        let memento = e
            .links
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

    /// A Change List Archive's or Change Dump Archive's entry (Archives 0.9.1 §5, §6): periods
    /// that do not overlap, in forward chronological order.
    fn archive_entry(&mut self, e: &Entry, md: &Metadata) {
        let pos = e.position;
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
pub(super) struct Identity(u64);

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
