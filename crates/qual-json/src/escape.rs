//! Showing untrusted text on a terminal: the one escaping rule every printer uses.
//!
//! Text that came from a document, a process or a path (case `details`, server log tails, key
//! names, ids, paths, error messages that embed them) may hold control characters that a
//! terminal would act on: a newline or CR that starts a fake line (`OK <path>`, `verdict:
//! passed`), ESC sequences (CSI `\x1b[2K` erases a line, OSC 8 writes links), C1 controls
//! (U+009B is a one-character CSI), DEL, and bidirectional overrides that reorder what is
//! shown. [`escape_text`] shows each of them as an escape and leaves everything else as is:
//!
//! - C0 controls (U+0000–U+001F, including tab, newline and CR), DEL (U+007F) and C1 controls
//!   (U+0080–U+009F) as `\xNN` (two lowercase hex digits): `\x1b`, `\x0a`, `\x7f`, `\x9b`;
//! - bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E,
//!   U+2066–U+2069) and the line/paragraph separators U+2028/U+2029 as `\u{XXXX}`;
//! - bytes of a path that are not UTF-8 as `\xNN` ([`escape_path`]).
//!
//! Backslashes are not doubled, so a regex such as `\d+` reads as written; machine output
//! (`--json`) carries the exact strings instead.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

/// Whether a character is shown escaped.
pub fn needs_escape(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, c: char) {
    let n = c as u32;
    if n <= 0xff {
        let _ = write!(out, "\\x{n:02x}");
    } else {
        let _ = write!(out, "\\u{{{n:04x}}}");
    }
}

/// `text` with every terminal control shown escaped (borrowed when nothing needs escaping).
pub fn escape_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A path for display: exact where it is UTF-8 without controls, escaped otherwise
/// (invalid UTF-8 bytes as `\xNN`, never replaced by U+FFFD).
pub fn escape_path(path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&escape_text(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Serialized JSON made safe for a terminal without changing its meaning: DEL, C1 controls
/// and the characters above, which JSON allows raw inside strings, become `\uXXXX` escapes
/// (C0 controls are already escaped by every JSON writer).
pub fn escape_json_text(json: &str) -> Cow<'_, str> {
    if !json.chars().any(needs_escape_in_json) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if needs_escape_in_json(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape_in_json(c: char) -> bool {
    // Newlines and spaces between tokens are the writer's own; controls inside strings are
    // already `\n`/`\u001b` there.
    needs_escape(c) && !matches!(c, '\n' | '\r' | '\t' | '\u{0}'..='\u{1f}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn controls_are_escaped_and_text_is_kept() {
        assert_eq!(escape_text("plain \\d+ é"), "plain \\d+ é");
        assert_eq!(
            escape_text("a\nOK x\r\x1b[2K\u{7f}\u{9b}31m"),
            "a\\x0aOK x\\x0d\\x1b[2K\\x7f\\x9b31m"
        );
        assert_eq!(
            escape_text("\x1b]8;;http://x\x07link\x1b]8;;\x07"),
            "\\x1b]8;;http://x\\x07link\\x1b]8;;\\x07"
        );
        assert_eq!(escape_text("a\u{202e}b\u{2028}"), "a\\u{202e}b\\u{2028}");
        assert!(matches!(escape_text("ok"), Cow::Borrowed(_)));
    }

    #[test]
    fn paths_keep_invalid_bytes_exactly() {
        let p = Path::new(std::ffi::OsStr::from_bytes(b"dir/\xff\xfe\n.json"));
        assert_eq!(escape_path(p), "dir/\\xff\\xfe\\x0a.json");
    }

    #[test]
    fn json_text_escapes_c1_and_del_only() {
        let s = serde_json::to_string(&"a\u{9b}b\u{7f}\n").unwrap();
        let e = escape_json_text(&s);
        assert_eq!(e, "\"a\\u009bb\\u007f\\n\"");
        let back: String = serde_json::from_str(&e).unwrap();
        assert_eq!(back, "a\u{9b}b\u{7f}\n");
    }
}
