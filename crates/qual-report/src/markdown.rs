//! A GitHub job summary (or PR comment): the headline, the verdict matrix, every failing case
//! with its reason, and the refused files — bounded so a large set stays well under GitHub's
//! 1 MiB summary limit (the matrix shows at most [`MAX_ROWS`] rows, the failures at most
//! [`MAX_FAILURES`]; the rest is counted, never silently dropped).
//!
//! Every text from a document is escaped: control characters as `\xNN` first, then each
//! character Markdown or a GFM table would read as markup (`\ ` * _ [ ] < > | ~ # ! &`) behind a
//! backslash, so a case detail cannot add a link, an image, HTML or a table cell.

use crate::collect::ReportSet;
use crate::matrix;
use std::fmt::Write as _;

/// Most matrix rows shown.
pub const MAX_ROWS: usize = 200;
/// Most failing cases shown.
pub const MAX_FAILURES: usize = 50;
/// Longest reason shown, in characters.
const MAX_REASON_CHARS: usize = 300;

pub use crate::md;

fn clip(s: &str, n: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() > n || first.len() < s.trim_end().len() {
        format!("{} …", first.chars().take(n).collect::<String>())
    } else {
        first.to_owned()
    }
}

/// Renders the Markdown summary.
pub fn render(set: &ReportSet) -> String {
    let mut out = String::new();
    let (n, passed, failed, hosts, commits) = matrix::counts(set);
    let _ = writeln!(out, "## kiln-qual report\n");
    let _ = writeln!(
        out,
        "{}: **{passed} passed**, **{failed} failed** — {}, {}{}{}.\n",
        crate::count(n, "receipt"),
        crate::count(hosts, "host"),
        crate::count(commits, "commit"),
        crate::bench::headline(&set.benches),
        if set.refused.is_empty() {
            String::new()
        } else {
            format!("; **{} files refused**", set.refused.len())
        }
    );
    let rows = matrix::rows(set);
    let _ = writeln!(out, "### Verdict matrix\n");
    if rows.is_empty() {
        let _ = writeln!(out, "No valid receipts.\n");
    } else {
        let _ = writeln!(
            out,
            "| workload | variant | backend | host | latest | commit | started (UTC) | history |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |");
        for row in rows.iter().take(MAX_ROWS) {
            let r = row.latest();
            let verdict = if r.passed() {
                "✅ passed".to_owned()
            } else {
                format!("❌ **{}**", md(&r.verdict))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {verdict} | `{}` | {} | {} passed, {} failed |",
                md(&r.workload),
                md(&r.variant),
                md(&r.backend),
                md(&r.host),
                md(crate::short_commit(&r.commit)),
                md(&r.started_at),
                row.passed(),
                row.failed()
            );
        }
        if rows.len() > MAX_ROWS {
            let _ = writeln!(out, "\n… and {} more rows.", rows.len() - MAX_ROWS);
        }
        let _ = writeln!(out);
    }
    let failures = matrix::failures(set);
    if !failures.is_empty() {
        let _ = writeln!(out, "### Failures\n");
        for f in failures.iter().take(MAX_FAILURES) {
            let r = f.receipt;
            let reps = if f.repetitions.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = f.repetitions.iter().map(|n| format!("r{n}")).collect();
                format!(" ({})", list.join(", "))
            };
            let _ = writeln!(
                out,
                "- **{}** {} case failed{reps} — {} / {} / {} on {}, commit `{}`, receipt {}: {}",
                md(f.case),
                if f.required { "required" } else { "optional" },
                md(&r.workload),
                md(&r.variant),
                md(&r.backend),
                md(&r.host),
                md(crate::short_commit(&r.commit)),
                md(&r.receipt_id),
                md(&clip(&f.reason, MAX_REASON_CHARS))
            );
        }
        if failures.len() > MAX_FAILURES {
            let _ = writeln!(
                out,
                "- … and {} more failing cases.",
                failures.len() - MAX_FAILURES
            );
        }
        let _ = writeln!(out);
    }
    crate::bounds::markdown(&mut out, set);
    crate::comparison::markdown(&mut out, &set.comparisons);
    crate::campaign::markdown(&mut out, &set.campaigns);
    crate::bench::markdown(&mut out, &set.benches);
    if !set.refused.is_empty() {
        let _ = writeln!(out, "### Refused files (not valid receipts)\n");
        for f in set.refused.iter().take(MAX_FAILURES) {
            let first = f.reasons.first().map(String::as_str).unwrap_or("");
            let more = f.reasons.len().saturating_sub(1);
            let _ = writeln!(
                out,
                "- {}: {}{}",
                md(&f.path.to_string_lossy()),
                md(&clip(first, MAX_REASON_CHARS)),
                if more > 0 {
                    format!(" (and {more} more)")
                } else {
                    String::new()
                }
            );
        }
        if set.refused.len() > MAX_FAILURES {
            let _ = writeln!(out, "- … and {} more.", set.refused.len() - MAX_FAILURES);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "_Each receipt establishes only its declared workload on the recorded source, backend, device, model, configuration and environment; it does not establish {}._",
        qual_receipt::render::NOT_ESTABLISHED.join("; ")
    );
    let software = set.software_device_receipts();
    if !software.is_empty() {
        let _ = writeln!(
            out,
            "\n_Receipts on a CPU implementation of Vulkan ({}) do not establish {}._",
            md(&software.join(", ")),
            qual_receipt::render::SOFTWARE_DEVICE_NOTE
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(md("a|b"), "a\\|b");
        assert_eq!(md("[x](http://e)"), "\\[x\\](http://e)");
        assert_eq!(md("<img src=x>"), "\\<img src=x\\>");
        assert_eq!(md("line\nbreak"), "line\\\\x0abreak");
    }
}
