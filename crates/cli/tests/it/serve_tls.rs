//! `serve --tls-cert/--tls-key` and `sync --ca-cert`, run as a user would: a private CA made by
//! the test, a Source served over https on 127.0.0.1:0, a Destination that trusts the CA and
//! copies the tree exactly; a Destination that does not trust it fails; unusable certificate or
//! key files stop `serve` with exit 2 and an error naming the file; a machine without CA
//! certificates syncs http, and https only with `--ca-cert`.

use std::process::Command;
use std::time::Duration;

use resourcesync_testkit::tls::{TestCa, private_ca};
use resourcesync_testkit::tree;

use crate::serve::{Reaped, spawn_serve_with};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resourcesync"))
}

/// `serve` of `src` over https with a private CA made in `certs`: the running server, the CA
/// and the Source's URL.
fn serve_https(src: &std::path::Path, certs: &std::path::Path) -> (Reaped, TestCa, String) {
    let ca = private_ca(certs);
    let (child, rx) = spawn_serve_with(
        src,
        &[
            "--tls-cert",
            ca.cert.to_str().expect("path"),
            "--tls-key",
            ca.key.to_str().expect("path"),
        ],
    );
    let child = Reaped(child);
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a 'serving' line");
    let url = line.rsplit(" at ").next().expect("URL").trim().to_owned();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    (child, ca, url)
}

#[test]
fn sync_over_https_with_the_private_ca_copies_the_tree() {
    let src = tempfile::tempdir().expect("tempdir");
    for i in 0..40 {
        let d = src.path().join(format!("d{}", i % 4));
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::write(
            d.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(i + 1),
        )
        .expect("write");
    }
    let certs = tempfile::tempdir().expect("tempdir");
    let (_child, ca, url) = serve_https(src.path(), certs.path());

    // Without the CA: the certificate is not trusted, nothing is copied, exit 2.
    let untrusting = tempfile::tempdir().expect("tempdir");
    let out = bin()
        .args(["sync", &url, untrusting.path().to_str().expect("path")])
        .args(["--retries", "0"])
        .output()
        .expect("sync");
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let dest = tempfile::tempdir().expect("tempdir");
    let out = bin()
        .args(["sync", &url, dest.path().to_str().expect("path")])
        .args(["--ca-cert", ca.ca_cert.to_str().expect("path")])
        .output()
        .expect("sync");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tree::assert_same(
        &tree::files(src.path(), &[".resourcesync"]),
        &tree::files(dest.path(), &[".resourcesync"]),
    );
}

#[test]
fn unusable_tls_files_stop_serve_with_exit_2_naming_the_file() {
    let src = tempfile::tempdir().expect("tempdir");
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = private_ca(certs.path());
    let garbage = certs.path().join("garbage.pem");
    std::fs::write(&garbage, b"not PEM\n").expect("write");
    let missing = certs.path().join("missing.pem");
    for (cert, key, named) in [
        (&garbage, &ca.key, "garbage.pem"),
        (&ca.cert, &garbage, "garbage.pem"),
        (&missing, &ca.key, "missing.pem"),
    ] {
        let out = bin()
            .args(["serve", src.path().to_str().expect("path")])
            .args(["--listen", "127.0.0.1:0"])
            .args(["--tls-cert", cert.to_str().expect("path")])
            .args(["--tls-key", key.to_str().expect("path")])
            .output()
            .expect("serve");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(named), "{named} not named: {err}");
    }
    // --tls-cert without --tls-key is a usage error.
    let out = bin()
        .args(["serve", src.path().to_str().expect("path")])
        .args(["--tls-cert", ca.cert.to_str().expect("path")])
        .output()
        .expect("serve");
    assert_eq!(out.status.code(), Some(2));
    // A CA file that holds no certificate stops sync the same way.
    let dest = tempfile::tempdir().expect("tempdir");
    let out = bin()
        .args([
            "sync",
            "https://127.0.0.1:9/",
            dest.path().to_str().expect("path"),
        ])
        .args(["--ca-cert", garbage.to_str().expect("path")])
        .output()
        .expect("sync");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("garbage.pem"), "{err}");
}

/// A machine whose trust store holds no CA certificate (a minimal container image without its
/// CA bundle; here `SSL_CERT_FILE` and `SSL_CERT_DIR` name nothing): an `http://` Source syncs
/// as anywhere, an `https://` one is refused before any request with what to install, and one
/// whose CA is given with `--ca-cert` syncs (`resourcesync_http::build`). Before, every sync
/// there stopped with "building the HTTP client: builder error".
#[test]
fn without_ca_certificates_http_syncs_and_https_says_what_it_needs() {
    use resourcesync_testkit::Server;
    use resourcesync_testkit::sync::{publish, write_tree};

    let none = tempfile::tempdir().expect("tempdir");
    let rootless = |args: &[&str]| {
        bin()
            .args(args)
            .env("SSL_CERT_FILE", none.path().join("no-bundle.pem"))
            .env("SSL_CERT_DIR", none.path().join("no-certs"))
            .output()
            .expect("sync")
    };

    let plain = tempfile::tempdir().expect("tempdir");
    write_tree(plain.path(), &[("a.txt", b"alpha"), ("d/b.txt", b"bravo")]);
    let server = Server::start_in_thread(plain.path());
    publish(plain.path(), &server.base, None);
    let dest = tempfile::tempdir().expect("tempdir");
    let out = rootless(&["sync", &server.base, dest.path().to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    tree::assert_same(
        &tree::files(
            plain.path(),
            &[".resourcesync", ".well-known", "resourcesync"],
        ),
        &tree::files(dest.path(), &[".resourcesync"]),
    );

    let src = tempfile::tempdir().expect("tempdir");
    std::fs::write(src.path().join("c.txt"), b"charlie").expect("write");
    let certs = tempfile::tempdir().expect("tempdir");
    let (_child, ca, url) = serve_https(src.path(), certs.path());

    let refused = tempfile::tempdir().expect("tempdir");
    let out = rootless(&["sync", &url, refused.path().to_str().expect("path")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        err.contains("trust store has no CA certificate") && err.contains("--ca-cert"),
        "{err}"
    );

    let dest = tempfile::tempdir().expect("tempdir");
    let out = rootless(&[
        "sync",
        &url,
        dest.path().to_str().expect("path"),
        "--ca-cert",
        ca.ca_cert.to_str().expect("path"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    tree::assert_same(
        &tree::files(src.path(), &[".resourcesync"]),
        &tree::files(dest.path(), &[".resourcesync"]),
    );
}
