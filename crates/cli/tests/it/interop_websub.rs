//! Interop with a third-party WebSub implementation, flask-websub 0.4.1 (scripts/websub-peers.sh
//! installs it in .venv-websub; scripts/test.sh exports RESOURCESYNC_WEBSUB_VENV):
//!
//! - their subscriber through our hub (the Source's embedded hub): they subscribe with a
//!   secret, our hub verifies their intent and delivers a Change Notification signed with
//!   sha256, which their subscriber checks before handing it on;
//! - our subscriber through their hub: the Source publishes to their hub (which accepts only
//!   `hub.mode=publish` forms, so the Source falls back to that and their hub fetches the
//!   topic), our Destination subscribes there with `watch_push`, verifies their sha512
//!   signatures, and gets the file written at the Source.
//!
//! Without RESOURCESYNC_WEBSUB_VENV and without <workspace>/.venv-websub the tests are skipped
//! with a message; with the variable set to a venv that lacks the peer, they fail.
#![allow(clippy::unwrap_used)] // test helpers: a failure is the test failing

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use resourcesync_destination::{
    PushOptions, PushStats, Quiet, StopHandle, SyncOptions, WatchOptions,
};
use resourcesync_source::server::{self, HubChoice, ServeOptions};
use resourcesync_source::watch::WatchOptions as SourceWatch;
use resourcesync_source::{Source, SourceConfig};

const DEADLINE: Duration = Duration::from_secs(60);

fn peer_python() -> Option<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let set = std::env::var_os("RESOURCESYNC_WEBSUB_VENV").filter(|v| !v.is_empty());
    let venv = set
        .clone()
        .map(PathBuf::from)
        .unwrap_or(workspace.join(".venv-websub"));
    let py = venv.join("bin/python");
    if py.is_file() {
        return Some(py);
    }
    if set.is_some() {
        panic!("RESOURCESYNC_WEBSUB_VENV={venv:?} has no bin/python: run scripts/websub-peers.sh");
    }
    eprintln!(
        "SKIPPED: flask-websub peer not installed (run scripts/websub-peers.sh, or scripts/test.sh, \
         which sets RESOURCESYNC_WEBSUB_VENV)"
    );
    None
}

/// A peer process; its stdout lines arrive on a channel. Killed when dropped.
struct Peer {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Peer {
    fn start(py: &Path, args: &[&str]) -> Peer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/websub_peer.py");
        let mut child = Command::new(py)
            .arg(script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the flask-websub peer");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Peer { child, lines }
    }

    /// The next line starting with `prefix` (others are skipped), within the deadline.
    fn line(&self, prefix: &str) -> String {
        let end = std::time::Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("waiting for {prefix:?} from the peer: {e}"),
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn source(dir: &Path, hub: HubChoice) -> (server::Running, String) {
    let listener = server::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let mut cfg = SourceConfig::new(dir, &base);
    server::prepare_config(&mut cfg);
    let src = Source::open(cfg).unwrap();
    let opts = ServeOptions {
        watch: SourceWatch {
            use_watcher: false,
            rescan_interval: Duration::from_secs(3600),
            ..SourceWatch::default()
        },
        ..ServeOptions::default()
    };
    let running = server::start_with(src, listener, opts, Some(hub))
        .await
        .unwrap();
    (running, base)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn their_subscriber_through_our_hub() {
    let Some(py) = peer_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    let (running, base) = source(dir.path(), HubChoice::Embedded).await;
    let hub = format!("{base}resourcesync/hub");
    let topic = format!("{base}resourcesync/change-notification");
    let peer = tokio::task::spawn_blocking({
        let (py, hub, topic) = (py.clone(), hub.clone(), topic.clone());
        move || {
            let p = Peer::start(&py, &["subscriber", &hub, &topic]);
            p.line("SUBSCRIBED");
            p
        }
    })
    .await
    .unwrap();
    std::fs::write(dir.path().join("pushed.txt"), "to them").unwrap();
    running.publisher().batch(false).await.unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let l = peer.line("NOTIFICATION");
        drop(peer);
        l
    })
    .await
    .unwrap();
    assert!(line.contains("change-notification"), "{line}");
    assert!(line.contains(&format!("{base}pushed.txt")), "{line}");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_subscriber_through_their_hub() {
    let Some(py) = peer_python() else { return };
    let peer = tokio::task::spawn_blocking(move || Peer::start(&py, &["hub"]))
        .await
        .unwrap();
    let (peer, hub_line) = tokio::task::spawn_blocking(move || {
        let l = peer.line("HUB ");
        (peer, l)
    })
    .await
    .unwrap();
    let hub = hub_line.trim_start_matches("HUB ").trim().to_owned();
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    std::fs::write(src_dir.path().join("a.txt"), "a").unwrap();
    let (running, base) = source(src_dir.path(), HubChoice::Url(hub)).await;

    let mut opts = SyncOptions::new(base.clone(), dst_dir.path());
    opts.concurrency = 2;
    let popts = PushOptions {
        poll_interval: Duration::from_secs(3600),
        ..PushOptions::default()
    };
    let stop = StopHandle::new();
    let stats = Arc::new(PushStats::default());
    let rounds = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let task = {
        let (stop, stats, rounds) = (stop.clone(), stats.clone(), rounds.clone());
        tokio::spawn(async move {
            resourcesync_destination::watch_push(
                &opts,
                &WatchOptions::default(),
                &popts,
                Arc::new(Quiet),
                &stop,
                Some(stats),
                |_| {
                    rounds.fetch_add(1, Ordering::SeqCst);
                },
            )
            .await
        })
    };
    let wait = |what: &'static str, f: Box<dyn Fn() -> bool + Send>| async move {
        let end = tokio::time::Instant::now() + DEADLINE;
        while !f() {
            assert!(
                tokio::time::Instant::now() < end,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    {
        let (s, r) = (stats.clone(), rounds.clone());
        wait(
            "the subscription at their hub and the catch-up",
            Box::new(move || {
                s.subscribed.load(Ordering::Relaxed) >= 1 && r.load(Ordering::SeqCst) >= 2
            }),
        )
        .await;
    }
    std::fs::write(src_dir.path().join("via-them.txt"), "through flask-websub").unwrap();
    running.publisher().batch(false).await.unwrap();
    let copy = dst_dir.path().join("via-them.txt");
    {
        let (s, c) = (stats.clone(), copy.clone());
        wait(
            "the copy, from a delivery by their hub",
            Box::new(move || {
                s.received.load(Ordering::Relaxed) >= 1
                    && std::fs::read(&c).ok().as_deref() == Some(b"through flask-websub".as_slice())
            }),
        )
        .await;
    }
    assert_eq!(
        stats.rejected.load(Ordering::Relaxed),
        0,
        "their sha512 signatures verify"
    );
    stop.stop();
    tokio::time::timeout(DEADLINE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    running.shutdown().await.unwrap();
    drop(peer);
}
