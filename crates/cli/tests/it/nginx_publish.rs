//! The README's first example, "Publish a folder behind nginx", as written: `resourcesync
//! publish DIR --base-url URL` under the usual umask (022), a real nginx serving DIR whose
//! worker runs as an unprivileged user (`user nobody nogroup;`: the master runs as root), and
//! every document and resource answering 200; `explore` of the URL succeeds. Then a mirror of
//! it, served by the same nginx, after a baseline, an update and a repair: every copy answers
//! 200 too. The Source's own folder (`DIR/.resourcesync`, its state) answers 403.
//!
//! nginx is found or installed by scripts/nginx.sh; its path in `RESOURCESYNC_TEST_NGINX`, set
//! by scripts/test.sh. The test fails when it is not set. Run as a user other than root, nginx
//! cannot switch users: the test then checks that every served file is readable by others.
#![cfg(target_os = "linux")]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::modes::{modes, under_umask};
use resourcesync_testkit::sync::write_tree;

pub(crate) fn nginx_binary() -> String {
    std::env::var("RESOURCESYNC_TEST_NGINX").unwrap_or_else(|_| {
        panic!(
            "RESOURCESYNC_TEST_NGINX is not set: run the tests with scripts/test.sh, which finds \
             or installs nginx (scripts/nginx.sh), or export RESOURCESYNC_TEST_NGINX=\"$(scripts/nginx.sh)\""
        )
    })
}

/// nginx serving `sites` (port, root) from one process; killed when dropped.
pub(crate) struct Nginx {
    child: Child,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its worker before it exits. A SIGKILL to the master left
        // the worker running after the tests, one process per test holding its port.
        use rustix::process::{Pid, Signal, kill_process};
        if kill_process(Pid::from_child(&self.child), Signal::TERM).is_ok() {
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

pub(crate) fn start_nginx(work: &Path, sites: &[(u16, &Path)]) -> Nginx {
    let user = if rustix::process::geteuid().is_root() {
        "user nobody nogroup;"
    } else {
        ""
    };
    let w = work.display();
    let servers: String = sites
        .iter()
        .map(|(port, root)| {
            format!(
                "server {{ listen 127.0.0.1:{port}; root {}; location / {{ }} }}\n",
                root.display()
            )
        })
        .collect();
    std::fs::create_dir_all(work.join("tmp")).expect("nginx tmp");
    let conf = format!(
        "{user}\nworker_processes 1;\ndaemon off;\npid {w}/nginx.pid;\n\
         error_log {w}/error.log warn;\nevents {{ worker_connections 64; }}\n\
         http {{\n include /etc/nginx/mime.types;\n access_log off;\n\
         client_body_temp_path {w}/tmp/body; proxy_temp_path {w}/tmp/proxy;\n\
         fastcgi_temp_path {w}/tmp/fastcgi; uwsgi_temp_path {w}/tmp/uwsgi;\n\
         scgi_temp_path {w}/tmp/scgi;\n{servers}}}\n"
    );
    std::fs::write(work.join("nginx.conf"), conf).expect("nginx.conf");
    let child = Command::new(nginx_binary())
        .arg("-p")
        .arg(work)
        .arg("-c")
        .arg(work.join("nginx.conf"))
        .arg("-e")
        .arg(work.join("error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nginx");
    let mut n = Nginx { child };
    // Answering on every port.
    let end = Instant::now() + Duration::from_secs(30);
    for (port, _) in sites {
        while TcpStream::connect(("127.0.0.1", *port)).is_err() {
            if let Some(st) = n.child.try_wait().expect("wait") {
                panic!(
                    "nginx exited ({st}): {}",
                    std::fs::read_to_string(work.join("error.log")).unwrap_or_default()
                );
            }
            assert!(Instant::now() < end, "nginx not answering within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    n
}

/// The status of `GET path` on 127.0.0.1:`port`.
fn status(port: u16, path: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let head = String::from_utf8_lossy(&buf[..buf.len().min(64)]).into_owned();
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"))
}

/// Asserts that every file under `root` (but `.resourcesync`) answers 200 on `port`.
fn assert_all_served(what: &str, port: u16, root: &Path) {
    let files: Vec<String> = modes(root, &[".resourcesync"])
        .into_keys()
        .filter(|rel| root.join(rel).is_file())
        .collect();
    assert!(files.len() >= 3, "{what}: {files:?}");
    let refused: Vec<String> = files
        .iter()
        .filter_map(|rel| {
            let st = status(port, &format!("/{rel}"));
            (st != 200).then(|| {
                let m = root.join(rel).metadata().map(|m| m.permissions().mode());
                format!("{rel} {st} (mode {:04o})", m.unwrap_or(0) & 0o7777)
            })
        })
        .collect();
    assert!(refused.is_empty(), "{what}: not served: {refused:?}");
    if !rustix::process::geteuid().is_root() {
        // nginx's worker is this user: what another user could read is checked on the modes.
        for rel in &files {
            let m = root
                .join(rel)
                .metadata()
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(
                m & 0o004,
                0o004,
                "{what}: {rel} {m:04o} not readable by others"
            );
        }
    }
}

fn run(args: &[&str]) {
    let o = under_umask("022").args(args).output().expect("run");
    assert!(
        o.status.success(),
        "{args:?}: {:?}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn the_readme_example_publish_a_folder_behind_nginx_serves_every_document() {
    let top = tempfile::tempdir().expect("tmp");
    // A temporary directory is 0700: the served trees' parents must be traversable by the
    // worker's user, as /srv/www is.
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for a in top.path().ancestors().skip(1) {
        let m = a.metadata().expect("stat").permissions().mode();
        assert_eq!(
            m & 0o001,
            0o001,
            "{} is not traversable by others",
            a.display()
        );
    }
    let data = top.path().join("data");
    let mirror = top.path().join("mirror");
    std::fs::create_dir(&data).expect("data");
    write_tree(
        &data,
        &[
            ("a.txt", b"alpha"),
            ("d/b.txt", b"bravo"),
            ("d/e/c.json", b"{}"),
        ],
    );
    let (port, mirror_port) = (free_port(), free_port());
    let _nginx = start_nginx(
        &top.path().join("nginx"),
        &[(port, data.as_path()), (mirror_port, mirror.as_path())],
    );
    let base = format!("http://127.0.0.1:{port}/");

    // The README's commands.
    run(&["publish", s(&data), "--base-url", &base]);
    assert_all_served("published", port, &data);
    assert_eq!(status(port, "/.well-known/resourcesync"), 200);
    run(&["explore", &base]);
    if rustix::process::geteuid().is_root() {
        // The Source's state is not for the web server to give away.
        assert_eq!(status(port, "/.resourcesync/state.sqlite"), 403);
    }

    // A mirror of it, served too: new copies, then an update and a repair replace some.
    run(&["sync", &base, s(&mirror), "--retries", "0"]);
    assert_all_served("mirrored", mirror_port, &mirror);
    std::fs::write(data.join("a.txt"), b"ALPHA, longer").expect("update");
    run(&["publish", s(&data), "--base-url", &base]);
    std::fs::write(mirror.join("d/b.txt"), b"damaged, longer").expect("damage");
    run(&["sync", &base, s(&mirror), "--retries", "0", "--check"]);
    assert_eq!(
        std::fs::read(mirror.join("a.txt")).expect("a"),
        b"ALPHA, longer"
    );
    assert_eq!(std::fs::read(mirror.join("d/b.txt")).expect("b"), b"bravo");
    assert_all_served("published again", port, &data);
    assert_all_served("updated and repaired", mirror_port, &mirror);
}
