//! A worker whose shared state is of a newer schema than it knows (workers of a newer release
//! migrated it) says so once, naming the schema, its version and what to do, and fetches its
//! own Sources' resources itself; before, its claimer asked again every second, for ever, while
//! its coordinator, having queued a page for the workers, waited for a queue it could not drain.
//! PostgreSQL state (`scripts/postgres.sh`, `RESOURCESYNC_TEST_POSTGRES`), in a database of the
//! test's own: the workers' board (schema `resourcesync`) of the server the other tests share
//! is left alone.

use std::time::Duration;

use resourcesync_store::PgState;

use crate::service::until;
use crate::share_alone::{off_runtime, other_worker_alive, source, start, synced};

/// A database made for one test on the test server, dropped with the value.
struct Database {
    /// The server's URL.
    server: String,
    name: String,
    /// The URL of this database.
    url: String,
}

impl Database {
    fn new(server: &str) -> Self {
        let name = format!("t_newer_{}_{:08x}", std::process::id(), fastrand::u32(..));
        let (base, _) = server.rsplit_once('/').expect("a database in the URL");
        let url = format!("{base}/{name}");
        let (s, n) = (server.to_owned(), name.clone());
        off_runtime(move || {
            let mut c = postgres::Client::connect(&s, postgres::NoTls).expect("server");
            c.batch_execute(&format!("CREATE DATABASE \"{n}\""))
                .expect("database");
        });
        Database {
            server: server.to_owned(),
            name,
            url,
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let (s, n) = (self.server.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            if let Ok(mut c) = postgres::Client::connect(&s, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS \"{n}\" WITH (FORCE)"));
            }
        })
        .join();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_meeting_a_newer_schema_says_so_once_and_fetches_its_sources_itself() {
    crate::logs::capture();
    let pg = crate::server_env("RESOURCESYNC_TEST_POSTGRES");
    let db = Database::new(&pg);
    // The workers' board as a newer release leaves it.
    let url = db.url.clone();
    off_runtime(move || {
        drop(PgState::connect(&url).expect("board"));
        let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("client");
        c.batch_execute("UPDATE resourcesync.meta SET value = '999' WHERE key = 'schema'")
            .expect("newer");
    });
    let (s, _dir) = source(20).await;
    let name = format!("newer_{:08x}", fastrand::u32(..));
    // Another worker alive: without the refusal, the sync would queue its fetches for it.
    other_worker_alive(&db.url, &name);
    let store = tempfile::tempdir().expect("store");
    let agg = start(&db.url, store.path(), "older", &name, &s.base, "");
    let v = until(&agg, &name, Duration::from_secs(60), |v| synced(v, 20)).await;
    assert_eq!((v.shared_copies, v.shared_failures), (0, 0), "{v:#?}");
    agg.drain(Duration::from_secs(30)).await;
    let said = crate::logs::lines_with(&[&db.name, "schema version 999"]);
    assert_eq!(said.len(), 1, "said once: {said:#?}");
    for part in [
        "ERROR",
        "(schema resourcesync)",
        "newer than this program knows",
        "upgrade this program",
    ] {
        assert!(said[0].contains(part), "{part:?} not in {:?}", said[0]);
    }
}
