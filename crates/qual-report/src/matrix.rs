//! The verdict matrix every format shows: one row per workload × variant × backend × host,
//! ordered by its newest run (newest first), with the newest verdict and the whole history's
//! pass and fail counts (failed runs are counted, never averaged away).

use crate::collect::{ReceiptView, ReportSet};
use std::collections::HashMap;

/// One row of the matrix.
#[derive(Clone, Debug)]
pub struct Row<'a> {
    /// The row's receipts, newest first.
    pub receipts: Vec<&'a ReceiptView>,
}

impl<'a> Row<'a> {
    /// The newest receipt.
    pub fn latest(&self) -> &'a ReceiptView {
        self.receipts[0]
    }

    /// How many runs passed.
    pub fn passed(&self) -> usize {
        self.receipts.iter().filter(|r| r.passed()).count()
    }

    /// How many runs failed.
    pub fn failed(&self) -> usize {
        self.receipts.len() - self.passed()
    }

    /// The row's receipts oldest first (for time axes).
    pub fn chronological(&self) -> impl Iterator<Item = &'a ReceiptView> + '_ {
        self.receipts.iter().rev().copied()
    }
}

/// The rows, newest first (the set's receipts are already newest first).
pub fn rows(set: &ReportSet) -> Vec<Row<'_>> {
    let mut index: HashMap<(&str, &str, &str, &str), usize> = HashMap::new();
    let mut rows: Vec<Row<'_>> = Vec::new();
    for r in &set.receipts {
        let key = (
            r.workload.as_str(),
            r.variant.as_str(),
            r.backend.as_str(),
            r.host.as_str(),
        );
        match index.get(&key) {
            Some(&i) => rows[i].receipts.push(r),
            None => {
                index.insert(key, rows.len());
                rows.push(Row { receipts: vec![r] });
            }
        }
    }
    rows
}

/// Counts for a headline: receipts, passed, failed, hosts, commits.
pub fn counts(set: &ReportSet) -> (usize, usize, usize, usize, usize) {
    let passed = set.receipts.iter().filter(|r| r.passed()).count();
    let hosts: std::collections::HashSet<&str> =
        set.receipts.iter().map(|r| r.host.as_str()).collect();
    let commits: std::collections::HashSet<&str> =
        set.receipts.iter().map(|r| r.commit.as_str()).collect();
    (
        set.receipts.len(),
        passed,
        set.receipts.len() - passed,
        hosts.len(),
        commits.len(),
    )
}

/// One failing result to report: the receipt, the case, which repetition (if known), why.
#[derive(Clone, Debug)]
pub struct Failure<'a> {
    /// The receipt.
    pub receipt: &'a ReceiptView,
    /// The case id.
    pub case: &'a str,
    /// Whether the case is required.
    pub required: bool,
    /// The failing repetitions' numbers (empty without run evidence).
    pub repetitions: Vec<u32>,
    /// The reason (the case's details, else a repetition's, else `no details recorded`).
    pub reason: String,
}

/// Every non-passed, non-skipped case of every receipt, newest receipt first.
pub fn failures(set: &ReportSet) -> Vec<Failure<'_>> {
    let mut out = Vec::new();
    for r in &set.receipts {
        for c in &r.cases {
            if c.status != "failed" {
                continue;
            }
            let failing: Vec<_> = c
                .repetitions
                .iter()
                .filter(|p| p.status == "failed")
                .collect();
            let reason = c
                .details
                .clone()
                .or_else(|| failing.iter().find_map(|p| p.details.clone()))
                .unwrap_or_else(|| "no details recorded".to_owned());
            out.push(Failure {
                receipt: r,
                case: &c.id,
                required: c.required,
                repetitions: failing.iter().map(|p| p.number).collect(),
                reason,
            });
        }
    }
    out
}
