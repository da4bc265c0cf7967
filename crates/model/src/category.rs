//! What a caller can do about an error: the same three answers for every crate of the project,
//! so that every loop (a sync's jobs, a hub's deliveries, a publisher's files) decides by the
//! error's category instead of by its message.

use std::io;

/// What a caller can do about an error. Every crate's error type answers it with a
/// `category()` method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Trying the same thing again later may succeed: a network failure, a timeout, an HTTP 5xx,
    /// 429 or 503 (with its `Retry-After`), a body cut off.
    Retry,
    /// This one item is wrong (a resource, a document, a request): report it, go on with the
    /// others, and end the run with exit status 1.
    Skip,
    /// Nothing more can be done in this run: the configuration is wrong, the disk is full or
    /// read-only, the state is corrupt or held by another process.
    Stop,
}

impl Category {
    /// The category of an I/O error by its kind: full, read-only or forbidden storage and
    /// exhausted memory stop a run; interruptions, timeouts and broken connections may pass;
    /// anything else concerns the one item being read or written.
    pub fn of_io(e: &io::Error) -> Category {
        use io::ErrorKind as K;
        match e.kind() {
            K::StorageFull | K::ReadOnlyFilesystem | K::PermissionDenied | K::OutOfMemory => {
                Category::Stop
            }
            K::Interrupted
            | K::TimedOut
            | K::WouldBlock
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::ConnectionRefused
            | K::BrokenPipe
            | K::UnexpectedEof => Category::Retry,
            _ => Category::Skip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_fall_in_the_category_a_caller_acts_on() {
        let of = |k| Category::of_io(&io::Error::from(k));
        assert_eq!(of(io::ErrorKind::StorageFull), Category::Stop);
        assert_eq!(of(io::ErrorKind::PermissionDenied), Category::Stop);
        assert_eq!(of(io::ErrorKind::TimedOut), Category::Retry);
        assert_eq!(of(io::ErrorKind::UnexpectedEof), Category::Retry);
        assert_eq!(of(io::ErrorKind::NotFound), Category::Skip);
        assert_eq!(of(io::ErrorKind::InvalidData), Category::Skip);
    }
}
