//! Hand-written receipt fixtures shared by the integration tests.

#![allow(dead_code)]

use qual_json::Value;

/// A valid, passed environment receipt on ROCm with one required passed result
/// `device-probe` carrying the three runner metrics.
pub const ENVIRONMENT_RECEIPT: &str = r#"{
  "schema_version": 1,
  "receipt_id": "test-environment-receipt-v1",
  "created_at_utc": "2026-07-28T22:25:40.500Z",
  "source": {
    "tree_hash_format": "kiln-source-tree-v1",
    "tree_hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    "git_commit": "0123456789abcdef0123456789abcdef01234567",
    "git_worktree_clean": true
  },
  "qualification": {
    "kind": "environment",
    "backend": "rocm",
    "profile": "local-environment-v1",
    "verdict": "passed",
    "started_at_utc": "2026-07-28T22:25:35.119Z",
    "finished_at_utc": "2026-07-28T22:25:39.900Z",
    "duration_seconds": 4.781,
    "command": ["kiln-qual", "run", "qualification/workloads/local-environment-v1.json", "--variant", "rocm"]
  },
  "environment": {
    "host_id": "test-host",
    "os": {"name": "Linux", "version": "24.04", "kernel": "6.8.0", "architecture": "x86_64"},
    "device": {"name": "Test GPU", "architecture": "gfx1151", "memory_bytes": 1073741824, "unified_memory": true, "driver": "6.1.0"},
    "runtime": {"backend": "rocm", "rocm": "6.1.0"},
    "compiler": {"rustc": "1.85.0"}
  },
  "model": null,
  "workload": null,
  "effective_config": {},
  "results": [
    {
      "id": "device-probe",
      "required": true,
      "status": "passed",
      "duration_seconds": 4.5,
      "details": null,
      "metrics": [
        {"name": "case_pass", "value": 1, "unit": "bool", "aggregation": "exact", "lower_is_better": false},
        {"name": "exit_code", "value": 0, "unit": "code", "aggregation": "exact", "lower_is_better": false},
        {"name": "output_assertion_failures", "value": 0, "unit": "count", "aggregation": "sum", "lower_is_better": true}
      ]
    }
  ],
  "metrics": [],
  "artifacts": [
    {"kind": "environment_probes", "location": "local_ignored", "path": ".qualification/runs/r1/environment.json", "sha256": "sha256:2222222222222222222222222222222222222222222222222222222222222222", "bytes": 10}
  ],
  "unsupported": [],
  "notes": []
}"#;

/// Parses a fixture strictly.
pub fn parse(text: &str) -> Value {
    qual_json::from_str(text).expect("fixture parses")
}

/// The environment fixture, parsed.
pub fn environment() -> Value {
    parse(ENVIRONMENT_RECEIPT)
}

/// The environment fixture as an editable `serde_json` value.
pub fn environment_json() -> serde_json::Value {
    serde_json::from_str(ENVIRONMENT_RECEIPT).expect("fixture parses")
}

/// Converts an edited document back into a strictly parsed value.
pub fn strict(v: &serde_json::Value) -> Value {
    parse(&serde_json::to_string(v).expect("serializes"))
}

/// Sets the value at a JSON pointer (the parent must exist).
pub fn set(v: &mut serde_json::Value, pointer: &str, new: serde_json::Value) {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    match v.pointer_mut(parent).expect("parent exists") {
        serde_json::Value::Object(o) => {
            o.insert(key.to_owned(), new);
        }
        serde_json::Value::Array(a) => {
            let i: usize = key.parse().expect("index");
            if i == a.len() {
                a.push(new);
            } else {
                a[i] = new;
            }
        }
        _ => panic!("parent of {pointer} is a scalar"),
    }
}

/// Removes the key at a JSON pointer.
pub fn remove(v: &mut serde_json::Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    v.pointer_mut(parent)
        .and_then(serde_json::Value::as_object_mut)
        .expect("parent object")
        .remove(key)
        .expect("key exists");
}
