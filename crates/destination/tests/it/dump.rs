//! Resource Dumps, Change Dumps and patch links on the Destination side (Z39.99-2014 §11, §13,
//! §14.4), against an in-process Source served on loopback. Hostile packages: `dump_hostile.rs`.

use crate::common;
use crate::dump_support;

use std::path::Path;

use common::*;
use dump_support::*;
use resourcesync_destination::Mode;
use resourcesync_model::{Capability, DocumentReader, HashAlg, MultiHasher, ReadOptions};

/// The (capability, loc) of every entry of a Capability List.
fn capabilities(path: &Path) -> Vec<(Capability, String)> {
    let bytes = std::fs::read(path).expect("capability list");
    let mut r = DocumentReader::new(bytes.as_slice(), ReadOptions::named("cap")).expect("read");
    let mut out = Vec::new();
    while let Some(e) = r.next_entry().expect("entry") {
        let c =
            e.md.as_ref()
                .and_then(|m| m.capability.clone())
                .expect("capability");
        out.push((c, e.loc));
    }
    out
}

fn loc_of(caps: &[(Capability, String)], c: &Capability) -> String {
    caps.iter()
        .find(|(k, _)| k == c)
        .map(|(_, l)| l.clone())
        .unwrap_or_else(|| panic!("no {c} in the Capability List"))
}

/// Publishes, leaving out `hostile/` (patches served beside the resources).
fn publish_plain(root: &Path, base: &str) {
    publish_with(root, base, |c| c.excludes = vec!["/hostile/".into()]);
}

fn publish_dumps(root: &Path, base: &str) {
    publish_with(root, base, |c| c.publish.dumps = true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_from_the_resource_dump_fetches_no_resource() {
    let src = tmp();
    let big = noise(300_000, 7);
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("sub/b c.txt", b"bravo with a space"),
            ("data.json", br#"{"k":1}"#),
            ("naive/caf\u{e9}.txt", b"unicode name"),
            ("big.bin", &big),
        ],
    );
    // Files of 2001: their <lastmod> is the copies' modification time.
    let then = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for f in source_files(src.path()).keys() {
        std::fs::File::options()
            .write(true)
            .open(src.path().join(f))
            .and_then(|h| h.set_modified(then))
            .expect("touch");
    }
    let server = Server::start(src.path()).await;
    publish_dumps(src.path(), &server.base);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!((r.created, r.failed), (5, 0), "{r:?}");
    assert_eq!((r.packages, r.from_packages), (1, 5), "{r:?}");
    assert_eq!(r.unchanged, 0, "counted once: {r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
    for f in dest_files(&dest).keys() {
        let m = std::fs::metadata(dest.join(f)).and_then(|m| m.modified());
        assert_eq!(m.ok(), Some(then), "{f}: the <lastmod> of its dump entry");
    }
    assert_eq!(server.resource_hits(), 0, "no resource fetched on its own");
    assert_eq!(
        server.hits("/resourcesync/dumps/resourcedump-000001-00001.zip"),
        1
    );
    assert!(r.cursor.is_some());

    // The state is the one a Resource List baseline makes: nothing to do next time.
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (0, 0, 0), "{r:?}");
    assert_eq!(server.resource_hits(), 0);

    // Changes after the dump come from the Change Lists.
    write_tree(
        src.path(),
        &[("a.txt", b"alpha, changed"), ("new.txt", b"new")],
    );
    publish_dumps(src.path(), &server.base);
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!((r.created, r.updated, r.failed), (1, 1, 0), "{r:?}");
    assert_eq!(r.packages, 0);
    assert_eq!(dest_files(&dest), source_files(src.path()));

    // --no-dump: every resource on its own.
    let out2 = tmp();
    let dest2 = dest_in(&out2);
    let mut o2 = options(&server.base, &dest2);
    o2.use_dumps = false;
    server.reset_hits();
    let r = run(&o2).await;
    assert_eq!((r.created, r.packages), (6, 0), "{r:?}");
    assert_eq!(server.resource_hits(), 6);
    assert_eq!(dest_files(&dest2), source_files(src.path()));
}

/// A re-published Resource Dump that carries packages of the previous one over (their own
/// `at`, older than the dump's) and rewrote the others: a new Destination baselines from it
/// alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_from_a_dump_with_carried_over_packages() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a/1.txt", b"a one"),
            ("a/2.txt", b"a two"),
            ("b/1.txt", b"b one"),
            ("b/2.txt", b"b two"),
            ("c/1.txt", b"c one"),
            ("c/2.txt", b"c two"),
        ],
    );
    let server = Server::start(src.path()).await;
    let two_per_package = |c: &mut resourcesync_source::SourceConfig| {
        c.publish.dumps = true;
        c.dump.max_files = 2;
    };
    publish_with(src.path(), &server.base, two_per_package);
    write_tree(
        src.path(),
        &[("b/1.txt", b"b one, changed"), ("b/3.txt", b"b three")],
    );
    std::fs::remove_file(src.path().join("c/2.txt")).expect("rm");
    publish_with(src.path(), &server.base, two_per_package);
    let dumps: Vec<String> = std::fs::read_dir(src.path().join("resourcesync/dumps"))
        .expect("dumps")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".zip"))
        .collect();
    // a/ carried over; b/ (now three: two packages) and c/ written again; the first dump's
    // packages of b/ and c/ kept until the next dump.
    assert!(
        dumps.contains(&"resourcedump-000001-00001.zip".to_owned()),
        "{dumps:?}"
    );
    assert_eq!(dumps.len(), 6, "{dumps:?}");

    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!((r.packages, r.from_packages), (4, 6), "{r:?}");
    assert_eq!(server.resource_hits(), 0, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// A Source keeps its Resource Dump while few resources changed since (`rebuild_after`, 10 %
/// by default): a new Destination baselines from that older dump, fetches what changed since
/// from the Resource List, and a copy the dump brought of a resource deleted since goes, even
/// without --delete (it never was a copy of what the Source has).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_older_dump_gives_the_copy_a_baseline_from_the_list_would() {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..20)
        .map(|i| (format!("f{i:02}.txt"), format!("file {i}").into_bytes()))
        .collect();
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .collect();
    write_tree(src.path(), &refs);
    let server = Server::start(src.path()).await;
    let dumps = |c: &mut resourcesync_source::SourceConfig| c.publish.dumps = true;
    publish_with(src.path(), &server.base, dumps);
    let dump_doc = src.path().join("resourcesync/resourcedump.xml");
    let first = std::fs::read_to_string(&dump_doc).expect("resourcedump.xml");
    // 2 of 20 resources changed (10 %): the Resource Dump of the first snapshot stays.
    write_tree(src.path(), &[("f03.txt", b"file 3, changed".as_slice())]);
    std::fs::remove_file(src.path().join("f07.txt")).expect("rm");
    publish_with(src.path(), &server.base, dumps);
    assert_eq!(
        std::fs::read_to_string(&dump_doc).expect("resourcedump.xml"),
        first,
        "the Resource Dump is kept"
    );

    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!(r.mode, Mode::Baseline);
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(r.packages, 1, "{r:?}");
    // The changed resource alone is fetched; the deleted one's copy is gone without --delete.
    assert_eq!(server.resource_hits(), 1, "{r:?}");
    assert_eq!(server.hits("/f03.txt"), 1, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_older_than_the_resource_list_is_completed_from_the_list() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish_dumps(src.path(), &server.base);
    let cap_path = src.path().join("resourcesync/capabilitylist.xml");
    let cap1 = std::fs::read_to_string(&cap_path).expect("cap");
    let rl1 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    // A second snapshot without dumps: the dump (and its `at`) stay those of the first.
    write_tree(
        src.path(),
        &[("b.txt", b"bravo, changed"), ("d.txt", b"delta")],
    );
    std::fs::remove_file(src.path().join("c.txt")).expect("rm");
    publish(src.path(), &server.base, None);
    let rl2 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    assert_ne!(rl1, rl2);
    std::fs::write(&cap_path, cap1.replace(&rl1, &rl2)).expect("cap");

    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.delete = true;
    let r = run(&o).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert_eq!(r.packages, 1);
    // a from the dump; b updated and d created from the list; c removed again.
    assert_eq!(server.resource_hits(), 2, "{r:?}");
    assert_eq!(server.hits("/a.txt"), 0);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_newer_than_the_resource_list_is_followed_by_the_change_lists() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("b.txt", b"bravo")]);
    let server = Server::start(src.path()).await;
    publish(src.path(), &server.base, None);
    let cap_path = src.path().join("resourcesync/capabilitylist.xml");
    let rl1 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    // Snapshot times are kept to the second: date the first list back, so that it is older
    // than the dump made in the same second.
    let rl1_path = src
        .path()
        .join(rl1.strip_prefix(&server.base).expect("under base"));
    let text = std::fs::read_to_string(&rl1_path).expect("rl1");
    let mut dated = String::new();
    let mut rest = text.as_str();
    for attr in [" at=\"", " completed=\""] {
        let i = rest.find(attr).expect("attribute") + attr.len();
        let j = i + rest[i..].find('"').expect("end");
        dated.push_str(&rest[..i]);
        dated.push_str("2000-01-01T00:00:00Z");
        rest = &rest[j..];
    }
    dated.push_str(rest);
    std::fs::write(&rl1_path, dated).expect("rl1");
    write_tree(
        src.path(),
        &[("b.txt", b"bravo, changed"), ("c.txt", b"charlie")],
    );
    publish_dumps(src.path(), &server.base);
    let cap2 = std::fs::read_to_string(&cap_path).expect("cap");
    let rl2 = loc_of(&capabilities(&cap_path), &Capability::ResourceList);
    // The Capability List points at the first (older) Resource List.
    std::fs::write(&cap_path, cap2.replace(&rl2, &rl1)).expect("cap");

    let out = tmp();
    let dest = dest_in(&out);
    let r = run(&options(&server.base, &dest)).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(has_warning(&r, "older than the Resource Dump"), "{r:?}");
    assert_eq!(server.resource_hits(), 0, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// An incremental from a Change Dump (`--prefer-dumps`) that updates a copy the Destination
/// had, then a Change List entry deleting that resource: without --delete the copy stays, as
/// any deleted resource's (only a first baseline's dump copies of resources deleted since go).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_updated_from_a_change_dump_then_deleted_is_kept_without_delete() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start(src.path()).await;
    publish_rotating(src.path(), &server.base, 2);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.prefer_dumps = true;
    run(&o).await;

    // b and c updated (the first period), then d created, which closes it: its Change Dump
    // package holds b's new content. Then b is deleted (the open period).
    write_tree(
        src.path(),
        &[("b.txt", b"bravo, changed"), ("c.txt", b"charlie, changed")],
    );
    publish_rotating(src.path(), &server.base, 2);
    write_tree(src.path(), &[("d.txt", b"delta")]);
    publish_rotating(src.path(), &server.base, 2);
    std::fs::remove_file(src.path().join("b.txt")).expect("rm");
    publish_rotating(src.path(), &server.base, 2);

    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.from_packages >= 1, "b came from the Change Dump: {r:?}");
    assert!(
        dest.join("b.txt").is_file(),
        "the copy of b is kept without --delete: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_dumps_are_applied_before_the_change_lists() {
    // (A package whose period spans the cursor: `packages_are_chosen_by_the_end_of_their_period`
    // in src/dump.rs; here the cursor and the periods' starts fall within one second.)
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start(src.path()).await;
    // Two changes per Change List: the third change closes the first period.
    publish_rotating(src.path(), &server.base, 2);
    let out = tmp();
    let (dest, dest2) = (out.path().join("d1"), out.path().join("d2"));
    let mut o = options(&server.base, &dest);
    o.prefer_dumps = true;
    o.delete = true;
    let mut o2 = options(&server.base, &dest2);
    o2.delete = true;
    run(&o).await;
    run(&o2).await;

    write_tree(
        src.path(),
        &[("a.txt", b"alpha, changed"), ("d.txt", b"delta")],
    );
    std::fs::remove_file(src.path().join("b.txt")).expect("rm");
    publish_rotating(src.path(), &server.base, 2);
    let cd = std::fs::read_to_string(src.path().join("resourcesync/changedump.xml"))
        .expect("change dump");
    assert!(
        cd.contains(".zip</loc>"),
        "a closed period was dumped: {cd}"
    );

    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.mode, Mode::Incremental);
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.packages >= 1 && r.from_packages >= 1, "{r:?}");
    assert_eq!(dest_files(&dest), source_files(src.path()));
    let with_dumps = server.resource_hits();
    assert_eq!(
        (r.created, r.updated, r.deleted),
        (1, 1, 1),
        "each change counted once: {r:?}"
    );

    // The same changes without --prefer-dumps: every created or updated resource fetched.
    server.reset_hits();
    let r = run(&o2).await;
    assert_eq!((r.created, r.updated, r.deleted, r.packages), (1, 1, 1, 0));
    assert_eq!(server.resource_hits(), 2);
    assert!(with_dumps < 2, "the package saved requests ({with_dumps})");
    assert_eq!(dest_files(&dest2), source_files(src.path()));
}

// ---------------------------------------------------------------------------------------------
// Patch links (Z39.99-2014 §14.4).

/// Adds a patch link to the `<url>` of `loc` in the Change List that has it as `updated`.
fn add_patch_link(root: &Path, loc: &str, href: &str, mime: &str) {
    let dir = root.join("resourcesync/changelists");
    let mut done = false;
    for e in std::fs::read_dir(&dir).expect("changelists") {
        let p = e.expect("entry").path();
        let text = std::fs::read_to_string(&p).expect("read");
        if !text.contains("capability=\"changelist\"") {
            continue;
        }
        let needle = format!("<loc>{loc}</loc>");
        // The last occurrence: the latest change of the resource.
        let Some(at) = text.rfind(&needle) else {
            continue;
        };
        let end = at + text[at..].find("</url>").expect("end of url");
        let link = format!(
            "<rs:ln rel=\"http://www.openarchives.org/rs/terms/patch\" href=\"{href}\" type=\"{mime}\"/>"
        );
        let patched = format!("{}{link}{}", &text[..end], &text[end..]);
        std::fs::write(&p, patched).expect("write");
        done = true;
    }
    assert!(done, "no Change List lists {loc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_patches_are_applied_and_wrong_ones_fall_back_to_a_full_fetch() {
    let src = tmp();
    let v1 = b"{\n  \"name\": \"resource\",\n  \"n\": 1,\n  \"list\": [\n    1,\n    2\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v1), ("other.txt", b"other")]);
    let server = Server::start(src.path()).await;
    publish_plain(src.path(), &server.base);
    let out = tmp();
    let dest = dest_in(&out);
    let o = options(&server.base, &dest);
    run(&o).await;
    let loc = format!("{}data.json", server.base);

    // 1. A JSON Patch that yields exactly the new version: applied, the resource not fetched.
    let v2 = b"{\n  \"name\": \"resource\",\n  \"n\": 2,\n  \"list\": [\n    1,\n    2,\n    3\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v2)]);
    publish_plain(src.path(), &server.base);
    write_tree(
        src.path(),
        &[(
            "hostile/p1.json",
            br#"[{"op":"replace","path":"/n","value":2},{"op":"add","path":"/list/-","value":3}]"#,
        )],
    );
    let href = format!("{}hostile/p1.json", server.base);
    add_patch_link(src.path(), &loc, &href, "application/json-patch+json");
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.updated, r.patched, r.failed), (1, 1, 0), "{r:?}");
    assert_eq!(server.hits("/data.json"), 0, "patched, not fetched");
    assert_eq!(server.hits("/hostile/p1.json"), 1);
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v2);

    // 2. A patch whose result does not match the published digest: fetched whole.
    let v3 = b"{\n  \"name\": \"resource\",\n  \"n\": 3,\n  \"list\": [\n    1,\n    2,\n    3\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v3)]);
    publish_plain(src.path(), &server.base);
    write_tree(
        src.path(),
        &[(
            "hostile/p2.json",
            br#"[{"op":"replace","path":"/n","value":99}]"#,
        )],
    );
    add_patch_link(
        src.path(),
        &loc,
        &format!("{}hostile/p2.json", server.base),
        "application/json-patch+json",
    );
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.updated, r.patched, r.failed), (1, 0, 0), "{r:?}");
    assert_eq!(server.hits("/data.json"), 1, "fetched whole");
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v3);

    // 3. A patch that does not apply (a failed test operation), and 4. one of a type that is not
    // JSON Patch: fetched whole.
    for (i, (patch, mime)) in [
        (
            br#"[{"op":"test","path":"/n","value":42}]"#.as_slice(),
            "application/json-patch+json",
        ),
        (b"binary diff".as_slice(), "application/x-tiff-diff"),
    ]
    .into_iter()
    .enumerate()
    {
        let v = format!("{{\"n\": {}}}\n", 10 + i);
        write_tree(src.path(), &[("data.json", v.as_bytes())]);
        publish_plain(src.path(), &server.base);
        let name = format!("hostile/p{}.json", 3 + i);
        write_tree(src.path(), &[(name.as_str(), patch)]);
        add_patch_link(src.path(), &loc, &format!("{}{name}", server.base), mime);
        server.reset_hits();
        let r = run(&o).await;
        assert_eq!((r.updated, r.patched, r.failed), (1, 0, 0), "{r:?}");
        assert_eq!(server.hits("/data.json"), 1, "fetched whole");
        assert_eq!(
            std::fs::read(dest.join("data.json")).expect("copy"),
            v.as_bytes()
        );
    }

    // 5. A copy changed by hand is not the version the patch applies to: fetched whole.
    let v5 = b"{\n  \"name\": \"resource\",\n  \"n\": 5\n}\n";
    write_tree(src.path(), &[("data.json", v5)]);
    publish_plain(src.path(), &server.base);
    write_tree(
        src.path(),
        &[(
            "hostile/p5.json",
            br#"[{"op":"add","path":"/name","value":"resource"},{"op":"replace","path":"/n","value":5}]"#,
        )],
    );
    add_patch_link(
        src.path(),
        &loc,
        &format!("{}hostile/p5.json", server.base),
        "application/json-patch+json",
    );
    std::fs::write(dest.join("data.json"), b"{\"n\": 12}\n").expect("tamper");
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!((r.updated, r.patched, r.failed), (1, 0, 0), "{r:?}");
    assert_eq!(
        server.hits("/hostile/p5.json"),
        0,
        "the copy was checked first"
    );
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v5);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// Rewrites the Change Dump package whose manifest lists `loc` as `updated`: its bitstream is
/// replaced by a JSON Patch named by a patch link with a `path` (Z39.99-2014 §14.4), and the
/// Change Dump's `length` and `hash` of the package follow.
fn ship_as_patch(root: &Path, loc: &str, patch: &[u8]) {
    let cd_path = root.join("resourcesync/changedump.xml");
    let mut cd = std::fs::read_to_string(&cd_path).expect("change dump");
    let mut done = false;
    let mut zips: Vec<std::path::PathBuf> = Vec::new();
    let mut stack = vec![root.join("resourcesync")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip") {
                zips.push(p);
            }
        }
    }
    for z in zips {
        let old = std::fs::read(&z).expect("zip");
        let mut a = zip::ZipArchive::new(std::io::Cursor::new(old.clone())).expect("open");
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..a.len() {
            let mut f = a.by_index(i).expect("entry");
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut b).expect("read");
            entries.push((f.name().expect("name").into_owned(), b));
        }
        let Some(mi) = entries.iter().position(|(n, _)| n == "manifest.xml") else {
            continue;
        };
        let manifest = String::from_utf8(entries[mi].1.clone()).expect("utf-8");
        let needle = format!("<loc>{loc}</loc>");
        let Some(at) = manifest.find(&needle) else {
            continue;
        };
        let start = manifest[..at].rfind("<url>").expect("url");
        let end = at + manifest[at..].find("</url>").expect("end");
        let block = &manifest[start..end];
        if !block.contains("change=\"updated\"") {
            continue;
        }
        let path_at = block.find(" path=\"").expect("path") + 7;
        let path_end = path_at + block[path_at..].find('"').expect("quote");
        let bitstream = block[path_at..path_end].trim_start_matches('/').to_owned();
        let link = format!(
            "<rs:ln rel=\"http://www.openarchives.org/rs/terms/patch\" href=\"{loc}.patch\" \
             type=\"application/json-patch+json\" length=\"{}\" hash=\"md5:{}\" path=\"/patches/p1.json\"/>",
            patch.len(),
            md5_of(patch).trim_start_matches("md5:")
        );
        // No path on the entry itself: the patch is all the package carries for it.
        let new_block = format!("{}{}{link}", &block[..path_at - 7], &block[path_end + 1..]);
        let manifest = format!("{}{new_block}{}", &manifest[..start], &manifest[end..]);
        entries.retain(|(n, _)| n != &bitstream && n != "manifest.xml");
        entries.push(("patches/p1.json".into(), patch.to_vec()));
        entries.push(("manifest.xml".into(), manifest.into_bytes()));
        let refs: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_slice()))
            .collect();
        let new = zip_of(&refs);
        std::fs::write(&z, &new).expect("write zip");
        let name = z.file_name().expect("name").to_string_lossy().into_owned();
        let (old_len, new_len) = (
            format!("length=\"{}\"", old.len()),
            format!("length=\"{}\"", new.len()),
        );
        let digest = |b: &[u8], alg: HashAlg| {
            MultiHasher::new(&[alg])
                .hash_reader(b)
                .expect("hash")
                .1
                .to_string()
        };
        let at = cd
            .find(&format!("{name}</loc>"))
            .expect("package in the change dump");
        let end = at + cd[at..].find("</url>").expect("end");
        let mut entry = cd[at..end].replace(&old_len, &new_len);
        for alg in [HashAlg::Md5, HashAlg::Sha1, HashAlg::Sha256] {
            entry = entry.replace(&digest(&old, alg.clone()), &digest(&new, alg));
        }
        assert!(
            entry.contains(&new_len),
            "the package's length rewritten: {entry}"
        );
        cd = format!("{}{entry}{}", &cd[..at], &cd[end..]);
        done = true;
    }
    assert!(done, "no Change Dump package updates {loc}");
    std::fs::write(&cd_path, cd).expect("write change dump");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_inside_a_change_dump_package_is_applied_to_the_copy() {
    let src = tmp();
    let v1 = b"{\n  \"n\": 1,\n  \"list\": [\n    1\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v1), ("other.txt", b"other")]);
    let server = Server::start(src.path()).await;
    publish_rotating(src.path(), &server.base, 1);
    let out = tmp();
    let dest = dest_in(&out);
    let mut o = options(&server.base, &dest);
    o.prefer_dumps = true;
    run(&o).await;

    let v2 = b"{\n  \"n\": 2,\n  \"list\": [\n    1,\n    2\n  ]\n}\n";
    write_tree(src.path(), &[("data.json", v2)]);
    publish_rotating(src.path(), &server.base, 1);
    // A second change closes the period of the first, which gets its package.
    write_tree(src.path(), &[("other.txt", b"other, changed")]);
    publish_rotating(src.path(), &server.base, 1);
    let loc = format!("{}data.json", server.base);
    ship_as_patch(
        src.path(),
        &loc,
        br#"[{"op":"replace","path":"/n","value":2},{"op":"add","path":"/list/-","value":2}]"#,
    );
    server.reset_hits();
    let r = run(&o).await;
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.from_packages >= 1, "{r:?}");
    assert!(
        !has_warning(&r, "data.json"),
        "the patch was applied: {:?}",
        r.warnings
    );
    assert_eq!(
        server.hits("/data.json"),
        0,
        "patched from the package, not fetched"
    );
    assert_eq!(std::fs::read(dest.join("data.json")).expect("copy"), v2);
    assert_eq!(dest_files(&dest), source_files(src.path()));
}
