//! Planning: what a run has to do, before anything is fetched.
//!
//! - [`staging`]: the staging database on disk, where a listing (a Resource List, the changes
//!   of Change Lists, a dump's manifest) is kept in bounded memory before it is merged with the
//!   state.
//! - [`collapse`]: Change List entries after a cursor, several changes of one URI collapsed to
//!   the last (Z39.99-2014 §12.1, §12.2).
//! - [`current`]: whether a copy is current (the one rule, on the diff engine's
//!   `needs_update`).

pub(crate) mod collapse;
pub(crate) mod current;
pub(crate) mod staging;

pub(crate) use collapse::after;
