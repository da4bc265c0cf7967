//! One byte range of an object read with `GetObject` ([`super::Bucket::get_range`]): the
//! range asked for ([`ByteRange`], sent as the request's `Range`), and the reading of the
//! answer's `Content-Range`, checked as hostile input (a range that does not fit the object's
//! length is refused). What the answer comes to is [`super::bucket::Ranged`].

/// One byte range (RFC 9110 §14.1.2), as a client asks for it: resolved against the object's
/// length by the object store, as the `Range` of a `GetObject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// From byte `first` to byte `last` included, or to the end (`bytes=first-last`,
    /// `bytes=first-`).
    From {
        /// The first byte.
        first: u64,
        /// The last byte, if not the object's last.
        last: Option<u64>,
    },
    /// The last `n` bytes (`bytes=-n`; the whole object when it is shorter).
    Suffix(u64),
}

impl ByteRange {
    /// The `Range` header of a request for it.
    pub fn header(&self) -> String {
        match self {
            ByteRange::From {
                first,
                last: Some(l),
            } => format!("bytes={first}-{l}"),
            ByteRange::From { first, last: None } => format!("bytes={first}-"),
            ByteRange::Suffix(n) => format!("bytes=-{n}"),
        }
    }
}

/// The first byte, last byte and whole length of a `Content-Range: bytes FIRST-LAST/TOTAL`
/// (RFC 9110 §14.4), checked: `FIRST <= LAST < TOTAL`.
pub(crate) fn content_range(v: &str) -> Option<(u64, u64, u64)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    let (first, last, total) = (num(first)?, num(last)?, num(total)?);
    (first <= last && last < total).then_some((first, last, total))
}

/// The whole length of an unsatisfied range's `Content-Range: bytes */TOTAL`.
pub(crate) fn unsatisfied_length(v: &str) -> Option<u64> {
    num(v.trim().strip_prefix("bytes */")?)
}

/// Digits only (no sign, no space), at most a `u64`.
fn num(s: &str) -> Option<u64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_written_as_asked() {
        let h = |r: ByteRange| r.header();
        assert_eq!(
            h(ByteRange::From {
                first: 0,
                last: Some(9)
            }),
            "bytes=0-9"
        );
        assert_eq!(
            h(ByteRange::From {
                first: 5,
                last: None
            }),
            "bytes=5-"
        );
        assert_eq!(h(ByteRange::Suffix(3)), "bytes=-3");
    }

    #[test]
    fn content_ranges_are_checked() {
        assert_eq!(content_range("bytes 0-9/100"), Some((0, 9, 100)));
        assert_eq!(content_range("bytes 99-99/100"), Some((99, 99, 100)));
        for bad in [
            "bytes 9-0/100",
            "bytes 0-100/100",
            "bytes 0-9/*",
            "bytes -1-9/100",
            "bytes 0-9",
            "items 0-9/100",
            "bytes 0-99999999999999999999/100",
            "bytes +0-9/100",
        ] {
            assert_eq!(content_range(bad), None, "{bad}");
        }
        assert_eq!(unsatisfied_length("bytes */100"), Some(100));
        assert_eq!(unsatisfied_length("bytes 0-9/100"), None);
    }
}
