//! The crash harness: `resourcesync sync` is killed with SIGKILL 20 times at
//! points chosen by seed: while a list streams, mid-download, before and after the rename of a
//! finished download, between a state row and its pending row, before the cursor moves, and
//! at seeded moments. After every kill, every file at its final path under DEST is a full
//! version the Source published; each restart resumes; at the end the copy is the Source's and
//! the temporary folder is empty.
//!
//! Named points use the destination's test hook (`RESOURCESYNC_TEST_CRASH_AT=POINT:N:pause`,
//! see `resourcesync_destination::crashpoint`): the process announces the point on standard
//! error and stops there; the harness reads that line and sends SIGKILL while the other
//! downloads are still in flight. No sleep synchronises anything.

#![cfg(unix)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use resourcesync_testkit::Server;
use resourcesync_testkit::sync::*;

const KILLS: usize = 20;
const CRASH_AT_VAR: &str = "RESOURCESYNC_TEST_CRASH_AT";

/// The named points, and the most hits per run at which one is drawn.
const POINTS: [(&str, u64); 7] = [
    ("list-entry", 150),
    ("download", 12),
    ("before-rename", 10),
    ("after-rename", 10),
    ("state", 10),
    ("cursor", 1),
    ("timed", 0),
];

/// With dumps: the package points too.
const DUMP_POINTS: [(&str, u64); 9] = [
    ("package-renamed", 10),
    ("package-entry", 10),
    ("list-entry", 150),
    ("download", 12),
    ("before-rename", 10),
    ("after-rename", 10),
    ("state", 10),
    ("cursor", 1),
    ("timed", 0),
];

type Versions = BTreeMap<String, BTreeSet<Vec<u8>>>;

/// SplitMix64, so that the draws depend on the seed alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn content(i: usize, generation: u32) -> Vec<u8> {
    // Every eighth file spans several reads (40 to 115 KB), so downloads are cut mid-body.
    let len = if i % 8 == 0 {
        40_000 + i * 500
    } else {
        10 + i * 37
    };
    let mut v = format!("file {i}, generation {generation}\n").into_bytes();
    while v.len() < len {
        v.extend_from_slice(format!("{i}:{generation} ").as_bytes());
    }
    v
}

fn record(versions: &mut Versions, root: &Path) {
    for (p, b) in source_files(root) {
        versions.entry(p).or_default().insert(b);
    }
}

fn check_no_partial(dest: &Path, versions: &Versions, seed: u64, what: &str) {
    for (p, b) in dest_files(dest) {
        assert!(
            versions.get(&p).is_some_and(|v| v.contains(&b)),
            "seed {seed}, after {what}: {p} ({} bytes) at its final path is no version the Source published",
            b.len()
        );
    }
}

/// A Source tree of `n` files (`d{i % 3}/f{i}.bin`, generation 0 of [`content`]).
fn content_tree(n: usize) -> tempfile::TempDir {
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..n)
        .map(|i| (format!("d{}/f{i}.bin", i % 3), content(i, 0)))
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    write_tree(src.path(), &refs);
    src
}

fn sync_cmd(url: &str, dest: &Path, dumps: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    c.args(["sync", url, dest.to_str().expect("utf-8 path")])
        .args(["--json", "--delete", "--concurrency", "4", "--retries", "1"]);
    if dumps {
        c.arg("--prefer-dumps");
    }
    c
}

enum Ended {
    Killed,
    Finished(bool),
}

/// Runs one sync, killed at `point` (`n`th hit) or after `delay`.
fn run_once(url: &str, dest: &Path, dumps: bool, point: &str, n: u64, delay: Duration) -> Ended {
    run_cmd(sync_cmd(url, dest, dumps), point, n, delay)
}

/// Runs `cmd`, killed at `point` (`n`th hit) or after `delay`.
fn run_cmd(mut cmd: Command, point: &str, n: u64, delay: Duration) -> Ended {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    if point != "timed" {
        cmd.env(CRASH_AT_VAR, format!("{point}:{n}:pause"));
    }
    let mut child = cmd.spawn().expect("spawn resourcesync");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let killed = if point == "timed" {
        // The kill time is the fault being injected (drawn from the seed), not a wait for
        // something to happen.
        std::thread::sleep(delay);
        child.kill().is_ok()
    } else {
        let marker = format!("{CRASH_AT_VAR} {point}:{n} reached");
        loop {
            match rx.recv_timeout(Duration::from_secs(120)) {
                Ok(l) if l.contains(&marker) => break child.kill().is_ok(),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break false,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    panic!("{point}:{n}: neither reached nor finished in 120 s");
                }
            }
        }
    };
    let status = child.wait().expect("wait");
    if killed {
        Ended::Killed
    } else {
        Ended::Finished(status.success())
    }
}

/// Updates a quarter of the files, deletes a few and creates a few.
fn change_source(root: &Path, generation: u32, rng: &mut Rng) {
    let files: Vec<String> = source_files(root).into_keys().collect();
    for (k, p) in files.iter().enumerate() {
        let i = rng.below(1000) as usize;
        match k % 4 {
            0 => write_tree(root, &[(p, &content(i, generation))]),
            1 if i % 10 == 0 => std::fs::remove_file(root.join(p)).expect("rm"),
            _ => {}
        }
    }
    for j in 0..5 {
        let i = rng.below(1000) as usize;
        write_tree(
            root,
            &[(
                &format!("new/g{generation}-{j}.bin"),
                &content(i, generation),
            )],
        );
    }
}

#[test]
fn sync_killed_twenty_times_resumes_and_never_leaves_a_partial_file() {
    harness("crash", false, &POINTS);
}

/// The same with a Resource Dump for the baseline and Change Dumps applied first: kills while
/// packages are applied too.
#[test]
fn sync_with_dumps_killed_twenty_times_resumes_and_never_leaves_a_partial_file() {
    harness("crash-dumps", true, &DUMP_POINTS);
}

fn harness(name: &str, dumps: bool, points: &[(&'static str, u64)]) {
    let seed = seed(name);
    let publish = |root: &Path, base: &str| {
        publish_with(root, base, |c| {
            c.publish.split.max_entries = 50;
            c.publish.dumps = dumps;
        });
    };
    let mut rng = Rng(seed);
    let src = tmp();
    let files: Vec<(String, Vec<u8>)> = (0..150)
        .map(|i| (format!("d{}/f{i}.bin", i % 5), content(i, 0)))
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
    write_tree(src.path(), &refs);
    let server = Server::start_in_thread(src.path());
    publish(src.path(), &server.base);
    let mut versions = Versions::new();
    record(&mut versions, src.path());
    let out = tmp();
    let dest = dest_in(&out);

    let mut kills: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut killed, mut finished, mut generation) = (0usize, 0usize, 0u32);
    let mut changed_at = 0usize;
    // The points in turn, so that each is tried; the hit number (and kill time) drawn.
    for attempt in 1..=80 {
        if killed == KILLS {
            break;
        }
        assert!(attempt < 80, "seed {seed}: only {killed} kills in 80 runs");
        let (point, max) = points[(attempt - 1) % points.len()];
        let n = 1 + rng.below(max);
        let delay = Duration::from_millis(rng.below(400));
        let what = format!("run {attempt} ({point}:{n})");
        let run_end = run_once(&server.base, &dest, dumps, point, n, delay);
        match run_end {
            Ended::Killed => {
                killed += 1;
                *kills.entry(point).or_default() += 1;
            }
            Ended::Finished(ok) => {
                assert!(ok, "seed {seed}: {what} failed");
                finished += 1;
            }
        }
        check_no_partial(&dest, &versions, seed, &what);
        // The Source changes every fifth kill, and whenever a run caught up: the next runs
        // (incremental) have changes to apply.
        let caught_up = matches!(run_end, Ended::Finished(_));
        if caught_up || (killed % 5 == 0 && killed != changed_at) {
            changed_at = killed;
            generation += 1;
            change_source(src.path(), generation, &mut rng);
            publish(src.path(), &server.base);
            record(&mut versions, src.path());
        }
    }
    assert_eq!(killed, KILLS, "seed {seed}");

    // The last run resumes and finishes; the copy is the Source's.
    let o = sync_cmd(&server.base, &dest, dumps).output().expect("sync");
    assert!(
        o.status.success(),
        "seed {seed}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["failed"], 0, "seed {seed}: {v}");
    assert_eq!(dest_files(&dest), source_files(src.path()), "seed {seed}");
    let tmp_dir = dest.join(".resourcesync").join("tmp");
    let left: Vec<_> = std::fs::read_dir(&tmp_dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "seed {seed}: left in {tmp_dir:?}: {left:?}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .args(["audit", &server.base, dest.to_str().expect("utf-8")])
        .output()
        .expect("audit");
    assert!(
        o.status.success(),
        "seed {seed}: audit: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // Resumed, not restarted: each kill loses at most the downloads in flight (4, each tried
    // at most twice), so the resources fetched stay close to the versions published.
    let published: usize = versions.values().map(BTreeSet::len).sum();
    let fetched = server.resource_hits();
    assert!(
        fetched <= (published + KILLS * 8) as u64,
        "seed {seed}: {fetched} resource requests for {published} versions"
    );
    eprintln!(
        "seed {seed}: {fetched} resource requests for {published} versions; {killed} kills survived {kills:?}, {finished} run(s) finished before their kill point"
    );
}

/// A baseline from a Resource List (no dumps) receives each new copy in an unnamed file in its
/// final directory (`O_TMPFILE`, linked into place by the batch commit): while a download is
/// complete but not yet placed, `.resourcesync/tmp` holds nothing; killed then, no file is at a
/// path whose copy was not linked, nothing is left behind, and the next run fetches only what
/// was not in place.
#[cfg(target_os = "linux")]
#[test]
fn a_list_baseline_keeps_its_bodies_out_of_the_temporary_folder_and_a_kill_before_the_link_leaves_nothing()
 {
    const N: usize = 30;
    const AT: u64 = 10;
    let src = content_tree(N);
    let server = Server::start_in_thread(src.path());
    publish_with(src.path(), &server.base, |c| c.publish.dumps = false);
    let out = tmp();
    let dest = dest_in(&out);
    let tmp_dir = dest.join(".resourcesync").join("tmp");
    // Temporary bodies (`dl-*`; the run's staging database is there too).
    let in_tmp = || -> Vec<String> {
        std::fs::read_dir(&tmp_dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("dl-"))
                    .collect()
            })
            .unwrap_or_default()
    };

    // One download at a time: stopped once the AT-th body is complete, not yet verified.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resourcesync"));
    cmd.args(["sync", &server.base, dest.to_str().expect("utf-8 path")])
        .args(["--json", "--concurrency", "1", "--retries", "1"])
        .env(CRASH_AT_VAR, format!("before-rename:{AT}:pause"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn resourcesync");
    let marker = format!("{CRASH_AT_VAR} before-rename:{AT} reached");
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let reached = stderr
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains(&marker));
    assert!(reached, "the sync ended before {marker}");
    // The paused body (and those queued for their batch) are unnamed: no temporary name.
    let left = in_tmp();
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert!(left.is_empty(), "bodies named in {tmp_dir:?}: {left:?}");
    let source = source_files(src.path());
    let placed = dest_files(&dest);
    assert!(placed.len() < AT as usize, "{} placed", placed.len());
    for (p, b) in &placed {
        assert_eq!(Some(b), source.get(p), "{p} is not the Source's copy");
    }
    assert!(in_tmp().is_empty(), "left in {tmp_dir:?}: {:?}", in_tmp());
    let fetched_before = server.resource_hits();
    assert_eq!(fetched_before, AT, "one download at a time");

    // Resumed: what was in place is not fetched again.
    let o = sync_cmd(&server.base, &dest, false).output().expect("sync");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(dest_files(&dest), source);
    assert!(in_tmp().is_empty(), "left in {tmp_dir:?}: {:?}", in_tmp());
    assert_eq!(
        server.resource_hits() - fetched_before,
        (N - placed.len()) as u64,
        "only the copies not in place are fetched again"
    );
}

/// Z39.99-2017 §5.2, §5.3: a sync killed once a copy is renamed into place, before its state
/// row (`after-rename`), then the Source deletes every file the kill left at the destination:
/// the next run deletes them too (`--delete`). The placeholder rows (crate
/// `resourcesync_destination::commit`) make such a copy known to the state: without them the
/// baseline diff has no row to delete and the run keeps a file the Source no longer has (the
/// harness above fails so, rarely, when a generation deletes a file a kill left unrecorded).
#[test]
fn a_copy_renamed_before_a_kill_is_deleted_when_the_source_deletes_it() {
    let src = content_tree(30);
    let server = Server::start_in_thread(src.path());
    publish_with(src.path(), &server.base, |c| c.publish.dumps = false);
    let out = tmp();
    let dest = dest_in(&out);
    let ended = run_once(
        &server.base,
        &dest,
        false,
        "after-rename",
        1,
        Duration::ZERO,
    );
    assert!(
        matches!(ended, Ended::Killed),
        "not killed at after-rename:1"
    );
    let placed = dest_files(&dest);
    assert!(!placed.is_empty(), "nothing in place after the kill");
    for p in placed.keys() {
        std::fs::remove_file(src.path().join(p)).expect("rm");
    }
    publish_with(src.path(), &server.base, |c| c.publish.dumps = false);
    let o = sync_cmd(&server.base, &dest, false).output().expect("sync");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (copy, source) = (dest_files(&dest), source_files(src.path()));
    assert_eq!(
        copy.keys().collect::<Vec<_>>(),
        source.keys().collect::<Vec<_>>(),
        "deleted at the Source: {:?}",
        placed.keys().collect::<Vec<_>>()
    );
    assert_eq!(copy, source);
}

/// A panic while an extracting thread inflates a Resource Dump entry (the test hook's
/// `package-entry:N:panic`) is that entry's error: the entry is reported failed (exit 1), and
/// the other entries of the package are in place. Without the catch, the thread's chunk is
/// never answered: the run waits for it until the other senders are gone, then fails whole
/// (exit 2) when the scope raises the panic again, or waits for ever while chunks remain to be
/// sent (hence the hang guard).
#[test]
fn a_panic_extracting_a_dump_entry_fails_that_entry_alone() {
    const N: usize = 12;
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        // One core: the entries are extracted on the thread that reads the manifest, not by
        // extracting threads (the case tested here).
        eprintln!("one core: no extracting threads to test");
        return;
    }
    let src = content_tree(N);
    let server = Server::start_in_thread(src.path());
    publish_with(src.path(), &server.base, |c| c.publish.dumps = true);
    // Only the documents and the package are served from now on: a resource the package does
    // not put in place fails (404) when the Resource List fetches it.
    let source = source_files(src.path());
    for p in source.keys() {
        std::fs::remove_file(src.path().join(p)).expect("rm");
    }
    let out = tmp();
    let dest = dest_in(&out);
    // Fewer entries than a chunk: one extracting thread takes them all, in manifest order; the
    // third panics.
    let (status, stdout, stderr) = run_guarded(
        sync_cmd(&server.base, &dest, false).env(CRASH_AT_VAR, "package-entry:3:panic"),
    );
    assert!(
        stderr.contains("package-entry:3: panic asked for"),
        "the hook did not fire: {stderr}"
    );
    assert_eq!(status.code(), Some(1), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["packages"], 1, "{v}");
    assert_eq!(v["failed"], 1, "{v}");
    let failed = v["failures"][0]["path"]
        .as_str()
        .expect("failed path")
        .to_owned();
    assert!(
        v["warnings"].as_array().expect("warnings").iter().any(|w| w
            .as_str()
            .is_some_and(|w| w.contains("extracting this entry panicked"))),
        "{v}"
    );
    let mut expected = source.clone();
    assert!(
        expected.remove(&failed).is_some(),
        "{failed} is no resource"
    );
    assert_eq!(dest_files(&dest), expected, "every other entry in place");
}

/// Runs `cmd` to its end and returns its status, standard output and standard error. A hang
/// guard only (the run's end is what is waited for): past 300 s the process is killed and the
/// test fails.
fn run_guarded(cmd: &mut Command) -> (std::process::ExitStatus, String, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn resourcesync");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        let read = |mut r: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        };
        let (out, err) = (read(Box::new(stdout)), read(Box::new(stderr)));
        let status = child.wait().expect("wait");
        let _ = tx.send((
            status,
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        ));
    });
    let Ok(done) = rx.recv_timeout(Duration::from_secs(300)) else {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        panic!("the sync did not end in 300 s");
    };
    done
}

/// A panic while a Change Dump entry is extracted (on the thread that reads the manifest:
/// Change Dumps are applied in order, one entry after the other) is that entry's error, as on
/// the extracting threads of a Resource Dump: the run goes on, and the Change Lists then fetch
/// what the entry did not put in place. Without the catch the whole run ends (exit 2).
#[test]
fn a_panic_extracting_a_change_dump_entry_fails_that_entry_alone() {
    let src = tmp();
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha"),
            ("b.txt", b"bravo"),
            ("c.txt", b"charlie"),
        ],
    );
    let server = Server::start_in_thread(src.path());
    // Two changes per Change List: the third change closes the first period.
    publish_rotating(src.path(), &server.base, 2);
    let out = tmp();
    let dest = dest_in(&out);
    let (status, stdout, stderr) = run_guarded(&mut sync_cmd(&server.base, &dest, true));
    assert_eq!(status.code(), Some(0), "baseline: {stdout}\n{stderr}");
    write_tree(
        src.path(),
        &[
            ("a.txt", b"alpha, changed"),
            ("d.txt", b"delta"),
            ("e.txt", b"echo"),
        ],
    );
    publish_rotating(src.path(), &server.base, 2);
    let cd = std::fs::read_to_string(src.path().join("resourcesync/changedump.xml"))
        .expect("change dump");
    assert!(
        cd.contains(".zip</loc>"),
        "a closed period was dumped: {cd}"
    );
    let (status, stdout, stderr) =
        run_guarded(sync_cmd(&server.base, &dest, true).env(CRASH_AT_VAR, "package-entry:1:panic"));
    assert!(
        stderr.contains("package-entry:1: panic asked for"),
        "the hook did not fire: {stderr}"
    );
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert!(v["packages"].as_u64().is_some_and(|n| n >= 1), "{v}");
    assert!(
        v["warnings"].as_array().expect("warnings").iter().any(|w| w
            .as_str()
            .is_some_and(|w| w.contains("extracting this entry panicked"))),
        "{v}"
    );
    assert_eq!(dest_files(&dest), source_files(src.path()));
}

/// `--versions`: killed once bodies are kept as versions and before their batch's rows are
/// recorded (`version-kept`), in a baseline and in an incremental run. The copies are never
/// partial, and once a run completes the state is consistent: every resource has its versions
/// in order, the current one its copy's body, each body kept under its sha-256 and none twice.
#[test]
fn a_kill_between_a_kept_version_and_its_row_leaves_a_consistent_state() {
    use resourcesync_store::{FsStore, Records, SqliteState, for_each_resource, version_digest};

    let src = content_tree(30);
    let server = Server::start_in_thread(src.path());
    publish_with(src.path(), &server.base, |c| c.publish.dumps = false);
    let out = tmp();
    let dest = dest_in(&out);
    let versions_cmd = || {
        let mut c = sync_cmd(&server.base, &dest, false);
        c.arg("--versions");
        c
    };
    let mut published = Versions::new();
    record(&mut published, src.path());
    for (round, at) in [(0, 7), (1, 2)] {
        if round == 1 {
            let mut rng = Rng(seed("versions-crash"));
            change_source(src.path(), 1, &mut rng);
            publish_with(src.path(), &server.base, |c| c.publish.dumps = false);
            record(&mut published, src.path());
        }
        let ended = run_cmd(versions_cmd(), "version-kept", at, Duration::ZERO);
        assert!(matches!(ended, Ended::Killed), "round {round}: not killed");
        check_no_partial(&dest, &published, 0, "a kill at version-kept");
        let o = versions_cmd().output().expect("sync");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(dest_files(&dest), source_files(src.path()), "round {round}");
    }
    let state = SqliteState::open(&dest.join(".resourcesync/state.sqlite")).expect("state");
    let store = FsStore::open(&dest).expect("store");
    let f = resourcesync_store::Store::features(&store);
    let bodies = f.versions.expect("versions");
    let cap = format!("{}resourcesync/capabilitylist.xml", server.base);
    let mut rows = 0;
    for_each_resource(&state, &cap, |r| {
        rows += 1;
        let v = state.versions_of(&cap, &r.uri, None, 100)?;
        let last = v.last().expect("a version of every copy");
        assert!(last.until.is_none() && !r.gone, "{} {v:#?}", r.uri);
        assert_eq!(
            Some(&last.digest),
            version_digest(&r.hashes).as_ref(),
            "{}",
            r.uri
        );
        for (i, x) in v.iter().enumerate() {
            assert_eq!(x.seq, i as u64 + 1, "{v:#?}");
            assert!(
                i == 0 || v[i - 1].digest != x.digest,
                "a version twice: {v:#?}"
            );
            let mut body = Vec::new();
            std::io::Read::read_to_end(
                &mut bodies.open_version(&x.digest)?.expect("its body kept"),
                &mut body,
            )
            .expect("read");
            let mut h =
                resourcesync_model::MultiHasher::new(&[resourcesync_model::HashAlg::Sha256]);
            h.update(&body);
            assert_eq!(version_digest(&h.finish()).as_ref(), Some(&x.digest));
        }
        Ok(())
    })
    .expect("rows");
    assert_eq!(rows, source_files(src.path()).len());
}
