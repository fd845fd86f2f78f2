//! Two-candidate attribution (§9.5) over two greedy oracle results: `oracle attribute`.
//!
//! Owns the attribution document, `kiln-qual.oracle-attribution.v1`, and its rule. Input: two
//! `kiln-qual.oracle-result.v1` documents written by `oracle greedy` for the same prompt set
//! (two engines, or one engine on two model files), each valid under `oracle check` and
//! carrying, per prompt, the candidate's greedy tokens and the reference argmax teacher-forced
//! on that candidate's prefix ([`crate::result::GreedyTrace`]). Per prompt (matched by id; the
//! prompt token ids must hash the same):
//! - the first step where the two candidates' tokens differ; up to and including it both
//!   prefixes are identical, so both reference runs saw the same input and must agree on the
//!   argmax at every step through it — otherwise the prompt is `refused` (the references are
//!   not the same computation, and no attribution is possible);
//! - at that step, [`crate::divergence::attribute`]: `candidate_a` or `candidate_b` when
//!   exactly one chose the reference argmax, else `neither`;
//! - no divergence in the steps both generated: `identical`.
//!
//! The document is self-hashed like every oracle result (`qual_json::self_digest`, §9.1) and
//! created exclusively; `oracle check` validates it (self-hash, closed shape, every verdict
//! and the counts recomputed; with `--verify-inputs`, the whole attribution recomputed from the
//! two source results, which must still carry their recorded hashes).

use crate::divergence::{attribute, Attribution};
use crate::result::{CaseRecord, GreedyTrace, OracleResult};
use serde::{Deserialize, Serialize};
use std::path::Path;
use thiserror::Error;

/// Schema id of an attribution document.
pub const ATTRIBUTION_SCHEMA: &str = "kiln-qual.oracle-attribution.v1";

/// One of the two greedy results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Path of the oracle result.
    pub path: String,
    /// Its `result_sha256`.
    pub result_sha256: String,
    /// The candidate it describes (its first case's candidate source).
    pub candidate: String,
}

/// A token as one candidate or the reference saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    /// Token id.
    pub token_id: u32,
    /// Text as the candidate decoded it, when known.
    pub text: Option<String>,
}

/// What happened to one prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum PromptOutcome {
    /// The two candidates generated the same tokens over every step both generated.
    Identical {
        /// Steps compared.
        steps: usize,
    },
    /// The candidates diverged; the §9.5 verdict at the first divergent step.
    Diverged {
        /// First step where the candidates' tokens differ.
        step: usize,
        /// Candidate A's token there.
        candidate_a: Token,
        /// Candidate B's token there.
        candidate_b: Token,
        /// The reference argmax there (both reference runs agree on it).
        reference_argmax: Token,
        /// Which candidate agrees with the reference.
        attribution: Attribution,
    },
    /// No attribution is possible.
    Refused {
        /// Why.
        reason: String,
    },
}

/// One prompt's attribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptAttribution {
    /// Prompt id.
    pub id: String,
    /// Canonical hash of the prompt token ids (null when a side has no greedy trace).
    pub prompt_token_ids_sha256: Option<String>,
    /// The outcome.
    pub outcome: PromptOutcome,
}

/// Prompt counts per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Divergences attributed to candidate A (A chose the reference argmax).
    pub candidate_a: usize,
    /// Attributed to candidate B.
    pub candidate_b: usize,
    /// Neither candidate chose the reference argmax.
    pub neither: usize,
    /// No divergence.
    pub identical: usize,
    /// Not attributable.
    pub refused: usize,
}

/// The attribution document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributionResult {
    /// [`ATTRIBUTION_SCHEMA`].
    pub schema: String,
    /// Canonical hash of the document without this field.
    pub result_sha256: String,
    /// UTC creation time.
    pub created_at_utc: String,
    /// The producing tool.
    pub tool: String,
    /// Candidate A's greedy result.
    pub candidate_a: Source,
    /// Candidate B's greedy result.
    pub candidate_b: Source,
    /// Per prompt, in candidate A's order, then B's prompts missing from A.
    pub prompts: Vec<PromptAttribution>,
    /// Counts per outcome.
    pub counts: Counts,
}

/// Why an attribution could not be made.
#[derive(Debug, Error)]
pub enum AttributeError {
    /// A source result is invalid.
    #[error("validate the greedy result {path}: {}", .errors.join("; "))]
    Invalid {
        /// Path (escaped).
        path: String,
        /// Violations.
        errors: Vec<String>,
    },
}

fn token(id: u32, trace: &GreedyTrace, step: usize) -> Token {
    Token {
        token_id: id,
        text: trace
            .texts
            .get(step)
            .filter(|_| trace.tokens.get(step) == Some(&id))
            .cloned(),
    }
}

/// The §9.5 outcome of one prompt from both candidates' greedy traces.
pub fn attribute_prompt(a: &GreedyTrace, b: &GreedyTrace) -> PromptOutcome {
    if a.prompt_token_ids_sha256 != b.prompt_token_ids_sha256 {
        return PromptOutcome::Refused {
            reason: "the two results ran different prompt token ids".into(),
        };
    }
    let steps = a
        .tokens
        .len()
        .min(b.tokens.len())
        .min(a.reference_argmax.len())
        .min(b.reference_argmax.len());
    let first = (0..steps).find(|&i| a.tokens[i] != b.tokens[i]);
    // Through the divergent step (or every compared step) the prefixes are identical.
    let shared = first.map_or(steps, |s| s + 1);
    if let Some(i) = (0..shared).find(|&i| a.reference_argmax[i] != b.reference_argmax[i]) {
        return PromptOutcome::Refused {
            reason: format!(
                "the two reference runs disagree at step {i} on the same prefix (argmax {} and {}): they are not the same reference",
                a.reference_argmax[i], b.reference_argmax[i]
            ),
        };
    }
    match first {
        None => PromptOutcome::Identical { steps },
        Some(step) => {
            let arg = a.reference_argmax[step];
            let text = if a.tokens[step] == arg {
                token(arg, a, step).text
            } else {
                token(arg, b, step).text
            };
            PromptOutcome::Diverged {
                step,
                candidate_a: token(a.tokens[step], a, step),
                candidate_b: token(b.tokens[step], b, step),
                reference_argmax: Token {
                    token_id: arg,
                    text,
                },
                attribution: attribute(arg, a.tokens[step], b.tokens[step]),
            }
        }
    }
}

fn prompt(id: &str, a: Option<&CaseRecord>, b: Option<&CaseRecord>) -> PromptAttribution {
    let trace = |c: Option<&CaseRecord>, side: &str| {
        match c {
        None => Err(format!("candidate {side} has no prompt {id:?}")),
        Some(c) => c.greedy.clone().ok_or(format!(
            "candidate {side} has no greedy trace for this prompt (it was refused or is not a greedy result)"
        )),
    }
    };
    let (ta, tb) = (trace(a, "A"), trace(b, "B"));
    let digest = ta
        .as_ref()
        .or(tb.as_ref())
        .ok()
        .map(|t| t.prompt_token_ids_sha256.clone());
    let outcome = match (ta, tb) {
        (Ok(ta), Ok(tb)) => attribute_prompt(&ta, &tb),
        (Err(reason), _) | (_, Err(reason)) => PromptOutcome::Refused { reason },
    };
    PromptAttribution {
        id: id.into(),
        prompt_token_ids_sha256: digest,
        outcome,
    }
}

/// Counts the outcomes.
pub fn counts(prompts: &[PromptAttribution]) -> Counts {
    let mut c = Counts::default();
    for p in prompts {
        match &p.outcome {
            PromptOutcome::Identical { .. } => c.identical += 1,
            PromptOutcome::Refused { .. } => c.refused += 1,
            PromptOutcome::Diverged { attribution, .. } => match attribution {
                Attribution::CandidateA => c.candidate_a += 1,
                Attribution::CandidateB => c.candidate_b += 1,
                Attribution::Neither => c.neither += 1,
            },
        }
    }
    c
}

/// Attributes every prompt of two greedy results.
pub fn attribute_results(a: &OracleResult, b: &OracleResult) -> Vec<PromptAttribution> {
    let mut out: Vec<PromptAttribution> = a
        .cases
        .iter()
        .map(|ca| prompt(&ca.id, Some(ca), b.cases.iter().find(|c| c.id == ca.id)))
        .collect();
    for cb in &b.cases {
        if !a.cases.iter().any(|c| c.id == cb.id) {
            out.push(prompt(&cb.id, None, Some(cb)));
        }
    }
    out
}

fn source(path: &Path, r: &OracleResult) -> Source {
    Source {
        path: path.display().to_string(),
        result_sha256: r.result_sha256.clone(),
        candidate: r
            .cases
            .first()
            .map(|c| c.candidate.source.clone())
            .unwrap_or_default(),
    }
}

/// Reads a greedy result after validating it like `oracle check` does.
pub fn read_greedy_result(path: &Path) -> Result<OracleResult, AttributeError> {
    let invalid = |errors| AttributeError::Invalid {
        path: qual_json::escape_path(path),
        errors,
    };
    let limits = qual_json::Limits {
        max_bytes: crate::check::MAX_RESULT_BYTES,
        ..qual_json::Limits::default()
    };
    let (doc, _) = qual_json::load_file(path, limits).map_err(|e| invalid(vec![e.to_string()]))?;
    let v =
        crate::check::check_value(&doc, &crate::check::CheckOptions::default()).map_err(invalid)?;
    if v.schema != crate::result::RESULT_SCHEMA {
        return Err(invalid(vec![format!(
            "/schema: must be {}",
            qual_json::show::quote(crate::result::RESULT_SCHEMA)
        )]));
    }
    doc.to_serde()
        .ok_or_else(|| invalid(vec!["/: not representable".into()]))
        .and_then(|s| serde_json::from_value(s).map_err(|e| invalid(vec![format!("/: {e}")])))
}

/// Builds the self-hashed attribution document of two greedy result files.
pub fn build(
    tool: &str,
    a_path: &Path,
    b_path: &Path,
) -> Result<(serde_json::Value, AttributionResult), AttributeError> {
    let a = read_greedy_result(a_path)?;
    let b = read_greedy_result(b_path)?;
    let prompts = attribute_results(&a, &b);
    let mut r = AttributionResult {
        schema: ATTRIBUTION_SCHEMA.into(),
        result_sha256: String::new(),
        created_at_utc: crate::result::now_utc(),
        tool: tool.into(),
        candidate_a: source(a_path, &a),
        candidate_b: source(b_path, &b),
        counts: counts(&prompts),
        prompts,
    };
    let mut v = serde_json::to_value(&r).expect("an attribution serializes");
    let digest = qual_json::self_digest(&qual_json::Value::from_serde(&v), "result_sha256")
        .expect("an attribution is an object");
    v["result_sha256"] = serde_json::Value::String(digest.clone());
    r.result_sha256 = digest;
    Ok((v, r))
}

/// `oracle check` of an attribution document (its self-hash is checked by the caller).
/// `verify_inputs` recomputes the prompts from the two source results.
pub fn check(doc: &qual_json::Value, verify_inputs: bool) -> Vec<String> {
    let mut errs = Vec::new();
    let r: AttributionResult = match doc
        .to_serde()
        .ok_or_else(|| "not representable".to_string())
        .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => return vec![format!("/: {e}")],
    };
    for (i, p) in r.prompts.iter().enumerate() {
        if let PromptOutcome::Diverged {
            candidate_a,
            candidate_b,
            reference_argmax,
            attribution,
            ..
        } = &p.outcome
        {
            if candidate_a.token_id == candidate_b.token_id {
                errs.push(format!(
                    "/prompts/{i}/outcome: the candidates' tokens are equal, not divergent"
                ));
            }
            let want = attribute(
                reference_argmax.token_id,
                candidate_a.token_id,
                candidate_b.token_id,
            );
            if want != *attribution {
                errs.push(format!(
                    "/prompts/{i}/outcome/attribution: does not follow from the tokens (expected {})",
                    serde_json::to_string(&want).expect("serializes")
                ));
            }
        }
    }
    if counts(&r.prompts) != r.counts {
        errs.push("/counts: do not match the prompts".into());
    }
    if verify_inputs {
        for (side, s) in [
            ("candidate_a", &r.candidate_a),
            ("candidate_b", &r.candidate_b),
        ] {
            match read_greedy_result(Path::new(&s.path)) {
                Ok(x) if x.result_sha256 == s.result_sha256 => {}
                Ok(_) => errs.push(format!(
                    "/{side}/result_sha256: the source result no longer has this hash"
                )),
                Err(e) => errs.push(format!("/{side}/path: failed to {e}")),
            }
        }
        if errs.is_empty() {
            let a = read_greedy_result(Path::new(&r.candidate_a.path));
            let b = read_greedy_result(Path::new(&r.candidate_b.path));
            if let (Ok(a), Ok(b)) = (a, b) {
                if attribute_results(&a, &b) != r.prompts {
                    errs.push("/prompts: do not follow from the two source results".into());
                }
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(tokens: &[u32], argmax: &[u32]) -> GreedyTrace {
        GreedyTrace {
            prompt_token_ids_sha256: crate::result::token_ids_digest(&[1, 2]),
            prompt_token_count: 2,
            tokens: tokens.to_vec(),
            texts: tokens.iter().map(|t| format!("t{t}")).collect(),
            reference_argmax: argmax.to_vec(),
        }
    }

    fn verdict(o: &PromptOutcome) -> Option<(usize, Attribution)> {
        match o {
            PromptOutcome::Diverged {
                step, attribution, ..
            } => Some((*step, *attribution)),
            _ => None,
        }
    }

    #[test]
    fn the_candidate_matching_the_reference_argmax_is_named() {
        // Step 2: A chose 7 (the reference argmax), B chose 8.
        let a = trace(&[5, 6, 7, 9], &[5, 6, 7, 9]);
        let b = trace(&[5, 6, 8, 3], &[5, 6, 7, 4]);
        let o = attribute_prompt(&a, &b);
        assert_eq!(verdict(&o), Some((2, Attribution::CandidateA)));
        let PromptOutcome::Diverged {
            reference_argmax,
            candidate_b,
            ..
        } = &o
        else {
            panic!()
        };
        assert_eq!(reference_argmax.text.as_deref(), Some("t7"));
        assert_eq!(candidate_b.text.as_deref(), Some("t8"));
        assert_eq!(
            verdict(&attribute_prompt(&b, &a)),
            Some((2, Attribution::CandidateB))
        );
        // Neither: the reference wanted 4 at step 0.
        let a = trace(&[1], &[4]);
        let b = trace(&[2], &[4]);
        assert_eq!(
            verdict(&attribute_prompt(&a, &b)),
            Some((0, Attribution::Neither))
        );
    }

    #[test]
    fn identical_runs_and_inconsistent_references() {
        let a = trace(&[5, 6, 7], &[5, 6, 7]);
        let b = trace(&[5, 6], &[5, 6]);
        assert_eq!(
            attribute_prompt(&a, &b),
            PromptOutcome::Identical { steps: 2 }
        );
        // Same prefix, different reference argmax before the divergence: refused.
        let a = trace(&[5, 6, 7], &[5, 6, 7]);
        let b = trace(&[5, 6, 8], &[5, 9, 7]);
        let PromptOutcome::Refused { reason } = attribute_prompt(&a, &b) else {
            panic!()
        };
        assert!(reason.contains("step 1"), "{reason}");
        // Different prompts: refused.
        let mut c = trace(&[5], &[5]);
        c.prompt_token_ids_sha256 = crate::result::token_ids_digest(&[3]);
        assert!(matches!(
            attribute_prompt(&a, &c),
            PromptOutcome::Refused { .. }
        ));
    }

    #[test]
    fn counts_follow_the_outcomes() {
        let p = |outcome| PromptAttribution {
            id: "x".into(),
            prompt_token_ids_sha256: None,
            outcome,
        };
        let a = attribute_prompt(&trace(&[7], &[7]), &trace(&[8], &[7]));
        let c = counts(&[
            p(a),
            p(PromptOutcome::Identical { steps: 1 }),
            p(PromptOutcome::Refused { reason: "r".into() }),
        ]);
        assert_eq!(
            c,
            Counts {
                candidate_a: 1,
                identical: 1,
                refused: 1,
                ..Default::default()
            }
        );
    }
}
