//! The `<lastmod>` a modification time is published and recorded with.

use jiff::Timestamp;
use resourcesync_model::W3cDateTime;

/// The `<lastmod>` of a modification time: UTC, at microsecond precision with the fraction
/// written only when there is one and trimmed of trailing zeros (`…:50Z`, `…:50.12Z`,
/// `…:50.123456Z`; W3C Datetime allows any number of fractional digits, Z39.99-2014 §7). Six
/// digits are what Python clients parse (its `datetime` keeps microseconds) and what change
/// datetimes are recorded at; a copy given this time is within 1 µs of the file.
pub fn lastmod_of(mtime_ns: i128) -> W3cDateTime {
    let us = i64::try_from(mtime_ns.div_euclid(1_000)).unwrap_or(0);
    W3cDateTime::from_timestamp(Timestamp::from_microsecond(us).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// The `<lastmod>` earlier versions recorded for a modification time: whole seconds. A state
/// row holding it is read as [`lastmod_of`] (the same time, with its fraction): a file
/// unchanged since is published with its fraction without being recorded as changed.
pub(crate) fn whole_second_lastmod_of(mtime_ns: i128) -> W3cDateTime {
    let secs = i64::try_from(mtime_ns.div_euclid(1_000_000_000)).unwrap_or(0);
    W3cDateTime::from_timestamp(Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH))
}
