//! Metric rules and deltas: the metrics of a receipt by scope, each committed rule's metric
//! definition against both receipts, and a rule's evaluation in exact decimal arithmetic.

use super::*;
use crate::decimal::Decimal;
use std::cmp::Ordering;

pub(super) fn metric_definition(metric: &Value) -> Value {
    obj(vec![
        ("name", at(metric, "name").clone()),
        ("unit", at(metric, "unit").clone()),
        ("aggregation", at(metric, "aggregation").clone()),
        ("lower_is_better", at(metric, "lower_is_better").clone()),
    ])
}

/// Metrics by scope: `receipt.metrics/<name>` and `results/<id>/metrics/<name>`.
pub(super) fn metrics_by_scope(receipt: &Value) -> Vec<(String, &Value)> {
    fn put<'a>(out: &mut Vec<(String, &'a Value)>, scope: String, m: &'a Value) {
        if let Some(slot) = out.iter_mut().find(|(k, _)| *k == scope) {
            slot.1 = m;
        } else {
            out.push((scope, m));
        }
    }
    let mut out: Vec<(String, &Value)> = Vec::new();
    for m in arr(at(receipt, "metrics")) {
        put(&mut out, format!("receipt.metrics/{}", s(at(m, "name"))), m);
    }
    for r in arr(at(receipt, "results")) {
        for m in arr(at(r, "metrics")) {
            let scope = format!("results/{}/metrics/{}", s(at(r, "id")), s(at(m, "name")));
            put(&mut out, scope, m);
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

pub(super) fn lookup<'a>(metrics: &[(String, &'a Value)], scope: &str) -> Option<&'a Value> {
    metrics.iter().find(|(k, _)| k == scope).map(|(_, v)| *v)
}

pub(super) fn rule_scope(rule: &Value) -> String {
    format!(
        "results/{}/metrics/{}",
        s(at(rule, "result_id")),
        s(at(rule, "metric"))
    )
}

/// `candidate - baseline` with Python's numeric semantics, or `None` when not finite.
pub(super) fn finite_change(candidate: &Value, baseline: &Value) -> Option<Value> {
    match (candidate, baseline) {
        (Value::Number(Number::Int(c)), Value::Number(Number::Int(b))) => {
            let d = Decimal::from_int(c).sub(&Decimal::from_int(b));
            let text = d.to_string();
            let int = qual_json::from_str(&text).ok()?;
            int.as_f64()?;
            Some(int)
        }
        _ => {
            let d = candidate.as_f64()? - baseline.as_f64()?;
            d.is_finite().then(|| Value::from(d))
        }
    }
}

pub(super) fn evaluate_rule(
    rule: &Value,
    baseline_metrics: &[(String, &Value)],
    candidate_metrics: &[(String, &Value)],
) -> Evaluation {
    let scope = rule_scope(rule);
    let required = at(rule, "required").as_bool() == Some(true);
    let operator = s(at(rule, "operator"));
    let mut e = Evaluation {
        absolute_change: None,
        absolute_tolerance: json_of(at(rule, "absolute_tolerance")),
        aggregation: s(at(rule, "aggregation")),
        baseline: None,
        candidate: None,
        lower_is_better: at(rule, "lower_is_better").as_bool() == Some(true),
        metric_class: s(at(rule, "metric_class")),
        operator: operator.clone(),
        reason: None,
        relative_change_percent: None,
        relative_tolerance: json_of(at(rule, "relative_tolerance")),
        required,
        scope: scope.clone(),
        status: String::new(),
        unit: s(at(rule, "unit")),
    };
    let before = lookup(baseline_metrics, &scope);
    let after = lookup(candidate_metrics, &scope);
    let (Some(before), Some(after)) = (before, after) else {
        e.status = if required { "failed" } else { "skipped" }.to_owned();
        e.reason = Some("declared metric is missing from one or both receipts".to_owned());
        e.baseline = before.map(|m| json_of(at(m, "value")));
        e.candidate = after.map(|m| json_of(at(m, "value")));
        return e;
    };
    let b = at(before, "value");
    let c = at(after, "value");
    let change = finite_change(c, b);
    let decimals = (
        Decimal::from_value(b),
        Decimal::from_value(c),
        Decimal::from_value(at(rule, "absolute_tolerance")),
        Decimal::from_value(at(rule, "relative_tolerance")),
    );
    let (passed, violation, tolerance) = match decimals {
        (Some(bd), Some(cd), Some(abs_tol), Some(rel_tol)) => {
            let scaled = bd.abs().mul(&rel_tol);
            let tolerance = if scaled.cmp_value(&abs_tol) == Ordering::Greater {
                scaled
            } else {
                abs_tol
            };
            let positive = |d: Decimal| {
                if d.cmp_value(&Decimal::zero()) == Ordering::Greater {
                    d
                } else {
                    Decimal::zero()
                }
            };
            let violation = match operator.as_str() {
                "equal" => cd.sub(&bd).abs(),
                "not_greater" => positive(cd.sub(&bd)),
                _ => positive(bd.sub(&cd)),
            };
            let passed = violation.cmp_value(&tolerance) != Ordering::Greater;
            (passed, violation.to_string(), tolerance.to_string())
        }
        _ => (false, "NaN".to_owned(), "NaN".to_owned()),
    };
    let baseline_nonzero = !validate::py_eq(b, &Value::from(0i64));
    if baseline_nonzero {
        if let (Some(ch), Some(base)) = (change.as_ref().and_then(Value::as_f64), b.as_f64()) {
            let rel = ch / base.abs() * 100.0;
            if rel.is_finite() {
                e.relative_change_percent = Some(rel);
            }
        }
    }
    e.status = if passed { "passed" } else { "failed" }.to_owned();
    e.reason = (!passed).then(|| format!("violation {violation} exceeds tolerance {tolerance}"));
    e.baseline = Some(json_of(b));
    e.candidate = Some(json_of(c));
    e.absolute_change = change.as_ref().map(json_of);
    e
}

pub(super) fn metric_policy_errors(
    policy: &Value,
    baseline_metrics: &[(String, &Value)],
    candidate_metrics: &[(String, &Value)],
) -> Vec<String> {
    let mut errors = Vec::new();
    for rule in arr(at(policy, "metric_rules")) {
        let scope = rule_scope(rule);
        let expected = obj(vec![
            ("name", at(rule, "metric").clone()),
            ("unit", at(rule, "unit").clone()),
            ("aggregation", at(rule, "aggregation").clone()),
            ("lower_is_better", at(rule, "lower_is_better").clone()),
        ]);
        for (label, metrics) in [
            ("baseline", baseline_metrics),
            ("candidate", candidate_metrics),
        ] {
            if let Some(m) = lookup(metrics, &scope) {
                if !validate::py_eq(&metric_definition(m), &expected) {
                    errors.push(format!(
                        "{label} metric {} definition does not match committed rule",
                        repr(&scope)
                    ));
                }
            }
        }
    }
    errors
}
