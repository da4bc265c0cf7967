//! A private certificate authority made for one test, and a server certificate it signed for
//! `127.0.0.1` and `localhost`, written as PEM files (what `serve --tls-cert/--tls-key` and
//! `sync --ca-cert` read).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};

/// The PEM files of a private CA and of a server certificate it signed.
#[derive(Debug, Clone)]
pub struct TestCa {
    /// The CA's certificate (the root a client trusts).
    pub ca_cert: PathBuf,
    /// The server's certificate chain (its certificate only).
    pub cert: PathBuf,
    /// The server's private key (PKCS#8).
    pub key: PathBuf,
    /// The CA's certificate, PEM.
    pub ca_pem: String,
}

/// Makes a CA and a server certificate for `127.0.0.1` and `localhost`, writes them under `dir`
/// (`ca.pem`, `cert.pem`, `key.pem`).
pub fn private_ca(dir: &Path) -> TestCa {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "resourcesync test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("ca key")).expect("ca");
    let mut leaf = CertificateParams::new(vec!["localhost".to_owned()]).expect("leaf params");
    leaf.subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    leaf.distinguished_name
        .push(DnType::CommonName, "resourcesync test server");
    let key = KeyPair::generate().expect("leaf key");
    let cert = leaf.signed_by(&key, &ca).expect("leaf");
    let out = TestCa {
        ca_cert: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        ca_pem: ca.pem(),
    };
    std::fs::write(&out.ca_cert, &out.ca_pem).expect("write ca.pem");
    std::fs::write(&out.cert, cert.pem()).expect("write cert.pem");
    std::fs::write(&out.key, key.serialize_pem()).expect("write key.pem");
    out
}
