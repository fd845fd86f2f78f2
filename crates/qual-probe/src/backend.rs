//! Backend probes: the receipt's `environment.device`, `runtime` and `compiler`, plus one
//! probe record per tool run.
//!
//! Backends: `cpu` (host CPU and memory; for machines without accelerators), `cuda`
//! (`nvidia-smi --query-gpu=...` and the GPU the cases use: [`crate::cuda`]; `nvcc --version`),
//! `rocm` (`rocminfo`, `hipcc --version`), `vulkan` (`vulkaninfo --summary` and `vulkaninfo`,
//! `glslc`/`glslangValidator`: see [`crate::vulkan`]), `metal` (`system_profiler
//! SPDisplaysDataType -json`, `sysctl -n hw.memsize`). Every backend also
//! records `rustc-version` and `cargo-version` (not required).
//!
//! Invariant: a value that a tool did not report is `unavailable` (strings) or `null`
//! (numbers), and the probe that should have produced it is recorded with status `failed` and
//! the reason; the device probe of an accelerator backend is `required`, so its failure
//! becomes an infrastructure failure in the runner. Parsers are pure functions tested on
//! captured tool output.

use std::collections::BTreeMap;
use std::time::Duration;

use qual_json::{Object, Value};

use crate::cuda::CudaVisibility;
use crate::platform::{Platform, UNAVAILABLE};
use crate::tool::{run_tool, ToolOutput, ToolStatus};

/// Default probe deadline.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// `system_profiler` deadline.
pub const SYSTEM_PROFILER_TIMEOUT: Duration = Duration::from_secs(90);
/// The `nvidia-smi` query fields, in order.
pub const NVIDIA_SMI_QUERY: &str =
    "index,name,uuid,pci.bus_id,compute_cap,memory.total,memory.free,driver_version";

/// A probe's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeStatus {
    /// The probe ran and produced its facts.
    Passed,
    /// It could not run or its output was unusable.
    Failed,
    /// It does not apply here.
    Skipped,
}

impl ProbeStatus {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeStatus::Passed => "passed",
            ProbeStatus::Failed => "failed",
            ProbeStatus::Skipped => "skipped",
        }
    }
}

/// One probe record (`{id, required, status, duration_seconds, metrics: [], details}`).
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeResult {
    /// Probe id.
    pub id: String,
    /// Whether its failure fails the run.
    pub required: bool,
    /// Outcome.
    pub status: ProbeStatus,
    /// Wall time.
    pub duration_seconds: f64,
    /// Reason or summary.
    pub details: Option<String>,
    /// The tool's command line (empty for a probe that reads host facts instead); not part of
    /// the receipt's probe record.
    pub tool: Vec<String>,
}

impl ProbeResult {
    fn from_tool(id: &str, required: bool, out: &ToolOutput) -> ProbeResult {
        ProbeResult {
            id: id.into(),
            required,
            status: if out.ok() {
                ProbeStatus::Passed
            } else {
                ProbeStatus::Failed
            },
            duration_seconds: out.duration.as_secs_f64(),
            details: (!out.ok()).then(|| out.failure()),
            tool: out.argv.clone(),
        }
    }

    fn synthetic(id: &str, required: bool, ok: Result<(), String>) -> ProbeResult {
        ProbeResult {
            id: id.into(),
            required,
            status: if ok.is_ok() {
                ProbeStatus::Passed
            } else {
                ProbeStatus::Failed
            },
            duration_seconds: 0.0,
            details: ok.err(),
            tool: Vec::new(),
        }
    }

    /// As a JSON value.
    pub fn to_value(&self) -> Value {
        let mut o = Object::new();
        o.insert("id", Value::from(self.id.as_str()));
        o.insert("required", Value::Bool(self.required));
        o.insert("status", Value::from(self.status.as_str()));
        o.insert("duration_seconds", Value::from(self.duration_seconds));
        o.insert("metrics", Value::Array(vec![]));
        o.insert(
            "details",
            self.details
                .as_deref()
                .map(Value::from)
                .unwrap_or(Value::Null),
        );
        Value::Object(o)
    }
}

/// The receipt's `environment.device`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Device name.
    pub name: String,
    /// Architecture label.
    pub architecture: String,
    /// Memory in bytes.
    pub memory_bytes: Option<u64>,
    /// Whether host and device share memory.
    pub unified_memory: bool,
    /// Driver identity.
    pub driver: String,
    /// Logical index.
    pub logical_index: Option<u64>,
    /// Device UUID.
    pub device_uuid: Option<String>,
    /// PCI bus id.
    pub pci_bus_id: Option<String>,
    /// Compute capability.
    pub compute_capability: Option<String>,
    /// Compute units.
    pub compute_units: Option<u64>,
    /// Available memory in bytes.
    pub memory_available_bytes: Option<u64>,
}

impl Device {
    /// A device nothing could be observed about.
    pub fn unavailable() -> Device {
        Device {
            name: UNAVAILABLE.into(),
            architecture: UNAVAILABLE.into(),
            memory_bytes: None,
            unified_memory: false,
            driver: UNAVAILABLE.into(),
            logical_index: None,
            device_uuid: None,
            pci_bus_id: None,
            compute_capability: None,
            compute_units: None,
            memory_available_bytes: None,
        }
    }

    /// Whether the device was identified: its name, and its architecture or (for a device
    /// whose driver states no architecture, such as lavapipe) its UUID.
    pub fn detected(&self) -> bool {
        let bad = |s: &str| s.is_empty() || s == "unknown" || s == UNAVAILABLE;
        !bad(&self.name)
            && (!bad(&self.architecture) || self.device_uuid.as_deref().is_some_and(|u| !bad(u)))
    }

    /// The receipt's device object (all eleven keys).
    pub fn to_value(&self) -> Value {
        let s = |v: &Option<String>| v.as_deref().map(Value::from).unwrap_or(Value::Null);
        let n = |v: Option<u64>| v.map(Value::from).unwrap_or(Value::Null);
        let mut o = Object::new();
        o.insert("name", Value::from(self.name.as_str()));
        o.insert("architecture", Value::from(self.architecture.as_str()));
        o.insert("memory_bytes", n(self.memory_bytes.filter(|m| *m > 0)));
        o.insert("unified_memory", Value::Bool(self.unified_memory));
        o.insert("driver", Value::from(self.driver.as_str()));
        o.insert("logical_index", n(self.logical_index));
        o.insert("device_uuid", s(&self.device_uuid));
        o.insert("pci_bus_id", s(&self.pci_bus_id));
        o.insert("compute_capability", s(&self.compute_capability));
        o.insert("compute_units", n(self.compute_units.filter(|c| *c > 0)));
        let avail = match (self.memory_available_bytes, self.memory_bytes) {
            (Some(a), Some(t)) if a <= t => Some(a),
            (Some(a), None) => Some(a),
            _ => None,
        };
        o.insert("memory_available_bytes", n(avail));
        Value::Object(o)
    }
}

/// A backend capture.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendCapture {
    /// Backend name.
    pub backend: String,
    /// The selected device.
    pub device: Device,
    /// Runtime identity (non-empty strings).
    pub runtime: BTreeMap<String, String>,
    /// Compiler identity (non-empty strings).
    pub compiler: BTreeMap<String, String>,
    /// Every probe run.
    pub probes: Vec<ProbeResult>,
    /// Capabilities that were not observable, `name: reason`.
    pub unsupported: Vec<String>,
}

/// One row of `nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits`.
pub fn parse_nvidia_smi(text: &str) -> Result<Vec<Device>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != 8 {
            return Err(format!(
                "nvidia-smi row {} has {} fields, expected 8",
                i + 1,
                f.len()
            ));
        }
        let int = |s: &str, what: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("nvidia-smi row {} has a non-integer {what}: {s:?}", i + 1))
        };
        let (major, minor) = f[4]
            .split_once('.')
            .ok_or_else(|| format!("nvidia-smi row {} has compute capability {:?}", i + 1, f[4]))?;
        let mib = 1024 * 1024;
        out.push(Device {
            name: f[1].to_string(),
            architecture: format!("sm_{major}{minor}"),
            memory_bytes: Some(int(f[5], "memory.total")? * mib),
            unified_memory: false,
            driver: format!("NVIDIA {}", f[7]),
            logical_index: Some(int(f[0], "index")?),
            device_uuid: Some(f[2].to_string()),
            pci_bus_id: Some(f[3].to_string()),
            compute_capability: Some(f[4].to_string()),
            compute_units: None,
            memory_available_bytes: Some(int(f[6], "memory.free")? * mib),
        });
    }
    if out.is_empty() {
        return Err("nvidia-smi listed no GPU".into());
    }
    Ok(out)
}

/// `nvcc --version` → `release X, VY` (the text after `Cuda compilation tools, `).
pub fn parse_nvcc_release(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.split_once("Cuda compilation tools, ")
            .map(|(_, r)| r.trim().to_string())
    })
}

/// The first GPU agent of `rocminfo`.
pub fn parse_rocminfo(text: &str) -> Result<(Device, Option<String>), String> {
    let runtime = text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Runtime Version:")
            .map(|v| v.trim().to_string())
    });
    let mut blocks: Vec<Vec<(String, String)>> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("Agent ") && !t.contains(':') {
            blocks.push(Vec::new());
            continue;
        }
        if let (Some(b), Some((k, v))) = (blocks.last_mut(), t.split_once(':')) {
            b.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let get = |b: &Vec<(String, String)>, k: &str| {
        b.iter().find(|(kk, _)| kk == k).map(|(_, v)| v.clone())
    };
    let gpu = blocks
        .iter()
        .find(|b| get(b, "Device Type").as_deref() == Some("GPU"))
        .ok_or("rocminfo listed no GPU agent")?;
    let arch = get(gpu, "Name")
        .filter(|s| !s.is_empty())
        .ok_or("GPU agent has no Name")?;
    let name = get(gpu, "Marketing Name")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| arch.clone());
    let mut d = Device::unavailable();
    d.name = name;
    d.architecture = arch;
    d.unified_memory = get(gpu, "Memory Properties").is_some_and(|v| v.contains("APU"));
    d.compute_units = get(gpu, "Compute Unit").and_then(|v| v.parse().ok());
    Ok((d, runtime))
}

/// The first `GPUn:` block of `vulkaninfo --summary` ([`crate::vulkan::parse_summary`]).
pub fn parse_vulkaninfo_summary(text: &str) -> Result<(Device, BTreeMap<String, String>), String> {
    crate::vulkan::parse_summary(text)
}

/// The first display device of `system_profiler SPDisplaysDataType -json`.
pub fn parse_system_profiler_displays(text: &str) -> Result<Device, String> {
    let v = qual_json::from_str(text)
        .map_err(|e| format!("system_profiler output is not JSON: {e}"))?;
    let first = v
        .get("SPDisplaysDataType")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .ok_or("system_profiler listed no display device")?;
    let name = first
        .get("sppci_model")
        .or_else(|| first.get("_name"))
        .and_then(Value::as_str)
        .ok_or("display device has no model")?
        .to_string();
    let arch: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut d = Device::unavailable();
    d.name = name;
    d.architecture = arch;
    d.unified_memory = true;
    d.logical_index = Some(0);
    d.compute_units = first
        .get("sppci_cores")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok());
    Ok(d)
}

fn first_line(s: &str) -> Option<String> {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// What the probes of one capture found so far.
#[derive(Default)]
struct Found {
    probes: Vec<ProbeResult>,
    compiler: BTreeMap<String, String>,
    runtime: BTreeMap<String, String>,
    unsupported: Vec<String>,
}

/// The host CPU as the device (from the platform facts).
fn cpu_device(platform: &Platform, c: &mut Found) -> Device {
    let mut d = Device::unavailable();
    let ok = match &platform.cpu_model {
        Some(m) => {
            d.name = m.clone();
            d.architecture = platform.os.architecture.clone();
            Ok(())
        }
        None => Err("cpu model name not reported by the host".to_string()),
    };
    d.memory_bytes = platform.memory_total_bytes;
    d.memory_available_bytes = platform.memory_available_bytes;
    d.unified_memory = true;
    d.compute_units = platform.logical_cpus;
    d.driver = format!("{} kernel {}", platform.os.name, platform.os.kernel);
    c.probes
        .push(ProbeResult::synthetic("cpu-device", true, ok));
    c.runtime.insert("cpu".into(), d.name.clone());
    c.runtime.insert(
        "logical_cpus".into(),
        platform
            .logical_cpus
            .map(|n| n.to_string())
            .unwrap_or_else(|| UNAVAILABLE.into()),
    );
    d
}

/// The NVIDIA GPU the cases use (`nvidia-smi`, then [`crate::cuda::select`] under the cases'
/// `cuda` visibility, recorded as the synthetic `cuda-selected-device` probe) and the CUDA
/// toolkit (`nvcc`, see [`nvcc_version`]).
fn cuda_device(c: &mut Found, cuda: &Result<CudaVisibility, String>) -> Device {
    let q = format!("--query-gpu={NVIDIA_SMI_QUERY}");
    let out = run_tool(
        &["nvidia-smi", &q, "--format=csv,noheader,nounits"],
        PROBE_TIMEOUT,
    );
    let mut probe = ProbeResult::from_tool("cuda-device-probe", true, &out);
    let mut d = Device::unavailable();
    let mut selection = None;
    if out.ok() {
        match parse_nvidia_smi(&out.stdout) {
            Ok(devs) => {
                let picked = cuda
                    .clone()
                    .and_then(|v| crate::cuda::select(&devs, &v))
                    .map(|s| {
                        d = devs[s.position].clone();
                        c.runtime
                            .insert("cuda_device_selection".into(), s.description);
                    });
                selection = Some(ProbeResult::synthetic("cuda-selected-device", true, picked));
            }
            Err(e) => {
                probe.status = ProbeStatus::Failed;
                probe.details = Some(e);
            }
        }
    }
    c.probes.push(probe);
    c.probes.extend(selection);
    let nvcc = nvcc_version();
    c.probes
        .push(ProbeResult::from_tool("nvcc-version", false, &nvcc));
    let toolkit = nvcc
        .ok()
        .then(|| parse_nvcc_release(&nvcc.stdout))
        .flatten();
    if let Some(t) = &toolkit {
        c.compiler.insert("nvcc".into(), t.clone());
    } else if nvcc.status == ToolStatus::NotFound {
        c.unsupported.push(format!(
            "cuda_toolkit: nvcc is not on PATH, in $CUDA_ROOT, $CUDA_HOME or $CUDA_PATH /bin, \
             nor {NVCC_DEFAULT}"
        ));
    } else {
        c.unsupported
            .push(format!("cuda_toolkit: nvcc {}", nvcc.failure()));
    }
    c.runtime.insert(
        "cuda_driver".into(),
        d.driver
            .strip_prefix("NVIDIA ")
            .unwrap_or(UNAVAILABLE)
            .to_string(),
    );
    c.runtime.insert(
        "cuda_toolkit".into(),
        toolkit.unwrap_or_else(|| UNAVAILABLE.into()),
    );
    c.runtime
        .insert("nvidia_smi_query".into(), NVIDIA_SMI_QUERY.into());
    d
}

/// Where a CUDA toolkit installs `nvcc` when nothing else says.
const NVCC_DEFAULT: &str = "/usr/local/cuda/bin/nvcc";

/// `nvcc --version`: the `nvcc` on `PATH`, else the first that exists of `bin/nvcc` under
/// `$CUDA_ROOT`, `$CUDA_HOME`, `$CUDA_PATH` (absolute values only) and [`NVCC_DEFAULT`]; each
/// through `qual-trusted` like every probe tool. A toolkit is often installed but not on
/// `PATH` (the default install leaves `PATH` alone).
fn nvcc_version() -> ToolOutput {
    let on_path = run_tool(&["nvcc", "--version"], PROBE_TIMEOUT);
    if on_path.status != ToolStatus::NotFound {
        return on_path;
    }
    let mut candidates: Vec<String> = ["CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .filter(|d| std::path::Path::new(d).is_absolute())
        .map(|d| format!("{}/bin/nvcc", d.trim_end_matches('/')))
        .collect();
    candidates.push(NVCC_DEFAULT.into());
    for nvcc in candidates {
        let out = run_tool(&[&nvcc, "--version"], PROBE_TIMEOUT);
        if out.status != ToolStatus::NotFound {
            return out;
        }
    }
    on_path
}

/// The first ROCm agent (`rocminfo`), HIP (`hipcc`) and the ROCm release.
fn rocm_device(platform: &Platform, c: &mut Found) -> Device {
    let out = run_tool(&["rocminfo"], PROBE_TIMEOUT);
    let mut probe = ProbeResult::from_tool("rocm-device-probe", true, &out);
    let mut d = Device::unavailable();
    let mut hsa = None;
    if out.ok() {
        match parse_rocminfo(&out.stdout) {
            Ok((dev, rt)) => {
                d = dev;
                hsa = rt;
                d.driver = format!("amdgpu kernel {}", platform.os.kernel);
            }
            Err(e) => {
                probe.status = ProbeStatus::Failed;
                probe.details = Some(e);
            }
        }
    }
    c.probes.push(probe);
    let hipcc = run_tool(&["hipcc", "--version"], PROBE_TIMEOUT);
    c.probes
        .push(ProbeResult::from_tool("hipcc-version", false, &hipcc));
    let hip = hipcc
        .ok()
        .then(|| {
            hipcc
                .stdout
                .lines()
                .find(|l| l.starts_with("HIP version"))
                .map(str::to_string)
        })
        .flatten();
    if let Some(h) = &hip {
        c.compiler.insert("hipcc".into(), h.clone());
    }
    let rocm = qual_exec::read_system_file("/opt/rocm/.info/version")
        .ok()
        .and_then(|s| first_line(&s));
    c.runtime
        .insert("rocm".into(), rocm.unwrap_or_else(|| UNAVAILABLE.into()));
    c.runtime
        .insert("hsa".into(), hsa.unwrap_or_else(|| UNAVAILABLE.into()));
    c.runtime
        .insert("hipcc".into(), hip.unwrap_or_else(|| UNAVAILABLE.into()));
    d
}

/// The first Vulkan device (`vulkaninfo --summary`) and a shader compiler.
fn vulkan_device(c: &mut Found) -> Device {
    let out = run_tool(&["vulkaninfo", "--summary"], PROBE_TIMEOUT);
    let mut probe = ProbeResult::from_tool("vulkan-device-probe", true, &out);
    let mut d = Device::unavailable();
    if out.ok() {
        match parse_vulkaninfo_summary(&out.stdout) {
            Ok((dev, rt)) => {
                d = dev;
                c.runtime.extend(rt);
            }
            Err(e) => {
                probe.status = ProbeStatus::Failed;
                probe.details = Some(e);
            }
        }
    }
    c.probes.push(probe);
    if c.runtime.is_empty() {
        c.runtime
            .insert("vulkan_instance".into(), UNAVAILABLE.into());
    }
    if d.detected() {
        vulkan_heaps(c, &mut d);
    }
    let mut shader = run_tool(&["glslc", "--version"], PROBE_TIMEOUT);
    if !shader.ok() {
        shader = run_tool(&["glslangValidator", "--version"], PROBE_TIMEOUT);
    }
    c.probes.push(ProbeResult::from_tool(
        "shader-compiler-version",
        false,
        &shader,
    ));
    if let Some(l) = shader.ok().then(|| first_line(&shader.stdout)).flatten() {
        c.compiler.insert("shader".into(), l);
    }
    d
}

/// The first Vulkan device's memory heaps (full `vulkaninfo`): the largest device-local
/// heap as `memory_bytes`, every heap in the runtime's `vulkan_memory_heaps`.
fn vulkan_heaps(c: &mut Found, d: &mut Device) {
    let out = run_tool(&["vulkaninfo"], PROBE_TIMEOUT);
    let mut probe = ProbeResult::from_tool("vulkan-memory-heaps", false, &out);
    let heaps = if out.ok() {
        crate::vulkan::parse_memory_heaps(&out.stdout).map_err(|e| {
            probe.status = ProbeStatus::Failed;
            probe.details = Some(e);
        })
    } else {
        Err(())
    };
    c.probes.push(probe);
    let text = match heaps {
        Ok(h) => {
            d.memory_bytes = h.iter().filter(|h| h.device_local).map(|h| h.size).max();
            crate::vulkan::heaps_text(&h)
        }
        Err(()) => UNAVAILABLE.into(),
    };
    c.runtime.insert("vulkan_memory_heaps".into(), text);
}

/// The Metal GPU (`system_profiler SPDisplaysDataType`).
fn metal_device(platform: &Platform, c: &mut Found) -> Device {
    let out = run_tool(
        &["system_profiler", "SPDisplaysDataType", "-json"],
        SYSTEM_PROFILER_TIMEOUT,
    );
    let mut probe = ProbeResult::from_tool("metal-device-probe", true, &out);
    let mut d = Device::unavailable();
    if out.ok() {
        match parse_system_profiler_displays(&out.stdout) {
            Ok(dev) => d = dev,
            Err(e) => {
                probe.status = ProbeStatus::Failed;
                probe.details = Some(e);
            }
        }
    }
    c.probes.push(probe);
    d.memory_bytes = platform.memory_total_bytes;
    d.driver = format!("{} {}", platform.os.name, platform.os.version);
    c.runtime.insert(
        "metal".into(),
        if d.detected() {
            d.name.clone()
        } else {
            UNAVAILABLE.into()
        },
    );
    c.runtime
        .insert("macos".into(), platform.os.version.clone());
    d
}

/// Captures the backend's identity on this host; `cuda` is how the cases choose their NVIDIA
/// GPU (see [`crate::cuda`]; an error says why they cannot, and fails `cuda-selected-device`).
pub fn capture(
    backend: &str,
    platform: &Platform,
    cuda: &Result<CudaVisibility, String>,
) -> BackendCapture {
    let mut found = Found::default();
    for (id, argv) in [
        ("rustc-version", ["rustc", "--version"]),
        ("cargo-version", ["cargo", "--version"]),
    ] {
        let out = run_tool(&argv, PROBE_TIMEOUT);
        found.probes.push(ProbeResult::from_tool(id, false, &out));
        let v = out.ok().then(|| first_line(&out.stdout)).flatten();
        found
            .compiler
            .insert(argv[0].to_string(), v.unwrap_or_else(|| UNAVAILABLE.into()));
    }
    let device = match backend {
        "cpu" => cpu_device(platform, &mut found),
        "cuda" => cuda_device(&mut found, cuda),
        "rocm" => rocm_device(platform, &mut found),
        "vulkan" => vulkan_device(&mut found),
        "metal" => metal_device(platform, &mut found),
        other => {
            found.probes.push(ProbeResult::synthetic(
                "backend-environment",
                true,
                Err(format!(
                    "backend {} has no probe",
                    qual_json::show::quote(other)
                )),
            ));
            found.runtime.insert(other.to_string(), UNAVAILABLE.into());
            Device::unavailable()
        }
    };
    let Found {
        probes,
        mut compiler,
        mut runtime,
        unsupported,
    } = found;
    for r in runtime.values_mut().chain(compiler.values_mut()) {
        if r.trim().is_empty() {
            *r = UNAVAILABLE.into();
        }
    }
    BackendCapture {
        backend: backend.to_string(),
        device,
        runtime,
        compiler,
        probes,
        unsupported,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_rows_parse_into_devices() {
        let t = "0, NVIDIA H200, GPU-2b0f5c1e-8a3f-4f11-9d6c-0f3c1a2b4c5d, 00000000:19:00.0, 9.0, 143771, 143156, 570.124.06\n";
        let d = &parse_nvidia_smi(t).unwrap()[0];
        assert_eq!(d.name, "NVIDIA H200");
        assert_eq!(d.architecture, "sm_90");
        assert_eq!(d.memory_bytes, Some(143771 * 1024 * 1024));
        assert_eq!(d.memory_available_bytes, Some(143156 * 1024 * 1024));
        assert_eq!(d.driver, "NVIDIA 570.124.06");
        assert_eq!(d.logical_index, Some(0));
        assert!(d.detected());
        assert!(parse_nvidia_smi("0, a, b\n").is_err());
        assert!(parse_nvidia_smi("").is_err());
        assert!(parse_nvidia_smi("0, N, U, P, 8.9, [N/A], 1, 1\n").is_err());
    }

    #[test]
    fn nvcc_release_is_extracted() {
        let t = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2024 NVIDIA Corporation\nBuilt on Tue_Oct_29_23:50:19_PDT_2024\nCuda compilation tools, release 12.6, V12.6.85\nBuild cuda_12.6.r12.6/compiler.35059454_0\n";
        assert_eq!(
            parse_nvcc_release(t).as_deref(),
            Some("release 12.6, V12.6.85")
        );
    }

    #[test]
    fn rocminfo_first_gpu_agent() {
        let t = "ROCk module is loaded\n=====================\nHSA System Attributes\n=====================\nRuntime Version:         1.18\n\n==========\nHSA Agents\n==========\n*******\nAgent 1\n*******\n  Name:                    AMD RYZEN AI MAX+ 395\n  Marketing Name:          AMD RYZEN AI MAX+ 395 w/ Radeon 8060S\n  Device Type:             CPU\n*******\nAgent 2\n*******\n  Name:                    gfx1151\n  Marketing Name:          AMD Radeon 8060S Graphics\n  Device Type:             GPU\n  Compute Unit:            40\n  Memory Properties:       APU\n";
        let (d, rt) = parse_rocminfo(t).unwrap();
        assert_eq!(d.architecture, "gfx1151");
        assert_eq!(d.name, "AMD Radeon 8060S Graphics");
        assert_eq!(d.compute_units, Some(40));
        assert!(d.unified_memory);
        assert_eq!(rt.as_deref(), Some("1.18"));
        assert!(parse_rocminfo("Agent 1\n  Device Type: CPU\n").is_err());
    }

    #[test]
    fn vulkaninfo_summary_first_gpu() {
        let t = "==========\nVULKANINFO\n==========\n\nVulkan Instance Version: 1.4.321\n\nDevices:\n========\nGPU0:\n\tapiVersion         = 1.4.318\n\tdriverVersion      = 26.1.3\n\tvendorID           = 0x1002\n\tdeviceID           = 0x1586\n\tdeviceType         = PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU\n\tdeviceName         = AMD Radeon 8060S Graphics (RADV STRIX_HALO)\n\tdriverID           = DRIVER_ID_MESA_RADV\n\tdriverName         = radv\n\tdriverInfo         = Mesa 26.1.3-arch1.2\nGPU1:\n\tdeviceName         = llvmpipe (LLVM 20.1.8, 256 bits)\n";
        let (d, rt) = parse_vulkaninfo_summary(t).unwrap();
        assert_eq!(d.name, "AMD Radeon 8060S Graphics (RADV STRIX_HALO)");
        assert_eq!(d.architecture, "strix_halo");
        assert!(d.unified_memory);
        assert_eq!(d.driver, "radv Mesa 26.1.3-arch1.2");
        assert_eq!(rt["vulkan_instance"], "1.4.321");
        assert_eq!(rt["vulkan_device"], "1.4.318");
        assert!(parse_vulkaninfo_summary("no gpus").is_err());
    }

    #[test]
    fn system_profiler_display_json() {
        let t = r#"{"SPDisplaysDataType":[{"_name":"Apple M1","sppci_cores":"8","sppci_model":"Apple M1","spdisplays_mtlgpufamilysupport":"spdisplays_metal3"}]}"#;
        let d = parse_system_profiler_displays(t).unwrap();
        assert_eq!(d.name, "Apple M1");
        assert_eq!(d.architecture, "apple_m1");
        assert_eq!(d.compute_units, Some(8));
        assert!(parse_system_profiler_displays(r#"{"SPDisplaysDataType":[]}"#).is_err());
    }

    #[test]
    fn cpu_capture_on_this_host_is_observed_or_failed_never_invented() {
        let p = crate::platform::probe();
        let c = capture("cpu", &p, &Ok(CudaVisibility::default()));
        let dev_probe = c.probes.iter().find(|p| p.id == "cpu-device").unwrap();
        assert!(dev_probe.required);
        assert_eq!(dev_probe.status == ProbeStatus::Passed, c.device.detected());
        let u = capture("quantum", &p, &Ok(CudaVisibility::default()));
        assert!(!u.device.detected());
        assert!(u
            .probes
            .iter()
            .any(|p| p.required && p.status == ProbeStatus::Failed));
    }
}
