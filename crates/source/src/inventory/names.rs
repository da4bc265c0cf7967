//! What an inventory may publish: one rule for every inventory (the directory, PostgreSQL, S3,
//! OAI-PMH, in memory, and any other), applied to every listing and change feed a scan reads
//! ([`publishable`]), so that no Resource List names a resource a Destination cannot fetch.
//!
//! A resource's path must be one `serve` answers with that resource (Z39.99-2014 §6.3: the
//! Source's own documents live at URLs of their own):
//!
//! - not empty (the base URL itself is the Source's page), not absolute, with no empty, `.` or
//!   `..` segment, no backslash and no NUL (a request path holding one is refused, 400: see
//!   [`crate::uri::decode_path`]), no segment longer than [`MAX_SEGMENT`] bytes;
//! - not inside one of the [`RESERVED_FOLDERS`]: `resourcesync/` (the documents, the hub, the
//!   notification topics) and `.resourcesync/` (the state folder, never served);
//! - not one of the [`RESERVED_NAMES`]: `healthz`, `robots.txt` (answered by the server at the
//!   root of the host) and `.well-known/resourcesync` (the Source Description, §6.3.2).
//!
//! The server routes exactly these names itself (`serve/respond.rs` uses the same constants).
//! A resource left out by the rule is a [`Skipped`] naming the path and the rule, reported
//! like any other (a warning), never dropped silently.

use std::path::Path;

use crate::inventory::own::{DOCS_DIR, STATE_DIR};
use crate::inventory::{Changed, Listed, Listing, Skipped, path_bytes};

/// The server's health check, at the root of the host.
pub const HEALTHZ: &str = "healthz";
/// The `robots.txt` the server makes (a `Sitemap:` line, Z39.99-2014 §6.3.4).
pub const ROBOTS: &str = "robots.txt";
/// The Source Description's well-known path (Z39.99-2014 §6.3.2).
pub const SOURCE_DESCRIPTION: &str = ".well-known/resourcesync";
/// Paths the server answers itself, never with a resource.
pub const RESERVED_NAMES: [&str; 3] = [HEALTHZ, ROBOTS, SOURCE_DESCRIPTION];
/// Folders whose every path the server answers itself (the documents) or never serves (the
/// state folder).
pub const RESERVED_FOLDERS: [&str; 2] = [DOCS_DIR, STATE_DIR];
/// The longest segment of a path a request may carry, in bytes.
pub const MAX_SEGMENT: usize = 255;

/// Why a relative path is not one an inventory may publish (see the module's documentation),
/// or `None` when it may.
pub fn unpublishable(rel: &Path) -> Option<String> {
    let b = path_bytes(rel);
    let shown = || String::from_utf8_lossy(&b).into_owned();
    let fix = "rename it in the inventory, or leave it out";
    if b.is_empty() {
        return Some("the path is empty: the base URL itself is the Source's page".into());
    }
    if b[0] == b'/' {
        return Some(format!("the path is absolute (starts with /); {fix}"));
    }
    if b.contains(&b'\\') || b.contains(&0) {
        return Some(format!(
            "the path holds a backslash or NUL, which no request may carry (the server answers \
             400); {fix}"
        ));
    }
    for seg in b.split(|&c| c == b'/') {
        match seg {
            b"" | b"." | b".." => {
                return Some(format!(
                    "the path has an empty, . or .. segment, which no request may carry; {fix}"
                ));
            }
            s if s.len() > MAX_SEGMENT => {
                return Some(format!(
                    "a segment of the path is longer than {MAX_SEGMENT} bytes, which no \
                     request may carry; {fix}"
                ));
            }
            _ => {}
        }
    }
    let first = b.split(|&c| c == b'/').next().unwrap_or_default();
    if let Some(d) = RESERVED_FOLDERS.iter().find(|d| first == d.as_bytes()) {
        return Some(format!(
            "{:?} is under {d}/, whose URLs are the Source's own (its documents, or its state, \
             never served); {fix}",
            shown()
        ));
    }
    if let Some(n) = RESERVED_NAMES.iter().find(|n| *b == *n.as_bytes()) {
        return Some(format!(
            "{n} is a URL the server answers itself, not with a resource; {fix}"
        ));
    }
    None
}

/// The item of a resource the rule leaves out.
fn left_out(rel: &Path, why: String) -> Skipped {
    Skipped {
        path: rel.to_owned(),
        reason: format!("not published: {why}"),
    }
}

/// A listing with every resource the rule leaves out turned into a [`Skipped`].
pub fn publishable(listing: Listing<'_>) -> Listing<'_> {
    Box::new(listing.map(|e| {
        let l: Listed = e?;
        match unpublishable(&l.rel) {
            None => Ok(l),
            Some(why) => Err(left_out(&l.rel, why)),
        }
    }))
}

/// A change feed's changes with every present resource the rule leaves out turned into a
/// [`Skipped`] (a deletion is kept: it removes what an earlier version may have recorded).
pub fn publishable_changes<'a>(
    changes: Box<dyn Iterator<Item = Result<Changed, Skipped>> + Send + 'a>,
) -> Box<dyn Iterator<Item = Result<Changed, Skipped>> + Send + 'a> {
    Box::new(changes.map(|e| match e? {
        Changed::Present(l) => match unpublishable(&l.rel) {
            None => Ok(Changed::Present(l)),
            Some(why) => Err(left_out(&l.rel, why)),
        },
        gone => Ok(gone),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn paths_the_server_answers_itself_or_refuses_are_not_published() {
        for p in [
            "resourcesync/capabilitylist.xml",
            "resourcesync/hub",
            "resourcesync",
            ".well-known/resourcesync",
            "healthz",
            "robots.txt",
            ".resourcesync/state.sqlite",
            ".resourcesync",
            "a\\..\\..\\b",
            "a\0b",
            "",
            "/etc/passwd",
            "a//b",
            "a/./b",
            "a/../b",
            "a/",
            &"x".repeat(256),
        ] {
            let why = unpublishable(Path::new(p));
            assert!(why.is_some(), "{p:?}");
            assert!(why.is_some_and(|w| w.len() > 20), "{p:?}: a reason");
        }
        for p in [
            "a.txt",
            "healthz/x",
            "sub/healthz",
            "sub/robots.txt",
            ".well-known/other",
            ".well-known/resourcesync/x",
            "resourcesync.xml",
            "sub/resourcesync/capabilitylist.xml",
            ".hidden",
            "..a/b.",
            &"x".repeat(255),
        ] {
            assert_eq!(unpublishable(Path::new(p)), None, "{p:?}");
        }
        // Every reserved name and folder is refused, and the reason names the name.
        for n in RESERVED_NAMES
            .iter()
            .map(|n| n.to_string())
            .chain(RESERVED_FOLDERS.iter().map(|d| format!("{d}/x")))
        {
            let why = unpublishable(Path::new(&n)).expect("reserved");
            let head = n.split('/').next().unwrap_or_default();
            assert!(why.contains(head), "{n}: {why}");
        }
    }

    #[test]
    fn a_listing_through_the_rule_reports_what_it_leaves_out() {
        let items: Vec<Result<Listed, Skipped>> = ["a", "healthz", "z"]
            .into_iter()
            .map(|p| Ok(Listed::new(PathBuf::from(p), 1, 0)))
            .collect();
        let out: Vec<_> = publishable(Box::new(items.into_iter())).collect();
        assert!(out[0].is_ok() && out[2].is_ok());
        let s = out[1].as_ref().expect_err("left out");
        assert_eq!(s.path, Path::new("healthz"));
        assert!(s.reason.contains("not published") && s.reason.contains("healthz"));
        assert!(!s.is_listing_broken());
    }
}
