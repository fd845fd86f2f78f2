//! `kiln-qual bench compare A B ...`: several result documents side by side.
//!
//! Owns the strict reading of `kiln-qual.bench-result.v1` documents (strict JSON through
//! `qual-json`, then a closed schema for every part compare reads — the top level and each
//! point's `label` and `intervals`; the other parts are carried opaquely) and the table:
//! per point label and headline metric, each document's mean (± half width of its 95 %
//! t-interval when it has repeats), and for every document after the first its difference
//! from the first, in absolute and relative terms, with the half width of the difference's
//! interval taken as √(hA² + hB²) (a conservative combination of the two t-intervals; null
//! when either side has no interval).

use crate::run::HEADLINE;
use crate::stats::Interval;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Doc {
    schema: String,
    #[allow(dead_code)]
    tool: String,
    #[allow(dead_code)]
    config: serde_json::Value,
    #[allow(dead_code)]
    workload: serde_json::Value,
    points: Vec<DocPoint>,
    #[allow(dead_code)]
    search: serde_json::Value,
    /// Absent from documents written before the verdict was recorded.
    #[allow(dead_code)]
    #[serde(default)]
    verdict: Option<serde_json::Value>,
    #[allow(dead_code)]
    definitions: serde_json::Value,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct DocPoint {
    #[allow(dead_code)]
    point: serde_json::Value,
    label: String,
    #[allow(dead_code)]
    runs: serde_json::Value,
    intervals: BTreeMap<String, Interval>,
    #[allow(dead_code)]
    passes: bool,
}

/// One comparison cell.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Cell {
    /// The document's interval (null when the metric is absent).
    pub value: Option<Interval>,
    /// Value − the first document's value.
    pub difference: Option<f64>,
    /// Difference / first value.
    pub relative: Option<f64>,
    /// Half width of the difference's interval.
    pub difference_half_width: Option<f64>,
}

/// One row: a point label and a metric across documents.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Row {
    /// Point label.
    pub point: String,
    /// Metric.
    pub metric: String,
    /// One cell per document.
    pub cells: Vec<Cell>,
}

/// Reads and compares the documents.
pub fn compare(paths: &[&Path]) -> Result<Vec<Row>, String> {
    let mut docs = Vec::new();
    for p in paths {
        let bytes = qual_json::read_file_limited(p, 512 * 1024 * 1024)
            .map_err(|e| format!("read {}: {e}", qual_json::escape_path(p)))?;
        qual_json::from_slice(&bytes)
            .map_err(|e| format!("read {}: {e}", qual_json::escape_path(p)))?;
        let d: Doc = serde_json::from_slice(&bytes)
            .map_err(|e| format!("read {}: {e}", qual_json::escape_path(p)))?;
        if d.schema != "kiln-qual.bench-result.v1" {
            return Err(format!(
                "read {}: /schema: expected \"kiln-qual.bench-result.v1\"",
                qual_json::escape_path(p)
            ));
        }
        docs.push(d);
    }
    let mut labels: Vec<String> = Vec::new();
    for d in &docs {
        for p in &d.points {
            if !labels.contains(&p.label) {
                labels.push(p.label.clone());
            }
        }
    }
    let mut rows = Vec::new();
    for label in labels {
        for metric in HEADLINE {
            let vals: Vec<Option<Interval>> = docs
                .iter()
                .map(|d| {
                    d.points
                        .iter()
                        .find(|p| p.label == label)
                        .and_then(|p| p.intervals.get(metric).cloned())
                })
                .collect();
            if vals.iter().all(Option::is_none) {
                continue;
            }
            let base = vals[0].clone();
            let cells = vals
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let diff = (i > 0)
                        .then(|| Some(v.as_ref()?.mean - base.as_ref()?.mean))
                        .flatten();
                    Cell {
                        difference: diff,
                        relative: diff.and_then(|d| {
                            let b = base.as_ref()?.mean;
                            (b != 0.0).then(|| d / b)
                        }),
                        difference_half_width: (i > 0)
                            .then(|| {
                                let (a, b) = (base.as_ref()?.half_width?, v.as_ref()?.half_width?);
                                Some((a * a + b * b).sqrt())
                            })
                            .flatten(),
                        value: v,
                    }
                })
                .collect();
            rows.push(Row {
                point: label.clone(),
                metric: metric.to_string(),
                cells,
            });
        }
    }
    Ok(rows)
}
