//! Failed requests grouped by why they failed: per kind (`qual_serve::record::failure_kind`)
//! the count, one example reason with its request, and the indices of the failing requests
//! as the records name them (`record.index`), so a reader goes from the summary to the
//! records without reading every line. Computed from a run's records after the run, never on
//! the request path.

use qual_serve::record::{failure_kind, Outcome, Phase, RequestRecord};
use serde::Serialize;
use std::collections::BTreeMap;

/// At most this many request indices are listed per kind (the count is always whole).
pub const MAX_LISTED: usize = 20;

/// The failures of one kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailureGroup {
    /// The stable kind (`missing_done`, `http_status_500`, …).
    pub kind: String,
    /// Failed measured requests of this kind.
    pub count: usize,
    /// The first failing request's reason, as written in its record.
    pub example: String,
    /// That request's index (`record.index` in `--records`).
    pub example_index: u64,
    /// That request's workload entry (`record.corpus_id`).
    pub example_corpus_id: String,
    /// The first [`MAX_LISTED`] failing requests' indices, in order.
    pub request_indices: Vec<u64>,
}

/// The failed measured requests of `records`, grouped by kind, most frequent first (ties by
/// kind).
pub fn group(records: &[RequestRecord]) -> Vec<FailureGroup> {
    let mut by_kind: BTreeMap<String, FailureGroup> = BTreeMap::new();
    for r in records.iter().filter(|r| r.phase == Phase::Measured) {
        let Outcome::Failed { reason } = &r.outcome else {
            continue;
        };
        let kind = failure_kind(reason);
        let g = by_kind.entry(kind.clone()).or_insert_with(|| FailureGroup {
            kind,
            count: 0,
            example: reason.clone(),
            example_index: r.index,
            example_corpus_id: r.corpus_id.clone(),
            request_indices: Vec::new(),
        });
        g.count += 1;
        if g.request_indices.len() < MAX_LISTED {
            g.request_indices.push(r.index);
        }
    }
    let mut groups: Vec<FailureGroup> = by_kind.into_values().collect();
    groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.kind.cmp(&b.kind)));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use qual_serve::record::Endpoint;

    fn rec(index: u64, phase: Phase, reason: Option<&str>) -> RequestRecord {
        let mut r = RequestRecord::scheduled(index, &format!("c{index}"), phase, Endpoint::Chat, 0);
        r.outcome = match reason {
            Some(reason) => Outcome::Failed {
                reason: reason.into(),
            },
            None => Outcome::Succeeded,
        };
        r
    }

    #[test]
    fn groups_count_measured_failures_by_kind_with_one_example() {
        let done = "stream ended without data: [DONE]";
        let mut records = vec![
            rec(0, Phase::Warmup, Some(done)),
            rec(1, Phase::Measured, None),
            rec(2, Phase::Measured, Some("http status 500: a")),
            rec(3, Phase::Measured, Some(done)),
            rec(4, Phase::Measured, Some("http status 500: b")),
            rec(5, Phase::Measured, Some("http status 503: c")),
        ];
        for i in 6..40 {
            records.push(rec(i, Phase::Measured, Some("http status 500: more")));
        }
        let g = group(&records);
        let kinds: Vec<(&str, usize)> = g.iter().map(|g| (g.kind.as_str(), g.count)).collect();
        assert_eq!(
            kinds,
            [
                ("http_status_500", 36),
                ("http_status_503", 1),
                ("missing_done", 1)
            ]
        );
        assert_eq!(g[0].example, "http status 500: a");
        assert_eq!(
            (g[0].example_index, g[0].example_corpus_id.as_str()),
            (2, "c2")
        );
        assert_eq!(g[0].request_indices.len(), MAX_LISTED);
        assert_eq!(&g[0].request_indices[..3], &[2, 4, 6]);
        assert_eq!(g[2].request_indices, [3]);
    }
}
