//! The Vulkan device as the loader and driver report it: `vulkaninfo --summary` for the
//! device's identity, `vulkaninfo` (full) for its memory heaps.
//!
//! Owns the parsers (pure functions, tested on captured real output under `tests/data/`:
//! Mesa 22.3.6 lavapipe on Debian 12, captured on this project's development VM on
//! 2026-12-02; the RADV sample in `backend`'s tests is the device line of the original
//! implementation's Strix Halo receipts in the compatibility corpus) and the facts they give
//! the receipt, inside the v1 receipt's existing fields:
//!
//! * `environment.device`: `name`, `driver` (`driverName driverInfo`), `device_uuid`
//!   (`deviceUUID`), `memory_bytes` (the largest device-local heap), `unified_memory`
//!   (integrated GPUs and CPU implementations share the host's memory), `logical_index` 0,
//!   and `architecture` **only when the driver states one**: Mesa names a chip as
//!   `Name (DRIVER CHIP)` (`AMD Radeon 8060S Graphics (RADV STRIX_HALO)` → `strix_halo`);
//!   lavapipe's `llvmpipe (LLVM 15.0.6, 256 bits)` states an LLVM version and a vector width,
//!   not an architecture, so it is `unavailable` (the device is still identified, by its
//!   UUID: [`crate::backend::Device::detected`]).
//! * `environment.runtime`: `vulkan_instance`, `vulkan_device` (API versions),
//!   `vulkan_device_type` (`cpu`, `integrated_gpu`, `discrete_gpu`, `virtual_gpu`, `other`),
//!   `vulkan_driver_id`, `vulkan_conformance_version`, `vulkan_driver_uuid`,
//!   `vulkan_vendor_id`, `vulkan_device_id`, `vulkan_memory_heaps`.
//!
//! A `vulkan_device_type` of `cpu` (lavapipe, SwiftShader) is a CPU implementation of
//! Vulkan: its receipt establishes the Vulkan code path, never GPU performance
//! (`qual_receipt::render::software_device_note`, shown by `receipt show` and the report).

use std::collections::BTreeMap;

use crate::backend::Device;
use crate::platform::UNAVAILABLE;

/// Runtime key of the device type (`qual_receipt::render` reads it under the same name).
pub const DEVICE_TYPE_KEY: &str = "vulkan_device_type";

/// `PHYSICAL_DEVICE_TYPE_CPU` → `cpu`, …; unknown spellings → `other`.
fn device_type(raw: &str) -> &'static str {
    match raw {
        "PHYSICAL_DEVICE_TYPE_CPU" => "cpu",
        "PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU" => "integrated_gpu",
        "PHYSICAL_DEVICE_TYPE_DISCRETE_GPU" => "discrete_gpu",
        "PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU" => "virtual_gpu",
        _ => "other",
    }
}

/// Mesa drivers that name the chip after their tag: `Name (RADV NAVI21)`, `Name (NVK GA106)`.
const CHIP_NAMING_DRIVERS: [&str; 2] = ["RADV", "NVK"];

/// The architecture a device name states: the chip of a `Name (DRIVER CHIP)` suffix of a
/// driver in [`CHIP_NAMING_DRIVERS`], else `None` (other suffixes — lavapipe's LLVM version
/// and vector width, ANV's `(ADL GT2)` codename and tier — are not read as one).
pub fn stated_architecture(name: &str) -> Option<String> {
    let inner = name.strip_suffix(')')?;
    let inner = &inner[inner.rfind('(')? + 1..];
    let words: Vec<&str> = inner.split_whitespace().collect();
    match words.as_slice() {
        [driver, chip]
            if CHIP_NAMING_DRIVERS.contains(driver)
                && chip.chars().any(|c| c.is_ascii_alphabetic()) =>
        {
            Some(chip.to_ascii_lowercase())
        }
        _ => None,
    }
}

/// The first `GPUn:` block of `vulkaninfo --summary`: the device and runtime facts.
pub fn parse_summary(text: &str) -> Result<(Device, BTreeMap<String, String>), String> {
    let mut instance = None;
    let mut in_gpu = false;
    let mut fields: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("Vulkan Instance Version:") {
            instance = Some(v.trim().to_string());
        }
        if is_gpu_header(t) {
            if in_gpu {
                break;
            }
            in_gpu = true;
            continue;
        }
        if in_gpu {
            if let Some((k, v)) = t.split_once('=') {
                fields.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    let get = |k: &str| {
        fields
            .iter()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let name = get("deviceName").ok_or("vulkaninfo listed no GPU")?;
    let kind = get("deviceType").map(|t| device_type(&t));
    let mut d = Device::unavailable();
    d.architecture = stated_architecture(&name).unwrap_or_else(|| UNAVAILABLE.into());
    d.name = name;
    d.unified_memory = matches!(kind, Some("integrated_gpu" | "cpu"));
    d.logical_index = Some(0);
    d.device_uuid = get("deviceUUID");
    d.driver = match (get("driverName"), get("driverInfo")) {
        (Some(n), Some(i)) => format!("{n} {i}"),
        (Some(n), None) => n,
        _ => UNAVAILABLE.into(),
    };
    let mut runtime = BTreeMap::new();
    let mut put = |k: &str, v: Option<String>| {
        runtime.insert(k.to_string(), v.unwrap_or_else(|| UNAVAILABLE.into()));
    };
    put("vulkan_instance", instance);
    put("vulkan_device", get("apiVersion"));
    put("driver", Some(d.driver.clone()));
    put(DEVICE_TYPE_KEY, kind.map(str::to_string));
    put("vulkan_driver_id", get("driverID"));
    put("vulkan_conformance_version", get("conformanceVersion"));
    put("vulkan_driver_uuid", get("driverUUID"));
    put("vulkan_vendor_id", get("vendorID"));
    put("vulkan_device_id", get("deviceID"));
    Ok((d, runtime))
}

fn is_gpu_header(t: &str) -> bool {
    t.len() > 4
        && t.starts_with("GPU")
        && t.ends_with(':')
        && t[3..t.len() - 1].chars().all(|c| c.is_ascii_digit())
}

/// One memory heap of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heap {
    /// Size in bytes.
    pub size: u64,
    /// `MEMORY_HEAP_DEVICE_LOCAL_BIT`.
    pub device_local: bool,
}

/// The memory heaps of the first device in full `vulkaninfo` output
/// (`VkPhysicalDeviceMemoryProperties` of `GPU0`).
pub fn parse_memory_heaps(text: &str) -> Result<Vec<Heap>, String> {
    let mut lines = text
        .lines()
        .map(str::trim)
        .skip_while(|t| *t != "Device Properties and Extensions:")
        .skip_while(|t| !is_gpu_header(t));
    lines
        .next()
        .ok_or("vulkaninfo listed no device properties")?;
    let mut heaps: Vec<Heap> = Vec::new();
    let mut in_heaps = false;
    for t in lines {
        if is_gpu_header(t) || t.starts_with("memoryTypes:") {
            if in_heaps {
                break;
            }
            if is_gpu_header(t) {
                break;
            }
            continue;
        }
        if t.starts_with("memoryHeaps:") {
            in_heaps = true;
            continue;
        }
        if !in_heaps {
            continue;
        }
        if t.starts_with("memoryHeaps[") {
            heaps.push(Heap {
                size: 0,
                device_local: false,
            });
        } else if let (Some(h), Some(v)) = (heaps.last_mut(), t.strip_prefix("size")) {
            let v = v.trim_start().trim_start_matches('=').trim_start();
            h.size = v
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("vulkaninfo heap size is not a number: {v:?}"))?;
        } else if let Some(h) = heaps.last_mut() {
            if t == "MEMORY_HEAP_DEVICE_LOCAL_BIT" {
                h.device_local = true;
            }
        }
    }
    if heaps.is_empty() {
        return Err("vulkaninfo listed no memory heap for the first device".into());
    }
    Ok(heaps)
}

/// Heaps as the runtime string: `0: 2147483648 bytes device_local; 1: …`.
pub fn heaps_text(heaps: &[Heap]) -> String {
    heaps
        .iter()
        .enumerate()
        .map(|(i, h)| {
            format!(
                "{i}: {} bytes{}",
                h.size,
                if h.device_local { " device_local" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMMARY: &str = include_str!("../tests/data/vulkaninfo-summary-lavapipe-mesa-22.3.6.txt");
    const FULL: &str = include_str!("../tests/data/vulkaninfo-lavapipe-mesa-22.3.6.txt");

    #[test]
    fn lavapipe_summary_is_a_cpu_device_without_an_architecture() {
        let (d, rt) = parse_summary(SUMMARY).unwrap();
        assert_eq!(d.name, "llvmpipe (LLVM 15.0.6, 256 bits)");
        assert_eq!(
            d.architecture, UNAVAILABLE,
            "\"bits\" is not an architecture"
        );
        assert_eq!(
            d.device_uuid.as_deref(),
            Some("6d657361-3232-2e33-2e36-000000000000")
        );
        assert_eq!(d.driver, "llvmpipe Mesa 22.3.6 (LLVM 15.0.6)");
        assert!(d.unified_memory);
        assert!(d.detected(), "identified by its uuid");
        assert_eq!(rt[DEVICE_TYPE_KEY], "cpu");
        assert_eq!(rt["vulkan_driver_id"], "DRIVER_ID_MESA_LLVMPIPE");
        assert_eq!(rt["vulkan_conformance_version"], "1.3.1.1");
        assert_eq!(
            rt["vulkan_driver_uuid"],
            "6c6c766d-7069-7065-5555-494400000000"
        );
        assert_eq!(rt["vulkan_instance"], "1.3.239");
        assert_eq!(rt["vulkan_device"], "1.3.230");
        assert_eq!(rt["vulkan_vendor_id"], "0x10005");
    }

    #[test]
    fn lavapipe_heaps_from_the_full_output() {
        let heaps = parse_memory_heaps(FULL).unwrap();
        assert_eq!(
            heaps,
            vec![Heap {
                size: 2_147_483_648,
                device_local: true
            }]
        );
        assert_eq!(heaps_text(&heaps), "0: 2147483648 bytes device_local");
        assert!(parse_memory_heaps(SUMMARY).is_err());
        assert!(parse_memory_heaps("").is_err());
    }

    #[test]
    fn only_a_stated_chip_is_an_architecture() {
        assert_eq!(
            stated_architecture("AMD Radeon 8060S Graphics (RADV STRIX_HALO)").as_deref(),
            Some("strix_halo")
        );
        assert_eq!(
            stated_architecture("llvmpipe (LLVM 21.1.8, 256 bits)"),
            None
        );
        assert_eq!(stated_architecture("NVIDIA GeForce RTX 4090"), None);
        assert_eq!(stated_architecture("SwiftShader Device (Subzero)"), None);
        assert_eq!(stated_architecture("Intel(R) Graphics (RPL-S)"), None);
        assert_eq!(
            stated_architecture("Intel(R) UHD Graphics 630 (CFL GT2)"),
            None
        );
        assert_eq!(
            stated_architecture("NVIDIA GeForce RTX 3060 (NVK GA106)").as_deref(),
            Some("ga106")
        );
    }

    #[test]
    fn no_device_is_an_error_not_a_device() {
        assert!(parse_summary("==========\nVULKANINFO\n==========\n").is_err());
        assert!(parse_summary("GPU0:\n\tdeviceName =\n").is_err());
    }
}
