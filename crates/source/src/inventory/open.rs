//! Opening an inventory from what a user writes after `--inventory`: one arm per backend, by
//! the scheme of the specification. A new backend adds its arm here and its section in
//! `docs/inventories.md`.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::inventory::Inventory;

/// The inventories `--inventory` takes, for messages.
pub const KNOWN: &str = "postgres://…, s3://…, oai-pmh:URL";

/// Opens the inventory `spec` names (`postgres://USER@HOST:PORT/DB?table=T`,
/// `s3://KEY:SECRET@HOST:PORT/BUCKET/PREFIX?region=R`, `oai-pmh:URL`; see
/// `docs/inventories.md`). `work` is the Source's working
/// directory (made already), where a backend may keep what it needs on disk (an index of a
/// remote listing). A directory is not opened here: a Source over a directory is
/// [`crate::Source::open`].
#[cfg_attr(not(feature = "oai-pmh"), allow(unused_variables))]
pub fn open(spec: &str, work: &Path) -> Result<Arc<dyn Inventory>> {
    let scheme = spec
        .split_once(':')
        .map_or("", |(s, _)| s)
        .to_ascii_lowercase();
    // One arm per backend (postgres, s3, oai-pmh), each behind its crate feature.
    let mut opened: Option<Arc<dyn Inventory>> = None;
    #[cfg(feature = "postgres")]
    if matches!(scheme.as_str(), "postgres" | "postgresql") {
        opened = Some(Arc::new(crate::inventory::PgInventory::connect(spec)?));
    }
    #[cfg(feature = "s3")]
    if scheme == crate::inventory::s3::SCHEME {
        opened = Some(Arc::new(crate::inventory::S3Inventory::from_spec(spec)?));
    }
    #[cfg(feature = "oai-pmh")]
    if scheme == crate::inventory::oai::SCHEME {
        opened = Some(Arc::new(crate::inventory::oai::OaiInventory::from_spec(
            spec, work,
        )?));
    }
    opened.ok_or_else(|| {
        Error::Config(format!(
            "--inventory {spec:?}: {scheme:?} is not an inventory this build knows (it takes \
             {KNOWN})"
        ))
    })
}
