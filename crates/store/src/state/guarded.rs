//! [`Guarded`]: the records of a state whose batches a [`BatchGuard`] changes before they are
//! applied: the one place the reads of a wrapper are passed through, so that a wrapper
//! ([`crate::Fenced`], [`crate::Claimed`]) is only its guard, the one thing it changes.

use std::fmt::Debug;
use std::sync::Arc;

use crate::error::Result;
use crate::path::RelPath;
use crate::state::{
    Batch, KnownDocument, PendingChange, Records, ResourceRecord, SourceCursor, VersionRecord,
};

/// How a wrapper writes a batch to the records underneath (adding a fence, completing claims).
pub trait BatchGuard: Send + Sync + Debug {
    /// Applies `batch`, changed as the guard says, to `inner`.
    fn apply(&self, inner: &dyn Records, batch: &Batch<'_>) -> Result<()>;
}

/// Records read as `inner`'s, each batch written through `guard`.
#[derive(Debug)]
pub struct Guarded<G> {
    inner: Arc<dyn Records>,
    guard: G,
}

impl<G> Guarded<G> {
    /// `inner`, its batches written through `guard`.
    pub fn with(inner: Arc<dyn Records>, guard: G) -> Self {
        Guarded { inner, guard }
    }

    /// The records underneath.
    pub fn inner(&self) -> &Arc<dyn Records> {
        &self.inner
    }

    /// The guard.
    pub fn guard(&self) -> &G {
        &self.guard
    }
}

impl<G: BatchGuard> Records for Guarded<G> {
    fn in_place(&self) -> bool {
        self.inner.in_place()
    }

    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>> {
        self.inner.resource(uri)
    }

    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        self.inner.resources_page(source, after, limit)
    }

    fn gone_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        self.inner.gone_page(source, after, limit)
    }

    fn has_path(&self, path: &RelPath) -> Result<bool> {
        self.inner.has_path(path)
    }

    fn has_paths(&self, paths: &[&RelPath]) -> Result<Vec<bool>> {
        self.inner.has_paths(paths)
    }

    fn path_owner(&self, path: &RelPath) -> Result<Option<String>> {
        self.inner.path_owner(path)
    }

    fn path_owners(&self, paths: &[&RelPath]) -> Result<Vec<Option<String>>> {
        self.inner.path_owners(paths)
    }

    fn count_resources(&self, source: &str) -> Result<u64> {
        self.inner.count_resources(source)
    }

    fn bytes_recorded(&self, source: &str) -> Result<u64> {
        self.inner.bytes_recorded(source)
    }

    fn recorded_totals(&self) -> Result<(u64, u64)> {
        self.inner.recorded_totals()
    }

    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>> {
        self.inner.cursor(source)
    }

    fn documents(&self, start: &str) -> Result<Vec<KnownDocument>> {
        self.inner.documents(start)
    }

    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>> {
        self.inner.pending_page(source, after, limit)
    }

    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        self.inner.versions_page(source, after, limit)
    }

    fn versions_of(
        &self,
        source: &str,
        uri: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        self.inner.versions_of(source, uri, after, limit)
    }

    fn digest_referenced(&self, digest: &str) -> Result<bool> {
        self.inner.digest_referenced(digest)
    }

    fn apply(&self, batch: &Batch<'_>) -> Result<()> {
        self.guard.apply(&*self.inner, batch)
    }
}
