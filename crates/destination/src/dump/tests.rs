//! Unit tests of `dump`.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use resourcesync_store::{FsStore, STATE_DIR};
use zip::ZipArchive;

use super::package::{IO_BUF, PackageReader, inflate};
use super::*;
use crate::mapping::UriMapper;

#[test]
fn packages_are_chosen_by_the_end_of_their_period() {
    let dt = |s: &str| s.parse::<W3cDateTime>().expect("datetime");
    let package = |loc: &str, from: &str, until: Option<&str>| {
        let mut e = Entry::new(loc);
        let md = e.md_mut();
        md.from = Some(dt(from));
        md.until = until.map(dt);
        e
    };
    let packages = vec![
        package("late", "2024-01-03T00:00:00Z", None),
        package(
            "spanning",
            "2024-01-01T00:00:00Z",
            Some("2024-01-02T12:00:00Z"),
        ),
        package(
            "before",
            "2023-12-01T00:00:00Z",
            Some("2024-01-01T00:00:00Z"),
        ),
        package(
            "ending-at",
            "2024-01-01T00:00:00Z",
            Some("2024-01-02T00:00:00Z"),
        ),
        Entry::new("undated"),
    ];
    let locs: Vec<String> = packages_after(packages, &dt("2024-01-02T00:00:00Z"))
        .into_iter()
        .map(|e| e.loc)
        .collect();
    assert_eq!(locs, ["spanning", "late"]);
}

fn zip_file(entries: &[(&str, &[u8])]) -> (tempfile::TempDir, ZipArchive<PackageReader>) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("p.zip");
    let mut w = zip::ZipWriter::new(File::create(&path).expect("create"));
    for (name, bytes) in entries {
        w.start_file(
            *name,
            zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated),
        )
        .expect("start");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish");
    let z = ZipArchive::new(PackageReader::new(File::open(&path).expect("open"))).expect("zip");
    (dir, z)
}

#[test]
fn package_reader_reads_what_the_file_holds_across_seeks() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("f");
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).expect("write");
    let mut r = PackageReader::new(File::open(&path).expect("open"));
    let mut buf = [0u8; 100];
    let mut check = |r: &mut PackageReader, at: u64| {
        r.read_exact(&mut buf).expect("read");
        let at = usize::try_from(at).expect("small");
        assert_eq!(&buf[..], &data[at..at + 100], "at {at}");
    };
    // Inside the buffer, backwards and forwards, then outside it, then from the end.
    check(&mut r, 0);
    assert_eq!(r.seek(SeekFrom::Start(10)).expect("seek"), 10);
    check(&mut r, 10);
    assert_eq!(r.seek(SeekFrom::Current(1000)).expect("seek"), 1110);
    check(&mut r, 1110);
    assert_eq!(r.seek(SeekFrom::Start(150_000)).expect("seek"), 150_000);
    check(&mut r, 150_000);
    assert_eq!(r.seek(SeekFrom::Start(5)).expect("seek"), 5);
    check(&mut r, 5);
    assert_eq!(r.seek(SeekFrom::End(-100)).expect("seek"), 199_900);
    check(&mut r, 199_900);
    assert!(r.seek(SeekFrom::Current(-300_000)).is_err());
    // A clone starts where its original is and reads on its own (positional reads: no
    // shared file position).
    r.seek(SeekFrom::Start(70_000)).expect("seek");
    let mut c = r.clone();
    check(&mut r, 70_000);
    c.seek(SeekFrom::Current(50)).expect("seek");
    check(&mut c, 70_050);
    check(&mut r, 70_100);
    // Sequential reads through several buffers, some larger than the buffer.
    r.seek(SeekFrom::Start(0)).expect("seek");
    let mut all = Vec::new();
    let mut big = vec![0u8; IO_BUF + 7];
    loop {
        let n = r.read(&mut big).expect("read");
        if n == 0 {
            break;
        }
        all.extend_from_slice(&big[..n]);
        let n = r.read(&mut buf).expect("read");
        all.extend_from_slice(&buf[..n]);
    }
    assert_eq!(all, data);
}

#[test]
fn inflation_stops_at_the_ratio_and_the_budget() {
    let zeros = vec![0u8; 4 << 20];
    let (_d, mut z) = zip_file(&[("z", &zeros), ("small", b"0123456789")]);
    let limits = DumpLimits {
        max_ratio: 10,
        ..DumpLimits::default()
    };
    let budget = AtomicU64::new(u64::MAX);
    let mut seen = 0u64;
    let mut buf = vec![0u8; IO_BUF];
    let e = inflate(&mut z, 0, &limits, &budget, &mut buf, |c| {
        seen += c.len() as u64;
        Ok(())
    })
    .expect_err("ratio");
    assert!(e.contains("times its"), "{e}");
    assert!(seen <= RATIO_EXEMPT_BYTES, "stopped early: {seen}");
    assert_eq!(
        budget.load(Ordering::Acquire),
        u64::MAX,
        "a failed entry gives back what it took"
    );
    let budget = AtomicU64::new(5);
    let e = inflate(&mut z, 1, &DumpLimits::default(), &budget, &mut buf, |_| {
        Ok(())
    })
    .expect_err("budget");
    assert!(e.contains("budget"), "{e}");
    assert_eq!(budget.load(Ordering::Acquire), 5);
    let budget = AtomicU64::new(100);
    let n = inflate(&mut z, 1, &DumpLimits::default(), &budget, &mut buf, |_| {
        Ok(())
    })
    .expect("fits");
    assert_eq!((n, budget.load(Ordering::Acquire)), (10, 90));
    // Two readers of one package (two extracting threads) share its budget.
    let mut z2 = z.clone();
    let budget = AtomicU64::new(15);
    inflate(&mut z, 1, &DumpLimits::default(), &budget, &mut buf, |_| {
        Ok(())
    })
    .expect("first");
    let e = inflate(
        &mut z2,
        1,
        &DumpLimits::default(),
        &budget,
        &mut buf,
        |_| Ok(()),
    )
    .expect_err("the second passes the shared budget");
    assert!(e.contains("budget"), "{e}");
}

fn manifest(entries: &[(&str, &str, &[u8])]) -> String {
    let mut m = String::from(
        r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:rs="http://www.openarchives.org/rs/terms/"><rs:ln rel="up" href="http://e.org/cap.xml"/><rs:md capability="resourcedump-manifest" at="2020-01-01T00:00:00Z"/>"#,
    );
    for (loc, path, body) in entries {
        m.push_str(&format!(
            r#"<url><loc>{loc}</loc><rs:md length="{}" path="{path}"/></url>"#,
            body.len()
        ));
    }
    m + "</urlset>"
}

/// Runs [`unpack_package`] on a package of these ZIP entries in a fresh work directory;
/// the result, and every file under the work directory afterwards (DEST's state folder
/// aside).
fn unpack(entries: &[(&str, &[u8])]) -> (Result<Unpacked>, Vec<String>) {
    // New copies go to unnamed temporary files where the platform has them; the named
    // ones (the fallback) must come to the same.
    let (res, files) = unpack_with(entries, true);
    let (res2, files2) = unpack_with(entries, false);
    let shown = |r: &Result<Unpacked>| match r {
        Ok(v) => v
            .iter()
            .map(|(loc, r)| {
                format!(
                    "{loc} {:?}",
                    r.as_ref().map(ToString::to_string).map_err(|_| ())
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        // The message names the package, in a work directory of its own.
        Err(_) => "refused".to_owned(),
    };
    assert_eq!(
        shown(&res),
        shown(&res2),
        "unnamed and named temporary files"
    );
    assert_eq!(files, files2, "unnamed and named temporary files");
    (res, files)
}

fn unpack_with(entries: &[(&str, &[u8])], unnamed: bool) -> (Result<Unpacked>, Vec<String>) {
    let work = tempfile::tempdir().expect("tmp");
    let file = work.path().join("p.zip");
    let mut w = zip::ZipWriter::new(File::create(&file).expect("create"));
    for (name, bytes) in entries {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .expect("start");
        w.write_all(bytes).expect("write");
    }
    w.finish().expect("finish");
    let scratch = work.path().join("scratch");
    std::fs::create_dir(&scratch).expect("scratch");
    let store = FsStore::open(work.path().join("dest"))
        .expect("store")
        .with_unnamed_temps(unnamed);
    let mapper = UriMapper::new("http://e.org/").expect("mapper");
    let limits = UnpackLimits {
        dump: DumpLimits::default(),
        max_document_bytes: 1 << 20,
        max_resource_bytes: 1 << 20,
    };
    let res = unpack_package(
        &file,
        Capability::ResourceDumpManifest,
        limits,
        &scratch,
        &mapper,
        &store,
    );
    let mut files = Vec::new();
    let mut stack = vec![work.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                if !p.ends_with(STATE_DIR) {
                    stack.push(p);
                }
            } else {
                let rel = p.strip_prefix(work.path()).expect("inside");
                files.push(rel.display().to_string());
            }
        }
    }
    files.sort();
    (res, files)
}

#[test]
fn unpack_package_writes_bitstreams_where_their_loc_maps() {
    let m = manifest(&[
        ("http://e.org/a/b.txt", "/resources/x", b"hello"),
        ("http://e.org/../c", "/resources/y", b"bad loc"),
    ]);
    let (res, files) = unpack(&[
        ("manifest.xml", m.as_bytes()),
        ("resources/x", b"hello"),
        ("resources/y", b"bad loc"),
    ]);
    let res = res.expect("package accepted");
    assert_eq!(res.len(), 2);
    assert_eq!(res[0].1.as_ref().expect("written").as_str(), "a/b.txt");
    assert!(res[1].1.is_err(), "a <loc> with .. is refused");
    assert_eq!(files, ["dest/a/b.txt", "p.zip"]);
}

#[test]
fn unpack_package_refuses_zip_slip_and_bombs_entry_by_entry() {
    // A ZIP slip among safe entries: that entry refused (naming its line, its path and the
    // rule), the others written.
    let slip = manifest(&[
        ("http://e.org/a", "/../../x", b"a"),
        ("http://e.org/b", "/b", b"b"),
    ]);
    let (res, files) = unpack(&[
        ("manifest.xml", slip.as_bytes()),
        ("../../x", b"a"),
        ("b", b"b"),
    ]);
    let res = res.expect("the package is used");
    let e = res[0].1.as_ref().expect_err("zip slip").to_string();
    assert!(
        e.contains("line 1") && e.contains("\"/../../x\"") && e.contains("dot segment"),
        "{e}"
    );
    assert_eq!(res[1].1.as_ref().expect("safe entry").as_str(), "b");
    assert_eq!(files, ["dest/b", "p.zip"]);
    // A ZIP entry no manifest entry names is never read.
    let ok = manifest(&[("http://e.org/a", "/a", b"a")]);
    let (res, files) = unpack(&[
        ("manifest.xml", ok.as_bytes()),
        ("a", b"a"),
        ("../evil", b"z"),
    ]);
    assert!(res.expect("used")[0].1.is_ok());
    assert_eq!(files, ["dest/a", "p.zip"]);
    // An entry declaring a ratio past the limit, beside a safe one.
    let zeros = vec![0u8; 4 << 20];
    let bomb = manifest(&[
        ("http://e.org/z", "/z", &zeros),
        ("http://e.org/a", "/a", b"a"),
    ]);
    let (res, files) = unpack(&[
        ("manifest.xml", bomb.as_bytes()),
        ("z", &zeros),
        ("a", b"a"),
    ]);
    let res = res.expect("used");
    let e = res[0].1.as_ref().expect_err("bomb").to_string();
    assert!(e.contains("ratio") && e.contains("zip bomb"), "{e}");
    assert!(res[1].1.is_ok());
    assert_eq!(files, ["dest/a", "p.zip"]);
}

#[test]
fn manifest_paths_map_to_entry_names_or_are_refused() {
    assert_eq!(
        entry_name("/resources/a b/c.txt"),
        Ok("resources/a b/c.txt")
    );
    assert_eq!(
        entry_name("/changes/res7-v2.html"),
        Ok("changes/res7-v2.html")
    );
    assert_eq!(
        entry_name("sub/b.txt"),
        Ok("sub/b.txt"),
        "as resync writes it"
    );
    for bad in [
        "",
        "/",
        "//etc/x",
        "/../../x",
        "/resources/../../x",
        "/resources/./x",
        "/resources//x",
        "/resources/x/",
        "/resources\\..\\..\\x",
        "/resources/a\0b",
        "/resources/a\nb",
        "/manifest.xml",
    ] {
        assert!(entry_name(bad).is_err(), "{bad:?} accepted");
    }
    assert!(entry_name(&format!("/{}", "n".repeat(256))).is_err());
    assert!(entry_name(&format!("/{}", "n".repeat(255))).is_ok());
    assert!(entry_name(&format!("/{}", "d/".repeat(3000))).is_err());
}
