//! The timing error bounds of serving evidence, as a table (Markdown and HTML).
//!
//! Owns which bounded statistics the report shows for each repetition that has serving
//! evidence (the headline latencies and throughput, plus whatever the validity gate held to
//! its tolerance) and their rendering: value, `±` error (the larger distance to either end
//! of the bound) and the bound itself. The bounds are the evidence's own
//! (`metric_rows[].bound`, see `qual_serve::metrics`); nothing is recomputed here.

use crate::collect::ReportSet;
use crate::md;
use crate::svg::esc;
use std::fmt::Write as _;

/// Statistics shown for every repetition (when present), before any gated extra.
const SHOWN: [&str; 7] = [
    "ttft_ms.p50",
    "ttft_ms.p99",
    "itl_ms.p50",
    "itl_ms.p99",
    "e2e_ms.p50",
    "tpot_ms.p50",
    "output_tokens_per_second",
];

/// Largest number of table rows rendered.
const MAX_ROWS: usize = 200;

/// One bounded statistic of one repetition.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundRow {
    /// `workload / variant / case rN`.
    pub scope: String,
    /// Statistic (metric row name).
    pub name: String,
    /// Reported value.
    pub value: f64,
    /// Lower end of the bound.
    pub lower: f64,
    /// Upper end (infinite: unbounded above).
    pub upper: f64,
    /// Whether the validity gate held it to the tolerance.
    pub gated: bool,
}

impl BoundRow {
    /// The most the value can be off the truth.
    pub fn error(&self) -> f64 {
        (self.value - self.lower)
            .max(self.upper - self.value)
            .max(0.0)
    }
}

/// Every shown bounded statistic of `set`, receipts in report order.
pub fn rows(set: &ReportSet) -> Vec<BoundRow> {
    let mut out = Vec::new();
    for r in &set.receipts {
        for c in &r.cases {
            for p in &c.repetitions {
                let Some(s) = &p.serve else { continue };
                let scope = format!("{} / {} / {} r{}", r.workload, r.variant, c.id, p.number);
                for (name, value, lower, upper) in &s.bounds {
                    let gated = s.gated.contains(name);
                    if gated || SHOWN.contains(&name.as_str()) {
                        out.push(BoundRow {
                            scope: scope.clone(),
                            name: name.clone(),
                            value: *value,
                            lower: *lower,
                            upper: *upper,
                            gated,
                        });
                    }
                }
            }
        }
    }
    out
}

fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "inf".into()
    }
}

/// The Markdown section (nothing without bounded evidence).
pub fn markdown(out: &mut String, set: &ReportSet) {
    let rows = rows(set);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "### Timing error bounds\n");
    let _ = writeln!(
        out,
        "Each value lies in its bound whatever the client's reads went through; a gated statistic makes its run invalid when its error exceeds the tolerance.\n"
    );
    let _ = writeln!(out, "| run | statistic | value | ± | bound | gated |");
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
    for r in rows.iter().take(MAX_ROWS) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | [{}, {}] | {} |",
            md(&r.scope),
            md(&r.name),
            num(r.value),
            num(r.error()),
            num(r.lower),
            num(r.upper),
            if r.gated { "yes" } else { "" }
        );
    }
    if rows.len() > MAX_ROWS {
        let _ = writeln!(out, "\n… and {} more rows.", rows.len() - MAX_ROWS);
    }
    let _ = writeln!(out);
}

/// The HTML section (nothing without bounded evidence).
pub fn html(o: &mut String, set: &ReportSet) {
    let rows = rows(set);
    if rows.is_empty() {
        return;
    }
    o.push_str("<h2 id=\"bounds\">Timing error bounds</h2>\n<p>Each value lies in its bound whatever the client's reads went through; a gated statistic makes its run invalid when its error exceeds the tolerance.</p>\n<div class=\"wrap\"><table class=\"stack\"><thead><tr><th scope=\"col\">run</th><th scope=\"col\">statistic</th><th scope=\"col\">value</th><th scope=\"col\">±</th><th scope=\"col\">bound</th><th scope=\"col\">gated</th></tr></thead><tbody>\n");
    for r in rows.iter().take(MAX_ROWS) {
        let _ = writeln!(
            o,
            "<tr><td data-label=\"run\">{}</td><td data-label=\"statistic\">{}</td><td data-label=\"value\" class=\"n\">{}</td><td data-label=\"±\" class=\"n\">{}</td><td data-label=\"bound\" class=\"n\">[{}, {}]</td><td data-label=\"gated\">{}</td></tr>",
            esc(&r.scope),
            esc(&r.name),
            num(r.value),
            num(r.error()),
            num(r.lower),
            num(r.upper),
            if r.gated { "yes" } else { "" }
        );
    }
    o.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The evidence's bounded rows reach the view with their bound; unbounded rows and
    /// rows without a value do not; a null upper end is unbounded.
    #[test]
    fn bounded_rows_are_read_from_the_evidence() {
        let v = qual_json::from_str(
            r#"{"metric_rows":[
                {"name":"ttft_ms.p50","value":20.1,"bound":{"lower":20.0,"upper":20.3}},
                {"name":"requests_failed","value":0},
                {"name":"itl_ms.p99","value":null,"bound":{"lower":1,"upper":2}},
                {"name":"decode_tokens_per_second.max","value":900,"bound":{"lower":800,"upper":null}}
            ],"metrics":{"validity":{"gated":["ttft_ms.p50"]}}}"#,
        )
        .unwrap();
        let sv = crate::collect::serve_view(&v);
        assert_eq!(sv.gated, vec!["ttft_ms.p50".to_string()]);
        assert_eq!(sv.bounds.len(), 2);
        assert_eq!(sv.bounds[0], ("ttft_ms.p50".to_string(), 20.1, 20.0, 20.3));
        assert!(sv.bounds[1].3.is_infinite());
        let row = BoundRow {
            scope: "w / v / c r1".into(),
            name: sv.bounds[0].0.clone(),
            value: sv.bounds[0].1,
            lower: sv.bounds[0].2,
            upper: sv.bounds[0].3,
            gated: true,
        };
        assert!((row.error() - 0.2).abs() < 1e-12);
        assert_eq!(num(f64::INFINITY), "inf");
    }
}
