//! [`OffWorker`]: the one adapter that applies the rule of [`crate::blocking`] to a port, so
//! that the engine's async code may call a port it holds like any method.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::SystemTime;

use resourcesync_model::{HashAlg, Hashes};

use crate::blocking::call;
use crate::error::Result;
use crate::features::Features;
use crate::object::{Expect, Finished, ObjectMeta, Placed, Store, Upload};
use crate::path::RelPath;
use crate::state::{
    Batch, KnownDocument, PendingChange, Records, ResourceRecord, SourceCursor, VersionRecord,
};

/// A port whose every method runs through [`call`]: off the async worker when called from
/// one, directly on a thread that may block (a nested [`call`] runs directly too). The
/// Destination gives its runs their `Store` and `Records` through it
/// ([`OffWorker::store`], [`OffWorker::records`]). A port that declares its calls in place
/// (`Features::in_place`, [`Records::in_place`]: a directory, SQLite, memory) is given as it
/// is: moving a call of the time of a file read off the worker costs more than the call.
#[derive(Debug)]
pub struct OffWorker<P: ?Sized>(Arc<P>);

impl OffWorker<dyn Store> {
    /// `store`, its methods called through [`call`]; `store` itself when its calls are made in
    /// place (`Features::in_place`).
    pub fn store(store: Arc<dyn Store>) -> Arc<dyn Store> {
        if store.features().in_place {
            return store;
        }
        Arc::new(OffWorker(store))
    }
}

impl OffWorker<dyn Records> {
    /// `records`, its methods called through [`call`]; `records` itself when its calls are
    /// made in place ([`Records::in_place`]).
    pub fn records(records: Arc<dyn Records>) -> Arc<dyn Records> {
        if records.in_place() {
            return records;
        }
        Arc::new(OffWorker(records))
    }
}

impl Store for OffWorker<dyn Store> {
    fn begin(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        call(|| self.0.begin(key, expect))
    }

    fn begin_new(&self, key: &RelPath, expect: Expect) -> Result<Upload> {
        call(|| self.0.begin_new(key, expect))
    }

    fn place(&self, batch: Vec<Finished>) -> Vec<Result<Placed>> {
        call(|| self.0.place(batch))
    }

    fn sync(&self) -> Result<()> {
        call(|| self.0.sync())
    }

    fn publish(&self, batch: Vec<Finished>) -> Result<Vec<Result<Placed>>> {
        call(|| self.0.publish(batch))
    }

    fn get(&self, key: &RelPath) -> Result<Box<dyn std::io::Read + Send>> {
        call(|| self.0.get(key))
    }

    fn head(&self, key: &RelPath) -> Result<Option<ObjectMeta>> {
        call(|| self.0.head(key))
    }

    fn delete(&self, key: &RelPath) -> Result<bool> {
        call(|| self.0.delete(key))
    }

    /// The callback is the caller's (not `Send`): on a multi-threaded runtime's worker the
    /// listing runs through `block_in_place`; elsewhere, where it is called.
    fn list(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<(RelPath, ObjectMeta)>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.0.list(after, f))
            }
            _ => self.0.list(after, f),
        }
    }

    /// As [`Store::list`] here: through `block_in_place` on a multi-threaded runtime's worker.
    fn list_keys(
        &self,
        after: Option<&RelPath>,
        f: &mut dyn FnMut(Result<RelPath>) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        match Handle::try_current() {
            Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| self.0.list_keys(after, f))
            }
            _ => self.0.list_keys(after, f),
        }
    }

    fn set_modified(&self, key: &RelPath, t: SystemTime) -> Result<bool> {
        call(|| self.0.set_modified(key, t))
    }

    fn hash(&self, key: &RelPath, algs: &[HashAlg]) -> Result<(u64, Hashes)> {
        call(|| self.0.hash(key, algs))
    }

    /// The store's own: its capabilities are the store's, not moved off the worker, so a
    /// caller of one follows the rule by the store's `in_place`.
    fn features(&self) -> Features<'_> {
        self.0.features()
    }
}

impl Records for OffWorker<dyn Records> {
    fn in_place(&self) -> bool {
        // Each call goes off the worker by itself.
        true
    }

    fn resource(&self, uri: &str) -> Result<Option<ResourceRecord>> {
        call(|| self.0.resource(uri))
    }

    fn resources_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        call(|| self.0.resources_page(source, after, limit))
    }

    fn gone_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ResourceRecord>> {
        call(|| self.0.gone_page(source, after, limit))
    }

    fn has_path(&self, path: &RelPath) -> Result<bool> {
        call(|| self.0.has_path(path))
    }

    fn has_paths(&self, paths: &[&RelPath]) -> Result<Vec<bool>> {
        call(|| self.0.has_paths(paths))
    }

    fn path_owner(&self, path: &RelPath) -> Result<Option<String>> {
        call(|| self.0.path_owner(path))
    }

    fn path_owners(&self, paths: &[&RelPath]) -> Result<Vec<Option<String>>> {
        call(|| self.0.path_owners(paths))
    }

    fn count_resources(&self, source: &str) -> Result<u64> {
        call(|| self.0.count_resources(source))
    }

    fn bytes_recorded(&self, source: &str) -> Result<u64> {
        call(|| self.0.bytes_recorded(source))
    }

    fn recorded_totals(&self) -> Result<(u64, u64)> {
        call(|| self.0.recorded_totals())
    }

    fn cursor(&self, source: &str) -> Result<Option<SourceCursor>> {
        call(|| self.0.cursor(source))
    }

    fn documents(&self, start: &str) -> Result<Vec<KnownDocument>> {
        call(|| self.0.documents(start))
    }

    fn pending_page(
        &self,
        source: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PendingChange>> {
        call(|| self.0.pending_page(source, after, limit))
    }

    fn versions_page(
        &self,
        source: &str,
        after: Option<(&str, u64)>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        call(|| self.0.versions_page(source, after, limit))
    }

    fn versions_of(
        &self,
        source: &str,
        uri: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<VersionRecord>> {
        call(|| self.0.versions_of(source, uri, after, limit))
    }

    fn digest_referenced(&self, digest: &str) -> Result<bool> {
        call(|| self.0.digest_referenced(digest))
    }

    fn apply(&self, batch: &Batch<'_>) -> Result<()> {
        call(|| self.0.apply(batch))
    }
}
