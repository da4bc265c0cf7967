//! The integration tests of this crate, in one test binary (linked once): each former
//! `tests/NAME.rs` is the module `NAME` here (`cargo test -p CRATE --test it NAME::`).

mod common;

mod corpus;
mod hostile;
mod iris;
mod proptest_roundtrip;
mod reader_reuse;
mod rules;
mod spec_examples;
