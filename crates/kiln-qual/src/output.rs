//! Printing helpers: machine output (`--json`) goes to stdout, human diagnostics to stderr.

use serde::Serialize;

/// Prints a value as pretty JSON with a trailing newline on stdout. A closed pipe (e.g.
/// `| head`) is not an error worth a panic: the output is simply cut.
pub fn print_json<T: Serialize>(value: &T) {
    use std::io::Write;
    let text = serde_json::to_string_pretty(value).expect("report serializes");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

/// Renders rows as a left-aligned text table with a header line.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{:<w$}  ", c, w = widths[i]));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}
