//! [`RelPath`]: a checked relative path under the destination directory, defined in
//! [`resourcesync_model::path`] (with the mapping from URIs to paths, sans I/O) and re-exported
//! here unchanged.

pub use resourcesync_model::path::{MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, RelPath};
