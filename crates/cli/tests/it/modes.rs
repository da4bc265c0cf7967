//! The mode of every file the binary writes (docs/operations.md, "File modes"; SECURITY.md):
//! published documents and copies get the mode a new file gets (`0666 & ~umask`) whichever way
//! they were written (new, updated, repaired, from a dump, by the aggregator); state databases,
//! the hub's database and the log file are `0600` in `0700` directories. Each command runs
//! under an explicit umask (`sh -c 'umask M; exec resourcesync …'`), as a user's shell would.
#![cfg(unix)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use resourcesync_testkit::Server;
use resourcesync_testkit::sync::{tmp, write_tree};

/// `resourcesync` run through a shell that sets the umask `mask` first.
pub(crate) fn under_umask(mask: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("umask {mask}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_resourcesync"));
    c
}

fn run(mask: &str, args: &[&str]) -> Output {
    let o = under_umask(mask).args(args).output().expect("run");
    assert!(
        o.status.success(),
        "{args:?}: {:?}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

pub(crate) fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every file and directory under `root` (relative path → mode), leaving out the top-level
/// names in `skip`.
pub(crate) fn modes(root: &Path, skip: &[&str]) -> BTreeMap<String, u32> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, u32>) {
        for e in std::fs::read_dir(dir).expect("ls") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(root)
                .expect("under")
                .to_string_lossy()
                .into_owned();
            if dir == root && skip.contains(&rel.as_str()) {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).expect("stat");
            out.insert(rel, m.permissions().mode() & 0o7777);
            if m.is_dir() {
                walk(root, &p, skip, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// Asserts that every file under `root` (but `skip`) has the mode `file` and every directory
/// `dir`.
pub(crate) fn assert_modes(what: &str, root: &Path, skip: &[&str], file: u32, dir: u32) {
    let all = modes(root, skip);
    assert!(!all.is_empty(), "{what}: nothing under {}", root.display());
    let wrong: Vec<String> = all
        .iter()
        .filter(|(rel, m)| **m != if root.join(rel).is_dir() { dir } else { file })
        .map(|(rel, m)| format!("{rel} {m:04o}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{what}: want files {file:04o} and directories {dir:04o}, found {wrong:?}"
    );
}

/// The Source's or the Destination's own folder: owner-only, its state database too.
fn assert_private_state(what: &str, root: &Path) {
    let own = root.join(".resourcesync");
    assert_eq!(mode(&own), 0o700, "{what}: {}", own.display());
    let db = own.join("state.sqlite");
    assert_eq!(mode(&db), 0o600, "{what}: {}", db.display());
    for suffix in ["-wal", "-shm", "-journal"] {
        let p = own.join(format!("state.sqlite{suffix}"));
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{what}: {}", p.display());
        }
    }
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn publish_writes_every_document_with_the_mode_of_a_new_file() {
    for (mask, file, dir) in [("022", 0o644, 0o755), ("027", 0o640, 0o750)] {
        let src = tmp();
        let root = src.path().join("www");
        write_tree(&root, &[("a.txt", b"alpha"), ("d/b.txt", b"bravo")]);
        run(
            mask,
            &[
                "publish",
                p(&root),
                "--base-url",
                "http://127.0.0.1:1/",
                "--dumps",
            ],
        );
        // Documents, dumps and their folders: what a web server as another user reads.
        for docs in ["resourcesync", ".well-known"] {
            assert_modes(
                &format!("umask {mask}: {docs}"),
                &root.join(docs),
                &[],
                file,
                dir,
            );
        }
        assert!(root.join(".well-known/resourcesync").is_file());
        assert_private_state(&format!("umask {mask}: the Source"), &root);
    }
}

#[test]
fn sync_gives_new_updated_repaired_and_dumped_copies_the_mode_of_a_new_file() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("d/b.txt", b"bravo"),
            ("d/e/c.txt", b"charlie"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    let publish = || {
        run(
            "022",
            &[
                "publish",
                p(src.path()),
                "--base-url",
                &server.base,
                "--dumps",
            ],
        )
    };
    publish();
    let out = tmp();
    // One baseline from the Resource Dump (copies extracted from its package), one resource by
    // resource (new copies).
    let (dumped, fetched) = (out.path().join("dumped"), out.path().join("fetched"));
    run("022", &["sync", &server.base, p(&dumped), "--retries", "0"]);
    run(
        "022",
        &[
            "sync",
            &server.base,
            p(&fetched),
            "--no-dump",
            "--retries",
            "0",
        ],
    );
    for d in [&dumped, &fetched] {
        assert_modes("a baseline", d, &[".resourcesync"], 0o644, 0o755);
        assert_private_state("a baseline", d);
    }

    // Updated at the Source: the copies replaced.
    write_tree(
        src.path(),
        &[("a.txt", b"ALPHA, longer"), ("d/e/c.txt", b"C")],
    );
    publish();
    // Damaged on disk: repaired by the next sync that checks the copies (another length, found
    // without --checksum).
    std::fs::write(fetched.join("d/b.txt"), b"damaged, longer").expect("damage");
    for d in [&dumped, &fetched] {
        run(
            "022",
            &["sync", &server.base, p(d), "--retries", "0", "--check"],
        );
        assert_eq!(std::fs::read(d.join("a.txt")).expect("a"), b"ALPHA, longer");
        assert_eq!(std::fs::read(d.join("d/b.txt")).expect("b"), b"bravo");
        assert_modes("updated and repaired", d, &[".resourcesync"], 0o644, 0o755);
        assert_private_state("updated and repaired", d);
    }
}

#[test]
fn a_state_database_given_by_flag_is_owner_only_and_an_old_one_is_tightened() {
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha")]);
    let server = Server::start_in_thread(src.path());
    run(
        "022",
        &["publish", p(src.path()), "--base-url", &server.base],
    );
    let out = tmp();
    let dest = out.path().join("dest");
    let state = out.path().join("state/of/dest.sqlite");
    run(
        "022",
        &[
            "sync",
            &server.base,
            p(&dest),
            "--state",
            p(&state),
            "--retries",
            "0",
        ],
    );
    assert_eq!(mode(&state), 0o600);
    for d in ["state", "state/of"] {
        assert_eq!(mode(&out.path().join(d)), 0o700, "{d}");
    }
    // Made world-readable by an older version: owner-only again at the next sync.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    run(
        "022",
        &[
            "sync",
            &server.base,
            p(&dest),
            "--state",
            p(&state),
            "--retries",
            "0",
        ],
    );
    assert_eq!(mode(&state), 0o600);
}

#[cfg(target_os = "linux")]
#[test]
fn the_hub_database_holding_the_secrets_and_the_log_file_are_owner_only() {
    let dir = tmp();
    let db = dir.path().join("hub/state/hub.sqlite");
    let log = dir.path().join("hub.log");
    let mut cmd = under_umask("022");
    cmd.args(["hub", "--state", p(&db), "--log-file", p(&log)])
        .stderr(Stdio::null());
    // Answering: its database is open.
    let hub = crate::robust_support::Server::spawn(cmd);
    assert_eq!(mode(&db), 0o600);
    for d in ["hub", "hub/state"] {
        assert_eq!(mode(&dir.path().join(d)), 0o700, "{d}");
    }
    // The log names subscribers, callbacks and paths.
    assert_eq!(mode(&log), 0o600);
    drop(hub);
}

/// The copies of `resourcesync aggregate`: new and updated, as `sync`'s.
#[test]
fn the_aggregators_copies_have_the_mode_of_a_new_file() {
    use crate::aggregate::{following, until};
    let src = tmp();
    write_tree(src.path(), &[("a.txt", b"alpha"), ("d/b.txt", b"bravo")]);
    let (mut serve, rx) = crate::serve::spawn_serve(src.path());
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let url = line.rsplit(" at ").next().expect("URL").to_owned();
    let work = tmp();
    let cfg = work.path().join("aggregate.toml");
    std::fs::write(
        &cfg,
        format!("[[source]]\nname = \"alpha\"\nurl = \"{url}\"\nschedule = \"1s\"\n"),
    )
    .expect("config");
    let mut agg = under_umask("022")
        .args([
            "aggregate",
            "--config",
            p(&cfg),
            "--serve",
            "127.0.0.1:0",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Its standard output read to the end (a closed pipe would end it).
    let stdout = agg.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let first: serde_json::Value = serde_json::from_str(
        &lines
            .recv_timeout(Duration::from_secs(60))
            .expect("start line"),
    )
    .expect("JSON start line");
    let addr = first["serve"]
        .as_str()
        .and_then(|u| u.strip_prefix("http://"))
        .and_then(|r| r.strip_suffix('/'))
        .expect("address")
        .to_owned();
    until(&addr, "alpha baselined", |v| following(v, "alpha", 2));
    let copies: PathBuf = work.path().join("copies/alpha");
    // Changed at the Source (`serve` follows its folder): the copy replaced.
    std::fs::write(src.path().join("a.txt"), b"ALPHA, longer").expect("change");
    let end = Instant::now() + Duration::from_secs(90);
    while std::fs::read(copies.join("a.txt")).ok().as_deref() != Some(b"ALPHA, longer") {
        assert!(Instant::now() < end, "the change not copied within 90 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_modes(
        "the aggregator's copies",
        &copies,
        &[".resourcesync"],
        0o644,
        0o755,
    );
    assert_private_state("the aggregator's copies", &copies);
    for c in [&mut agg, &mut serve] {
        let _ = c.kill();
        let _ = c.wait();
    }
}
