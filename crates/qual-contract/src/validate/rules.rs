//! `workload.comparison_policy.metric_rules[*]`: each rule's keys and fields, the list's
//! uniqueness and required-rule requirement, and the per-rule checks against the policy's mode
//! and the compared variants' result contracts.

use super::*;

pub(super) struct RuleFacts {
    pub(super) scope: Option<String>,
    pub(super) result_id: Option<String>,
    pub(super) result_id_str: Option<String>,
    pub(super) metric: Option<String>,
    pub(super) metric_class: Option<String>,
    pub(super) operator: Option<String>,
    pub(super) required: Option<bool>,
}

pub(super) fn validate_rule(r: &mut Report, item: &Value, c: &Ctx) -> RuleFacts {
    let o = object(r, Some(item), c);
    closed(
        r,
        o,
        c,
        &[
            "absolute_tolerance",
            "aggregation",
            "lower_is_better",
            "metric",
            "metric_class",
            "operator",
            "relative_tolerance",
            "required",
            "result_id",
            "scope",
            "unit",
        ],
    );
    let scope = one_of(r, o, "scope", c, &SCOPES).map(str::to_owned);
    let result_id_str = o
        .get("result_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut result_id = None;
    match &result_id_str {
        Some(s) if IDENTIFIER.is_match(s) => result_id = Some(s.clone()),
        _ => r.at(
            &c.f("result_id"),
            "must be a valid identifier for result scope",
        ),
    }
    let mut metric = None;
    if let Some(m) = nonempty_str(r, o, "metric", c) {
        if METRIC_NAME.is_match(m) {
            metric = Some(m.to_owned());
        } else {
            r.at(&c.f("metric"), "has invalid metric syntax");
        }
    }
    let metric_class = one_of(r, o, "metric_class", c, &METRIC_CLASSES).map(str::to_owned);
    let unit = nonempty_str(r, o, "unit", c);
    let aggregation = nonempty_str(r, o, "aggregation", c);
    let lower = boolean(r, o, "lower_is_better", c);
    let operator = one_of(r, o, "operator", c, &OPERATORS).map(str::to_owned);
    match (operator.as_deref(), lower) {
        (Some("not_greater"), Some(false)) => r.raw(
            &c.f("operator").ptr,
            format!(
                "{}.operator='not_greater' requires lower_is_better=true",
                c.text
            ),
        ),
        (Some("not_less"), Some(true)) => r.raw(
            &c.f("operator").ptr,
            format!(
                "{}.operator='not_less' requires lower_is_better=false",
                c.text
            ),
        ),
        _ => {}
    }
    if let Some(rm) = metric.as_deref().and_then(runner_metric) {
        if unit != Some(rm.unit)
            || aggregation != Some(rm.aggregation)
            || lower != Some(rm.lower_is_better)
        {
            r.at(
                c,
                format!(
                    "runner metric {} must use canonical definition {{\"unit\": {}, \"aggregation\": {}, \"lower_is_better\": {}}}",
                    repr(rm.name),
                    repr(rm.unit),
                    repr(rm.aggregation),
                    rm.lower_is_better
                ),
            );
        }
    }
    for key in ["absolute_tolerance", "relative_tolerance"] {
        let ok = o.get(key).and_then(finite_number).is_some_and(|f| f >= 0.0);
        if !ok {
            r.at(&c.f(key), "must be a finite non-negative number");
        }
    }
    let required = boolean(r, o, "required", c);
    RuleFacts {
        scope,
        result_id,
        result_id_str: result_id_str.filter(|_| true),
        metric,
        metric_class,
        operator,
        required,
    }
}
