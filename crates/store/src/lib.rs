//! A ResourceSync Destination's storage: its copies of resources and what it knows about them.
//!
//! - [`path`]: [`RelPath`], the only way to name a file under the destination directory; every
//!   segment is checked (no `..`, no absolute path, no NUL or backslash, at most 255 bytes).
//! - [`fs`]: the [`Store`] trait and [`FsStore`]: files are written to a temporary file inside
//!   `DEST/.resourcesync/tmp` (same file system), verified against the published length and
//!   every published digest, synced, renamed into place, and synced again; one file at a time
//!   ([`Store::commit`]) or a batch at a time ([`Store::verify`], [`Store::sync`],
//!   [`Store::place`]). A file at its final path is therefore never partial or wrong.
//! - [`state`]: the [`StateStore`] trait and [`SqliteState`]: per resource its URI, path,
//!   length, digests, lastmod, ETag and Last-Modified; per Source its cursor; changes to retry.
//!   Rows are written only after the file they describe is in place.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod conformance;
pub mod error;
pub mod fs;
pub mod mem;
pub mod object;
pub mod path;
pub mod state;

pub use error::{Error, Result};
pub use fs::{DirCache, DirHandles, FileMeta, FsStore, TempFile, Verified, child_rel};
pub use mem::MemStore;
pub use object::{
    Committed, Expect, Finished, ObjectMeta, Placed, Store, Upload, UploadSink, foreign_upload,
};
pub use path::{RelPath, STATE_DIR};
pub use state::{
    Batch, Claim, Lease, MemState, Op, PendingChange, ResourceRecord, SourceCursor, SqliteState,
    StateStore, WorkItem, for_each_resource,
};
