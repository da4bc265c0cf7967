//! The Source's server over TLS (`serve --tls-cert/--tls-key`): a private CA made by the test,
//! HTTP/2 chosen by ALPN (RFC 9113 §3.2) by the project's own client given the CA
//! (`HttpOptions::ca_cert`), HTTP/1.1 still offered, a plain-HTTP client refused cleanly, and
//! unusable certificate or key files named in the error.

use std::path::Path;

use resourcesync_source::server::tls::Tls;
use resourcesync_source::server::{self, Running, ServeOptions};
use resourcesync_source::{Source, SourceConfig};
use resourcesync_testkit::tls::{TestCa, private_ca};

struct Served {
    rt: tokio::runtime::Runtime,
    running: Option<Running>,
    base: String,
    ca: TestCa,
    _dir: tempfile::TempDir,
    _certs: tempfile::TempDir,
}

fn start() -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), b"alpha\n").expect("write");
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = private_ca(certs.path());
    let tls = Tls::from_pem_files(&ca.cert, &ca.key).expect("certificate and key");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = rt
        .block_on(server::bind("127.0.0.1:0"))
        .expect("bind loopback");
    let addr = listener.local_addr().expect("addr");
    let base = format!("https://{addr}/");
    let mut cfg = SourceConfig::new(dir.path(), &base);
    server::prepare_config(&mut cfg);
    let source = Source::open(cfg).expect("open source");
    let running = rt
        .block_on(server::start_tls(
            source,
            listener,
            ServeOptions::default(),
            None,
            Some(tls),
        ))
        .expect("start");
    Served {
        rt,
        running: Some(running),
        base,
        ca,
        _dir: dir,
        _certs: certs,
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            self.rt.block_on(r.shutdown()).expect("clean shutdown");
        }
    }
}

fn http(ca: &Path) -> resourcesync_http::Http {
    resourcesync_http::Http::new(resourcesync_http::HttpOptions {
        ca_cert: Some(ca.to_path_buf()),
        retries: 0,
        ..Default::default()
    })
    .expect("client")
}

#[test]
fn the_project_client_trusting_the_ca_gets_http2_by_alpn() {
    let s = start();
    let client = http(&s.ca.ca_cert);
    let url = format!("{}a.txt", s.base);
    let (version, body) = s.rt.block_on(async {
        let r = client.get_once(&url, None).await.expect("GET over TLS");
        (r.version(), r.bytes().await.expect("body"))
    });
    assert_eq!(version, reqwest::Version::HTTP_2, "ALPN chose HTTP/2");
    assert_eq!(&body[..], b"alpha\n");
    let well_known = format!("{}.well-known/resourcesync", s.base);
    let r = s.rt.block_on(client.get_once(&well_known, None));
    assert!(r.is_ok(), "Source Description over TLS: {r:?}");
}

#[test]
fn an_http1_only_client_is_served_http1_over_tls() {
    let s = start();
    let url = format!("{}a.txt", s.base);
    let ca = reqwest::Certificate::from_pem(s.ca.ca_pem.as_bytes()).expect("ca");
    resourcesync_http::install_tls_provider();
    let client = reqwest::Client::builder()
        .tls_certs_only([ca])
        .http1_only()
        .no_proxy()
        .build()
        .expect("client");
    let (version, body) = s.rt.block_on(async {
        let r = client.get(&url).send().await.expect("GET over TLS");
        (r.version(), r.bytes().await.expect("body"))
    });
    assert_eq!(version, reqwest::Version::HTTP_11);
    assert_eq!(&body[..], b"alpha\n");
}

#[test]
fn a_client_without_the_ca_and_a_plain_http_client_are_refused() {
    let s = start();
    let url = format!("{}a.txt", s.base);
    // Not trusting the private CA: the handshake fails, no response.
    let untrusting = resourcesync_http::Http::new(resourcesync_http::HttpOptions {
        retries: 0,
        ..Default::default()
    })
    .expect("client");
    let r = s.rt.block_on(untrusting.get_once(&url, None));
    assert!(r.is_err(), "an untrusted certificate was accepted: {r:?}");
    // Plain HTTP to the TLS port: the server closes the connection, the client gets an error
    // (not a hang, not a response).
    let plain_url = url.replacen("https://", "http://", 1);
    let plain = reqwest::Client::builder()
        .no_proxy()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .expect("client");
    let r = s.rt.block_on(async { plain.get(&plain_url).send().await });
    let e = r.expect_err("plain HTTP answered on the TLS port");
    assert!(!e.is_timeout(), "plain HTTP hung instead of failing: {e}");
    // The server still serves TLS clients afterwards.
    let client = http(&s.ca.ca_cert);
    assert!(s.rt.block_on(client.get_once(&url, None)).is_ok());
}

#[test]
fn unusable_certificate_and_key_files_are_named() {
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = private_ca(certs.path());
    let missing = certs.path().join("missing.pem");
    let e = Tls::from_pem_files(&missing, &ca.key).expect_err("missing cert");
    assert!(e.to_string().contains("missing.pem"), "{e}");
    let garbage = certs.path().join("garbage.pem");
    std::fs::write(&garbage, b"not a certificate\n").expect("write");
    let e = Tls::from_pem_files(&garbage, &ca.key).expect_err("no certificate");
    assert!(e.to_string().contains("garbage.pem"), "{e}");
    let e = Tls::from_pem_files(&ca.cert, &garbage).expect_err("no key");
    assert!(e.to_string().contains("garbage.pem"), "{e}");
    // A key that is not the certificate's.
    let other = tempfile::tempdir().expect("tempdir");
    let other = private_ca(other.path());
    let e = Tls::from_pem_files(&ca.cert, &other.key).expect_err("mismatched key");
    assert!(e.to_string().contains("key.pem"), "{e}");
    // A CA file without a certificate, for the client.
    let e = resourcesync_http::Http::new(resourcesync_http::HttpOptions {
        ca_cert: Some(garbage.clone()),
        ..Default::default()
    })
    .expect_err("no CA certificate");
    assert!(e.to_string().contains("garbage.pem"), "{e}");
}
