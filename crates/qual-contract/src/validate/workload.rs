//! The workload's top level: the root object's keys, `schema_version`, `workload_id`, `kind`,
//! `description`, the `determinism` block, the `variants` list (each variant checked by
//! [`super::variant`]), and the whole-workload checks that need every variant (unused
//! variables, seed delivery, `${model_path}`), before [`super::policy`].

use super::*;

/// Validates a workload document and returns every violation (empty means valid).
pub fn validate_workload(doc: &Value) -> Vec<Violation> {
    let mut r = Report { errors: Vec::new() };
    let root = Ctx::root("workload");
    let w = object(&mut r, Some(doc), &root);
    closed(
        &mut r,
        w,
        &root,
        &[
            "comparison_policy",
            "description",
            "determinism",
            "kind",
            "schema_version",
            "variables",
            "variants",
            "workload_id",
        ],
    );
    if !py_equals_one(w.get("schema_version")) {
        r.at(&root.f("schema_version"), "must be 1");
    }
    if let Some(id) = nonempty_str(&mut r, w, "workload_id", &root) {
        if !IDENTIFIER.is_match(id) {
            r.at(&root.f("workload_id"), "has invalid identifier syntax");
        }
    }
    let kind = one_of(&mut r, w, "kind", &root, &KINDS);
    let kind_text: Option<&str> = w.get("kind").and_then(Value::as_str);
    nonempty_str(&mut r, w, "description", &root);

    // determinism
    let dctx = root.f("determinism");
    let d = object(&mut r, w.get("determinism"), &dctx);
    closed(
        &mut r,
        d,
        &dctx,
        &[
            "case_order",
            "max_parallel_cases",
            "network_access",
            "repetitions",
            "seed",
            "seed_delivery",
        ],
    );
    let seed = d.get("seed");
    let seed_ok = matches!(seed, Some(Value::Null))
        || matches!(seed, Some(Value::Number(Number::Int(i))) if !i.is_negative());
    if !seed_ok {
        r.at(&dctx.f("seed"), "must be null or a non-negative integer");
    }
    let delivery = one_of(&mut r, d, "seed_delivery", &dctx, &SEED_DELIVERIES);
    let repetitions = positive_int(&mut r, d, "repetitions", &dctx, MAX_REPETITIONS);
    if d.get("case_order").and_then(Value::as_str) != Some("declared") {
        r.at(&dctx.f("case_order"), "must be 'declared'");
    }
    if !py_equals_one(d.get("max_parallel_cases")) {
        r.at(&dctx.f("max_parallel_cases"), "must be 1");
    }
    if d.get("network_access").and_then(Value::as_str) != Some("forbidden") {
        r.at(&dctx.f("network_access"), "must be 'forbidden'");
    }
    let seed_is_null = matches!(seed, Some(Value::Null) | None);
    let delivery_raw = d.get("seed_delivery").and_then(Value::as_str);
    if kind_text == Some("environment") {
        if !seed_is_null || delivery_raw != Some("not_applicable") {
            r.raw(
                &dctx.ptr,
                "environment workloads require seed=null and seed_delivery=\"not_applicable\""
                    .into(),
            );
        }
    } else {
        let kind_repr = match w.get("kind") {
            Some(Value::String(s)) => repr(s),
            Some(other) => to_canonical_string(other),
            None => "null".into(),
        };
        if seed_is_null {
            r.raw(
                &dctx.f("seed").ptr,
                format!("{kind_repr} workloads require an explicit deterministic seed"),
            );
        }
        if delivery_raw == Some("not_applicable") {
            r.raw(
                &dctx.f("seed_delivery").ptr,
                format!("{kind_repr} workloads cannot use seed_delivery=\"not_applicable\""),
            );
        }
    }
    if delivery_raw == Some("fixed_fixture") && kind_text != Some("correctness") {
        r.raw(
            &dctx.f("seed_delivery").ptr,
            "seed_delivery=\"fixed_fixture\" is limited to correctness workloads".into(),
        );
    }

    // variables
    let vars = validate_variables(&mut r, w.get("variables"), &root);
    let declared: BTreeSet<String> = vars.keys().cloned().collect();

    // variants
    let vctx = root.f("variants");
    let mut variants: Vec<VariantFacts> = Vec::new();
    match w.get("variants") {
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut prev: Option<String> = None;
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let facts =
                    validate_variant(&mut r, item, &vctx.i(i), &declared, &vars, repetitions);
                if let Some(id) = &facts.id {
                    if !seen.insert(id.clone()) {
                        r.raw(
                            &vctx.i(i).f("id").ptr,
                            format!("workload.variants contains duplicate id {}", repr(id)),
                        );
                    } else if prev.as_ref().is_some_and(|p| p > id) {
                        r.raw(
                            &vctx.ptr,
                            "workload.variants must use ascending id order".into(),
                        );
                    }
                    prev = Some(id.clone());
                }
                variants.push(facts);
            }
        }
        _ => r.at(&vctx, "must be a non-empty array"),
    }

    // whole-workload checks
    let referenced: BTreeSet<&String> = variants.iter().flat_map(|v| v.references.iter()).collect();
    let unused: Vec<&str> = vars
        .keys()
        .filter(|n| !referenced.contains(n))
        .map(String::as_str)
        .collect();
    if !unused.is_empty() {
        r.raw(
            &root.f("variables").ptr,
            format!(
                "workload.variables contains unused definitions: {}",
                unused.join(", ")
            ),
        );
    }
    for (i, v) in variants.iter().enumerate() {
        let vid = v.id.clone().unwrap_or_default();
        match delivery {
            Some("argv") if !v.seed_in_argv => r.raw(
                &vctx.i(i).ptr,
                format!(
                    "workload variant {} does not deliver determinism.seed through argv",
                    repr(&vid)
                ),
            ),
            Some("environment") if !v.seed_in_env => r.raw(
                &vctx.i(i).ptr,
                format!(
                    "workload variant {} does not deliver determinism.seed through environment",
                    repr(&vid)
                ),
            ),
            _ => {}
        }
    }
    if let Some(dl @ ("fixed_fixture" | "not_applicable")) = delivery {
        if variants.iter().any(|v| v.seed_in_argv || v.seed_in_env) {
            r.raw(
                &dctx.f("seed_delivery").ptr,
                format!(
                    "seed_delivery=\"{dl}\" cannot reference the reserved ${{seed}} placeholder"
                ),
            );
        }
    }
    let any_model = variants.iter().any(|v| v.uses_model);
    for (i, v) in variants.iter().enumerate() {
        let vid = v.id.clone().unwrap_or_default();
        if kind_text == Some("environment") {
            if v.uses_model {
                r.raw(
                    &vctx.i(i).ptr,
                    format!(
                        "workload variant {} cannot reference ${{model_path}} for an environment workload",
                        repr(&vid)
                    ),
                );
            }
        } else if (kind_text.is_some_and(|k| MODEL_KINDS.contains(&k)) || any_model)
            && !v.uses_model
        {
            r.raw(
                &vctx.i(i).ptr,
                format!(
                    "workload variant {} must consume the runner-owned ${{model_path}} placeholder",
                    repr(&vid)
                ),
            );
        }
    }

    validate_policy(&mut r, w, &root, kind, kind_text, &variants);
    r.errors
}
