//! Unit tests of `audit`.

use std::path::{Path, PathBuf};

use resourcesync_model::{DocumentReader, HashAlg, Hashes, MultiHasher, ReadOptions, W3cDateTime};
use resourcesync_store::{FsStore, RecordWrites, Records, ResourceRecord, STATE_DIR, SqliteState};

use super::*;
use crate::discover::docs::ListSink;
use crate::report::Quiet;

const BASE: &str = "http://h/";
const SOURCE: &str = "http://h/capabilitylist.xml";

fn md5(data: &[u8]) -> Hashes {
    let mut h = MultiHasher::new(&[HashAlg::Md5]);
    h.update(data);
    h.finish()
}

fn dtm(s: &str) -> W3cDateTime {
    W3cDateTime::parse(s).expect("datetime")
}

/// `<url>` elements of a Resource List (or Change List with `change`).
fn url(loc: &str, lastmod: Option<&str>, md: &str) -> String {
    let lm = lastmod.map_or(String::new(), |l| format!("<lastmod>{l}</lastmod>"));
    format!("<url><loc>{loc}</loc>{lm}<rs:md {md}/></url>\n")
}

fn feed(sink: &mut Sink, capability: &str, urls: &[String]) {
    let doc = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset \
         xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\" \
         xmlns:rs=\"http://www.openarchives.org/rs/terms/\">\n\
         <rs:md capability=\"{capability}\" at=\"2020-01-01T00:00:00Z\"/>\n{}</urlset>\n",
        urls.concat()
    );
    let mut r = DocumentReader::open(
        std::io::Cursor::new(doc.into_bytes()),
        ReadOptions::named("t"),
    )
    .expect("document");
    while let Some(e) = r.next_entry().expect("entry") {
        sink.entry(e).expect("sink");
    }
}

fn sink(scratch: &Path, max_bytes: usize) -> Sink {
    Sink {
        list: List::new(),
        scratch: scratch.to_path_buf(),
        max_bytes,
        mapper: UriMapper::new(BASE).expect("mapper"),
        since: None,
    }
}

fn row(
    uri: &str,
    source: &str,
    path: &str,
    length: u64,
    hashes: Hashes,
    lastmod: Option<&str>,
) -> ResourceRecord {
    ResourceRecord {
        uri: uri.into(),
        source: source.into(),
        path: path.into(),
        length: Some(length),
        hashes,
        lastmod: lastmod.map(dtm),
        ..ResourceRecord::default()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    dest: PathBuf,
    scratch: PathBuf,
    state: Arc<SqliteState>,
    urls: Vec<String>,
}

/// A destination with one resource of each kind of finding.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("tmp");
    let dest = dir.path().join("dest");
    let outside = dir.path().join("outside");
    let scratch = dir.path().join("scratch");
    for d in [&dest, &outside, &scratch] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    write_files(&dest, &outside);
    let state = SqliteState::open(&dest.join(STATE_DIR).join("state.sqlite")).expect("state");
    for r in &recorded_rows() {
        state.put_resource(r).expect("row");
    }
    Fixture {
        _dir: dir,
        dest,
        scratch,
        state: Arc::new(state),
        urls: listed_urls(),
    }
}

/// The files under DEST (one per finding, links and special files among them) and outside it.
fn write_files(dest: &Path, outside: &Path) {
    let write = |p: &str, data: &[u8]| {
        let f = dest.join(p);
        std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
        std::fs::write(f, data).expect("write");
    };
    write("same.txt", b"same");
    write("d/digest.txt", b"abce"); // published and recorded: "abcd"
    write("len.txt", b"abc"); // published and recorded: 5 bytes
    write("lastmod.txt", b"lm");
    write("norow.txt", b"no row");
    write("gone.txt", b"gone");
    write("stray.txt", b"?");
    write("other.txt", b"another Source's");
    write("fastsize.txt", b"new!"); // recorded: "old"
    std::fs::write(outside.join("secret"), b"secret").expect("secret");
    std::fs::write(outside.join("in-link.txt"), b"linked").expect("linked");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.join("secret"), dest.join("link")).expect("link");
        std::os::unix::fs::symlink(outside, dest.join("sub")).expect("dir link");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dest.join("fifo.txt"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("fifo");
        use std::os::unix::ffi::OsStrExt;
        std::fs::write(dest.join(std::ffi::OsStr::from_bytes(b"bad\xff")), b"x")
            .expect("non-UTF-8 name");
    }
    // The Destination's own folder is not walked.
    std::fs::create_dir_all(dest.join(STATE_DIR).join("tmp")).expect("state dir");
    std::fs::write(dest.join(STATE_DIR).join("tmp").join("dl-1"), b"x").expect("tmp");
}

/// What the state records: right, wrong, gone, unsafe, another Source's.
fn recorded_rows() -> Vec<ResourceRecord> {
    vec![
        row(
            "http://h/same.txt",
            SOURCE,
            "same.txt",
            4,
            md5(b"same"),
            None,
        ),
        row(
            "http://h/d/digest.txt",
            SOURCE,
            "d/digest.txt",
            4,
            md5(b"abcd"),
            None,
        ),
        row(
            "http://h/len.txt",
            SOURCE,
            "len.txt",
            5,
            md5(b"abcde"),
            None,
        ),
        row(
            "http://h/lastmod.txt",
            SOURCE,
            "lastmod.txt",
            2,
            md5(b"lm"),
            Some("2020-01-01T00:00:00Z"),
        ),
        row(
            "http://h/missing.txt",
            SOURCE,
            "missing.txt",
            1,
            md5(b"m"),
            None,
        ),
        row(
            "http://h/gone.txt",
            SOURCE,
            "gone.txt",
            4,
            md5(b"gone"),
            None,
        ),
        row(
            "http://h/gone2.txt",
            SOURCE,
            "gone2.txt",
            1,
            md5(b"g"),
            None,
        ),
        row(
            "http://h/fastsize.txt",
            SOURCE,
            "fastsize.txt",
            3,
            md5(b"old"),
            None,
        ),
        row(
            "http://h/sub/in-link.txt",
            SOURCE,
            "sub/in-link.txt",
            6,
            md5(b"linked"),
            None,
        ),
        row("http://h/fifo.txt", SOURCE, "fifo.txt", 1, md5(b"f"), None),
        // Not a safe path: never read, and not a copy.
        row(
            "http://h/unsafe",
            SOURCE,
            "../secret",
            6,
            md5(b"secret"),
            None,
        ),
        row(
            "http://o/other.txt",
            "http://o/capabilitylist.xml",
            "other.txt",
            16,
            md5(b"another Source's"),
            None,
        ),
    ]
}

/// The Resource List's `<url>` elements.
fn listed_urls() -> Vec<String> {
    let h = |data: &[u8]| md5(data).to_string();
    vec![
        url(
            "http://h/same.txt",
            None,
            &format!("hash=\"{}\" length=\"4\"", h(b"same")),
        ),
        url(
            "http://h/d/digest.txt",
            None,
            &format!("hash=\"{}\" length=\"4\"", h(b"abcd")),
        ),
        url("http://h/len.txt", None, "length=\"5\""),
        url("http://h/lastmod.txt", Some("2020-02-01T00:00:00Z"), ""),
        url("http://h/missing.txt", None, "length=\"1\""),
        url(
            "http://h/norow.txt",
            None,
            &format!("hash=\"{}\"", h(b"no row")),
        ),
        url("http://h/norow-missing.txt", None, "length=\"1\""),
        url("http://h/a/%2e%2e/x", None, "length=\"1\""),
        url(
            "http://h/fastsize.txt",
            None,
            &format!("hash=\"{}\"", h(b"new!")),
        ),
        url(
            "http://h/sub/in-link.txt",
            None,
            &format!("hash=\"{}\" length=\"6\"", h(b"linked")),
        ),
        url("http://h/fifo.txt", None, &format!("hash=\"{}\"", h(b"f"))),
    ]
}

/// The findings, sorted, as (kind, path, why, uri).
fn run(f: &Fixture, limits: Limits, fast: bool) -> (u64, Vec<(String, String, String, String)>) {
    let mut s = sink(&f.scratch, limits.list_bytes);
    feed(&mut s, "resourcelist", &f.urls);
    let mut list = s.list;
    list.finish().expect("finish");
    assert_eq!(
        matches!(list, List::Disk(_)),
        limits.list_bytes == 0,
        "the list is on disk past its memory bound"
    );
    let store = FsStore::existing(&f.dest);
    let tree = walk_tree(&store, limits.walk_files, &AtomicBool::new(false)).expect("walk");
    assert_eq!(tree.is_none(), limits.walk_files == 0);
    let copies = match tree {
        Some(t) => Copies::Walked(t, &store),
        None => Copies::OnDisk(&store),
    };
    let compare = Compare {
        state: f.state.as_ref(),
        obs: &Quiet,
        fast,
        threads: 2,
        own_state: None,
    };
    let found = if limits.list_bytes == 0 {
        // Small pages.
        compare.run(&mut list, copies, |after| {
            f.state
                .resources_page(SOURCE, after, 2)
                .map_err(Error::from)
        })
    } else {
        // Read ahead on a thread, as the audit does.
        let rows = rows_ahead(f.state.clone(), SOURCE.into());
        compare.run(&mut list, copies, |_| rows.recv().expect("a page"))
    }
    .expect("compare");
    let mut all = Vec::new();
    for (kind, v) in [
        ("missing", &found.missing),
        ("extra", &found.extra),
        ("different", &found.different),
    ] {
        for d in v {
            let path = d.path.clone().unwrap_or_default();
            // The non-UTF-8 name is reported by its full path: keep its end.
            let path = if d.path.is_none() && d.why.contains("UTF-8") {
                "(bad name)".into()
            } else {
                path
            };
            all.push((kind.to_owned(), path, d.why.clone(), d.uri.clone()));
        }
    }
    assert_eq!(found.missing_count as usize, found.missing.len());
    assert_eq!(found.extra_count as usize, found.extra.len());
    assert_eq!(found.different_count as usize, found.different.len());
    all.sort();
    (found.in_sync, all)
}

fn t(kind: &str, path: &str, why: &str, uri: &str) -> (String, String, String, String) {
    (kind.into(), path.into(), why.into(), uri.into())
}

fn expected(fast: bool) -> (u64, Vec<(String, String, String, String)>) {
    let mut v = vec![
        t("different", "len.txt", "length", "http://h/len.txt"),
        t(
            "different",
            "lastmod.txt",
            "lastmod",
            "http://h/lastmod.txt",
        ),
        t(
            "extra",
            "gone.txt",
            "not at the Source",
            "http://h/gone.txt",
        ),
        t("extra", "link", "no resource maps to this file", ""),
        t("extra", "stray.txt", "no resource maps to this file", ""),
        t("extra", "sub", "no resource maps to this file", ""),
        t(
            "missing",
            "",
            "no safe path under the destination",
            "http://h/a/%2e%2e/x",
        ),
        t("missing", "fifo.txt", "no copy", "http://h/fifo.txt"),
        t("missing", "missing.txt", "no copy", "http://h/missing.txt"),
        t(
            "missing",
            "norow-missing.txt",
            "no copy",
            "http://h/norow-missing.txt",
        ),
        t(
            "missing",
            "sub/in-link.txt",
            "no copy",
            "http://h/sub/in-link.txt",
        ),
    ];
    if cfg!(unix) {
        v.push(t("extra", "(bad name)", "", ""));
    } else {
        v.retain(|x| !["link", "sub", "fifo.txt", "sub/in-link.txt"].contains(&x.1.as_str()));
    }
    // same, norow, fastsize (and, fast, digest: by the recorded digest)
    let mut in_sync = 3;
    if fast {
        in_sync += 1;
    } else {
        v.push(t(
            "different",
            "d/digest.txt",
            "digest",
            "http://h/d/digest.txt",
        ));
    }
    v.sort();
    (in_sync, v)
}

fn without_bad_name_reason(
    mut r: (u64, Vec<(String, String, String, String)>),
) -> (u64, Vec<(String, String, String, String)>) {
    for x in &mut r.1 {
        if x.1 == "(bad name)" {
            assert!(x.2.contains("not UTF-8"), "{x:?}");
            x.2 = String::new();
        }
    }
    r.1.sort();
    r
}

#[test]
fn every_kind_of_finding_in_memory_and_on_disk_alike() {
    let f = fixture();
    for fast in [false, true] {
        for limits in [
            LIMITS,
            Limits {
                list_bytes: 0,
                ..LIMITS
            },
            Limits {
                walk_files: 0,
                ..LIMITS
            },
            Limits {
                list_bytes: 0,
                walk_files: 0,
            },
        ] {
            assert_eq!(
                without_bad_name_reason(run(&f, limits, fast)),
                expected(fast),
                "fast {fast}, {limits:?}"
            );
        }
    }
}

#[test]
fn a_walk_past_its_bound_gives_up() {
    let f = fixture();
    let cancel = AtomicBool::new(false);
    let store = FsStore::existing(&f.dest);
    assert!(walk_tree(&store, 3, &cancel).expect("walk").is_none());
    let all = walk_tree(&store, 1000, &cancel)
        .expect("walk")
        .expect("tree");
    assert!(
        all.files.keys().all(|p| !p.starts_with(STATE_DIR)),
        "own folder skipped"
    );
    assert!(all.files.contains_key("d/digest.txt"));
    cancel.store(true, Ordering::Relaxed);
    assert!(
        walk_tree(&store, 1000, &cancel).expect("walk").is_none(),
        "cancelled"
    );
    let missing = f.dest.join("nowhere");
    let empty = walk_tree(&FsStore::existing(&missing), 0, &AtomicBool::new(false))
        .expect("walk")
        .expect("tree");
    assert!(empty.files.is_empty());
}

#[test]
fn changes_after_the_list_replace_and_remove_entries_in_memory_and_on_disk() {
    let d = tempfile::tempdir().expect("tmp");
    for max_bytes in [LIST_MEMORY_BYTES, 0] {
        let mut s = sink(d.path(), max_bytes);
        feed(
            &mut s,
            "resourcelist",
            &[
                url("http://h/a", None, "length=\"1\""),
                url("http://h/b", None, "length=\"1\""),
                url("http://h/c", None, "length=\"1\""),
            ],
        );
        s.since = Some(dtm("2020-01-01T00:00:00Z"));
        feed(
            &mut s,
            "changelist",
            &[
                // At the list's time: already in it.
                url(
                    "http://h/a",
                    Some("2020-01-01T00:00:00Z"),
                    "change=\"deleted\"",
                ),
                url(
                    "http://h/b",
                    Some("2020-01-02T00:00:00Z"),
                    "change=\"updated\" length=\"2\"",
                ),
                url(
                    "http://h/c",
                    Some("2020-01-02T00:00:00Z"),
                    "change=\"deleted\"",
                ),
                url(
                    "http://h/d",
                    Some("2020-01-03T00:00:00Z"),
                    "change=\"created\" length=\"3\"",
                ),
            ],
        );
        let mut list = s.list;
        list.finish().expect("finish");
        assert_eq!(list.count().expect("count"), 3);
        let page: Vec<(String, Option<u64>, Option<String>)> = list
            .page(None, 10)
            .expect("page")
            .into_iter()
            .map(|(u, p)| (u, p.length, p.path))
            .collect();
        let e = |u: &str, n: u64, p: &str| (u.to_owned(), Some(n), Some(p.to_owned()));
        assert_eq!(
            page,
            [
                e("http://h/a", 1, "a"),
                e("http://h/b", 2, "b"),
                e("http://h/d", 3, "d")
            ]
        );
        assert_eq!(list.page(Some("http://h/b"), 10).expect("page").len(), 1);
        assert!(list.has_path("d").expect("path"));
        assert!(!list.has_path("c").expect("path"));
    }
}
