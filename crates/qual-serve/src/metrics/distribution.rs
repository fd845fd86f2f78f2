//! Samples with the interval their arrivals allow, the type-7 percentile, and the
//! distributions (mean, max, percentiles, each with the same statistic of both ends).

use super::*;

/// One percentile value, or null with a reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PercentileValue {
    /// `p50`, `p90`, …
    pub label: &'static str,
    /// The value, when there are enough samples.
    pub value: Option<f64>,
    /// Why the value is null.
    pub reason: Option<String>,
    /// Where the true percentile lies, for distributions of arrival-bounded samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// A closed interval known to hold the true value of a statistic (`upper` null: unbounded
/// above, e.g. a decode rate whose TPOT may be 0).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Bound {
    /// Lower end.
    pub lower: f64,
    /// Upper end (`f64::INFINITY` serializes as null).
    #[serde(serialize_with = "finite_or_null")]
    pub upper: f64,
}

pub(super) fn finite_or_null<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

impl Bound {
    /// A point (an exactly known value).
    pub fn point(v: f64) -> Bound {
        Bound { lower: v, upper: v }
    }

    /// The most `value` (a point inside the interval) can be off the truth.
    pub fn error(&self, value: f64) -> f64 {
        (value - self.lower).max(self.upper - value).max(0.0)
    }
}

/// One sample known only to lie in `[lower, upper]`, reported as `value` (inside).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoundedSample {
    /// Lower end.
    pub lower: f64,
    /// The reported value (the interval's midpoint for arrival intervals).
    pub value: f64,
    /// Upper end.
    pub upper: f64,
}

impl BoundedSample {
    /// An exactly known sample.
    pub fn exact(v: f64) -> BoundedSample {
        BoundedSample {
            lower: v,
            value: v,
            upper: v,
        }
    }
}

/// The centre of a finite bound (the value with the smallest largest error), else `value`.
pub fn centre(value: Option<f64>, bound: Option<Bound>) -> Option<f64> {
    match bound {
        Some(b) if b.upper.is_finite() && b.lower.is_finite() => Some((b.lower + b.upper) / 2.0),
        _ => value,
    }
}

/// Summary of one distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Distribution {
    /// Sample count.
    pub n: usize,
    /// Arithmetic mean (null when empty).
    pub mean: Option<f64>,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
    /// The percentiles of [`PERCENTILES`], in order.
    pub percentiles: Vec<PercentileValue>,
    /// Where the true mean lies (bounded distributions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_bound: Option<Bound>,
    /// Where the true minimum lies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bound: Option<Bound>,
    /// Where the true maximum lies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bound: Option<Bound>,
    /// How the percentile and mean bounds were established (pooled gaps only: per gap, or
    /// jointly over each request's arrivals, see [`GapIntervals`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_method: Option<GapBoundMethod>,
}

/// Type-7 percentile of an ascending, non-empty slice.
pub fn percentile_type7(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let rank = (n - 1) as f64 * p;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// Order statistics of unsorted samples: what a type-7 percentile, the minimum and the
/// maximum need, found by selection rather than a full sort.
///
/// Each percentile needs the two order statistics around its rank; these few ranks are put in
/// their sorted places by nested `select_nth_unstable` (each selection splits the slice, the
/// ranks on either side are found inside their part), which costs a few passes over the
/// samples where a sort costs log₂ n of them (1.5 million gaps: ~20). The selection runs on
/// integer keys ([`order_key`]: the IEEE 754 total order as a signed integer, so a comparison
/// is one instruction rather than `f64::total_cmp`'s two bit transforms), read back exactly.
/// The values are those a sort would give ([`percentile_type7`] of the sorted samples, bit
/// for bit).
pub struct OrderStats {
    n: usize,
    /// (rank, value) of every rank selected, ascending.
    at: Vec<(usize, f64)>,
}

impl OrderStats {
    /// Selects the order statistics of `samples` at the type-7 percentiles `ps` (fractions in
    /// 0..=1), the minimum and the maximum.
    pub fn select(samples: &[f64], ps: impl IntoIterator<Item = f64>) -> OrderStats {
        let n = samples.len();
        if n == 0 {
            return OrderStats { n, at: Vec::new() };
        }
        let mut ranks = vec![0, n - 1];
        for p in ps {
            let (lo, hi, _) = type7_ranks(n, p);
            ranks.extend([lo, hi]);
        }
        ranks.sort_unstable();
        ranks.dedup();
        let mut keys: Vec<i64> = samples.iter().map(|&x| order_key(x)).collect();
        select_ranks(&mut keys, &ranks, 0);
        let at = ranks
            .iter()
            .map(|&r| (r, from_order_key(keys[r])))
            .collect();
        OrderStats { n, at }
    }

    fn rank(&self, r: usize) -> f64 {
        let i = self
            .at
            .binary_search_by_key(&r, |&(k, _)| k)
            .expect("a selected rank");
        self.at[i].1
    }

    /// The type-7 percentile `p` (one of those selected); `None` without samples.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let (lo, hi, frac) = type7_ranks(self.n, p);
        let (a, b) = (self.rank(lo), self.rank(hi));
        Some(if self.n == 1 { a } else { a + (b - a) * frac })
    }

    /// The smallest sample.
    pub fn min(&self) -> Option<f64> {
        self.at.first().map(|&(_, v)| v)
    }

    /// The largest sample.
    pub fn max(&self) -> Option<f64> {
        self.at.last().map(|&(_, v)| v)
    }
}

/// The ranks a type-7 percentile interpolates between, and the weight of the upper one.
fn type7_ranks(n: usize, p: f64) -> (usize, usize, f64) {
    if n <= 1 {
        return (0, 0, 0.0);
    }
    let rank = (n - 1) as f64 * p;
    let lo = (rank.floor() as usize).min(n - 1);
    (lo, (lo + 1).min(n - 1), rank - lo as f64)
}

/// `x` as a signed integer whose order is [`f64::total_cmp`]'s (the transform that method
/// applies to both operands of every comparison, applied once).
fn order_key(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

/// The `f64` of an [`order_key`] (the transform is its own inverse), bit for bit.
fn from_order_key(k: i64) -> f64 {
    f64::from_bits((k ^ ((((k >> 63) as u64) >> 1) as i64)) as u64)
}

/// Puts the elements of `ranks` (ascending, distinct, each `offset ..` within `v`'s place in
/// the whole) where a sort would.
fn select_ranks(v: &mut [i64], ranks: &[usize], offset: usize) {
    if ranks.is_empty() {
        return;
    }
    let mid = ranks.len() / 2;
    let r = ranks[mid] - offset;
    v.select_nth_unstable(r);
    let (left, rest) = v.split_at_mut(r);
    select_ranks(left, &ranks[..mid], offset);
    select_ranks(&mut rest[1..], &ranks[mid + 1..], offset + r + 1);
}

impl Distribution {
    /// Summarises `samples` (any order).
    pub fn of(samples: Vec<f64>) -> Distribution {
        let n = samples.len();
        let stats = OrderStats::select(&samples, PERCENTILES.iter().map(|&(_, p, _)| p));
        let percentiles = PERCENTILES
            .iter()
            .map(|&(label, p, min)| {
                if n < min.max(1) {
                    PercentileValue {
                        label,
                        value: None,
                        reason: Some(format!(
                            "insufficient_samples: {label} needs at least {} samples, have {n}",
                            min.max(1)
                        )),
                        bound: None,
                    }
                } else {
                    PercentileValue {
                        label,
                        value: stats.percentile(p),
                        reason: None,
                        bound: None,
                    }
                }
            })
            .collect();
        Distribution {
            n,
            mean: (n > 0).then(|| samples.iter().sum::<f64>() / n as f64),
            min: stats.min(),
            max: stats.max(),
            percentiles,
            mean_bound: None,
            min_bound: None,
            max_bound: None,
            bound_method: None,
        }
    }

    /// Summarises interval samples: each statistic with its bound, reported at the bound's
    /// centre (the value whose largest possible error is smallest); the mean is the mean of
    /// the samples' reported values (the centre of its bound for midpoint samples).
    ///
    /// Every statistic here (order statistics, type-7 interpolation between them, the mean)
    /// is non-decreasing in each sample, so the statistic of the lower ends bounds the true
    /// statistic from below and that of the upper ends from above, whatever the true samples
    /// inside their intervals are.
    pub fn bounded(samples: &[BoundedSample]) -> Distribution {
        if samples
            .iter()
            .all(|s| s.lower == s.value && s.upper == s.value)
        {
            // Every sample exact: each statistic is its own bound (one selection, not three).
            let mut d = Distribution::of(samples.iter().map(|s| s.value).collect());
            for p in &mut d.percentiles {
                p.bound = p.value.map(Bound::point);
            }
            d.mean_bound = d.mean.map(Bound::point);
            d.min_bound = d.min.map(Bound::point);
            d.max_bound = d.max.map(Bound::point);
            return d;
        }
        let lo = Distribution::of(samples.iter().map(|s| s.lower).collect());
        let hi = Distribution::of(samples.iter().map(|s| s.upper).collect());
        // Every statistic but the mean is reported at its bound's centre when the bound is
        // finite, so the reported values' own order statistics are needed only when an end
        // is infinite (a decode rate whose TPOT may be 0).
        let mut d = if samples
            .iter()
            .all(|s| s.lower.is_finite() && s.upper.is_finite())
        {
            let n = samples.len();
            Distribution {
                mean: (n > 0).then(|| samples.iter().map(|s| s.value).sum::<f64>() / n as f64),
                ..lo.clone()
            }
        } else {
            Distribution::of(samples.iter().map(|s| s.value).collect())
        };
        let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(lower), Some(upper)) => Some(Bound { lower, upper }),
            _ => None,
        };
        for ((p, l), h) in d
            .percentiles
            .iter_mut()
            .zip(&lo.percentiles)
            .zip(&hi.percentiles)
        {
            p.bound = pair(l.value, h.value);
            p.value = centre(p.value, p.bound);
        }
        d.mean_bound = pair(lo.mean, hi.mean);
        d.min_bound = pair(lo.min, hi.min);
        d.max_bound = pair(lo.max, hi.max);
        d.min = centre(d.min, d.min_bound);
        d.max = centre(d.max, d.max_bound);
        d
    }

    /// Tightens the percentile and mean bounds of a distribution of the pooled gaps `gaps`
    /// (made by [`Distribution::bounded`] from the same gaps' per-gap samples) with their
    /// joint bounds, re-centring each value; records the method used.
    pub fn tighten_gaps(&mut self, gaps: &GapIntervals) {
        let wide: Vec<usize> = self
            .percentiles
            .iter()
            .enumerate()
            .filter(|(_, p)| p.bound.is_some_and(|b| b.upper > b.lower))
            .map(|(i, _)| i)
            .collect();
        if wide.is_empty() || !gaps.joint_affordable(wide.len()) {
            self.bound_method = Some(GapBoundMethod::PerGap);
            return;
        }
        for i in wide {
            let p = &mut self.percentiles[i];
            let q = PERCENTILES
                .iter()
                .find(|(label, _, _)| *label == p.label)
                .map(|&(_, q, _)| q);
            if let (Some(q), Some(b)) = (q, p.bound) {
                p.bound = gaps.percentile(q, b);
                p.value = centre(p.value, p.bound);
            }
        }
        if let Some(b) = self.mean_bound {
            self.mean_bound = gaps.mean(b);
            self.mean = centre(self.mean, self.mean_bound);
        }
        self.bound_method = Some(GapBoundMethod::Joint);
    }

    /// The bound of a statistic by its row suffix (`p50`, `mean`, `max`, …).
    pub fn bound_of(&self, label: &str) -> Option<Bound> {
        match label {
            "mean" => self.mean_bound,
            "min" => self.min_bound,
            "max" => self.max_bound,
            _ => self
                .percentiles
                .iter()
                .find(|p| p.label == label)
                .and_then(|p| p.bound),
        }
    }

    /// The value of one percentile label.
    pub fn get(&self, label: &str) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|p| p.label == label)
            .and_then(|p| p.value)
    }
}
