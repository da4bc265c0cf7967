//! The notification channels a Capability List advertises (Change Notification 1.0.1 §5,
//! Framework Notification 1.0.1 §5): what [`crate::notify`] sends on, named here so that
//! publishing does not depend on sending.

use crate::publish::layout::Layout;

/// The notification channels a Capability List advertises (Change Notification §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channels {
    /// The hub URL.
    pub hub: String,
    /// The Change Notification topic.
    pub change_topic: String,
    /// The Framework Notification topic.
    pub framework_topic: String,
}

impl Channels {
    /// The channels of a Source published at `layout`, through `hub`.
    pub fn of(layout: &Layout, hub: &str) -> Self {
        Channels {
            hub: hub.to_owned(),
            change_topic: layout.doc_url(CHANGE_TOPIC),
            framework_topic: layout.doc_url(FRAMEWORK_TOPIC),
        }
    }
}

/// The Change Notification topic's name under the documents folder.
pub const CHANGE_TOPIC: &str = "change-notification";
/// The Framework Notification topic's name under the documents folder.
pub const FRAMEWORK_TOPIC: &str = "framework-notification";
