//! [`pages`]: a loopback server that answers every request with a page of the test's making,
//! counting them (hostile listings: loops, repeated tokens, pages that never end).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Serves every request (a GET: no body) with `page(n)` as `application/xml`, `n` counting
/// requests from 0, keeping connections alive; its address and the count. Stops with the test
/// process.
pub fn pages(
    page: impl Fn(usize) -> Vec<u8> + Send + Sync + 'static,
) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let count = Arc::new(AtomicUsize::new(0));
    let (c, page) = (count.clone(), Arc::new(page));
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { return };
            let (c, page) = (c.clone(), page.clone());
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().expect("clone"));
                loop {
                    // The request's head.
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let body = page(c.fetch_add(1, Ordering::SeqCst));
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if conn.write_all(head.as_bytes()).is_err() || conn.write_all(&body).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, count)
}
