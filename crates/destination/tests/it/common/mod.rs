//! The test kit's Source server (a published Source tree on 127.0.0.1:0, counting requests and
//! injecting faults), fault proxy and sync fixtures (publish and compare trees), as one module.
#![allow(unused_imports)]

pub(crate) use resourcesync_testkit::fault_proxy;
pub(crate) use resourcesync_testkit::server::{Fault, Server, Shared};
pub(crate) use resourcesync_testkit::sync::*;
