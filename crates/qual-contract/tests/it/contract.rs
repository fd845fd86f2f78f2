//! The original implementation's workload test cases (§21 of the contract notes), each
//! asserting the violation text and its JSON pointer.

use qual_contract::{validate_workload, validate_workload_parameters, Violation};
use qual_json::Value;
use serde_json::{json, Value as J};

fn base() -> J {
    json!({
        "schema_version": 1,
        "workload_id": "performance-smoke-v1",
        "kind": "performance",
        "description": "Small deterministic performance contract fixture.",
        "determinism": {"seed": 7, "seed_delivery": "argv", "repetitions": 3,
            "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"},
        "variables": [],
        "variants": [{
            "id": "cpu-default", "description": "CPU default.", "backend": "cpu",
            "device_requirement": "none", "skip_policy": "allow",
            "effective_config": {"scheduler": {"max_batch_size": 8, "memory_fraction": 1.0}},
            "cases": [{
                "id": "decode-throughput", "description": "Decode throughput.", "required": true,
                "command": ["bench", "--model", "${model_path}", "--seed", "${seed}"],
                "working_directory": ".", "environment": {}, "timeout_seconds": 60,
                "expected_exit_codes": [0], "output_assertions": [],
                "result_protocol": {"format": "qualification-case-result-v1", "producer": "command",
                    "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
                    "declared_metrics": ["tokens_per_second"]}
            }]
        }],
        "comparison_policy": {"mode": "same_environment_performance", "variant_pairs": [],
            "backend_pairs": [], "metric_rules": [{
                "scope": "result", "result_id": "decode-throughput", "metric": "tokens_per_second",
                "metric_class": "performance", "unit": "tokens/s", "aggregation": "rate",
                "lower_is_better": false, "operator": "not_less", "absolute_tolerance": 0,
                "relative_tolerance": 0.05, "required": true}]}
    })
}

fn core() -> J {
    // A two-variant cross-backend correctness workload of our own, shaped like Kiln's
    // correctness-core (rocm + vulkan, one backend pair, case_pass rules).
    let case = |id: &str| {
        json!({"id": id, "description": "Probe.", "required": true, "command": ["probe", id],
            "working_directory": ".", "environment": {}, "timeout_seconds": 60,
            "expected_exit_codes": [0], "output_assertions": [
                {"stream": "combined", "match": "forbidden", "pattern": "(?i)skipp(?:ed|ing)"}],
            "result_protocol": {"format": "qualification-case-result-v1", "producer": "runner",
                "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
                "declared_metrics": ["case_pass", "exit_code", "output_assertion_failures"]}})
    };
    let variant = |id: &str| {
        json!({"id": id, "description": "Backend.", "backend": id, "device_requirement": "required",
            "skip_policy": "fail", "effective_config": {}, "cases": [case("device-probe"), case("matmul-parity")]})
    };
    let rule = |rid: &str| {
        json!({"scope": "result", "result_id": rid, "metric": "case_pass", "metric_class": "correctness",
            "unit": "bool", "aggregation": "exact", "lower_is_better": false, "operator": "equal",
            "absolute_tolerance": 0, "relative_tolerance": 0, "required": true})
    };
    json!({
        "schema_version": 1, "workload_id": "core-correctness-v1", "kind": "correctness",
        "description": "Core correctness.",
        "determinism": {"seed": 20260709, "seed_delivery": "fixed_fixture", "repetitions": 1,
            "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"},
        "variables": [], "variants": [variant("rocm"), variant("vulkan")],
        "comparison_policy": {"mode": "cross_backend_correctness", "variant_pairs": [],
            "backend_pairs": [{"backend_a": "rocm", "variant_a_id": "rocm", "backend_b": "vulkan",
                "variant_b_id": "vulkan", "allowed_environment_differences": ["device.name", "runtime.rocm"]}],
            "metric_rules": [rule("device-probe"), rule("matmul-parity")]}
    })
}

fn environment() -> J {
    json!({
        "schema_version": 1, "workload_id": "local-environment-v1", "kind": "environment",
        "description": "Environment capture.",
        "determinism": {"seed": null, "seed_delivery": "not_applicable", "repetitions": 1,
            "case_order": "declared", "max_parallel_cases": 1, "network_access": "forbidden"},
        "variables": [{"name": "output_path", "description": "Where to write.", "type": "string",
            "required": true, "default": null, "constraints": {"allowed_values": [], "minimum": null,
            "maximum": null, "pattern": "^\\.qualification/[a-z0-9_-]+\\.json$"}}],
        "variants": [{"id": "cpu-host", "description": "Host.", "backend": "cpu",
            "device_requirement": "none", "skip_policy": "allow", "effective_config": {},
            "cases": [{"id": "capture", "description": "Capture.", "required": true,
                "command": ["capture", "--host-id", "${host_id}", "--output", "${output_path}"],
                "working_directory": ".", "environment": {}, "timeout_seconds": 60,
                "expected_exit_codes": [0], "output_assertions": [],
                "result_protocol": {"format": "qualification-case-result-v1", "producer": "runner",
                    "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
                    "declared_metrics": ["case_pass"]}}]}],
        "comparison_policy": null
    })
}

fn errors(doc: &J) -> Vec<Violation> {
    validate_workload(&Value::from_serde(doc))
}

/// Asserts that some violation contains `needle` and, when given, sits at `pointer`.
#[track_caller]
fn has(errs: &[Violation], needle: &str, pointer: Option<&str>) {
    let hit = errs.iter().find(|e| e.message.contains(needle));
    let Some(hit) = hit else {
        panic!("no violation contains {needle:?}; got {errs:#?}");
    };
    if let Some(p) = pointer {
        assert_eq!(hit.pointer, p, "pointer of {needle:?}");
    }
}

fn case0(doc: &mut J) -> &mut J {
    &mut doc["variants"][0]["cases"][0]
}

#[test]
fn own_fixtures_are_valid() {
    for doc in [base(), core(), environment()] {
        assert_eq!(errors(&doc), vec![], "{doc}");
    }
}

#[test]
fn closed_keys_at_nested_levels() {
    let mut d = base();
    d.as_object_mut().unwrap().remove("description");
    case0(&mut d)["surprise"] = json!(true);
    let e = errors(&d);
    has(&e, "missing keys: description", Some(""));
    has(&e, "unknown keys: surprise", Some("/variants/0/cases/0"));
}

#[test]
fn strict_loader_rejections() {
    for text in [
        r#"{"schema_version":1,"schema_version":1}"#.to_owned(),
        r#"{"value":NaN}"#.to_owned(),
        r#"{"v":1e400}"#.to_owned(),
        r#"{"v":1e-4000}"#.to_owned(),
        r#"{"v":8.9999999999999999}"#.to_owned(),
        r#"{"v":9007199254740993.0}"#.to_owned(),
        r#"{"v":4e-324}"#.to_owned(),
        format!(r#"{{"v":1{}}}"#, "0".repeat(5000)),
    ] {
        assert!(
            qual_contract::check_bytes(text.as_bytes()).is_err(),
            "{text:.60}"
        );
    }
    for bytes in [
        b"\xff{}".to_vec(),
        b"\xEF\xBB\xBF{\"schema_version\":1}".to_vec(),
        "\u{feff}{\"schema_version\":1}"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect(),
    ] {
        assert!(qual_contract::check_bytes(&bytes).is_err());
    }
}

#[test]
fn hash_uses_exact_bytes_and_refuses_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let compact = dir.path().join("compact.json");
    let pretty = dir.path().join("pretty.json");
    std::fs::write(
        &compact,
        format!("{}\n", serde_json::to_string(&base()).unwrap()),
    )
    .unwrap();
    std::fs::write(
        &pretty,
        format!("{}\n", serde_json::to_string_pretty(&base()).unwrap()),
    )
    .unwrap();
    let a = qual_contract::load_workload(&compact).unwrap().sha256;
    let b = qual_contract::load_workload(&pretty).unwrap().sha256;
    assert_ne!(a, b);
    assert!(qual_json::is_sha256_digest(&a));
    let mut bad = base();
    bad["surprise"] = json!(1);
    let p = dir.path().join("bad.json");
    std::fs::write(&p, serde_json::to_string(&bad).unwrap()).unwrap();
    let err = qual_contract::load_workload(&p).unwrap_err().to_string();
    assert!(err.starts_with("invalid workload:\n  - "), "{err}");
}

#[test]
fn argv_only_no_shell() {
    let mut d = base();
    case0(&mut d)["command"] = json!("bench --seed 7");
    has(
        &errors(&d),
        "argv array",
        Some("/variants/0/cases/0/command"),
    );
    let mut d = base();
    case0(&mut d)["command"] = json!(["bash", "-c", "bench --seed ${seed} && upload-results"]);
    let e = errors(&d);
    has(
        &e,
        "shell command-string evaluation",
        Some("/variants/0/cases/0/command"),
    );
    has(
        &e,
        "placeholders must occupy",
        Some("/variants/0/cases/0/command/2"),
    );
}

#[test]
fn declared_placeholders_and_seed_delivery() {
    let mut d = base();
    case0(&mut d)["command"][4] = json!("${missing}");
    let e = errors(&d);
    has(
        &e,
        "undeclared variable \"missing\"",
        Some("/variants/0/cases/0/command/4"),
    );
    has(&e, "does not deliver determinism.seed", Some("/variants/0"));
    let mut d = base();
    d["determinism"]["seed_delivery"] = json!("fixed_fixture");
    let e = errors(&d);
    has(&e, "limited to correctness", None);
    has(&e, "cannot reference the reserved ${seed}", None);
}

#[test]
fn required_accelerator_never_allows_skip() {
    let mut d = core();
    d["variants"][0]["skip_policy"] = json!("allow");
    has(
        &errors(&d),
        "required device cannot allow",
        Some("/variants/0"),
    );
}

#[test]
fn runner_metric_namespace_is_closed() {
    let mut d = base();
    case0(&mut d)["result_protocol"]["producer"] = json!("runner");
    let e = errors(&d);
    has(
        &e,
        "runner cannot produce metrics",
        Some("/variants/0/cases/0/result_protocol"),
    );
    has(&e, "must declare the case_pass metric", None);
    let mut d = base();
    case0(&mut d)["result_protocol"]["declared_metrics"] = json!(["case_pass"]);
    has(
        &errors(&d),
        "command cannot declare runner-owned metrics",
        None,
    );
}

#[test]
fn runner_owned_environment() {
    for key in [
        "KILN_QUALIFICATION_CASE_RESULT",
        "KILN_QUALIFICATION_VARIANT_ID",
    ] {
        let mut d = base();
        case0(&mut d)["environment"][key] = json!("spoofed");
        has(
            &errors(&d),
            &format!("cannot override runner-owned {key}"),
            Some("/variants/0/cases/0/environment"),
        );
    }
}

#[test]
fn performance_policy_needs_required_command_evidence() {
    let mut d = base();
    case0(&mut d)["result_protocol"]["producer"] = json!("runner");
    case0(&mut d)["result_protocol"]["declared_metrics"] = json!(["case_pass"]);
    d["variants"][0]["effective_config"] = json!({});
    d["comparison_policy"]["metric_rules"] = json!([{
        "scope": "result", "result_id": "decode-throughput", "metric": "case_pass",
        "metric_class": "performance", "unit": "bool", "aggregation": "exact",
        "lower_is_better": false, "operator": "not_less", "absolute_tolerance": 0,
        "relative_tolerance": 0, "required": false}]);
    let e = errors(&d);
    has(
        &e,
        "at least one required rule",
        Some("/comparison_policy/metric_rules"),
    );
    has(
        &e,
        "command-produced non-runner metric",
        Some("/comparison_policy"),
    );
}

fn ab() -> J {
    let mut d = base();
    let mut tuned = d["variants"][0].clone();
    tuned["id"] = json!("cpu-tuned");
    tuned["effective_config"]["scheduler"]["max_batch_size"] = json!(16);
    d["variants"].as_array_mut().unwrap().push(tuned);
    d["comparison_policy"]["mode"] = json!("declared_ab_variants");
    d["comparison_policy"]["variant_pairs"] = json!([{"baseline_variant_id": "cpu-default",
        "candidate_variant_id": "cpu-tuned",
        "allowed_effective_config_differences": ["scheduler.max_batch_size"]}]);
    d
}

#[test]
fn declared_ab_pairs_and_exact_config_differences() {
    assert_eq!(errors(&ab()), vec![]);
    let mut two = ab();
    let mut both = two["variants"][1].clone();
    both["id"] = json!("cpu-tuned-both");
    both["effective_config"]["scheduler"]["memory_fraction"] = json!(0.5);
    two["variants"].as_array_mut().unwrap().push(both);
    two["comparison_policy"]["variant_pairs"].as_array_mut().unwrap().push(json!({
        "baseline_variant_id": "cpu-default", "candidate_variant_id": "cpu-tuned-both",
        "allowed_effective_config_differences": ["scheduler.max_batch_size", "scheduler.memory_fraction"]}));
    assert_eq!(errors(&two), vec![]);

    let diffs = "/comparison_policy/variant_pairs/0/allowed_effective_config_differences";
    let mut d = ab();
    d["comparison_policy"]["variant_pairs"][0]["allowed_effective_config_differences"] = json!([]);
    has(&errors(&d), "must be a non-empty array", Some(diffs));
    let mut d = two.clone();
    d["comparison_policy"]["variant_pairs"][1]["allowed_effective_config_differences"] =
        json!(["scheduler.memory_fraction", "scheduler.max_batch_size"]);
    let e = errors(&d);
    has(&e, "must use ascending order", None);
    has(
        &e,
        "must exactly equal the variant config leaf differences",
        None,
    );
    let mut d = ab();
    d["comparison_policy"]["variant_pairs"][0]["allowed_effective_config_differences"] =
        json!(["scheduler.max_batch_size", "scheduler.max_batch_size"]);
    has(&errors(&d), "contains duplicates", Some(diffs));
    let mut d = ab();
    d["variants"][1]["effective_config"]["scheduler"]["max_batch_size"] = json!("16");
    has(
        &errors(&d),
        "must preserve JSON leaf type",
        Some("/comparison_policy/variant_pairs/0"),
    );
}

#[test]
fn cross_backend_policy_binds_variants() {
    let mut d = core();
    d["comparison_policy"]["metric_rules"][0]["metric_class"] = json!("performance");
    has(
        &errors(&d),
        "forbids performance metrics",
        Some("/comparison_policy/metric_rules/0"),
    );
    let mut d = core();
    d["comparison_policy"]["backend_pairs"][0]["variant_b_id"] = json!("rocm");
    has(
        &errors(&d),
        "backend does not match variant",
        Some("/comparison_policy/backend_pairs/0"),
    );
    let mut d = core();
    d["variants"][1]["backend"] = json!("rocm");
    d["comparison_policy"]["backend_pairs"][0]["backend_b"] = json!("rocm");
    has(&errors(&d), "must name two different backends", None);
}

#[test]
fn cross_backend_metrics_target_required_declared_results() {
    let mut d = core();
    d["variants"][1]["cases"][0]["required"] = json!(false);
    let e = errors(&d);
    has(
        &e,
        "is not required by variant \"vulkan\"",
        Some("/comparison_policy/metric_rules/0/result_id"),
    );
    has(&e, "identical result contracts", None);
    let mut d = core();
    d["comparison_policy"]["metric_rules"][0]["metric"] = json!("max_abs_error");
    has(
        &errors(&d),
        "is not declared by result",
        Some("/comparison_policy/metric_rules/0/metric"),
    );
}

#[test]
fn model_path_follows_the_kind() {
    let mut d = base();
    case0(&mut d)["command"] = json!(["bench", "--seed", "${seed}"]);
    has(
        &errors(&d),
        "must consume the runner-owned ${model_path}",
        Some("/variants/0"),
    );
    let mut d = environment();
    case0(&mut d)["command"]
        .as_array_mut()
        .unwrap()
        .push(json!("${model_path}"));
    has(
        &errors(&d),
        "cannot reference ${model_path}",
        Some("/variants/0"),
    );
}

#[test]
fn resolved_parameters_are_typed_and_constrained() {
    let mut d = base();
    d["variables"] = json!([{"name": "ratio", "description": "Ratio.", "type": "number",
        "required": false, "default": 0.5, "constraints": {"allowed_values": [], "minimum": 0,
        "maximum": 1, "pattern": null}}]);
    case0(&mut d)["command"]
        .as_array_mut()
        .unwrap()
        .push(json!("${ratio}"));
    assert_eq!(errors(&d), vec![]);
    let w = Value::from_serde(&d);
    let p = |j: J| validate_workload_parameters(&w, &Value::from_serde(&j));
    assert_eq!(
        p(json!({"variant_id": "cpu-default", "ratio": 0.5})),
        vec![]
    );
    has(
        &p(json!({"variant_id": "cpu-default"})),
        "missing resolved keys",
        None,
    );
    has(
        &p(json!({"variant_id": "cpu-default", "ratio": 0.5, "extra": 1})),
        "undeclared keys",
        None,
    );
    // `1` as an integer is not a canonical float.
    let int_one = qual_json::from_str(r#"{"variant_id":"cpu-default","ratio":1}"#).unwrap();
    has(
        &validate_workload_parameters(&w, &int_one),
        "canonical JSON float",
        Some("/ratio"),
    );
    has(
        &p(json!({"variant_id": "cpu-default", "ratio": 2.0})),
        "declared maximum",
        None,
    );
}

#[test]
fn runtime_bounds_are_finite_and_soak_capable() {
    let mut d = base();
    d["determinism"]["repetitions"] = json!(1001);
    has(
        &errors(&d),
        "repetitions must be at most",
        Some("/determinism/repetitions"),
    );
    let mut d = base();
    case0(&mut d)["timeout_seconds"] = json!(172801);
    has(
        &errors(&d),
        "timeout_seconds must be at most",
        Some("/variants/0/cases/0/timeout_seconds"),
    );
    let mut d = base();
    d["determinism"]["repetitions"] = json!(1);
    case0(&mut d)["timeout_seconds"] = json!(172800);
    assert_eq!(errors(&d), vec![], "a 48-hour case is soak capable");
    d["determinism"]["repetitions"] = json!(4);
    has(
        &errors(&d),
        "declared timeout budget exceeds",
        Some("/variants/0"),
    );
    let mut d = base();
    d["determinism"]["repetitions"] = json!(1000);
    case0(&mut d)["timeout_seconds"] = json!(1);
    let template = case0(&mut d).clone();
    for i in 1..=10 {
        let mut c = template.clone();
        c["id"] = json!(format!("extra-case-{i:02}"));
        d["variants"][0]["cases"].as_array_mut().unwrap().push(c);
    }
    has(
        &errors(&d),
        "more than 10000 case executions",
        Some("/variants/0"),
    );
}

#[test]
fn suggested_additional_cases() {
    // Integer allowed_values order by decimal text.
    let with_values = |vals: J| {
        let mut d = base();
        d["variables"] = json!([{"name": "width", "description": "Width.", "type": "integer",
            "required": false, "default": null, "constraints": {"allowed_values": vals,
            "minimum": null, "maximum": null, "pattern": null}}]);
        case0(&mut d)["command"]
            .as_array_mut()
            .unwrap()
            .push(json!("${width}"));
        errors(&d)
    };
    assert_eq!(with_values(json!([10, 9])), vec![]);
    has(
        &with_values(json!([9, 10])),
        "canonical sorted order",
        Some("/variables/0/constraints/allowed_values"),
    );
    // schema_version quirk.
    for v in ["1.0", "true"] {
        let mut text = serde_json::to_string(&base()).unwrap();
        text = text.replacen(
            "\"schema_version\":1",
            &format!("\"schema_version\":{v}"),
            1,
        );
        assert_eq!(
            validate_workload(&qual_json::from_str(&text).unwrap()),
            vec![],
            "{v}"
        );
    }
    let mut d = base();
    case0(&mut d)["command"][1] = json!("${x}");
    has(&errors(&d), "placeholders must occupy", None);
    let mut d = base();
    case0(&mut d)["command"][0] = json!("${model_path}");
    has(
        &errors(&d),
        "executable cannot be a variable",
        Some("/variants/0/cases/0/command/0"),
    );
    let mut d = base();
    case0(&mut d)["command"][0] = json!("/usr/bin/Cargo");
    has(&errors(&d), "cargo-test-bounded.sh", None);
    let mut d = base();
    case0(&mut d)["result_protocol"]["declared_metrics"] = json!([]);
    let e = errors(&d);
    assert!(
        e.iter().all(|v| !v.message.contains("declared_metrics")),
        "{e:?}"
    );
    has(&e, "is not declared by result", None);
    let mut d = base();
    d["variables"] = json!([{"name": "host_id", "description": "Host.", "type": "string",
        "required": false, "default": null, "constraints": {"allowed_values": [], "minimum": null,
        "maximum": null, "pattern": null}}]);
    has(
        &errors(&d),
        "runner-owned and reserved",
        Some("/variables/0/name"),
    );
    let mut d = environment();
    d["kind"] = json!("soak");
    d["comparison_policy"] = base()["comparison_policy"].clone();
    has(
        &errors(&d),
        "must be null for soak workloads",
        Some("/comparison_policy"),
    );
    for (wd, msg) in [
        ("a/../b", "stay within the repository"),
        ("a\\b", "POSIX syntax"),
        (
            ".git",
            "must not be at or below .git, which is read-only to cases",
        ),
        ("./.git/hooks", "must not be at or below .git"),
        (
            ".qualification/runs",
            "must not be at or below .qualification",
        ),
    ] {
        let mut d = base();
        case0(&mut d)["working_directory"] = json!(wd);
        has(
            &errors(&d),
            msg,
            Some("/variants/0/cases/0/working_directory"),
        );
    }
    let mut d = base();
    d["variants"][0]["effective_config"]["list"] = json!([1]);
    has(
        &errors(&d),
        "finite JSON scalar or nested object",
        Some("/variants/0/effective_config/list"),
    );
    let mut d = base();
    case0(&mut d)["expected_exit_codes"] = json!([1, 0, 0]);
    let e = errors(&d);
    has(&e, "contains duplicates", None);
    has(&e, "must use ascending order", None);
    let mut d = core();
    d["comparison_policy"]["metric_rules"][0]["unit"] = json!("boolean");
    has(
        &errors(&d),
        "canonical definition {\"unit\": \"bool\", \"aggregation\": \"exact\", \"lower_is_better\": false}",
        None,
    );
}
