//! Property tests: generated valid workloads survive serialize → strict parse → validate →
//! typed conversion → serialize unchanged; arbitrary edits never panic the validator.

use proptest::prelude::*;
use qual_contract::validate_workload;
use serde_json::{json, Value as J};

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{2,12}"
}

fn case(id: String, runner: bool, timeout: u64, seed_arg: bool) -> J {
    let mut command = vec![json!("probe"), json!(id.clone())];
    if seed_arg {
        command.push(json!("--seed"));
        command.push(json!("${seed}"));
    }
    json!({
        "id": id, "description": "Generated case.", "required": true, "command": command,
        "working_directory": ".", "environment": {"KILN_QUALIFICATION": "1"},
        "timeout_seconds": timeout, "expected_exit_codes": [0],
        "output_assertions": [{"stream": "combined", "match": "forbidden", "pattern": "(?i)panic"}],
        "result_protocol": {"format": "qualification-case-result-v1",
            "producer": if runner { "runner" } else { "command" },
            "path_environment_variable": "KILN_QUALIFICATION_CASE_RESULT",
            "declared_metrics": if runner { json!(["case_pass", "exit_code"]) } else { json!(["max_abs_error"]) }}
    })
}

prop_compose! {
    fn workload()(
        variant_ids in prop::collection::btree_set(ident(), 1..4),
        case_ids in prop::collection::btree_set(ident(), 1..5),
        runner in any::<bool>(),
        timeout in 1u64..3600,
        repetitions in 1u64..20,
        seed in 0u64..u64::MAX,
        argv_seed in any::<bool>(),
        backend in prop::sample::select(vec!["cpu", "cuda", "rocm", "vulkan", "metal"]),
    ) -> J {
        let variants: Vec<J> = variant_ids.iter().map(|vid| {
            let cases: Vec<J> = case_ids.iter().map(|c| case(c.clone(), runner, timeout, argv_seed)).collect();
            json!({"id": vid, "description": "Generated variant.", "backend": backend,
                "device_requirement": if backend == "cpu" { "none" } else { "required" },
                "skip_policy": "fail", "effective_config": {}, "cases": cases})
        }).collect();
        json!({
            "schema_version": 1, "workload_id": "generated-v1", "kind": "correctness",
            "description": "Generated.",
            "determinism": {"seed": seed, "seed_delivery": if argv_seed { "argv" } else { "fixed_fixture" },
                "repetitions": repetitions, "case_order": "declared", "max_parallel_cases": 1,
                "network_access": "forbidden"},
            "variables": [], "variants": variants,
            "comparison_policy": {"mode": "self_contained_correctness", "variant_pairs": [],
                "backend_pairs": [], "metric_rules": []}
        })
    }
}

proptest! {
    #[test]
    fn generated_workloads_round_trip(doc in workload(), pretty in any::<bool>()) {
        let text = if pretty { serde_json::to_string_pretty(&doc).unwrap() } else { serde_json::to_string(&doc).unwrap() };
        let parsed = qual_contract::check_bytes(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let typed = qual_contract::typed(&parsed).unwrap();
        let again = serde_json::to_value(&typed).unwrap();
        prop_assert_eq!(&again, &doc);
        prop_assert!(validate_workload(&qual_json::Value::from_serde(&again)).is_empty());
    }

    #[test]
    fn edits_never_panic(doc in workload(), path_pick in 0usize..64, replacement in prop_oneof![
        Just(json!(null)), Just(json!(-1)), Just(json!(1.5)), Just(json!("${x}")), Just(json!([])),
        Just(json!({})), Just(json!(true)), Just(json!("")),
    ]) {
        let mut doc = doc;
        let mut pointers = Vec::new();
        collect_pointers(&doc, String::new(), &mut pointers);
        let target = pointers[path_pick % pointers.len()].clone();
        if let Some(slot) = doc.pointer_mut(&target) { *slot = replacement; }
        let _ = validate_workload(&qual_json::Value::from_serde(&doc));
    }
}

fn collect_pointers(v: &J, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        J::Object(m) => m
            .iter()
            .for_each(|(k, c)| collect_pointers(c, format!("{here}/{k}"), out)),
        J::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| collect_pointers(c, format!("{here}/{i}"), out)),
        _ => {}
    }
}
