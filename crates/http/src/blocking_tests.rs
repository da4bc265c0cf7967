use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// A server on 127.0.0.1 answering the `n`th request (from 0) with `answer(n)`, one
/// connection per request (`Connection: close`); its URL and the requests counted.
fn server(answer: fn(u32) -> String) -> (String, Arc<AtomicU32>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/doc", l.local_addr().expect("addr"));
    let count = Arc::new(AtomicU32::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut r = BufReader::new(conn.try_clone().expect("clone"));
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let n = c.fetch_add(1, Ordering::SeqCst);
            let _ = conn.write_all(answer(n).as_bytes());
        }
    });
    (url, count)
}

fn ok(_: u32) -> String {
    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi".into()
}

fn busy_once(n: u32) -> String {
    if n == 0 {
        "HTTP/1.1 503 Busy\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .into()
    } else {
        ok(n)
    }
}

fn busy_for_an_hour(_: u32) -> String {
    "HTTP/1.1 503 Busy\r\nRetry-After: 3600\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        .into()
}

fn client(opts: HttpOptions) -> BlockingHttp {
    BlockingHttp::new(opts).expect("client")
}

#[test]
fn a_get_reads_the_body_under_a_limit() {
    let (url, _) = server(ok);
    let c = client(HttpOptions::default());
    let body = c.get(&url, None, None).expect("get").read_limited(2);
    assert_eq!(body.expect("body"), b"hi");
    let e = c.get(&url, None, None).expect("get").read_limited(1);
    assert!(matches!(e, Err(Error::TooLarge { limit: 1, .. })), "{e:?}");
}

#[test]
fn retry_after_of_a_503_is_waited_for_by_the_one_retry_policy() {
    let (url, count) = server(busy_once);
    let c = client(HttpOptions {
        backoff_base: Duration::from_millis(10),
        ..HttpOptions::default()
    });
    let sent = AtomicU32::new(0);
    let t = Instant::now();
    let mut body = String::new();
    c.get(&url, None, Some(&sent))
        .expect("get")
        .read_to_string(&mut body)
        .expect("read");
    assert_eq!(body, "hi");
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert_eq!(sent.load(Ordering::SeqCst), 2);
}

#[test]
fn a_deadline_cuts_the_waits_and_ends_the_retries() {
    let (url, _) = server(busy_for_an_hour);
    let c = client(HttpOptions {
        backoff_max: Duration::from_secs(3600),
        retries: 100,
        ..HttpOptions::default()
    });
    let t = Instant::now();
    let e = c
        .get(&url, Some(t + Duration::from_millis(300)), None)
        .expect_err("time is up");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert!(e.to_string().contains("time given to it is up"), "{e}");
}

/// Blocking where called: on a runtime worker it refuses (a panic, not a stalled worker);
/// through `block_in_place` (what `resourcesync_store::blocking::call` does) it works.
#[test]
fn called_on_an_async_worker_it_panics_and_through_block_in_place_it_works() {
    let (url, _) = server(ok);
    let c = client(HttpOptions::default());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (c2, u2) = (c.clone(), url.clone());
    let direct = rt.block_on(rt.spawn(async move { c2.get(&u2, None, None).map(|_| ()) }));
    let p = direct.expect_err("a panic").into_panic();
    let m = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    assert!(
        m.contains("Cannot start a runtime from within a runtime"),
        "{m}"
    );
    let through = rt.block_on(rt.spawn(async move {
        tokio::task::block_in_place(|| c.get(&url, None, None)?.read_limited(10))
    }));
    assert_eq!(through.expect("no panic").expect("get"), b"hi");
}

/// A `Retry-After` longer than the longest honoured (`backoff_max`) waits no longer than it,
/// in the retries and in the host's pause of new requests alike.
#[test]
fn a_retry_after_past_the_longest_honoured_is_cut_to_it() {
    let (url, count) = server(busy_for_an_hour);
    let c = client(HttpOptions {
        backoff_max: Duration::from_millis(50),
        retries: 3,
        ..HttpOptions::default()
    });
    let t = Instant::now();
    let e = c.get(&url, None, None).expect_err("gives up");
    assert!(matches!(e, Error::Status { status: 503, .. }), "{e}");
    assert_eq!(count.load(Ordering::SeqCst), 4);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}
