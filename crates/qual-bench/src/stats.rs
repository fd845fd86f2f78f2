//! Statistics `bench` reports: configurable percentiles with their sample counts, repeat
//! confidence intervals, per-second time series.
//!
//! * Percentiles: Hyndman–Fan type 7 (`qual_serve::metrics::percentile_type7`). Every
//!   requested percentile is reported whenever there is at least one sample, with `n`, the
//!   documented minimum (`min_samples`: p50 1, p90 64, p95 133, p99 662, p99.9 6620 — the
//!   table `serve` uses; any other p above 0.5: ⌈6.62 / (1 − p)⌉; at or below 0.5: 1) and
//!   `below_minimum` when `n` is smaller (the value is then an estimate the run cannot
//!   support, flagged rather than dropped).
//! * Confidence interval over repeats: a two-sided 95 % Student t-interval of the mean,
//!   mean ± t(0.975, r−1) · s / √r (null below 2 repeats).
//! * Time series: one-second buckets from the first measured send: requests completed,
//!   output tokens of requests completed, mean TTFT and mean E2E of requests completed in
//!   the bucket.

use qual_serve::metrics::{
    centre, Bound, BoundedSample, GapBoundMethod, GapIntervals, OrderStats, PERCENTILES,
};
use qual_serve::record::{Phase, RequestRecord};
use serde::Serialize;

/// The documented minimum sample count of percentile `p` (0..1).
pub fn min_samples(p: f64) -> usize {
    if let Some(&(_, _, m)) = PERCENTILES.iter().find(|(_, q, _)| (q - p).abs() < 1e-12) {
        return m;
    }
    if p <= 0.5 {
        1
    } else {
        (6.62 / (1.0 - p)).ceil() as usize
    }
}

/// Parses `50,90,99,99.9` (percent) into fractions.
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let v: f64 = part
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0 && *v < 100.0)
            .ok_or(format!("percentile {part:?} must be a number in (0, 100)"))?;
        out.push(v / 100.0);
    }
    out.sort_by(f64::total_cmp);
    out.dedup();
    Ok(out)
}

/// The label of a fraction: `p50`, `p99.9`.
pub fn label(p: f64) -> String {
    let pct = p * 100.0;
    let s = format!("{pct:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("p{s}")
}

/// One percentile with its support.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pct {
    /// `p50`, `p99.9`.
    pub label: String,
    /// The value (null only without samples).
    pub value: Option<f64>,
    /// Samples.
    pub n: usize,
    /// The documented minimum.
    pub min_samples: usize,
    /// `n < min_samples`.
    pub below_minimum: bool,
    /// Where the true percentile lies (arrival-bounded distributions; see
    /// `qual_serve::metrics::Distribution::bounded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// Summary of one distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Mean.
    pub mean: Option<f64>,
    /// Smallest.
    pub min: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
    /// Requested percentiles.
    pub percentiles: Vec<Pct>,
    /// How the percentile bounds were established (pooled gaps only; see
    /// `qual_serve::metrics::GapIntervals`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_method: Option<GapBoundMethod>,
}

impl Summary {
    /// Summarises `samples` at percentiles `ps`.
    pub fn of(samples: Vec<f64>, ps: &[f64]) -> Summary {
        let n = samples.len();
        let stats = OrderStats::select(&samples, ps.iter().copied());
        Summary {
            n,
            mean: (n > 0).then(|| samples.iter().sum::<f64>() / n as f64),
            min: stats.min(),
            max: stats.max(),
            percentiles: ps
                .iter()
                .map(|&p| Pct {
                    label: label(p),
                    value: stats.percentile(p),
                    n,
                    min_samples: min_samples(p),
                    below_minimum: n < min_samples(p),
                    bound: None,
                })
                .collect(),
            bound_method: None,
        }
    }

    /// Summarises interval samples: each percentile of the reported values with the same
    /// percentile of the lower and of the upper ends as its bound.
    pub fn bounded(samples: &[BoundedSample], ps: &[f64]) -> Summary {
        if samples
            .iter()
            .all(|x| x.lower == x.value && x.upper == x.value)
        {
            // Every sample exact: each percentile is its own bound (one selection, not three).
            let mut s = Summary::of(samples.iter().map(|x| x.value).collect(), ps);
            for p in &mut s.percentiles {
                p.bound = p.value.map(Bound::point);
            }
            return s;
        }
        let lo = Summary::of(samples.iter().map(|x| x.lower).collect(), ps);
        let hi = Summary::of(samples.iter().map(|x| x.upper).collect(), ps);
        // Percentiles are reported at their bound's centre when it is finite: the reported
        // values' own order statistics are needed only when an end is infinite.
        let mut s = if samples
            .iter()
            .all(|x| x.lower.is_finite() && x.upper.is_finite())
        {
            let n = samples.len();
            let values = samples.iter().map(|x| x.value);
            Summary {
                mean: (n > 0).then(|| values.sum::<f64>() / n as f64),
                min: samples.iter().map(|x| x.value).min_by(f64::total_cmp),
                max: samples.iter().map(|x| x.value).max_by(f64::total_cmp),
                ..lo.clone()
            }
        } else {
            Summary::of(samples.iter().map(|x| x.value).collect(), ps)
        };
        for ((p, l), h) in s
            .percentiles
            .iter_mut()
            .zip(&lo.percentiles)
            .zip(&hi.percentiles)
        {
            p.bound = match (l.value, h.value) {
                (Some(lower), Some(upper)) => Some(Bound { lower, upper }),
                _ => None,
            };
            p.value = centre(p.value, p.bound);
        }
        s
    }

    /// Tightens the percentile bounds of a summary of the pooled gaps `gaps` (made by
    /// [`Summary::bounded`] at `ps`) with their joint bounds, as serve's metrics do
    /// (`qual_serve::metrics::Distribution::tighten_gaps`), re-centring each value.
    pub fn tighten_gaps(&mut self, gaps: &GapIntervals, ps: &[f64]) {
        let wide = self
            .percentiles
            .iter()
            .filter(|p| p.bound.is_some_and(|b| b.upper > b.lower))
            .count();
        if wide == 0 || !gaps.joint_affordable(wide) {
            self.bound_method = Some(GapBoundMethod::PerGap);
            return;
        }
        for (pct, &p) in self.percentiles.iter_mut().zip(ps) {
            if let Some(b) = pct.bound.filter(|b| b.upper > b.lower) {
                pct.bound = gaps.percentile(p, b);
                pct.value = centre(pct.value, pct.bound);
            }
        }
        self.bound_method = Some(GapBoundMethod::Joint);
    }

    /// The bound at a label.
    pub fn bound(&self, label: &str) -> Option<Bound> {
        self.percentiles
            .iter()
            .find(|p| p.label == label)
            .and_then(|p| p.bound)
    }

    /// The value at a label.
    pub fn get(&self, label: &str) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|p| p.label == label)
            .and_then(|p| p.value)
    }
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// A mean over repeats with its 95 % t-interval.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    /// Mean over repeats.
    pub mean: f64,
    /// Repeats.
    pub repeats: usize,
    /// Half width of the 95 % t-interval (null below 2 repeats).
    pub half_width: Option<f64>,
}

/// The mean of `xs` with its t-interval (None when empty).
pub fn t_interval(xs: &[f64]) -> Option<Interval> {
    let r = xs.len();
    if r == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / r as f64;
    let half_width = (r >= 2).then(|| {
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r - 1) as f64;
        let t = T975.get(r - 2).copied().unwrap_or(1.960);
        t * var.sqrt() / (r as f64).sqrt()
    });
    Some(Interval {
        mean,
        repeats: r,
        half_width,
    })
}

/// One second of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Second {
    /// Seconds from the first measured send.
    pub second: u64,
    /// Successful requests completed in this second.
    pub requests: u64,
    /// Their output tokens.
    pub output_tokens: u64,
    /// Failed requests completed in this second.
    pub failed: u64,
    /// Mean TTFT of the successful ones (ms).
    pub ttft_ms_mean: Option<f64>,
    /// Mean E2E of the successful ones (ms).
    pub e2e_ms_mean: Option<f64>,
}

/// The per-second series of the measured records.
pub fn time_series(records: &[RequestRecord]) -> Vec<Second> {
    let measured: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| r.phase == Phase::Measured)
        .collect();
    let Some(t0) = measured.iter().filter_map(|r| r.send_ns).min() else {
        return Vec::new();
    };
    let mut out: Vec<Second> = Vec::new();
    let mut sums: Vec<(f64, f64, u64)> = Vec::new();
    for r in measured {
        let Some(end) = r.end_ns else { continue };
        let s = (end.saturating_sub(t0) / 1_000_000_000) as usize;
        while out.len() <= s {
            out.push(Second {
                second: out.len() as u64,
                requests: 0,
                output_tokens: 0,
                failed: 0,
                ttft_ms_mean: None,
                e2e_ms_mean: None,
            });
            sums.push((0.0, 0.0, 0));
        }
        if !r.outcome.is_success() {
            out[s].failed += 1;
            continue;
        }
        out[s].requests += 1;
        out[s].output_tokens += r.output_tokens.map_or(0, |c| c.value);
        if let (Some(send), Some(first), Some(last)) = (
            r.send_ns,
            r.content_event_ns.first(),
            r.content_event_ns.last(),
        ) {
            sums[s].0 += first.saturating_sub(send) as f64 / 1e6;
            sums[s].1 += last.saturating_sub(send) as f64 / 1e6;
            sums[s].2 += 1;
        }
    }
    for (b, (t, e, n)) in out.iter_mut().zip(sums) {
        if n > 0 {
            b.ttft_ms_mean = Some(t / n as f64);
            b.e2e_ms_mean = Some(e / n as f64);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_always_report_with_their_support() {
        let ps = parse_percentiles("50,90,99.9,75").unwrap();
        let want = [0.5, 0.75, 0.9, 0.999];
        assert_eq!(ps.len(), 4);
        assert!(
            ps.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{ps:?}"
        );
        let s = Summary::of(vec![4.0, 1.0, 3.0, 2.0], &ps);
        assert_eq!(s.get("p50"), Some(2.5));
        let p90 = &s.percentiles[2];
        assert_eq!(p90.label, "p90");
        assert!((p90.value.unwrap() - 3.7).abs() < 1e-12);
        assert_eq!((p90.n, p90.min_samples, p90.below_minimum), (4, 64, true));
        assert_eq!(s.percentiles[1].min_samples, 27); // ceil(6.62 / 0.25)
        assert_eq!(s.percentiles[3].label, "p99.9");
        assert!(Summary::of(vec![], &ps).percentiles[0].value.is_none());
        assert!(parse_percentiles("100").is_err());
    }

    #[test]
    fn t_interval_matches_a_hand_computation() {
        // 10, 12, 14: mean 12, s = 2, t(0.975, 2) = 4.303: half width 4.303 * 2 / sqrt(3).
        let i = t_interval(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(i.mean, 12.0);
        assert!((i.half_width.unwrap() - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(t_interval(&[5.0]).unwrap().half_width, None);
    }
}
