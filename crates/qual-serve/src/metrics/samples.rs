//! One request's samples (TTFT, E2E, ITL, TPOT, decode rate), each with the interval the
//! arrival intervals of its content events allow, and whether it meets the declared SLOs.

use super::*;

/// The arrival interval of content event `i` of `r`, in ns on the record's clock: the
/// stamp less its recorded width (none: a point).
pub(super) fn event_interval(r: &RequestRecord, i: usize) -> (f64, f64) {
    let hi = r.content_event_ns[i];
    let lo = r.content_event_lower(i).unwrap_or(hi);
    (lo as f64, hi as f64)
}

/// The arrival intervals of every content event of `r` (ns, `lower ..= upper`, in order):
/// what [`GapIntervals`] bounds the pooled gaps jointly from.
pub fn event_intervals_ns(r: &RequestRecord) -> Vec<(u64, u64)> {
    (0..r.content_event_ns.len())
        .map(|i| {
            let hi = r.content_event_ns[i];
            (r.content_event_lower(i).unwrap_or(hi), hi)
        })
        .collect()
}

/// Per-request samples, each with the interval the arrival intervals allow (ms).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSamples {
    /// Send to the first content event.
    pub ttft: BoundedSample,
    /// Send to the last content event.
    pub e2e: BoundedSample,
    /// Each gap between consecutive content events.
    pub itl: Vec<BoundedSample>,
    /// The largest gap.
    pub max_itl: Option<BoundedSample>,
}

/// The samples of one request sent at `send` with at least one content event (the one
/// definition `serve`, `bench` and `campaign` share).
pub fn request_samples(r: &RequestRecord, send: u64) -> RequestSamples {
    let send = send as f64;
    let ms_of = |ns: f64| ns / 1e6;
    let mid = |(lo, hi): (f64, f64)| (lo + hi) / 2.0;
    let n = r.content_event_ns.len();
    let iv: Vec<(f64, f64)> = (0..n).map(|i| event_interval(r, i)).collect();
    let since_send = |(lo, hi): (f64, f64)| BoundedSample {
        lower: ms_of((lo - send).max(0.0)),
        value: ms_of((mid((lo, hi)) - send).max(0.0)),
        upper: ms_of((hi - send).max(0.0)),
    };
    let itl: Vec<BoundedSample> = iv
        .windows(2)
        .map(|w| BoundedSample {
            lower: ms_of((w[1].0 - w[0].1).max(0.0)),
            value: ms_of((mid(w[1]) - mid(w[0])).max(0.0)),
            upper: ms_of((w[1].1 - w[0].0).max(0.0)),
        })
        .collect();
    let max_itl = itl.iter().copied().reduce(|a, b| BoundedSample {
        lower: a.lower.max(b.lower),
        value: a.value.max(b.value),
        upper: a.upper.max(b.upper),
    });
    RequestSamples {
        ttft: since_send(iv[0]),
        e2e: since_send(iv[n - 1]),
        itl,
        max_itl,
    }
}

/// TPOT of one request from its first and last arrival intervals (`tokens` ≥ 2).
pub fn tpot_sample(r: &RequestRecord, tokens: u64) -> BoundedSample {
    let n = r.content_event_ns.len();
    let (f_lo, f_hi) = event_interval(r, 0);
    let (l_lo, l_hi) = event_interval(r, n - 1);
    let per = |ns: f64| (ns.max(0.0) / 1e6) / (tokens - 1) as f64;
    BoundedSample {
        lower: per(l_lo - f_hi),
        value: per((l_lo + l_hi) / 2.0 - (f_lo + f_hi) / 2.0),
        upper: per(l_hi - f_lo),
    }
}

/// Decode rate (tokens/s) of a TPOT sample; unbounded above where TPOT may be 0.
pub(super) fn decode_sample(tp: BoundedSample) -> BoundedSample {
    let rate = |ms: f64| {
        if ms > 0.0 {
            1000.0 / ms
        } else {
            f64::INFINITY
        }
    };
    BoundedSample {
        lower: rate(tp.upper),
        value: rate(tp.value),
        upper: rate(tp.lower),
    }
}

/// Whether a request meets every SLO, for its reported values and at the two ends of what
/// its intervals allow: (`meets_reported`, `meets_surely`, `meets_possibly`).
pub(super) fn slo_verdicts(slo: &Slo, s: &RequestSamples) -> (bool, bool, bool) {
    let check = |pick: fn(&BoundedSample) -> f64| {
        slo.ttft_ms.is_none_or(|b| pick(&s.ttft) <= b)
            && slo.e2e_ms.is_none_or(|b| pick(&s.e2e) <= b)
            && slo
                .itl_ms
                .is_none_or(|b| s.max_itl.as_ref().is_none_or(|g| pick(g) <= b))
    };
    (check(|x| x.value), check(|x| x.upper), check(|x| x.lower))
}
