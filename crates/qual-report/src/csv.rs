//! One tidy row per metric observation, for pandas and spreadsheets (RFC 4180 quoting).
//!
//! Columns: `receipt_id, workload, variant, backend, host, commit, started_at_utc, case,
//! repetition, metric, value, unit, lower_is_better`. `repetition` is the repetition number
//! for a value from the retained run evidence (`case-result.json` of that execution) and
//! `aggregate` for the value the receipt records (aggregated over repetitions); both are
//! present when the evidence is. `value` is written exactly as the document has it.
//!
//! Text cells are control-escaped, and a text cell that a spreadsheet would read as a formula
//! (starting with `= + - @`, tab or carriage return) gets a leading `'`.

use crate::collect::{MetricObs, ReceiptView, ReportSet};

/// The header line.
pub const HEADER: &str = "receipt_id,workload,variant,backend,host,commit,started_at_utc,case,repetition,metric,value,unit,lower_is_better";

/// A text cell: control characters escaped, formulas defused, quoted when needed.
pub fn cell(s: &str) -> String {
    let plain = crate::plain(s);
    let mut v = plain.into_owned();
    if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        v.insert(0, '\'');
    }
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

fn row(out: &mut String, r: &ReceiptView, case: &str, rep: &str, m: &MetricObs) {
    let cells = [
        cell(&r.receipt_id),
        cell(&r.workload),
        cell(&r.variant),
        cell(&r.backend),
        cell(&r.host),
        cell(&r.commit),
        cell(&r.started_at),
        cell(case),
        rep.to_owned(),
        cell(&m.name),
        m.text.clone(),
        cell(&m.unit),
        m.lower_is_better.to_string(),
    ];
    out.push_str(&cells.join(","));
    out.push('\n');
}

/// Renders `metrics.csv`.
pub fn render(set: &ReportSet) -> String {
    let mut out = String::from(HEADER);
    out.push('\n');
    for r in &set.receipts {
        for c in &r.cases {
            for m in &c.metrics {
                row(&mut out, r, &c.id, "aggregate", m);
            }
            for p in &c.repetitions {
                let n = p.number.to_string();
                for m in &p.metrics {
                    row(&mut out, r, &c.id, &n, m);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_quoted_and_defused() {
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cell("=cmd()"), "'=cmd()");
    }
}
