//! Change List entries after a cursor, collapsed to the last change per URI (Z39.99-2014 §12.1,
//! §12.2): the history must reach back to the cursor, closed lists ending at or before it are
//! skipped, entries must be in forward chronological order.

use resourcesync_model::{Change, Entry, Header, W3cDateTime};

use crate::discover::docs::ListSink;
use crate::error::{Error, Result};
use crate::plan::staging::{StagedItem, Staging};

/// Stages the changes after the cursor, collapsing several changes of a URI to the last.
pub(crate) struct ChangeListSink {
    /// The changes staged, one per URI.
    pub(crate) staging: Staging,
    cursor: W3cDateTime,
    /// The time of the latest change seen.
    pub(crate) last: Option<W3cDateTime>,
    /// Changes of a kind other than created, updated, deleted (ignored).
    pub(crate) other: u64,
    /// The document streamed, and the time of its entry read last (§12.1 order).
    doc: String,
    previous: Order,
    /// The top document is the open Change List of an index known unchanged since the last
    /// run, whose history was checked then: its `from` is not checked again.
    pub(crate) continued: bool,
    /// Only the changes of these URIs are staged, and a history that does not reach back to
    /// the cursor is no error: what the lists say of these resources is true all the same
    /// (`crate::sync::catch_up`).
    pub(crate) only: Option<std::collections::HashSet<String>>,
}

/// The order of a Change List's entries so far (Z39.99-2014 §12.1: forward chronological).
/// Z39.99-2017 §7: `datetime` is the time of the change event and `<lastmod>` the time of the
/// resource's last modification; the two need not agree. So entries with `datetime` are
/// ordered among themselves by it, and entries with only `<lastmod>` by it, among themselves,
/// and only in a document where no entry seen so far has a `datetime` (a 1.0 document); an
/// entry with only `<lastmod>` is never compared with a neighbour's `datetime`.
#[derive(Debug, Default, Clone, Copy)]
struct Order {
    datetime: Option<W3cDateTime>,
    lastmod: Option<W3cDateTime>,
}

impl ChangeListSink {
    /// A sink staging into `staging` the changes after `cursor`.
    pub(crate) fn new(staging: Staging, cursor: W3cDateTime) -> Self {
        ChangeListSink {
            staging,
            cursor,
            last: None,
            other: 0,
            doc: String::new(),
            previous: Order::default(),
            continued: false,
            only: None,
        }
    }
}

impl Order {
    /// The earlier entry's time that `e` goes back before, if it does.
    fn check(&mut self, e: &Entry) -> Option<W3cDateTime> {
        if let Some(t) = e.md.as_ref().and_then(|m| m.datetime) {
            let back = self.datetime.filter(|p| after(p, &t));
            self.datetime = Some(t);
            return back;
        }
        let t = e.lastmod?;
        if self.datetime.is_some() {
            return None;
        }
        let back = self.lastmod.filter(|p| after(p, &t));
        self.lastmod = Some(t);
        back
    }
}

/// Whether `t` is later than `cursor` (as instants).
pub(crate) fn after(t: &W3cDateTime, cursor: &W3cDateTime) -> bool {
    t.cmp_instant(cursor) == std::cmp::Ordering::Greater
}

impl ListSink for ChangeListSink {
    fn top(&mut self, url: &str, h: &Header) -> Result<()> {
        url.clone_into(&mut self.doc);
        // Z39.99-2014 §12.1: `from` says the document has every change since then; the history
        // reaches the cursor when it starts at or before it.
        match h.md.as_ref().and_then(|m| m.from) {
            _ if self.only.is_some() => Ok(()),
            Some(from) if !after(&from, &self.cursor) => Ok(()),
            from => Err(Error::HistoryGap {
                url: self.doc.clone(),
                from: from.map(|f| f.to_string()),
                cursor: self.cursor.to_string(),
            }),
        }
    }

    fn want_child(&mut self, e: &Entry) -> bool {
        // A closed Change List that ends at or before the cursor has nothing new (§12.2).
        e.md.as_ref()
            .and_then(|m| m.until)
            .is_none_or(|u| after(&u, &self.cursor))
    }

    fn document(&mut self, url: &str, h: &Header) -> Result<bool> {
        url.clone_into(&mut self.doc);
        self.previous = Order::default();
        Ok(h.md
            .as_ref()
            .and_then(|m| m.until)
            .is_none_or(|u| after(&u, &self.cursor)))
    }

    fn entry(&mut self, e: Entry) -> Result<()> {
        // The time that places the entry in the history: its `datetime`; in a document without
        // any (so far), its `<lastmod>`. An entry with only `<lastmod>` in a document that uses
        // `datetime` has none (Z39.99-2017 §7): it is applied whatever the cursor (the state
        // makes a change seen before cheap) and does not move the cursor.
        let dt = e.md.as_ref().and_then(|m| m.datetime);
        let t = if dt.is_some() || self.previous.datetime.is_some() {
            dt
        } else {
            e.lastmod
        };
        if let (Some(p), Some(at)) = (self.previous.check(&e), e.change_time().copied()) {
            return Err(Error::ChangesOutOfOrder {
                url: self.doc.clone(),
                line: e.position.line,
                loc: e.loc,
                at: at.to_string(),
                previous: p.to_string(),
            });
        }
        if t.is_some_and(|t| !after(&t, &self.cursor))
            || self.only.as_ref().is_some_and(|o| !o.contains(&e.loc))
        {
            return Ok(());
        }
        match e.change() {
            Some(Change::Created | Change::Updated | Change::Deleted) => {}
            _ => {
                self.other += 1;
                return Ok(());
            }
        }
        if let Some(t) = t {
            if self.last.is_none_or(|l| after(&t, &l)) {
                self.last = Some(t);
            }
        }
        self.staging.upsert(&StagedItem::from_entry(&e))
    }
}
