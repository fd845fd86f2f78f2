//! Joint bounds on pooled inter-token gaps: what the arrival intervals of a request's events
//! allow *together*, not gap by gap.
//!
//! Owns [`GapIntervals`]: the arrival intervals of every successful request's content events
//! (ns), and the bounds of the pooled ITL distribution's order statistics (hence its type-7
//! percentiles) and mean that follow from them jointly.
//!
//! **Why.** Bounding each gap on its own (`lower(next) − upper(prev)` ..=
//! `upper(next) − lower(prev)`) lets every gap take its widest value at once. They cannot:
//! the true arrivals `t₀ ≤ t₁ ≤ …` are one sequence, each `tᵢ` inside its interval, so two
//! events that shared one read (one interval of width W) have gaps that *sum* to what the
//! interval allows — one of them may be W, not both. When a starved reader drains pairs of
//! events, the per-gap bound of the median spans 0 ..= 2·ITL although at most one gap per
//! pair can be off; the joint bound of the median stays near the gaps the exact events show.
//!
//! **Order statistics.** For the k-th smallest of the N pooled gaps (1-based):
//!
//! * upper: the largest v such that the intervals allow at least N − k + 1 gaps ≥ v (the
//!   true k-th smallest has that many gaps at or above it);
//! * lower: the smallest v such that they allow at least k gaps ≤ v.
//!
//! "At most how many gaps ≥ v (≤ v) can one request have" is a dynamic programme over its
//! events ([`max_gaps_at_least`], [`max_gaps_at_most`]): per count, the earliest feasible
//! arrival of the current event (for "≥ v", where an earlier arrival never loses an option),
//! or the interval of feasible arrivals (for "≤ v": these intervals stay contiguous because
//! the sets for higher counts are nested in those for lower ones; the code takes the hull,
//! which could only widen the bound). Requests are independent, so counts add. An event whose
//! interval is a point fixes its arrival and splits the programme, so its cost is the sum of
//! the squared lengths of the runs between point events. v is found by bisection in 1 µs steps
//! ([`RESOLUTION`]) and the result is widened outwards to the step (the tolerance it serves
//! is 0.5 ms). A type-7 percentile interpolates between two order
//! statistics with fixed weights, so the same weights of their bounds bound it.
//!
//! **Mean.** Σ gaps of one request = `t_last − t_first`, so the pooled mean lies within
//! Σ(`lower_last − upper_first`)/N ..= Σ(`upper_last − lower_first`)/N.
//!
//! Every joint bound is intersected with the per-gap one (both hold, so both ends of the
//! intersection do), so it is never wider. Above [`COST_BUDGET`] dynamic-programme steps
//! (e.g. 12 000 requests of 128 events all sharing reads) the per-gap bound is kept and
//! [`GapBoundMethod::PerGap`] says so. Invariant (tested by property test): the true
//! statistic of any sequence of arrivals inside the intervals lies inside the bound.

use super::Bound;

/// Arrival intervals of each request's content events, in ns (`lower ..= upper`, in order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GapIntervals {
    requests: Vec<Vec<(u64, u64)>>,
    gaps: usize,
}

/// How the bounds of a pooled ITL distribution were established.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GapBoundMethod {
    /// Each gap bounded on its own, the statistic of the lower and of the upper ends.
    PerGap,
    /// Jointly over each request's arrivals, intersected with the per-gap bound.
    Joint,
}

/// Dynamic-programme steps the joint bounds of one distribution may cost before they are
/// skipped (a step is a few ns: about a second at most).
pub const COST_BUDGET: u64 = 200_000_000;

/// The bisection's step (ns): each joint bound is widened outwards by at most this much.
pub const RESOLUTION: u64 = 1_000;

/// Bisection passes per order statistic end (1 µs steps up to 2³² µs ≈ 73 min).
const PASSES: u64 = 32;

impl GapIntervals {
    /// Adds one request's event intervals (`lower ..= upper` ns per content event, in order).
    pub fn push(&mut self, events: Vec<(u64, u64)>) {
        self.gaps += events.len().saturating_sub(1);
        if events.len() >= 2 {
            self.requests.push(events);
        }
    }

    /// Pooled gaps.
    pub fn gaps(&self) -> usize {
        self.gaps
    }

    /// Steps of one pass of either dynamic programme over every request.
    fn pass_cost(&self) -> u64 {
        self.requests
            .iter()
            .map(|iv| {
                let (mut run, mut cost) = (0u64, 0u64);
                for &(l, u) in iv {
                    run += 1;
                    if l >= u {
                        cost += run * run;
                        run = 1;
                    }
                }
                cost + run * run
            })
            .sum()
    }

    /// Whether the joint bounds of `percentiles` type-7 percentiles fit [`COST_BUDGET`].
    pub fn joint_affordable(&self, percentiles: usize) -> bool {
        let passes = PASSES * 4 * percentiles as u64;
        self.pass_cost().saturating_mul(passes) <= COST_BUDGET
    }

    /// Σ over requests of the most gaps ≥ `v` their intervals allow.
    fn count_at_least(&self, v: u64) -> usize {
        self.requests
            .iter()
            .map(|iv| max_gaps_at_least(iv, v))
            .sum()
    }

    /// Σ over requests of the most gaps ≤ `v` their intervals allow.
    fn count_at_most(&self, v: u64) -> usize {
        self.requests.iter().map(|iv| max_gaps_at_most(iv, v)).sum()
    }

    /// The largest gap any interval pair allows (ns): no gap can exceed it.
    fn widest(&self) -> u64 {
        self.requests
            .iter()
            .flat_map(|iv| iv.windows(2).map(|w| w[1].1.saturating_sub(w[0].0)))
            .max()
            .unwrap_or(0)
    }

    /// Bound (ns) of the k-th smallest pooled gap (1-based, `1 ..= gaps`), to [`RESOLUTION`].
    fn order_statistic(&self, k: usize, widest: u64) -> (u64, u64) {
        let n = self.gaps;
        // Bisection over whole RESOLUTION steps: `ok` holds, `bad` does not, so the true
        // extreme lies strictly between `(ok, bad)`'s ends; report `bad`'s end (outwards).
        let steps = widest.div_ceil(RESOLUTION) + 1;
        let bisect = |mut ok: u64, mut bad: u64, holds: &dyn Fn(u64) -> bool| {
            while ok.abs_diff(bad) > 1 {
                let mid = (ok + bad) / 2;
                if holds(mid * RESOLUTION) {
                    ok = mid;
                } else {
                    bad = mid;
                }
            }
            bad
        };
        // upper: the largest v with count_at_least(v) ≥ n − k + 1 (true at v = 0; false
        // above the widest gap).
        let need = n - k + 1;
        let upper = bisect(0, steps, &|v| self.count_at_least(v) >= need) * RESOLUTION;
        // lower: the smallest v with count_at_most(v) ≥ k (true at the widest gap).
        let lower = if self.count_at_most(0) >= k {
            0
        } else {
            bisect(steps, 0, &|v| self.count_at_most(v) >= k) * RESOLUTION
        };
        (lower, upper.min(widest))
    }

    /// The joint bound (ms) of the type-7 `p` percentile of the pooled gaps, intersected
    /// with `per_gap`; `None` without gaps.
    pub fn percentile(&self, p: f64, per_gap: Bound) -> Option<Bound> {
        let n = self.gaps;
        if n == 0 || self.requests.is_empty() {
            return None;
        }
        let widest = self.widest();
        let rank = (n - 1) as f64 * p;
        let lo = rank.floor() as usize;
        let frac = rank - lo as f64;
        let (l1, u1) = self.order_statistic(lo + 1, widest);
        let (l, u) = if frac > 0.0 && lo + 2 <= n {
            let (l2, u2) = self.order_statistic(lo + 2, widest);
            (
                l1 as f64 + (l2 as f64 - l1 as f64) * frac,
                u1 as f64 + (u2 as f64 - u1 as f64) * frac,
            )
        } else {
            (l1 as f64, u1 as f64)
        };
        Some(intersect(per_gap, l / 1e6, u / 1e6))
    }

    /// The joint bound (ms) of the pooled mean gap, intersected with `per_gap`.
    pub fn mean(&self, per_gap: Bound) -> Option<Bound> {
        if self.gaps == 0 {
            return None;
        }
        let (mut lo, mut hi) = (0u128, 0u128);
        for iv in &self.requests {
            let (first, last) = (iv[0], iv[iv.len() - 1]);
            lo += last.0.saturating_sub(first.1) as u128;
            hi += last.1.saturating_sub(first.0) as u128;
        }
        let n = self.gaps as f64;
        Some(intersect(per_gap, lo as f64 / n / 1e6, hi as f64 / n / 1e6))
    }
}

/// The intersection of two bounds that both hold (never empty for true bounds; should
/// rounding make it so, the per-gap bound is kept).
fn intersect(per_gap: Bound, lower: f64, upper: f64) -> Bound {
    let b = Bound {
        lower: per_gap.lower.max(lower),
        upper: per_gap.upper.min(upper),
    };
    if b.lower <= b.upper {
        b
    } else {
        per_gap
    }
}

/// The most gaps ≥ `v` (ns) that arrivals inside `iv` (in order, non-decreasing) allow.
pub fn max_gaps_at_least(iv: &[(u64, u64)], v: u64) -> usize {
    const NONE: u64 = u64::MAX;
    let Some(&(l0, u0)) = iv.first() else {
        return 0;
    };
    // earliest[c]: the earliest arrival of the current event with c gaps ≥ v so far.
    let mut earliest: Vec<u64> = vec![l0.min(u0)];
    let mut done = 0usize;
    for &(l, u) in &iv[1..] {
        earliest.push(NONE);
        for c in (0..earliest.len()).rev() {
            let any = match earliest[c] {
                NONE => NONE,
                t => Some(t.max(l)).filter(|&t| t <= u).unwrap_or(NONE),
            };
            let big = match c.checked_sub(1).map(|c| earliest[c]) {
                None | Some(NONE) => NONE,
                Some(t) => Some(t.saturating_add(v).max(l))
                    .filter(|&t| t <= u)
                    .unwrap_or(NONE),
            };
            earliest[c] = any.min(big);
        }
        if l >= u {
            // A point: every feasible state sits at u; keep the best count only.
            let best = earliest.iter().rposition(|&t| t != NONE);
            let Some(best) = best else {
                return done; // infeasible intervals (never for true ones)
            };
            done += best;
            earliest.clear();
            earliest.push(u);
        }
    }
    done + earliest.iter().rposition(|&t| t != NONE).unwrap_or(0)
}

/// The most gaps ≤ `v` (ns) that arrivals inside `iv` (in order, non-decreasing) allow.
pub fn max_gaps_at_most(iv: &[(u64, u64)], v: u64) -> usize {
    let Some(&(l0, u0)) = iv.first() else {
        return 0;
    };
    // reach[c]: the hull of feasible arrivals of the current event with ≥ c gaps ≤ v so far.
    let mut reach: Vec<Option<(u64, u64)>> = vec![Some((l0.min(u0), u0))];
    let mut done = 0usize;
    for &(l, u) in &iv[1..] {
        reach.push(None);
        for c in (0..reach.len()).rev() {
            let any = reach[c].and_then(|(a, _)| {
                let s = a.max(l);
                (s <= u).then_some((s, u))
            });
            let small = c.checked_sub(1).and_then(|c| reach[c]).and_then(|(a, b)| {
                let (s, e) = (a.max(l), b.saturating_add(v).min(u));
                (s <= e).then_some((s, e))
            });
            reach[c] = match (any, small) {
                (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
                (x, y) => x.or(y),
            };
        }
        if l >= u {
            let Some(best) = reach.iter().rposition(Option::is_some) else {
                return done;
            };
            done += best;
            reach.clear();
            reach.push(Some((u, u)));
        }
    }
    done + reach.iter().rposition(Option::is_some).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    fn wide() -> Bound {
        Bound {
            lower: 0.0,
            upper: f64::INFINITY,
        }
    }

    #[test]
    fn exact_events_give_a_point() {
        let mut g = GapIntervals::default();
        g.push(vec![(0, 0), (5 * MS, 5 * MS), (10 * MS, 10 * MS)]);
        // Exact to the search's 1 µs step.
        let b = g.percentile(0.5, wide()).unwrap();
        assert!(
            (b.lower - 5.0).abs() <= 1.001e-3 && (b.upper - 5.0).abs() <= 1.001e-3,
            "{b:?}"
        );
        assert_eq!(max_gaps_at_least(&[(0, 0), (5, 5), (10, 10)], 5), 2);
        assert_eq!(max_gaps_at_least(&[(0, 0), (5, 5), (10, 10)], 6), 0);
        assert_eq!(max_gaps_at_most(&[(0, 0), (5, 5), (10, 10)], 4), 0);
    }

    #[test]
    fn a_coalesced_pair_can_hold_only_one_long_gap() {
        // Events at 0 (point), then two that shared a read: [1 ms, 10 ms] each, the second
        // a point at 10 ms (it ended the drained read). Their gaps sum to 10 ms.
        let iv = [(0, 0), (MS, 10 * MS), (10 * MS, 10 * MS)];
        assert_eq!(max_gaps_at_least(&iv, 6 * MS), 1);
        assert_eq!(max_gaps_at_least(&iv, 5 * MS), 2);
        assert_eq!(max_gaps_at_most(&iv, 0), 1);
        // Per gap: 1..=10 and 0..=9; the pair's gaps sum to exactly 10.
        assert_eq!(max_gaps_at_most(&iv, 4 * MS), 1);
        assert_eq!(max_gaps_at_most(&iv, 5 * MS), 2);
    }

    #[test]
    fn pairs_among_exact_gaps_keep_the_median_near_the_exact_ones() {
        // 10 requests: 0, 5, 10 (pair sharing [5.1, 15]), 15, 20, 25 ms; per-gap bounds of
        // the pair's two gaps are 0.1..=15 and 0..=9.9.
        let mut g = GapIntervals::default();
        let mut per_gap = Vec::new();
        for _ in 0..10 {
            let iv = vec![
                (0, 0),
                (5 * MS, 5 * MS),
                (5 * MS + MS / 10, 15 * MS),
                (15 * MS, 15 * MS),
                (20 * MS, 20 * MS),
                (25 * MS, 25 * MS),
            ];
            for w in iv.windows(2) {
                per_gap.push((
                    w[1].0.saturating_sub(w[0].1) as f64 / 1e6,
                    w[1].1.saturating_sub(w[0].0) as f64 / 1e6,
                ));
            }
            g.push(iv);
        }
        let b = g.percentile(0.5, wide()).unwrap();
        assert!(b.lower >= 4.99 && b.upper <= 5.01, "{b:?}");
        let m = g.mean(wide()).unwrap();
        assert!(
            (m.lower - 5.0).abs() < 1e-9 && (m.upper - 5.0).abs() < 1e-9,
            "{m:?}"
        );
    }

    #[test]
    fn the_bound_never_widens_the_per_gap_one() {
        let mut g = GapIntervals::default();
        g.push(vec![(0, 0), (0, 100 * MS), (100 * MS, 100 * MS)]);
        let per_gap = Bound {
            lower: 10.0,
            upper: 20.0,
        };
        let b = g.percentile(0.5, per_gap).unwrap();
        assert!(b.lower >= 10.0 && b.upper <= 20.0);
    }

    fn type7(mut xs: Vec<f64>, p: f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        crate::metrics::percentile_type7(&xs, p)
    }

    /// One request: true arrivals, grouped into reads; each read's interval is
    /// [drain, stamp] with drain ≤ its first arrival and stamp = its last arrival (the
    /// last event of a drained read a point), as the client's reader records them.
    fn request() -> impl Strategy<Value = (Vec<u64>, Vec<(u64, u64)>)> {
        prop::collection::vec((0u64..20_000, 1usize..4, 0u64..5_000, any::<bool>()), 1..12)
            .prop_map(|reads| {
                let (mut t, mut truth, mut iv) = (0u64, Vec::new(), Vec::new());
                for (gap, events, slack, tail_point) in reads {
                    let drain = t;
                    let mut arrivals = Vec::new();
                    for _ in 0..events {
                        t += gap / events as u64;
                        arrivals.push(t);
                    }
                    let stamp = t;
                    let lower = drain.saturating_sub(slack).min(arrivals[0]);
                    for (j, &a) in arrivals.iter().enumerate() {
                        truth.push(a);
                        let last = j + 1 == arrivals.len();
                        iv.push(if last && tail_point {
                            (stamp, stamp)
                        } else {
                            (lower, stamp)
                        });
                    }
                }
                (truth, iv)
            })
    }

    proptest! {
        #[test]
        fn the_true_statistic_lies_inside_the_joint_bound(
            reqs in prop::collection::vec(request(), 1..6),
            p in prop::sample::select(vec![0.5, 0.9, 0.95, 0.99]),
        ) {
            let mut g = GapIntervals::default();
            let mut gaps = Vec::new();
            for (truth, iv) in &reqs {
                gaps.extend(truth.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6));
                g.push(iv.clone());
            }
            prop_assume!(!gaps.is_empty());
            let truth = type7(gaps.clone(), p);
            let b = g.percentile(p, wide()).unwrap();
            prop_assert!(b.lower - 1e-9 <= truth && truth <= b.upper + 1e-9,
                "p{p}: true {truth} outside {b:?}");
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let m = g.mean(wide()).unwrap();
            prop_assert!(m.lower - 1e-9 <= mean && mean <= m.upper + 1e-9);
        }
    }
}
