//! The modification time of a copy: the Source's time for the resource, so that tools that
//! compare files by time (rsync, make, backups) and [`crate::sync`]'s own check of the copies
//! against the state see the Source's times rather than the time of the sync.
//!
//! The time is the resource's `<lastmod>` (Z39.99-2014 §7: "the time of last modification of
//! the resource"), else the `Last-Modified` of the response that brought it (RFC 9110 §8.8.2),
//! else none (the copy keeps the time it was written).

use std::time::SystemTime;

use resourcesync_model::W3cDateTime;

/// The time a copy gets (see the module docs).
pub(crate) fn copy_time(
    lastmod: Option<&W3cDateTime>,
    last_modified: Option<&str>,
) -> Option<SystemTime> {
    if let Some(l) = lastmod {
        return Some(SystemTime::from(l.timestamp()));
    }
    last_modified.and_then(|h| httpdate::parse_http_date(h).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn lastmod_first_then_last_modified() {
        let l = W3cDateTime::parse("2013-01-02T14:00:00Z").expect("datetime");
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(
            copy_time(Some(&l), Some(lm)),
            Some(UNIX_EPOCH + Duration::from_secs(1_357_135_200))
        );
        assert_eq!(
            copy_time(None, Some(lm)),
            Some(UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(copy_time(None, Some("yesterday")), None);
        assert_eq!(copy_time(None, None), None);
        // Fractions of a second are kept.
        let f = W3cDateTime::parse("2013-01-02T14:00:00.25Z").expect("datetime");
        assert_eq!(
            copy_time(Some(&f), None),
            Some(UNIX_EPOCH + Duration::from_millis(1_357_135_200_250))
        );
    }
}
