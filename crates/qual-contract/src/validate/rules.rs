//! `workload.comparison_policy.metric_rules[*]`: each rule's keys and fields, the list's
//! uniqueness and required-rule requirement, and the per-rule checks against the policy's mode
//! and the compared variants' result contracts.

use super::policy::ById;
use super::*;

/// `metric_rules`: an array of rules (each checked by [`validate_rule`]) with unique metric
/// identities and, when not empty, at least one required rule.
pub(super) fn check_metric_rules(r: &mut Report, p: &Object, pctx: &Ctx) -> Vec<RuleFacts> {
    // metric rules
    let rctx = pctx.f("metric_rules");
    let mut rules: Vec<RuleFacts> = Vec::new();
    match p.get("metric_rules") {
        Some(Value::Array(items)) => {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let c = rctx.i(i);
                let rf = validate_rule(r, item, &c);
                if let (Some(s), Some(id), Some(m)) = (&rf.scope, &rf.result_id, &rf.metric) {
                    if !seen.insert((s.clone(), id.clone(), m.clone())) {
                        r.at(
                            &rctx,
                            format!(
                                "contains duplicate metric identity ({}, {}, {})",
                                repr(s),
                                repr(id),
                                repr(m)
                            ),
                        );
                    }
                }
                rules.push(rf);
            }
            if !items.is_empty() && !rules.iter().any(|x| x.required == Some(true)) {
                r.at(&rctx, "must contain at least one required rule");
            }
        }
        _ => r.at(&rctx, "must be an array"),
    }
    rules
}

/// Each rule against the mode (scope, class, required, operator for cross-backend correctness;
/// a performance class otherwise) and, for a result-scoped rule, against every compared
/// variant's result contract.
pub(super) fn check_rules_against_mode(
    r: &mut Report,
    rctx: &Ctx,
    mode: Option<&str>,
    rules: &[RuleFacts],
    comparison_set: &BTreeSet<String>,
    by_id: &ById,
) {
    // per-rule checks
    for (i, rule) in rules.iter().enumerate() {
        let c = rctx.i(i);
        if mode == Some("cross_backend_correctness") {
            if rule.scope.as_deref() != Some("result") {
                r.at(
                    &c,
                    "cross-backend correctness metrics must be result-scoped",
                );
            }
            if rule.metric_class.as_deref() == Some("performance") {
                r.at(&c, "cross-backend comparison forbids performance metrics");
            }
            if rule.required != Some(true) {
                r.at(&c, "cross-backend correctness metrics must be required");
            }
            if rule.operator.as_deref() != Some("equal") {
                r.at(
                    &c,
                    "cross-backend correctness metrics must use operator='equal'",
                );
            }
        } else if rule.metric_class.as_deref() != Some("performance") {
            r.at(
                &c,
                "performance comparison requires metric_class='performance'",
            );
        }
        if rule.scope.as_deref() == Some("result") {
            if let Some(rid) = &rule.result_id_str {
                for vid in comparison_set {
                    let Some(v) = by_id.get(vid.as_str()) else {
                        continue;
                    };
                    match v.contracts.get(rid) {
                        None => r.at(
                            &c.f("result_id"),
                            format!("{} is not declared by variant {}", repr(rid), repr(vid)),
                        ),
                        Some(cc) => {
                            if cc.required != Some(true) {
                                r.at(
                                    &c.f("result_id"),
                                    format!(
                                        "{} is not required by variant {}",
                                        repr(rid),
                                        repr(vid)
                                    ),
                                );
                            }
                            if let Some(m) = &rule.metric {
                                if !cc.metrics.contains(m) {
                                    r.at(
                                        &c.f("metric"),
                                        format!(
                                            "{} is not declared by result {} in variant {}",
                                            repr(m),
                                            repr(rid),
                                            repr(vid)
                                        ),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(super) struct RuleFacts {
    pub(super) scope: Option<String>,
    pub(super) result_id: Option<String>,
    pub(super) result_id_str: Option<String>,
    pub(super) metric: Option<String>,
    pub(super) metric_class: Option<String>,
    pub(super) operator: Option<String>,
    pub(super) required: Option<bool>,
}

fn validate_rule(r: &mut Report, item: &Value, c: &Ctx) -> RuleFacts {
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
