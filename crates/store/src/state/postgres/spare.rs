//! The idle connections of the states dropped, kept for the next state opened on the same
//! URL (see the module docs of [`super`]): another schema is one `SET search_path` away
//! ([`PgState::adopt`](super::PgState)), and PostgreSQL parses a prepared statement again when
//! the search path changed, so the statements prepared on a connection serve every schema.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::pool::Conn;
use crate::blocking::call;

/// Idle connections kept per URL for the next state opened on it (see the module docs).
pub const SPARE_PER_URL: usize = 16;

/// How long an idle connection is kept for the next state: past it, it is closed rather than
/// trusted (a server or a firewall may have dropped it without a word).
pub const SPARE_FOR: Duration = Duration::from_secs(30);

/// The idle connections of the states dropped, by URL, each with when it was given back.
static SPARE: Mutex<Vec<(String, Conn, Instant)>> = Mutex::new(Vec::new());

/// An idle connection to `url` given back less than [`SPARE_FOR`] ago, if there is one; those
/// older, or closed, are closed.
pub(super) fn take_spare(url: &str) -> Option<Conn> {
    let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    let (stale, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut *spare)
        .into_iter()
        .partition(|(_, c, at)| at.elapsed() >= SPARE_FOR || c.client.is_closed());
    *spare = kept;
    let found = spare
        .iter()
        .rposition(|(u, _, _)| u == url)
        .map(|i| spare.remove(i).1);
    drop(spare);
    if !stale.is_empty() {
        call(move || drop(stale));
    }
    found
}

/// Keeps `conns` (idle, to `url`) for the next state opened on it, but those past
/// [`SPARE_PER_URL`], which are closed.
pub(super) fn give_spare(url: &str, conns: Vec<Conn>) {
    let mut spare = SPARE.lock().unwrap_or_else(|p| p.into_inner());
    let mut have = spare.iter().filter(|(u, _, _)| u == url).count();
    let mut closed = Vec::new();
    for c in conns {
        if have < SPARE_PER_URL && !c.client.is_closed() {
            spare.push((url.to_owned(), c, Instant::now()));
            have += 1;
        } else {
            closed.push(c);
        }
    }
    drop(spare);
    if !closed.is_empty() {
        // Closing a client is a call of its own runtime too.
        call(move || drop(closed));
    }
}

/// Against the server of `scripts/postgres.sh` (`RESOURCESYNC_TEST_POSTGRES`); without one
/// these tests fail.
#[cfg(test)]
mod tests {
    use super::super::PgState;
    use super::*;
    use crate::state::{Batch, Op, Records, ResourceRecord};

    /// A URL of its own (an application name no other test gives): the spares of the other
    /// tests, running at once, are not this test's.
    fn own_url(tag: &str) -> String {
        let url = super::super::plans::url();
        let sep = if url.contains('?') { '&' } else { '?' };
        format!(
            "{url}{sep}application_name=spare_{tag}_{}",
            std::process::id()
        )
    }

    fn pid(s: &PgState) -> i32 {
        let mut p = s.conn().expect("conn");
        p.get()
            .client
            .query_one("SELECT pg_backend_pid()", &[])
            .expect("pid")
            .get(0)
    }

    fn put(s: &PgState, uri: &str) {
        let r = ResourceRecord {
            uri: uri.into(),
            source: "s".into(),
            path: uri.rsplit('/').next().unwrap_or("x").into(),
            ..Default::default()
        };
        let mut b = Batch::new();
        b.push(Op::PutResource(&r));
        s.apply(&b).expect("put");
    }

    /// A connection given back by the state of one schema serves the next state in that
    /// state's own tables, its statements prepared before included: never the first
    /// schema's rows.
    #[test]
    fn a_spare_connection_serves_the_next_schema_in_its_own_tables() {
        let url = own_url("next");
        let (a, b) = (
            format!("t_spare_a_{}", std::process::id()),
            format!("t_spare_b_{}", std::process::id()),
        );
        let sa = PgState::connect_schema(&url, &a).expect("a");
        put(&sa, "http://h/x");
        assert!(sa.resource("http://h/x").expect("read").is_some());
        let first = pid(&sa);
        drop(sa);

        let sb = PgState::connect_schema(&url, &b).expect("b");
        assert_eq!(pid(&sb), first, "the spare connection was not taken");
        assert_eq!(
            sb.resource("http://h/x").expect("read"),
            None,
            "a's row read in b"
        );
        put(&sb, "http://h/y");
        drop(sb);

        let sa = PgState::connect_schema(&url, &a).expect("a again");
        assert_eq!(pid(&sa), first);
        assert!(sa.resource("http://h/x").expect("read").is_some());
        assert_eq!(
            sa.resource("http://h/y").expect("read"),
            None,
            "b's row written in a"
        );
        let mut p = sa.conn().expect("conn");
        p.get()
            .client
            .batch_execute(&format!(
                "DROP SCHEMA \"{a}\" CASCADE; DROP SCHEMA \"{b}\" CASCADE"
            ))
            .expect("drop");
    }

    /// At most [`SPARE_PER_URL`] are kept per URL; the others are closed.
    #[test]
    fn spares_are_bounded_per_url() {
        let url = own_url("bound");
        let s = PgState::unopened(&url, "public").expect("state");
        let conns: Vec<Conn> = (0..SPARE_PER_URL + 2)
            .map(|_| s.open().expect("open"))
            .collect();
        give_spare(&url, conns);
        let kept = SPARE
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(u, _, _)| *u == url)
            .count();
        assert_eq!(kept, SPARE_PER_URL);
        let taken: Vec<Conn> = std::iter::from_fn(|| take_spare(&url)).collect();
        assert_eq!(taken.len(), SPARE_PER_URL);
    }
}
