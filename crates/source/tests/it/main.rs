//! The integration tests of this crate, in one test binary (linked once): each former
//! `tests/NAME.rs` is the module `NAME` here (`cargo test -p CRATE --test it NAME::`).

mod dump;
mod dump_reuse;
mod moves;
mod notify;
#[cfg(feature = "oai-pmh")]
mod oai_conformance;
#[cfg(feature = "oai-pmh")]
mod oai_hostile;
#[cfg(feature = "oai-pmh")]
mod oai_inventory;
#[cfg(feature = "oai-pmh")]
mod oai_second_provider;
mod own_files;
#[cfg(feature = "postgres")]
mod pg_inventory;
mod publish;
#[cfg(feature = "s3")]
mod s3_inventory;
mod scan_stream;
mod serve;
#[cfg(feature = "oai-pmh")]
mod serve_tls;
mod via;
