//! Declared tolerances of a logit comparison and their checks.
//!
//! Owns the tolerance document (`kiln-qual.oracle-tolerances.v1`, strict: unknown keys refused)
//! and the rule that turns a [`Summary`] into [`Check`]s: each declared bound is compared with
//! the worst case over positions; a bound that is not declared is not checked (and says so by
//! its absence). Every bound is inclusive.

use crate::compare::Summary;
use serde::{Deserialize, Serialize};

/// Schema id of a tolerance file.
pub const TOLERANCES_SCHEMA: &str = "kiln-qual.oracle-tolerances.v1";

/// Declared bounds (each optional; inclusive).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerances {
    /// Smallest accepted fraction of positions whose argmaxes agree (0..=1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_argmax_agreement: Option<f64>,
    /// Smallest accepted top-k overlap at any position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_top_k_overlap: Option<usize>,
    /// Largest accepted |r − c| anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_error: Option<f64>,
    /// Largest accepted mean |r − c| at any position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mean_abs_error: Option<f64>,
    /// Smallest accepted cosine at any position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_cosine: Option<f64>,
    /// Largest accepted KL divergence (nats) at any position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kl_divergence: Option<f64>,
    /// Largest accepted rank of the reference argmax in the candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reference_argmax_rank: Option<u64>,
}

/// A tolerance file: `{"schema": "kiln-qual.oracle-tolerances.v1", "tolerances": {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToleranceFile {
    /// [`TOLERANCES_SCHEMA`].
    pub schema: String,
    /// The bounds.
    pub tolerances: Tolerances,
}

/// Why a tolerance document is not usable (reads after "failed to read the tolerances: ").
#[derive(Debug, thiserror::Error)]
pub enum ToleranceFileError {
    /// The `schema` member is not [`TOLERANCES_SCHEMA`].
    #[error("schema must be {}", qual_json::show::quote(TOLERANCES_SCHEMA))]
    Schema,
    /// Some bounds are out of range ([`Tolerances::problems`]).
    #[error("{}", .0.join("; "))]
    Range(Vec<String>),
}

impl ToleranceFile {
    /// The bounds, once the document declares [`TOLERANCES_SCHEMA`] and every bound is in
    /// range.
    pub fn into_tolerances(self) -> Result<Tolerances, ToleranceFileError> {
        if self.schema != TOLERANCES_SCHEMA {
            return Err(ToleranceFileError::Schema);
        }
        let problems = self.tolerances.problems();
        if !problems.is_empty() {
            return Err(ToleranceFileError::Range(problems));
        }
        Ok(self.tolerances)
    }
}

impl Tolerances {
    /// Range problems (negative bounds, fractions or cosines outside their range).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut unit = |name: &str, v: Option<f64>, lo: f64, hi: f64| {
            if let Some(v) = v {
                if !(v.is_finite() && (lo..=hi).contains(&v)) {
                    out.push(format!("{name} must be within {lo}..={hi}, got {v}"));
                }
            }
        };
        unit("min_argmax_agreement", self.min_argmax_agreement, 0.0, 1.0);
        unit("min_cosine", self.min_cosine, -1.0, 1.0);
        unit("max_abs_error", self.max_abs_error, 0.0, f64::MAX);
        unit("max_mean_abs_error", self.max_mean_abs_error, 0.0, f64::MAX);
        unit("max_kl_divergence", self.max_kl_divergence, 0.0, f64::MAX);
        if self.max_reference_argmax_rank == Some(0) {
            out.push("max_reference_argmax_rank must be at least 1".into());
        }
        out
    }
}

/// Whether a bound held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// The observed worst case is within the bound.
    Within,
    /// It is not.
    Exceeded,
    /// The view cannot decide it (a top-k view whose lower bound is within the bound).
    NotEstablished,
}

impl CheckOutcome {
    /// `Within` when the observed value satisfies the bound, else `Exceeded`.
    pub fn of(within: bool) -> Self {
        if within {
            CheckOutcome::Within
        } else {
            CheckOutcome::Exceeded
        }
    }
}

/// One declared bound against the observed worst case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    /// The tolerance name (a [`Tolerances`] field).
    pub tolerance: String,
    /// The bound.
    pub bound: f64,
    /// The worst observed value.
    pub observed: f64,
    /// Where (for argmax agreement: the first disagreeing position, or null).
    pub position: Option<usize>,
    /// The outcome.
    pub outcome: CheckOutcome,
}

/// Checks every declared bound against a summary, in a fixed order.
pub fn check(t: &Tolerances, s: &Summary) -> Vec<Check> {
    let mut out = Vec::new();
    let mut push = |name: &str, bound: f64, observed: f64, position, ok: bool| {
        out.push(Check {
            tolerance: name.into(),
            bound,
            observed,
            position,
            outcome: CheckOutcome::of(ok),
        })
    };
    if let Some(b) = t.min_argmax_agreement {
        let v = s.argmax_agreement as f64 / s.positions as f64;
        push(
            "min_argmax_agreement",
            b,
            v,
            s.first_argmax_mismatch,
            v >= b,
        );
    }
    if let Some(b) = t.min_top_k_overlap {
        let w = s.min_top_k_overlap;
        push(
            "min_top_k_overlap",
            b as f64,
            w.value as f64,
            Some(w.position),
            w.value >= b,
        );
    }
    if let Some(b) = t.max_abs_error {
        let w = s.max_abs_error;
        push("max_abs_error", b, w.value, Some(w.position), w.value <= b);
    }
    if let Some(b) = t.max_mean_abs_error {
        let w = s.max_mean_abs_error;
        push(
            "max_mean_abs_error",
            b,
            w.value,
            Some(w.position),
            w.value <= b,
        );
    }
    if let Some(b) = t.min_cosine {
        let w = s.min_cosine;
        push("min_cosine", b, w.value, Some(w.position), w.value >= b);
    }
    if let Some(b) = t.max_kl_divergence {
        let w = s.max_kl_divergence;
        push(
            "max_kl_divergence",
            b,
            w.value,
            Some(w.position),
            w.value <= b,
        );
    }
    if let Some(b) = t.max_reference_argmax_rank {
        let w = s.max_reference_argmax_rank;
        push(
            "max_reference_argmax_rank",
            b as f64,
            w.value as f64,
            Some(w.position),
            w.value <= b,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare, summarize};
    use crate::tensor::Logits;

    #[test]
    fn bounds_are_inclusive_and_report_the_worst_position() {
        let r = Logits::from_rows(&[vec![1.0, 2.0, 3.0], vec![3.0, 2.0, 1.0]]).unwrap();
        let c = Logits::from_rows(&[vec![1.0, 2.0, 3.0], vec![3.0, 2.0, 1.5]]).unwrap();
        let s = summarize(&compare(&r, &c, 2).unwrap(), 3, 2).unwrap();
        let t = Tolerances {
            max_abs_error: Some(0.5),
            max_mean_abs_error: Some(0.1),
            min_argmax_agreement: Some(1.0),
            ..Default::default()
        };
        let got = check(&t, &s);
        assert_eq!(got[0].outcome, CheckOutcome::Within); // agreement 2/2
        assert_eq!(got[1].outcome, CheckOutcome::Within); // 0.5 <= 0.5
        assert_eq!(got[1].position, Some(1));
        assert_eq!(got[2].outcome, CheckOutcome::Exceeded); // 0.1667 > 0.1
    }

    #[test]
    fn out_of_range_bounds_are_problems() {
        let t = Tolerances {
            min_argmax_agreement: Some(1.5),
            max_reference_argmax_rank: Some(0),
            ..Default::default()
        };
        assert_eq!(t.problems().len(), 2);
    }
}
