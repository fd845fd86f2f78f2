//! The `KILN_LATENCY_METRIC <metric> <value> <unit>` line grammar.
//!
//! The original applies `^\s*KILN_LATENCY_METRIC\s+(\S+)\s+([-+0-9.eE]+)\s+(\S+)\s*$` to each
//! line of the log read as text with `errors="replace"` and split with `str.splitlines()`.
//! Because `\S+` cannot cross whitespace, a line matches exactly when it splits on whitespace
//! into four tokens, the first being `KILN_LATENCY_METRIC` and the third made only of
//! `-+0123456789.eE`; this module implements that equivalent form without a regex engine.
//!
//! - Whitespace is Python's `str.isspace()` (Unicode White_Space plus U+001C..U+001F).
//! - Line breaks are those of `splitlines()`: `\n`, `\r`, `\r\n`, `\x0b`, `\x0c`, `\x1c`,
//!   `\x1d`, `\x1e`, `\x85`, U+2028, U+2029.
//! - Non-matching lines are ignored. Matching lines are errors when the name was already seen
//!   (declared or not), when the value is not a Python `float()` literal, or when it overflows
//!   to infinity. A log without any metric line is an error. The first error wins, in line
//!   order; line numbers are 1-based.

use crate::msg::quote;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The metric keyword.
pub const METRIC_KEYWORD: &str = "KILN_LATENCY_METRIC";

/// One parsed metric line.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// The value as Python's `float()` reads it (always finite).
    pub value: f64,
    /// The unit token.
    pub unit: String,
    /// 1-based line number.
    pub line: usize,
}

/// All metric lines of a log, by name.
pub type Observations = BTreeMap<String, Observation>;

/// Why a log's metric lines were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetricLogError {
    /// A metric name appeared twice.
    #[error("duplicate KILN_LATENCY_METRIC line for {} at line {line}", quote(.name))]
    Duplicate {
        /// Metric name.
        name: String,
        /// Line of the second occurrence.
        line: usize,
    },
    /// The value token is not a float literal (e.g. `1.2.3`, `-`, `e`).
    #[error("invalid numeric value for {} at line {line}: {}", quote(.name), quote(.raw))]
    InvalidNumber {
        /// Metric name.
        name: String,
        /// Line number.
        line: usize,
        /// The value token.
        raw: String,
    },
    /// The value overflows to infinity (e.g. `1e1000`).
    #[error("non-finite numeric value for {} at line {line}: {}", quote(.name), quote(.raw))]
    NonFinite {
        /// Metric name.
        name: String,
        /// Line number.
        line: usize,
        /// The value token.
        raw: String,
    },
    /// No metric line at all.
    #[error("no KILN_LATENCY_METRIC lines found in {path}")]
    NoMetricLines {
        /// The log path as shown.
        path: String,
    },
    /// The log could not be read.
    #[error("log is not readable: {message}")]
    Unreadable {
        /// The OS error text.
        message: String,
    },
}

/// Python `str.isspace()` for one character.
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{0b}'
            | '\u{0c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Python `str.splitlines()` (without keepends).
pub fn py_splitlines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if is_line_break(c) {
            lines.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(j, '\n')) = chars.peek() {
                    chars.next();
                    end = j + 1;
                }
            }
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Matches one line against the metric grammar: `(name, value token, unit)`.
pub fn match_metric_line(line: &str) -> Option<(&str, &str, &str)> {
    let mut tokens = line.split(py_isspace).filter(|t| !t.is_empty());
    let keyword = tokens.next()?;
    let name = tokens.next()?;
    let value = tokens.next()?;
    let unit = tokens.next()?;
    if tokens.next().is_some() || keyword != METRIC_KEYWORD {
        return None;
    }
    if !value
        .bytes()
        .all(|b| matches!(b, b'-' | b'+' | b'0'..=b'9' | b'.' | b'e' | b'E'))
    {
        return None;
    }
    Some((name, value, unit))
}

/// Python `float()` on a token made of `-+0-9.eE`: `None` where Python raises
/// `ValueError`. Rust's float grammar restricted to that alphabet is Python's
/// (`[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`); this function checks the
/// shape explicitly so that the equivalence does not rest on library details.
pub fn py_float(token: &str) -> Option<f64> {
    let b = token.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - s;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == s {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    token.parse::<f64>().ok()
}

/// Decodes log bytes the way Python's `read_text(errors="replace")` does (UTF-8, invalid
/// sequences replaced by U+FFFD).
pub fn decode_log(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The metric lines seen so far, fed one `splitlines()` line at a time (the first error wins).
#[derive(Default)]
struct Scanner {
    out: Observations,
    line_number: usize,
}

impl Scanner {
    /// Counts `n` lines that cannot be metric lines.
    fn skip(&mut self, n: usize) {
        self.line_number += n;
    }

    fn feed(&mut self, line: &str) -> Result<(), MetricLogError> {
        self.line_number += 1;
        let line_number = self.line_number;
        let Some((name, raw, unit)) = match_metric_line(line) else {
            return Ok(());
        };
        if self.out.contains_key(name) {
            return Err(MetricLogError::Duplicate {
                name: name.into(),
                line: line_number,
            });
        }
        let value = py_float(raw).ok_or_else(|| MetricLogError::InvalidNumber {
            name: name.into(),
            line: line_number,
            raw: raw.into(),
        })?;
        if !value.is_finite() {
            return Err(MetricLogError::NonFinite {
                name: name.into(),
                line: line_number,
                raw: raw.into(),
            });
        }
        self.out.insert(
            name.into(),
            Observation {
                value,
                unit: unit.into(),
                line: line_number,
            },
        );
        Ok(())
    }

    fn finish(self, shown_path: &str) -> Result<Observations, MetricLogError> {
        if self.out.is_empty() {
            return Err(MetricLogError::NoMetricLines {
                path: shown_path.into(),
            });
        }
        Ok(self.out)
    }
}

/// Parses the metric lines of a log's text. `shown_path` is used in the "no lines" error.
pub fn parse_metric_text(text: &str, shown_path: &str) -> Result<Observations, MetricLogError> {
    let mut scanner = Scanner::default();
    for line in py_splitlines(text) {
        scanner.feed(line)?;
    }
    scanner.finish(shown_path)
}

/// The longest stretch of a log between two `\n` bytes that is searched for metric lines
/// (1 MiB). A longer stretch is only counted for line numbers: a deliberate difference from
/// the original, which would also find a metric line inside it; it keeps a log of any size
/// within bounded memory.
pub const MAX_LOG_SEGMENT_BYTES: usize = 1 << 20;

/// Line breaks of `splitlines()` in a stretch of bytes without `\n`, as lossy UTF-8 decoding
/// would see them (`\xc2\x85`, `\xe2\x80\xa8` and `\xe2\x80\xa9` cannot be part of another
/// character, so a byte scan is exact). `tail` carries the last two bytes across calls.
fn count_breaks(bytes: &[u8], tail: &mut [u8; 2]) -> usize {
    let mut n = 0;
    for &b in bytes {
        n += match b {
            b'\r' | 0x0b | 0x0c | 0x1c..=0x1e => 1,
            0x85 if tail[1] == 0xc2 => 1,
            0xa8 | 0xa9 if *tail == [0xe2, 0x80] => 1,
            _ => 0,
        };
        *tail = [tail[1], b];
    }
    n
}

/// Feeds one `\n`-free stretch of the log; `terminated` when a `\n` ended it.
fn feed_segment(scanner: &mut Scanner, seg: &[u8], terminated: bool) -> Result<(), MetricLogError> {
    let text = decode_log(seg);
    let lines = py_splitlines(&text);
    for line in &lines {
        scanner.feed(line)?;
    }
    // `splitlines()` of the whole text: the `\n` ends one more (empty) line unless the
    // stretch is a non-empty line already ended by `\r` (`\r\n` is one break).
    let last = text.chars().next_back();
    let ended_by_break = last.is_some_and(is_line_break);
    if terminated && (text.is_empty() || (ended_by_break && last != Some('\r'))) {
        scanner.skip(1);
    }
    Ok(())
}

/// Reads and parses a log file as a stream: memory stays bounded by
/// [`MAX_LOG_SEGMENT_BYTES`] whatever the log's size. A FIFO or device is refused.
pub fn parse_metric_log(path: &Path) -> Result<Observations, MetricLogError> {
    use std::io::BufRead;
    let unreadable = |e: &dyn fmt::Display| MetricLogError::Unreadable {
        message: format!("{}: {e}", qual_json::escape_path(path)),
    };
    let file = qual_json::open_regular(path).map_err(|e| unreadable(&e))?;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut scanner = Scanner::default();
    let mut seg: Vec<u8> = Vec::new();
    // Set once the current stretch passed the limit: (breaks so far, carried bytes, last byte).
    let mut overflow: Option<(usize, [u8; 2], u8)> = None;
    loop {
        let buf = reader.fill_buf().map_err(|e| unreadable(&e))?;
        if buf.is_empty() {
            break;
        }
        let (chunk, newline) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], true),
            None => (buf, false),
        };
        let used = chunk.len() + usize::from(newline);
        // Past the limit, the stretch is only counted (see [`MAX_LOG_SEGMENT_BYTES`]).
        if overflow.is_none() && seg.len() + chunk.len() > MAX_LOG_SEGMENT_BYTES {
            let mut tail = [0u8; 2];
            let n = count_breaks(&seg, &mut tail);
            overflow = Some((n, tail, seg.last().copied().unwrap_or(0)));
            seg = Vec::new();
        }
        match &mut overflow {
            Some((n, tail, last)) => {
                *n += count_breaks(chunk, tail);
                if let Some(&b) = chunk.last() {
                    *last = b;
                }
            }
            None => seg.extend_from_slice(chunk),
        }
        reader.consume(used);
        if newline {
            match overflow.take() {
                Some((n, _, last)) => scanner.skip(n + 1 - usize::from(last == b'\r')),
                None => feed_segment(&mut scanner, &seg, true)?,
            }
            seg.clear();
        }
    }
    // A stretch past the limit at the end needs no counting: no line follows it.
    if overflow.is_none() && !seg.is_empty() {
        feed_segment(&mut scanner, &seg, false)?;
    }
    scanner.finish(&qual_json::escape_path(path))
}

impl fmt::Display for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", crate::msg::float(self.value), self.unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_parse_numbers_lines_like_splitlines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        let cases: [&[u8]; 7] = [
            b"a\r\n\nb\x0b\nKILN_LATENCY_METRIC m 1 ms\nKILN_LATENCY_METRIC m 2 ms\n",
            b"\r\r\n\x0c\n\xc2\x85x\xe2\x80\xa8\nKILN_LATENCY_METRIC m 1.5e ms",
            b"\xff\xfe\x1c\nKILN_LATENCY_METRIC a 1 ms\rKILN_LATENCY_METRIC a 2 ms",
            b"KILN_LATENCY_METRIC a 1 ms\n\n\n",
            b"\n\r\n\x1e\nKILN_LATENCY_METRIC b 3 us\x0b",
            b"no metric lines here\n",
            b"",
        ];
        for bytes in cases {
            std::fs::write(&p, bytes).unwrap();
            let shown = qual_json::escape_path(&p);
            assert_eq!(
                parse_metric_log(&p),
                parse_metric_text(&decode_log(bytes), &shown),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        // A stretch past the limit is counted, not searched, and later lines keep their number.
        let mut big = vec![b'x'; MAX_LOG_SEGMENT_BYTES + 10];
        big.extend_from_slice(b"\rKILN_LATENCY_METRIC a 1 ms\r\n");
        std::fs::write(&p, &big).unwrap();
        let e = parse_metric_log(&p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no KILN_LATENCY_METRIC lines found in ".to_owned() + &qual_json::escape_path(&p),
            "{e}"
        );
        big.extend_from_slice(b"x\x0bKILN_LATENCY_METRIC b 1 ms\nKILN_LATENCY_METRIC b 1 ms\n");
        std::fs::write(&p, &big).unwrap();
        assert_eq!(
            parse_metric_log(&p),
            Err(MetricLogError::Duplicate {
                name: "b".into(),
                line: 5
            })
        );
    }

    #[test]
    fn parses_and_ignores_non_matching_lines() {
        let text = "warmup\n  KILN_LATENCY_METRIC latency_ms 9.25 ms  \r\n\tKILN_LATENCY_METRIC\ttokens_per_s\t128.0\ttok/s\nKILN_LATENCY_METRIC a 1 ms extra\nKILN_LATENCY_METRIC b 1\nprefix KILN_LATENCY_METRIC c 1 ms\nKILN_LATENCY_METRIC d nan ms\nKILN_LATENCY_METRIC e inf ms\n";
        let obs = parse_metric_text(text, "x.log").unwrap();
        assert_eq!(obs.len(), 2);
        assert_eq!(obs["latency_ms"].value, 9.25);
        assert_eq!(obs["latency_ms"].unit, "ms");
        assert_eq!(obs["latency_ms"].line, 2);
        assert_eq!(obs["tokens_per_s"].value, 128.0);
        assert_eq!(obs["tokens_per_s"].unit, "tok/s");
    }

    #[test]
    fn errors_match_the_original() {
        let e = parse_metric_text(
            "KILN_LATENCY_METRIC a 1 ms\nKILN_LATENCY_METRIC a 2 ms\n",
            "x",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "duplicate KILN_LATENCY_METRIC line for \"a\" at line 2"
        );
        for bad in ["1.2.3", "-", "e", ".", "1e", "1e+", "+-1", "--1", ".e1"] {
            let e = parse_metric_text(&format!("KILN_LATENCY_METRIC m {bad} ms"), "x").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("invalid numeric value for \"m\" at line 1: \"{bad}\""),
                "{bad}"
            );
        }
        let e = parse_metric_text("KILN_LATENCY_METRIC latency_ms 1e1000 ms\n", "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "non-finite numeric value for \"latency_ms\" at line 1: \"1e1000\""
        );
        let e = parse_metric_text("fixture skipped: no hardware device\n", "/t/x.log").unwrap_err();
        assert_eq!(
            e.to_string(),
            "no KILN_LATENCY_METRIC lines found in /t/x.log"
        );
    }

    #[test]
    fn duplicate_is_checked_before_the_value() {
        // A value token outside the alphabet does not match, so it is no duplicate.
        let ok = parse_metric_text(
            "KILN_LATENCY_METRIC a 1 ms\nKILN_LATENCY_METRIC a x.x ms\n",
            "x",
        );
        assert_eq!(ok.unwrap()["a"].value, 1.0);
        let e = parse_metric_text(
            "KILN_LATENCY_METRIC a 1 ms\nKILN_LATENCY_METRIC a 1.2.3 ms\n",
            "x",
        )
        .unwrap_err();
        assert!(matches!(e, MetricLogError::Duplicate { line: 2, .. }));
    }

    #[test]
    fn python_float_literals() {
        for (t, v) in [
            ("1.", 1.0),
            (".5", 0.5),
            ("+1", 1.0),
            ("-1E2", -100.0),
            ("1e-400", 0.0),
            ("0.196980", 0.19698),
            ("1e+3", 1000.0),
        ] {
            assert_eq!(py_float(t), Some(v), "{t}");
        }
    }

    #[test]
    fn splitlines_like_python() {
        assert_eq!(
            py_splitlines("a\r\nb\rc\x0bd\u{2028}e\n"),
            ["a", "b", "c", "d", "e"]
        );
        assert_eq!(py_splitlines(""), Vec::<&str>::new());
        assert_eq!(py_splitlines("\n\n"), ["", ""]);
        assert_eq!(py_splitlines("x\x1cKILN"), ["x", "KILN"]);
    }

    #[test]
    fn unicode_whitespace_separates_tokens() {
        let obs = parse_metric_text("\u{a0}KILN_LATENCY_METRIC\u{3000}m\u{2003}1.5\u{1f}us", "x")
            .unwrap();
        assert_eq!(obs["m"].value, 1.5);
        assert_eq!(obs["m"].unit, "us");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let text = decode_log(b"\xff\xfe junk\nKILN_LATENCY_METRIC m 2 ms\n");
        assert_eq!(parse_metric_text(&text, "x").unwrap()["m"].value, 2.0);
    }
}
