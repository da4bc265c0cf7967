//! Download work shared between workers: the port through which a run hands its
//! fetches to other processes, and what one handed-out fetch carries.
//!
//! A run fetches its resources itself ([`crate::fetch`]'s executor) unless its [`Ports`]
//! carry a [`Downloads`]: then, once a run has more fetches than [`Downloads::threshold`], it
//! queues them ([`Downloads::queue`], each a [`SharedFetch`]) and waits until none is left
//! ([`Downloads::wait`]) before what follows the fetches (deletes after a baseline, the
//! cursor). Whoever takes them (any worker, this one included) runs them through
//! [`crate::SharedFetcher`]: the same download, verification and commit as a local fetch, the
//! copy in place before its row. Which state the queue lives in, and how workers find it, is
//! the port's business: the engine only knows this trait.
//!
//! [`Ports`]: crate::Ports

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

use resourcesync_model::{Change, Hashes, W3cDateTime};
use resourcesync_store::RelPath;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A future of the port, boxed so that the trait stays object safe.
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where a run's fetches go when they are worth sharing (see the module's documentation).
pub trait Downloads: Send + Sync + Debug {
    /// The fewest fetches in a run worth handing out; a run with fewer fetches them itself,
    /// as it would without the port.
    fn threshold(&self) -> usize;
    /// Queues fetches for the workers; a fetch of a resource already queued for the same
    /// Source is not queued again.
    fn queue(&self, fetches: Vec<SharedFetch>) -> PortFuture<'_, Result<()>>;
    /// Waits until no fetch of the Source `source` (its key) is left: each was done by some
    /// worker, its copy in place and its row recorded, or recorded as a pending change.
    fn wait(&self, source: &str) -> PortFuture<'_, Result<()>>;
    /// Whether the next page of fetches of the Source `source` (its key) is worth queueing
    /// now: asked before each page ([`crate::fetch`] queues [`PAGE`](crate::share::PAGE) at a
    /// time). `false` (no other worker to take any, or the pages queued before not taken yet:
    /// the queue's cost would buy nothing) and the run fetches that page itself, and asks
    /// again a page later. `on_the_way`: fetches this run queued whose insert was not done
    /// when the question was asked (the question does not wait for them; counted as waiting
    /// for a claim). By default `true`.
    fn share_now(&self, source: &str, on_the_way: u64) -> PortFuture<'_, bool> {
        let _ = (source, on_the_way);
        Box::pin(async { true })
    }
}

/// Fetches queued in one call once a run shares, and the fetches a run does itself between
/// two questions to [`Downloads::share_now`] when it said `false`.
pub const PAGE: usize = 1000;

/// One fetch handed out: everything a worker needs to do it without the run's lists. Its
/// payload ([`SharedFetch::to_payload`]) is JSON with the published values as text, as a
/// document has them (`path`, `hashes` as a `hash` attribute, `lastmod`, `change`), read back
/// checked: a path that is not a key of the store refuses the payload; digests and a `lastmod`
/// that do not parse are left out, as a run leaves them out of its lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedFetch {
    /// The Source's key (its Capability List URL): the `source` of the row and of a pending
    /// change.
    pub source: String,
    /// The resource (`<loc>`).
    pub uri: String,
    /// Its path in the store, as the run mapped it.
    #[serde(with = "text::path")]
    pub path: RelPath,
    /// The published length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// The published digests, as a `hash` attribute (Z39.99-2014 §7.2: `alg:hex …`).
    #[serde(
        default,
        with = "text::hashes",
        skip_serializing_if = "text::no_hashes"
    )]
    pub hashes: Hashes,
    /// The published `<lastmod>`.
    #[serde(
        default,
        with = "text::lastmod",
        skip_serializing_if = "Option::is_none"
    )]
    pub lastmod: Option<W3cDateTime>,
    /// The change's `datetime`, for a Change List entry (Z39.99-2014 §12.1): kept with the
    /// version of the body (`versions`).
    #[serde(
        default,
        with = "text::lastmod",
        skip_serializing_if = "Option::is_none"
    )]
    pub ctime: Option<W3cDateTime>,
    /// The change (`created`, `updated`), for a Change List entry (Z39.99-2014 §12.1).
    #[serde(
        default,
        with = "text::change",
        skip_serializing_if = "Option::is_none"
    )]
    pub change: Option<Change>,
    /// Mirrors (`duplicate` links, Z39.99-2014 §14.2) as (priority, href).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<(u32, String)>,
    /// From a Change List: skipped when the state proves the change applied.
    #[serde(default)]
    pub listed_change: bool,
    /// The diff found no row of it.
    #[serde(default)]
    pub new: bool,
    /// The copy in place is damaged: fetched whatever the state says.
    #[serde(default)]
    pub repair: bool,
    /// The largest body accepted.
    pub max_bytes: u64,
    /// The Source keeps versions (`--versions`): the body is kept as one when put in place
    /// (`docs/history.md`). Absent from the payloads of earlier releases: no versions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub versions: bool,
}

/// Most bytes of a payload read back ([`SharedFetch::from_payload`]): a queue row is hostile
/// input like any other.
pub const MAX_PAYLOAD: usize = 256 * 1024;

impl SharedFetch {
    /// The payload of a work item (JSON).
    pub fn to_payload(&self) -> String {
        // Plain strings, numbers and booleans: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A fetch from a work item's payload.
    pub fn from_payload(s: &str) -> Result<Self> {
        if s.len() > MAX_PAYLOAD {
            return Err(Error::Config(format!(
                "a shared fetch of {} bytes (at most {MAX_PAYLOAD})",
                s.len()
            )));
        }
        serde_json::from_str(s).map_err(|e| Error::Config(format!("a shared fetch: {e}")))
    }

    /// The key of its work item: the Source and the resource, so that a resource is never
    /// queued twice for one Source.
    pub fn key(&self) -> String {
        format!("{} {}", self.source, self.uri)
    }

    /// Its work item for the state's queue ([`resourcesync_store::WorkQueue::add_work`]).
    pub fn work_item(&self) -> resourcesync_store::WorkItem {
        resourcesync_store::WorkItem {
            key: self.key(),
            source: self.source.clone(),
            payload: self.to_payload(),
        }
    }
}

/// The text forms of the typed fields of a [`SharedFetch`] in its payload.
mod text {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::{Change, Hashes, RelPath, W3cDateTime};

    pub(super) mod path {
        use super::{Deserialize, Deserializer, RelPath, Serializer};

        pub(in super::super) fn serialize<S: Serializer>(
            p: &RelPath,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.serialize_str(p.as_str())
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<RelPath, D::Error> {
            let s = String::deserialize(d)?;
            RelPath::parse(&s).map_err(|e| {
                serde::de::Error::custom(format!("the path {s:?} is not a key of the store: {e}"))
            })
        }
    }

    pub(super) mod hashes {
        use super::{Deserialize, Deserializer, Hashes, Serializer};

        pub(in super::super) fn serialize<S: Serializer>(
            h: &Hashes,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            s.collect_str(h)
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Hashes, D::Error> {
            Ok(Hashes::parse(&String::deserialize(d)?).0)
        }
    }

    pub(super) mod lastmod {
        use super::{Deserialize, Deserializer, Serializer, W3cDateTime};

        pub(in super::super) fn serialize<S: Serializer>(
            t: &Option<W3cDateTime>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.collect_str(t),
                None => s.serialize_none(),
            }
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<W3cDateTime>, D::Error> {
            Ok(Option::<String>::deserialize(d)?.and_then(|t| W3cDateTime::parse(&t).ok()))
        }
    }

    pub(super) mod change {
        use super::{Change, Deserialize, Deserializer, Serializer};

        pub(in super::super) fn serialize<S: Serializer>(
            c: &Option<Change>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            match c {
                Some(c) => s.serialize_str(c.as_str()),
                None => s.serialize_none(),
            }
        }

        pub(in super::super) fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Change>, D::Error> {
            Ok(Option::<String>::deserialize(d)?.map(|c| Change::parse(&c)))
        }
    }

    /// Whether there is no digest (the field is left out).
    pub(super) fn no_hashes(h: &Hashes) -> bool {
        h.0.is_empty()
    }
}
