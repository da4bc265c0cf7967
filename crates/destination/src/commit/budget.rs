//! The budget of bytes of one Source's copies (`SyncOptions::quota`), checked by the committer
//! before each copy is put in place (step 2 of [`crate::commit`]).

use resourcesync_store::{Records, ResourceRecord};

use crate::error::Result;
use crate::report::Failed;

/// The bytes the copies of one Source may take ([`crate::options::Quota`]), and those they
/// take: owned by the committer thread, which checks each copy before it is put in place.
#[derive(Debug)]
pub(crate) struct Budget {
    limit: u64,
    hint: String,
    source: String,
    held: u64,
}

impl Budget {
    /// The budget of `quota` for the Source `source`, its copies' bytes read from `state`.
    pub(crate) fn of(
        quota: Option<&crate::options::Quota>,
        state: &dyn Records,
        source: &str,
    ) -> Result<Option<Budget>> {
        let Some(q) = quota else {
            return Ok(None);
        };
        Ok(Some(Budget {
            limit: q.bytes,
            hint: q.hint.clone(),
            source: source.to_owned(),
            held: state.bytes_recorded(source)?,
        }))
    }

    /// Takes `length` bytes for the copy `row`, or says why not (the run stops: every copy
    /// after it would go past too). Near the limit, the length of the copy it replaces is
    /// taken off first (one read of its row).
    pub(super) fn take(
        &mut self,
        state: &dyn Records,
        row: &ResourceRecord,
        length: u64,
    ) -> Option<Failed> {
        let mut held = self.held;
        if held.saturating_add(length) > self.limit {
            let old = state
                .resource(&row.uri)
                .ok()
                .flatten()
                .and_then(|r| r.length)
                .unwrap_or(0);
            held = held.saturating_sub(old);
        }
        if held.saturating_add(length) > self.limit {
            return Some(Failed {
                message: format!(
                    "quota: the copies of {} hold {} bytes and this one has {length}, past the \
                     {} bytes allowed: not put in place, the sync stops; {}",
                    self.source, self.held, self.limit, self.hint
                ),
                category: resourcesync_model::Category::Stop,
                kind: crate::report::FailureKind::Other,
            });
        }
        self.held = held.saturating_add(length);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resourcesync_store::{RecordWrites, SqliteState};

    #[test]
    fn a_budget_refuses_the_copy_past_it_and_counts_a_replaced_one_once() {
        let d = tempfile::tempdir().expect("tmp");
        let state = SqliteState::open(&d.path().join("state.sqlite")).expect("state");
        let row = |uri: &str, length: Option<u64>| ResourceRecord {
            uri: uri.into(),
            source: "cap".into(),
            path: uri.trim_start_matches("http://h/").into(),
            length,
            ..ResourceRecord::default()
        };
        state
            .put_resource(&row("http://h/old", Some(500)))
            .expect("put");
        let quota = crate::options::Quota {
            bytes: 1000,
            hint: "raise it".into(),
        };
        let mut b = Budget::of(Some(&quota), &state, "cap")
            .expect("read")
            .expect("a budget");
        assert_eq!(b.held, 500);
        assert!(b.take(&state, &row("http://h/new", None), 400).is_none());
        // 900 + 200 > 1000: refused, and nothing taken.
        let f = b
            .take(&state, &row("http://h/more", None), 200)
            .expect("refused");
        assert_eq!(f.category, resourcesync_model::Category::Stop);
        assert!(
            f.message.contains("1000 bytes") && f.message.contains("raise it"),
            "{}",
            f.message
        );
        assert_eq!(b.held, 900);
        // A new copy of `old` replaces its 500 bytes: 900 - 500 + 600 fits.
        assert!(b.take(&state, &row("http://h/old", None), 600).is_none());
        assert_eq!(b.held, 1000);
    }
}
