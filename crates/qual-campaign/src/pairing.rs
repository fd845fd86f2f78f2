//! Reference pairing (spec §5.6): a candidate receipt against the reference engine's receipt
//! of the same profile.
//!
//! The reference must be a valid, self-hash-verified receipt with the same workload
//! fingerprint, model content digest, memory source and interval; otherwise the comparison is
//! refused (a completion failure, never a silent pass). Then, for the sorted union of
//! (concurrency, repeat): `missing_run`, `prompt_mismatch`, `prompt_token_mismatch` and —
//! unless the profile compares inputs only — `output_mismatch` with, per request, the
//! differing evidence fields and, where both sides kept exact bytes, the first divergent
//! byte of reasoning and content.

use crate::profiles::ComparisonMode;
use crate::records::{
    self, Comparison, Match, Mismatch, OutputEvidence, Receipt, RequestMismatch, Row, VerdictEffect,
};
use std::collections::BTreeSet;
use std::path::Path;

/// How the reference bears on the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceRole {
    /// A mismatch fails the receipt.
    QualificationGate,
    /// Recorded only.
    Evidence,
}

impl ReferenceRole {
    /// `qualification_gate` or `evidence`.
    pub fn name(self) -> &'static str {
        match self {
            ReferenceRole::QualificationGate => "qualification_gate",
            ReferenceRole::Evidence => "evidence",
        }
    }
}

/// Reads and verifies a receipt (schema and self-hash); returns it with its file bytes.
pub fn read_receipt(path: &Path) -> Result<(Vec<u8>, Receipt), String> {
    let bytes = qual_json::read_file_limited(path, records::MAX_RECORD_BYTES).map_err(|e| {
        records::ReadError::Load {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
        .to_string()
    })?;
    let r = receipt_from_bytes(path, &bytes)?;
    Ok((bytes, r))
}

/// Checks the bytes of a campaign receipt already read from `path` (which names it in
/// messages) as [`read_receipt`] does: schema and self-hash.
pub fn receipt_from_bytes(path: &Path, bytes: &[u8]) -> Result<Receipt, String> {
    let (doc, r): (_, Receipt) = records::parse_record(path, bytes).map_err(|e| e.to_string())?;
    if r.schema != records::RECEIPT_SCHEMA {
        return Err(format!(
            "{}: /schema: expected {}",
            path.display(),
            qual_json::show::quote(records::RECEIPT_SCHEMA)
        ));
    }
    let want = records::document_hash(&doc, "receipt_sha256");
    if r.receipt_sha256 != want {
        return Err(format!(
            "{}: /receipt_sha256 does not match the content (recomputed {want})",
            path.display()
        ));
    }
    Ok(r)
}

/// First differing byte, or the shorter length when one is a prefix; `None` when equal.
pub fn first_divergent_byte(a: &[u8], b: &[u8]) -> Option<u64> {
    if a == b {
        return None;
    }
    Some(
        a.iter()
            .zip(b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len())) as u64,
    )
}

fn request_mismatch(
    index: u64,
    exp: Option<&OutputEvidence>,
    act: Option<&OutputEvidence>,
) -> Option<RequestMismatch> {
    let (e, a) = match (exp, act) {
        (Some(e), Some(a)) => (e, a),
        (None, None) => return None,
        (e, a) => {
            return Some(RequestMismatch {
                index,
                fields: vec!["missing".into()],
                expected_output_sha256: e.map(|x| x.output_sha256.clone()),
                actual_output_sha256: a.map(|x| x.output_sha256.clone()),
                exact_output_compared: false,
                reasoning_first_divergent_utf8_byte: None,
                content_first_divergent_utf8_byte: None,
            })
        }
    };
    let mut fields = Vec::new();
    let mut diff = |name: &str, d: bool| {
        if d {
            fields.push(name.to_string());
        }
    };
    diff(
        "completion_tokens",
        e.completion_tokens != a.completion_tokens,
    );
    diff("content_sha256", e.content_sha256 != a.content_sha256);
    diff(
        "content_utf8_bytes",
        e.content_utf8_bytes != a.content_utf8_bytes,
    );
    diff("finish_reason", e.finish_reason != a.finish_reason);
    diff("output_sha256", e.output_sha256 != a.output_sha256);
    diff("reasoning_sha256", e.reasoning_sha256 != a.reasoning_sha256);
    diff(
        "reasoning_utf8_bytes",
        e.reasoning_utf8_bytes != a.reasoning_utf8_bytes,
    );
    if fields.is_empty() {
        return None;
    }
    let exact = e.exact_output.as_ref().zip(a.exact_output.as_ref());
    Some(RequestMismatch {
        index,
        fields,
        expected_output_sha256: Some(e.output_sha256.clone()),
        actual_output_sha256: Some(a.output_sha256.clone()),
        exact_output_compared: exact.is_some(),
        reasoning_first_divergent_utf8_byte: exact.and_then(|(x, y)| {
            first_divergent_byte(x.reasoning.as_bytes(), y.reasoning.as_bytes())
        }),
        content_first_divergent_utf8_byte: exact
            .and_then(|(x, y)| first_divergent_byte(x.content.as_bytes(), y.content.as_bytes())),
    })
}

fn compare_row(reference: &Row, current: &Row, mode: ComparisonMode, out: &mut Vec<Mismatch>) {
    let (c, r) = (current.concurrency, current.repeat);
    if reference.prompt_set_sha256 != current.prompt_set_sha256 {
        out.push(Mismatch::PromptMismatch {
            concurrency: c,
            repeat: r,
            expected: reference.prompt_set_sha256.clone(),
            actual: current.prompt_set_sha256.clone(),
        });
    }
    if reference.prompt_token_counts != current.prompt_token_counts {
        out.push(Mismatch::PromptTokenMismatch {
            concurrency: c,
            repeat: r,
            expected: reference.prompt_token_counts.clone(),
            actual: current.prompt_token_counts.clone(),
        });
    }
    if mode == ComparisonMode::InputsOnly {
        return;
    }
    let mut req = Vec::new();
    for i in 0..current.request_count.max(reference.request_count) {
        let e = reference.outputs.iter().find(|o| o.index == i);
        let a = current.outputs.iter().find(|o| o.index == i);
        if let Some(m) = request_mismatch(i, e, a) {
            req.push(m);
        }
    }
    if !req.is_empty() {
        out.push(Mismatch::OutputMismatch {
            concurrency: c,
            repeat: r,
            mismatch_count: req.len() as u64,
            mismatched_request_indices: req.iter().map(|m| m.index).collect(),
            request_mismatches: req,
        });
    }
}

/// Compares `current` with the reference receipt at `path`. `Err` = refused.
pub fn compare(current: &Receipt, path: &Path, role: ReferenceRole) -> Result<Comparison, String> {
    let (bytes, _) = read_receipt(path)?;
    compare_bytes(current, path, &bytes, role)
}

/// [`compare`] against a reference receipt already read from `path`.
pub fn compare_bytes(
    current: &Receipt,
    path: &Path,
    bytes: &[u8],
    role: ReferenceRole,
) -> Result<Comparison, String> {
    let reference = receipt_from_bytes(path, bytes)?;
    let mut refuse = Vec::new();
    if reference.workload_fingerprint != current.workload_fingerprint {
        refuse.push(format!(
            "workload fingerprint {} differs from the reference's {}",
            current.workload_fingerprint, reference.workload_fingerprint
        ));
    }
    let digest = |r: &Receipt| {
        r.engine
            .model_identity
            .as_ref()
            .map(|m| m.content_sha256.clone())
    };
    match (digest(current), digest(&reference)) {
        (Some(a), Some(b)) if a == b => {}
        (Some(a), Some(b)) => refuse.push(format!(
            "model content {a} differs from the reference's {b}"
        )),
        (None, None) => refuse.push(
            "neither campaign records its model's content, so they cannot be shown to serve the same model; run both with --model-path DIR"
                .into(),
        ),
        (None, Some(b)) => refuse.push(format!(
            "this campaign records no model content (it was run without --model-path), the reference's is {b}; run it again with --model-path DIR"
        )),
        (Some(a), None) => refuse.push(format!(
            "the reference records no model content (it was run without --model-path), this campaign's is {a}; run the reference again with --model-path DIR"
        )),
    }
    if reference.memory_sampler.source != current.memory_sampler.source
        || reference.memory_sampler.interval_ms != current.memory_sampler.interval_ms
    {
        refuse.push(format!(
            "memory source {} every {} ms differs from the reference's {} every {} ms",
            current.memory_sampler.source,
            current.memory_sampler.interval_ms,
            reference.memory_sampler.source,
            reference.memory_sampler.interval_ms
        ));
    }
    if !refuse.is_empty() {
        return Err(format!(
            "the reference receipt {} is not comparable: {}",
            path.display(),
            refuse.join("; ")
        ));
    }
    let keys: BTreeSet<(u64, u64)> = current
        .runs
        .iter()
        .chain(&reference.runs)
        .map(|r| (r.concurrency, r.repeat))
        .collect();
    let mode = current.workload.comparison_mode;
    let mut mismatches = Vec::new();
    for (c, r) in keys {
        let find = |rows: &[Row]| {
            rows.iter()
                .find(|x| x.concurrency == c && x.repeat == r)
                .cloned()
        };
        match (find(&reference.runs), find(&current.runs)) {
            (Some(e), Some(a)) => compare_row(&e, &a, mode, &mut mismatches),
            (None, _) => mismatches.push(Mismatch::MissingRun {
                concurrency: c,
                repeat: r,
                missing_from: "reference".into(),
            }),
            (_, None) => mismatches.push(Mismatch::MissingRun {
                concurrency: c,
                repeat: r,
                missing_from: "candidate".into(),
            }),
        }
    }
    Ok(Comparison {
        reference_receipt: path.display().to_string(),
        reference_receipt_sha256: qual_json::sha256_prefixed(bytes),
        reference_engine: reference.engine.name.clone(),
        result: if mismatches.is_empty() {
            Match::Matched
        } else {
            Match::Mismatched
        },
        mismatches,
        comparison_mode: mode,
        reference_role: role.name().into(),
        verdict_effect: match role {
            ReferenceRole::QualificationGate => VerdictEffect::Required,
            ReferenceRole::Evidence => VerdictEffect::EvidenceOnly,
        },
    })
}

/// Pairs two receipt files (`kiln-qual compare` on campaign receipts): the candidate's rows
/// against the baseline as its reference.
pub fn compare_files(baseline: &Path, candidate: &Path) -> Result<Comparison, String> {
    let (_, current) = read_receipt(candidate)?;
    compare(&current, baseline, ReferenceRole::QualificationGate)
}

/// [`compare_files`] over receipts already read (each path only names its bytes).
pub fn compare_read(
    baseline: (&Path, &[u8]),
    candidate: (&Path, &[u8]),
) -> Result<Comparison, String> {
    let current = receipt_from_bytes(candidate.0, candidate.1)?;
    compare_bytes(
        &current,
        baseline.0,
        baseline.1,
        ReferenceRole::QualificationGate,
    )
}

/// One line per mismatch, for a terminal (escape before printing).
pub fn describe(m: &Mismatch) -> String {
    match m {
        Mismatch::MissingRun {
            concurrency,
            repeat,
            missing_from,
        } => format!("c={concurrency} r={repeat}: run missing from the {missing_from}"),
        Mismatch::PromptMismatch {
            concurrency,
            repeat,
            ..
        } => format!("c={concurrency} r={repeat}: prompt sets differ"),
        Mismatch::PromptTokenMismatch {
            concurrency,
            repeat,
            expected,
            actual,
        } => {
            format!("c={concurrency} r={repeat}: prompt tokens {actual:?}, reference {expected:?}")
        }
        Mismatch::OutputMismatch {
            concurrency,
            repeat,
            request_mismatches,
            ..
        } => {
            let parts: Vec<String> = request_mismatches
                .iter()
                .map(|q| match q.content_first_divergent_utf8_byte {
                    Some(b) => format!("request {} from content byte {b}", q.index),
                    None => format!("request {} ({})", q.index, q.fields.join(", ")),
                })
                .collect();
            format!(
                "c={concurrency} r={repeat}: outputs differ: {}",
                parts.join("; ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_divergent_bytes_locate_the_difference() {
        assert_eq!(first_divergent_byte(b"alpha", b"alphi"), Some(4));
        assert_eq!(first_divergent_byte("café".as_bytes(), b"cafe"), Some(3));
        assert_eq!(first_divergent_byte(b"ab", b"abc"), Some(2));
        assert_eq!(first_divergent_byte(b"x", b"x"), None);
    }
}
