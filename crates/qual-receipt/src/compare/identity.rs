//! Compatibility rules: the identities two receipts must share (source, model, profile, metric
//! set, workload, effective config, backend environment, result evidence), the differences a
//! mode admits (a declared A/B pair's config paths, a backend pair's environment paths), and
//! the volatile environment observations that are listed as allowed, never compared.

use super::load::variant;
use super::metrics::metric_definition;
use super::*;

/// Human lines naming each differing leaf between two values (dot paths; `<root>` for a
/// difference at the top).
pub(super) fn leaf_differences(a: &Value, b: &Value, prefix: &str) -> Vec<String> {
    config_difference_paths(a, b, prefix)
        .into_iter()
        .map(|path| {
            let pick = |v: &Value| {
                if path == "<root>" {
                    Some(v.clone())
                } else {
                    dot_value(v, &path).cloned()
                }
            };
            let show = |x: Option<Value>| x.map_or_else(|| "(absent)".to_owned(), |v| canon(&v));
            format!("{path}: {} -> {}", show(pick(a)), show(pick(b)))
        })
        .collect()
}

/// The original's `_config_difference_paths`.
pub(super) fn config_difference_paths(a: &Value, b: &Value, prefix: &str) -> Vec<String> {
    if json_eq(a, b) {
        return Vec::new();
    }
    if let (Some(x), Some(y)) = (a.as_object(), b.as_object()) {
        let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut out = Vec::new();
        for key in keys {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match (x.get(key), y.get(key)) {
                (Some(p), Some(q)) => out.extend(config_difference_paths(p, q, &path)),
                _ => out.push(path),
            }
        }
        return out;
    }
    vec![if prefix.is_empty() {
        "<root>".to_owned()
    } else {
        prefix.to_owned()
    }]
}

pub(super) fn dot_value<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path.split('.') {
        cur = cur.as_object()?.get(seg)?;
    }
    Some(cur)
}

pub(super) fn model_identity(model: &Value) -> Value {
    if model.is_null() {
        return Value::Null;
    }
    let mut weights: Vec<Value> = arr(at(model, "weight_files")).to_vec();
    weights.sort_by_key(|p| s(at(p, "path")));
    obj(vec![
        ("id", at(model, "id").clone()),
        ("weight_files", Value::Array(weights)),
        ("config_hash", at(model, "config_hash").clone()),
        ("tokenizer_hash", at(model, "tokenizer_hash").clone()),
        (
            "chat_template_hash",
            at(model, "chat_template_hash").clone(),
        ),
    ])
}

pub(super) fn sorted_by_key(items: &[Value], key: &str) -> Vec<Value> {
    let mut v = items.to_vec();
    v.sort_by_key(|p| s(at(p, key)));
    v
}

pub(super) fn metric_identity(receipt: &Value) -> Value {
    let results: Vec<Value> = sorted_by_key(arr(at(receipt, "results")), "id")
        .iter()
        .map(|r| {
            obj(vec![
                ("id", at(r, "id").clone()),
                ("required", at(r, "required").clone()),
            ])
        })
        .collect();
    let metrics: Object = metrics_by_scope(receipt)
        .into_iter()
        .map(|(scope, m)| (scope, metric_definition(m)))
        .collect();
    obj(vec![
        ("results", Value::Array(results)),
        ("metrics", Value::Object(metrics)),
    ])
}

pub(super) fn strict_result_identity(receipt: &Value) -> Value {
    Value::Array(
        sorted_by_key(arr(at(receipt, "results")), "id")
            .iter()
            .map(|r| {
                obj(vec![
                    ("id", at(r, "id").clone()),
                    ("required", at(r, "required").clone()),
                    ("status", at(r, "status").clone()),
                    (
                        "metrics",
                        Value::Array(sorted_by_key(arr(at(r, "metrics")), "name")),
                    ),
                ])
            })
            .collect(),
    )
}

pub(super) fn workload_base_identity(workload: &Value) -> Value {
    let params: Object = at(workload, "parameters")
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| k.as_str() != "variant_id")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    obj(vec![
        ("id", at(workload, "id").clone()),
        ("sha256", at(workload, "sha256").clone()),
        ("seed", at(workload, "seed").clone()),
        ("parameters", Value::Object(params)),
    ])
}

pub(super) fn add_difference(out: &mut Vec<Difference>, compatibility: &str, a: &Value, b: &Value) {
    if !json_eq(a, b) {
        out.push(Difference::pair(compatibility, a, b));
    }
}

pub(super) fn allowed_environment_differences(
    baseline: &Value,
    candidate: &Value,
    allowed_paths: &[String],
) -> (Vec<Difference>, Vec<Difference>, Vec<String>) {
    let mut allowed = Vec::new();
    let mut rejected = Vec::new();
    let mut errors = Vec::new();
    for path in allowed_paths {
        let before = dot_value(baseline, path);
        let after = dot_value(candidate, path);
        let composite = |v: Option<&Value>| matches!(v, Some(Value::Object(_) | Value::Array(_)));
        if before.is_none() && after.is_none() {
            errors.push(format!(
                "allowed environment path {} is absent from both receipts",
                repr(path)
            ));
        } else if composite(before) || composite(after) {
            errors.push(format!(
                "allowed environment path {} must name a scalar leaf",
                repr(path)
            ));
        } else if let (Some(x), Some(y)) = (before, after) {
            if json_eq(x, y) {
                errors.push(format!(
                    "allowed environment path {} is unused because its values are equal",
                    repr(path)
                ));
                continue;
            }
            allowed.push(env_allowed(path, before, after));
        } else {
            allowed.push(env_allowed(path, before, after));
        }
    }
    for path in config_difference_paths(baseline, candidate, "") {
        if !allowed_paths.contains(&path) {
            let mut d = Difference::pair("environment", baseline, candidate);
            d.detail = leaf_differences(baseline, candidate, "")
                .into_iter()
                .filter(|line| line.starts_with(&format!("{path}:")))
                .collect();
            d.path = Some(path);
            rejected.push(d);
        }
    }
    (allowed, rejected, errors)
}

pub(super) fn env_allowed(path: &str, before: Option<&Value>, after: Option<&Value>) -> Difference {
    Difference {
        baseline: Some(before.map_or(serde_json::Value::Null, json_of)),
        baseline_present: Some(before.is_some()),
        candidate: Some(after.map_or(serde_json::Value::Null, json_of)),
        candidate_present: Some(after.is_some()),
        compatibility: "environment".to_owned(),
        expected: None,
        observed: None,
        path: Some(path.to_owned()),
        side: None,
        detail: Vec::new(),
    }
}

pub(super) fn variant_difference(compatibility: &str, a: &str, b: &str) -> Difference {
    Difference::pair(compatibility, &Value::from(a), &Value::from(b))
}

/// Environment leaves that record a momentary observation of the machine (free memory, swap in
/// use, temperatures, pressure), not the identity of the environment. Two runs on one host
/// always differ there, so they are listed as allowed `environment_observation` differences
/// instead of making every pair of real receipts incomparable. (Deliberate difference: the
/// original compares them as identity.)
pub const VOLATILE_ENVIRONMENT_LEAVES: [&str; 7] = [
    "device.memory_available_bytes",
    "platform.observations.gpu_temperature",
    "platform.observations.host_temperatures",
    "platform.observations.memory_pressure",
    "platform.observations.metal_runtime.current_allocated_bytes",
    "platform.observations.thermal_pressure",
    "platform.observations.unified_memory.swap_used_bytes",
];

pub(super) fn without(v: &Value, path: &[&str]) -> Value {
    match (v, path) {
        (Value::Object(o), [key]) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != *key)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        (Value::Object(o), [key, rest @ ..]) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = if k == key {
                        without(v, rest)
                    } else {
                        v.clone()
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// The environment without its volatile observations.
pub(super) fn stable_environment(env: &Value) -> Value {
    VOLATILE_ENVIRONMENT_LEAVES
        .iter()
        .fold(env.clone(), |acc, path| {
            without(&acc, &path.split('.').collect::<Vec<_>>())
        })
}

/// The volatile observations that differ, as allowed differences.
pub(super) fn volatile_differences(baseline: &Value, candidate: &Value) -> Vec<Difference> {
    VOLATILE_ENVIRONMENT_LEAVES
        .iter()
        .filter_map(|path| {
            let before = dot_value(baseline, path);
            let after = dot_value(candidate, path);
            let same = match (before, after) {
                (Some(x), Some(y)) => json_eq(x, y),
                (None, None) => true,
                _ => false,
            };
            (!same).then(|| {
                let mut d = env_allowed(path, before, after);
                d.compatibility = "environment_observation".to_owned();
                d
            })
        })
        .collect()
}

pub(super) fn backend_environment(receipt: &Value) -> Value {
    obj(vec![
        ("backend", at2(receipt, "qualification", "backend").clone()),
        (
            "environment",
            stable_environment(at(receipt, "environment")),
        ),
    ])
}

/// The identities every pair of receipts must share: qualification kind, source tree, model,
/// profile and metric set.
pub(super) fn shared_identity(rejected: &mut Vec<Difference>, b: &Value, c: &Value) {
    add_difference(
        rejected,
        "qualification_kind",
        at2(b, "qualification", "kind"),
        at2(c, "qualification", "kind"),
    );
    let source = |r: &Value| {
        obj(vec![
            (
                "tree_hash_format",
                at2(r, "source", "tree_hash_format").clone(),
            ),
            ("tree_hash", at2(r, "source", "tree_hash").clone()),
        ])
    };
    add_difference(rejected, "source", &source(b), &source(c));
    add_difference(
        rejected,
        "model",
        &model_identity(at(b, "model")),
        &model_identity(at(c, "model")),
    );
    add_difference(
        rejected,
        "profile",
        at2(b, "qualification", "profile"),
        at2(c, "qualification", "profile"),
    );
    add_difference(
        rejected,
        "metric_identity",
        &metric_identity(b),
        &metric_identity(c),
    );
}

/// Without a manifest everything else must be equal too: workload, backend environment and
/// effective config.
pub(super) fn strict_no_workload(rejected: &mut Vec<Difference>, b: &Value, c: &Value) {
    add_difference(rejected, "workload", at(b, "workload"), at(c, "workload"));
    add_difference(
        rejected,
        "backend_environment",
        &backend_environment(b),
        &backend_environment(c),
    );
    add_difference(
        rejected,
        "effective_config",
        at(b, "effective_config"),
        at(c, "effective_config"),
    );
}

/// Bound to a manifest: the workload without its variant, each receipt's effective config
/// against its declared variant's, then the mode's own variant and environment rules.
pub(super) fn manifest_bound(
    found: &mut Findings,
    b: &Value,
    c: &Value,
    mv: &Value,
    selection: &Selection,
) {
    let (bv, cv) = (&selection.variants.0, &selection.variants.1);
    add_difference(
        &mut found.rejected,
        "workload",
        &workload_base_identity(at(b, "workload")),
        &workload_base_identity(at(c, "workload")),
    );
    for (label, observed, id) in [
        ("baseline", at(b, "effective_config"), bv),
        ("candidate", at(c, "effective_config"), cv),
    ] {
        let expected = declared_variant(mv, id);
        let expected = at(&expected, "effective_config");
        if !json_eq(observed, expected) {
            found.rejected.push(Difference {
                baseline: None,
                baseline_present: None,
                candidate: None,
                candidate_present: None,
                compatibility: "effective_config".to_owned(),
                expected: Some(json_of(expected)),
                observed: Some(json_of(observed)),
                path: None,
                side: Some(label.to_owned()),
                detail: leaf_differences(expected, observed, ""),
            });
        }
    }
    let p = selection.policy.unwrap_or(&NULL);
    match selection.mode {
        mode @ (Mode::StrictEnvironmentWorkload | Mode::SameEnvironmentPerformance) => {
            same_variant_differences(&mut found.rejected, b, c, mode, bv, cv)
        }
        Mode::DeclaredAbVariants => declared_ab_differences(found, b, c, p, mv, bv, cv),
        Mode::CrossBackendCorrectness => cross_backend_differences(found, b, c, p, bv, cv),
        Mode::StrictNoWorkload => {}
    }
}

/// The variant `id` of the manifest, or `null`.
pub(super) fn declared_variant(mv: &Value, id: &str) -> Value {
    variant(mv, id).cloned().unwrap_or(Value::Null)
}

/// One variant on one backend environment; a strict environment workload also compares the
/// result evidence and the unsupported list.
fn same_variant_differences(
    rejected: &mut Vec<Difference>,
    b: &Value,
    c: &Value,
    mode: Mode,
    bv: &str,
    cv: &str,
) {
    if bv != cv {
        rejected.push(variant_difference("workload_variant", bv, cv));
    }
    add_difference(
        rejected,
        "backend_environment",
        &backend_environment(b),
        &backend_environment(c),
    );
    if mode == Mode::StrictEnvironmentWorkload {
        add_difference(
            rejected,
            "result_evidence",
            &strict_result_identity(b),
            &strict_result_identity(c),
        );
        add_difference(
            rejected,
            "unsupported",
            at(b, "unsupported"),
            at(c, "unsupported"),
        );
    }
}

/// A declared directional A/B pair admits the variant difference and the pair's declared
/// config paths; the backend environment must still be equal.
fn declared_ab_differences(
    found: &mut Findings,
    b: &Value,
    c: &Value,
    p: &Value,
    mv: &Value,
    bv: &str,
    cv: &str,
) {
    let pair = arr(at(p, "variant_pairs")).iter().find(|pair| {
        at(pair, "baseline_variant_id").as_str() == Some(bv)
            && at(pair, "candidate_variant_id").as_str() == Some(cv)
    });
    match pair {
        None => {
            found.compatibility_errors.push(
                "receipt variants do not match a declared directional A/B variant pair".to_owned(),
            );
            if bv != cv {
                found
                    .rejected
                    .push(variant_difference("workload_variant", bv, cv));
            }
        }
        Some(_) => found
            .allowed
            .push(variant_difference("workload_variant", bv, cv)),
    }
    add_difference(
        &mut found.rejected,
        "backend_environment",
        &backend_environment(b),
        &backend_environment(c),
    );
    if let Some(pair) = pair {
        let (bcfg, ccfg) = (declared_variant(mv, bv), declared_variant(mv, cv));
        for path in arr(at(pair, "allowed_effective_config_differences")) {
            let path = s(path);
            let before = dot_value(at(&bcfg, "effective_config"), &path);
            let after = dot_value(at(&ccfg, "effective_config"), &path);
            let mut d = Difference::pair(
                "effective_config",
                before.unwrap_or(&NULL),
                after.unwrap_or(&NULL),
            );
            d.path = Some(path);
            found.allowed.push(d);
        }
    }
}

/// A declared cross-backend pair admits the variant and backend differences and the pair's
/// declared environment paths; without one the backend environment must be equal.
fn cross_backend_differences(
    found: &mut Findings,
    b: &Value,
    c: &Value,
    p: &Value,
    bv: &str,
    cv: &str,
) {
    let bb = s(at2(b, "qualification", "backend"));
    let cb = s(at2(c, "qualification", "backend"));
    let mut observed = [(bb.clone(), bv.to_owned()), (cb.clone(), cv.to_owned())];
    observed.sort();
    let pair = arr(at(p, "backend_pairs")).iter().find(|pair| {
        let mut declared = [
            (s(at(pair, "backend_a")), s(at(pair, "variant_a_id"))),
            (s(at(pair, "backend_b")), s(at(pair, "variant_b_id"))),
        ];
        declared.sort();
        let mut obs = observed.to_vec();
        obs.dedup();
        let mut dec = declared.to_vec();
        dec.dedup();
        obs == dec
    });
    match pair {
        None => {
            found.compatibility_errors.push(
                "receipt backend/variant endpoints do not match a declared cross-backend pair"
                    .to_owned(),
            );
            if bv != cv {
                found
                    .rejected
                    .push(variant_difference("workload_variant", bv, cv));
            }
            add_difference(
                &mut found.rejected,
                "backend_environment",
                &backend_environment(b),
                &backend_environment(c),
            );
        }
        Some(pair) => {
            found
                .allowed
                .push(variant_difference("workload_variant", bv, cv));
            found.allowed.push(variant_difference("backend", &bb, &cb));
            let paths: Vec<String> = arr(at(pair, "allowed_environment_differences"))
                .iter()
                .map(s)
                .collect();
            let (a, r, e) = allowed_environment_differences(
                &stable_environment(at(b, "environment")),
                &stable_environment(at(c, "environment")),
                &paths,
            );
            found.allowed.extend(a);
            found.rejected.extend(r);
            found.compatibility_errors.extend(e);
        }
    }
}
