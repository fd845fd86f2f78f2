//! A real Vulkan device through the whole runner: `qualification/workloads/vulkan-environment-v1.json`
//! on the host's own Vulkan driver (CI installs Debian's Mesa lavapipe, a conformant Vulkan
//! implementation on the CPU, and `vulkaninfo`), and the same workload with the driver hidden.
//!
//! Needs `vulkaninfo` and a Vulkan ICD on this host (`apt-get install mesa-vulkan-drivers
//! vulkan-tools`); without them each trial is reported ignored with the reason, and under
//! `CI=true` it fails (`qual_test_fixtures::harness`): a mock cannot stand in for a driver.

use crate::common;

use qual_test_fixtures::harness::{self, Trial};

use std::path::Path;
use std::process::Command;

const WORKLOAD: &str = "qualification/workloads/vulkan-environment-v1.json";

/// What the trials need: `vulkaninfo` on a trusted path and an installed ICD.
fn vulkan_present() -> Result<(), String> {
    harness::needs_file(
        Path::new("/usr/bin/vulkaninfo"),
        "vulkaninfo (apt-get install vulkan-tools)",
    )?;
    harness::needs_dir(
        Path::new("/usr/share/vulkan/icd.d"),
        "a Vulkan driver (apt-get install mesa-vulkan-drivers)",
    )
}

fn run(root: &Path, out: &str, hide_driver: bool) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiln-qual"));
    cmd.args([
        "run",
        WORKLOAD,
        "--variant",
        "vulkan",
        "--host-id",
        "ci-host",
        "--output",
        out,
    ])
    .current_dir(root);
    if hide_driver {
        // The loader finds no driver: the "no device" path, cheaply and for real.
        cmd.env("VK_ICD_FILENAMES", "/nonexistent/icd.json");
    }
    cmd.output().unwrap()
}

fn read(root: &Path, rel: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join(rel)).unwrap()).unwrap()
}

fn the_host_vulkan_device_is_recorded_truthfully() {
    let d = common::example_checkout(&[WORKLOAD], "vulkan example");
    let root = d.path();
    let receipt = ".qualification/receipts/vulkan.json";
    let o = run(root, receipt, false);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let v = read(root, receipt);
    assert_eq!(v["qualification"]["backend"], "vulkan");
    let device = &v["environment"]["device"];
    let runtime = &v["environment"]["runtime"];
    // Every fact comes from the driver, never invented: a device type, a driver id, a
    // conformance version, a device uuid, and an architecture only where the name states one.
    let kind = runtime["vulkan_device_type"].as_str().unwrap();
    assert!(
        [
            "cpu",
            "integrated_gpu",
            "discrete_gpu",
            "virtual_gpu",
            "other"
        ]
        .contains(&kind),
        "{runtime}"
    );
    assert!(runtime["vulkan_driver_id"]
        .as_str()
        .unwrap()
        .starts_with("DRIVER_ID_"));
    assert!(runtime["vulkan_conformance_version"]
        .as_str()
        .unwrap()
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.'));
    assert!(device["device_uuid"].as_str().is_some(), "{device}");
    assert!(runtime["vulkan_memory_heaps"]
        .as_str()
        .unwrap()
        .starts_with("0: "));
    let name = device["name"].as_str().unwrap();
    if name.starts_with("llvmpipe") {
        assert_eq!(kind, "cpu");
        assert_eq!(device["architecture"], "unavailable", "{device}");
    }
    // The original validators' strict check accepts it; show names a software device.
    let check = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["receipt", "check", "--require-current-source", receipt])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let show = Command::new(env!("CARGO_BIN_EXE_kiln-qual"))
        .args(["receipt", "show", receipt])
        .current_dir(root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert_eq!(
        text.contains("a CPU implementation of Vulkan"),
        kind == "cpu",
        "{text}"
    );
}

fn a_hidden_driver_fails_the_required_device_by_name() {
    let d = common::example_checkout(&[WORKLOAD], "vulkan example");
    let root = d.path();
    let receipt = ".qualification/receipts/no-device.json";
    let o = run(root, receipt, true);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    let v = read(root, receipt);
    assert_eq!(v["qualification"]["verdict"], "failed");
    let text = v.to_string();
    assert!(text.contains("vulkan-device-probe"), "{text:.3000}");
    assert!(
        text.contains("required vulkan device was not detected"),
        "{text:.3000}"
    );
    assert_eq!(v["environment"]["device"]["name"], "unavailable");
}

/// This module's trials (run by `main.rs`).
pub fn trials() -> Vec<Trial> {
    vec![
        Trial::new(
            "the_host_vulkan_device_is_recorded_truthfully",
            the_host_vulkan_device_is_recorded_truthfully,
        )
        .needs(vulkan_present()),
        Trial::new(
            "a_hidden_driver_fails_the_required_device_by_name",
            a_hidden_driver_fails_the_required_device_by_name,
        )
        .needs(vulkan_present()),
    ]
}
