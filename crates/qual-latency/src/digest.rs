//! `fixture_spec_sha256`: the digest binding a fixture's identity.
//!
//! Payload, built from the fixture object by key lookup (a missing key becomes `null`):
//! `id`, `backend`, `hardware`, `source`, `command`; `metrics` as a list, in manifest order, of
//! objects holding exactly `name`, `unit`, `comparison` (missing ones `null`; `max` and any
//! other metric key dropped); and `selected_cases`, only when the key exists (even if `null`).
//! `threshold_state`, `result_artifact`, `runner_labels` and metric `max` are excluded, so
//! thresholds can be locked after a measurement without invalidating it.
//!
//! Serialization is Python's `json.dumps(payload, sort_keys=True, separators=(",", ":"))`
//! with the default `ensure_ascii=True`: keys sorted by code point at every level, no spaces,
//! every non-ASCII character as lowercase `\uXXXX` (surrogate pairs above U+FFFF), floats as
//! `repr`. That is exactly [`qual_json::to_canonical_string`]. The UTF-8 bytes of that text are
//! hashed with SHA-256 and written as 64 lowercase hex digits (no `sha256:` prefix).

use crate::{LegacyError, Result};
use qual_json::{Object, Value};

/// Metric fields that enter the digest.
pub const DIGEST_METRIC_FIELDS: [&str; 3] = ["name", "unit", "comparison"];

/// The digest payload of a fixture.
pub fn fixture_digest_payload(fixture: &Object) -> Result<Value> {
    let metrics = match fixture.get("metrics") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => {
            return Err(LegacyError::refused(
                "fixture.metrics must be a non-empty array",
            ))
        }
    };
    let mut metric_specs = Vec::with_capacity(metrics.len());
    for (i, m) in metrics.iter().enumerate() {
        let Value::Object(m) = m else {
            return Err(LegacyError::Refused(format!(
                "fixture.metrics[{i}] must be an object"
            )));
        };
        let mut spec = Object::new();
        for field in DIGEST_METRIC_FIELDS {
            spec.insert(field, m.get(field).cloned().unwrap_or(Value::Null));
        }
        metric_specs.push(Value::Object(spec));
    }
    let mut spec = Object::new();
    for key in ["id", "backend", "hardware", "source", "command"] {
        spec.insert(key, fixture.get(key).cloned().unwrap_or(Value::Null));
    }
    spec.insert("metrics", Value::Array(metric_specs));
    if let Some(cases) = fixture.get("selected_cases") {
        spec.insert("selected_cases", cases.clone());
    }
    Ok(Value::Object(spec))
}

/// The canonical text that is hashed.
pub fn fixture_digest_text(fixture: &Object) -> Result<String> {
    Ok(qual_json::to_canonical_string(&fixture_digest_payload(
        fixture,
    )?))
}

/// `fixture_spec_sha256` of a fixture: 64 lowercase hex digits.
pub fn fixture_spec_sha256(fixture: &Object) -> Result<String> {
    Ok(crate::sha256_hex(fixture_digest_text(fixture)?.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Object {
        qual_json::from_str(text)
            .unwrap()
            .as_object()
            .unwrap()
            .clone()
    }

    const VULKAN: &str = r#"{
      "id": "vulkan_strix_halo_decode_microbench",
      "backend": "vulkan",
      "hardware": "AMD Ryzen AI MAX+ 395 / Radeon 8060S Graphics (RADV STRIX_HALO, gfx1151)",
      "runner_labels": ["self-hosted", "linux", "vulkan-strix-halo"],
      "source": "crates/kiln-vulkan-kernel/src/bin/vulkan_decode_microbench.rs",
      "command": "KILN_VK_MICROBENCH_ONLY=full_step_resident,full_token_resident_paged KILN_VK_MICROBENCH_BATCHES=1 cargo run --release -p kiln-vulkan-kernel --bin vulkan_decode_microbench",
      "result_artifact": "bench-results/backend-latency/vulkan-strix-halo-decode.json",
      "threshold_state": "pending_fixture_result",
      "selected_cases": ["full_step_resident", "full_token_resident_paged"],
      "metrics": [
        {"name": "full_step_resident_us", "unit": "us", "comparison": "<=", "max": null},
        {"name": "full_token_resident_paged_us", "unit": "us", "comparison": "<=", "max": 1724.157784}
      ]
    }"#;

    #[test]
    fn worked_example_matches_spec() {
        let f = obj(VULKAN);
        assert_eq!(
            fixture_digest_text(&f).unwrap(),
            r#"{"backend":"vulkan","command":"KILN_VK_MICROBENCH_ONLY=full_step_resident,full_token_resident_paged KILN_VK_MICROBENCH_BATCHES=1 cargo run --release -p kiln-vulkan-kernel --bin vulkan_decode_microbench","hardware":"AMD Ryzen AI MAX+ 395 / Radeon 8060S Graphics (RADV STRIX_HALO, gfx1151)","id":"vulkan_strix_halo_decode_microbench","metrics":[{"comparison":"<=","name":"full_step_resident_us","unit":"us"},{"comparison":"<=","name":"full_token_resident_paged_us","unit":"us"}],"selected_cases":["full_step_resident","full_token_resident_paged"],"source":"crates/kiln-vulkan-kernel/src/bin/vulkan_decode_microbench.rs"}"#
        );
        assert_eq!(
            fixture_spec_sha256(&f).unwrap(),
            "80ba810040c81d273b154ee943b594511b05a5d5211458a4b1ba722f0f0de1a7"
        );
    }

    #[test]
    fn thresholds_state_and_labels_do_not_change_the_digest() {
        let a = obj(VULKAN);
        let mut b = a.clone();
        b.insert("threshold_state", Value::from("locked_threshold"));
        b.insert("result_artifact", Value::from("elsewhere.json"));
        b.remove("runner_labels");
        let mut metrics = b.get("metrics").unwrap().as_array().unwrap().clone();
        if let Value::Object(m) = &mut metrics[0] {
            m.insert("max", Value::from(5.0));
            m.insert("note", Value::from("ignored"));
        }
        b.insert("metrics", Value::Array(metrics));
        assert_eq!(fixture_spec_sha256(&a), fixture_spec_sha256(&b));
        let mut c = a.clone();
        c.insert("command", Value::from("cargo bench"));
        assert_ne!(fixture_spec_sha256(&a), fixture_spec_sha256(&c));
    }

    #[test]
    fn selected_cases_null_differs_from_absent() {
        let a = obj(r#"{"id":"x","metrics":[{"name":"m"}]}"#);
        let b = obj(r#"{"id":"x","metrics":[{"name":"m"}],"selected_cases":null}"#);
        assert_eq!(
            fixture_digest_text(&a).unwrap(),
            r#"{"backend":null,"command":null,"hardware":null,"id":"x","metrics":[{"comparison":null,"name":"m","unit":null}],"source":null}"#
        );
        assert!(fixture_digest_text(&b)
            .unwrap()
            .contains(r#""selected_cases":null"#));
    }

    #[test]
    fn non_ascii_is_escaped_before_hashing() {
        let f = obj(
            r#"{"id":"x","backend":"metal","hardware":"café 😀","source":"s","command":"c","metrics":[{"name":"m","unit":"µs","comparison":"<="}]}"#,
        );
        let text = fixture_digest_text(&f).unwrap();
        let want = r#"{"backend":"metal","command":"c","hardware":"caf\u00e9 \ud83d\ude00","id":"x","metrics":[{"comparison":"<=","name":"m","unit":"\u00b5s"}],"source":"s"}"#;
        assert_eq!(text, want);
        assert_eq!(
            fixture_spec_sha256(&f).unwrap(),
            crate::sha256_hex(want.as_bytes())
        );
    }

    #[test]
    fn refuses_bad_metrics() {
        assert_eq!(
            fixture_spec_sha256(&obj(r#"{"metrics":[]}"#)).unwrap_err(),
            LegacyError::refused("fixture.metrics must be a non-empty array")
        );
        assert_eq!(
            fixture_spec_sha256(&obj(r#"{"metrics":[1]}"#)).unwrap_err(),
            LegacyError::refused("fixture.metrics[0] must be an object")
        );
    }
}
