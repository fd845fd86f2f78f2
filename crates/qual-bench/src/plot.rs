//! What a report draws of one run, bounded whatever the run's size: each latency
//! distribution's quantiles at every percent (its CDF at percent steps) and a request
//! timeline (send → first content → last content per measured request, evenly sampled above
//! [`MAX_TIMELINE`] requests). Computed after the run from the samples the distributions
//! summarise (`qual_serve::metrics::request_samples`, reported values), never on the request
//! path, and cheaply: the quantiles of a distribution with more than [`MAX_QUANTILE_SAMPLES`]
//! samples (pooled gaps of a long run) are those of every k-th sample in record order, and
//! `quantiles_from` says how many were used.

use qual_serve::metrics::{OrderStats, RequestSamples};
use qual_serve::record::{Phase, RequestRecord};
use serde::Serialize;
use std::collections::BTreeMap;

/// At most this many requests are kept in a run's timeline (the rest are counted).
pub const MAX_TIMELINE: usize = 500;

/// At most this many samples of a distribution enter its quantiles (every k-th above).
pub const MAX_QUANTILE_SAMPLES: usize = 65_536;

/// The plot data of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Plot {
    /// Per distribution (`ttft_ms`, `itl_ms`, `e2e_ms`; the defined ones with samples), the
    /// type-7 quantiles at 0, 0.01, …, 1 of its samples (101 values, ascending).
    pub quantiles: BTreeMap<String, Vec<f64>>,
    /// Per distribution in `quantiles`, how many samples its quantiles were taken over (all of
    /// them up to [`MAX_QUANTILE_SAMPLES`], otherwise every k-th, k = ⌈n / that⌉).
    pub quantiles_from: BTreeMap<String, usize>,
    /// Measured requests in send order: every one when there are at most [`MAX_TIMELINE`],
    /// otherwise every k-th (k = ⌈measured / [`MAX_TIMELINE`]⌉), the first included.
    pub timeline: Vec<TimelineRow>,
    /// Measured requests with a send time (how many the timeline was drawn from).
    pub timeline_of: usize,
}

/// One request of a timeline: milliseconds since the run's first measured send.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineRow {
    /// `record.index` in `--records`.
    pub index: u64,
    /// Sent.
    pub send_ms: f64,
    /// First content event (null: none, or the request failed).
    pub first_ms: Option<f64>,
    /// Last content event (null as `first_ms`).
    pub last_ms: Option<f64>,
    /// Whether the request succeeded.
    pub succeeded: bool,
}

/// Every k-th of `n` values (k = ⌈n / [`MAX_QUANTILE_SAMPLES`]⌉), the first included.
fn strided(n: usize, values: impl Iterator<Item = f64>) -> Vec<f64> {
    let step = n.div_ceil(MAX_QUANTILE_SAMPLES).max(1);
    values.step_by(step).collect()
}

impl Plot {
    /// The plot data of a run: `samples` are those of its successful measured requests with
    /// content (`stream`: TTFT and ITL are defined), `records` all of its records.
    pub fn of(samples: &[&RequestSamples], stream: bool, records: &[RequestRecord]) -> Plot {
        let mut plot = Plot::default();
        let n = samples.len();
        let gaps: usize = samples.iter().map(|s| s.itl.len()).sum();
        plot.put("e2e_ms", strided(n, samples.iter().map(|s| s.e2e.value)));
        if stream {
            plot.put("ttft_ms", strided(n, samples.iter().map(|s| s.ttft.value)));
            // Every k-th pooled gap, indexed per request (not walking all of them).
            let step = gaps.div_ceil(MAX_QUANTILE_SAMPLES).max(1);
            let mut itl = Vec::with_capacity(gaps.div_ceil(step));
            let mut at = 0usize;
            for s in samples {
                let skip = (step - at % step) % step;
                itl.extend(s.itl.iter().skip(skip).step_by(step).map(|x| x.value));
                at += s.itl.len();
            }
            plot.put("itl_ms", itl);
        }
        plot.timeline(records);
        plot
    }

    fn put(&mut self, name: &str, xs: Vec<f64>) {
        if xs.is_empty() {
            return;
        }
        let grid = (0..=100).map(|i| f64::from(i) / 100.0);
        let stats = OrderStats::select(&xs, grid.clone());
        let q: Vec<f64> = grid.filter_map(|p| stats.percentile(p)).collect();
        self.quantiles.insert(name.to_string(), q);
        self.quantiles_from.insert(name.to_string(), xs.len());
    }

    fn timeline(&mut self, records: &[RequestRecord]) {
        let mut sent: Vec<(&RequestRecord, u64)> = records
            .iter()
            .filter(|r| r.phase == Phase::Measured)
            .filter_map(|r| Some((r, r.send_ns?)))
            .collect();
        sent.sort_by_key(|(r, send)| (*send, r.index));
        let t0 = sent.first().map_or(0, |(_, s)| *s);
        let ms = |t: u64| t.saturating_sub(t0) as f64 / 1e6;
        let step = sent.len().div_ceil(MAX_TIMELINE).max(1);
        self.timeline = sent
            .iter()
            .step_by(step)
            .map(|(r, send)| {
                let ok = r.outcome.is_success();
                let content = |t: Option<&u64>| t.filter(|_| ok).map(|t| ms(*t));
                TimelineRow {
                    index: r.index,
                    send_ms: ms(*send),
                    first_ms: content(r.content_event_ns.first()),
                    last_ms: content(r.content_event_ns.last()),
                    succeeded: ok,
                }
            })
            .collect();
        self.timeline_of = sent.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qual_serve::metrics::request_samples;
    use qual_serve::record::{Endpoint, Outcome};

    fn of(records: &[RequestRecord], stream: bool) -> Plot {
        let samples: Vec<RequestSamples> = records
            .iter()
            .filter(|r| r.phase == Phase::Measured && r.outcome.is_success())
            .filter(|r| !r.content_event_ns.is_empty())
            .map(|r| request_samples(r, r.send_ns.unwrap()))
            .collect();
        let refs: Vec<&RequestSamples> = samples.iter().collect();
        Plot::of(&refs, stream, records)
    }

    fn rec(index: u64, send: u64, events: &[u64], ok: bool) -> RequestRecord {
        let mut r = RequestRecord::scheduled(index, "c", Phase::Measured, Endpoint::Chat, 0);
        r.send_ns = Some(send);
        r.content_event_ns = events.to_vec();
        r.content_event_width_ns = vec![0; events.len()];
        r.outcome = if ok {
            Outcome::Succeeded
        } else {
            Outcome::Failed {
                reason: "http status 500: x".into(),
            }
        };
        r
    }

    #[test]
    fn quantiles_and_timeline_are_bounded_and_in_send_order() {
        let mut records = vec![
            rec(1, 2_000_000, &[12_000_000, 14_000_000], true),
            rec(0, 1_000_000, &[11_000_000, 13_000_000, 15_000_000], true),
            rec(2, 3_000_000, &[], false),
        ];
        let mut warm = rec(9, 0, &[1], true);
        warm.phase = Phase::Warmup;
        records.push(warm);
        let p = of(&records, true);
        assert_eq!(p.quantiles["ttft_ms"].len(), 101);
        assert_eq!(p.quantiles["ttft_ms"][0], 10.0);
        assert_eq!(p.quantiles["ttft_ms"][100], 10.0);
        assert_eq!(p.quantiles["itl_ms"], vec![2.0; 101]);
        assert_eq!(p.quantiles["e2e_ms"][100], 14.0);
        let idx: Vec<u64> = p.timeline.iter().map(|t| t.index).collect();
        assert_eq!(idx, [0, 1, 2]);
        assert_eq!(p.timeline[0].send_ms, 0.0);
        assert_eq!(p.timeline[1].first_ms, Some(11.0));
        assert_eq!(
            (p.timeline[2].first_ms, p.timeline[2].succeeded),
            (None, false)
        );
        assert_eq!(p.timeline_of, 3);
        assert!(!of(&records, false).quantiles.contains_key("ttft_ms"));
        let many: Vec<RequestRecord> = (0..1201).map(|i| rec(i, i, &[i + 5], true)).collect();
        let p = of(&many, true);
        assert_eq!((p.timeline.len(), p.timeline_of), (401, 1201));
        assert_eq!(p.timeline[1].index, 3);
        assert_eq!(p.quantiles_from["e2e_ms"], 1201);
        assert_eq!(strided(200_000, (0..200_000).map(f64::from)).len(), 50_000);
    }

    #[test]
    fn pooled_gaps_above_the_cap_are_every_kth_in_record_order() {
        // 700 requests of 2..=200 gaps each (70 000+ gaps: every 2nd is kept).
        let records: Vec<RequestRecord> = (0..700u64)
            .map(|i| {
                let events: Vec<u64> = (0..=(2 + i % 199)).map(|k| 1_000 + k * (k + i)).collect();
                rec(i, 0, &events, true)
            })
            .collect();
        let p = of(&records, true);
        let all: Vec<f64> = records
            .iter()
            .flat_map(|r| {
                r.content_event_ns
                    .windows(2)
                    .map(|w| (w[1] - w[0]) as f64 / 1e6)
            })
            .collect();
        assert!(all.len() > MAX_QUANTILE_SAMPLES);
        let mut want = Plot::default();
        want.put("itl_ms", strided(all.len(), all.iter().copied()));
        assert_eq!(p.quantiles_from["itl_ms"], all.len().div_ceil(2));
        assert_eq!(p.quantiles["itl_ms"], want.quantiles["itl_ms"]);
    }
}
