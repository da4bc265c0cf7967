//! Waiting on the work queue without polling: a connection of its own that listens on the
//! queue's channel (`LISTEN resourcesync_work`; the notifications come from the triggers of
//! migration 4, one per statement that adds or completes items, from every worker on any
//! machine). [`PgState::wait_drained`] is what a coordinator waits on; [`WorkListener`] is what
//! a claimer waits on for work added to any Source's schema.

use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;

use super::PgState;
use super::pool::Conn;
use super::sql::WORK_CHANNEL;
use crate::blocking::call;
use crate::error::Result;

/// Most notifications taken from the connection's buffer at once (those past it are taken at
/// the next wait): a burst of notifications never grows a wait's answer without bound.
const MAX_AT_ONCE: usize = 10_000;

/// A connection listening on the queue's channel, for one wait or many (see the module's
/// documentation). Closed where blocking is allowed when dropped.
pub struct WorkListener {
    conn: Option<Conn>,
    state_target: String,
}

impl std::fmt::Debug for WorkListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkListener")
            .field("target", &self.state_target)
            .finish_non_exhaustive()
    }
}

impl Drop for WorkListener {
    fn drop(&mut self) {
        let c = self.conn.take();
        call(move || drop(c));
    }
}

/// What a notification said: the schema, and whether items were added (`insert`) or
/// completed (`delete`).
fn parse(payload: &str) -> Option<(&str, &str)> {
    payload.split_once(' ')
}

impl WorkListener {
    fn client(&mut self) -> &mut postgres::Client {
        // Set from creation to drop.
        &mut self
            .conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("a listener's connection is taken only when dropped"))
            .client
    }

    /// Waits up to `timeout` for notifications, then takes every one already arrived; the
    /// (schema, what) pairs said, in order, repeats removed. Empty: none came in time.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<(String, String)>> {
        let target = self.state_target.clone();
        let err = |cause| crate::error::Error::Postgres {
            target: target.clone(),
            cause,
        };
        let client = self.client();
        let mut notes = client.notifications();
        let mut out: Vec<(String, String)> = Vec::new();
        let first = notes.timeout_iter(timeout).next().map_err(err)?;
        let Some(first) = first else {
            return Ok(out);
        };
        let mut push = |payload: &str| {
            if let Some((schema, what)) = parse(payload) {
                if !out.iter().any(|(s, w)| s == schema && w == what) {
                    out.push((schema.to_owned(), what.to_owned()));
                }
            }
        };
        push(first.payload());
        let mut more = notes.iter();
        for _ in 0..MAX_AT_ONCE {
            match more.next().map_err(err)? {
                Some(n) => push(n.payload()),
                None => break,
            }
        }
        Ok(out)
    }
}

impl PgState {
    /// A connection of its own listening on the queue's channel ([`WorkListener`]).
    pub fn work_listener(&self) -> Result<WorkListener> {
        let mut conn = self.open()?;
        conn.client
            .batch_execute(&format!("LISTEN {WORK_CHANNEL}"))
            .map_err(|e| self.err(e))?;
        Ok(WorkListener {
            conn: Some(conn),
            state_target: self.target.clone(),
        })
    }

    /// See [`crate::WorkQueue::wait_drained`]: listens first, then asks whether any item of
    /// `source` is left, and asks again only after a completion in this schema.
    pub(super) fn wait_for_drain(&self, source: &str, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now().checked_add(timeout);
        let mut l = self.work_listener()?;
        loop {
            let left = l
                .client()
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM work WHERE source = $1)",
                    &[&source],
                )
                .and_then(|r| r.try_get::<_, bool>(0))
                .map_err(|e| self.err(e))?;
            if !left {
                return Ok(true);
            }
            loop {
                let rest = match deadline {
                    Some(d) => d.saturating_duration_since(Instant::now()),
                    None => Duration::from_secs(3600),
                };
                if rest.is_zero() {
                    return Ok(false);
                }
                let said = l.wait(rest)?;
                if said
                    .iter()
                    .any(|(s, what)| *s == self.schema && what == "delete")
                {
                    break;
                }
            }
        }
    }
}
