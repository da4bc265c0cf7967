//! The bodies of kept versions (issue 37; `docs/history.md`): content-addressed by their
//! sha-256, beside the copies but outside every key a Source can name
//! (`.resourcesync/versions/sha256/AB/HEX`: [`RelPath`] refuses the Destination's own folder),
//! so that no copy ever overwrites one. The rows saying which resource had which body when are
//! the state's ([`crate::VersionRecord`]).
//!
//! A backend offers them as a capability ([`crate::Features::versions`]): [`VersionBodies`].
//! A body is kept from the copy just put in place at its key ([`VersionBodies::keep`]): a
//! directory hard-links the file (no byte copied; the copy is later replaced by a rename, so
//! the linked body is never changed by the Destination), a bucket copies the object on the
//! server (`CopyObject`, on condition that it is still the object whose digest was checked),
//! memory shares the bytes. A body already kept under its digest is not kept again: an
//! unchanged body is stored once however many times, and by however many resources, it is
//! listed.
//!
//! Durability is the store's rule for copies: a body kept is durable once [`crate::Store::sync`]
//! returns (a directory: the link is in the next `syncfs`, or its directory is synced), and
//! the caller records the version's row only after that (the committer does it in the same
//! step as the copy's row). A crash between leaves a body no row names, which a later run
//! keeps as it is (the same digest is the same body) or pruning removes.

use std::io::Read;

use resourcesync_model::{HashAlg, Hashes};

use crate::error::{Error, Result};
use crate::path::RelPath;

/// The algorithm of the digests that name kept bodies (Z39.99-2014 §7 `sha-256`).
pub const VERSION_ALG: HashAlg = HashAlg::Sha256;

/// The folder of kept bodies, under the Destination's own folder (a store's root or prefix).
pub const VERSIONS_DIR: &str = "versions";

/// The capability of keeping the bodies of versions ([`crate::Features::versions`]).
/// Implementations pass [`crate::conformance::store`]'s version checks.
pub trait VersionBodies: Send + Sync {
    /// Keeps the body of the object now at `key` as the body named `digest`
    /// (`sha-256:HEX`), unless one is kept under it already; whether it was added. The object
    /// must have that digest (a bucket checks the digests kept with it; a directory trusts the
    /// copy it just verified and placed).
    fn keep(&self, key: &RelPath, digest: &str) -> Result<bool>;
    /// Opens the body named `digest`; `None` when none is kept.
    fn open_version(&self, digest: &str) -> Result<Option<Box<dyn Read + Send>>>;
    /// The length of the body named `digest`; `None` when none is kept.
    fn version_length(&self, digest: &str) -> Result<Option<u64>>;
    /// Removes the body named `digest` (pruning, once no row names it:
    /// [`crate::Records::digest_referenced`]); whether there was one.
    fn remove_version(&self, digest: &str) -> Result<bool>;
    /// Up to `limit` digests of kept bodies after `after`, in order (`sha-256:HEX`, lower
    /// case): pruning's sweep for bodies no row names (a prune stopped between removing the
    /// rows and the bodies leaves such bodies: [`crate::Records::digest_referenced`]).
    fn versions_after(&self, after: Option<&str>, limit: usize) -> Result<Vec<String>>;
}

/// The digest of a kept body's file name (64 hexadecimal digits, any case), if it is one.
pub fn digest_of_name(name: &str) -> Option<String> {
    (name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("{}:{}", VERSION_ALG.token(), name.to_ascii_lowercase()))
}

/// The digest naming a body of `hashes`: its sha-256, as `sha-256:HEX`; `None` without one.
pub fn version_digest(hashes: &Hashes) -> Option<String> {
    hashes
        .value_of(&VERSION_ALG)
        .map(|hex| format!("{}:{}", VERSION_ALG.token(), hex.to_ascii_lowercase()))
}

/// Where the body named `digest` is kept, relative to the Destination's own folder (under a
/// directory's `.resourcesync`, a bucket's `PREFIX.resourcesync/`):
/// `versions/sha256/AB/HEX`. Refused unless `digest` is `sha-256:` and 64 hexadecimal digits
/// (any case; the name is in lower case): nothing a Source sends can name another file.
pub fn version_name(digest: &str) -> Result<String> {
    let refuse = || Error::UnsafePath {
        path: digest.chars().take(80).collect(),
        reason: "not a sha-256 digest (`sha-256:` and 64 hexadecimal digits): no version body is named so",
    };
    let hex = digest
        .strip_prefix("sha-256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(refuse)?
        .to_ascii_lowercase();
    Ok(format!("{VERSIONS_DIR}/sha256/{}/{hex}", &hex[..2]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_name_is_a_sha256_in_lower_case() {
        let hex = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
        assert_eq!(
            version_name(&format!("sha-256:{hex}")).expect("name"),
            format!("versions/sha256/ba/{}", hex.to_ascii_lowercase())
        );
        for bad in [
            "",
            "sha-256:",
            "md5:900150983cd24fb0d6963f7d28e17f72",
            "sha-256:../../../../etc/passwd",
            &format!("sha-256:{}/", &hex[..63]),
            &format!("sha-256:{hex}0"),
        ] {
            assert!(version_name(bad).is_err(), "{bad:?}");
        }
    }
}
