//! Publishing a directory: every document validates, indexes split, change lists record
//! creates, updates and deletes in order.

use std::path::{Path, PathBuf};

use resourcesync_model::validate::validate;
use resourcesync_model::{Change, DocumentReader, Entry, Header, ReadOptions};
use resourcesync_source::publish::PublishOptions;
use resourcesync_source::scan::ScanOptions;
use resourcesync_source::state::Rotation;
use resourcesync_source::{Source, SourceConfig};

fn read(path: &Path) -> (Header, Vec<Entry>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = DocumentReader::new(&bytes[..], ReadOptions::named(path.display().to_string()))
        .expect("header");
    let h = r.header().clone();
    let mut v = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        v.push(e);
    }
    (h, v)
}

fn all_documents(out: &Path) -> Vec<PathBuf> {
    fn walk(d: &Path, acc: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).expect("dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, acc);
            } else if p.extension().is_some_and(|x| x == "xml") {
                acc.push(p);
            }
        }
    }
    let mut v = vec![out.join(".well-known/resourcesync")];
    walk(&out.join("resourcesync"), &mut v);
    v.sort();
    v
}

fn assert_all_valid(out: &Path) -> usize {
    let docs = all_documents(out);
    for d in &docs {
        let bytes = std::fs::read(d).expect("read");
        let r = DocumentReader::new(&bytes[..], ReadOptions::named(d.display().to_string()))
            .and_then(validate)
            .unwrap_or_else(|e| panic!("{e}"));
        let errors: Vec<String> = r
            .findings
            .as_slice()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(r.is_valid(), "{}: {errors:?}", d.display());
        assert_eq!(r.findings.warning_count(), 0, "{}: {errors:?}", d.display());
    }
    docs.len()
}

fn config(dir: &Path, out: &Path) -> SourceConfig {
    let mut cfg = SourceConfig::new(dir, "http://127.0.0.1:8080/data");
    cfg.out = Some(out.to_owned());
    cfg.state = Some(out.join("state.sqlite"));
    cfg
}

fn url_to_doc(out: &Path, url: &str) -> PathBuf {
    out.join(
        url.strip_prefix("http://127.0.0.1:8080/data/")
            .expect("under base"),
    )
}

#[test]
fn publishes_valid_documents_and_tracks_changes_in_order() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    std::fs::create_dir_all(dir.path().join("sub dir")).expect("mkdir");
    std::fs::write(dir.path().join("a.txt"), "alpha").expect("write");
    std::fs::write(dir.path().join("sub dir/b #1.html"), "<p>b</p>").expect("write");
    std::fs::write(dir.path().join(".hidden"), "secret").expect("write");
    let mut s = Source::open(config(dir.path(), out.path())).expect("open");
    let r = s.scan().expect("scan");
    // The first snapshot is the baseline: no change recorded (Z39.99-2017 §5.1, §12.1).
    assert!(r.baseline);
    assert_eq!((r.resources, r.created, r.updated, r.deleted), (2, 0, 0, 0));
    s.publish().expect("publish");
    assert!(assert_all_valid(out.path()) >= 7);

    // The Source Description leads to the Capability List, which leads to everything.
    let (_, sd) = read(&out.path().join(".well-known/resourcesync"));
    let cap_path = url_to_doc(out.path(), &sd[0].loc);
    let (_, caps) = read(&cap_path);
    let rl = caps
        .iter()
        .find(|e| {
            e.md.as_ref()
                .and_then(|m| m.capability.as_ref())
                .map(|c| c.as_str())
                == Some("resourcelist")
        })
        .expect("resource list entry");
    let (rlh, entries) = read(&url_to_doc(out.path(), &rl.loc));
    let rl_at = rlh.md.as_ref().and_then(|m| m.at).expect("at");
    // The first Change List opens at the Resource List's `at`, empty (§7 `from`, §12.1).
    let (clh, cl) = read(&out.path().join("resourcesync/changelists/00001.xml"));
    let clmd = clh.md.as_ref().expect("md");
    assert_eq!((clmd.from, clmd.until, cl.len()), (Some(rl_at), None, 0));
    let locs: Vec<&str> = entries.iter().map(|e| e.loc.as_str()).collect();
    assert_eq!(
        locs,
        [
            "http://127.0.0.1:8080/data/a.txt",
            "http://127.0.0.1:8080/data/sub%20dir/b%20%231.html"
        ]
    );
    assert_eq!(entries[0].length(), Some(5));
    assert_eq!(
        entries[0].hashes().map(ToString::to_string).as_deref(),
        Some("md5:2c1743a391305fbf367df8e4f069f9f9")
    );
    assert_eq!(
        entries[1].md.as_ref().and_then(|m| m.mime_type.as_deref()),
        Some("text/html")
    );

    // Edit: update a, delete b, create c.
    std::fs::write(dir.path().join("a.txt"), "alpha, changed").expect("write");
    std::fs::remove_file(dir.path().join("sub dir/b #1.html")).expect("rm");
    std::fs::write(dir.path().join("c.txt"), "gamma").expect("write");
    let r = s.scan().expect("scan");
    assert!(!r.baseline);
    assert_eq!((r.resources, r.created, r.updated, r.deleted), (2, 1, 1, 1));
    s.publish().expect("publish");
    assert_all_valid(out.path());
    let (_, cl) = read(&out.path().join("resourcesync/changelists/00001.xml"));
    let seen: Vec<(String, Change)> = cl
        .iter()
        .map(|e| {
            (
                e.loc.rsplit('/').next().unwrap_or_default().to_owned(),
                e.change().cloned().expect("change"),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("a.txt".into(), Change::Updated),
            ("c.txt".into(), Change::Created),
            ("b%20%231.html".into(), Change::Deleted),
        ]
    );
    // Datetimes strictly increase: URI+datetime unique, forward chronological order.
    let times: Vec<_> = cl
        .iter()
        .map(|e| e.md.as_ref().and_then(|m| m.datetime).expect("datetime"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    // Deleted entries carry no digest or length.
    assert!(cl[2].hashes().is_none() && cl[2].length().is_none());
    // The earlier Resource List is in the archive.
    let (_, archive) = read(&out.path().join("resourcesync/resourcelist-archive.xml"));
    assert_eq!(archive.len(), 1);

    // Nothing changed: no new snapshot, nothing re-hashed.
    let r = s.scan().expect("scan");
    assert_eq!((r.hashed, r.created, r.updated, r.deleted), (0, 0, 0, 0));
}

#[test]
fn resource_list_splits_into_an_index() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    for i in 0..25 {
        std::fs::write(dir.path().join(format!("f{i:02}.txt")), format!("file {i}"))
            .expect("write");
    }
    let mut cfg = config(dir.path(), out.path());
    cfg.publish = PublishOptions {
        split: resourcesync_model::writer::SplitLimits {
            max_entries: 10,
            ..Default::default()
        },
        ..PublishOptions::default()
    };
    let mut s = Source::open(cfg).expect("open");
    s.scan().expect("scan");
    let rep = s.publish().expect("publish");
    assert_eq!(rep.resource_list_parts, 3);
    assert_all_valid(out.path());
    let (ih, parts) = read(
        &out.path()
            .join("resourcesync/resourcelists/000001/resourcelist.xml"),
    );
    assert!(ih.is_index());
    assert_eq!(parts.len(), 3);
    let mut all = Vec::new();
    for p in &parts {
        let (h, e) = read(&url_to_doc(out.path(), &p.loc));
        assert!(h.link("index").is_some() && h.link("up").is_some());
        all.extend(e.into_iter().map(|e| e.loc));
    }
    assert_eq!(all.len(), 25);
    assert!(all.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn change_lists_rotate_into_an_index_of_consecutive_periods() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    let mut cfg = config(dir.path(), out.path());
    cfg.scan = ScanOptions {
        rotation: Rotation {
            max_entries: 2,
            max_age_secs: 86_400,
        },
        ..ScanOptions::default()
    };
    let mut s = Source::open(cfg).expect("open");
    // The baseline, of an empty tree: the first snapshot records no change.
    s.scan().expect("baseline");
    for i in 0..5 {
        std::fs::write(dir.path().join(format!("r{i}.txt")), format!("v{i}")).expect("write");
        s.scan().expect("scan");
    }
    s.publish().expect("publish");
    assert_all_valid(out.path());
    // Z39.99-2014 §12.1: what the Capability List names is the open Change List itself (it
    // fits in one document), linked to the index and the archive of the earlier ones.
    let (h, open) = read(&out.path().join("resourcesync/changelist.xml"));
    assert!(!h.is_index());
    assert_eq!(open.len(), 1);
    assert!(h.md.as_ref().expect("md").until.is_none());
    let base = "http://127.0.0.1:8080/data/resourcesync/";
    assert_eq!(
        h.link("index").map(|l| l.href.as_str()),
        Some(format!("{base}changelist-index.xml").as_str())
    );
    assert_eq!(
        h.link("archives").map(|l| l.href.as_str()),
        Some(format!("{base}changelist-archive.xml").as_str())
    );
    let (h, lists) = read(&out.path().join("resourcesync/changelist-index.xml"));
    assert!(h.is_index());
    assert_eq!(lists.len(), 3);
    // Closed lists carry until; the last is open; each starts where the previous ended.
    for w in lists.windows(2) {
        let a = w[0].md.as_ref().expect("md");
        let b = w[1].md.as_ref().expect("md");
        assert_eq!(a.until, b.from);
    }
    assert!(lists[2].md.as_ref().expect("md").until.is_none());
    assert_eq!(
        open_from(&out.path().join("resourcesync/changelist.xml")),
        lists[2].md.as_ref().expect("md").from
    );
    let (_, archive) = read(&out.path().join("resourcesync/changelist-archive.xml"));
    assert_eq!(archive.len(), 2);
    // The closed lists are still files, as the archive lists them.
    for e in &archive {
        assert!(url_to_doc(out.path(), &e.loc).is_file(), "{}", e.loc);
    }
}

fn open_from(path: &Path) -> Option<resourcesync_model::W3cDateTime> {
    read(path).0.md.and_then(|m| m.from)
}

#[test]
fn an_open_period_past_one_document_is_published_as_an_index() {
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    let mut cfg = config(dir.path(), out.path());
    // Z39.99-2014 §12.2 / Sitemap limits: here 2 entries make a document.
    cfg.publish.split.max_entries = 2;
    let mut s = Source::open(cfg).expect("open");
    s.scan().expect("baseline");
    for i in 0..3 {
        std::fs::write(dir.path().join(format!("r{i}.txt")), format!("v{i}")).expect("write");
    }
    s.scan().expect("scan");
    s.publish().expect("publish");
    assert_all_valid(out.path());
    let (h, lists) = read(&out.path().join("resourcesync/changelist.xml"));
    assert!(h.is_index());
    assert_eq!(lists.len(), 1);
    assert!(lists[0].md.as_ref().expect("md").until.is_none());
}

#[test]
fn excludes_hidden_files_and_state() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("keep.txt"), "k").expect("write");
    std::fs::write(dir.path().join("skip.log"), "s").expect("write");
    std::fs::create_dir_all(dir.path().join(".git")).expect("mkdir");
    std::fs::write(dir.path().join(".git/config"), "x").expect("write");
    // Default layout: documents and state inside the directory itself.
    let mut cfg = SourceConfig::new(dir.path(), "http://127.0.0.1:8080/");
    cfg.excludes = vec!["*.log".into()];
    let mut s = Source::open(cfg).expect("open");
    let r = s.scan().expect("scan");
    assert_eq!(r.resources, 1);
    s.publish().expect("publish");
    // A second scan does not pick up the documents just written.
    let r = s.scan().expect("scan");
    assert_eq!((r.resources, r.created), (1, 0));
}

#[cfg(unix)]
#[test]
fn symlinks_leaving_the_tree_are_not_followed() {
    let dir = tempfile::tempdir().expect("dir");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "secret").expect("write");
    std::fs::write(dir.path().join("inside.txt"), "in").expect("write");
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        dir.path().join("leak.txt"),
    )
    .expect("symlink");
    std::os::unix::fs::symlink(dir.path().join("inside.txt"), dir.path().join("alias.txt"))
        .expect("symlink");
    let out = tempfile::tempdir().expect("out");
    let mut s = Source::open(config(dir.path(), out.path())).expect("open");
    let r = s.scan().expect("scan");
    assert_eq!(r.resources, 2, "inside.txt and alias.txt only");
    assert!(r.skipped.iter().any(|k| k.path.ends_with("leak.txt")));
}

/// An inventory over a directory whose `open` fails for one name, and whose content for another
/// changes on every read (a file being written while hashed).
#[derive(Debug)]
struct Flaky {
    inner: resourcesync_source::inventory::DirInventory,
    reads: std::sync::atomic::AtomicU64,
}

impl resourcesync_source::inventory::Inventory for Flaky {
    fn list(&self) -> resourcesync_source::Result<resourcesync_source::inventory::Listing<'_>> {
        self.inner.list()
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        if rel.ends_with("locked.txt") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "denied",
            ));
        }
        self.inner.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        let (len, mtime) = self.inner.stat(rel)?;
        if rel.ends_with("growing.txt") {
            // Every stat sees a different modification time: never stable.
            let n = self
                .reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok((len, mtime + i128::from(n)));
        }
        Ok((len, mtime))
    }
}

#[test]
fn unreadable_and_unstable_files_are_skipped_not_fatal() {
    use resourcesync_source::scan::{ScanOptions, scan};
    let dir = tempfile::tempdir().expect("dir");
    for name in ["ok.txt", "locked.txt", "growing.txt"] {
        std::fs::write(dir.path().join(name), name).expect("write");
    }
    let inv = Flaky {
        inner: resourcesync_source::inventory::DirInventory::new(dir.path(), vec![], false, vec![])
            .expect("inventory"),
        reads: std::sync::atomic::AtomicU64::new(0),
    };
    let state_dir = tempfile::tempdir().expect("state");
    let mut state =
        resourcesync_source::state::State::open(&state_dir.path().join("s.sqlite")).expect("state");
    let r = scan(&inv, &mut state, "http://h/", &ScanOptions::default()).expect("scan");
    assert_eq!(r.resources, 1, "only ok.txt is published");
    let mut reasons: Vec<String> = r
        .skipped
        .iter()
        .map(|s| format!("{}: {}", s.path.display(), s.reason))
        .collect();
    reasons.sort();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].starts_with("growing.txt: changed while being read"),
        "{reasons:?}"
    );
    assert!(reasons[1].starts_with("locked.txt: denied"), "{reasons:?}");
}

#[test]
fn a_state_file_inside_the_tree_is_neither_published_nor_hiding_the_tree() {
    // `--state DIR/state.sqlite`: the state's folder is DIR itself.
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    std::fs::write(dir.path().join("a.txt"), "a").expect("write");
    let mut cfg = SourceConfig::new(dir.path(), "http://127.0.0.1:8080/");
    cfg.out = Some(out.path().to_owned());
    cfg.state = Some(dir.path().join("state.sqlite"));
    let mut s = Source::open(cfg).expect("open");
    let r = s.scan().expect("scan");
    assert_eq!(
        r.resources,
        1,
        "only a.txt: {:?}",
        s.state().resources_by_path()
    );
    // What serve would send: a.txt, never the state's files (made here when SQLite has not).
    assert!(
        s.inventory()
            .serve(Path::new("a.txt"))
            .expect("serve")
            .is_some()
    );
    for f in ["state.sqlite", "state.sqlite-wal", "state.sqlite-shm"] {
        let p = dir.path().join(f);
        if !p.exists() {
            std::fs::write(&p, "").expect("write");
        }
        assert!(
            s.inventory().serve(Path::new(f)).expect("serve").is_none(),
            "{f} served"
        );
    }
}

/// The `<url>` lines of a (possibly split) Resource List, in order across its parts.
fn resource_list_lines(out: &Path, snapshot: &str) -> (usize, Vec<String>) {
    let dir = out.join("resourcesync/resourcelists").join(snapshot);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("resourcelist-"))
        })
        .collect();
    files.sort();
    let parts = files.len();
    if files.is_empty() {
        files.push(dir.join("resourcelist.xml"));
    }
    let mut lines = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        lines.extend(
            text.lines()
                .filter(|l| l.starts_with("<url>"))
                .map(str::to_owned),
        );
    }
    (parts, lines)
}

#[test]
fn resource_list_written_from_the_scan_matches_the_one_read_from_the_state() {
    // Names whose path order is not their URI order (a space sorts before `!` as a byte, and
    // after it once encoded as %20), in folders, non-ASCII.
    let dir = tempfile::tempdir().expect("dir");
    for name in [
        "a b.txt",
        "a!b.txt",
        "a-b.txt",
        "a/b.txt",
        "a/c d.html",
        "\u{e9}t\u{e9}.txt",
        "z~.txt",
        "Z.txt",
    ] {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, name).expect("write");
    }
    let split = |cfg: &mut SourceConfig| {
        cfg.publish.split = resourcesync_model::writer::SplitLimits {
            max_entries: 3,
            ..Default::default()
        };
    };
    // Written from the scan: the baseline hashes every file, its entries go straight to the
    // publish that follows.
    let out_a = tempfile::tempdir().expect("out");
    let mut cfg = config(dir.path(), out_a.path());
    split(&mut cfg);
    let mut a = Source::open(cfg).expect("open");
    a.scan().expect("scan");
    a.publish().expect("publish");
    // Read from the state: a second scan (nothing changed, nothing hashed) forgets what the
    // first rendered.
    let out_b = tempfile::tempdir().expect("out");
    let mut cfg = config(dir.path(), out_b.path());
    split(&mut cfg);
    let mut b = Source::open(cfg).expect("open");
    b.scan().expect("scan");
    assert_eq!(b.scan().expect("scan").hashed, 0);
    b.publish().expect("publish");

    let (parts_a, lines_a) = resource_list_lines(out_a.path(), "000001");
    let (parts_b, lines_b) = resource_list_lines(out_b.path(), "000001");
    assert_eq!(parts_a, 3);
    assert_eq!((parts_a, &lines_a), (parts_b, &lines_b));
    assert_all_valid(out_a.path());
    // In the byte order of the paths.
    let paths: Vec<Vec<u8>> = lines_a
        .iter()
        .map(|l| {
            let loc = &l[l.find("<loc>").expect("loc") + 5..l.find("</loc>").expect("loc")];
            let rel = loc
                .strip_prefix("http://127.0.0.1:8080/data/")
                .expect("under base");
            percent_encoding::percent_decode_str(rel).collect::<Vec<u8>>()
        })
        .collect();
    assert_eq!(paths.len(), 8);
    assert!(paths.windows(2).all(|w| w[0] < w[1]), "{paths:?}");
}

/// An inventory over a directory whose `open` fails for `b.txt` while `fail` is set.
#[derive(Debug)]
struct Failing {
    inner: resourcesync_source::inventory::DirInventory,
    fail: std::sync::atomic::AtomicBool,
}

impl resourcesync_source::inventory::Inventory for Failing {
    fn list(&self) -> resourcesync_source::Result<resourcesync_source::inventory::Listing<'_>> {
        self.inner.list()
    }
    fn open(&self, rel: &Path) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        if rel.ends_with("b.txt") && self.fail.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "denied",
            ));
        }
        self.inner.open(rel)
    }
    fn stat(&self, rel: &Path) -> std::io::Result<(u64, i128)> {
        self.inner.stat(rel)
    }
}

#[test]
fn an_unreadable_file_keeps_its_entry_when_everything_else_was_rehashed() {
    use resourcesync_source::layout::Layout;
    use resourcesync_source::scan::scan;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("a.txt"), "a1").expect("write");
    std::fs::write(dir.path().join("b.txt"), "b1").expect("write");
    let inv = Failing {
        inner: resourcesync_source::inventory::DirInventory::new(dir.path(), vec![], false, vec![])
            .expect("inventory"),
        fail: std::sync::atomic::AtomicBool::new(false),
    };
    let state_dir = tempfile::tempdir().expect("state");
    let mut state =
        resourcesync_source::state::State::open(&state_dir.path().join("s.sqlite")).expect("state");
    let opts = ScanOptions::default();
    assert_eq!(
        scan(&inv, &mut state, "http://h/", &opts)
            .expect("scan")
            .resources,
        2
    );
    // Both change (so the scan hashes every file), and b cannot be read: b keeps its previous
    // state, in the snapshot and in its Resource List.
    std::fs::write(dir.path().join("a.txt"), "a2, longer").expect("write");
    std::fs::write(dir.path().join("b.txt"), "b2, longer").expect("write");
    inv.fail.store(true, std::sync::atomic::Ordering::Relaxed);
    let r = scan(&inv, &mut state, "http://h/", &opts).expect("scan");
    assert_eq!(
        (r.resources, r.updated, r.skipped.len()),
        (2, 1, 1),
        "{r:?}"
    );
    let out = tempfile::tempdir().expect("out");
    let layout = Layout::new(out.path(), "http://h/");
    resourcesync_source::publish::publish(&layout, &state, &PublishOptions::default())
        .expect("publish");
    let (_, entries) = read(
        &out.path()
            .join("resourcesync/resourcelists/000002/resourcelist.xml"),
    );
    let got: Vec<(&str, Option<u64>)> = entries
        .iter()
        .map(|e| (e.loc.as_str(), e.length()))
        .collect();
    assert_eq!(
        got,
        [("http://h/a.txt", Some(10)), ("http://h/b.txt", Some(2))]
    );
}

/// A scan reports the bytes of every resource (kept ones included), and its progress counters
/// end at what it read.
#[test]
fn a_scan_counts_every_resources_bytes_and_its_progress() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().expect("dir");
    let out = tempfile::tempdir().expect("out");
    std::fs::write(dir.path().join("a.txt"), "alpha").expect("write");
    std::fs::write(dir.path().join("b.txt"), "beta!!").expect("write");
    let progress = Arc::new(resourcesync_source::scan::ScanProgress::default());
    let mut cfg = config(dir.path(), out.path());
    cfg.scan.progress = Some(progress.clone());
    let mut s = Source::open(cfg).expect("open");
    let r = s.scan().expect("scan");
    assert_eq!((r.bytes, r.bytes_hashed), (11, 11));
    assert!(progress.listed.load(Ordering::Relaxed));
    assert_eq!(progress.to_read.load(Ordering::Relaxed), 2);
    assert_eq!(progress.read.load(Ordering::Relaxed), 2);
    assert_eq!(progress.bytes_read.load(Ordering::Relaxed), 11);
    std::fs::write(dir.path().join("c.txt"), "gamma, longer").expect("write");
    let r = s.scan().expect("scan");
    assert_eq!((r.bytes, r.bytes_hashed, r.hashed), (24, 13, 1));
    assert_eq!(progress.to_read.load(Ordering::Relaxed), 1);
    assert_eq!(progress.bytes_read.load(Ordering::Relaxed), 13);
}
