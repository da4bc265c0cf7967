//! `PgState` against a real PostgreSQL server, started by `scripts/postgres.sh` (which
//! `scripts/test.sh` runs, exporting `RESOURCESYNC_TEST_POSTGRES`): the state suite, and the
//! sharing of work between workers that an aggregator's processes rely on (the state suite
//! runs in `conformance.rs`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use resourcesync_model::Category;
use resourcesync_store::{
    Batch, Error, Leases, Op, PgState, RecordWrites, Records, ResourceRecord, SourceCursor,
    WorkItem, WorkQueue,
};

/// The variable holding the URL of the test server.
const URL_VAR: &str = "RESOURCESYNC_TEST_POSTGRES";
const LONG: Duration = Duration::from_secs(3600);

/// The URL of the test server. A run without one fails, loudly: a test of PostgreSQL that
/// passes without a server proves nothing.
fn url() -> String {
    match std::env::var(URL_VAR) {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "{URL_VAR} is not set: the PostgreSQL tests need a server. Run \
             `export {URL_VAR}=$(scripts/postgres.sh)` first (it starts one on 127.0.0.1), or \
             run every test with scripts/test.sh"
        ),
    }
}

/// The schemas made by this process, dropped when the value is.
pub(crate) struct Schemas {
    url: String,
    names: Vec<String>,
}

impl Schemas {
    pub(crate) fn new() -> Self {
        Schemas {
            url: url(),
            names: Vec::new(),
        }
    }

    /// A new schema name, unique to this process and call.
    fn fresh(&mut self) -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "t_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        self.names.push(name.clone());
        name
    }

    /// A new state, in a new schema.
    pub(crate) fn state(&mut self) -> PgState {
        let name = self.fresh();
        PgState::connect_schema(&self.url, &name).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for Schemas {
    fn drop(&mut self) {
        let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) else {
            return;
        };
        for n in &self.names {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{n}\" CASCADE"));
        }
    }
}

fn item(k: &str) -> WorkItem {
    WorkItem {
        key: k.into(),
        source: "cap".into(),
        payload: format!("fetch {k}"),
    }
}

/// Two workers, each with its own connections (as two processes would have), claim and
/// complete the same queue at once: each item is done once, none is lost.
#[test]
fn pg_two_workers_share_the_work() {
    let mut schemas = Schemas::new();
    let w1 = schemas.state();
    let name = w1.schema().to_owned();
    let w2 = PgState::connect_schema(&schemas.url, &name).expect("second worker");
    let items: Vec<WorkItem> = (0..300).map(|i| item(&format!("k{i:03}"))).collect();
    assert_eq!(w1.add_work(&items).expect("add"), 300);
    // Queued by the other worker already: not queued again.
    assert_eq!(w2.add_work(&items[..10]).expect("add"), 0);
    let done: Vec<Vec<String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = [(&w1, "w1"), (&w2, "w2")]
            .into_iter()
            .flat_map(|(w, name)| {
                // Two threads per worker: its pool serves both.
                (0..2).map(move |t| (w, format!("{name}.{t}")))
            })
            .map(|(w, worker)| {
                sc.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        let claims = w.claim_work(&worker, 4, LONG).expect("claim");
                        if claims.is_empty() {
                            return done;
                        }
                        assert!(claims.iter().all(|c| c.attempts == 1), "{claims:?}");
                        assert_eq!(w.complete(&claims).expect("complete"), claims.len());
                        // Completing again does nothing.
                        assert_eq!(w.complete(&claims).expect("complete"), 0);
                        done.extend(claims.into_iter().map(|c| c.item.key));
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    let mut seen = HashSet::new();
    for k in done.iter().flatten() {
        assert!(seen.insert(k), "{k} done twice");
    }
    assert_eq!(seen.len(), 300, "items lost");
    // Both workers did some of it (neither waited for the other's claims).
    assert!(
        done.iter().filter(|d| !d.is_empty()).count() >= 2,
        "{done:?}"
    );
    assert!(w1.claim_work("w1", 10, LONG).expect("claim").is_empty());
}

/// A worker that dies (its connections closed, its claims and lease left to expire) has its
/// work taken over by the other, and can no longer complete nor write anything.
#[test]
fn pg_a_dead_workers_work_is_taken_over() {
    let mut schemas = Schemas::new();
    let w2 = schemas.state();
    let name = w2.schema().to_owned();
    w2.add_work(&(0..6).map(|i| item(&format!("k{i}"))).collect::<Vec<_>>())
        .expect("add");
    // The first worker takes a lease and claims items for no time at all (expired as soon as
    // taken: no clock to wait for), then dies.
    let (lease, stale) = {
        let w1 = PgState::connect_schema(&schemas.url, &name).expect("first worker");
        let lease = w1
            .lease_source("cap", "w1", Duration::ZERO)
            .expect("lease")
            .expect("free");
        let stale = w1.claim_work("w1", 4, Duration::ZERO).expect("claim");
        assert_eq!(stale.len(), 4);
        (lease, stale)
    };
    let taken = w2
        .lease_source("cap", "w2", LONG)
        .expect("lease")
        .expect("not taken over");
    assert!(taken.token > lease.token);
    let claims = w2.claim_work("w2", 10, LONG).expect("claim");
    let keys: Vec<&str> = claims.iter().map(|c| c.item.key.as_str()).collect();
    assert_eq!(keys, ["k0", "k1", "k2", "k3", "k4", "k5"], "in queue order");
    assert!(claims[..4].iter().all(|c| c.attempts == 2), "{claims:?}");
    assert!(claims[4..].iter().all(|c| c.attempts == 1), "{claims:?}");
    // A late word from the dead worker (say, a process that was only stalled) changes nothing.
    let w1 = PgState::connect_schema(&schemas.url, &name).expect("first worker again");
    assert_eq!(w1.complete(&stale).expect("complete"), 0);
    assert_eq!(w1.release(&stale).expect("release"), 0);
    let row = ResourceRecord {
        uri: "http://h/a".into(),
        source: "cap".into(),
        path: "a".into(),
        ..ResourceRecord::default()
    };
    let mut b = Batch::new();
    b.fence(&lease)
        .put_resource(&row)
        .push(Op::CompleteWork(&stale[0]));
    match w1.apply(&b) {
        Err(e @ Error::LeaseLost { .. }) => assert_eq!(e.category(), Category::Stop),
        other => panic!("a dead worker's batch: {other:?}"),
    }
    assert_eq!(w2.resource("http://h/a").expect("get"), None);
    // The new holder completes with what it wrote, once.
    let mut b = Batch::new();
    b.fence(&taken)
        .put_resource(&row)
        .push(Op::CompleteWork(&claims[0]));
    w2.apply(&b).expect("apply");
    assert_eq!(w1.resource("http://h/a").expect("get"), Some(row));
    assert_eq!(w2.complete(&claims).expect("complete"), 5);
    assert_eq!(w2.complete(&claims).expect("complete"), 0);
}

/// The schema is versioned: connecting again to one made keeps it; one of a newer version is
/// refused, untouched.
#[test]
fn pg_schema_is_versioned() {
    let mut schemas = Schemas::new();
    let s = schemas.state();
    s.set_gone("http://h/none", true).expect("write");
    let name = s.schema().to_owned();
    drop(s);
    PgState::connect_schema(&schemas.url, &name).expect("reconnect");
    let mut c = postgres::Client::connect(&schemas.url, postgres::NoTls).expect("client");
    c.batch_execute(&format!(
        "UPDATE \"{name}\".meta SET value = '99' WHERE key = 'schema'"
    ))
    .expect("bump");
    match PgState::connect_schema(&schemas.url, &name) {
        Err(e @ Error::NewerSchema { .. }) => {
            assert_eq!(e.category(), Category::Stop);
            // Names the schema, its version and what to do.
            let said = e.to_string();
            for part in [
                format!("(schema {name})"),
                "schema version 99".into(),
                "upgrade this program".into(),
            ] {
                assert!(said.contains(&part), "{part:?} not in: {said}");
            }
        }
        other => panic!("a newer schema: {other:?}"),
    }
    for bad in ["", "Upper", "1x", "pg_x", "a-b", "a\"b", &"x".repeat(64)] {
        assert!(
            matches!(
                PgState::connect_schema(&schemas.url, bad),
                Err(Error::Config { .. })
            ),
            "schema {bad:?} accepted"
        );
    }
}

/// A server that cannot be reached: try again later (the aggregator pauses and resumes).
#[test]
fn pg_unreachable_server_is_retried() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let e = PgState::connect(&format!("postgres://u@127.0.0.1:{port}/db"))
        .expect_err("connected to nothing");
    assert_eq!(e.category(), Category::Retry, "{e}");
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
    let e = PgState::connect("postgres://u@127.0.0.1:notaport/db").expect_err("a bad URL");
    assert_eq!(e.category(), Category::Stop, "{e}");
}

/// The variable that makes [`pg_worker_child`] the child of [`pg_a_killed_worker_loses_nothing`]:
/// the schema to work in.
const CHILD_SCHEMA: &str = "RESOURCESYNC_STORE_PG_CHILD_SCHEMA";
/// How long the child's claims last.
const CHILD_TTL: Duration = Duration::from_millis(500);

/// The child of [`pg_a_killed_worker_loses_nothing`]: does 20 items (saying each on stdout),
/// claims 3 more, says so, and waits to be killed. Does nothing in an ordinary test run.
#[test]
fn pg_worker_child() {
    use std::io::Write;
    let Ok(schema) = std::env::var(CHILD_SCHEMA) else {
        return;
    };
    let w = PgState::connect_schema(&url(), &schema).expect("child worker");
    let mut out = std::io::stdout().lock();
    // The test harness has written "test NAME ... " without a newline.
    writeln!(out).expect("stdout");
    let mut done = 0;
    while done < 20 {
        let claims = w.claim_work("child", 4, CHILD_TTL).expect("claim");
        assert_eq!(w.complete(&claims).expect("complete"), claims.len());
        for c in &claims {
            writeln!(out, "done {}", c.item.key).expect("stdout");
        }
        done += claims.len();
    }
    let held = w.claim_work("child", 3, CHILD_TTL).expect("claim");
    let keys: Vec<&str> = held.iter().map(|c| c.item.key.as_str()).collect();
    writeln!(out, "holding {}", keys.join(" ")).expect("stdout");
    out.flush().expect("stdout");
    // Killed here.
    let _ = std::io::stdin().read_line(&mut String::new());
}

/// A worker process killed with SIGKILL while holding claims: the other worker takes them over
/// once they expire (by the server's clock), and in the end every item was done exactly once.
#[test]
fn pg_a_killed_worker_loses_nothing() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut schemas = Schemas::new();
    let w = schemas.state();
    let all: Vec<String> = (0..60).map(|i| format!("k{i:02}")).collect();
    w.add_work(&all.iter().map(|k| item(k)).collect::<Vec<_>>())
        .expect("add");
    let mut child = Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "pg_state::pg_worker_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_SCHEMA, w.schema())
        .env(URL_VAR, &schemas.url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("child");
    let stdout = child.stdout.take().expect("stdout");
    let mut by_child = HashSet::new();
    let mut held = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.expect("child output");
        if let Some(k) = line.strip_prefix("done ") {
            assert!(by_child.insert(k.to_owned()), "{k} done twice by the child");
        } else if let Some(ks) = line.strip_prefix("holding ") {
            held = ks.split(' ').map(str::to_owned).collect::<Vec<_>>();
            child.kill().expect("SIGKILL");
            break;
        }
    }
    let status = child.wait().expect("wait");
    assert!(!status.success(), "the child was not killed: {status}");
    assert_eq!(held.len(), 3, "the child held {held:?}");
    assert!(by_child.len() >= 20, "{by_child:?}");
    // The survivor works until every item is done; the killed worker's claims come back
    // after their time-to-live.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut by_me = HashSet::new();
    let mut retried = Vec::new();
    while by_child.len() + by_me.len() < all.len() {
        let claims = w.claim_work("survivor", 8, LONG).expect("claim");
        if claims.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?} never came back",
                held
            );
            // Polling until the killed worker's claims expire.
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        assert_eq!(w.complete(&claims).expect("complete"), claims.len());
        for c in claims {
            if c.attempts > 1 {
                retried.push(c.item.key.clone());
            }
            assert!(
                !by_child.contains(&c.item.key),
                "{} done by both",
                c.item.key
            );
            assert!(
                by_me.insert(c.item.key.clone()),
                "{} done twice",
                c.item.key
            );
        }
    }
    retried.sort();
    assert_eq!(retried, held, "taken over");
    assert!(
        w.claim_work("survivor", 8, Duration::ZERO)
            .expect("claim")
            .is_empty()
    );
}

/// The Destination engine calls its state from async tasks. The synchronous client drives its
/// connection on a runtime of its own, which cannot start on a thread of another runtime:
/// every call from a task goes through `blocking::call`, on either kind of Tokio runtime.
#[test]
fn called_from_async_tasks_on_either_runtime() {
    let mut schemas = Schemas::new();
    let st: std::sync::Arc<dyn Records> = std::sync::Arc::new(schemas.state());
    let cursor = SourceCursor {
        source: "s".into(),
        ..SourceCursor::default()
    };
    for multi in [false, true] {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread().build()
        }
        .expect("runtime");
        let (st, cursor) = (st.clone(), cursor.clone());
        rt.block_on(async move {
            let task = tokio::spawn(async move {
                use resourcesync_store::blocking::call;
                call(|| st.set_cursor(&cursor)).expect("write from a task");
                call(|| st.cursor("s")).expect("read from a task")
            });
            assert!(task.await.expect("no panic").is_some());
        });
    }
}

/// A worker watching many Sources' queues (one schema each) learns in one query which have
/// items it may claim: not an empty queue, not one whose items are all held, not a schema that
/// does not exist; an expired claim's item is claimable again.
#[test]
fn pg_schemas_with_work_names_the_queues_to_claim_from() {
    let mut schemas = Schemas::new();
    let (a, b, c) = (schemas.state(), schemas.state(), schemas.state());
    let missing = format!("{}_none", a.schema());
    a.add_work(&[item("a1")]).expect("add");
    b.add_work(&[item("b1")]).expect("add");
    let names = vec![
        a.schema().to_owned(),
        b.schema().to_owned(),
        c.schema().to_owned(),
        missing,
    ];
    let with = c.schemas_with_work(&names).expect("query");
    assert_eq!(with, names[..2].to_vec());
    // Held: not to claim now.
    let held = b.claim_work("w", 1, LONG).expect("claim");
    assert_eq!(held.len(), 1);
    assert_eq!(
        c.schemas_with_work(&names).expect("query"),
        names[..1].to_vec()
    );
    // Held, but expired: to claim again.
    let stale = a.claim_work("w", 1, Duration::ZERO).expect("claim");
    assert_eq!(stale.len(), 1);
    assert_eq!(
        c.schemas_with_work(&names).expect("query"),
        names[..1].to_vec()
    );
    assert_eq!(a.work_left("cap").expect("left"), 1);
    // A name that is no plain schema is refused, not spliced into SQL.
    assert!(c.schemas_with_work(&["x\"; DROP".to_owned()]).is_err());
}

/// A worker's heartbeat (migration 6's `workers`): renewed in every schema it watches that
/// exists, in one call; seen by the others until it expires or is removed; its own not
/// counted.
#[test]
fn pg_worker_heartbeats_are_seen_by_the_others_until_they_end() {
    let mut schemas = Schemas::new();
    let (a, b) = (schemas.state(), schemas.state());
    let missing = format!("{}_none", a.schema());
    let names = vec![a.schema().to_owned(), b.schema().to_owned(), missing];
    assert_eq!(a.other_workers("me").expect("workers"), 0);
    a.beat_workers(&names, "other", LONG).expect("beat");
    b.beat_workers(&names, "me", LONG).expect("beat");
    for s in [&a, &b] {
        assert_eq!(s.other_workers("me").expect("workers"), 1, "{}", s.schema());
        assert_eq!(s.other_workers("other").expect("workers"), 1);
        assert_eq!(s.other_workers("third").expect("workers"), 2);
    }
    // Renewed with a time to live already over: expired, not counted.
    a.beat_workers(&names[..1], "other", Duration::from_millis(1))
        .expect("beat");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(a.other_workers("me").expect("workers"), 0);
    assert_eq!(b.other_workers("me").expect("workers"), 1);
    // Gone (a worker stopping): removed at once.
    b.beat_workers(&names, "other", Duration::ZERO)
        .expect("end");
    assert_eq!(b.other_workers("me").expect("workers"), 0);
    assert!(
        a.beat_workers(&["x\"; DROP".to_owned()], "w", LONG)
            .is_err()
    );
}

/// What a coordinator asks before each page (`others_and_left`): the other live workers, and
/// the items waiting for a claim: never claimed, or claimed and expired; those a worker holds
/// are not counted (they are in its hands, not waiting), nor another Source's.
#[test]
fn pg_items_left_are_those_waiting_for_a_claim() {
    let mut schemas = Schemas::new();
    let s = schemas.state();
    let names = vec![s.schema().to_owned()];
    assert_eq!(s.others_and_left("me", "cap").expect("ask"), (0, 0));
    s.beat_workers(&names, "other", LONG).expect("beat");
    let items: Vec<WorkItem> = (0..10).map(|i| item(&format!("k{i}"))).collect();
    s.add_work(&items).expect("add");
    let elsewhere = WorkItem {
        source: "another".into(),
        ..item("x")
    };
    s.add_work(&[elsewhere]).expect("add");
    assert_eq!(s.others_and_left("me", "cap").expect("ask"), (1, 10));
    let held = s.claim_work("other", 4, LONG).expect("claim");
    assert_eq!(held.len(), 4);
    assert_eq!(s.others_and_left("me", "cap").expect("ask"), (1, 6));
    // Claims already over wait for a claim again.
    let lapsed = s
        .claim_work("other", 2, Duration::from_millis(1))
        .expect("claim");
    assert_eq!(lapsed.len(), 2);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(s.others_and_left("me", "cap").expect("ask"), (1, 6));
    assert_eq!(
        s.work_left("cap").expect("left"),
        10,
        "work_left counts every item"
    );
}

/// A coordinator that asks with no other worker alive tells the workers listening on the
/// queues' channel that one is wanted in its schema; asked with one alive, it says nothing.
#[test]
fn pg_a_coordinator_alone_asks_for_workers() {
    let mut schemas = Schemas::new();
    let s = schemas.state();
    let mut l = s.work_listener().expect("listener");
    let wanted = (
        s.schema().to_owned(),
        resourcesync_store::WORKER_WANTED.to_owned(),
    );
    assert_eq!(s.others_and_left("me", "cap").expect("ask"), (0, 0));
    let mut said = Vec::new();
    for _ in 0..50 {
        said.extend(l.wait(Duration::from_millis(100)).expect("wait"));
        if said.contains(&wanted) {
            break;
        }
    }
    assert!(said.contains(&wanted), "{said:?}");
    s.beat_workers(&[s.schema().to_owned()], "other", LONG)
        .expect("beat");
    assert_eq!(s.others_and_left("me", "cap").expect("ask"), (1, 0));
    let later = l.wait(Duration::from_millis(300)).expect("wait");
    assert!(!later.contains(&wanted), "{later:?}");
}
