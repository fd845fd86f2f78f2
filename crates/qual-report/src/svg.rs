//! Small inline SVG charts (no library, no script): line charts with markers, used for metric
//! trends, latency CDFs, throughput against concurrency and a request timeline.
//!
//! Every chart is `role="img"` with a `<title>` and a `<desc>` (the accessible name and a text
//! summary of what it shows), scales with its container (`viewBox`, no fixed width), and draws
//! its data as `<path>` elements only. Series are told apart by colour *and* dash pattern, so
//! the chart reads without colour too; marked points by shape (a cross: a failed run; an open
//! diamond: a run the measurement-validity gate refused), named in the legend.
//!
//! Axes: a y axis never starts below zero when every value is ≥ 0 (a failure count of 0 gets
//! 0–1, not −1–1), and with [`Chart::y_from_zero`] it always includes zero, so a wobble of a
//! few thousandths of a value is drawn as the flat line it is. Legibility: the drawing is
//! [`W`] units wide and its text 12 units (15 on narrow screens, see the page's style), laid out
//! for the larger size, so at a 390 px phone (a ~350 px chart) text is ≥ 11 px and at 1280 px
//! about 15 px; category labels are thinned to [`MAX_CATEGORY_LABELS`].

use std::fmt::Write as _;

/// Drawing width in viewBox units.
pub const W: f64 = 440.0;
const H: f64 = 280.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 54.0;
/// The text size the layout is made for (the page's narrow-screen size), viewBox units.
const FONT: f64 = 15.0;
/// Most category (run) labels written under a trend chart.
pub const MAX_CATEGORY_LABELS: usize = 4;

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
    /// Points the measurement-validity gate refused (an open diamond instead of the marker),
    /// by index.
    pub refused: Vec<usize>,
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
    /// The y axis includes zero (trends: no auto-zoom into noise).
    pub y_from_zero: bool,
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
    let (y0, y1) = y_range(c, band_vals);
    let legend = legend_rows(c);
    let top = TOP + 18.0 * legend.len() as f64;
    let pw = W - LEFT - RIGHT;
    let ph = H - top - BOTTOM;
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| top + ph - (y - y0) / (y1 - y0) * ph;
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
        "<path class=\"axis\" d=\"M{LEFT} {top}V{:.1}H{:.1}\"/>",
        top + ph,
        LEFT + pw
    );
    for t in ticks(y0, y1, 4) {
        let y = sy(t);
        let _ = write!(
            o,
            "<path class=\"grid\" d=\"M{LEFT} {y:.1}H{:.1}\"/><text class=\"ytick\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LEFT + pw,
            LEFT - 4.0,
            y + 4.0,
            esc(&crate::num(t))
        );
    }
    if c.x_categories.is_empty() {
        for t in ticks(x0, x1, 5) {
            let x = sx(t);
            let _ = write!(
                o,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                top + ph + FONT + 2.0,
                esc(&crate::num(t))
            );
        }
    } else {
        for i in category_labels_shown(c.x_categories.len()) {
            let label = &c.x_categories[i];
            let (x, anchor) = label_anchor(sx(i as f64), label);
            let _ = write!(
                o,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
                top + ph + FONT + 2.0,
                esc(label)
            );
        }
    }
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text><text transform=\"translate({:.1} {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        LEFT + pw / 2.0,
        H - 8.0,
        esc(&c.x_label),
        FONT - 2.0,
        top + ph / 2.0,
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
            let (mut m, mut f, mut r) = (String::new(), String::new(), String::new());
            for (k, &(x, y)) in s.points.iter().enumerate() {
                let (px, py) = (sx(x), sy(y));
                if s.refused.contains(&k) {
                    let _ = write!(r, "{}", diamond(px, py));
                } else {
                    let _ = write!(m, "M{:.1} {py:.1}a3 3 0 1 0 6 0a3 3 0 1 0 -6 0", px - 3.0);
                }
                if s.failed.contains(&k) && !s.refused.contains(&k) {
                    let _ = write!(f, "{}", cross(px, py));
                }
            }
            let _ = write!(o, "<path class=\"marker\" d=\"{m}\" fill=\"{stroke}\"/>");
            if !f.is_empty() {
                let _ = write!(o, "<path class=\"failmark\" d=\"{f}\"/>");
            }
            if !r.is_empty() {
                let _ = write!(o, "<path class=\"refusedmark\" d=\"{r}\"/>");
            }
        }
    }
    draw_legend(&mut o, &legend);
    o.push_str("</svg>");
    o
}

/// The y range: the data's (and the band's), never below zero when nothing is negative, and
/// including zero when the chart asks for it.
fn y_range(c: &Chart, band: impl Iterator<Item = f64>) -> (f64, f64) {
    let vals: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(band)
        .filter(|v| v.is_finite())
        .collect();
    let (mut y0, mut y1) = range(vals.iter().copied());
    let nonnegative = vals.iter().all(|v| *v >= 0.0);
    if c.y_from_zero || (y0 > 0.0 && y0 < (y1 - y0)) {
        y0 = y0.min(0.0);
        y1 = y1.max(0.0);
    }
    if nonnegative {
        y0 = y0.max(0.0);
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    if c.y_from_zero && y0 == 0.0 {
        // Up to the next round tick, so the top of the axis is labelled.
        if let [.., a, b] = ticks(y0, y1 * 1.5, 4)[..] {
            let step = b - a;
            y1 = (y1 / step - 1e-9).ceil() * step;
        }
    }
    (y0, y1)
}

/// Where a label centred at `x` is written so that it stays inside the drawing: centred, or
/// flush with the edge it would cross.
fn label_anchor(x: f64, label: &str) -> (f64, &'static str) {
    let half = 0.28 * FONT * label.chars().count() as f64;
    if x + half > W - 2.0 {
        (W - 2.0, "end")
    } else if x - half < 2.0 {
        (2.0, "start")
    } else {
        (x, "middle")
    }
}

/// Which of `n` category labels are written: at most [`MAX_CATEGORY_LABELS`], evenly spread,
/// the last always.
fn category_labels_shown(n: usize) -> Vec<usize> {
    if n <= MAX_CATEGORY_LABELS {
        return (0..n).collect();
    }
    let mut v: Vec<usize> = (0..MAX_CATEGORY_LABELS)
        .map(|k| k * (n - 1) / (MAX_CATEGORY_LABELS - 1))
        .collect();
    v.dedup();
    v
}

fn cross(px: f64, py: f64) -> String {
    format!("M{:.1} {:.1}l10 10m0 -10l-10 10", px - 5.0, py - 5.0)
}

fn diamond(px: f64, py: f64) -> String {
    format!("M{px:.1} {:.1}l6 6l-6 6l-6 -6Z", py - 6.0)
}

/// One legend entry: what it shows and its label.
enum Key {
    Line(usize),
    Failed,
    Refused,
}

/// The legend's entries in rows that fit the width (text sized for [`FONT`]).
fn legend_rows(c: &Chart) -> Vec<Vec<(Key, String)>> {
    let mut keys: Vec<(Key, String)> = Vec::new();
    if c.series.len() > 1 {
        keys.extend(
            c.series
                .iter()
                .enumerate()
                .map(|(i, s)| (Key::Line(i), s.name.clone())),
        );
    }
    let marked = |f: fn(&Series) -> bool| c.series.iter().any(|s| s.markers && f(s));
    if marked(|s| s.failed.iter().any(|k| !s.refused.contains(k))) {
        keys.push((Key::Failed, "failed run".into()));
    }
    if marked(|s| !s.refused.is_empty()) {
        keys.push((Key::Refused, "refused by the validity gate".into()));
    }
    let mut rows: Vec<Vec<(Key, String)>> = Vec::new();
    let mut x = LEFT;
    for k in keys {
        let w = entry_width(&k.1);
        if rows.is_empty() || x + w > W - RIGHT {
            rows.push(Vec::new());
            x = LEFT;
        }
        x += w;
        rows.last_mut().expect("a row").push(k);
    }
    rows
}

fn entry_width(label: &str) -> f64 {
    30.0 + 0.56 * FONT * label.chars().count() as f64
}

fn draw_legend(o: &mut String, rows: &[Vec<(Key, String)>]) {
    for (r, row) in rows.iter().enumerate() {
        let y = TOP + 18.0 * r as f64;
        let mut x = LEFT;
        for (key, label) in row {
            let mark = match key {
                Key::Line(i) => {
                    let (stroke, dash) = STYLES[i % STYLES.len()];
                    format!("<path class=\"line\" d=\"M{x:.1} {:.1}h18\" stroke=\"{stroke}\" stroke-dasharray=\"{dash}\"/>", y - 4.0)
                }
                Key::Failed => format!(
                    "<path class=\"failmark\" d=\"{}\"/>",
                    cross(x + 9.0, y - 4.0)
                ),
                Key::Refused => format!(
                    "<path class=\"refusedmark\" d=\"{}\"/>",
                    diamond(x + 9.0, y - 4.0)
                ),
            };
            let _ = write!(
                o,
                "{mark}<text class=\"legend\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                x + 24.0,
                y + 1.0,
                esc(label)
            );
            x += entry_width(label);
        }
    }
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
    for t in ticks(0.0, end, 5) {
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            sx(t),
            TOP + ph + FONT + 2.0,
            esc(&crate::num(t))
        );
    }
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">ms since the first send</text><text transform=\"translate({:.1} {:.1}) rotate(-90)\" text-anchor=\"middle\">request (send order)</text>",
        LEFT + pw / 2.0,
        H - 8.0,
        FONT - 2.0,
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

    fn chart(values: &[f64]) -> Chart {
        Chart {
            series: vec![Series {
                name: "s".into(),
                points: values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64, *v))
                    .collect(),
                markers: true,
                ..Series::default()
            }],
            ..Chart::default()
        }
    }

    #[test]
    fn a_small_wobble_is_not_zoomed_into_when_the_axis_starts_at_zero() {
        let mut c = chart(&[10.000, 10.004, 10.001]);
        assert!(
            y_range(&c, std::iter::empty()).0 > 9.9,
            "auto range zooms in"
        );
        c.y_from_zero = true;
        let (y0, y1) = y_range(&c, std::iter::empty());
        assert_eq!(y0, 0.0);
        assert!(y1 >= 10.004);
        // The wobble spans under 0.1 % of the plot height.
        assert!(0.004 / (y1 - y0) < 0.001);
    }

    #[test]
    fn a_count_axis_never_starts_below_zero() {
        for values in [&[0.0, 0.0][..], &[0.0, 1.0, 0.0], &[3.0, 3.0]] {
            let (y0, y1) = y_range(&chart(values), std::iter::empty());
            assert!(y0 >= 0.0 && y1 > y0, "{values:?}: {y0}..{y1}");
            assert!(ticks(y0, y1, 4).iter().all(|t| *t >= 0.0));
            let svg = render(&chart(values), "c");
            assert!(!svg.contains(">-"), "{svg}");
        }
        // Negative data keeps its negative axis.
        assert!(y_range(&chart(&[-2.0, 1.0]), std::iter::empty()).0 < 0.0);
    }

    #[test]
    fn refused_and_failed_points_are_drawn_apart_and_named_in_the_legend() {
        let mut c = chart(&[1.0, 2.0, 3.0]);
        c.series[0].failed = vec![1, 2];
        c.series[0].refused = vec![2];
        let svg = render(&c, "c");
        assert_eq!(svg.matches("class=\"refusedmark\"").count(), 2, "{svg}");
        assert_eq!(svg.matches("class=\"failmark\"").count(), 2, "{svg}");
        assert!(svg.contains(">failed run</text>"));
        assert!(svg.contains(">refused by the validity gate</text>"));
        // Without marks there is no legend at all.
        assert!(!render(&chart(&[1.0, 2.0]), "c").contains("class=\"legend\""));
    }

    #[test]
    fn edge_labels_stay_inside_the_drawing() {
        assert_eq!(label_anchor(W - 10.0, "78dde6c·2"), (W - 2.0, "end"));
        assert_eq!(label_anchor(W / 2.0, "78dde6c·2"), (W / 2.0, "middle"));
        assert_eq!(label_anchor(5.0, "78dde6c·2").1, "start");
    }

    #[test]
    fn category_labels_are_thinned_keeping_the_last() {
        assert_eq!(category_labels_shown(3), [0, 1, 2]);
        let v = category_labels_shown(40);
        assert_eq!((v.len(), v[0], *v.last().unwrap()), (4, 0, 39));
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
                ..Series::default()
            }],
            ..Chart::default()
        };
        let svg = render(&c, "c1");
        assert!(svg.contains("<title id=\"c1-t\">t&lt;1&gt;</title>"));
        assert!(svg.contains("class=\"line\" d=\"M"));
        assert!(svg.contains("failmark"));
    }
}
