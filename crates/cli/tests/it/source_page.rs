//! The Source's page (`GET /` of `serve`, crates/source/src/serve/page.rs), run as a user
//! would: the overview (resources, recent changes, documents, the embedded hub's
//! subscribers), a document as a paged table, in headless Chromium too (a screenshot, kept
//! at docs/img/serve.png by `RESOURCESYNC_SCREENSHOT=docs/img/serve.png`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::serve::http_get;

use resourcesync_testkit::chromium::headless;

/// A subscriber's callback on 127.0.0.1 that confirms every verification of intent (WebSub
/// §5.3): it answers the `hub.challenge`.
fn callback() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut line = String::new();
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let challenge = line
                .split_whitespace()
                .nth(1)
                .and_then(|t| t.split_once('?'))
                .and_then(|(_, q)| q.split('&').find_map(|p| p.strip_prefix("hub.challenge=")))
                .unwrap_or("")
                .to_owned();
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{challenge}",
                challenge.len()
            );
        }
    });
    format!("http://{addr}/cb?token=s3cret")
}

fn post_form(addr: &str, path: &str, body: &str) -> u16 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status")
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET `path` until `ok` holds for the body (the watcher and the hub work on their own time).
fn until(addr: &str, path: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = http_get(addr, path);
        if status == 200 && ok(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "{what}: not in\n{body}");
        std::thread::yield_now();
    }
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, body).expect("write");
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

#[cfg(unix)]
#[test]
fn the_sources_page_shows_documents_changes_and_subscribers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("collection");
    write_collection(&data);
    let served = start_serve(dir.path(), &data);
    let addr = &served.addr;
    let cb_shown = change_and_subscribe(&data, &served);
    let page = until(addr, "/", "three changes and a subscriber", |b| {
        b.contains("notification.html") && b.contains("cover.svg") && b.contains(&cb_shown)
    });
    assert_overview(&page, addr, &served.topic, &cb_shown);
    assert_times_newest_first(&page);
    assert_document_paged(&page, addr);
    assert_in_browser(addr);
    stop(served.child);
}

/// The collection served: six files in folders and 230 records.
fn write_collection(data: &Path) {
    for (rel, body) in [
        ("README.txt", "A small collection.\n"),
        ("articles/2024/open-access.html", "<p>open access</p>\n"),
        ("articles/2024/metadata.html", "<p>metadata</p>\n"),
        ("articles/2025/harvesting.html", "<p>harvesting</p>\n"),
        ("data/observations.csv", "t,v\n1,2\n"),
        (
            "images/cover.svg",
            "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n",
        ),
    ] {
        write(data, rel, body);
    }
    for i in 0..230 {
        write(
            data,
            &format!("records/{i:04}.json"),
            &format!("{{\"id\":{i}}}\n"),
        );
    }
}

/// `resourcesync serve` with its embedded hub, as its start lines tell it.
struct Served {
    child: Child,
    /// HOST:PORT.
    addr: String,
    /// The change topic.
    topic: String,
    /// The hub's path on the server.
    hub_path: String,
}

/// Starts `serve DATA --hub embedded` (state under `dir`) and reads its start lines.
fn start_serve(dir: &Path, data: &Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_resourcesync"))
        .arg("serve")
        .arg(data)
        .args(["--listen", "127.0.0.1:0", "--hub", "embedded"])
        .arg("--state")
        .arg(dir.join("state.sqlite"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut topic_line = None;
    let mut addr = None;
    while topic_line.is_none() {
        let l = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("serve's lines");
        if let Some(u) = l.split(" at http://").nth(1) {
            addr = u.split('/').next().map(str::to_owned);
        }
        if l.starts_with("change notifications: topic ") {
            topic_line = Some(l);
        }
    }
    let addr = addr.expect("the serving line");
    let topic_line = topic_line.expect("topic");
    let mut w = topic_line.split_whitespace();
    let topic = w.nth(3).expect("topic URL").to_owned();
    let hub = w.nth(2).expect("hub URL").to_owned();
    let hub_path = hub[hub.find(&addr).expect("hub on serve") + addr.len()..].to_owned();
    Served {
        child,
        addr,
        topic,
        hub_path,
    }
}

/// Changes, which the page lists newest first, and a subscriber, which the page lists without
/// its callback's query. The callback as the page shows it.
fn change_and_subscribe(data: &Path, served: &Served) -> String {
    write(
        data,
        "articles/2024/metadata.html",
        "<p>metadata, revised</p>\n",
    );
    std::fs::remove_file(data.join("images/cover.svg")).expect("rm");
    // A name outside ASCII and with a space: shown as people write it.
    write(
        data,
        "articles/2025/über notification.html",
        "<p>push</p>\n",
    );
    let cb = callback();
    let status = post_form(
        &served.addr,
        &served.hub_path,
        &format!(
            "hub.mode=subscribe&hub.topic={}&hub.callback={}",
            enc(&served.topic),
            enc(&cb)
        ),
    );
    assert_eq!(status, 202, "subscription request");
    cb.split('?').next().expect("callback").to_owned()
}

/// The overview: names decoded, links as published, changes, subscribers (no token), the
/// topic, the Capability List linked, no script.
fn assert_overview(page: &str, addr: &str, topic: &str, cb_shown: &str) {
    assert!(
        page.contains(">articles/2025/über notification.html</a>"),
        "the name decoded: {page}"
    );
    assert!(
        page.contains("href=\"http://")
            && page.contains("/articles/2025/%C3%BCber%20notification.html\""),
        "the link as published: {page}"
    );
    assert!(page.contains("<h2>Recent changes</h2>"), "{page}");
    assert!(page.contains("class=\"deleted\">deleted</td>"), "{page}");
    assert!(page.contains("class=\"updated\">updated</td>"), "{page}");
    assert!(page.contains("<h2>Subscribers</h2>"), "{page}");
    assert!(page.contains(&format!("{cb_shown}?…")), "{page}");
    assert!(
        !page.contains("s3cret"),
        "a subscriber's token is not shown: {page}"
    );
    assert!(page.contains(&format!("<code>{topic}</code>")), "{page}");
    assert!(
        page.contains(&format!(
            "<link rel=\"resourcesync\" href=\"http://{addr}/resourcesync/capabilitylist.xml\">"
        )),
        "{page}"
    );
    assert!(!page.contains("<script"), "{page}");
}

/// Every time on the page in one format, the changes newest first.
fn assert_times_newest_first(page: &str) {
    // The newest change first.
    let times: Vec<String> = page
        .split("<tr><td class=t>")
        .skip(1)
        .map(|r| {
            // `…:35.9743Z` → `…:35.974300000`, comparable as text.
            let t = r[..r.find('<').expect("cell")].trim_end_matches('Z');
            let (s, f) = t.split_once('.').unwrap_or((t, ""));
            format!("{s}.{f:0<9}")
        })
        .collect();
    assert_eq!(times.len(), 3, "{page}");
    // Every time on the page in one format: `YYYY-MM-DD HH:MM:SS UTC`.
    let is_time = |t: &str| {
        t.len() == 23
            && t.ends_with(" UTC")
            && t.bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                10 => b == b' ',
                13 | 16 => b == b':',
                19.. => true,
                _ => b.is_ascii_digit(),
            })
    };
    for cell in page.split("<td class=t>").skip(1) {
        let t = &cell[..cell.find('<').expect("cell")];
        assert!(is_time(t), "{t:?} in {page}");
    }
    let snapshot = page
        .split("<th>Snapshot</th><td>")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .expect("the snapshot's time");
    assert!(is_time(snapshot), "{snapshot:?}");
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
}

/// A document as a table, 100 entries a page; only the documents listed are opened.
fn assert_document_paged(page: &str, addr: &str) {
    let doc = page
        .split("href=\"/?doc=")
        .skip(1)
        .map(|r| &r[..r.find('"').expect("quote")])
        .find(|d| d.starts_with("resourcelists/"))
        .expect("a Resource List on the page")
        .to_owned();
    let (status, first) = http_get(addr, &format!("/?doc={doc}"));
    assert_eq!(status, 200);
    assert!(first.contains("<th>Entries</th><td>236</td>"), "{first}");
    assert!(first.contains("<td class=n>100</td>"), "{first}");
    assert!(!first.contains("<td class=n>101</td>"), "{first}");
    assert!(first.contains("Page 1 of 3"), "{first}");
    assert!(
        first.contains(&format!("href=\"/?doc={doc}&amp;page=2\">next</a>")),
        "{first}"
    );
    let (_, last) = http_get(addr, &format!("/?doc={doc}&page=3"));
    assert!(last.contains("<td class=n>236</td>"), "{last}");
    assert!(!last.contains("<td class=n>200</td>"), "{last}");
    assert!(last.contains("Page 3 of 3"), "{last}");
    assert!(last.contains("md5:"), "{last}");
    // Only the documents listed are opened.
    for bad in ["../state.sqlite", "..%2F..%2Fetc%2Fpasswd", "nothing.xml"] {
        let (status, _) = http_get(addr, &format!("/?doc={bad}"));
        assert_eq!(status, 404, "{bad}");
    }
}

/// In a browser, without script: the page and a screenshot.
fn assert_in_browser(addr: &str) {
    let url = format!("http://{addr}/");
    let dom = headless(&url, &["--dump-dom"]);
    assert!(dom.contains("<h1>ResourceSync Source</h1>"), "{dom}");
    assert!(dom.contains("notification.html"), "{dom}");
    let shot_dir = tempfile::tempdir().expect("shot");
    let shot = shot_dir.path().join("serve.png");
    headless(
        &url,
        &[
            "--window-size=1280,900",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5_000,
        "{} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("RESOURCESYNC_SCREENSHOT") {
        std::fs::copy(&shot, Path::new(&keep)).expect("keep the screenshot");
    }
}
