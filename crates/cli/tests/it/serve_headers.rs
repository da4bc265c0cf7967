//! What `serve` sends with the files it did not write: an HTML or SVG resource (the
//! publisher's, or anyone's who can write to the directory) runs sandboxed on the server's
//! origin (`Content-Security-Policy: sandbox`, `X-Content-Type-Options: nosniff`); the page
//! `serve` writes itself keeps a policy that lets its style apply and nothing else run.

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::robust_support::{read_response, serve};

fn head(addr: &str, target: &str) -> (u16, BTreeMap<String, String>) {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (&s).write_all(
        format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .expect("write");
    let (status, headers, _) = read_response(&mut BufReader::new(&s)).expect("a response");
    (status, headers)
}

#[test]
fn resources_are_sandboxed_and_the_page_keeps_its_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("x.html"),
        "<!DOCTYPE html><script>alert(1)</script>",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("y.svg"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>",
    )
    .expect("write");
    let server = serve(dir.path());
    for (target, ty) in [("/x.html", "text/html"), ("/y.svg", "image/svg+xml")] {
        let (status, h) = head(&server.addr, target);
        assert_eq!(status, 200, "{target}");
        assert!(
            h.get("content-type").is_some_and(|t| t.starts_with(ty)),
            "{target}: {h:?}"
        );
        assert_eq!(
            h.get("content-security-policy").map(String::as_str),
            Some("sandbox"),
            "{target}"
        );
        assert_eq!(
            h.get("x-content-type-options").map(String::as_str),
            Some("nosniff"),
            "{target}"
        );
    }
    let (status, h) = head(&server.addr, "/");
    assert_eq!(status, 200);
    let csp = h
        .get("content-security-policy")
        .cloned()
        .unwrap_or_default();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("style-src 'unsafe-inline'"),
        "{csp}"
    );
}
