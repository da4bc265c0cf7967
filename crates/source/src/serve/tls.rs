//! TLS for the Source's server (`serve --tls-cert FILE --tls-key FILE`): rustls with the ring
//! provider, offering HTTP/2 and HTTP/1.1 by ALPN (RFC 7301; `h2` is HTTP/2 over TLS, RFC 9113
//! §3.2). The accept loop ([`crate::serve::accept`]) tells the two protocols apart by the
//! connection preface after the handshake, as it does on cleartext, so the ALPN choice only tells
//! the client what to speak.
//!
//! Certificate and key files are read whole, at most [`MAX_PEM`] bytes each (they are trusted
//! configuration, but a wrong path must not make the server read a disk image). Every error
//! names the file concerned.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};

/// Longest certificate chain or key file read (a chain of a few certificates is a few KiB).
pub const MAX_PEM: u64 = 1 << 20;

/// Longest time a client may take to finish the TLS handshake once connected; past it the
/// connection is closed (a client that sends nothing is also closed by the idle timeout).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The protocols offered by ALPN, preferred first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A server TLS configuration: a certificate chain and its private key.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ServerConfig>,
    cert: PathBuf,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("cert", &self.cert).finish()
    }
}

static PROVIDER: Once = Once::new();

/// Installs the process-wide rustls provider (ring) once; one installed first is kept.
fn install_provider() {
    PROVIDER.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Reads a PEM file whole, at most [`MAX_PEM`] bytes.
fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>> {
    let bad = |m: String| Error::Config(format!("{what} {}: {m}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > MAX_PEM {
        return Err(bad(format!("larger than {MAX_PEM} bytes")));
    }
    Ok(bytes)
}

impl Tls {
    /// Reads a PEM certificate chain (the server's certificate first, then intermediates) and a
    /// PEM private key (PKCS#8, PKCS#1 or SEC1), and checks that they belong together.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls> {
        install_provider();
        let cert_pem = read_pem(cert, "TLS certificate")?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::Config(format!("TLS certificate {}: {e}", cert.display())))?;
        if chain.is_empty() {
            return Err(Error::Config(format!(
                "TLS certificate {}: no PEM certificate (BEGIN CERTIFICATE) in it",
                cert.display()
            )));
        }
        let key_pem = read_pem(key, "TLS key")?;
        let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            Error::Config(format!(
                "TLS key {}: no usable PEM private key ({e})",
                key.display()
            ))
        })?;
        let mut config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(|e| {
                Error::Config(format!(
                    "TLS key {} does not go with certificate {}: {e}",
                    key.display(),
                    cert.display()
                ))
            })?;
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(Tls {
            config: Arc::new(config),
            cert: cert.to_path_buf(),
        })
    }

    /// The acceptor of the accept loop.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}
