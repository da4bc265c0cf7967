//! The path of a record: its OAI identifier as one safe path segment (see
//! `docs/inventories.md`, "OAI-PMH").
//!
//! `records/<segment>.xml`, where `<segment>` is the identifier's UTF-8 bytes with every byte
//! outside RFC 3986 `pchar` without `%` (letters, digits, `-._~!$&'()*+,;=:@`) written `%XX`
//! (upper-case hex; `%` itself is `%25`, so the mapping is one-to-one), and a leading `.` as
//! `%2E` (no segment is `.`, `..` or hidden). The segment is plain ASCII: a Destination that
//! stores resources as files gets the same name on any file system. An identifier whose
//! segment would pass [`MAX_SEGMENT`] bytes, or an empty one, has no path: the record is
//! skipped with the reason.

use std::path::PathBuf;

use percent_encoding::utf8_percent_encode;

/// The longest segment (with its `.xml`): file systems take 255 bytes per name.
pub const MAX_SEGMENT: usize = 255;

/// The directory every record lives in.
pub const DIR: &str = "records";

/// The relative path of the record `identifier`, or why it has none.
pub fn record_path(identifier: &str) -> Result<PathBuf, String> {
    if identifier.is_empty() {
        return Err("an empty identifier has no path".into());
    }
    let mut seg: String =
        utf8_percent_encode(identifier, resourcesync_model::mapping::PATH_SEGMENT).collect();
    if seg.starts_with('.') {
        seg.replace_range(..1, "%2E");
    }
    seg.push_str(".xml");
    if seg.len() > MAX_SEGMENT {
        return Err(format!(
            "the identifier maps to a path segment of {} bytes, past the {MAX_SEGMENT} a file \
             name may have",
            seg.len()
        ));
    }
    Ok(PathBuf::from(format!("{DIR}/{seg}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_identifier_is_one_safe_segment() {
        let p = |id: &str| record_path(id).map(|p| p.to_string_lossy().into_owned());
        assert_eq!(
            p("oai:arXiv.org:1234.5678").as_deref(),
            Ok("records/oai:arXiv.org:1234.5678.xml")
        );
        assert_eq!(p("a/b").as_deref(), Ok("records/a%2Fb.xml"));
        assert_eq!(p("..").as_deref(), Ok("records/%2E..xml"));
        assert_eq!(p(".hidden").as_deref(), Ok("records/%2Ehidden.xml"));
        assert_eq!(p("50%").as_deref(), Ok("records/50%25.xml"));
        assert_eq!(p("a b?#\\").as_deref(), Ok("records/a%20b%3F%23%5C.xml"));
        assert_eq!(p("café").as_deref(), Ok("records/caf%C3%A9.xml"));
        // One-to-one: the escape character itself is escaped.
        assert_ne!(p("a%2Fb"), p("a/b"));
        assert!(p("").is_err());
        assert!(p(&"x".repeat(300)).is_err());
        assert!(p(&"é".repeat(60)).is_err(), "6 bytes each once encoded");
    }
}
