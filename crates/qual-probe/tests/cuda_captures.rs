//! The `cuda` probe's parsers on captured real output (`tests/data/cuda/<capture>/`, written
//! by `scripts/device-check import --fixtures` from a run on a real NVIDIA machine; see the
//! README there): each capture must parse to exactly what the probe recorded in that run's
//! receipt. The check itself is proven on a capture made here (marked as such, in a temporary
//! folder) that agrees, and on edits of it that must each be named.

// Tests read their own fixtures directly.
#![allow(clippy::disallowed_methods)]

use qual_probe::backend::{parse_nvcc_release, parse_nvidia_smi};
use qual_probe::cuda::{select, CudaVisibility};
use std::path::{Path, PathBuf};

/// Every disagreement between a capture's text and what its receipt recorded.
fn check_capture(dir: &Path) -> Vec<String> {
    let read = |n: &str| std::fs::read_to_string(dir.join(n));
    let expected: serde_json::Value = match read("expected.json") {
        Ok(t) => match serde_json::from_str(&t) {
            Ok(v) => v,
            Err(e) => return vec![format!("expected.json: {e}")],
        },
        Err(e) => return vec![format!("expected.json: {e}")],
    };
    let mut errs = Vec::new();
    if !expected["source"].is_string() {
        errs.push("expected.json: /source must say where the capture came from".into());
    }
    match read("nvidia-smi-query.txt").map(|t| parse_nvidia_smi(&t)) {
        Err(e) => errs.push(format!("nvidia-smi-query.txt: {e}")),
        Ok(Err(e)) => errs.push(format!("nvidia-smi-query.txt: {e}")),
        Ok(Ok(devices)) => {
            // The device check's cases set neither CUDA variable: the GPU they use.
            let position = match select(&devices, &CudaVisibility::default()) {
                Ok(s) => s.position,
                Err(e) => return vec![format!("nvidia-smi-query.txt: {e}")],
            };
            let got = devices[position].to_value().to_serde().expect("plain JSON");
            let want = &expected["device"];
            // The free memory moves between the capture and the probe's own run.
            for (k, v) in got.as_object().expect("an object") {
                if k == "memory_available_bytes" {
                    let (free, total) = (v.as_u64(), got["memory_bytes"].as_u64());
                    if !matches!((free, total), (Some(f), Some(t)) if f <= t) {
                        errs.push(format!("/device/{k}: {v} is not at most memory_bytes"));
                    }
                } else if &want[k] != v {
                    errs.push(format!(
                        "/device/{k}: parsed {v}, the receipt says {}",
                        want[k]
                    ));
                }
            }
            let driver = got["driver"].as_str().unwrap_or("").strip_prefix("NVIDIA ");
            if expected["cuda_driver"].as_str() != driver {
                errs.push(format!(
                    "/cuda_driver: parsed {driver:?}, the receipt says {}",
                    expected["cuda_driver"]
                ));
            }
        }
    }
    match read("nvcc-version.txt") {
        Ok(t) => {
            let got = parse_nvcc_release(&t);
            if expected["nvcc"].as_str() != got.as_deref() {
                errs.push(format!(
                    "/nvcc: parsed {got:?}, the receipt says {}",
                    expected["nvcc"]
                ));
            }
        }
        Err(_) if expected["nvcc"].is_null() => {}
        Err(e) => errs.push(format!("nvcc-version.txt: {e}")),
    }
    errs
}

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cuda");
    assert!(
        root.join("README.md").is_file(),
        "tests/data/cuda/README.md"
    );
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

#[test]
fn every_committed_cuda_capture_parses_to_what_its_receipt_recorded() {
    for dir in captures() {
        let errs = check_capture(&dir);
        assert!(errs.is_empty(), "{}: {errs:#?}", dir.display());
    }
}

/// A capture made here, in the layout import writes; not real output (the real ones are the
/// committed folders above), only a proof that the check agrees and disagrees when it should.
fn made_here(dir: &Path, query: &str, nvcc: Option<&str>, expected: serde_json::Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("nvidia-smi-query.txt"), query).unwrap();
    if let Some(n) = nvcc {
        std::fs::write(dir.join("nvcc-version.txt"), n).unwrap();
    }
    std::fs::write(dir.join("expected.json"), expected.to_string()).unwrap();
}

#[test]
fn the_capture_check_agrees_and_names_each_disagreement() {
    let d = tempfile::tempdir().unwrap();
    let query = "0, NVIDIA Test GPU, GPU-00000000-1111-2222-3333-444444444444, 00000000:01:00.0, 9.0, 1024, 1000, 580.1.2\n";
    let nvcc =
        "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.48\n";
    let device = serde_json::json!({
        "name": "NVIDIA Test GPU", "architecture": "sm_90", "memory_bytes": 1024u64 << 20,
        "unified_memory": false, "driver": "NVIDIA 580.1.2", "logical_index": 0,
        "device_uuid": "GPU-00000000-1111-2222-3333-444444444444",
        "pci_bus_id": "00000000:01:00.0", "compute_capability": "9.0", "compute_units": null,
        "memory_available_bytes": 999u64 << 20,
    });
    let expected = |device: serde_json::Value, nvcc: serde_json::Value| {
        serde_json::json!({"source": "made in this test", "device": device,
                           "cuda_driver": "580.1.2", "nvcc": nvcc})
    };
    let good = d.path().join("good");
    made_here(
        &good,
        query,
        Some(nvcc),
        expected(device.clone(), "release 13.0, V13.0.48".into()),
    );
    assert_eq!(check_capture(&good), Vec::<String>::new());

    let mut other = device.clone();
    other["device_uuid"] = "GPU-ffffffff-1111-2222-3333-444444444444".into();
    other["architecture"] = "sm_80".into();
    let bad = d.path().join("bad");
    made_here(
        &bad,
        query,
        Some(nvcc),
        expected(other, "release 12.6, V12.6.85".into()),
    );
    let errs = check_capture(&bad);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(errs.iter().any(|e| e.starts_with("/device/device_uuid:")));
    assert!(errs.iter().any(|e| e.starts_with("/device/architecture:")));
    assert!(errs.iter().any(|e| e.starts_with("/nvcc:")));

    let no_nvcc = d.path().join("no-nvcc");
    made_here(
        &no_nvcc,
        query,
        None,
        expected(device.clone(), "release 13.0, V13.0.48".into()),
    );
    assert_eq!(check_capture(&no_nvcc).len(), 1);
    let broken = d.path().join("broken");
    made_here(
        &broken,
        "0, NVIDIA Test GPU\n",
        None,
        expected(device, serde_json::Value::Null),
    );
    let errs = check_capture(&broken);
    assert!(errs[0].contains("has 2 fields, expected 8"), "{errs:#?}");
}
