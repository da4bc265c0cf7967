//! The pure checks of a dump package: the ZIP entry name a manifest `path` names (Z39.99-2014
//! §11.2, §13.2), refused when it could leave the package ("ZIP slip").

use super::{MANIFEST_NAME, MAX_PATH_BYTES, MAX_SEGMENT_BYTES};

/// The ZIP entry name a manifest `path` names (Z39.99-2014 §11.2, §13.2: "relative to root of the
/// package and ... expressed with a leading slash"; a path without it, as `resync` 2.0.1 writes,
/// is read the same way), or why it is refused: an absolute path beyond the leading slash
/// (`//etc/x`), empty segments, `.` or `..` segments, backslashes, NUL or other control
/// characters, segments over [`MAX_SEGMENT_BYTES`], paths over [`MAX_PATH_BYTES`], or the
/// manifest itself.
pub fn entry_name(path: &str) -> std::result::Result<&str, &'static str> {
    if path.len() > MAX_PATH_BYTES {
        return Err("path longer than 4096 bytes");
    }
    let rest = path.strip_prefix('/').unwrap_or(path);
    if rest.starts_with('/') {
        return Err("absolute path after the leading slash");
    }
    if rest.is_empty() {
        return Err("names the package root, not a bitstream");
    }
    if rest.contains('\\') {
        return Err("backslash in the path");
    }
    if rest.contains('\0') {
        return Err("NUL in the path");
    }
    if rest.chars().any(char::is_control) {
        return Err("control character in the path");
    }
    for seg in rest.split('/') {
        if seg.is_empty() {
            return Err("empty path segment");
        }
        if seg == "." || seg == ".." {
            return Err("dot segment (. or ..) in the path");
        }
        if seg.len() > MAX_SEGMENT_BYTES {
            return Err("path segment longer than 255 bytes");
        }
    }
    if rest == MANIFEST_NAME {
        return Err("names the manifest itself");
    }
    Ok(rest)
}
