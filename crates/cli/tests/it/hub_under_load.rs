//! `resourcesync hub` against hostile and heavy clients (the WebSub hub side): a
//! load of keep-alive clients for 30 s with every answer checked, huge request heads, 10,000 idle
//! connections, oversized bodies, its state never reachable, the embedded hub of `serve`, its
//! listen backlog, idle and stalled connections, private addresses. Linux only (the server's
//! memory is read from /proc). The helpers shared with `serve_robust.rs` are in
//! `robust_support`.

#![cfg(target_os = "linux")]

use crate::robust_support;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use robust_support::*;

fn hub(state: &Path) -> Server {
    Server::start(&["hub", "--state", state.to_str().expect("utf-8")])
}

/// A realistic mix for the hub: subscriptions (renewed again and again) and unsubscriptions
/// whose verification the test's subscriber answers, notifications published the ResourceSync
/// way to topics with subscribers (each fanned out to signed deliveries), and GETs of paths
/// the hub does not have (it answers every GET with its description).
fn hub_mix(hub: &str, sub: &str) -> Vec<Req> {
    let mut reqs = Vec::new();
    for k in 0..16 {
        let topic = format!("http://{sub}/topic{}", k % 4);
        let callback = format!("http://{sub}/cb{k}?client=x&k={k}");
        reqs.push(form(
            &[
                ("hub.mode", "subscribe"),
                ("hub.topic", &topic),
                ("hub.callback", &callback),
                ("hub.secret", SECRET),
                ("hub.lease_seconds", "600"),
                ("unknown.parameter", "ignored"),
            ],
            202,
        ));
        let churn = format!("http://{sub}/churn{k}");
        for mode in ["subscribe", "unsubscribe"] {
            reqs.push(form(
                &[
                    ("hub.mode", mode),
                    ("hub.topic", &format!("http://{sub}/quiet")),
                    ("hub.callback", &churn),
                ],
                202,
            ));
        }
        for _ in 0..10 {
            reqs.push(notification(hub, &topic, PAYLOAD, 200));
        }
        for path in ["/", "/unknown", "/resourcesync-hub.sqlite", "/hub?x=1"] {
            reqs.push(Req::get(path, None));
        }
        reqs.push(Req {
            method: "PUT",
            status: 405,
            ..Req::get("/", None)
        });
    }
    reqs
}

#[test]
fn hub_under_load_for_30_s_answers_every_request() {
    let secs = std::env::var("RESOURCESYNC_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    let (sub, seen) = subscriber();
    let reqs = hub_mix(&server.addr, &sub);
    let before = server.rss_kib();
    let started = Instant::now();
    let l = load(&server.addr, &reqs, 8, secs);
    let rate = l.requests as f64 / started.elapsed().as_secs_f64();
    let after = server.rss_kib();
    eprintln!(
        "hub: {} requests in {secs} s ({rate:.0}/s), {} errors; subscriber: {} verifications, \
         {} denials, {} signed deliveries, {} bad signatures; RSS {before} -> {after} KiB",
        l.requests,
        l.errors,
        seen.verifications.load(Ordering::Relaxed),
        seen.denials.load(Ordering::Relaxed),
        seen.deliveries.load(Ordering::Relaxed),
        seen.bad_signatures.load(Ordering::Relaxed),
    );
    assert_eq!(l.errors, 0, "first error: {:?}", l.first_error);
    assert!(l.requests > 1000, "{l:?}");
    assert!(seen.verifications.load(Ordering::Relaxed) > 0);
    assert!(seen.deliveries.load(Ordering::Relaxed) > 0);
    assert_eq!(seen.bad_signatures.load(Ordering::Relaxed), 0);
    assert_eq!(seen.denials.load(Ordering::Relaxed), 0);
}

#[test]
fn hub_huge_request_heads_get_431_or_a_clean_close() {
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    huge_heads(&server, "/");
}

#[test]
fn hub_ten_thousand_idle_connections_keep_memory_bounded() {
    raise_nofile(IDLE as u64 + 1_000);
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    idle_connections("hub", &server, "/");
}

/// Sends `req` (its body possibly huge, written by another thread while the answer is read)
/// and returns the status, or `None` for a close without an answer.
fn send_big(addr: &str, head: String, body: Vec<u8>) -> Option<u16> {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let w = s.try_clone().expect("clone");
    let writer = std::thread::spawn(move || {
        // The hub may answer and close before the body is all sent.
        let _ = (&w).write_all(head.as_bytes());
        let _ = (&w).write_all(&body);
    });
    let r = read_response(&mut BufReader::new(&s)).map(|(st, _, _)| st);
    let _ = s.shutdown(std::net::Shutdown::Both);
    writer.join().expect("writer");
    r
}

#[test]
fn hub_refuses_oversized_bodies_with_413() {
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    let addr = server.addr.clone();
    let link = format!(
        "Link: <http://127.0.0.1:9/topic>; rel=\"self\", <http://{addr}/>; rel=\"hub\"\r\n"
    );
    // Past the defaults: forms 64 KiB, payloads 16 MiB (HubOptions::new).
    let form_body = format!("hub.mode=subscribe&x={}", "a".repeat(64 * 1024));
    let cases = [
        (
            "a 64 KiB form",
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
                form_body.len()
            ),
            form_body.clone().into_bytes(),
        ),
        (
            "a chunked 64 KiB form",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned(),
            format!("{:x}\r\n{form_body}\r\n0\r\n\r\n", form_body.len()).into_bytes(),
        ),
        (
            "a 16 MiB payload",
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\n{link}Content-Length: {}\r\n\r\n",
                16 * 1024 * 1024 + 1
            ),
            vec![b' '; 16 * 1024 * 1024 + 1],
        ),
        (
            "a chunked 16 MiB payload",
            format!(
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/xml\r\n{link}Transfer-Encoding: chunked\r\n\r\n"
            ),
            {
                let chunk = format!("{:x}\r\n{}\r\n", 1 << 20, " ".repeat(1 << 20));
                let mut b = chunk.repeat(17).into_bytes();
                b.extend_from_slice(b"0\r\n\r\n");
                b
            },
        ),
    ];
    for (name, head, body) in cases {
        let status = send_big(&addr, head, body);
        eprintln!("{name}: {status:?}");
        assert_eq!(status, Some(413), "{name}");
    }
    // Just under the limits: accepted.
    let q = notification(&addr, "http://127.0.0.1:9/topic", &vec![b' '; 1 << 20], 200);
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(200));
    let (status, _) = get(&addr, "/").expect("still serving");
    assert_eq!(status, 200);
}

#[test]
fn the_hub_state_is_never_reachable_over_http() {
    let parent = tempfile::tempdir().expect("tempdir");
    let db = parent.path().join("hub.sqlite");
    let server = hub(&db);
    let addr = server.addr.clone();
    assert!(db.is_file(), "the state exists");
    let abs = db.to_str().expect("utf-8").to_owned();
    let file_url = format!("file://{abs}");
    let attacks = [
        "/hub.sqlite".to_owned(),
        "/../hub.sqlite".to_owned(),
        "/%2e%2e/hub.sqlite".to_owned(),
        "/..%2fhub.sqlite".to_owned(),
        abs.clone(),
        format!("/..{abs}"),
        "/resourcesync-hub.sqlite".to_owned(),
        "/.resourcesync/hub.sqlite".to_owned(),
        file_url.clone(),
        "*".to_owned(),
    ];
    for a in &attacks {
        let r = get(&addr, a);
        eprintln!("GET {a}: {:?}", r.as_ref().map(|(s, _)| s));
        if let Some((status, body)) = r {
            assert!(matches!(status, 200 | 400 | 404), "{a}: HTTP {status}");
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("SQLite format"), "{a}: {text}");
        }
    }
    // Nor by asking the hub to fetch it, or to deliver to it: only http(s) URLs are taken.
    let (sub, seen) = subscriber();
    let reqs = [
        form(&[("hub.mode", "publish"), ("hub.url", &file_url)], 400),
        form(&[("hub.mode", "publish"), ("hub.topic", &file_url)], 400),
        notification(&addr, &file_url, PAYLOAD, 400),
        form(
            &[
                ("hub.mode", "subscribe"),
                ("hub.topic", &file_url),
                ("hub.callback", &format!("http://{sub}/cb")),
            ],
            400,
        ),
        form(
            &[
                ("hub.mode", "subscribe"),
                ("hub.topic", &format!("http://{sub}/topic")),
                ("hub.callback", &file_url),
            ],
            400,
        ),
    ];
    for q in &reqs {
        let r = exchange(&addr, q).map(|r| r.0);
        assert_eq!(r, Some(q.status), "{}", String::from_utf8_lossy(&q.body));
    }
    assert_eq!(seen.verifications.load(Ordering::Relaxed), 0);

    // The hub embedded in `serve` keeps its state beside the Source's, which is not served.
    let dir = parent.path().join("served");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("ok.txt"), "ok").expect("write");
    let served = Server::start(&[
        "serve",
        dir.to_str().expect("utf-8"),
        "--no-watch",
        "--hub",
        "embedded",
    ]);
    assert!(
        dir.join(".resourcesync/hub.sqlite").is_file(),
        "the embedded hub's state exists"
    );
    for a in [
        "/.resourcesync/hub.sqlite",
        "/%2eresourcesync/hub.sqlite",
        "/resourcesync/hub/../../.resourcesync/hub.sqlite",
        "/resourcesync/hub/%2e%2e/%2e%2e/.resourcesync/hub.sqlite",
        "/resourcesync/hub/hub.sqlite",
        "/resourcesync/hub.sqlite",
    ] {
        let r = get(&served.addr, a);
        eprintln!(
            "serve --hub embedded, GET {a}: {:?}",
            r.as_ref().map(|(s, _)| s)
        );
        if let Some((status, body)) = r {
            assert!(matches!(status, 200 | 400 | 404), "{a}: HTTP {status}");
            let text = String::from_utf8_lossy(&body);
            assert!(!text.contains("SQLite format"), "{a}: {text}");
        }
    }
    assert_eq!(get(&served.addr, "/ok.txt"), Some((200, b"ok".to_vec())));
}

#[test]
fn the_embedded_hub_relays_only_its_sources_topics_and_takes_no_publications() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("ok.txt"), "ok").expect("write");
    let served = Server::start(&[
        "serve",
        dir.path().to_str().expect("utf-8"),
        "--no-watch",
        "--hub",
        "embedded",
    ]);
    let addr = served.addr.clone();
    let hub_path = "/resourcesync/hub";
    let own_topic = format!("http://{addr}/resourcesync/change-notification");
    let (sub, seen) = subscriber();
    let at_hub = |mut q: Req| {
        q.target = hub_path.to_owned();
        q
    };
    // Anyone could otherwise push forged notifications, signed by the hub with each
    // subscriber's own secret, or make the hub fetch any URL and deliver it to its subscribers.
    for q in [
        notification(&addr, &own_topic, PAYLOAD, 403),
        form(&[("hub.mode", "publish"), ("hub.url", &own_topic)], 403),
        form(
            &[
                ("hub.mode", "publish"),
                ("hub.url", &format!("http://{sub}/x")),
            ],
            403,
        ),
    ] {
        let q = at_hub(q);
        let r = exchange(&addr, &q);
        assert_eq!(
            r.as_ref().map(|r| r.0),
            Some(q.status),
            "{}: {:?}",
            String::from_utf8_lossy(&q.body),
            r.map(|r| String::from_utf8_lossy(&r.1).into_owned())
        );
    }
    // A subscription to another topic is denied (WebSub §5.2), never verified.
    let q = at_hub(form(
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", &format!("http://{sub}/elsewhere")),
            ("hub.callback", &format!("http://{sub}/cb")),
        ],
        202,
    ));
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(202));
    until("the denial", || seen.denials.load(Ordering::Relaxed) == 1);
    // Its own topic is subscribed to as before.
    let q = at_hub(form(
        &[
            ("hub.mode", "subscribe"),
            ("hub.topic", &own_topic),
            ("hub.callback", &format!("http://{sub}/cb")),
        ],
        202,
    ));
    assert_eq!(exchange(&addr, &q).map(|r| r.0), Some(202));
    until("the verification", || {
        seen.verifications.load(Ordering::Relaxed) == 1
    });
    assert_eq!(seen.denials.load(Ordering::Relaxed), 1);
}

/// A burst of 600 connections while `server` accepts none (it is stopped with SIGSTOP): the
/// kernel completes each handshake only while the listen backlog has room, so with a backlog
/// below 600 a connection is never answered (its SYN is dropped).
fn burst_fits_the_backlog(server: &Server) {
    use rustix::process::{Pid, Signal, kill_process};
    let pid = Pid::from_child(&server.child);
    kill_process(pid, Signal::STOP).expect("SIGSTOP");
    let addr: std::net::SocketAddr = server.addr.parse().expect("addr");
    let mut held = Vec::new();
    let mut refused = None;
    for k in 0..600 {
        // 3 s: the first SYN and its retransmission after 1 s, both dropped when full.
        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
            Ok(s) => held.push(s),
            Err(e) => {
                refused = Some((k, e));
                break;
            }
        }
    }
    kill_process(pid, Signal::CONT).expect("SIGCONT");
    assert!(refused.is_none(), "connection not answered: {refused:?}");
    drop(held);
    assert_eq!(get(&server.addr, "/").map(|r| r.0), Some(200));
}

#[test]
fn the_hub_listens_with_the_backlog_of_serve() {
    let state = tempfile::tempdir().expect("tempdir");
    let server = hub(&state.path().join("hub.sqlite"));
    burst_fits_the_backlog(&server);
}

#[test]
fn the_hub_closes_idle_and_stalled_connections() {
    let state = tempfile::tempdir().expect("tempdir");
    let db = state.path().join("hub.sqlite");
    let server = Server::start(&[
        "hub",
        "--state",
        db.to_str().expect("utf-8"),
        "--idle-timeout",
        "1",
    ]);
    for (name, sent) in [
        ("idle", &b""[..]),
        ("a stalled request head", &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Ty"[..]),
        (
            "a stalled body",
            &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nhub.mode="[..],
        ),
    ] {
        let s = TcpStream::connect(&server.addr).expect("connect");
        // The guard: without the idle timeout, the read below waits for it and fails.
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        (&s).write_all(sent).expect("write");
        let mut rest = Vec::new();
        let r = std::io::Read::read_to_end(&mut &s, &mut rest);
        eprintln!("{name}: {r:?}, {} bytes", rest.len());
        assert!(
            match &r {
                Ok(_) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            },
            "{name}: not closed: {r:?}"
        );
    }
    assert_eq!(get(&server.addr, "/").map(|r| r.0), Some(200));
}

/// `hub --private-addresses`: `deny` refuses a loopback callback at once (400, nothing sent);
/// `auto` on a loopback hub accepts it for verification (202).
#[test]
fn the_hub_reaches_private_addresses_only_when_allowed() {
    let state = tempfile::tempdir().expect("tempdir");
    let subscribe = |server: &Server| {
        let body = format!(
            "hub.mode=subscribe&hub.topic={}&hub.callback={}",
            form_value("http://example.org/t"),
            form_value("http://127.0.0.1:9/cb")
        );
        let q = Req {
            method: "POST",
            target: "/".into(),
            headers: "Content-Type: application/x-www-form-urlencoded\r\n".into(),
            body: body.into_bytes(),
            status: 0,
            want: None,
        };
        exchange(&server.addr, &q).expect("an answer")
    };
    let deny = Server::start(&[
        "hub",
        "--state",
        state.path().join("deny.sqlite").to_str().expect("utf-8"),
        "--private-addresses",
        "deny",
    ]);
    let (status, body) = subscribe(&deny);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("private address 127.0.0.1"), "{body}");
    let auto = hub(&state.path().join("auto.sqlite"));
    let (status, body) = subscribe(&auto);
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
}
