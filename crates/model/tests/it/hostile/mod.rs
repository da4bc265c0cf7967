//! Hostile input: every attack yields a clear [`Error`] (variant, rule, document name, line and
//! column), never a panic, and memory stays bounded however large the input. The shared
//! helpers are here; the attacks, by kind, in the submodules.
#![allow(clippy::unwrap_used)]

mod fuzz;
mod limits;
mod malformed;
mod streaming;

use std::io::{self, BufReader, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use crate::common::heavy;
use resourcesync_model::{
    DocumentReader, DocumentWriter, Entry, Error, Header, LimitKind, Position, ReadOptions,
};

const SM: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";
const RS: &str = "http://www.openarchives.org/rs/terms/";

fn urlset_open() -> String {
    format!("<urlset xmlns=\"{SM}\" xmlns:rs=\"{RS}\">")
}

/// Reads the header and every entry; returns the first error. Panics if the document reads.
fn read_err_with(input: impl Read + Send + 'static, opts: ReadOptions) -> Error {
    let mut r = match DocumentReader::open(input, opts) {
        Ok(r) => r,
        Err(e) => return e,
    };
    loop {
        match r.next_entry() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("document read without error"),
            Err(e) => {
                // After an error the reader stays finished.
                assert!(
                    matches!(r.next_entry(), Ok(None)),
                    "reader continues after {e}"
                );
                return e;
            }
        }
    }
}

fn read_err(name: &str, bytes: impl Into<Vec<u8>>) -> Error {
    read_err_with(io::Cursor::new(bytes.into()), ReadOptions::named(name))
}

/// Checks the message names the document and the position the error reports, and returns it.
fn check_message(err: &Error, name: &str) -> Position {
    let pos = err
        .position()
        .unwrap_or_else(|| panic!("no position in {err:?}"));
    assert!(pos.line >= 1 && pos.column >= 1, "position {pos} in {err}");
    let msg = err.to_string();
    let prefix = format!("{name}:{}:{}: error[{}]", pos.line, pos.column, err.rule());
    assert!(
        msg.starts_with(&prefix),
        "message {msg:?} does not start with {prefix:?}"
    );
    assert!(err.is_invalid_input());
    pos
}

fn assert_limit(err: &Error, name: &str, kind: LimitKind, max: u64) -> Position {
    match err {
        Error::Limit { limit, max: m, .. } => {
            assert_eq!(*limit, kind, "{err}");
            assert_eq!(*m, max, "{err}");
        }
        other => panic!("expected a {kind:?} limit, got {other:?}"),
    }
    assert_eq!(err.rule(), kind.rule());
    check_message(err, name)
}

fn assert_forbidden(err: &Error, name: &str) -> Position {
    assert!(
        matches!(err, Error::Forbidden { .. }),
        "expected Forbidden, got {err:?}"
    );
    assert_eq!(err.rule(), "XML-no-dtd");
    check_message(err, name)
}

fn assert_malformed(err: &Error, name: &str) -> Position {
    assert!(
        matches!(err, Error::Malformed { .. }),
        "expected Malformed, got {err:?}"
    );
    assert_eq!(err.rule(), "XML-wellformed");
    check_message(err, name)
}

fn assert_not_sitemap(err: &Error, name: &str) -> Position {
    assert!(
        matches!(err, Error::NotSitemap { .. }),
        "expected NotSitemap, got {err:?}"
    );
    assert_eq!(err.rule(), "SM-root");
    check_message(err, name)
}

/// Peak resident set size of the process, in bytes (Linux; `None` elsewhere).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

// --- Input generators shared by the submodules ------------------------------------------

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(data).expect("write");
    gz.finish().expect("gzip")
}

/// A gzip file (RFC 1952) of `head`, `chunk` repeated `times` times, and `tail`: one member for
/// the head, the chunk's member repeated (compressed once, so a 100 MB bomb takes no time to
/// build in a debug build), and one for the tail. Readers must treat concatenated members as
/// one stream, as `gzip -d` does.
fn gzip_repeated(head: &[u8], chunk: &[u8], times: usize, tail: &[u8]) -> Vec<u8> {
    let member = gzip(chunk);
    let mut out = gzip(head);
    for _ in 0..times {
        out.extend_from_slice(&member);
    }
    out.extend_from_slice(&gzip(tail));
    out
}

/// Produces `head`, then `n` entries made by `entry`, then `tail`, on the fly.
struct Generated<F: FnMut(u64, &mut Vec<u8>)> {
    head: Vec<u8>,
    tail: Vec<u8>,
    n: u64,
    next: u64,
    entry: F,
    buf: Vec<u8>,
    at: usize,
    stage: u8,
    produced: u64,
}

impl<F: FnMut(u64, &mut Vec<u8>)> Generated<F> {
    fn new(head: impl Into<Vec<u8>>, n: u64, tail: impl Into<Vec<u8>>, entry: F) -> Self {
        Generated {
            head: head.into(),
            tail: tail.into(),
            n,
            next: 0,
            entry,
            buf: Vec::with_capacity(64 * 1024),
            at: 0,
            stage: 0,
            produced: 0,
        }
    }

    fn refill(&mut self) {
        self.buf.clear();
        self.at = 0;
        match self.stage {
            0 => {
                self.buf.extend_from_slice(&self.head);
                self.stage = 1;
            }
            1 => {
                while self.next < self.n && self.buf.len() < 60 * 1024 {
                    (self.entry)(self.next, &mut self.buf);
                    self.next += 1;
                }
                if self.next == self.n {
                    self.stage = 2;
                }
            }
            2 => {
                self.buf.extend_from_slice(&self.tail);
                self.stage = 3;
            }
            _ => {}
        }
    }
}

impl<F: FnMut(u64, &mut Vec<u8>)> Read for Generated<F> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.buf.len() {
            if self.stage == 3 {
                return Ok(0);
            }
            self.refill();
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        self.produced += n as u64;
        Ok(n)
    }
}
