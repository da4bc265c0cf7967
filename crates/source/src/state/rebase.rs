//! Moving a Source to another base URL: its state's URIs rewritten, its history kept.

use rusqlite::{Transaction, TransactionBehavior, params};

use super::State;
use crate::error::Result;

/// What a move of the Source to another base URL carried over (see [`State::rebase`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The base URL the Source was published under.
    pub from: String,
    /// The base URL it is published under now.
    pub to: String,
    /// Resources whose URI was rewritten.
    pub resources: u64,
    /// Recorded changes whose URI was rewritten (the change history carried over).
    pub changes: u64,
}

impl State {
    /// Moves the Source from base URL `from` to base URL `to` (both ending with `/`): the URI of
    /// every resource and of every recorded change under `from` is rewritten under `to`, the
    /// recorded base URL becomes `to`, and what was published under `from` is marked for
    /// writing again (dumps; the Resource Lists of earlier snapshots, which cannot be written
    /// again, leave the Resource List Archive). The change history is kept: the same changes at
    /// the same datetimes, under the new URIs (Z39.99-2014 §12.1). One transaction: a crash
    /// leaves the Source where it was, or moved.
    pub fn rebase(&mut self, from: &str, to: &str) -> Result<Moved> {
        self.settle()?;
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let under = "substr(uri, 1, length(?1)) = ?1";
        let resources = tx
            .execute(
                &format!(
                    "UPDATE resources SET uri = ?2 || substr(uri, length(?1) + 1) WHERE {under}"
                ),
                params![from, to],
            )
            .map_err(|e| self.err(e))? as u64;
        let changes = tx
            .execute(
                &format!(
                    "UPDATE changes SET uri = ?2 || substr(uri, length(?1) + 1) WHERE {under}"
                ),
                params![from, to],
            )
            .map_err(|e| self.err(e))? as u64;
        tx.execute(
            "DELETE FROM meta WHERE key LIKE 'resourcedump:%' OR key LIKE 'changedump:%' OR key = 'published'",
            [],
        )
        .map_err(|e| self.err(e))?;
        tx.execute(
            "UPDATE meta SET value = '' WHERE key LIKE 'resourcelist:%' AND key NOT LIKE '%:parts'",
            [],
        )
        .map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO meta(key, value) VALUES('base_url', ?1) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            [to],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Moved {
            from: from.to_owned(),
            to: to.to_owned(),
            resources,
            changes,
        })
    }
}
