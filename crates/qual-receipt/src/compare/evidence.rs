//! Evidence admissibility: what a manifest-bound receipt must show before any metric of it is
//! evaluated — a passed verdict, exactly the selected variant's results with their required
//! flags, passed required results, the declared metric names, and canonical runner metrics
//! whose values agree with the result's status.

use super::identity::declared_variant;
use super::*;

/// The canonical definition of a runner-owned metric (repetitions do not change it).
pub fn runner_metric_definition(name: &str) -> Option<(&'static str, &'static str, bool)> {
    match name {
        "case_pass" => Some(("bool", "exact", false)),
        "exit_code" => Some(("code", "exact", false)),
        "output_assertion_failures" => Some(("count", "sum", true)),
        _ => None,
    }
}

/// One manifest-bound receipt against its selected variant: a passed verdict, exactly the declared
/// results, matching required flags, then each case in turn.
pub(super) fn required_result_errors(receipt: &Value, variant: &Value, label: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let results = arr(at(receipt, "results"));
    let find = |id: &str| results.iter().find(|r| at(r, "id").as_str() == Some(id));
    let cases = arr(at(variant, "cases"));
    if at2(receipt, "qualification", "verdict").as_str() != Some("passed") {
        errors.push(format!("{label} receipt verdict must be passed"));
    }
    let expected: Vec<String> = cases.iter().map(|c| s(at(c, "id"))).collect();
    let actual: Vec<String> = results.iter().map(|r| s(at(r, "id"))).collect();
    let mut missing: Vec<&String> = expected.iter().filter(|e| !actual.contains(e)).collect();
    missing.sort();
    let mut extra: Vec<&String> = actual.iter().filter(|a| !expected.contains(a)).collect();
    extra.sort();
    let join = |v: &[&String]| v.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(", ");
    if !missing.is_empty() {
        errors.push(format!(
            "{label} receipt is missing declared results: {}",
            join(&missing)
        ));
    }
    if !extra.is_empty() {
        errors.push(format!(
            "{label} receipt contains undeclared results: {}",
            join(&extra)
        ));
    }
    let mut both: Vec<&String> = expected.iter().filter(|e| actual.contains(e)).collect();
    both.sort();
    both.dedup();
    for id in both {
        let case_required = cases
            .iter()
            .find(|c| at(c, "id").as_str() == Some(id))
            .map(|c| at(c, "required"));
        let result_required = find(id).map(|r| at(r, "required"));
        if case_required.and_then(Value::as_bool).is_none()
            || case_required.and_then(Value::as_bool) != result_required.and_then(Value::as_bool)
        {
            errors.push(format!(
                "{label} result {} required flag does not match selected variant",
                repr(id)
            ));
        }
    }
    for case in cases {
        case_evidence_errors(&mut errors, label, case, results);
    }
    errors
}

/// One declared case: a required result passed, the result's metric names are the declared
/// ones, and a runner-produced result's metrics are canonical (see [`runner_result_errors`]).
fn case_evidence_errors(errors: &mut Vec<String>, label: &str, case: &Value, results: &[Value]) {
    let find = |id: &str| results.iter().find(|r| at(r, "id").as_str() == Some(id));
    let id = s(at(case, "id"));
    let result = find(&id);
    let required = at(case, "required").as_bool() == Some(true);
    if required && result.is_some_and(|r| at(r, "status").as_str() != Some("passed")) {
        errors.push(format!(
            "{label} required result {} did not pass",
            repr(&id)
        ));
    }
    let protocol = at(case, "result_protocol");
    let Some(result) = result else { return };
    let mut declared: Vec<String> = arr(at(protocol, "declared_metrics"))
        .iter()
        .map(s)
        .collect();
    declared.sort();
    declared.dedup();
    let mut names: Vec<String> = arr(at(result, "metrics"))
        .iter()
        .map(|m| s(at(m, "name")))
        .collect();
    names.sort();
    names.dedup();
    if names != declared {
        errors.push(format!(
            "{label} result {} metric names do not match selected variant",
            repr(&id)
        ));
    }
    if at(protocol, "producer").as_str() != Some("runner") {
        return;
    }
    runner_result_errors(errors, label, &id, case, result);
}

/// A runner-produced result: each runner metric's canonical definition, `case_pass` agreeing
/// with the status, and for a passed result an allowed `exit_code` and no output assertion
/// failure.
fn runner_result_errors(
    errors: &mut Vec<String>,
    label: &str,
    id: &str,
    case: &Value,
    result: &Value,
) {
    let protocol = at(case, "result_protocol");
    let metric = |name: &str| {
        arr(at(result, "metrics"))
            .iter()
            .rev()
            .find(|m| at(m, "name").as_str() == Some(name))
    };
    for name in arr(at(protocol, "declared_metrics")).iter().map(s) {
        let (Some(m), Some((unit, aggregation, lower))) =
            (metric(&name), runner_metric_definition(&name))
        else {
            continue;
        };
        if at(m, "unit").as_str() != Some(unit)
            || at(m, "aggregation").as_str() != Some(aggregation)
            || at(m, "lower_is_better").as_bool() != Some(lower)
        {
            errors.push(format!(
                "{label} runner result {} metric {} has non-canonical definition",
                repr(id),
                repr(&name)
            ));
        }
    }
    let Some(case_pass) = metric("case_pass") else {
        return;
    };
    let status = s(at(result, "status"));
    let expected_value: i64 = if status == "passed" { 1 } else { 0 };
    let value = at(case_pass, "value");
    let valid =
        validate::is_finite_number(value) && validate::py_eq(value, &Value::from(expected_value));
    if !valid {
        errors.push(format!(
            "{label} runner result {} case_pass must be numeric {expected_value} for status {}",
            repr(id),
            repr(&status)
        ));
    }
    if status == "passed" {
        if let Some(exit) = metric("exit_code") {
            let code = at(exit, "value");
            let allowed = code.as_int().is_some()
                && arr(at(case, "expected_exit_codes"))
                    .iter()
                    .any(|c| validate::py_eq(c, code));
            if !allowed {
                errors.push(format!(
                    "{label} passed runner result {} exit_code must be an allowed integer \
                     agreed across all repetitions",
                    repr(id)
                ));
            }
        }
        if let Some(failures) = metric("output_assertion_failures") {
            let v = at(failures, "value");
            let zero = !matches!(v, Value::Bool(_)) && validate::py_eq(v, &Value::from(0i64));
            if !zero {
                errors.push(format!(
                    "{label} passed runner result {} output_assertion_failures must be numeric 0",
                    repr(id)
                ));
            }
        }
    }
}

/// Without a manifest both verdicts must be passed.
pub(super) fn verdict_errors(b: &Value, c: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (label, r) in [("baseline", b), ("candidate", c)] {
        if at2(r, "qualification", "verdict").as_str() != Some("passed") {
            errors.push(format!("{label} receipt verdict must be passed"));
        }
    }
    errors
}

/// Bound to a manifest: each receipt's results against its selected variant (see
/// [`required_result_errors`]), and no metric outside the declared results.
pub(super) fn manifest_evidence_errors(
    b: &Value,
    c: &Value,
    mv: &Value,
    bv: &str,
    cv: &str,
) -> Vec<String> {
    let mut errors = required_result_errors(b, &declared_variant(mv, bv), "baseline");
    errors.extend(required_result_errors(
        c,
        &declared_variant(mv, cv),
        "candidate",
    ));
    for (label, r) in [("baseline", b), ("candidate", c)] {
        if !arr(at(r, "metrics")).is_empty() {
            errors.push(format!(
                "{label} manifest-bound receipt must keep metrics inside declared results"
            ));
        }
    }
    errors
}
