//! Text for people, made safe to print: what a Source, a client or a document controls (names,
//! URIs, messages that quote them) never reaches a terminal as a control character. A decoded
//! name such as `evil\x1b[2J\x1b[31mRED\x07.txt` would otherwise clear the screen and colour the
//! output, and `x\r\nfake line.txt` would print a line that is not ours.
//!
//! Every C0 control (U+0000 to U+001F, tab and line breaks included), DEL (U+007F) and every C1
//! control (U+0080 to U+009F) is written as an escape: `\t`, `\n`, `\r`, `\xNN` or `\u{NN}`.
//! `--json` output needs none of this: JSON escapes controls itself.

use std::borrow::Cow;
use std::fmt::Write as _;

use resourcesync_destination::Mode;

fn is_control(c: char) -> bool {
    c.is_control()
}

fn escape_into(out: &mut String, c: char) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// One value (a name, a URI, an error) on one line: every control escaped.
pub(crate) fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A message that may span lines: as [`printable`], but a line break followed by two spaces
/// (how the libraries' messages indent their continuation lines, e.g. the Capability Lists a
/// Source offers) is kept, so that no quoted value can start a line of its own at the margin.
pub(crate) fn printable_message(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, c) in s.char_indices() {
        if c == '\n' && s[i + 1..].starts_with("  ") {
            out.push('\n');
        } else if is_control(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A writer for log lines (`serve`, `hub`): each write is one formatted event ending in a line
/// break; every other control in it is escaped as [`printable`] does (the logging library
/// escapes ESC, BEL and C1 in fields itself, not carriage returns or line breaks). With colours
/// (`ansi`), ESC is left alone: the colours are the logging library's.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogWriter {
    /// Whether the events carry colours.
    pub(crate) ansi: bool,
}

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let s = String::from_utf8_lossy(buf);
        let (body, end) = match s.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (&s[..], ""),
        };
        let mut line = String::with_capacity(body.len() + 1);
        for c in body.chars() {
            if is_control(c) && !(self.ansi && c == '\u{1b}') {
                escape_into(&mut line, c);
            } else {
                line.push(c);
            }
        }
        line.push_str(end);
        // A closed standard error is not worth failing (or panicking) over.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

/// The name of a sync mode as printed for people.
pub(crate) fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Baseline => "baseline",
        Mode::Incremental => "incremental",
        Mode::BaselineDiff => "baseline diff",
        Mode::Notification => "notification",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped() {
        assert_eq!(printable("a b/c.txt"), "a b/c.txt");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        assert_eq!(
            printable("/evil\u{1b}[2J\u{1b}[31mRED\u{7}.txt"),
            "/evil\\x1b[2J\\x1b[31mRED\\x07.txt"
        );
        assert_eq!(printable("/x\r\nfake line.txt"), "/x\\r\\nfake line.txt");
        assert_eq!(printable("del\u{7f} c1\u{9b}2J"), "del\\x7f c1\\u{9b}2J");
        assert_eq!(printable("tab\tnul\0"), "tab\\tnul\\x00");
        // Not controls: printable text outside ASCII.
        assert_eq!(printable("café 東京"), "café 東京");
    }

    #[test]
    fn messages_keep_their_indented_lines_only() {
        assert_eq!(
            printable_message("choose one:\n  http://a/\n  http://b/"),
            "choose one:\n  http://a/\n  http://b/"
        );
        assert_eq!(
            printable_message("refused http://a/x\nfake: \u{1b}[2J"),
            "refused http://a/x\\nfake: \\x1b[2J"
        );
        assert_eq!(printable_message("a\r\n  b"), "a\\r\n  b");
    }
}
