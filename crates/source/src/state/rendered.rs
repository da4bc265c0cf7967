//! The Resource List entries a scan serializes along with the rows it records (see
//! [`crate::scan::scan`]), for the publish that follows: spooled to an unnamed file beside the
//! state database (gone when closed, or at a crash), not kept in memory, so that a first
//! publish of any size holds a few blocks of them at a time.
//!
//! Each entry is written as its length (4 bytes, little-endian) and its text.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Buffer of the spool's reader and writer.
const BLOCK: usize = 256 * 1024;

/// The longest entry spooled (a Resource List entry is a few hundred bytes; one this long is
/// left to the publish, which serializes it from the state).
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Serialized Resource List entries, in path order, in a file.
#[derive(Debug)]
pub(crate) struct Rendered {
    file: BufWriter<File>,
    /// Where the file is made (for error messages).
    dir: PathBuf,
    lines: u64,
    bytes: u64,
}

impl Rendered {
    /// An empty spool in `dir`.
    pub(crate) fn new_in(dir: &Path) -> Result<Self> {
        let file = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
        Ok(Rendered {
            file: BufWriter::with_capacity(BLOCK, file),
            dir: dir.to_owned(),
            lines: 0,
            bytes: 0,
        })
    }

    /// Appends one entry (at most [`MAX_LINE`] bytes: `false`, nothing written, for a longer
    /// one).
    pub(crate) fn push(&mut self, line: &str) -> Result<bool> {
        let Ok(len) = u32::try_from(line.len()) else {
            return Ok(false);
        };
        if line.len() > MAX_LINE {
            return Ok(false);
        }
        self.file
            .write_all(&len.to_le_bytes())
            .and_then(|()| self.file.write_all(line.as_bytes()))
            .map_err(|e| Error::io(&self.dir, e))?;
        self.lines += 1;
        self.bytes += line.len() as u64;
        Ok(true)
    }

    /// Bytes of entries spooled.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Calls `f` with every entry in the order they were pushed.
    pub(crate) fn for_each_line(self, mut f: impl FnMut(&str) -> Result<()>) -> Result<()> {
        let dir = self.dir;
        let err = |e: io::Error| Error::io(&dir, e);
        let mut file = self.file.into_inner().map_err(|e| err(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(err)?;
        let mut r = BufReader::with_capacity(BLOCK, file);
        let mut buf = Vec::new();
        for _ in 0..self.lines {
            let mut len = [0u8; 4];
            r.read_exact(&mut len).map_err(err)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_LINE {
                return Err(err(io::Error::other("spooled entry longer than written")));
            }
            buf.clear();
            buf.resize(len, 0);
            r.read_exact(&mut buf).map_err(err)?;
            let line = std::str::from_utf8(&buf)
                .map_err(|_| err(io::Error::other("spooled entry is not UTF-8")))?;
            f(line)?;
        }
        if !r.fill_buf().map_err(err)?.is_empty() {
            return Err(err(io::Error::other("spool longer than its entries")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_back_in_order() {
        let dir = tempfile::tempdir().expect("dir");
        let mut r = Rendered::new_in(dir.path()).expect("spool");
        for l in ["<url>a</url>", "", "<url>é</url>\n"] {
            assert!(r.push(l).expect("push"));
        }
        assert!(!r.push(&"x".repeat(MAX_LINE + 1)).expect("push"));
        assert_eq!(r.bytes(), 26);
        let mut got = Vec::new();
        r.for_each_line(|l| {
            got.push(l.to_owned());
            Ok(())
        })
        .expect("read");
        assert_eq!(got, ["<url>a</url>", "", "<url>é</url>\n"]);
    }
}
