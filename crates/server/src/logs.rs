//! The process's recent log lines, for the web UI's server page: a writer for
//! `tracing_subscriber` that passes every line to standard error and keeps the last
//! [`LINES_KEPT`] (colour codes removed) in memory.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io::Write;

/// Log lines kept for the server page.
pub const LINES_KEPT: usize = 200;
/// A kept line is cut at this many bytes.
const MAX_LINE_BYTES: usize = 2048;

static RECENT: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());

/// The kept lines, oldest first.
pub fn recent() -> Vec<String> {
    RECENT.lock().iter().cloned().collect()
}

/// Keeps `text`'s lines (one event may span several).
pub fn keep(text: &[u8]) {
    let text = String::from_utf8_lossy(text);
    let mut recent = RECENT.lock();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if recent.len() == LINES_KEPT {
            recent.pop_front();
        }
        recent.push_back(plain(line));
    }
}

/// `line` without ANSI escape sequences, cut at [`MAX_LINE_BYTES`].
fn plain(line: &str) -> String {
    let mut out = strip_ansi(line);
    if out.len() > MAX_LINE_BYTES {
        let mut cut = MAX_LINE_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// `line` without terminal colour sequences (`ESC [ parameters letter`).
pub fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Makes [`Tee`] writers: `tracing_subscriber::fmt().with_writer(cellar_server::logs::Tee)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tee;

/// One event's output: to standard error, and kept.
#[derive(Debug, Default)]
pub struct TeeWriter {
    buf: Vec<u8>,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Tee {
    type Writer = TeeWriter;

    fn make_writer(&'a self) -> TeeWriter {
        TeeWriter::default()
    }
}

impl Write for TeeWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for TeeWriter {
    /// The event is whole: one write to standard error (lines of concurrent events do not
    /// interleave), then kept.
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let _ = std::io::stderr().lock().write_all(&self.buf);
        keep(&self.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_codes_are_removed_and_long_lines_cut() {
        assert_eq!(
            plain("\u{1b}[2m2026-11-27\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m started"),
            "2026-11-27  INFO started"
        );
        let long = "x".repeat(MAX_LINE_BYTES * 2);
        assert!(plain(&long).len() <= MAX_LINE_BYTES + '…'.len_utf8());
    }

    #[test]
    fn kept_lines_are_bounded_and_in_order() {
        for i in 0..LINES_KEPT + 10 {
            keep(format!("line {i}\n").as_bytes());
        }
        let lines = recent();
        assert_eq!(lines.len(), LINES_KEPT);
        assert_eq!(lines.last().map(String::as_str), Some("line 209"));
    }
}
