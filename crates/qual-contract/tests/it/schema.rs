//! The checked-in JSON Schema is generated from the typed contract and must be current.
//! Regenerate with `KILN_QUAL_UPDATE_SCHEMAS=1 cargo test -p qual-contract --test it schema`.

use std::path::PathBuf;

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schemas/workload-v1.schema.json")
}

#[test]
fn schema_is_current() {
    let generated = qual_contract::workload_schema_json();
    let path = schema_path();
    if std::env::var_os("KILN_QUAL_UPDATE_SCHEMAS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in =
        std::fs::read_to_string(&path).expect("schemas/workload-v1.schema.json exists");
    assert!(
        checked_in == generated,
        "schemas/workload-v1.schema.json is stale; regenerate with KILN_QUAL_UPDATE_SCHEMAS=1"
    );
}

#[test]
fn schema_objects_are_closed() {
    let schema: serde_json::Value =
        serde_json::from_str(&qual_contract::workload_schema_json()).unwrap();
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    let root_required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(root_required.len(), 8);
    for name in [
        "Determinism",
        "Variable",
        "Constraints",
        "Variant",
        "Case",
        "OutputAssertion",
        "ResultProtocol",
        "ComparisonPolicy",
        "VariantPair",
        "BackendPair",
        "MetricRule",
    ] {
        let def = &schema["definitions"][name];
        assert_eq!(
            def["additionalProperties"],
            serde_json::json!(false),
            "{name}"
        );
        let props = def["properties"].as_object().unwrap().len();
        let required = def["required"].as_array().map_or(0, |r| r.len());
        assert_eq!(required, props, "{name}: every key is required");
    }
    assert_eq!(
        schema["definitions"]["Determinism"]["properties"]["repetitions"]["maximum"],
        serde_json::json!(1000.0)
    );
    assert_eq!(
        schema["definitions"]["Case"]["properties"]["timeout_seconds"]["maximum"],
        serde_json::json!(172800.0)
    );
}
