//! The plans PostgreSQL makes for the path lookups (`sql::PATH_OWNER`, `sql::PATH_OWNERS`)
//! on a table it knows nothing of: a new Source's `resources`, never analyzed, as during its
//! first sync until autovacuum's next visit (issue 36 item 6). Each lookup must read only the
//! rows of its path (the index on `path`), never walk the table: counted by PostgreSQL itself
//! (`EXPLAIN ANALYZE`'s rows removed by a filter), not by the time it takes. Against the server
//! of `scripts/postgres.sh` (`RESOURCESYNC_TEST_POSTGRES`); without one these tests fail.

use postgres::types::ToSql;
use postgres::{Client, NoTls};

use super::{PgState, sql};

/// Rows recorded: a walk of the table would read all of them for each path looked up.
const ROWS: usize = 20_000;

/// The server of `scripts/postgres.sh` (`RESOURCESYNC_TEST_POSTGRES`), for the unit tests of
/// every module here; panics, saying how to start one, without it.
pub(super) fn url() -> String {
    const VAR: &str = "RESOURCESYNC_TEST_POSTGRES";
    match std::env::var(VAR) {
        Ok(u) if !u.is_empty() => u,
        _ => panic!(
            "{VAR} is not set: the PostgreSQL tests need a server. Run \
             `export {VAR}=$(scripts/postgres.sh)` first (it starts one on 127.0.0.1)"
        ),
    }
}

/// A new schema with `ROWS` rows in a `resources` table autovacuum leaves alone (never
/// analyzed, whenever its next visit comes), and a client in it; dropped with the value.
struct Fresh {
    client: Client,
    schema: String,
}

impl Fresh {
    fn new() -> Self {
        let url = url();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let schema = format!("t_plans_{}_{nanos}", std::process::id());
        drop(PgState::connect_schema(&url, &schema).expect("schema"));
        let mut client = Client::connect(&url, NoTls).expect("client");
        client
            .batch_execute(&format!(
                "SET search_path TO \"{schema}\";
                 ALTER TABLE resources SET (autovacuum_enabled = false);
                 INSERT INTO resources(uri, source, path)
                     SELECT 'http://example.org/r' || lpad(i::text, 6, '0'), 's',
                            'r' || lpad(i::text, 6, '0')
                     FROM generate_series(1, {ROWS}) AS i;"
            ))
            .expect("rows");
        let tuples: f32 = client
            .query_one(
                "SELECT reltuples FROM pg_class WHERE oid = 'resources'::regclass",
                &[],
            )
            .expect("pg_class")
            .get(0);
        assert!(tuples < 0.0, "the table was analyzed ({tuples} rows known)");
        Fresh { client, schema }
    }

    /// The plan of `sql` run with `params`, as `EXPLAIN ANALYZE` prints it; and the rows
    /// its filters removed (every row read but not returned), summed over the loops.
    fn removed(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> (String, u64) {
        let plan: Vec<String> = self
            .client
            .query(&format!("EXPLAIN (ANALYZE, TIMING OFF) {sql}"), params)
            .expect("explain")
            .iter()
            .map(|r| r.get(0))
            .collect();
        let (mut loops, mut removed) = (1u64, 0u64);
        for line in &plan {
            if let Some(l) = line.split("loops=").nth(1) {
                loops = l.trim_end_matches(')').parse().expect("loops");
            }
            if let Some(n) = line.split("Rows Removed by Filter: ").nth(1) {
                removed += n.trim().parse::<u64>().expect("rows removed") * loops;
            }
        }
        (plan.join("\n"), removed)
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        let _ = self.client.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            self.schema
        ));
    }
}

#[test]
fn the_owners_of_a_batch_of_paths_are_found_by_the_path_index_on_a_table_never_analyzed() {
    let mut t = Fresh::new();
    let mut paths: Vec<String> = (0..50).map(|i| format!("new/{i}.txt")).collect();
    paths.push("r000042".into());
    let (plan, removed) = t.removed(sql::PATH_OWNERS, &[&paths]);
    assert_eq!(removed, 0, "rows read beside the paths':\n{plan}");
    let rows = t.client.query(sql::PATH_OWNERS, &[&paths]).expect("owners");
    let owners: Vec<Option<String>> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(owners.len(), paths.len());
    assert!(owners[..50].iter().all(Option::is_none), "{owners:?}");
    assert_eq!(owners[50].as_deref(), Some("http://example.org/r000042"));
}

#[test]
fn the_owner_of_one_path_is_found_by_the_path_index_on_a_table_never_analyzed() {
    let mut t = Fresh::new();
    let (plan, removed) = t.removed(sql::PATH_OWNER, &[&"new/1.txt"]);
    assert_eq!(removed, 0, "rows read beside the path's:\n{plan}");
    // Two URIs of one path (a state written before a path was held by one URI at most): the
    // least in byte order.
    t.client
        .execute(
            "INSERT INTO resources(uri, source, path) VALUES ('http://example.org/a', 's', 'r000007')",
            &[],
        )
        .expect("insert");
    let owner: Option<String> = t
        .client
        .query_one(sql::PATH_OWNER, &[&"r000007"])
        .expect("owner")
        .get(0);
    assert_eq!(owner.as_deref(), Some("http://example.org/a"));
    let none: Option<String> = t
        .client
        .query_one(sql::PATH_OWNER, &[&"new/1.txt"])
        .expect("owner")
        .get(0);
    assert_eq!(none, None);
}
