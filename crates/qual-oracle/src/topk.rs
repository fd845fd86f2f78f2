//! The comparison of a candidate's **top-k view** (an API's `top_logprobs`, llama.cpp's
//! `n_probs` below the vocabulary) with the reference's full distribution.
//!
//! Owns what such a view can and cannot establish. The candidate lists K (token, log-prob)
//! pairs per position — its K most likely tokens, log-probabilities normalised over the whole
//! vocabulary — and nothing about the other tokens. Against the reference's full log-softmax
//! it establishes, per position:
//! - the candidate argmax (the top listed token; ties → lowest id) and its agreement with the
//!   reference argmax;
//! - the rank of the reference argmax in the candidate (exact when listed, otherwise only
//!   "> K");
//! - the top-k overlap for k ≤ K;
//! - |Δ log-prob| over the listed tokens (the reference is full, so every listed token is
//!   present in both) — a **lower bound** on the full max abs error, never the full one;
//! - the candidate's probability mass outside its list (1 − Σ listed) and the reference's mass
//!   outside the candidate's list;
//! - a lower bound on the total variation distance,
//!   ½(Σ_listed |p − q| + |P_outside − Q_outside|) (triangle inequality), and from it a lower
//!   bound on KL(p ‖ q) ≥ 2·TV² (Pinsker, nats). Both take the listed log-probabilities at face
//!   value (q = exp(logprob)): they bound the distance to the distribution *as the candidate
//!   reports it*. An engine whose reported log-probs are mis-normalised by ε adds ≈ ε, so
//!   they are not bounds on the full comparison's KL, which renormalises the candidate.
//!
//! It cannot establish the full KL divergence, the cosine of the logit vectors, the full max
//! abs error or the mean abs error ([`NOT_ESTABLISHED`]); they are never computed from the
//! partial data. Tolerances apply only to what is established: argmax agreement, top-k
//! overlap (k ≤ K), the rank of the reference argmax (a reference argmax outside the list
//! exceeds any bound ≤ K; above K it is not established); a declared `max_abs_error` is
//! exceeded when its lower bound already exceeds it and is otherwise `not_established`;
//! `min_cosine`, `max_mean_abs_error` and `max_kl_divergence` are recorded as unchecked.

use crate::compare::{log_softmax, top_k, worst, Positioned, Worst};
use crate::tensor::Logits;
use crate::tolerance::{Check, CheckOutcome, Tolerances};
use serde::{Deserialize, Serialize};

/// Metrics a top-k view cannot establish.
pub const NOT_ESTABLISHED: [&str; 4] =
    ["cosine", "kl_divergence", "max_abs_error", "mean_abs_error"];

/// One listed candidate token.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listed {
    /// Token id.
    pub token_id: u32,
    /// The candidate's log-probability (normalised over the whole vocabulary).
    pub logprob: f64,
}

/// The candidate's top-k view: per position, its listed tokens (unique ids, finite values).
#[derive(Debug, Clone, PartialEq)]
pub struct TopKView {
    /// K: how many tokens each position lists.
    pub k: usize,
    /// Per position, sorted by log-prob descending, ties by ascending id.
    pub rows: Vec<Vec<Listed>>,
}

impl TopKView {
    /// Builds a view, sorting each row; refuses repeated or out-of-vocabulary ids, non-finite
    /// values and rows that do not list exactly `k` tokens.
    pub fn new(k: usize, vocab: usize, rows: Vec<Vec<Listed>>) -> Result<TopKView, String> {
        if k == 0 || k > vocab {
            return Err(format!("top-k view: k {k} is outside 1..={vocab}"));
        }
        let mut out = Vec::with_capacity(rows.len());
        for (i, mut row) in rows.into_iter().enumerate() {
            if row.len() != k {
                return Err(format!(
                    "position {i}: {} tokens listed, {k} expected",
                    row.len()
                ));
            }
            let mut seen = std::collections::HashSet::new();
            for (j, e) in row.iter().enumerate() {
                if e.token_id as usize >= vocab {
                    return Err(format!(
                        "position {i} entry {j}: {} is not a token id below {vocab}",
                        e.token_id
                    ));
                }
                if !seen.insert(e.token_id) {
                    return Err(format!(
                        "position {i} entry {j}: token {} listed twice",
                        e.token_id
                    ));
                }
                if !e.logprob.is_finite() || e.logprob > 1e-6 {
                    return Err(format!(
                        "position {i} entry {j}: log-probability {} is not finite and at most 0",
                        e.logprob
                    ));
                }
            }
            row.sort_by(|a, b| {
                b.logprob
                    .total_cmp(&a.logprob)
                    .then(a.token_id.cmp(&b.token_id))
            });
            out.push(row);
        }
        Ok(TopKView { k, rows: out })
    }
}

/// What one position of a top-k view establishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopKPosition {
    /// Row index.
    pub position: usize,
    /// Reference argmax token.
    pub reference_argmax: u32,
    /// Candidate argmax (its top listed token).
    pub candidate_argmax: u32,
    /// 1-based rank of the reference argmax among the listed tokens (null: not listed, so its
    /// rank is above K).
    pub reference_argmax_rank: Option<u64>,
    /// |reference top-k ∩ candidate top-k| for k = the summary's `overlap_k` (≤ K).
    pub top_k_overlap: usize,
    /// max |Δ log-prob| over the listed tokens (a lower bound on the full max abs error).
    pub max_abs_logprob_error_listed: f64,
    /// The candidate's probability mass outside its list, max(0, 1 − Σ listed).
    pub candidate_mass_outside_list: f64,
    /// The reference's probability mass outside the candidate's list.
    pub reference_mass_outside_list: f64,
    /// Lower bound on the total variation distance of the two distributions.
    pub total_variation_lower_bound: f64,
    /// Lower bound on KL(reference ‖ candidate) in nats (Pinsker: 2·TV²).
    pub kl_divergence_lower_bound: f64,
    /// Reference top-1 − top-2 logit.
    pub reference_margin: f64,
}

/// The worst case of each established metric over positions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopKSummary {
    /// Positions compared.
    pub positions: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// K: tokens the candidate listed per position.
    pub listed: usize,
    /// k of the overlap: min(requested top-k, K).
    pub overlap_k: usize,
    /// Positions whose argmaxes agree.
    pub argmax_agreement: usize,
    /// First position whose argmaxes differ.
    pub first_argmax_mismatch: Option<usize>,
    /// Positions whose reference argmax is among the listed tokens.
    pub reference_argmax_listed: usize,
    /// First position whose reference argmax is not listed.
    pub first_reference_argmax_unlisted: Option<usize>,
    /// Largest listed rank of the reference argmax (over positions where it is listed).
    pub max_reference_argmax_rank_listed: Option<Worst<u64>>,
    /// Smallest top-k overlap.
    pub min_top_k_overlap: Worst<usize>,
    /// Largest |Δ log-prob| over listed tokens.
    pub max_abs_logprob_error_listed: Worst<f64>,
    /// Largest candidate mass outside its list.
    pub max_candidate_mass_outside_list: Worst<f64>,
    /// Largest lower bound on the total variation distance.
    pub max_total_variation_lower_bound: Worst<f64>,
    /// Largest lower bound on the KL divergence (nats).
    pub max_kl_divergence_lower_bound: Worst<f64>,
    /// What a top-k view cannot establish ([`NOT_ESTABLISHED`]).
    pub not_established: Vec<String>,
}

/// Compares one position: `reference` is the reference's full logit row, `listed` the
/// candidate's sorted list, `k` the requested overlap size (≤ the list length).
pub fn compare_position(
    position: usize,
    reference: &[f32],
    listed: &[Listed],
    k: usize,
) -> TopKPosition {
    let lp = log_softmax(reference);
    let rtop = top_k(reference, k.max(2).min(reference.len()));
    let reference_argmax = rtop[0].token_id;
    let margin = if rtop.len() > 1 {
        rtop[0].logit as f64 - rtop[1].logit as f64
    } else {
        0.0
    };
    let rank = listed
        .iter()
        .position(|e| e.token_id == reference_argmax)
        .map(|i| i as u64 + 1);
    let ctop: std::collections::HashSet<u32> = listed.iter().take(k).map(|e| e.token_id).collect();
    let overlap = rtop
        .iter()
        .take(k)
        .filter(|t| ctop.contains(&t.token_id))
        .count();
    let (mut max_err, mut p_listed, mut q_listed, mut tv_listed) = (0f64, 0f64, 0f64, 0f64);
    for e in listed {
        let r = lp[e.token_id as usize] as f64;
        max_err = max_err.max((r - e.logprob).abs());
        let (p, q) = (r.exp(), e.logprob.exp());
        p_listed += p;
        q_listed += q;
        tv_listed += (p - q).abs();
    }
    let p_out = (1.0 - p_listed).max(0.0);
    let q_out = (1.0 - q_listed).max(0.0);
    let tv = (0.5 * (tv_listed + (p_out - q_out).abs())).min(1.0);
    TopKPosition {
        position,
        reference_argmax,
        candidate_argmax: listed[0].token_id,
        reference_argmax_rank: rank,
        top_k_overlap: overlap,
        max_abs_logprob_error_listed: max_err,
        candidate_mass_outside_list: q_out,
        reference_mass_outside_list: p_out,
        total_variation_lower_bound: tv,
        kl_divergence_lower_bound: 2.0 * tv * tv,
        reference_margin: margin,
    }
}

/// Compares every position of a view with the reference rows (row counts must agree;
/// `top_k` is clamped to K).
pub fn compare(
    reference: &Logits,
    view: &TopKView,
    top_k: usize,
) -> Result<Vec<TopKPosition>, String> {
    if reference.positions != view.rows.len() {
        return Err(format!(
            "compare logits: the reference has {} positions, the candidate's top-k view {}",
            reference.positions,
            view.rows.len()
        ));
    }
    let k = top_k.min(view.k);
    Ok(view
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| compare_position(i, reference.row(i), row, k))
        .collect())
}

impl Positioned for TopKPosition {
    fn position(&self) -> usize {
        self.position
    }
}

/// Summarises a top-k comparison (`None` when there is no position).
pub fn summarize(
    rows: &[TopKPosition],
    vocab: usize,
    listed: usize,
    top_k: usize,
) -> Option<TopKSummary> {
    if rows.is_empty() {
        return None;
    }
    let ranked: Vec<TopKPosition> = rows
        .iter()
        .filter(|r| r.reference_argmax_rank.is_some())
        .cloned()
        .collect();
    Some(TopKSummary {
        positions: rows.len(),
        vocab,
        listed,
        overlap_k: top_k.min(listed),
        argmax_agreement: rows
            .iter()
            .filter(|r| r.reference_argmax == r.candidate_argmax)
            .count(),
        first_argmax_mismatch: rows
            .iter()
            .find(|r| r.reference_argmax != r.candidate_argmax)
            .map(|r| r.position),
        reference_argmax_listed: ranked.len(),
        first_reference_argmax_unlisted: rows
            .iter()
            .find(|r| r.reference_argmax_rank.is_none())
            .map(|r| r.position),
        max_reference_argmax_rank_listed: (!ranked.is_empty()).then(|| {
            worst(
                &ranked,
                |r| r.reference_argmax_rank.unwrap_or(0),
                |a, b| a > b,
            )
        }),
        min_top_k_overlap: worst(rows, |r| r.top_k_overlap, |a, b| a < b),
        max_abs_logprob_error_listed: worst(rows, |r| r.max_abs_logprob_error_listed, |a, b| a > b),
        max_candidate_mass_outside_list: worst(
            rows,
            |r| r.candidate_mass_outside_list,
            |a, b| a > b,
        ),
        max_total_variation_lower_bound: worst(
            rows,
            |r| r.total_variation_lower_bound,
            |a, b| a > b,
        ),
        max_kl_divergence_lower_bound: worst(rows, |r| r.kl_divergence_lower_bound, |a, b| a > b),
        not_established: NOT_ESTABLISHED.iter().map(|s| s.to_string()).collect(),
    })
}

/// Applies the declared tolerances to what the view establishes (see the module docs).
/// Returns the checks and the declared tolerances that cannot be checked at all.
pub fn check(t: &Tolerances, s: &TopKSummary) -> (Vec<Check>, Vec<String>) {
    let mut out = Vec::new();
    let mut push = |name: &str, bound: f64, observed: f64, position, outcome| {
        out.push(Check {
            tolerance: name.into(),
            bound,
            observed,
            position,
            outcome,
        })
    };
    let within = CheckOutcome::of;
    // A lower bound above the bound is an established failure; otherwise nothing is known.
    let lower = |ok: bool| {
        if ok {
            CheckOutcome::NotEstablished
        } else {
            CheckOutcome::Exceeded
        }
    };
    if let Some(b) = t.min_argmax_agreement {
        let v = s.argmax_agreement as f64 / s.positions as f64;
        push(
            "min_argmax_agreement",
            b,
            v,
            s.first_argmax_mismatch,
            within(v >= b),
        );
    }
    if let Some(b) = t.min_top_k_overlap {
        let w = s.min_top_k_overlap;
        push(
            "min_top_k_overlap",
            b as f64,
            w.value as f64,
            Some(w.position),
            within(w.value >= b),
        );
    }
    if let Some(b) = t.max_abs_error {
        let w = s.max_abs_logprob_error_listed;
        push(
            "max_abs_error",
            b,
            w.value,
            Some(w.position),
            lower(w.value <= b),
        );
    }
    if let Some(b) = t.max_reference_argmax_rank {
        let listed = s.listed as u64;
        match (
            s.first_reference_argmax_unlisted,
            s.max_reference_argmax_rank_listed,
        ) {
            // Unlisted: its rank is at least K + 1.
            (Some(p), _) => push(
                "max_reference_argmax_rank",
                b as f64,
                (listed + 1) as f64,
                Some(p),
                lower(b > listed),
            ),
            (None, Some(w)) => push(
                "max_reference_argmax_rank",
                b as f64,
                w.value as f64,
                Some(w.position),
                within(w.value <= b),
            ),
            (None, None) => {}
        }
    }
    let mut unchecked = Vec::new();
    if t.min_cosine.is_some() {
        unchecked.push("min_cosine".to_string());
    }
    if t.max_mean_abs_error.is_some() {
        unchecked.push("max_mean_abs_error".to_string());
    }
    // The Pinsker bound takes the listed log-probabilities at face value; the full KL
    // renormalises the candidate, so an engine's normalisation error would make the bound
    // exceed the full KL (measured: llama.cpp f32, bound 1.6e-7 nats, full KL 9.1e-11).
    if t.max_kl_divergence.is_some() {
        unchecked.push("max_kl_divergence".to_string());
    }
    (out, unchecked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(token_id: u32, logprob: f64) -> Listed {
        Listed { token_id, logprob }
    }

    fn ln_softmax(row: &[f32]) -> Vec<f64> {
        log_softmax(row).iter().map(|&x| x as f64).collect()
    }

    #[test]
    fn an_exact_view_agrees_with_zero_lower_bounds() {
        let r = Logits::from_rows(&[vec![0.0, 3.0, 1.0, -1.0, 2.0]]).unwrap();
        let lp = ln_softmax(r.row(0));
        // The candidate lists its top 3 exactly as the reference has them (in any order).
        let v = TopKView::new(3, 5, vec![vec![l(2, lp[2]), l(1, lp[1]), l(4, lp[4])]]).unwrap();
        assert_eq!(v.rows[0][0].token_id, 1);
        let p = compare(&r, &v, 10).unwrap();
        let s = summarize(&p, 5, 3, 10).unwrap();
        assert_eq!(s.overlap_k, 3);
        assert_eq!(p[0].candidate_argmax, 1);
        assert_eq!(p[0].reference_argmax_rank, Some(1));
        assert_eq!(p[0].top_k_overlap, 3);
        assert!(p[0].max_abs_logprob_error_listed < 1e-6);
        assert!(p[0].total_variation_lower_bound < 1e-6);
        let outside: f64 = [0usize, 3].iter().map(|&i| lp[i].exp()).sum();
        assert!((p[0].candidate_mass_outside_list - outside).abs() < 1e-6);
        assert!((p[0].reference_mass_outside_list - outside).abs() < 1e-6);
        assert_eq!(s.not_established, NOT_ESTABLISHED.to_vec());
    }

    #[test]
    fn a_missing_reference_argmax_is_rank_above_k_and_bounds_the_distance() {
        let r = Logits::from_rows(&[vec![5.0, 0.0, 0.0, 0.0]]).unwrap();
        let lp = ln_softmax(r.row(0));
        // The candidate puts ~all its mass on token 1 and lists tokens 1, 2.
        let v = TopKView::new(2, 4, vec![vec![l(1, -1e-4), l(2, -10.0)]]).unwrap();
        let p = compare(&r, &v, 2).unwrap();
        assert_eq!(p[0].reference_argmax, 0);
        assert_eq!(p[0].candidate_argmax, 1);
        assert_eq!(p[0].reference_argmax_rank, None);
        assert_eq!(p[0].top_k_overlap, 1); // reference top-2 = {0, 1} (tie 1,2,3 → lowest id)
        assert!((p[0].max_abs_logprob_error_listed - (lp[1] + 1e-4).abs()).abs() < 1e-5);
        // Reference: p0 ≈ 0.98 outside the list; candidate outside ≈ 1e-4 → TV ≥ ~0.98.
        assert!(p[0].total_variation_lower_bound > 0.97, "{p:?}");
        assert!(p[0].kl_divergence_lower_bound > 1.8);
        let s = summarize(&p, 4, 2, 2).unwrap();
        assert_eq!(s.reference_argmax_listed, 0);
        assert_eq!(s.max_reference_argmax_rank_listed, None);
        let t = Tolerances {
            min_argmax_agreement: Some(1.0),
            max_reference_argmax_rank: Some(2),
            max_kl_divergence: Some(0.1),
            max_abs_error: Some(100.0),
            min_cosine: Some(0.9),
            max_mean_abs_error: Some(1.0),
            ..Default::default()
        };
        let (checks, unchecked) = check(&t, &s);
        let out: Vec<(&str, CheckOutcome)> = checks
            .iter()
            .map(|c| (c.tolerance.as_str(), c.outcome))
            .collect();
        assert_eq!(
            out,
            vec![
                ("min_argmax_agreement", CheckOutcome::Exceeded),
                ("max_abs_error", CheckOutcome::NotEstablished),
                ("max_reference_argmax_rank", CheckOutcome::Exceeded),
            ]
        );
        assert_eq!(checks[2].observed, 3.0);
        assert_eq!(
            unchecked,
            vec!["min_cosine", "max_mean_abs_error", "max_kl_divergence"]
        );
        let t = Tolerances {
            max_abs_error: Some(1.0),
            ..Default::default()
        };
        assert_eq!(check(&t, &s).0[0].outcome, CheckOutcome::Exceeded);
        // A rank bound above K cannot be decided for an unlisted argmax.
        let t = Tolerances {
            max_reference_argmax_rank: Some(3),
            ..Default::default()
        };
        assert_eq!(check(&t, &s).0[0].outcome, CheckOutcome::NotEstablished);
    }

    #[test]
    fn a_permuted_list_has_full_overlap_but_disagrees_on_the_argmax() {
        let r = Logits::from_rows(&[vec![4.0, 3.0, 2.0, 1.0, 0.0]]).unwrap();
        let v = TopKView::new(3, 5, vec![vec![l(0, -1.5), l(1, -1.0), l(2, -1.2)]]).unwrap();
        let p = compare(&r, &v, 3).unwrap();
        assert_eq!(p[0].candidate_argmax, 1);
        assert_eq!(p[0].reference_argmax_rank, Some(3));
        assert_eq!(p[0].top_k_overlap, 3);
        let t = Tolerances {
            min_top_k_overlap: Some(3),
            max_reference_argmax_rank: Some(2),
            ..Default::default()
        };
        let s = summarize(&p, 5, 3, 3).unwrap();
        let (c, _) = check(&t, &s);
        assert_eq!(c[0].outcome, CheckOutcome::Within);
        assert_eq!(c[1].outcome, CheckOutcome::Exceeded);
    }

    #[test]
    fn malformed_views_are_refused() {
        assert!(TopKView::new(2, 4, vec![vec![l(1, -0.1)]])
            .unwrap_err()
            .contains("1 tokens listed"));
        assert!(TopKView::new(2, 4, vec![vec![l(1, -0.1), l(1, -0.2)]])
            .unwrap_err()
            .contains("twice"));
        assert!(TopKView::new(2, 4, vec![vec![l(1, -0.1), l(9, -0.2)]]).is_err());
        assert!(TopKView::new(2, 4, vec![vec![l(1, f64::NAN), l(2, -0.2)]]).is_err());
        assert!(TopKView::new(5, 4, vec![]).is_err());
        let r = Logits::from_rows(&[vec![0.0, 1.0]]).unwrap();
        let v = TopKView::new(1, 2, vec![]).unwrap();
        assert!(compare(&r, &v, 1).is_err());
    }
}
