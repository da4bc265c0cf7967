//! The OAI-PMH inventory against repositories that would make a harvest costly: an envelope
//! declaring thousands of namespaces (copied into no record that does not use them; bytes
//! capped per record, per response, per harvest), and a list that never ends (pages,
//! records, bytes and time capped per harvest), each cap an error that names it and leaves
//! the index, and so what is published, as it was. Served by the loopback server of
//! `oai_inventory.rs`.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use resourcesync_source::inventory::Inventory;
use resourcesync_source::inventory::oai::OaiOptions;
use resourcesync_source::{Source, SourceConfig};

use super::oai_inventory::{envelope, hostile, listed, ok, open_hostile, page, rec, rels};

/// A `ListRecords` page whose root declares `decls` namespace prefixes (`n0` … ), holding
/// `records` records whose metadata is `body(i)`.
fn flood(decls: usize, records: usize, body: impl Fn(usize) -> String) -> String {
    let mut s = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<OAI-PMH \
         xmlns=\"http://www.openarchives.org/OAI/2.0/\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"",
    );
    for i in 0..decls {
        s.push_str(&format!(" xmlns:n{i}=\"u:{i}\""));
    }
    s.push_str(">\n<responseDate>2026-01-01T00:00:00Z</responseDate>\n<ListRecords>");
    for i in 0..records {
        s.push_str(&format!(
            "<record><header><identifier>r{i}</identifier><datestamp>2026-01-01T00:00:00Z\
             </datestamp></header><metadata>{}</metadata></record>",
            body(i)
        ));
    }
    s.push_str("</ListRecords>\n</OAI-PMH>\n");
    s
}

fn plain(i: usize) -> String {
    format!("<x xmlns=\"urn:x\">record {i}</x>")
}

/// CPU seconds this process has used (user and system, from /proc/self/stat).
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 of the file (utime, stime) are the 12th and 13th after the name.
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

fn stored(inv: &dyn Inventory) -> (usize, u64) {
    let l = listed(inv);
    (l.len(), l.iter().map(|l| l.len).sum())
}

/// The namespace flood's cost: CPU seconds and bytes stored for `OAI_FLOOD_DECLS` prefixes
/// (20,000) and `OAI_FLOOD_RECORDS` records (10) in one response. Ignored: a measurement, run
/// by hand (`cargo test -p resourcesync-source --test it oai_hostile::namespace_flood_cost --
/// --ignored --nocapture`).
#[test]
#[ignore = "a measurement, run by hand"]
fn namespace_flood_cost() {
    let num = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (decls, records) = (num("OAI_FLOOD_DECLS", 20_000), num("OAI_FLOOD_RECORDS", 10));
    let body = flood(decls, records, plain);
    let size = body.len();
    let h = hostile(move |_, _| ok(body.clone()));
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let (cpu, t) = (cpu_seconds(), Instant::now());
    let harvested = inv.harvest();
    let (cpu, wall) = (cpu_seconds() - cpu, t.elapsed());
    let index = std::fs::metadata(work.path().join(".oai-pmh-index.sqlite")).map_or(0, |m| m.len());
    println!(
        "{decls} declarations, {records} records, response {size} bytes: harvest {:?}, \
         {cpu:.2} s CPU, {wall:?} wall, index file {index} bytes",
        harvested.as_ref().map(|r| r.records)
    );
    if harvested.is_ok() {
        let (n, bytes) = stored(&inv);
        println!(
            "stored: {n} records, {bytes} bytes, {} bytes per record",
            bytes / n.max(1) as u64
        );
    }
}

#[test]
fn a_flood_of_namespace_declarations_is_not_copied_into_every_record() {
    // 20,000 prefixes declared on the envelope; record 0 uses two of them (one only in an
    // xsi:type value), the others none.
    let body = flood(20_000, 10, |i| {
        if i == 0 {
            "<n7:r xsi:type=\"n9:T\">zero</n7:r>".to_owned()
        } else {
            plain(i)
        }
    });
    assert!(body.len() > 300_000);
    let h = hostile(move |_, _| ok(body.clone()));
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), OaiOptions::default());
    let rep = inv.harvest().expect("harvest");
    assert_eq!(rep.records, 10);
    // Each record stores what it holds (about 100 bytes), not 20,000 declarations.
    assert!(rep.bytes < 10 * 300, "{} bytes for 10 records", rep.bytes);
    let (n, bytes) = stored(&inv);
    assert_eq!((n, bytes), (10, rep.bytes));
    let mut first = Vec::new();
    inv.open(Path::new("records/r0.xml"))
        .expect("open")
        .read_to_end(&mut first)
        .expect("read");
    let first = String::from_utf8(first).expect("utf-8");
    for d in ["xmlns:n7=\"u:7\"", "xmlns:n9=\"u:9\"", "xmlns:xsi="] {
        assert!(first.contains(d), "{d} in {first}");
    }
    assert!(!first.contains("xmlns:n8="), "{first}");
}

#[test]
fn a_record_past_the_record_cap_is_an_error_naming_it() {
    let h = hostile(|n, _| {
        let size = if n == 0 { 10 } else { 5_000 };
        ok(flood(0, 2, move |i| {
            format!("<x>{}{i}</x>", "y".repeat(size))
        }))
    });
    let work = tempfile::tempdir().expect("work");
    let opts = OaiOptions {
        max_record_bytes: 1_000,
        ..OaiOptions::default()
    };
    let inv = open_hostile(&h, work.path(), opts);
    assert_eq!(rels(&inv), ["records/r0.xml", "records/r1.xml"]);
    let before = inv.stat(Path::new("records/r0.xml")).expect("stat");
    let e = inv.list().err().expect("past the cap").to_string();
    assert!(
        e.contains("maxRecordBytes=1000") && e.contains("in the specification"),
        "{e}"
    );
    // The index is as the first harvest left it.
    assert_eq!(inv.stat(Path::new("records/r0.xml")).expect("stat"), before);
}

/// A repository whose every page holds one new record and a new resumption token, after a
/// first harvest of one record `a`.
fn endless() -> super::oai_inventory::Hostile {
    hostile(|n, _| {
        if n == 0 {
            return ok(page(&["a"], None));
        }
        ok(page(&[&format!("e{n}")], Some(&format!("t{n}"))))
    })
}

/// Harvests `a` from [`endless`] once, then again with `opts` (the list never ending): the
/// error, after which nothing of the second harvest is in the index.
fn endless_error(opts: OaiOptions) -> (String, usize, std::time::Duration) {
    let h = endless();
    let work = tempfile::tempdir().expect("work");
    let inv = open_hostile(&h, work.path(), opts);
    assert_eq!(rels(&inv), ["records/a.xml"]);
    let t = Instant::now();
    let e = inv.list().err().expect("a cap").to_string();
    let took = t.elapsed();
    assert!(inv.stat(Path::new("records/a.xml")).is_ok());
    assert!(inv.stat(Path::new("records/e1.xml")).is_err(), "{e}");
    let requests = h.requests.load(Ordering::SeqCst);
    assert!(
        e.contains("nothing was taken from this harvest") && e.contains("in the specification"),
        "{e}"
    );
    (e, requests, took)
}

#[test]
fn an_endless_list_ends_at_max_pages() {
    let (e, requests, took) = endless_error(OaiOptions {
        max_pages: 200,
        ..OaiOptions::default()
    });
    assert!(e.contains("maxPages=200"), "{e}");
    // The first harvest's one request, then 200.
    assert_eq!(requests, 201);
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}

#[test]
fn an_endless_list_ends_at_max_records_bytes_or_seconds() {
    let (e, _, _) = endless_error(OaiOptions {
        max_records: 50,
        ..OaiOptions::default()
    });
    assert!(e.contains("maxRecords=50"), "{e}");
    let (e, _, _) = endless_error(OaiOptions {
        max_harvest_bytes: 2_000,
        ..OaiOptions::default()
    });
    assert!(e.contains("maxHarvestBytes=2000"), "{e}");
    let (e, _, took) = endless_error(OaiOptions {
        max_harvest_time: std::time::Duration::from_secs(1),
        ..OaiOptions::default()
    });
    assert!(e.contains("maxHarvestSeconds=1"), "{e}");
    assert!(
        took >= std::time::Duration::from_secs(1) && took < std::time::Duration::from_secs(30),
        "{took:?}"
    );
}

/// A record whose header says `status="deleted"` (OAI-PMH 2.0 §2.5.1) is a deletion whatever
/// else it carries: some provider libraries send a `<metadata>` element with it, here one
/// larger than `maxRecordBytes` and one holding two elements. The record leaves the listing and
/// a Source publishes it as deleted; the harvest is not refused for the metadata.
#[test]
fn a_deleted_record_carrying_metadata_is_a_deletion() {
    let deleted = |ident: &str, md: &str| {
        format!(
            "<record><header status=\"deleted\"><identifier>{ident}</identifier><datestamp>\
             2026-01-02T00:00:00Z</datestamp></header><metadata>{md}</metadata></record>"
        )
    };
    let big = format!("<x xmlns=\"urn:x\">{}</x>", "z".repeat(4096));
    let second = format!(
        "<ListRecords>{}{}{}</ListRecords>",
        rec("a"),
        deleted("b", &big),
        deleted("c", "<x xmlns=\"urn:x\">c</x><y xmlns=\"urn:y\">c</y>")
    );
    let second = envelope(&second);
    let changed = Arc::new(AtomicBool::new(false));
    let flag = changed.clone();
    let h = hostile(move |_, _| {
        if flag.load(Ordering::SeqCst) {
            ok(second.clone())
        } else {
            ok(page(&["a", "b", "c"], None))
        }
    });
    let work = tempfile::tempdir().expect("work");
    let opts = OaiOptions {
        max_record_bytes: 1024,
        ..OaiOptions::default()
    };
    let inv: Arc<dyn Inventory> = Arc::new(open_hostile(&h, work.path(), opts));
    let mut cfg = SourceConfig::new(work.path(), "http://127.0.0.1:1/");
    cfg.out = Some(work.path().join("out"));
    let mut s = Source::open_with(cfg, inv.clone()).expect("source");
    let r = s.scan().expect("baseline");
    assert_eq!(r.resources, 3, "{r:?}");
    changed.store(true, Ordering::SeqCst);
    let r = s.scan().expect("scan");
    assert_eq!((r.deleted, r.resources), (2, 1), "{r:?}");
    let rels: Vec<String> = listed(&*inv)
        .into_iter()
        .map(|l| l.rel.to_string_lossy().into_owned())
        .collect();
    assert_eq!(rels.len(), 1, "{rels:?}");
}
