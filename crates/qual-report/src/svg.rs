//! Small inline SVG charts (no library, no script): line charts with markers, used for metric
//! trends, latency CDFs, throughput against concurrency and a request timeline.
//!
//! Every chart is `role="img"` with a `<title>` and a `<desc>` (the accessible name and a text
//! summary of what it shows), scales with its container (`viewBox`, no fixed width), and draws
//! its data as `<path>` elements only. Series are told apart by colour *and* dash pattern, so
//! the chart reads without colour too.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 48.0;

/// Series styles: (stroke colour, dash array).
const STYLES: [(&str, &str); 4] = [
    ("#1f77b4", ""),
    ("#d62728", "6 3"),
    ("#2ca02c", "2 3"),
    ("#9467bd", "8 3 2 3"),
];

/// One line.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points in data coordinates.
    pub points: Vec<(f64, f64)>,
    /// Draw markers at the points.
    pub markers: bool,
    /// Points drawn as failed (a red cross over the marker), by index.
    pub failed: Vec<usize>,
}

/// A chart.
#[derive(Clone, Debug, Default)]
pub struct Chart {
    /// Title (accessible name).
    pub title: String,
    /// Description (accessible text alternative).
    pub desc: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Category labels for integer x positions (trend charts), instead of numeric ticks.
    pub x_categories: Vec<String>,
    /// Draw lines as steps (CDFs).
    pub step: bool,
    /// A horizontal band `(low, high)` (e.g. a tolerance) drawn behind the data.
    pub band: Option<(f64, f64)>,
}

/// Text escaped for XML/HTML (controls as `\xNN` first).
pub fn esc(s: &str) -> String {
    crate::junit::xml(s)
}

fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(raw);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < f64::EPSILON * hi.abs().max(1.0) {
        let pad = if hi == 0.0 { 1.0 } else { hi.abs() * 0.1 };
        return (lo - pad, hi + pad);
    }
    (lo, hi)
}

/// Renders the chart as an inline `<svg>` element.
pub fn render(c: &Chart, id: &str) -> String {
    let (x0, x1) = if c.x_categories.is_empty() {
        range(c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)))
    } else {
        (-0.5, c.x_categories.len() as f64 - 0.5)
    };
    let band_vals = c.band.into_iter().flat_map(|(a, b)| [a, b]);
    let (mut y0, y1) = range(
        c.series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(band_vals),
    );
    if y0 > 0.0 && y0 < (y1 - y0) {
        y0 = 0.0;
    }
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + ph - (y - y0) / (y1 - y0) * ph;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-labelledby=\"{id}-t {id}-d\" xmlns=\"http://www.w3.org/2000/svg\"><title id=\"{id}-t\">{}</title><desc id=\"{id}-d\">{}</desc>",
        esc(&c.title),
        esc(&c.desc)
    );
    if let Some((lo, hi)) = c.band {
        let _ = write!(
            o,
            "<path class=\"band\" d=\"M{:.1} {:.1}H{:.1}V{:.1}H{:.1}Z\"/>",
            LEFT,
            sy(hi),
            LEFT + pw,
            sy(lo),
            LEFT
        );
    }
    // Axes and grid.
    let _ = write!(
        o,
        "<path class=\"axis\" d=\"M{LEFT} {TOP}V{:.1}H{:.1}\"/>",
        TOP + ph,
        LEFT + pw
    );
    for t in ticks(y0, y1, 4) {
        let y = sy(t);
        let _ = write!(
            o,
            "<path class=\"grid\" d=\"M{LEFT} {y:.1}H{:.1}\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 4.0,
            y + 4.0,
            esc(&crate::num(t))
        );
    }
    if c.x_categories.is_empty() {
        for t in ticks(x0, x1, 6) {
            let x = sx(t);
            let _ = write!(
                o,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                TOP + ph + 16.0,
                esc(&crate::num(t))
            );
        }
    } else {
        let n = c.x_categories.len();
        let every = n.div_ceil(8).max(1);
        for (i, label) in c.x_categories.iter().enumerate() {
            if i % every == 0 || i + 1 == n {
                let _ = write!(
                    o,
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                    sx(i as f64),
                    TOP + ph + 16.0,
                    esc(label)
                );
            }
        }
    }
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        LEFT + pw / 2.0,
        H - 8.0,
        esc(&c.x_label),
        TOP + ph / 2.0,
        esc(&c.y_label)
    );
    for (i, s) in c.series.iter().enumerate() {
        let (stroke, dash) = STYLES[i % STYLES.len()];
        let mut d = String::new();
        for (k, &(x, y)) in s.points.iter().enumerate() {
            let (px, py) = (sx(x), sy(y));
            if k == 0 {
                let _ = write!(d, "M{px:.1} {py:.1}");
            } else if c.step {
                let _ = write!(d, "H{px:.1}V{py:.1}");
            } else {
                let _ = write!(d, "L{px:.1} {py:.1}");
            }
        }
        if !d.is_empty() {
            let dash_attr = if dash.is_empty() {
                String::new()
            } else {
                format!(" stroke-dasharray=\"{dash}\"")
            };
            let _ = write!(
                o,
                "<path class=\"line\" d=\"{d}\" stroke=\"{stroke}\"{dash_attr}><title>{}</title></path>",
                esc(&s.name)
            );
        }
        if s.markers {
            let mut m = String::new();
            let mut f = String::new();
            for (k, &(x, y)) in s.points.iter().enumerate() {
                let (px, py) = (sx(x), sy(y));
                let _ = write!(m, "M{:.1} {py:.1}a3 3 0 1 0 6 0a3 3 0 1 0 -6 0", px - 3.0);
                if s.failed.contains(&k) {
                    let _ = write!(f, "M{:.1} {:.1}l10 10m0 -10l-10 10", px - 5.0, py - 5.0);
                }
            }
            let _ = write!(o, "<path class=\"marker\" d=\"{m}\" fill=\"{stroke}\"/>");
            if !f.is_empty() {
                let _ = write!(o, "<path class=\"failmark\" d=\"{f}\"/>");
            }
        }
    }
    // Legend.
    if c.series.len() > 1 {
        let mut x = LEFT + 8.0;
        for (i, s) in c.series.iter().enumerate() {
            let (stroke, dash) = STYLES[i % STYLES.len()];
            let _ = write!(
                o,
                "<path class=\"line\" d=\"M{x:.1} {:.1}h18\" stroke=\"{stroke}\" stroke-dasharray=\"{dash}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                TOP + 6.0,
                x + 22.0,
                TOP + 10.0,
                esc(&s.name)
            );
            x += 40.0 + 7.0 * s.name.chars().count() as f64;
        }
    }
    o.push_str("</svg>");
    o
}

/// A per-request timeline of one run: one row per request (send order), a thin segment from
/// send to the first content event (waiting: queueing and prefill) and a thick one from the
/// first to the last content event (streaming); a failed request is a short red mark.
pub fn timeline(
    title: &str,
    desc: &str,
    rows: &[(f64, Option<f64>, Option<f64>)],
    id: &str,
) -> String {
    let end = rows
        .iter()
        .map(|r| r.2.unwrap_or(r.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let n = rows.len().max(1) as f64;
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let sx = |x: f64| LEFT + x / end * pw;
    let sy = |i: usize| TOP + (i as f64 + 0.5) / n * ph;
    let (mut wait, mut stream, mut failed) = (String::new(), String::new(), String::new());
    for (i, &(send, first, last)) in rows.iter().enumerate() {
        let y = sy(i);
        match (first, last) {
            (Some(f), Some(l)) => {
                let _ = write!(wait, "M{:.1} {y:.2}H{:.1}", sx(send), sx(f));
                let _ = write!(stream, "M{:.1} {y:.2}H{:.1}", sx(f), sx(l).max(sx(f) + 0.5));
            }
            _ => {
                let _ = write!(failed, "M{:.1} {y:.2}h4", sx(send));
            }
        }
    }
    let mut o = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-labelledby=\"{id}-t {id}-d\" xmlns=\"http://www.w3.org/2000/svg\"><title id=\"{id}-t\">{}</title><desc id=\"{id}-d\">{}</desc>",
        esc(title),
        esc(desc)
    );
    let _ = write!(
        o,
        "<path class=\"axis\" d=\"M{LEFT} {TOP}V{:.1}H{:.1}\"/>",
        TOP + ph,
        LEFT + pw
    );
    for t in ticks(0.0, end, 6) {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            sx(t),
            TOP + ph + 16.0,
            esc(&crate::num(t))
        );
    }
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">ms since the first send</text><text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">request (send order)</text>",
        LEFT + pw / 2.0,
        H - 8.0,
        TOP + ph / 2.0
    );
    let thin = (ph / n * 0.4).clamp(0.3, 2.0);
    let thick = (ph / n * 0.8).clamp(0.6, 6.0);
    if !wait.is_empty() {
        let _ = write!(o, "<path class=\"line\" d=\"{wait}\" stroke=\"#999999\" stroke-width=\"{thin:.2}\"><title>waiting (send to first content)</title></path>");
        let _ = write!(o, "<path class=\"line\" d=\"{stream}\" stroke=\"#1f77b4\" stroke-width=\"{thick:.2}\"><title>streaming (first to last content)</title></path>");
    }
    if !failed.is_empty() {
        let _ = write!(
            o,
            "<path class=\"failmark\" d=\"{failed}\"><title>failed request</title></path>"
        );
    }
    o.push_str("</svg>");
    o
}

/// Up to `max` points of a sorted sample as an empirical CDF (value, fraction ≤ value).
pub fn cdf(sorted: &[f64], max: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(max.max(1)).max(1);
    let mut out: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (sorted[i], (i + 1) as f64 / n as f64))
        .collect();
    if out.last().map(|p| p.1) != Some(1.0) {
        out.push((sorted[n - 1], 1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    }

    #[test]
    fn cdf_ends_at_one() {
        let xs: Vec<f64> = (0..1000).map(f64::from).collect();
        let c = cdf(&xs, 100);
        assert!(c.len() <= 101);
        assert_eq!(c.last(), Some(&(999.0, 1.0)));
    }

    #[test]
    fn chart_has_accessible_name_and_paths() {
        let c = Chart {
            title: "t<1>".into(),
            desc: "d".into(),
            series: vec![Series {
                name: "s".into(),
                points: vec![(0.0, 1.0), (1.0, 2.0)],
                markers: true,
                failed: vec![1],
            }],
            ..Chart::default()
        };
        let svg = render(&c, "c1");
        assert!(svg.contains("<title id=\"c1-t\">t&lt;1&gt;</title>"));
        assert!(svg.contains("class=\"line\" d=\"M"));
        assert!(svg.contains("failmark"));
    }
}
