//! The integration tests of resourcesync-http, one binary.

mod client;
mod shared;
