//! What a [`crate::Store`] offers beyond the operations every backend has: [`Features`], asked
//! for with [`crate::Store::features`] (rclone's `fs.Features` is the model: flags a caller
//! reads, and optional capabilities it calls where present and does without where absent).
//!
//! | feature | [`crate::FsStore`] | [`crate::MemStore`] | `S3Store` |
//! |---|---|---|---|
//! | [`Features::finish_blocks`] | off Linux (each file synced) | no | no |
//! | [`Features::crash_safe`] | yes | no | yes |
//! | [`Features::local`] | its directory | none | none |
//! | [`Features::interrupted`] | temporary files | none | stale multipart uploads |
//! | [`Features::hierarchy`] | yes (a directory tree) | none (flat keys) | none (flat keys) |
//! | [`Features::versions`] | hard links under `.resourcesync/versions` | shared bytes | server-side copies under `PREFIX.resourcesync/versions` |
//!
//! [`crate::conformance::store`] checks what each backend declares.

use std::fmt;
use std::path::Path;

use crate::error::Result;
use crate::path::RelPath;
use crate::versions::VersionBodies;

/// A store's hints and optional capabilities ([`crate::Store::features`]). The default is what
/// a caller may assume of a backend that declares nothing: finishing may block, no crash
/// safety, no local directory, nothing to clean, flat keys.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Features<'a> {
    /// Whether [`crate::Upload::finish`] may wait for the disk or the network (a directory
    /// off Linux syncs each file there): callers on an async runtime then call it on a
    /// blocking thread.
    pub finish_blocks: bool,
    /// Whether a put survives a crash of the process at any point with the old body or the new
    /// one at its key, never a part: checked by [`crate::conformance::crash`].
    pub crash_safe: bool,
    /// Whether every call answers from local storage (a file system, memory) in about the
    /// time of a file read, never waiting for a network: async code may then make it in
    /// place, and [`crate::OffWorker`] leaves such a store as it is.
    pub in_place: bool,
    /// The local directory the objects are files in, each at [`RelPath::under`] it (a
    /// directory store); `None` for a store whose objects are not local files.
    pub local: Option<&'a Path>,
    /// Removes what an interrupted run left behind; `None` for a store where an interrupted
    /// run leaves nothing (memory).
    pub interrupted: Option<&'a dyn Interrupted>,
    /// Keys that nest like a directory tree, where something at or above a key can block a put
    /// there; `None` for a store whose keys are flat names (a bucket holds `a` and `a/b` side
    /// by side).
    pub hierarchy: Option<&'a dyn Hierarchy>,
    /// Keeps the bodies of versions, content-addressed ([`crate::versions`]); `None` for a
    /// store that cannot (`sync --versions` then refuses it).
    pub versions: Option<&'a dyn VersionBodies>,
}

impl Default for Features<'_> {
    fn default() -> Self {
        Features {
            finish_blocks: true,
            crash_safe: false,
            in_place: false,
            local: None,
            interrupted: None,
            hierarchy: None,
            versions: None,
        }
    }
}

impl<'a> Features<'a> {
    /// What a backend that declares nothing offers (see [`Features`]).
    pub fn new() -> Self {
        Features::default()
    }

    /// With [`Features::finish_blocks`] set to `yes`.
    #[must_use]
    pub fn finish_blocks(mut self, yes: bool) -> Self {
        self.finish_blocks = yes;
        self
    }

    /// With [`Features::crash_safe`] set to `yes`.
    #[must_use]
    pub fn crash_safe(mut self, yes: bool) -> Self {
        self.crash_safe = yes;
        self
    }

    /// With [`Features::in_place`] set to `yes`.
    #[must_use]
    pub fn in_place(mut self, yes: bool) -> Self {
        self.in_place = yes;
        self
    }

    /// With [`Features::local`] set to `dir`.
    #[must_use]
    pub fn local(mut self, dir: &'a Path) -> Self {
        self.local = Some(dir);
        self
    }

    /// With [`Features::interrupted`] set to `c`.
    #[must_use]
    pub fn interrupted(mut self, c: &'a dyn Interrupted) -> Self {
        self.interrupted = Some(c);
        self
    }

    /// With [`Features::hierarchy`] set to `h`.
    #[must_use]
    pub fn hierarchy(mut self, h: &'a dyn Hierarchy) -> Self {
        self.hierarchy = Some(h);
        self
    }

    /// With [`Features::versions`] set to `v`.
    #[must_use]
    pub fn versions(mut self, v: &'a dyn VersionBodies) -> Self {
        self.versions = Some(v);
        self
    }

    /// Whether something the store keeps at or above `key` blocks a put there
    /// ([`Hierarchy::at`]); never for flat keys.
    pub fn blocked(&self, key: &RelPath) -> Result<bool> {
        Ok(self.at(key)? == Some(At::Blocked))
    }

    /// What is at `key` ([`Hierarchy::at`]); `None` for flat keys (ask
    /// [`crate::Store::head`]).
    pub fn at(&self, key: &RelPath) -> Result<Option<At>> {
        self.hierarchy.map(|h| h.at(key)).transpose()
    }

    /// Removes what an interrupted run left behind ([`Interrupted::clean_interrupted`]); how
    /// many. 0 for a store that offers no cleaning.
    pub fn clean_interrupted(&self) -> Result<u64> {
        self.interrupted.map_or(Ok(0), |c| c.clean_interrupted())
    }
}

impl fmt::Debug for Features<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Features")
            .field("finish_blocks", &self.finish_blocks)
            .field("crash_safe", &self.crash_safe)
            .field("in_place", &self.in_place)
            .field("local", &self.local)
            .field("interrupted", &self.interrupted.is_some())
            .field("hierarchy", &self.hierarchy.is_some())
            .field("versions", &self.versions.is_some())
            .finish()
    }
}

/// The capability of cleaning what an interrupted run left behind ([`Features::interrupted`]).
pub trait Interrupted: Send + Sync {
    /// Removes what an interrupted run left behind (bodies received but never placed); how
    /// many. Call it before a run, never while one writes through the store.
    fn clean_interrupted(&self) -> Result<u64>;
}

/// The capability of keys that nest like a directory tree ([`Features::hierarchy`]).
pub trait Hierarchy: Send + Sync {
    /// What the store keeps at `key`, in one look: whether a put there is blocked until
    /// something is removed (a directory at the key, or an object where one of the key's
    /// directories goes: a directory that held a file `a` cannot take `a/b`), and otherwise
    /// whether anything is there at all ([`At::Free`] spares a caller the
    /// [`crate::Store::head`] that would find nothing).
    fn at(&self, key: &RelPath) -> Result<At>;
}

/// What a store with a hierarchy keeps at a key ([`Hierarchy::at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum At {
    /// Nothing at the key, nor anything in a put's way.
    Free,
    /// Something at the key a put may replace (an object; [`crate::Store::head`] says more).
    Taken,
    /// Something in a put's way: a directory at the key, or an object where one of its
    /// directories goes.
    Blocked,
}
