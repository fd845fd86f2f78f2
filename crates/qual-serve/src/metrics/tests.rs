//! Unit tests of the serving metrics.

use super::*;
use crate::record::{Endpoint, Outcome, TokenCount, TokenSource};

fn rec(index: u64, send: u64, events: &[u64], end: u64, tokens: u64) -> RequestRecord {
    let mut r = RequestRecord::scheduled(index, "x", Phase::Measured, Endpoint::Chat, send);
    r.send_ns = Some(send);
    r.content_event_ns = events.to_vec();
    r.end_ns = Some(end);
    r.done_ns = Some(end);
    r.output_tokens = Some(TokenCount {
        value: tokens,
        source: TokenSource::ServerUsage,
    });
    r.outcome = Outcome::Succeeded;
    r
}

const MS: u64 = 1_000_000;

/// The metric-definition suite: one hand-built per-event trace; every expected value is
/// computed by hand in the comments.
#[test]
fn hand_built_trace_yields_the_defined_values() {
    // Request A: sent at 0 ms; content events at 10, 15, 25 ms; stream end 27 ms; 3 tokens.
    //   TTFT 10, E2E 25, ITLs 5 and 10, TPOT (25-10)/(3-1) = 7.5, decode 1000/7.5 = 133.33…
    // Request B: sent at 2 ms (scheduled 0: lag 2 ms, late); events 22, 24 ms; end 30 ms;
    //   usage says 4 tokens (an event carried two). TTFT 20, E2E 22, ITL 2,
    //   TPOT (22-20)/(4-1) = 0.666…, decode 1500.
    // Request C: sent at 3 ms, failed (error event) — counted, never in numerators.
    // Warmup W: excluded from everything.
    let a = rec(1, 0, &[10 * MS, 15 * MS, 25 * MS], 27 * MS, 3);
    let mut b = rec(2, 2 * MS, &[22 * MS, 24 * MS], 30 * MS, 4);
    b.scheduled_ns = 0;
    let mut c = rec(3, 3 * MS, &[4 * MS], 5 * MS, 1);
    c.outcome = Outcome::Failed {
        reason: "in-band error event".into(),
    };
    let mut w = rec(0, 0, &[MS], 100 * MS, 1000);
    w.phase = Phase::Warmup;
    let slo = Slo {
        ttft_ms: Some(15.0),
        itl_ms: None,
        e2e_ms: None,
    };
    let m = compute(&[w, a, b, c], slo, ValidityLimits::default());
    assert_eq!(
        (m.measured_requests, m.succeeded_requests, m.failed_requests),
        (3, 2, 1)
    );
    assert_eq!(m.output_tokens_total, 7);
    assert_eq!(m.content_events_total, 5);
    // TTFT samples {10, 20}: mean 15, type-7 p50 = 10 + (20-10)*0.5 = 15.
    assert_eq!(m.ttft_ms.mean, Some(15.0));
    assert_eq!(m.ttft_ms.get("p50"), Some(15.0));
    // p90 needs 64 samples: null with a reason.
    assert_eq!(m.ttft_ms.get("p90"), None);
    assert!(m.ttft_ms.percentiles[1]
        .reason
        .as_deref()
        .unwrap()
        .starts_with("insufficient_samples"));
    // E2E {25, 22}.
    assert_eq!(m.e2e_ms.min, Some(22.0));
    assert_eq!(m.e2e_ms.max, Some(25.0));
    // ITL pooled {5, 10, 2}: sorted {2, 5, 10}, p50 = 5, mean 17/3.
    assert_eq!(m.itl_ms.n, 3);
    assert_eq!(m.itl_ms.get("p50"), Some(5.0));
    assert!((m.itl_ms.mean.unwrap() - 17.0 / 3.0).abs() < 1e-12);
    // TPOT {7.5, 2/3}; decode {133.33…, 1500}.
    assert!((m.tpot_ms.max.unwrap() - 7.5).abs() < 1e-12);
    assert!((m.tpot_ms.min.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert!((m.decode_tokens_per_second.max.unwrap() - 1500.0).abs() < 1e-9);
    assert!((m.decode_tokens_per_second.min.unwrap() - 1000.0 / 7.5).abs() < 1e-9);
    // Window: first send 0 (A), last completion 30 ms (B; C failed, W warmup) = 0.03 s.
    assert!((m.window_seconds.unwrap() - 0.03).abs() < 1e-12);
    // Output tokens/s = 7 / 0.03; requests/s = 2 / 0.03.
    assert!((m.output_tokens_per_second.unwrap() - 7.0 / 0.03).abs() < 1e-9);
    assert!((m.requests_per_second.unwrap() - 2.0 / 0.03).abs() < 1e-9);
    // Goodput with TTFT <= 15 ms: only A (3 tokens); attainment 1/3 (C counts as a miss).
    assert!((m.goodput_requests_per_second.unwrap() - 1.0 / 0.03).abs() < 1e-9);
    assert!((m.goodput_output_tokens_per_second.unwrap() - 3.0 / 0.03).abs() < 1e-9);
    assert!((m.slo_attainment.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    // Schedule lag: A 0, B 2 ms, C 0 (scheduled at its send): one late send of three,
    // 1/3 > 1 %, so the run is invalid.
    assert_eq!(m.schedule.late_sends, 1);
    assert!(!m.schedule.valid);
}

#[test]
fn lag_reference_is_the_latest_of_schedule_connect_and_retry() {
    // Scheduled 0; new connection ready at 5 ms; sent at 5.2 ms: lag 0.2 ms, not 5.2.
    let mut a = rec(1, 5_200_000, &[6 * MS], 7 * MS, 1);
    a.scheduled_ns = 0;
    a.connected_ns = Some(5 * MS);
    // Scheduled 0; retry started at 3 ms after a stale connection; sent 4.5 ms: lag 1.5.
    let mut b = rec(2, 4_500_000, &[6 * MS], 7 * MS, 1);
    b.scheduled_ns = 0;
    b.retry_started_ns = Some(3 * MS);
    let m = compute(&[a, b], Slo::default(), ValidityLimits::default());
    assert!((m.schedule.lag_ms.min.unwrap() - 0.2).abs() < 1e-9);
    assert!((m.schedule.lag_ms.max.unwrap() - 1.5).abs() < 1e-9);
    assert_eq!(m.schedule.late_sends, 1);
}

/// Read lag, coalescing and scheduler counters are recorded, never gated: with exact
/// arrival intervals the numbers are right whatever the reader went through.
#[test]
fn disturbance_signals_are_recorded_not_gated() {
    let limits = ValidityLimits::default();
    let kernel = |i: u64, lags: &[u64], coalesced: u64| {
        let mut r = rec(i, 0, &[10 * MS, 15 * MS, 20 * MS, 25 * MS], 30 * MS, 4);
        r.clock_source = Some(ClockSource::KernelRxTimestamp);
        r.content_read_lag_ns = lags.to_vec();
        r.content_events_coalesced = coalesced;
        r.run_queue_wait_ns = Some(50 * MS);
        r.involuntary_switches = Some(100);
        r
    };
    let mut recs: Vec<RequestRecord> = (0..10).map(|i| kernel(i, &[1000; 4], 4)).collect();
    recs[3] = kernel(3, &[1000, 25 * MS, 1000, 1000], 4);
    for r in &mut recs[5..] {
        r.clock_source = Some(ClockSource::UserRead);
        r.content_read_lag_ns.clear();
    }
    let v = compute(&recs, Slo::default(), limits).validity;
    assert!(v.violations.is_empty(), "{:?}", v.violations);
    assert_eq!(v.late_reads, 1);
    assert_eq!(v.coalesced_events, 40);
    assert_eq!(v.starved_requests, 5);
    assert_eq!(v.preempted_requests, 5);
    assert_eq!(v.gated, DEFAULT_GATED.map(String::from).to_vec());
}

/// A record whose content events arrived in `[lower, upper]` each (ns).
fn bounded_rec(index: u64, send: u64, events: &[(u64, u64)], tokens: u64) -> RequestRecord {
    let upper: Vec<u64> = events.iter().map(|e| e.1).collect();
    let end = upper.last().copied().unwrap_or(send) + MS;
    let mut r = rec(index, send, &upper, end, tokens);
    r.content_event_width_ns = events.iter().map(|e| e.1 - e.0).collect();
    r.end_lower_ns = Some(end);
    r
}

/// Interval arithmetic on constructed timelines: exact events give zero-width bounds;
/// two events coalesced into one read share an interval; a late read widens only what
/// it delivered.
#[test]
fn interval_arithmetic_on_constructed_timelines() {
    // Exact: events at 10, 15, 20 ms after a send at 0, each a point.
    let exact = bounded_rec(
        0,
        0,
        &[(10 * MS, 10 * MS), (15 * MS, 15 * MS), (20 * MS, 20 * MS)],
        3,
    );
    let m = compute(&[exact], Slo::default(), ValidityLimits::default());
    assert_eq!(m.ttft_ms.get("p50"), Some(10.0));
    assert_eq!(m.ttft_ms.bound_of("p50"), Some(Bound::point(10.0)));
    assert_eq!(m.itl_ms.bound_of("p50"), Some(Bound::point(5.0)));
    assert_eq!(m.tpot_ms.bound_of("p50"), Some(Bound::point(5.0)));
    assert!(m.validity.violations.is_empty());
    // Coalesced: the first two events were delivered by one read at 15 ms whose lower
    // end is 9 ms (the queue was last seen empty then); the third was exact at 20 ms.
    let co = bounded_rec(
        1,
        0,
        &[(9 * MS, 15 * MS), (9 * MS, 15 * MS), (20 * MS, 20 * MS)],
        3,
    );
    let m = compute(&[co], Slo::default(), ValidityLimits::default());
    // TTFT in [9, 15], reported at the midpoint 12, error 3 ms.
    let b = m.ttft_ms.bound_of("p50").unwrap();
    assert_eq!((b.lower, b.upper), (9.0, 15.0));
    assert_eq!(m.ttft_ms.get("p50"), Some(12.0));
    assert_eq!(b.error(12.0), 3.0);
    // ITLs: between the coalesced pair [0, 6], then [5, 11]: per gap, the pooled p50 lies in
    // [2.5, 8.5]. Jointly (the two gaps sum to 20 − t₀, t₀ in [9, 15]): the smaller gap is
    // at most 5.5 (t₀ = 9, t₁ = 14.5), the larger at most 11, so p50 (their mean, type 7)
    // is at most (5.5 + 11) / 2 = 8.25, widened by the search's 1 µs step.
    let b = m.itl_ms.bound_of("p50").unwrap();
    assert_eq!(b.lower, 2.5);
    assert!((8.25..=8.251_001).contains(&b.upper), "{b:?}");
    assert_eq!(m.itl_ms.bound_method, Some(GapBoundMethod::Joint));
    assert!((m.itl_ms.get("p50").unwrap() - 5.375).abs() < 1e-3);
    // E2E exact at 20 ms.
    assert_eq!(m.e2e_ms.bound_of("p50"), Some(Bound::point(20.0)));
    // The gate names the statistic and its bound: TTFT p50 ±3 ms > 0.5 ms.
    let v = &m.validity.violations;
    assert!(
        v.iter()
            .any(|r| r
                .starts_with("invalid run: ttft_ms.p50 = 12.000 ms is known only to ±3.000 ms")),
        "{v:?}"
    );
    // A wider declared tolerance accepts it; a statistic not gated is never refused.
    let wide = ValidityLimits {
        tolerance_ms: 3.5,
        ..ValidityLimits::default()
    };
    let co = bounded_rec(
        1,
        0,
        &[(9 * MS, 15 * MS), (9 * MS, 15 * MS), (20 * MS, 20 * MS)],
        3,
    );
    let v = compute(std::slice::from_ref(&co), Slo::default(), wide)
        .validity
        .violations;
    assert!(v.is_empty(), "{v:?}");
    let only_e2e = ["e2e_ms.p50".to_string()];
    let m = compute_gated(
        &[co],
        Slo::default(),
        ValidityLimits::default(),
        Some(&only_e2e),
    );
    assert!(
        m.validity.violations.is_empty(),
        "{:?}",
        m.validity.violations
    );
    // SLO attainment: TTFT ≤ 12 ms is possibly but not surely met for [9, 15].
    let co = bounded_rec(1, 0, &[(9 * MS, 15 * MS), (20 * MS, 20 * MS)], 2);
    let slo = Slo {
        ttft_ms: Some(12.5),
        itl_ms: None,
        e2e_ms: None,
    };
    let m = compute(&[co], slo, ValidityLimits::default());
    assert_eq!(m.slo_attainment, Some(1.0));
    assert_eq!(
        m.bounds.slo_attainment,
        Some(Bound {
            lower: 0.0,
            upper: 1.0
        })
    );
    assert!(m
        .validity
        .violations
        .iter()
        .any(|r| r.contains("slo_attainment")));
}

/// A late send stays a refusal in open loop and is recorded in a closed loop.
#[test]
fn late_sends_are_gated_only_where_a_schedule_was_declared() {
    let mut r = bounded_rec(0, 5 * MS, &[(10 * MS, 10 * MS)], 1);
    r.scheduled_ns = 0;
    let open = compute(&[r.clone()], Slo::default(), ValidityLimits::default());
    assert!(open.validity.violations[0].contains("sends lagged their schedule"));
    let closed = ValidityLimits {
        gate_late_sends: false,
        ..ValidityLimits::default()
    };
    let m = compute(&[r], Slo::default(), closed);
    assert!(m.validity.violations.is_empty());
    assert!(!m.schedule.valid);
}

proptest::proptest! {
    /// Whatever the true arrivals inside their intervals, every bounded statistic of the
    /// true samples lies inside the reported bound, and the reported value does too.
    #[test]
    fn the_true_value_lies_inside_the_bound(
        reqs in proptest::collection::vec(
            (0u64..5_000_000, proptest::collection::vec((1u64..8_000_000, 0u64..6_000_000, 0u64..=1_000), 1..12)),
            1..40,
        )
    ) {
        let mut records = Vec::new();
        let mut truths: Vec<(u64, Vec<u64>)> = Vec::new();
        for (i, (send, evs)) in reqs.iter().enumerate() {
            // True arrivals: increasing; each interval [true - a, true + b] clipped to
            // stay ordered (lower ends and upper ends non-decreasing).
            let mut t = *send;
            let (mut lo_prev, mut hi_prev) = (*send, *send);
            let mut ivs = Vec::new();
            let mut truth = Vec::new();
            for (gap, width, frac) in evs {
                t += gap;
                let lo = t.saturating_sub(width * frac / 1_000).max(lo_prev).max(*send);
                let hi = (t + width * (1_000 - frac) / 1_000).max(hi_prev);
                ivs.push((lo, hi));
                truth.push(t);
                lo_prev = lo;
                hi_prev = hi;
            }
            records.push(bounded_rec(i as u64, *send, &ivs, evs.len() as u64));
            truths.push((*send, truth));
        }
        let m = compute(&records, Slo::default(), ValidityLimits::unlimited());
        let exact: Vec<RequestRecord> = truths
            .iter()
            .enumerate()
            .map(|(i, (send, t))| {
                bounded_rec(i as u64, *send, &t.iter().map(|&x| (x, x)).collect::<Vec<_>>(), t.len() as u64)
            })
            .collect();
        let truth = compute(&exact, Slo::default(), ValidityLimits::unlimited());
        let eps = 1e-9;
        for (d, t) in [
            (&m.ttft_ms, &truth.ttft_ms),
            (&m.e2e_ms, &truth.e2e_ms),
            (&m.itl_ms, &truth.itl_ms),
            (&m.tpot_ms, &truth.tpot_ms),
        ] {
            for label in ["p50", "p90", "mean", "min", "max"] {
                let tv = match label {
                    "mean" => t.mean,
                    "min" => t.min,
                    "max" => t.max,
                    l => t.get(l),
                };
                let (Some(tv), Some(b)) = (tv, d.bound_of(label)) else { continue };
                proptest::prop_assert!(b.lower - eps <= tv && tv <= b.upper + eps, "{label}: {tv} outside {b:?}");
                let v = match label {
                    "mean" => d.mean,
                    "min" => d.min,
                    "max" => d.max,
                    l => d.get(l),
                }.unwrap();
                proptest::prop_assert!(b.lower - eps <= v && v <= b.upper + eps, "{label}: reported {v} outside {b:?}");
            }
        }
    }
}

#[test]
fn type7_matches_numpy_linear() {
    let v = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile_type7(&v, 0.5), 2.5);
    assert!((percentile_type7(&v, 0.9) - 3.7).abs() < 1e-12);
    assert_eq!(percentile_type7(&v, 1.0), 4.0);
    assert_eq!(percentile_type7(&[7.0], 0.99), 7.0);
}

#[test]
fn sample_minimums_gate_each_percentile() {
    let d = Distribution::of((0..661).map(f64::from).collect());
    assert!(d.get("p90").is_some());
    assert!(d.get("p99").is_none());
    let d = Distribution::of((0..662).map(f64::from).collect());
    assert!(d.get("p99").is_some());
    let d = Distribution::of((0..63).map(f64::from).collect());
    assert!(d.get("p90").is_none());
    assert!(Distribution::of(vec![]).get("p50").is_none());
}

#[test]
fn rows_are_sorted_unique_and_well_named() {
    let m = compute(&[], Slo::default(), ValidityLimits::default());
    let rows = m.rows();
    for w in rows.windows(2) {
        assert!(w[0].name < w[1].name);
    }
    for r in &rows {
        assert!(r
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c)));
        assert_eq!(r.value.is_none(), r.null_reason.is_some(), "{}", r.name);
    }
}

proptest::proptest! {
    /// Selection gives, bit for bit, the type-7 percentiles, minimum and maximum of a sort,
    /// duplicates, signed zeros and infinities included.
    #[test]
    fn order_stats_equal_those_of_a_sort(
        v in proptest::collection::vec(
            proptest::prop_oneof![
                -1e6f64..1e6,
                proptest::strategy::Just(0.0),
                proptest::strategy::Just(-0.0),
                proptest::strategy::Just(f64::INFINITY),
                proptest::strategy::Just(5.0),
            ],
            0..300,
        ),
        ps in proptest::collection::vec(0.0f64..=1.0, 0..12),
    ) {
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let stats = OrderStats::select(&v, ps.iter().copied().chain(PERCENTILES.iter().map(|p| p.1)));
        proptest::prop_assert_eq!(stats.min().map(f64::to_bits), sorted.first().map(|x| x.to_bits()));
        proptest::prop_assert_eq!(stats.max().map(f64::to_bits), sorted.last().map(|x| x.to_bits()));
        for &p in &ps {
            let want = (!sorted.is_empty()).then(|| percentile_type7(&sorted, p));
            let got = stats.percentile(p);
            proptest::prop_assert!(
                want.map(f64::to_bits) == got.map(f64::to_bits) || (want.is_some_and(f64::is_nan) && got.is_some_and(f64::is_nan)),
                "p {p}: sort {want:?}, selection {got:?}"
            );
        }
    }
}
