//! Authenticated content distribution (WebSub §7.1): the hub signs every delivery to a
//! subscription that has a secret with `X-Hub-Signature: sha256=<hex HMAC of the body>`; the
//! subscriber recomputes it with the method the header names (§7.1.2) and compares in constant
//! time (`hmac`'s `verify_slice`).

use hmac::{Hmac, KeyInit, Mac};

use crate::{Error, Result};

/// The header name (WebSub §7.1).
pub const HEADER: &str = "x-hub-signature";

/// WebSub §5.1: `hub.secret` MUST be less than 200 bytes.
pub const MAX_SECRET_BYTES: usize = 199;

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// The bytes of a hex signature (at most 128 bytes: SHA-512's 64 doubled, with room).
fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() > 256 {
        return None;
    }
    hex::decode(s).ok()
}

/// The `X-Hub-Signature` value for `body` under `secret`: `sha256=<hex>` (WebSub §7.1; SHA-256,
/// the minimum §8.3 recommends).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes keys of any length: this cannot fail.
    let mut mac = <Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

fn verify_with<M: Mac + KeyInit>(secret: &[u8], body: &[u8], sig: &[u8]) -> Result<()> {
    let mut mac =
        <M as KeyInit>::new_from_slice(secret).map_err(|_| Error::Signature("bad key"))?;
    mac.update(body);
    mac.verify_slice(sig)
        .map_err(|_| Error::Signature("does not match the payload"))
}

/// Checks an `X-Hub-Signature` header value (`None` when absent) against `body` and `secret`
/// (WebSub §7.1.2, §8.3): the method named in the header (sha1, sha256, sha384, sha512), a
/// constant-time comparison. A missing header is an error: a subscriber that gave a secret
/// discards unsigned deliveries.
pub fn verify(secret: &[u8], header: Option<&str>, body: &[u8]) -> Result<()> {
    let h = header.ok_or(Error::Signature("missing X-Hub-Signature"))?;
    let (method, value) = h
        .trim()
        .split_once('=')
        .ok_or(Error::Signature("not method=signature"))?;
    let sig = unhex(value.trim()).ok_or(Error::Signature("not hexadecimal"))?;
    // WebSub §7.1.1: the recognized algorithm names.
    match method.trim().to_ascii_lowercase().as_str() {
        "sha1" => verify_with::<Hmac<sha1::Sha1>>(secret, body, &sig),
        "sha256" => verify_with::<Hmac<sha2::Sha256>>(secret, body, &sig),
        "sha384" => verify_with::<Hmac<sha2::Sha384>>(secret, body, &sig),
        "sha512" => verify_with::<Hmac<sha2::Sha512>>(secret, body, &sig),
        _ => Err(Error::Signature("unknown method")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // RFC 4231 test case 2.
        let s = sign(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            s,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        verify(b"Jefe", Some(&s), b"what do ya want for nothing?").unwrap();
        verify(
            b"Jefe",
            Some("SHA1=effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
            b"what do ya want for nothing?",
        )
        .unwrap();
    }

    #[test]
    fn rejects() {
        let s = sign(b"k", b"body");
        assert!(verify(b"k", Some(&s), b"body!").is_err());
        assert!(verify(b"other", Some(&s), b"body").is_err());
        assert!(verify(b"k", None, b"body").is_err());
        assert!(verify(b"k", Some("sha256"), b"body").is_err());
        assert!(verify(b"k", Some("sha256=zz"), b"body").is_err());
        assert!(verify(b"k", Some("md5=00"), b"body").is_err());
        let truncated = &s[..s.len() - 2];
        assert!(verify(b"k", Some(truncated), b"body").is_err());
    }
}
