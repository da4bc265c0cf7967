//! The integration tests of this crate, in one test binary (linked once): each former
//! `tests/NAME.rs` is the module `NAME` here (`cargo test -p CRATE --test it NAME::`).

mod conformance;
mod modes;
#[cfg(feature = "postgres")]
mod pg_bulk;
#[cfg(feature = "postgres")]
mod pg_state;
#[cfg(feature = "s3")]
mod s3_hostile;
#[cfg(feature = "s3")]
mod s3_store;
mod workers;
