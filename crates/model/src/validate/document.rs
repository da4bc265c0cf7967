//! The document as a whole: the root's `<rs:md>` (capability, time attributes) and `<rs:ln>`
//! elements, per document kind (Z39.99-2014 §7, §8, §9, Appendix A).

use super::Validator;
use crate::datetime::{Precision, Tz};
use crate::document::{Capability, Metadata, Position, RS_NS};
use crate::reader::near_miss;
use crate::rules;

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

impl Validator {
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

    /// Checks the root's `<rs:md>` and `<rs:ln>`s against the document's kind.
    pub(super) fn check_header(&mut self) {
        let pos = self.header_pos;
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
        self.check_capability_value(&cap, pos);
        if self.header.is_index() {
            self.check_index_allowed(&cap, pos);
        }
        self.check_time_attributes(&cap, &md, pos);
        self.check_datetime_forms(&md, pos);
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
        self.check_header_links(&cap, pos);
    }

    /// The capability is one ResourceSync defines, by its current name.
    fn check_capability_value(&mut self, cap: &Capability, pos: Position) {
        if let Capability::Other(v) = cap {
            self.push(
                rules::RS_CAPABILITY_VALUE,
                pos,
                format!("capability {v:?} is not defined by ResourceSync"),
            );
        }
        if *cap == Capability::ChangeListNotification {
            self.push(
                rules::CN_DRAFT_NAME,
                pos,
                "capability changelist-notification is the draft name of change-notification",
            );
        }
    }

    /// A `<sitemapindex>` of a kind without an index form.
    fn check_index_allowed(&mut self, cap: &Capability, pos: Position) {
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
                format!("a {kind} must be a <urlset>", kind = self.kind),
            ),
            _ => {}
        }
    }

    /// The time attributes each kind requires and those it does not use (§7, Appendix A).
    fn check_time_attributes(&mut self, cap: &Capability, md: &Metadata, pos: Position) {
        let kind = self.kind.clone();
        let snapshot = at_snapshot_kind(cap);
        let change = is_change_doc(cap) || *cap == Capability::FrameworkNotification;
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
    }

    /// Z39.99-2014 §7: "the use of a complete date and time expressed in UTC using the format
    /// YYYY-MM-DDThh:mm:ss[.s]Z is recommended". +00:00 is UTC all the same.
    fn check_datetime_forms(&mut self, md: &Metadata, pos: Position) {
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
    }

    /// The root's links (§6.2, §8, §9, §10-13, Archives): `up` where the kind has one,
    /// `describedby` where §8 and §9 recommend it, then each link.
    fn check_header_links(&mut self, cap: &Capability, pos: Position) {
        let kind = self.kind.clone();
        let needs_up = !matches!(
            cap,
            Capability::Description
                | Capability::ChangeNotification
                | Capability::ChangeListNotification
                | Capability::FrameworkNotification
                | Capability::Other(_)
        );
        if needs_up && self.header.link("up").is_none() {
            let target = if *cap == Capability::CapabilityList {
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
        if (*cap == Capability::CapabilityList
            || (*cap == Capability::Description && !self.header.is_index()))
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
}
