//! The workload's top level: the root object's keys, `schema_version`, `workload_id`, `kind`,
//! `description`, the `determinism` block, the `variants` list (each variant checked by
//! [`super::variant`]), and the whole-workload checks that need every variant (unused
//! variables, seed delivery, `${model_path}`), before [`super::policy`].

use super::*;

/// Validates a workload document and returns every violation (empty means valid).
pub fn validate_workload(doc: &Value) -> Vec<Violation> {
    let mut r = Report::default();
    let root = Ctx::root("workload");
    let w = object(&mut r, Some(doc), &root);
    let (kind, kind_text) = check_header(&mut r, w, &root);
    let (delivery, repetitions) = check_determinism(&mut r, w, &root, kind_text);
    let vars = validate_variables(&mut r, w.get("variables"), &root);
    let variants = check_variants(&mut r, w, &root, &vars, repetitions);
    check_unused_variables(&mut r, &root, &vars, &variants);
    check_seed_delivery(&mut r, &root, delivery, &variants);
    check_model_path(&mut r, &root, kind_text, &variants);
    validate_policy(&mut r, w, &root, kind, kind_text, &variants);
    r.finish()
}

/// The root's closed key set, `schema_version`, `workload_id`, `kind` and `description`;
/// returns the valid kind and the kind's text whatever it is.
fn check_header<'a>(
    r: &mut Report,
    w: &'a Object,
    root: &Ctx,
) -> (Option<&'a str>, Option<&'a str>) {
    closed(
        r,
        w,
        root,
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
    if let Some(id) = nonempty_str(r, w, "workload_id", root) {
        if !IDENTIFIER.is_match(id) {
            r.at(&root.f("workload_id"), "has invalid identifier syntax");
        }
    }
    let kind = one_of(r, w, "kind", root, &KINDS);
    let kind_text: Option<&str> = w.get("kind").and_then(Value::as_str);
    nonempty_str(r, w, "description", root);
    (kind, kind_text)
}

/// `determinism`: its keys, `seed`, `seed_delivery`, `repetitions`, the fixed `case_order`,
/// `max_parallel_cases` and `network_access`, and the seed rules by kind; returns the valid
/// seed delivery and repetitions.
fn check_determinism<'a>(
    r: &mut Report,
    w: &'a Object,
    root: &Ctx,
    kind_text: Option<&str>,
) -> (Option<&'a str>, Option<u64>) {
    let dctx = root.f("determinism");
    let d = object(r, w.get("determinism"), &dctx);
    closed(
        r,
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
    let delivery = one_of(r, d, "seed_delivery", &dctx, &SEED_DELIVERIES);
    let repetitions = positive_int(r, d, "repetitions", &dctx, MAX_REPETITIONS);
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
    (delivery, repetitions)
}

/// `variants`: a non-empty array, each variant checked in turn, ids unique and ascending.
fn check_variants(
    r: &mut Report,
    w: &Object,
    root: &Ctx,
    vars: &BTreeMap<String, VarFacts>,
    repetitions: Option<u64>,
) -> Vec<VariantFacts> {
    let declared: BTreeSet<String> = vars.keys().cloned().collect();
    let vctx = root.f("variants");
    let mut variants: Vec<VariantFacts> = Vec::new();
    match w.get("variants") {
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut prev: Option<String> = None;
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let facts = validate_variant(r, item, &vctx.i(i), &declared, vars, repetitions);
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
    variants
}

/// Every declared variable is referenced by some variant.
fn check_unused_variables(
    r: &mut Report,
    root: &Ctx,
    vars: &BTreeMap<String, VarFacts>,
    variants: &[VariantFacts],
) {
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
}

/// Each variant delivers `${seed}` the declared way, and no variant references it when the
/// seed is a fixed fixture or not applicable.
fn check_seed_delivery(
    r: &mut Report,
    root: &Ctx,
    delivery: Option<&str>,
    variants: &[VariantFacts],
) {
    let dctx = root.f("determinism");
    let vctx = root.f("variants");
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
}

/// `${model_path}`: never in an environment workload, in every variant of a model kind or
/// where any variant uses it.
fn check_model_path(
    r: &mut Report,
    root: &Ctx,
    kind_text: Option<&str>,
    variants: &[VariantFacts],
) {
    let vctx = root.f("variants");
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
}
