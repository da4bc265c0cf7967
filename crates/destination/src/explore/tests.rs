//! Unit tests of `explore`.

use resourcesync_model::{Capability, Header};

use super::scan::{Follow, follow};
use super::walk::kind_of;

#[test]
fn kinds_from_capabilities() {
    assert_eq!(kind_of(&Capability::ChangeList), "Change List");
    assert_eq!(
        kind_of(&Capability::ResourceDumpManifest),
        "Resource Dump Manifest"
    );
}

#[test]
fn what_is_followed() {
    let h = Header::new(
        resourcesync_model::Root::SitemapIndex,
        resourcesync_model::Metadata::with_capability(Capability::ChangeList),
    );
    assert_eq!(
        follow(&h),
        Follow::Documents {
            via: "part",
            expected: Some(Capability::ChangeList),
            bounded: true
        }
    );
    let h = Header::new(
        resourcesync_model::Root::UrlSet,
        resourcesync_model::Metadata::with_capability(Capability::ResourceList),
    );
    assert_eq!(follow(&h), Follow::Nothing);
}
