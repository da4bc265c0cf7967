//! The reader's limits ([`ReadOptions`]) and the input that enforces the byte limits and
//! counts lines and columns (`Counting`).

use std::io::{self, BufRead, Read};

use crate::error::LimitKind;

/// Limits and naming for a [`DocumentReader`](super::DocumentReader).
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// The name of the document in messages (a path or URL).
    pub name: String,
    /// Largest document accepted, in bytes after decompression. Default 256 MiB: five times the
    /// Sitemap limit of 50 MB, so that oversized documents are still read and reported.
    pub max_document_bytes: u64,
    /// Largest tag (with its attributes) or text run, in bytes. Default 1 MiB.
    pub max_token_bytes: u64,
    /// Deepest element nesting. Default 32 (ResourceSync documents need 3).
    pub max_depth: usize,
    /// Most namespace bindings in scope. Default 64.
    pub max_namespace_bindings: usize,
    /// Most `<rs:ln>` plus extension elements in one entry or header. Default 1,024.
    pub max_children: usize,
    /// Most findings kept (the rest are counted). Default 1,000.
    pub max_findings: usize,
    /// Read a `<loc>` that is an IRI (spaces, non-ASCII letters) as its percent-encoded URI
    /// ([`crate::mapping::iri_to_uri`]), counted in
    /// [`DocumentReader::iris_read`](super::DocumentReader::iris_read): what a Destination
    /// does. Default `false`: the `<loc>` as written, for validation.
    pub iris_as_uris: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            name: "<input>".to_owned(),
            max_document_bytes: 256 * 1024 * 1024,
            max_token_bytes: 1024 * 1024,
            max_depth: 32,
            max_namespace_bindings: 64,
            max_children: 1024,
            max_findings: 1000,
            iris_as_uris: false,
        }
    }
}

impl ReadOptions {
    /// Default options for a named document.
    pub fn named(name: impl Into<String>) -> Self {
        ReadOptions {
            name: name.into(),
            ..ReadOptions::default()
        }
    }
}

/// Buffers the input and counts bytes, lines and columns of what the XML parser consumes,
/// enforcing the byte limits before anything is buffered beyond them. (Its own buffer, rather
/// than a `BufReader` underneath, so that newline counting sees exactly the consumed bytes.)
///
/// Newlines are found once per buffer fill (one vectorized pass) and counted up to the
/// consumed bytes only when a position is asked for ([`Counting::sync_lines`], once per
/// token), not on each of the parser's many small `consume`s.
#[derive(Debug)]
pub(super) struct Counting<R> {
    pub(super) inner: R,
    pub(super) buf: Box<[u8]>,
    pub(super) pos: usize,
    pub(super) filled: usize,
    pub(super) offset: u64,
    /// Line of the last consumed byte counted, and the offset its line starts at (both up to
    /// date after `sync_lines`).
    pub(super) line: u64,
    pub(super) line_start: u64,
    /// Where the newlines of the buffer are (indexes into `buf`), the next one not yet
    /// counted, and the document offset of `buf[0]`. At most one per byte of the buffer.
    pub(super) newlines: Vec<u32>,
    pub(super) next_newline: usize,
    pub(super) buf_start: u64,
    pub(super) token_start: u64,
    pub(super) max_doc: u64,
    pub(super) max_token: u64,
    pub(super) tripped: Option<LimitKind>,
}

impl<R> Counting<R> {
    /// Counts the newlines consumed since the last call: `line` and `line_start` then describe
    /// the current offset.
    #[inline]
    pub(super) fn sync_lines(&mut self) {
        while let Some(&i) = self.newlines.get(self.next_newline) {
            if i as usize >= self.pos {
                break;
            }
            self.line += 1;
            self.line_start = self.buf_start + u64::from(i) + 1;
            self.next_newline += 1;
        }
    }
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let buf = self.fill_buf()?;
            let n = buf.len().min(out.len());
            out[..n].copy_from_slice(&buf[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.pos == self.filled {
            // The newlines of the buffer given up are counted before it is refilled.
            self.sync_lines();
            self.newlines.clear();
            self.next_newline = 0;
            self.buf_start = self.offset;
            self.pos = 0;
            self.filled = 0;
            loop {
                match self.inner.read(&mut self.buf) {
                    Ok(n) => {
                        self.filled = n;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
            if self.filled == 0 {
                return Ok(&[]);
            }
            let filled = &self.buf[..self.filled];
            // Indexes fit: the buffer is far below 4 GiB.
            self.newlines
                .extend(memchr::memchr_iter(b'\n', filled).map(|i| i as u32));
        }
        let doc_left = self.max_doc.saturating_sub(self.offset);
        let token_left =
            (self.token_start.saturating_add(self.max_token)).saturating_sub(self.offset);
        let allowed = doc_left.min(token_left);
        if allowed == 0 {
            self.tripped = Some(if doc_left == 0 {
                LimitKind::DocumentBytes
            } else {
                LimitKind::TokenBytes
            });
            return Err(io::Error::other("resourcesync reader limit"));
        }
        let n = usize::try_from(allowed)
            .unwrap_or(usize::MAX)
            .min(self.filled - self.pos);
        Ok(&self.buf[self.pos..self.pos + n])
    }

    fn consume(&mut self, amt: usize) {
        let amt = amt.min(self.filled - self.pos);
        self.pos += amt;
        self.offset += amt as u64;
    }
}
