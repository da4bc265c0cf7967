//! The integration tests of this crate, in one test binary (linked once): each former
//! `tests/NAME.rs` is the module `NAME` here (`cargo test -p CRATE --test it NAME::`).

mod common;
// What the dump tests share: ZIP packages, digests, warnings.
mod dump_support;
#[path = "common/hand.rs"]
mod hand;
mod live;
mod mirror;

mod agree;
mod attime;
mod catch_up_ahead;
mod checks;
mod collide;
mod commit_path;
mod concurrency;
mod dump;
mod dump_hostile;
mod explore;
mod faults;
mod filter;
mod foreign_dumps;
mod foreign_sources;
mod hostile;
mod iris;
mod ports;
mod push_reach;
mod remembered;
mod retention;
mod round_trips;
mod share;
mod sync;
mod versions;
mod watch;
