//! Acceptance against Kiln's real files: fixture digests, raw-log digests and parsed metrics
//! of the five committed artifacts, under both manifests. Without the shared corpus every test
//! is reported ignored (failed with `KIQ_REQUIRE_CORPUS=1`) by `qual_test_fixtures::harness`.

// Tests and benches start programs and read back files directly.
#![allow(clippy::disallowed_methods)]

mod common;

use qual_json::Value;
use qual_latency::metric::parse_metric_log;
use qual_test_fixtures::harness::{self, Trial};

fn corpus_present() -> Result<(), String> {
    harness::needs_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/kiln-corpus/legacy-latency"),
        "the Kiln legacy-latency corpus",
    )
}

fn load(path: &std::path::Path) -> Value {
    qual_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn artifacts_agree_with_manifests_and_raw_logs() {
    let corpus = common::corpus_dir().expect("checked by the harness");
    let manifests = ["manifest-current.json", "manifest-covered.json"];
    let mut artifacts: Vec<_> = std::fs::read_dir(corpus.join("artifacts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    artifacts.sort();
    assert_eq!(artifacts.len(), 5);
    let mut agree = 0;
    let mut total = 0;
    let mut failures = Vec::new();
    for a in &artifacts {
        let art = load(a);
        let id = art.get("fixture_id").and_then(Value::as_str).unwrap();
        let want_digest = art
            .get("fixture_spec_sha256")
            .and_then(Value::as_str)
            .unwrap();
        for m in manifests {
            let manifest = load(&corpus.join(m));
            let fixture = qual_latency::manifest::find_fixture(&manifest, id).unwrap();
            total += 1;
            let got = qual_latency::digest::fixture_spec_sha256(fixture).unwrap();
            if got == want_digest {
                agree += 1;
            } else {
                failures.push(format!("{id} in {m}: digest {got} != {want_digest}"));
            }
        }
        // Raw log: digest and parsed metrics.
        let raw_rel = art.get("raw_log").and_then(Value::as_str).unwrap();
        let name = std::path::Path::new(raw_rel).file_name().unwrap();
        let raw = corpus.join("raw").join(name);
        total += 1;
        let sha = qual_latency::sha256_file(&raw).unwrap();
        if sha == art.get("raw_log_sha256").and_then(Value::as_str).unwrap() {
            agree += 1;
        } else {
            failures.push(format!("{id}: raw log sha {sha}"));
        }
        total += 1;
        let parsed = parse_metric_log(&raw).unwrap();
        let manifest = load(&corpus.join("manifest-current.json"));
        let fixture = qual_latency::manifest::find_fixture(&manifest, id).unwrap();
        let extracted = qual_latency::artifact::extract_declared_metrics(fixture, &parsed).unwrap();
        let metrics = art.get("metrics").and_then(Value::as_object).unwrap();
        let same = extracted.len() == metrics.len()
            && extracted
                .iter()
                .all(|(n, v)| metrics.get(n).and_then(Value::as_f64) == Some(*v));
        if same {
            agree += 1;
        } else {
            failures.push(format!("{id}: metrics {extracted:?} != {metrics:?}"));
        }
    }
    println!("{agree}/{total} verdicts agree");
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(agree, 20);
}

fn undeclared_lines_in_real_logs_are_dropped() {
    let corpus = common::corpus_dir().expect("checked by the harness");
    let raw = corpus.join("raw/metal_apple_silicon_matmul_qwen35_4b-20260607T184746Z.log");
    let parsed = parse_metric_log(&raw).unwrap();
    assert!(parsed.contains_key("prefill_qkv_m512_2560x4096_ms"));
    let manifest = load(&corpus.join("manifest-current.json"));
    let fixture =
        qual_latency::manifest::find_fixture(&manifest, "metal_apple_silicon_matmul_qwen35_4b")
            .unwrap();
    let extracted = qual_latency::artifact::extract_declared_metrics(fixture, &parsed).unwrap();
    assert_eq!(extracted.len(), 4);
    assert!(!extracted
        .iter()
        .any(|(n, _)| n == "prefill_qkv_m512_2560x4096_ms"));
}

fn covered_thresholds_follow_from_observed_values_with_ten_percent_headroom() {
    let corpus = common::corpus_dir().expect("checked by the harness");
    let covered = load(&corpus.join("manifest-covered.json"));
    // CUDA and ROCm were locked from their committed artifacts; Vulkan from the earlier run.
    let mut checked = 0;
    for (id, source) in [
        (
            "cuda_rtx4090_matmul_qwen35_4b",
            "artifacts/cuda-rtx4090-matmul.json",
        ),
        (
            "rocm_gfx1151_matmul_qwen35_4b",
            "artifacts/rocm-gfx1151-matmul.json",
        ),
        (
            "vulkan_strix_halo_decode_microbench",
            "raw/vulkan_strix_halo_decode_microbench-20260607T204433Z.log",
        ),
    ] {
        let fixture = qual_latency::manifest::find_fixture(&covered, id).unwrap();
        let observed: Vec<(String, f64)> = if source.ends_with(".log") {
            let parsed = parse_metric_log(&corpus.join(source)).unwrap();
            qual_latency::artifact::extract_declared_metrics(fixture, &parsed).unwrap()
        } else {
            let art = load(&corpus.join(source));
            art.get("metrics")
                .and_then(Value::as_object)
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
                .collect()
        };
        let locked = qual_latency::lock::lock_fixture(fixture, &observed, 0.10).unwrap();
        assert_eq!(
            locked.get("metrics"),
            fixture.get("metrics"),
            "{id}: relocking does not reproduce the committed thresholds"
        );
        checked += 1;
    }
    println!("{checked}/3 locked fixtures reproduce their committed thresholds");
}

fn locking_the_current_manifest_reproduces_the_covered_manifest_byte_for_byte() {
    let corpus = common::corpus_dir().expect("checked by the harness");
    let current = load(&corpus.join("manifest-current.json"));
    let observed_from_artifact = |file: &str| -> Vec<(String, f64)> {
        let art = load(&corpus.join("artifacts").join(file));
        art.get("metrics")
            .and_then(Value::as_object)
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
            .collect()
    };
    let vulkan_early = {
        let manifest = load(&corpus.join("manifest-current.json"));
        let f =
            qual_latency::manifest::find_fixture(&manifest, "vulkan_strix_halo_decode_microbench")
                .unwrap()
                .clone();
        let parsed = parse_metric_log(
            &corpus.join("raw/vulkan_strix_halo_decode_microbench-20260607T204433Z.log"),
        )
        .unwrap();
        qual_latency::artifact::extract_declared_metrics(&f, &parsed).unwrap()
    };
    let mut o = current.as_object().unwrap().clone();
    let fixtures: Vec<Value> = o
        .get("fixtures")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|f| {
            let fo = f.as_object().unwrap();
            let observed = match fo.get("id").and_then(Value::as_str).unwrap() {
                "metal_apple_silicon_matmul_qwen35_4b" => {
                    observed_from_artifact("metal-apple-silicon-matmul.json")
                }
                "metal_apple_silicon_sdpa_qwen35_4b" => {
                    observed_from_artifact("metal-apple-silicon-sdpa.json")
                }
                "vulkan_strix_halo_decode_microbench" => vulkan_early.clone(),
                _ => return f.clone(),
            };
            Value::Object(qual_latency::lock::lock_fixture(fo, &observed, 0.10).unwrap())
        })
        .collect();
    o.insert("fixtures", Value::Array(fixtures));
    o.insert("status", Value::from("covered"));
    let text = qual_latency::jsonout::to_file_text(&Value::Object(o), false);
    assert_eq!(
        text.as_bytes(),
        &std::fs::read(corpus.join("manifest-covered.json")).unwrap()[..]
    );
    println!("1/1 covered manifest reproduced byte for byte");
}

/// The writer reproduces the committed current manifest byte for byte.
fn the_current_manifest_round_trips_byte_for_byte() {
    let corpus = common::corpus_dir().expect("checked by the harness");
    let bytes = std::fs::read(corpus.join("manifest-current.json")).unwrap();
    let v = qual_json::from_slice(&bytes).unwrap();
    assert_eq!(
        qual_latency::jsonout::to_file_text(&v, false).as_bytes(),
        &bytes[..]
    );
}

fn main() {
    harness::run(vec![
        Trial::new(
            "the_current_manifest_round_trips_byte_for_byte",
            the_current_manifest_round_trips_byte_for_byte,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "artifacts_agree_with_manifests_and_raw_logs",
            artifacts_agree_with_manifests_and_raw_logs,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "undeclared_lines_in_real_logs_are_dropped",
            undeclared_lines_in_real_logs_are_dropped,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "covered_thresholds_follow_from_observed_values_with_ten_percent_headroom",
            covered_thresholds_follow_from_observed_values_with_ten_percent_headroom,
        )
        .needs_corpus(corpus_present()),
        Trial::new(
            "locking_the_current_manifest_reproduces_the_covered_manifest_byte_for_byte",
            locking_the_current_manifest_reproduces_the_covered_manifest_byte_for_byte,
        )
        .needs_corpus(corpus_present()),
    ]);
}
