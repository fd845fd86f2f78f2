//! Plain-text tables: the one renderer of the workspace's aligned text tables (the CLI's
//! listings and summaries, a receipt comparison's metric table).
//!
//! A header line, then one line per row; every column left-aligned and padded to its widest
//! cell (in characters) with two spaces between columns; no line ends in whitespace. Cells
//! are written as given: callers escape untrusted text first (see [`crate::escape`]).

/// Renders `header` and `rows` as a text table. A row may have fewer cells than the header,
/// never more.
pub fn render<R, S>(header: &[&str], rows: &[R]) -> String
where
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    render_indented("", header, rows)
}

/// [`render`] with every line starting with `indent` (a table inside a listing).
pub fn render_indented<R, S>(indent: &str, header: &[&str], rows: &[R]) -> String
where
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row.as_ref()) {
            *w = (*w).max(cell.as_ref().chars().count());
        }
    }
    let mut out = String::new();
    push_line(&mut out, indent, &widths, header);
    for row in rows {
        push_line(&mut out, indent, &widths, row.as_ref());
    }
    out
}

/// One line: `indent`, then every cell but the last padded to its column's width, two spaces
/// apart.
fn push_line<S: AsRef<str>>(out: &mut String, indent: &str, widths: &[usize], cells: &[S]) {
    let start = out.len();
    out.push_str(indent);
    for (i, c) in cells.iter().enumerate() {
        let c = c.as_ref();
        out.push_str(c);
        if i + 1 < cells.len() {
            let pad = widths[i].saturating_sub(c.chars().count()) + 2;
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    let end = out[start..].trim_end().len() + start;
    out.truncate(end);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn columns_align_and_lines_end_without_spaces() {
        let rows = vec![
            vec!["a".to_string(), "long cell".into(), "x".into()],
            vec!["bbb".to_string(), "".into(), "".into()],
            vec!["é".to_string()],
        ];
        assert_eq!(
            render(&["H1", "H2", "H3"], &rows),
            "H1   H2         H3\na    long cell  x\nbbb\né\n"
        );
        assert_eq!(
            super::render_indented("  ", &["a", "b"], &[["xy", "z"]]),
            "  a   b\n  xy  z\n"
        );
    }
}
