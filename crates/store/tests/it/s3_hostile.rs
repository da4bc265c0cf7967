//! `S3Store` against a hostile S3 server on 127.0.0.1: a listing that loops, goes backwards or
//! never ends is an error, never an endless loop; an answer too large or not XML is refused.
//! (The server here is the attacker, a few lines over a `TcpListener`; the store's behaviour
//! against a real server is in `s3_store.rs`.)

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use resourcesync_store::{S3Store, Store};

/// Serves every request with `page(n)` (n counts requests from 0); the address.
fn server(page: impl Fn(usize) -> Vec<u8> + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
    resourcesync_testkit::pages(page)
}

fn list_page(keys: &[String], token: Option<&str>) -> Vec<u8> {
    let mut s = String::from("<ListBucketResult>");
    for k in keys {
        s.push_str(&format!(
            "<Contents><Key>{k}</Key><Size>1</Size></Contents>"
        ));
    }
    match token {
        Some(t) => s.push_str(&format!(
            "<IsTruncated>true</IsTruncated><NextContinuationToken>{t}</NextContinuationToken>"
        )),
        None => s.push_str("<IsTruncated>false</IsTruncated>"),
    }
    s.push_str("</ListBucketResult>");
    s.into_bytes()
}

/// Lists everything; the keys seen and the outcome.
fn list_all(addr: &str) -> (usize, Result<(), String>) {
    let s = S3Store::open(&format!("s3://k:s@{addr}/bucket/p")).expect("store");
    let mut n = 0;
    let r = s.list(None, &mut |i| {
        i?;
        n += 1;
        Ok(ControlFlow::Continue(()))
    });
    (n, r.map_err(|e| e.to_string()))
}

#[test]
fn a_listing_served_again_is_an_error_not_a_loop() {
    // Every page the same keys and a new token: the keys do not move on.
    let (addr, asked) =
        server(|n| list_page(&["p/a".into(), "p/b".into()], Some(&format!("t{n}"))));
    let (n, r) = list_all(&addr);
    let e = r.expect_err("a looping listing ended well");
    assert!(e.contains("not in key order"), "{e}");
    assert_eq!(n, 2, "keys passed on");
    assert_eq!(asked.load(Ordering::SeqCst), 2, "pages asked");
}

#[test]
fn a_repeated_continuation_token_is_an_error() {
    let (addr, _) = server(|n| list_page(&[format!("p/k{n:04}")], Some("same")));
    let (n, r) = list_all(&addr);
    let e = r.expect_err("a repeated token ended well");
    assert!(e.contains("repeated continuation token"), "{e}");
    assert_eq!(n, 2);
}

#[test]
fn endless_empty_pages_are_an_error() {
    let (addr, asked) = server(|n| list_page(&[], Some(&format!("t{n}"))));
    let (_, r) = list_all(&addr);
    let e = r.expect_err("endless empty pages ended well");
    assert!(e.contains("empty pages"), "{e}");
    assert!(asked.load(Ordering::SeqCst) <= 101, "{asked:?} pages asked");
}

#[test]
fn keys_outside_the_prefix_and_bad_answers_are_refused() {
    let (addr, _) = server(|_| list_page(&["elsewhere/x".into()], None));
    let e = list_all(&addr).1.expect_err("a key outside the prefix");
    assert!(e.contains("outside the prefix"), "{e}");
    let (addr, _) = server(|_| b"<html>not S3</html>".to_vec());
    let e = list_all(&addr).1.expect_err("not a listing");
    assert!(e.contains("ListBucketResult"), "{e}");
    // An answer past the cap is refused without reading it all into memory.
    let (addr, _) = server(|_| vec![b' '; (16 << 20) + 10]);
    let e = list_all(&addr).1.expect_err("a huge answer");
    assert!(e.contains("longer than"), "{e}");
}
