//! The oracle result document, `kiln-qual.oracle-result.v1`, and its self-hash.
//!
//! Owns the closed shape of a result (every struct refuses unknown keys when read back), the
//! verdict rule, and writing: the document is built as a value, its `result_sha256` is
//! Kiln's canonical hash of the value without that field (`qual_json::self_digest`, §9.1),
//! and the file is created exclusively (never replacing one), pretty-printed with a trailing
//! newline. One result holds one or more cases (a tensor pair, or one prompt of a greedy run),
//! each with its inputs' identities, per-position metrics, the worst case, the declared
//! tolerances' checks and, for greedy runs, the first divergence.
//!
//! Verdict rule: `failed` with one reason per refused case and per exceeded bound; else
//! `compared` when some compared case declared no tolerance (nothing bounded it: two
//! unrelated tensors compare without failing, so that is never `passed`); else `passed`.

use crate::compare::{PositionMetrics, Summary};
use crate::divergence::Divergence;
use crate::tensor::TensorFormat;
use crate::tolerance::{Check, CheckOutcome, Tolerances};
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

/// Schema id of our results.
pub const RESULT_SCHEMA: &str = "kiln-qual.oracle-result.v1";

/// How much of the vocabulary a tensor shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum View {
    /// Every logit.
    Full,
    /// Only the top `k` log-probabilities per position (an API's `top_logprobs`/`n_probs`).
    TopK {
        /// How many.
        k: usize,
    },
}

/// Identity of one side's tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorRef {
    /// Where it came from (a path, or `llama-server /completion` for a server route).
    pub source: String,
    /// Container.
    pub format: TensorFormat,
    /// `sha256:` of the file bytes (null for in-memory tensors).
    pub file_sha256: Option<String>,
    /// File size (null for in-memory tensors).
    pub bytes: Option<u64>,
    /// `[positions, vocab]`.
    pub shape: [usize; 2],
    /// How much of the vocabulary it shows.
    pub view: View,
}

/// What happened to one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum CaseOutcome {
    /// Compared at every position.
    Compared {
        /// Worst case over positions.
        summary: Summary,
        /// Declared bounds against the worst case.
        checks: Vec<Check>,
        /// Every position.
        positions: Vec<PositionMetrics>,
    },
    /// A candidate top-k view compared with the full reference at every position: only what
    /// the view establishes (see [`crate::topk`]).
    ComparedTopK {
        /// Worst case over positions; `not_established` names what the view cannot establish.
        summary: crate::topk::TopKSummary,
        /// Declared bounds against what is established.
        checks: Vec<Check>,
        /// Declared tolerances the view cannot check (`min_cosine`, `max_mean_abs_error`,
        /// `max_kl_divergence`).
        unchecked_tolerances: Vec<String>,
        /// Every position.
        positions: Vec<crate::topk::TopKPosition>,
    },
    /// Not comparable (non-finite value, shape or token-id mismatch…).
    Refused {
        /// Why.
        reason: String,
    },
}

/// One compared pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseRecord {
    /// Case id (`compare`, or a prompt id).
    pub id: String,
    /// The reference.
    pub reference: TensorRef,
    /// The candidate.
    pub candidate: TensorRef,
    /// Canonical hash of the input token ids (JSON integer list), when known.
    pub input_token_ids_sha256: Option<String>,
    /// Number of input token ids, when known.
    pub input_token_count: Option<usize>,
    /// The comparison.
    pub outcome: CaseOutcome,
    /// Greedy first divergence (greedy runs only).
    pub divergence: Option<Divergence>,
    /// The greedy run itself (greedy runs only; read by `oracle attribute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greedy: Option<GreedyTrace>,
}

/// What a greedy candidate generated for one prompt, with the reference argmax at each step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GreedyTrace {
    /// Canonical hash of the prompt's token ids.
    pub prompt_token_ids_sha256: String,
    /// Number of prompt token ids.
    pub prompt_token_count: usize,
    /// The candidate's greedy tokens.
    pub tokens: Vec<u32>,
    /// Their text as the candidate decoded them.
    pub texts: Vec<String>,
    /// The reference argmax before each step (teacher-forced on the candidate's prefix).
    pub reference_argmax: Vec<u32>,
}

/// Overall status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every case compared within every bound, and every case had a bound.
    Passed,
    /// Every case compared and no bound was exceeded, but some case had no bound declared:
    /// the metrics are reported, nothing was established.
    Compared,
    /// A case was refused or a bound exceeded.
    Failed,
}

/// The verdict with its reasons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Status.
    pub status: Status,
    /// One line per refused case or exceeded bound.
    pub reasons: Vec<String>,
}

/// A whole result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OracleResult {
    /// [`RESULT_SCHEMA`].
    pub schema: String,
    /// Canonical hash of the document without this field.
    pub result_sha256: String,
    /// UTC creation time, `YYYY-MM-DDTHH:MM:SSZ`.
    pub created_at_utc: String,
    /// The producing tool and version.
    pub tool: String,
    /// `k` of the top-k overlap.
    pub top_k: usize,
    /// Declared tolerances.
    pub tolerances: Tolerances,
    /// The cases.
    pub cases: Vec<CaseRecord>,
    /// The verdict (recomputed by `oracle check`).
    pub verdict: Verdict,
}

/// The verdict the cases imply.
pub fn verdict_of(cases: &[CaseRecord]) -> Verdict {
    let mut reasons = Vec::new();
    for c in cases {
        match &c.outcome {
            CaseOutcome::Refused { reason } => reasons.push(format!("case {}: {reason}", c.id)),
            CaseOutcome::Compared { checks, .. } | CaseOutcome::ComparedTopK { checks, .. } => {
                for k in checks
                    .iter()
                    .filter(|k| k.outcome == CheckOutcome::Exceeded)
                {
                    let at = k
                        .position
                        .map(|p| format!(" at position {p}"))
                        .unwrap_or_default();
                    reasons.push(format!(
                        "case {}: {} {} exceeded: observed {}{at}",
                        c.id, k.tolerance, k.bound, k.observed
                    ));
                }
            }
        }
    }
    if cases.is_empty() {
        reasons.push("no case was compared".into());
    }
    let unbounded: Vec<&str> = cases
        .iter()
        .filter(|c| match &c.outcome {
            CaseOutcome::Compared { checks, .. } | CaseOutcome::ComparedTopK { checks, .. } => {
                checks.is_empty()
            }
            CaseOutcome::Refused { .. } => false,
        })
        .map(|c| c.id.as_str())
        .collect();
    if !reasons.is_empty() {
        return Verdict {
            status: Status::Failed,
            reasons,
        };
    }
    if !unbounded.is_empty() {
        return Verdict {
            status: Status::Compared,
            reasons: unbounded
                .iter()
                .map(|id| format!("case {id}: no tolerance was declared, so nothing was checked"))
                .collect(),
        };
    }
    Verdict {
        status: Status::Passed,
        reasons,
    }
}

pub use qual_json::timestamp::now_utc;

/// Canonical hash of a token-id list (the JSON integer array), as Kiln's
/// `input_token_ids_sha256`.
pub fn token_ids_digest(ids: &[i64]) -> String {
    let v = qual_json::Value::Array(
        ids.iter()
            .map(|&i| qual_json::Value::Number(qual_json::Number::Int(i.into())))
            .collect(),
    );
    qual_json::canonical_digest(&v)
}

/// Builds a result with its verdict and self-hash. Returns the document as a JSON value (what
/// is written and hashed) and the typed result.
pub fn build(
    tool: &str,
    top_k: usize,
    tolerances: Tolerances,
    cases: Vec<CaseRecord>,
) -> (serde_json::Value, OracleResult) {
    let mut r = OracleResult {
        schema: RESULT_SCHEMA.into(),
        result_sha256: String::new(),
        created_at_utc: now_utc(),
        tool: tool.into(),
        top_k,
        verdict: verdict_of(&cases),
        tolerances,
        cases,
    };
    let mut v = serde_json::to_value(&r).expect("a result serializes");
    let digest = qual_json::self_digest(&qual_json::Value::from_serde(&v), "result_sha256")
        .expect("a result is an object");
    v["result_sha256"] = serde_json::Value::String(digest.clone());
    r.result_sha256 = digest;
    (v, r)
}

/// Why a result could not be written.
#[derive(Debug, Error)]
#[error("write the oracle result {path}: {source}")]
pub struct WriteError {
    /// The path (escaped).
    pub path: String,
    /// The cause (an existing file is `AlreadyExists`).
    pub source: std::io::Error,
}

/// Writes a document exclusively (never replacing a file), pretty-printed with a newline.
pub fn write_new(path: &Path, doc: &serde_json::Value) -> Result<(), WriteError> {
    let w = |source| WriteError {
        path: qual_json::escape_path(path),
        source,
    };
    // serde's pretty format, not `qual_json::to_pretty_json`: this document's bytes (field
    // order, raw UTF-8, serde's float spelling) are its format; the Python-compatible writer
    // would change them.
    let mut bytes = serde_json::to_vec_pretty(doc).expect("a value serializes");
    bytes.push(b'\n');
    qual_json::publish::write_new(path, &bytes).map_err(w)
}

/// Identity of a tensor file for a result.
pub fn tensor_ref(f: &crate::tensor::TensorFile) -> TensorRef {
    TensorRef {
        source: f.path.display().to_string(),
        format: f.format,
        file_sha256: Some(f.file_sha256.clone()),
        bytes: Some(f.bytes),
        shape: [f.logits.positions, f.logits.vocab],
        view: View::Full,
    }
}

/// Compares two tensor files as one case: token ids must agree where both files (or the
/// declared `token_ids`) carry them; any refusal becomes a `refused` outcome with its reason.
pub fn compare_files(
    id: &str,
    reference: &crate::tensor::TensorFile,
    candidate: &crate::tensor::TensorFile,
    token_ids: Option<&[i64]>,
    top_k: usize,
    tolerances: &Tolerances,
) -> CaseRecord {
    let ids: Vec<&[i64]> = [
        token_ids,
        reference.input_ids.as_deref(),
        candidate.input_ids.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let bound = ids.first().copied();
    let positions = reference.logits.positions.max(candidate.logits.positions);
    let outcome = ids
        .iter()
        .try_for_each(|i| token_ids_cover(i, positions))
        .and_then(|()| {
            ids.windows(2)
                .try_for_each(|w| crate::compare::check_token_ids(w[0], w[1]))
        })
        .and_then(|()| crate::compare::compare(&reference.logits, &candidate.logits, top_k))
        .map(|positions| {
            let summary = crate::compare::summarize(&positions, reference.logits.vocab, top_k)
                .expect("tensors have at least one position");
            CaseOutcome::Compared {
                checks: crate::tolerance::check(tolerances, &summary),
                summary,
                positions,
            }
        })
        .unwrap_or_else(|e| CaseOutcome::Refused {
            reason: e.to_string(),
        });
    CaseRecord {
        id: id.into(),
        reference: tensor_ref(reference),
        candidate: tensor_ref(candidate),
        input_token_ids_sha256: bound.map(token_ids_digest),
        input_token_count: bound.map(<[i64]>::len),
        outcome,
        divergence: None,
        greedy: None,
    }
}

/// A token-id list (declared, or carried by a file) must cover every logit position: a
/// tensor of `positions` rows was produced for at least that many input tokens.
fn token_ids_cover(ids: &[i64], positions: usize) -> Result<(), crate::compare::CompareError> {
    if ids.len() < positions {
        return Err(crate::compare::CompareError::TokenIds {
            detail: format!(
                "{} input token ids for {positions} logit positions (at least {positions} are needed)",
                ids.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_ids_hash_like_python() {
        // json.dumps([1,2,3], separators=(",",":")) == "[1,2,3]"
        assert_eq!(
            token_ids_digest(&[1, 2, 3]),
            qual_json::sha256_prefixed(b"[1,2,3]")
        );
    }

    fn file(rows: &[Vec<f32>]) -> crate::tensor::TensorFile {
        crate::tensor::TensorFile {
            path: "mem".into(),
            format: TensorFormat::Safetensors,
            file_sha256: qual_json::sha256_prefixed(b""),
            bytes: 0,
            logits: crate::tensor::Logits::from_rows(rows).unwrap(),
            input_ids: None,
            metadata: Default::default(),
        }
    }

    #[test]
    fn without_tolerances_unrelated_logits_are_compared_never_passed() {
        let r = file(&[vec![1.0, 2.0, 3.0], vec![3.0, 2.0, 1.0]]);
        let c = file(&[vec![-5.0, 9.0, 0.0], vec![7.0, -7.0, 2.0]]);
        let case = compare_files("x", &r, &c, None, 2, &Tolerances::default());
        let (_, res) = build("t", 2, Tolerances::default(), vec![case.clone()]);
        assert_eq!(res.verdict.status, Status::Compared);
        assert_eq!(
            res.verdict.reasons,
            vec!["case x: no tolerance was declared, so nothing was checked".to_string()]
        );
        // One declared bound makes it a verdict.
        let tol = Tolerances {
            min_cosine: Some(0.99),
            ..Tolerances::default()
        };
        let case = compare_files("x", &r, &c, None, 2, &tol);
        let (_, res) = build("t", 2, tol.clone(), vec![case]);
        assert_eq!(res.verdict.status, Status::Failed);
        let case = compare_files("x", &r, &r, None, 2, &tol);
        let (_, res) = build("t", 2, tol, vec![case]);
        assert_eq!(res.verdict.status, Status::Passed);
    }

    #[test]
    fn fewer_token_ids_than_positions_are_refused() {
        let r = file(&[vec![1.0, 2.0], vec![2.0, 1.0], vec![0.0, 1.0]]);
        let case = compare_files("x", &r, &r, Some(&[5, 6]), 2, &Tolerances::default());
        match case.outcome {
            CaseOutcome::Refused { reason } => assert_eq!(
                reason,
                "compare logits: token-id mismatch: 2 input token ids for 3 logit positions (at least 3 are needed)"
            ),
            other => panic!("{other:?}"),
        }
        let case = compare_files("x", &r, &r, Some(&[5, 6, 7]), 2, &Tolerances::default());
        assert!(matches!(case.outcome, CaseOutcome::Compared { .. }));
    }

    #[test]
    fn an_empty_result_fails() {
        let (_, r) = build("t", 10, Tolerances::default(), vec![]);
        assert_eq!(r.verdict.status, Status::Failed);
    }
}
