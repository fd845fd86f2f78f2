//! `workload.comparison_policy`: nullability by kind, the policy's keys and mode, the declared
//! A/B `variant_pairs`, the cross-backend `backend_pairs`, and each mode's requirements. The
//! metric rules themselves are [`super::rules`]'s.

use super::*;

/// The by-id view of the declared variants.
pub(super) type ById<'a> = BTreeMap<&'a str, &'a VariantFacts>;

/// `comparison_policy`, in the original's order: null or not by kind, its keys and mode, the
/// variant pairs, the backend pairs, the metric rules, the mode's requirements, each rule.
pub(super) fn validate_policy(
    r: &mut Report,
    w: &Object,
    root: &Ctx,
    kind: Option<&str>,
    kind_text: Option<&str>,
    variants: &[VariantFacts],
) {
    let pctx = root.f("comparison_policy");
    let nullable = matches!(kind_text, Some("environment" | "soak"));
    let pv = w.get("comparison_policy");
    if matches!(pv, Some(Value::Null) | None) {
        if !nullable {
            r.at(&pctx, "may be null only for environment or soak workloads");
        }
        return;
    }
    if nullable {
        r.at(
            &pctx,
            format!(
                "must be null for {} workloads",
                kind_text.unwrap_or_default()
            ),
        );
    }
    let p = object(r, pv, &pctx);
    closed(
        r,
        p,
        &pctx,
        &["backend_pairs", "metric_rules", "mode", "variant_pairs"],
    );
    let mode = one_of(r, p, "mode", &pctx, &MODES);
    let by_id: ById = variants
        .iter()
        .filter_map(|v| v.id.as_deref().map(|id| (id, v)))
        .collect();

    let (vp_count, ab_endpoints) = check_variant_pairs(r, p, &pctx, &by_id);
    let (bp_count, cross_endpoints) = check_backend_pairs(r, p, &pctx, &by_id);
    let rules = check_metric_rules(r, p, &pctx);
    let rule_count = rules.len();
    let all_ids: BTreeSet<String> = by_id.keys().map(|s| (*s).to_owned()).collect();
    let comparison_set: BTreeSet<String> = match mode {
        Some("declared_ab_variants") => ab_endpoints,
        Some("cross_backend_correctness") => cross_endpoints,
        _ => all_ids,
    };
    check_mode(r, &pctx, mode, kind, vp_count, bp_count, rule_count);
    if matches!(
        mode,
        Some("same_environment_performance" | "declared_ab_variants")
    ) {
        check_performance_evidence(r, &pctx, &rules, &comparison_set, &by_id);
    }
    let rctx = pctx.f("metric_rules");
    check_rules_against_mode(r, &rctx, mode, &rules, &comparison_set, &by_id);
}

/// `variant_pairs[*]`: each declared A/B pair (see [`check_variant_pair`]), no duplicate pair;
/// returns how many were declared and the variants they name.
fn check_variant_pairs(
    r: &mut Report,
    p: &Object,
    pctx: &Ctx,
    by_id: &ById,
) -> (usize, BTreeSet<String>) {
    let vpctx = pctx.f("variant_pairs");
    let mut vp_count = 0usize;
    let mut ab_endpoints: BTreeSet<String> = BTreeSet::new();
    match p.get("variant_pairs") {
        Some(Value::Array(items)) => {
            vp_count = items.len();
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                check_variant_pair(r, &vpctx, i, item, by_id, &mut seen, &mut ab_endpoints);
            }
        }
        _ => r.at(&vpctx, "must be an array"),
    }
    (vp_count, ab_endpoints)
}

/// One A/B pair: its keys, both variant ids (syntax, declared), two different variants, no
/// duplicate of an earlier pair; for declared variants, the same backend, variables and result
/// contracts, and the declared config differences; records both ends.
fn check_variant_pair(
    r: &mut Report,
    vpctx: &Ctx,
    i: usize,
    item: &Value,
    by_id: &ById,
    seen: &mut BTreeSet<(String, String)>,
    endpoints: &mut BTreeSet<String>,
) {
    let c = vpctx.i(i);
    let o = object(r, Some(item), &c);
    closed(
        r,
        o,
        &c,
        &[
            "allowed_effective_config_differences",
            "baseline_variant_id",
            "candidate_variant_id",
        ],
    );
    let base = nonempty_str(r, o, "baseline_variant_id", &c);
    let cand = nonempty_str(r, o, "candidate_variant_id", &c);
    let diffs = dot_path_list(r, o, "allowed_effective_config_differences", &c);
    let mut ids_ok = true;
    for (key, id) in [
        ("baseline_variant_id", base),
        ("candidate_variant_id", cand),
    ] {
        if let Some(id) = id {
            if !IDENTIFIER.is_match(id) {
                r.at(&c.f(key), "has invalid identifier syntax");
                ids_ok = false;
            } else if !by_id.contains_key(id) {
                r.at(&c.f(key), format!("names undeclared variant {}", repr(id)));
                ids_ok = false;
            }
        } else {
            ids_ok = false;
        }
    }
    let (Some(b), Some(cd)) = (base, cand) else {
        return;
    };
    if b == cd {
        r.at(&c, "must name two different variants");
        return;
    }
    if !seen.insert((b.to_owned(), cd.to_owned())) {
        r.at(
            vpctx,
            format!("contains duplicate pair ({}, {})", repr(b), repr(cd)),
        );
    }
    if !ids_ok {
        return;
    }
    endpoints.insert(b.to_owned());
    endpoints.insert(cd.to_owned());
    let (vb, vc) = (by_id[b], by_id[cd]);
    if vb.backend != vc.backend {
        r.at(&c, "A/B variants must use the same backend");
    }
    if vb.references != vc.references {
        r.at(
            &c,
            "A/B variants must reference the same resolved variables",
        );
    }
    if !same_contracts(vb, vc) {
        r.at(&c, "A/B variants must declare identical result contracts");
    }
    check_config_differences(r, &c, vb, vc, diffs.as_deref());
}

/// An A/B pair's `allowed_effective_config_differences` equal the computed leaf differences
/// of the two configs, each a scalar leaf of one JSON type present in both.
fn check_config_differences(
    r: &mut Report,
    c: &Ctx,
    vb: &VariantFacts,
    vc: &VariantFacts,
    diffs: Option<&[String]>,
) {
    if let (Some(cb), Some(cc)) = (&vb.config, &vc.config) {
        let mut computed = Vec::new();
        leaf_differences(cb, cc, "", &mut computed);
        if let Some(declared) = diffs {
            if declared != computed.as_slice() {
                let list: Vec<String> = computed.iter().map(|s| repr(s)).collect();
                r.at(
                    &c.f("allowed_effective_config_differences"),
                    format!(
                        "must exactly equal the variant config leaf differences [{}]",
                        list.join(", ")
                    ),
                );
            }
        }
        for path in &computed {
            let a = lookup_path(cb, path);
            let bb = lookup_path(cc, path);
            match (a, bb) {
                (Some(a), Some(bb)) => {
                    if matches!(a, Value::Object(_)) || matches!(bb, Value::Object(_)) {
                        r.at(
                            c,
                            format!("config difference {} must name a scalar leaf", repr(path)),
                        );
                    } else if a.python_type_name() != bb.python_type_name() {
                        r.at(
                            c,
                            format!(
                                "config difference {} must preserve JSON leaf type",
                                repr(path)
                            ),
                        );
                    }
                }
                _ => r.at(
                    c,
                    format!(
                        "config difference {} must exist in both variants",
                        repr(path)
                    ),
                ),
            }
        }
    }
}

/// `backend_pairs[*]`: each cross-backend pair (see [`check_backend_pair`]), unique and in
/// canonical ascending order; returns how many were declared and the variants they name.
fn check_backend_pairs(
    r: &mut Report,
    p: &Object,
    pctx: &Ctx,
    by_id: &ById,
) -> (usize, BTreeSet<String>) {
    let bpctx = pctx.f("backend_pairs");
    let mut bp_count = 0usize;
    let mut cross_endpoints: BTreeSet<String> = BTreeSet::new();
    match p.get("backend_pairs") {
        Some(Value::Array(items)) => {
            bp_count = items.len();
            let mut prev: Option<((String, String), (String, String))> = None;
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let c = bpctx.i(i);
                let o = object(r, Some(item), &c);
                closed(
                    r,
                    o,
                    &c,
                    &[
                        "allowed_environment_differences",
                        "backend_a",
                        "backend_b",
                        "variant_a_id",
                        "variant_b_id",
                    ],
                );
                let ba = one_of(r, o, "backend_a", &c, &BACKENDS);
                let bb = one_of(r, o, "backend_b", &c, &BACKENDS);
                let va = nonempty_str(r, o, "variant_a_id", &c);
                let vb = nonempty_str(r, o, "variant_b_id", &c);
                dot_path_list(r, o, "allowed_environment_differences", &c);
                let ok = check_pair_endpoints(r, &c, o, ba, bb, by_id);
                let (Some(ba), Some(bb), Some(va), Some(vb)) = (ba, bb, va, vb) else {
                    continue;
                };
                let ea = (ba.to_owned(), va.to_owned());
                let eb = (bb.to_owned(), vb.to_owned());
                if ea == eb {
                    r.at(&c, "must name two different backend/variant endpoints");
                    continue;
                }
                if ba == bb {
                    r.at(&c, "must name two different backends");
                }
                if ea > eb {
                    r.at(&c, "endpoints must use canonical ascending order");
                }
                let key = (ea.clone(), eb.clone());
                if !seen.insert(key.clone()) {
                    r.at(
                        &bpctx,
                        format!(
                            "contains duplicate pair (({}, {}), ({}, {}))",
                            repr(ba),
                            repr(va),
                            repr(bb),
                            repr(vb)
                        ),
                    );
                } else if prev.as_ref().is_some_and(|p| *p > key) {
                    r.at(&bpctx, "must use canonical ascending order");
                }
                prev = Some(key);
                if !ok {
                    continue;
                }
                cross_endpoints.insert(va.to_owned());
                cross_endpoints.insert(vb.to_owned());
                let (fa, fb) = (by_id[va], by_id[vb]);
                if fa.references != fb.references {
                    r.at(
                        &c,
                        "cross-backend variants must reference the same resolved variables",
                    );
                }
                if !same_contracts(fa, fb) {
                    r.at(
                        &c,
                        "cross-backend variants must declare identical result contracts",
                    );
                }
                let ca = fa.config.as_ref().map(to_canonical_string);
                let cb = fb.config.as_ref().map(to_canonical_string);
                if ca != cb {
                    r.at(
                        &c,
                        "cross-backend variants must declare identical effective_config",
                    );
                }
            }
        }
        _ => r.at(&bpctx, "must be an array"),
    }
    (bp_count, cross_endpoints)
}

/// A backend pair's two `variant_*_id`s: identifier syntax, a declared variant, whose backend
/// matches the endpoint's; returns whether both are usable.
fn check_pair_endpoints(
    r: &mut Report,
    c: &Ctx,
    o: &Object,
    ba: Option<&str>,
    bb: Option<&str>,
    by_id: &ById,
) -> bool {
    let mut ok = true;
    for (key, id, backend, end) in [
        ("variant_a_id", o.get("variant_a_id"), ba, "a"),
        ("variant_b_id", o.get("variant_b_id"), bb, "b"),
    ] {
        let id = id.and_then(Value::as_str);
        match id {
            Some(id) if !id.is_empty() && !IDENTIFIER.is_match(id) => {
                r.at(&c.f(key), "has invalid identifier syntax");
                ok = false;
            }
            Some(id) if by_id.contains_key(id) => {
                if let Some(b) = backend {
                    if by_id[id].backend.as_deref() != Some(b) {
                        r.at(
                            c,
                            format!("endpoint {end} backend does not match variant {}", repr(id)),
                        );
                        ok = false;
                    }
                }
            }
            Some(id) => {
                r.at(&c.f(key), format!("names undeclared variant {}", repr(id)));
                ok = false;
            }
            None => ok = false,
        }
    }
    ok
}

/// A performance mode needs at least one required, command-produced, non-runner performance
/// rule whose result every compared variant produces by command.
fn check_performance_evidence(
    r: &mut Report,
    pctx: &Ctx,
    rules: &[RuleFacts],
    comparison_set: &BTreeSet<String>,
    by_id: &ById,
) {
    let has_evidence = rules.iter().any(|rule| {
        rule.required == Some(true)
            && rule.metric_class.as_deref() == Some("performance")
            && rule
                .metric
                .as_deref()
                .is_some_and(|m| runner_metric(m).is_none())
            && rule.result_id_str.is_some()
            && comparison_set.iter().all(|vid| {
                by_id.get(vid.as_str()).is_some_and(|v| {
                    v.contracts
                        .get(rule.result_id_str.as_deref().unwrap_or_default())
                        .is_some_and(|c| c.producer.as_deref() == Some("command"))
                })
            })
    });
    if !has_evidence {
        r.at(
            pctx,
            "performance comparison requires at least one required command-produced non-runner metric rule",
        );
    }
}

/// The mode's requirements: the workload kind, which pairs it needs or forbids, whether it
/// needs metric rules.
fn check_mode(
    r: &mut Report,
    pctx: &Ctx,
    mode: Option<&str>,
    kind: Option<&str>,
    vp_count: usize,
    bp_count: usize,
    rule_count: usize,
) {
    match mode {
        Some(m @ ("same_environment_performance" | "declared_ab_variants")) => {
            if kind != Some("performance") {
                r.at(&pctx.f("mode"), format!("{m} requires kind='performance'"));
            }
            if m == "same_environment_performance" {
                if vp_count > 0 || bp_count > 0 {
                    r.at(
                        &pctx.f("mode"),
                        format!("{m} cannot declare variant or backend pairs"),
                    );
                }
            } else {
                if vp_count == 0 {
                    r.at(&pctx.f("mode"), format!("{m} requires variant_pairs"));
                }
                if bp_count > 0 {
                    r.at(&pctx.f("mode"), format!("{m} cannot declare backend_pairs"));
                }
            }
            if rule_count == 0 {
                r.at(&pctx.f("mode"), format!("{m} requires metric_rules"));
            }
        }
        Some(m @ "cross_backend_correctness") => {
            if kind != Some("correctness") {
                r.at(&pctx.f("mode"), format!("{m} requires kind='correctness'"));
            }
            if vp_count > 0 {
                r.at(&pctx.f("mode"), format!("{m} cannot declare variant_pairs"));
            }
            if bp_count == 0 {
                r.at(&pctx.f("mode"), format!("{m} requires backend_pairs"));
            }
            if rule_count == 0 {
                r.at(&pctx.f("mode"), format!("{m} requires metric_rules"));
            }
        }
        Some(m @ "self_contained_correctness") => {
            if kind != Some("correctness") {
                r.at(&pctx.f("mode"), format!("{m} requires kind='correctness'"));
            }
            if vp_count > 0 || bp_count > 0 {
                r.at(&pctx.f("mode"), format!("{m} cannot declare receipt pairs"));
            }
            if rule_count > 0 {
                r.at(&pctx.f("mode"), format!("{m} cannot declare metric_rules"));
            }
        }
        _ => {}
    }
}

/// Per case id: (required, declared metrics, producer).
pub(super) type ContractKey = BTreeMap<String, (Option<bool>, BTreeSet<String>, Option<String>)>;

pub(super) fn same_contracts(a: &VariantFacts, b: &VariantFacts) -> bool {
    let key = |v: &VariantFacts| -> ContractKey {
        v.contracts
            .iter()
            .map(|(k, c)| {
                (
                    k.clone(),
                    (c.required, c.metrics.clone(), c.producer.clone()),
                )
            })
            .collect()
    };
    key(a) == key(b)
}

/// Validates a non-empty, unique, ascending list of dot-paths; returns it when fully valid.
pub(super) fn dot_path_list(r: &mut Report, o: &Object, key: &str, c: &Ctx) -> Option<Vec<String>> {
    let lc = c.f(key);
    let Some(Value::Array(items)) = o
        .get(key)
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    else {
        r.at(&lc, "must be a non-empty array");
        return None;
    };
    let mut out = Vec::new();
    let mut ok = true;
    let mut order = Ascending::new();
    for (k, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if !s.is_empty() => {
                if !is_dot_path(s) {
                    r.at(&lc.i(k), "has invalid dot-path syntax");
                    ok = false;
                }
                order.push(s.as_str());
                out.push(s.clone());
            }
            _ => {
                r.at(&lc.i(k), "must be a non-empty string");
                ok = false;
            }
        }
    }
    order.report(r, &lc);
    ok.then_some(out)
}

/// The original's leaf-difference walk (per-level sorted keys, `<root>` at top level).
pub(super) fn leaf_differences(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    let same = a.python_type_name() == b.python_type_name()
        && to_canonical_string(a) == to_canonical_string(b);
    if same {
        return;
    }
    let here = if path.is_empty() {
        "<root>".to_owned()
    } else {
        path.to_owned()
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let kx: BTreeSet<&String> = x.keys().collect();
            let ky: BTreeSet<&String> = y.keys().collect();
            if kx != ky {
                out.push(here);
                return;
            }
            for k in kx {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaf_differences(x.get(k).unwrap(), y.get(k).unwrap(), &child, out);
            }
        }
        _ => out.push(here),
    }
}

pub(super) fn lookup_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    if path == "<root>" {
        return None;
    }
    let mut cur = v;
    for seg in path.split('.') {
        cur = cur.get(seg)?;
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_differences_walk() {
        let a = qual_json::from_str(r#"{"s":{"a":1,"b":2.0},"t":"x"}"#).unwrap();
        let b = qual_json::from_str(r#"{"s":{"a":2,"b":2.0},"t":"y"}"#).unwrap();
        let mut out = Vec::new();
        leaf_differences(&a, &b, "", &mut out);
        assert_eq!(out, vec!["s.a", "t"]);
    }
}
