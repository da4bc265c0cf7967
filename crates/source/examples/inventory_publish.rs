//! The bench behind `bench/inventory-publish.sh`: N resources of 1 KiB as rows of a PostgreSQL
//! table (`path`, `body`, `updated_at`, `md5`) and as files of a directory, each published
//! once (scan into a new state, then every document to a directory), timed; also the table
//! through a view without its `md5` column (every body read and hashed, as files are).
//!
//! Usage: `inventory_publish POSTGRES_URL N WORKDIR`; prints one line per kind:
//! `KIND RESOURCES SECONDS RESOURCES_PER_SECOND`.

use std::path::Path;
use std::time::Instant;

use resourcesync_source::inventory::{DirInventory, Inventory, PgInventory};
use resourcesync_source::layout::Layout;
use resourcesync_source::publish::sink::DirSink;
use resourcesync_source::publish::{PublishOptions, publish_to};
use resourcesync_source::scan::{ScanOptions, scan};
use resourcesync_source::state::State;

const BASE: &str = "http://example.org/";

fn publish(kind: &str, inv: &dyn Inventory, work: &Path, n: u64) {
    let dir = work.join(kind);
    std::fs::create_dir_all(&dir).expect("dir");
    let start = Instant::now();
    let mut state = State::open(&dir.join("state.sqlite")).expect("state");
    let r = scan(inv, &mut state, BASE, &ScanOptions::default()).expect("scan");
    let layout = Layout::new(dir.join("out"), BASE);
    publish_to(
        &DirSink::new(dir.join("out")),
        &layout,
        &state,
        &PublishOptions::default(),
    )
    .expect("publish");
    state.settle().expect("settle");
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r.resources, n, "{kind}: {r:?}");
    println!("{kind} {} {secs:.2} {:.0}", r.resources, n as f64 / secs);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, n, work] = &args[..] else {
        eprintln!("usage: inventory_publish POSTGRES_URL N WORKDIR");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("N");
    let work = Path::new(work);
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let schema = format!("bench_{}", std::process::id());
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
         CREATE TABLE {schema}.resources (path text PRIMARY KEY, body bytea NOT NULL,
           updated_at timestamptz NOT NULL DEFAULT now(), md5 text);
         INSERT INTO {schema}.resources (path, body)
           SELECT 'd' || (i % 100) || '/f' || lpad(i::text, 7, '0') || '.txt',
                  decode(repeat(md5(i::text), 64), 'hex')
           FROM generate_series(1, {n}) i;
         UPDATE {schema}.resources SET md5 = md5(body);
         CREATE VIEW {schema}.no_md5 AS SELECT path, body, updated_at FROM {schema}.resources;
         ANALYZE {schema}.resources;"
    ))
    .expect("load");
    // The same files in a directory.
    let tree = work.join("tree");
    for row in c
        .query(&format!("SELECT path, body FROM {schema}.resources"), &[])
        .expect("rows")
    {
        let (p, b): (String, Vec<u8>) = (row.get(0), row.get(1));
        let f = tree.join(p);
        if let Some(d) = f.parent() {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(f, b).expect("write");
    }
    eprintln!("loaded {n} rows and files");
    let dir = DirInventory::new(&tree, Vec::new(), false, Vec::new()).expect("dir");
    publish("directory", &dir, work, n);
    let pg = PgInventory::connect(&format!("{url}?table={schema}.resources")).expect("pg");
    publish("postgres", &pg, work, n);
    let pg = PgInventory::connect(&format!("{url}?table={schema}.no_md5")).expect("pg");
    publish("postgres-no-md5", &pg, work, n);
    let _ = c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
}
