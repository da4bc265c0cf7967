//! Provenance links (Z39.99-2014 §14.8): an inventory that lists a resource with a `via` link
//! gets it published as `<rs:ln rel="via">` in the Resource List (rendered along with the scan,
//! and written from the state by a second publish) and in the Change List; a link that
//! changes alone makes a new row; a Source without them publishes none.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use resourcesync_model::reader::{DocumentReader, ReadOptions};
use resourcesync_model::validate::validate_each;
use resourcesync_model::{Entry, Hashes, Link, W3cDateTime};
use resourcesync_source::inventory::{Inventory, Listing, MemInventory};
use resourcesync_source::publish::{change_list_name, resource_list_name};
use resourcesync_source::{Source, SourceConfig};

const BASE: &str = "http://127.0.0.1:1/agg/";

/// A [`MemInventory`] whose listing carries a `via` link per resource, to `origin` + path.
#[derive(Debug)]
struct Via {
    inner: MemInventory,
    origin: std::sync::Mutex<String>,
}

impl Via {
    fn link(&self, rel: &Path) -> Link {
        let origin = self.origin.lock().expect("lock").clone();
        let mut l = Link::new("via", format!("{origin}{}", rel.display()));
        l.modified = W3cDateTime::parse("2013-01-03T07:00:00Z").ok();
        l.hash = Some(Hashes::parse("md5:1584abdf8ebdc9802ac0c6a7402c03b6").0);
        l.length = Some(8876);
        l
    }
}

impl Inventory for Via {
    fn list(&self) -> resourcesync_source::Result<Listing<'_>> {
        let inner = self.inner.list()?;
        Ok(Box::new(inner.map(move |e| {
            e.map(|mut l| {
                l.via = Some(Box::new(self.link(&l.rel)));
                l
            })
        })))
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn Read + Send>> {
        self.inner.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.inner.stat(rel)
    }
}

/// Every entry of a published document (validated: no error).
fn entries(out: &Path, name: &str) -> Vec<Entry> {
    let bytes = std::fs::read(out.join("resourcesync").join(name)).unwrap_or_else(|e| {
        let _ = std::process::Command::new("find").arg(out).status();
        panic!("{name}: {e}")
    });
    let mut got = Vec::new();
    let report = validate_each(
        DocumentReader::new(&bytes[..], ReadOptions::named(name)).expect("reader"),
        |e| got.push(e.clone()),
    )
    .expect("validate");
    assert!(report.is_valid(), "{name}: {:?}", report.findings);
    got
}

fn vias(e: &Entry) -> Vec<&Link> {
    e.links.iter().filter(|l| l.rel == "via").collect()
}

#[test]
fn via_links_are_published_in_resource_and_change_lists() {
    let work = tempfile::tempdir().expect("dir");
    let inv = Arc::new(Via {
        inner: MemInventory::new(),
        origin: std::sync::Mutex::new("http://original.example/".into()),
    });
    inv.inner.put_at("a.txt", b"a\n", 1_000_000_000_000_000_000);
    inv.inner
        .put_at("b/c.txt", b"c\n", 1_000_000_000_000_000_000);
    let mut cfg = SourceConfig::new(work.path(), BASE);
    cfg.out = Some(work.path().join("www"));
    let mut s = Source::open_with(cfg.clone(), inv.clone()).expect("open");
    s.scan().expect("scan");
    s.publish().expect("publish");
    let out = work.path().join("www");
    let check = |list: &[Entry]| {
        assert_eq!(list.len(), 2);
        for e in list {
            let rel = e.loc.strip_prefix(BASE).expect("under the base");
            let v = vias(e);
            assert_eq!(v.len(), 1, "{}", e.loc);
            assert_eq!(*v[0], inv.link(Path::new(rel)));
        }
    };
    // Rendered along with the scan.
    let list1 = format!("{}.xml", resource_list_name(1));
    let first = entries(&out, &list1);
    check(&first);
    // Written from the state: a Source opened again has nothing rendered, and the list is
    // gone from the output.
    drop(s);
    std::fs::remove_file(out.join("resourcesync").join(&list1)).expect("rm");
    let mut s = Source::open_with(cfg.clone(), inv.clone()).expect("reopen");
    // What the documents were last published from, forgotten: the next publish looks.
    s.state().set_meta("published", "").expect("meta");
    s.publish().expect("publish from the state");
    let again = entries(&out, &list1);
    assert_eq!(again, first);

    // An update: the Change List entry carries the link too.
    inv.inner
        .put_at("a.txt", b"a, changed\n", 1_000_000_001_000_000_000);
    s.scan().expect("scan");
    s.publish().expect("publish");
    let changes = entries(&out, &format!("{}.xml", change_list_name(1)));
    assert_eq!(changes.len(), 1);
    assert_eq!(
        vias(&changes[0]).first().map(|l| l.href.as_str()),
        Some("http://original.example/a.txt")
    );

    // Only the link changes (the original moved): the rows are written again, and the next
    // Resource List says where they come from now.
    *inv.origin.lock().expect("lock") = "http://moved.example/".into();
    let r = s.scan().expect("scan");
    assert_eq!(r.hashed, 2, "{r:?}");
    assert!(!r.changed(), "the resources did not change: {r:?}");
    s.publish().expect("publish");
    let third = entries(&out, &format!("{}.xml", resource_list_name(3)));
    assert!(
        third
            .iter()
            .all(|e| vias(e)[0].href.starts_with("http://moved.example/")),
        "{third:?}"
    );
    let mut via = Vec::new();
    s.state()
        .for_each_resource(|r| {
            via.push(r.via.map(|l| l.href));
            Ok(())
        })
        .expect("rows");
    assert_eq!(
        via,
        [
            Some("http://moved.example/a.txt".to_owned()),
            Some("http://moved.example/b/c.txt".to_owned())
        ]
    );
}

#[test]
fn a_source_without_links_publishes_none() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("x.txt"), b"x").expect("write");
    let mut s = Source::open(SourceConfig::new(dir.path(), BASE)).expect("open");
    s.scan().expect("scan");
    s.publish().expect("publish");
    let list = entries(dir.path(), &format!("{}.xml", resource_list_name(1)));
    assert_eq!(list.len(), 1);
    assert!(list[0].links.is_empty());
}

#[test]
fn a_state_from_before_links_is_migrated() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("x.txt"), b"x").expect("write");
    let state = dir.path().join(".resourcesync/state.sqlite");
    {
        let mut s = Source::open(SourceConfig::new(dir.path(), BASE)).expect("open");
        s.scan().expect("scan");
    }
    // The state as earlier versions made it: no `via` columns.
    let c = rusqlite::Connection::open(&state).expect("db");
    c.execute_batch("ALTER TABLE resources DROP COLUMN via; ALTER TABLE changes DROP COLUMN via;")
        .expect("drop");
    drop(c);
    std::fs::write(dir.path().join("y.txt"), b"y").expect("write");
    let mut s = Source::open(SourceConfig::new(dir.path(), BASE)).expect("open again");
    let r = s.scan().expect("scan");
    assert_eq!(r.created, 1);
    s.publish().expect("publish");
    assert_eq!(s.state().resource_count().expect("count"), 2);
}
