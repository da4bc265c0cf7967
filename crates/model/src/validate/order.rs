//! The forward chronological order of the entries of change documents: Change Lists
//! (Z39.99-2014 §12.1), Change Dump Manifests (§13.2) and change notification payloads (Change
//! Notification 1.0.1 §3).
//!
//! Which time orders them depends on the version the document follows:
//!
//! - 1.1 (Z39.99-2017 §7) adds `datetime`, the time of the change event, and says `<lastmod>`,
//!   the resource's last modification, "may not correspond with the datetime of the last
//!   ResourceSync change event". Entries that carry `datetime` are ordered by it, and an entry
//!   with only `<lastmod>` is not compared with anything: its `<lastmod>` need not agree.
//! - 1.0 (Z39.99-2014 §12.1) has only `<lastmod>`, mandatory, which orders the entries.
//!
//! A document uses `datetime` as soon as one entry has it; until then (streaming, the next entry
//! may be the first) what `<lastmod>` says is held back, and is reported at the end only if no
//! entry had a `datetime`. What is held back is bounded like the findings themselves.

use crate::datetime::W3cDateTime;
use crate::document::{Entry, Position};
use crate::finding::Findings;
use crate::rules::{self, Rule};

/// Checks the order of a change document's entries, one entry at a time.
#[derive(Debug)]
pub(super) struct ChangeOrder {
    prev_datetime: Option<(W3cDateTime, Position)>,
    prev_lastmod: Option<(W3cDateTime, Position)>,
    uses_datetime: bool,
    uses_lastmod: bool,
    /// `<lastmod>` out of order: errors if no entry carries `datetime`.
    by_lastmod: Findings,
    /// Entries with neither time: warnings if no entry carries `datetime` and some `<lastmod>`.
    missing: Findings,
    max: usize,
}

impl ChangeOrder {
    /// A checker keeping at most `max` findings held back of each kind.
    pub(super) fn new(max: usize) -> Self {
        ChangeOrder {
            prev_datetime: None,
            prev_lastmod: None,
            uses_datetime: false,
            uses_lastmod: false,
            by_lastmod: Findings::new(max),
            missing: Findings::new(max),
            max,
        }
    }

    /// Checks one entry against the previous ones. `rule` is the document kind's chronological
    /// rule; `kind` names the document when an entry without `<lastmod>` is to be reported
    /// (`RS-12.1-lastmod`: Change Lists and Change Dump Manifests), `None` otherwise.
    pub(super) fn entry(
        &mut self,
        e: &Entry,
        rule: &'static Rule,
        kind: Option<&str>,
        out: &mut Findings,
    ) {
        let pos = e.position;
        if let Some(dt) = e.md.as_ref().and_then(|m| m.datetime) {
            if !self.uses_datetime {
                // From now on the document orders by datetime: what <lastmod> said is moot.
                self.uses_datetime = true;
                self.by_lastmod = Findings::new(self.max);
                self.missing = Findings::new(self.max);
            }
            if let Some((prev, ppos)) = self.prev_datetime {
                if dt.cmp_instant(&prev).is_lt() {
                    out.push(
                        rule,
                        pos,
                        format!(
                            "datetime {dt} is earlier than datetime {prev} of the entry at line {}: entries must be in forward chronological order of their change events",
                            ppos.line
                        ),
                    );
                }
            }
            self.prev_datetime = Some((dt, pos));
            return;
        }
        if self.uses_datetime {
            // Z39.99-2017 §7: an entry's <lastmod> need not agree with the change events'
            // datetimes, and an entry without either keeps its place (Example 19).
            return;
        }
        match e.lastmod {
            Some(lm) => {
                self.uses_lastmod = true;
                if let Some((prev, ppos)) = self.prev_lastmod {
                    if lm.cmp_instant(&prev).is_lt() {
                        self.by_lastmod.push(
                            rule,
                            pos,
                            format!(
                                "<lastmod> {lm} is earlier than <lastmod> {prev} of the entry at line {}: entries must be in forward chronological order (no entry has a datetime, so <lastmod> orders them)",
                                ppos.line
                            ),
                        );
                    }
                }
                self.prev_lastmod = Some((lm, pos));
            }
            None => {
                if let Some(kind) = kind {
                    self.missing.push(
                        rules::RS_CL_LASTMOD,
                        pos,
                        format!(
                            "{kind} entry without <lastmod>, among entries ordered by <lastmod>: 1.0 requires <lastmod>, and without it the change has no place in the order (1.1 orders changes by datetime)"
                        ),
                    );
                }
            }
        }
    }

    /// Reports what was held back, now that it is known whether the document uses `datetime`.
    pub(super) fn finish(&mut self, out: &mut Findings) {
        if self.uses_datetime {
            return;
        }
        out.extend(std::mem::take(&mut self.by_lastmod));
        if self.uses_lastmod {
            out.extend(std::mem::take(&mut self.missing));
        }
    }
}
