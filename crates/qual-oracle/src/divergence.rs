//! Greedy first divergence and the attribution of a divergent token (§9.5).
//!
//! Owns two rules:
//! - [`first_divergence`]: given the candidate's greedy tokens and the reference's logits for
//!   the same teacher-forced prefix (row `i` predicts step `i`), the first step whose candidate
//!   token differs from the reference argmax, with both tokens' logits and reference ranks and
//!   the reference top-1/top-2 margin (a divergence at a near-tie is weaker evidence than one at
//!   a wide margin).
//! - [`attribute`]: for two candidates that disagree at the same prefix, the candidate whose
//!   token equals the reference argmax — exactly one match names it, otherwise `neither`
//!   (Kiln's `argmax_candidate` rule; `complete` iff a candidate is named).

use crate::compare::{rank_of, top_k};
use crate::tensor::Logits;
use serde::{Deserialize, Serialize};

/// One token seen through the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenAt {
    /// Token id.
    pub token_id: u32,
    /// Decoded text, when known.
    pub text: Option<String>,
    /// The reference logit of this token.
    pub reference_logit: f32,
    /// Its 1-based rank in the reference (1 = argmax).
    pub reference_rank: u64,
}

/// Where a greedy candidate first left the reference argmax.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Divergence {
    /// Greedy steps compared.
    pub steps: usize,
    /// First divergent step (null: the candidate followed the reference argmax throughout).
    pub step: Option<usize>,
    /// The candidate's token at that step.
    pub candidate: Option<TokenAt>,
    /// The reference argmax at that step.
    pub reference: Option<TokenAt>,
    /// Reference top-1 − top-2 logit at that step.
    pub reference_margin: Option<f64>,
}

/// The first divergence of `tokens` (the candidate's greedy choices) from the argmax of
/// `reference` rows (row `i` is the reference's next-token logits before step `i`).
/// `text` decodes a token id when a tokenizer view is available. Compares
/// `min(tokens.len(), reference.positions)` steps; a token id outside the vocabulary diverges.
pub fn first_divergence(
    reference: &Logits,
    tokens: &[u32],
    text: &dyn Fn(u32) -> Option<String>,
) -> Divergence {
    let steps = tokens.len().min(reference.positions);
    for (i, &tok) in tokens.iter().enumerate().take(steps) {
        let row = reference.row(i);
        let top = top_k(row, 2);
        let arg = top[0].token_id;
        if tok == arg {
            continue;
        }
        let at = |t: u32| TokenAt {
            token_id: t,
            text: text(t),
            reference_logit: row.get(t as usize).copied().unwrap_or(f32::NAN),
            reference_rank: if (t as usize) < row.len() {
                rank_of(row, t as usize)
            } else {
                0
            },
        };
        let margin = if top.len() > 1 {
            top[0].logit as f64 - top[1].logit as f64
        } else {
            0.0
        };
        let mut cand = at(tok);
        if !cand.reference_logit.is_finite() {
            cand.reference_logit = 0.0;
        }
        return Divergence {
            steps,
            step: Some(i),
            candidate: Some(cand),
            reference: Some(at(arg)),
            reference_margin: Some(margin),
        };
    }
    Divergence {
        steps,
        step: None,
        candidate: None,
        reference: None,
        reference_margin: None,
    }
}

/// Which of two candidates the reference argmax agrees with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// Only candidate A chose the reference argmax.
    CandidateA,
    /// Only candidate B did.
    CandidateB,
    /// Neither did, or both did (then they did not disagree).
    Neither,
}

impl Attribution {
    /// Whether a candidate is named (Kiln's `candidate_attribution_complete`).
    pub fn complete(self) -> bool {
        self != Attribution::Neither
    }
}

/// The §9.5 attribution: exactly one candidate token equal to the argmax names it.
pub fn attribute(reference_argmax: u32, a: u32, b: u32) -> Attribution {
    match (a == reference_argmax, b == reference_argmax) {
        (true, false) => Attribution::CandidateA,
        (false, true) => Attribution::CandidateB,
        _ => Attribution::Neither,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_step_off_the_argmax_with_margin_and_ranks() {
        let r = Logits::from_rows(&[
            vec![0.0, 5.0, 1.0],
            vec![2.0, 1.9, 0.0],
            vec![0.0, 0.0, 9.0],
        ])
        .unwrap();
        let d = first_divergence(&r, &[1, 1, 2], &|t| Some(format!("t{t}")));
        assert_eq!(d.step, Some(1));
        assert_eq!(d.candidate.as_ref().unwrap().reference_rank, 2);
        assert_eq!(d.reference.as_ref().unwrap().token_id, 0);
        assert!((d.reference_margin.unwrap() - 0.1).abs() < 1e-6);
        let same = first_divergence(&r, &[1, 0, 2], &|_| None);
        assert_eq!(same.step, None);
        assert_eq!(same.steps, 3);
    }

    #[test]
    fn attribution_names_exactly_one_match() {
        assert_eq!(attribute(5, 5, 6), Attribution::CandidateA);
        assert_eq!(attribute(5, 4, 5), Attribution::CandidateB);
        assert_eq!(attribute(5, 4, 6), Attribution::Neither);
        assert_eq!(attribute(5, 5, 5), Attribution::Neither);
        assert!(!Attribution::Neither.complete());
    }
}
